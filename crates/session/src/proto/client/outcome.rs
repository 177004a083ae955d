//! What one test produced, as the client's driver gives it back (and an
//! agent answers a delegated test with).

use std::time::SystemTime;

use linkperf_measured::{AgentIdentity, Environment, SideReport};

/// What one test produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// When it started.
    pub started: SystemTime,
    /// The client's measurements.
    pub client: SideReport,
    /// The server's own measurements.
    pub server: Option<SideReport>,
    /// The client host.
    pub client_environment: Environment,
    /// The server host, as it described itself.
    pub server_environment: Option<Environment>,
    /// True if the test was aborted before its end: by this client
    /// ([`RunRequest::cancel`](crate::RunRequest::cancel)), or by the server (shutting down), in which case
    /// [`Outcome::server_error`] says so.
    pub aborted: bool,
    /// Why the server's measurements are missing, if they are: the server
    /// stopped the test (a limit, shutting down) or went away.
    pub server_error: Option<String>,
    /// Why the test itself failed though both sides measured it (a profile's
    /// user failed without `canfail`).
    pub failure: Option<String>,
    /// The server's identity as an agent, from its `welcome`.
    pub server_agent: Option<AgentIdentity>,
}
