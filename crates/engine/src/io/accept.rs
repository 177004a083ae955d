//! The accepting side of a listener. Readiness is edge-triggered (the next
//! edge comes only with the next connection), so an acceptor takes every
//! connection waiting, each set up and put behind the gate before the next
//! is taken (so that the gate's bound holds while a flood is accepted).
//!
//! An accept that fails for want of a resource (the process or the host
//! out of descriptors, the kernel out of memory) leaves the connections
//! still waiting in the listener's backlog, and no new edge comes for them:
//! every acceptor keeps an [`AcceptRetry`] and takes them on its timer, once
//! descriptors are free again. Without it, users that came during a flood
//! at the descriptor limit would wait unserved for as long as no other
//! connection arrived.

use std::io;
use std::time::{Duration, Instant};

use crate::io::socket::{Conn, Listener};

/// After an accept that failed for want of a resource, when to try again.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What one accept came to.
#[derive(Debug)]
pub enum Accept {
    /// A connection.
    Conn(Conn),
    /// No connection is left waiting.
    Drained,
    /// The listener failed to take one for want of a resource (the process
    /// out of descriptors, the host out of memory): the ones left wait in
    /// the backlog, to be taken when its [`AcceptRetry`] is due.
    Stopped(io::Error),
}

/// The next connection waiting on `listener`. A connection reset or aborted
/// before it was taken is skipped: the next one is taken instead.
pub fn accept_next(listener: &Listener) -> Accept {
    loop {
        match listener.accept() {
            Ok(conn) => return Accept::Conn(conn),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Accept::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) => {}
            Err(e) => return Accept::Stopped(e),
        }
    }
}

/// When an acceptor whose last accept was [`Accept::Stopped`] tries again:
/// the connections it left in the backlog get no readiness edge of their
/// own. Time is an input: the acceptor's loop asks [`AcceptRetry::due`] at
/// each turn and sleeps no longer than [`AcceptRetry::deadline`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AcceptRetry {
    at: Option<Instant>,
    /// Accepts that stopped so, in all.
    stops: u64,
}

impl AcceptRetry {
    /// The accept stopped at `now`: try again [`ACCEPT_RETRY`] later.
    pub fn stopped(&mut self, now: Instant) {
        self.stops += 1;
        if self.at.is_none() {
            self.at = Some(now + ACCEPT_RETRY);
        }
    }

    /// Whether the acceptor should accept again at `now` (it forgets the
    /// retry: another stop arms it again).
    pub fn due(&mut self, now: Instant) -> bool {
        match self.at {
            Some(at) if now >= at => {
                self.at = None;
                true
            }
            _ => false,
        }
    }

    /// When the next retry is due, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        self.at
    }

    /// How many accepts stopped for want of a resource so far.
    pub fn stops(&self) -> u64 {
        self.stops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_accept_is_retried_once_its_time_comes_and_not_before() {
        let t0 = Instant::now();
        let mut r = AcceptRetry::default();
        assert!(!r.due(t0 + Duration::from_secs(3600)), "nothing stopped");
        assert_eq!(r.deadline(), None);
        r.stopped(t0);
        // A second stop before the retry does not push it back.
        r.stopped(t0 + Duration::from_millis(50));
        assert_eq!(r.deadline(), Some(t0 + ACCEPT_RETRY));
        assert!(!r.due(t0 + ACCEPT_RETRY - Duration::from_millis(1)));
        assert!(r.due(t0 + ACCEPT_RETRY));
        assert!(!r.due(t0 + ACCEPT_RETRY), "once");
        assert_eq!((r.deadline(), r.stops()), (None, 2));
    }
}
