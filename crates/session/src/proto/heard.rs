//! What one receive on the control connection came to, as the machines
//! hear it: a frame, nothing within the wait, a close, or a failure. The
//! control connection (shell/channel.rs) receives; the machines decide.

use std::io;

use linkperf_protocol::WireError;

/// What came off the control connection.
#[derive(Debug)]
pub enum Received {
    /// One frame's payload.
    Frame(Vec<u8>),
    /// Nothing within the timeout.
    Timeout,
    /// The peer closed the connection.
    Closed,
}

/// Why receiving failed.
#[derive(Debug)]
pub enum RecvError {
    /// The bytes were not a valid frame.
    Wire(WireError),
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::Wire(e) => write!(f, "{e}"),
            RecvError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// One receive on the control connection: what it got, and how a closed
/// connection closed (the channel tells a silent host from a close).
pub(crate) struct Heard {
    pub got: Result<Received, RecvError>,
    pub how: &'static str,
}
