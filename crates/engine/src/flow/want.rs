//! What a flow says it wants from its connection, and what a finished
//! transaction reports: the words every flow and every worker share.

use std::time::Duration;

/// What a flow wants from its connection next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Write at most this many payload bytes.
    Write(usize),
    /// Read at most this many payload bytes.
    Read(usize),
    /// Nothing until started or told otherwise.
    Idle,
    /// Finished: the connection can close.
    Done,
}

/// A finished transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    /// How long it took: from its first byte written, or for an open-loop
    /// transaction from when it was due.
    pub took: Duration,
    /// An open-loop transaction's service time: from its first byte
    /// written (`took` less the time it waited to be sent).
    pub service: Option<Duration>,
}

/// A byte count as a length the socket calls take.
pub(crate) fn clamp(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
