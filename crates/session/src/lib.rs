//! linkperf's control sessions. The daemon ([`Daemon`]) accepts control
//! connections, negotiates one test per session over the wire protocol, runs
//! the server side of it and sends back its own measurements. The client
//! ([`run_test`]) drives one test against a daemon, remote or embedded.
//! With a pre-shared key ([`AuthKey`]) sessions authenticate by an HMAC
//! challenge–response ([`auth`]) before anything else happens.
//!
//! The sessions are sans-IO state machines (`proto/`: messages, what was
//! heard and the time in; what to send and what to do out) moved by shells
//! (`shell/`: the daemon and its lobby, the one event loop where control
//! connections wait for their handshake; the blocking control connection,
//! the client's drivers and the server's session thread, which a
//! connection gets only once through its handshake).
#![warn(missing_docs)]

pub mod auth;
mod error;
#[cfg(test)]
mod layout;
mod proto;
mod shell;

pub use auth::{AuthKey, KeyError};
pub use error::SessionError;
pub use proto::budget::{thousands, Budget, Cost, Limit};
pub use proto::client::address::parse_address;
pub use proto::client::delegate::delegated_deadline;
pub use proto::client::outcome::Outcome;
pub use shell::client::{
    delegate, identify, run_profile, run_test, DelegateRequest, Delegated, ProfileRequest,
    RunRequest, Target, DELEGATED_MAX_FRAME,
};
pub use shell::daemon::{
    control_descriptors, Daemon, DaemonConfig, DaemonHandle, Overrides, ServeSummary, Setting,
    Shutdown, DEFAULT_CONTROL_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_BYTES_PER_SESSION,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HANDSHAKES, DEFAULT_START_TIMEOUT,
};
