//! Driving a stock `iperf3 -s` with linkperf's stream workloads: the control
//! protocol's state machine in proto/client.rs and its blocking shell here
//! (driver.rs, with the looks at what the server has taken in in
//! delivery.rs), the data on linkperf's engine (every data connection greets
//! the server with the test's cookie), linkperf's measurements on the client
//! side and what iperf3 reports of its own.

mod delivery;
mod driver;
mod remote;
mod request;

pub use driver::run_client;
pub use remote::RemoteReport;
pub use request::{check_spec, ClientOutcome, ClientRequest, Iperf3Target};
