//! What can go wrong, as values. Messages read after "failed to …".

use std::io;

/// A message that is not iperf3's protocol.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// A state byte iperf3 does not define.
    #[error("read a control message: {0} is not an iperf3 state")]
    UnknownState(i8),
    /// A cookie of the wrong length or with bytes iperf3 never sends.
    #[error("read the cookie: {0}")]
    BadCookie(&'static str),
    /// A JSON message longer than the reader accepts.
    #[error("read a JSON message: {len} bytes announced, at most {max} accepted")]
    TooLong {
        /// The announced length.
        len: u64,
        /// The most accepted.
        max: usize,
    },
    /// A JSON message that is not the JSON expected.
    #[error("parse a JSON message: {0}")]
    Json(String),
    /// A datagram too short for the header iperf3 puts in front of it.
    #[error("read a UDP datagram: {len} bytes, the header alone is {need}")]
    ShortDatagram {
        /// Bytes received.
        len: usize,
        /// Bytes of the header.
        need: usize,
    },
}

/// The iperf3 server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TCP or UDP port could not be bound.
    #[error("listen for iperf3 clients on {addr}: {source}")]
    Bind {
        /// Where.
        addr: std::net::SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The event loop could not be set up.
    #[error("start the iperf3 listener: {0}")]
    Setup(io::Error),
}

/// A test against a stock iperf3 server did not run.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The test cannot be said in iperf3's protocol; nothing was sent.
    #[error("run {0}")]
    Unsupported(String),
    /// The server's address did not resolve.
    #[error("resolve {addr}: {why}")]
    Resolve {
        /// As given.
        addr: String,
        /// Why.
        why: String,
    },
    /// The control connection could not be opened.
    #[error("connect to the iperf3 server at {addr}: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The server is running another test (iperf3 serves one at a time).
    #[error("start the test: the iperf3 server is busy running a test (try again later)")]
    Busy,
    /// The server refused the test or failed (its SERVER_ERROR).
    #[error("run the test: the iperf3 server said: {message} (iperf3 error {i_errno}{})", errno_text(*errno))]
    ServerError {
        /// iperf3's error number.
        i_errno: i32,
        /// The system error number behind it, 0 if none.
        errno: i32,
        /// What iperf3 means by it.
        message: String,
    },
    /// The control connection broke or said something out of turn.
    #[error("talk to the iperf3 server: {0}")]
    Control(String),
    /// A message from the server was not iperf3's protocol.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// linkperf's engine failed.
    #[error(transparent)]
    Engine(#[from] linkperf_engine::EngineError),
}

fn errno_text(errno: i32) -> String {
    if errno == 0 {
        String::new()
    } else {
        format!(", {}", io::Error::from_raw_os_error(errno))
    }
}
