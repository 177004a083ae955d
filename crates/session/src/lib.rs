//! linkperf's control sessions. The daemon ([`Daemon`]) accepts control
//! connections, negotiates one test per session over the wire protocol, runs
//! the server side of it and sends back its own measurements. The client
//! ([`run_test`]) drives one test against a daemon, remote or embedded.
#![warn(missing_docs)]

mod channel;
mod client;
mod daemon;
mod error;
mod sampler;
mod server;

pub use client::{run_test, Outcome, RunRequest, Target};
pub use daemon::{Daemon, DaemonConfig, DaemonHandle};
pub use error::SessionError;
