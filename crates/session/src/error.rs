use thiserror::Error;

/// Why a session failed.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The control connection could not be made or broke.
    #[error("reach the linkperf server at {addr}: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server's address cannot be one.
    #[error("'{address}' is not a server address: {why}")]
    Address {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        why: String,
    },
    /// What answers at the server's address is not a linkperf server.
    #[error("reach a linkperf server at {addr}: {what}")]
    NotLinkperf {
        /// Where.
        addr: String,
        /// What answered instead.
        what: String,
        /// Whether it speaks iperf3 (the front end says how to test
        /// against an iperf3 server).
        iperf3: bool,
    },
    /// The control connection broke or timed out.
    #[error("talk to the server: {0}")]
    Control(String),
    /// The server answered with an error.
    #[error("run the test: the server refused: {message} ({code})")]
    Refused {
        /// The server's error code.
        code: String,
        /// The server's words.
        message: String,
        /// The limit the request met, when it was one.
        limit: Option<linkperf_protocol::LimitInfo>,
    },
    /// The server requires a key and this client has none.
    #[error(
        "run the test: the server requires authentication and this client holds no key: \
         give it the server's pre-shared key"
    )]
    AuthRequired,
    /// The server refused this client's answer to its challenge.
    #[error(
        "run the test: authentication failed: the server does not accept this client's key \
         (it must be the same key as the server's)"
    )]
    AuthFailed,
    /// Placement `same` (the sides share CPUs) against a server on another
    /// host (another kernel boot): refused before any data flows.
    #[error(
        "placement `same` shares CPUs between client and server, but the server runs on \
         another host ({server_host}): use placement `split` (each side takes its own host's \
         CPUs) or `free`"
    )]
    SameOnTwoHosts {
        /// The server's host name.
        server_host: String,
    },
    /// A client holding a key met a server that did not prove it holds the
    /// same key: nothing more was sent to it.
    #[error(
        "run the test: the server at {addr} did not prove it holds this client's key ({why}); \
         nothing more was sent to it"
    )]
    ServerNotProven {
        /// Where.
        addr: String,
        /// What the server's welcome showed.
        why: String,
    },
    /// A wire-level problem (version mismatch, malformed message).
    #[error("understand the server: {0}")]
    Wire(#[from] linkperf_protocol::WireError),
    /// The engine could not run.
    #[error("{0}")]
    Engine(#[from] linkperf_engine::EngineError),
    /// The test is invalid.
    #[error("{0}")]
    Invalid(String),
    /// Binding the daemon failed.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// Where.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}
