//! linkperf's control sessions. The daemon ([`Daemon`]) accepts control
//! connections, negotiates one test per session over the wire protocol, runs
//! the server side of it and sends back its own measurements. The client
//! ([`run_test`]) drives one test against a daemon, remote or embedded.
//! With a pre-shared key ([`AuthKey`]) sessions authenticate by an HMAC
//! challenge–response ([`auth`]) before anything else happens.
#![warn(missing_docs)]

pub mod auth;
mod budget;
mod channel;
mod client;
mod daemon;
mod error;
mod handshake;
#[cfg(test)]
mod pair;
mod server;

pub use auth::{AuthKey, KeyError};
pub use budget::{thousands, Budget, Cost, Limit};
pub use client::{
    delegate, delegated_deadline, identify, parse_address, run_profile, run_test, DelegateRequest,
    Delegated, Outcome, ProfileRequest, RunRequest, Target, DELEGATED_MAX_FRAME,
};
pub use daemon::{
    control_descriptors, Daemon, DaemonConfig, DaemonHandle, Overrides, ServeSummary, Setting,
    Shutdown, DEFAULT_CONTROL_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_BYTES_PER_SESSION,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HANDSHAKES, DEFAULT_START_TIMEOUT,
};
pub use error::SessionError;
