//! Driving a stock `iperf3 -s` with linkperf's stream workloads: the control
//! protocol here, the data on linkperf's engine (every data connection greets
//! the server with the test's cookie), linkperf's measurements on the client
//! side and what iperf3 reports of its own.

mod driver;
mod report;

pub use driver::{check_spec, run_client, ClientOutcome, ClientRequest, Iperf3Target};
pub use report::RemoteReport;
