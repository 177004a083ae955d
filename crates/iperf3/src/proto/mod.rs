//! iperf3's control exchange as two sans-IO state machines, one for each
//! end of the control connection: the time and what was heard on it go in;
//! what to send and what to do with the data streams come out, in order.
//! Neither touches a socket or reads a clock. Their blocking shells do:
//! `run_client` (client/driver.rs) for linkperf against a stock
//! `iperf3 -s` ([`client::ClientControl`]), and a test's thread on
//! `serve --iperf3` (server/session.rs) against a stock `iperf3 -c`
//! ([`server::ServerControl`]). pair.rs runs the two against each other in
//! memory and in virtual time.

pub(crate) mod client;
#[cfg(test)]
mod pair;
pub(crate) mod server;

use std::io;
use std::time::{Duration, Instant};

use crate::WireError;

/// Why a control exchange could not go on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ControlError {
    #[error("the peer closed the control connection")]
    Closed,
    #[error("no answer on the control connection within {0:?}")]
    TimedOut(Duration),
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// An answer awaited: for how long, and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Awaited {
    pub timeout: Duration,
    pub until: Instant,
}

impl Awaited {
    pub(crate) fn new(timeout: Duration, now: Instant) -> Self {
        Awaited {
            timeout,
            until: now + timeout,
        }
    }

    /// True once the answer is late at `now`.
    pub(crate) fn late(&self, now: Instant) -> bool {
        now >= self.until
    }

    /// The error of an answer that did not come in time.
    pub(crate) fn timed_out(&self) -> ControlError {
        ControlError::TimedOut(self.timeout)
    }
}
