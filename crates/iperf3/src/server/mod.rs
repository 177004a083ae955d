//! A server stock iperf3 clients test against: `iperf3 -c` with TCP or UDP,
//! `-t`/`-n`/`-k`, `-P`, `-R`, `--bidir`, `-l`, `-w`, `-M`, `-N`, `-C`,
//! `-O`, `-b`, `--get-server-output`. Unlike iperf3's own server it serves
//! several tests at once; a test the server cannot run is refused with
//! iperf3's `ACCESS_DENIED` or `SERVER_ERROR`, so the client says why.

mod accounting;
mod config;
mod data;
mod listener;
pub mod plan;
mod registry;
#[cfg(test)]
mod results_321;
mod says;
mod session;
mod udp;

pub use config::ServerConfig;
pub use listener::{Iperf3Server, ServerHandle, Terminator};
