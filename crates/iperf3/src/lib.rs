//! iperf3 on the wire. linkperf speaks iperf3's control protocol (as iperf3
//! 3.12 speaks it, and as newer 3.x clients do with their extra keys) in both
//! directions:
//!
//! - [`server`]: a server that stock `iperf3 -c` clients test against, beside
//!   linkperf's own daemon (`linkperf serve --iperf3`), several tests at once;
//! - [`client`]: a driver that runs linkperf's stream workloads against a
//!   stock `iperf3 -s`, with linkperf's engine carrying the data
//!   (`linkperf run --iperf3-server`).
//!
//! [`codec`] only parses and emits bytes: the one-byte states, the 37-byte
//! cookie, the length-prefixed JSON and its parameter and result messages, the
//! UDP datagram header. `proto` holds each end's control exchange as a state
//! machine with no socket and no clock; the client's and the server's
//! modules are their shells. The protocol notes are in `docs/iperf3.md`.
#![warn(missing_docs)]

pub mod client;
pub mod codec;
#[cfg(test)]
mod codec_properties;
mod control;
mod error;
mod proto;
pub mod server;
mod sys;

pub use client::{
    check_spec, run_client, ClientOutcome, ClientRequest, Iperf3Target, RemoteReport,
};
pub use error::{ClientError, ServerError, WireError};
pub use server::{Iperf3Server, ServerConfig, ServerHandle};

/// The port iperf3 listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5201;
