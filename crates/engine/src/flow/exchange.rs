//! The trait of a flow that writes and reads in turn on a stream
//! connection: a request/response flow on either side. It says what it
//! wants next ([`Want`]) and is told what went and what came, and when; the
//! worker's one executor of such flows (io/exchange.rs) does the I/O for
//! every one of them, the client's and the server's alike.

use std::time::{Duration, Instant};

use super::rr::{RrClient, RrServer};
use super::want::{Completed, Want};

/// A flow that writes and reads in turn.
pub trait Exchange {
    /// What it wants next.
    fn want(&self) -> Want;
    /// `n` bytes were written at `now`; `done` is told of each transaction
    /// they completed (several when messages go pipelined).
    fn written(&mut self, n: usize, now: Instant, done: &mut dyn FnMut(Completed));
    /// `n` bytes were read at `now`; `done` is told of each transaction
    /// they completed. With `stop`, no new transaction starts after one.
    fn arrived(&mut self, n: usize, now: Instant, stop: bool, done: &mut dyn FnMut(Completed));
    /// Whether the peer may send before this side's last message is
    /// answered (requests pipelined, several outstanding): what it read may
    /// have left more behind it, so a read follows a write however the
    /// readiness edges fell. A request/response flow of one outstanding
    /// transaction is not: its answer comes with a new edge.
    fn pipelined(&self) -> bool {
        false
    }
    /// Bytes it would read while a write of its waits for room (0: none).
    /// A pipelined flow must: the peer may be blocked writing what this
    /// side owes it, and read nothing more of this side's until it can,
    /// so each waits on the other unless one reads aside. The client reads
    /// the answers it is owed; the server the requests that came, each
    /// owing one more answer (as many as the client may have outstanding).
    fn read_aside(&self) -> usize {
        0
    }
}

/// The client: a transaction is its request written and its whole response
/// read, timed from the first byte written.
impl Exchange for RrClient {
    fn want(&self) -> Want {
        RrClient::want(self)
    }

    fn written(&mut self, n: usize, _now: Instant, _done: &mut dyn FnMut(Completed)) {
        self.wrote(n);
    }

    fn arrived(&mut self, n: usize, now: Instant, stop: bool, done: &mut dyn FnMut(Completed)) {
        if let Some(c) = self.read(n, now, stop) {
            done(c);
        }
    }
}

/// The server: a transaction is a whole request read and its response
/// written; the server does not time it (the client does).
impl Exchange for RrServer {
    fn want(&self) -> Want {
        RrServer::want(self)
    }

    fn written(&mut self, n: usize, _now: Instant, done: &mut dyn FnMut(Completed)) {
        for _ in 0..self.wrote(n) {
            done(Completed {
                took: Duration::ZERO,
                service: None,
            });
        }
    }

    fn arrived(&mut self, n: usize, _now: Instant, _stop: bool, _done: &mut dyn FnMut(Completed)) {
        self.read(n);
    }

    fn pipelined(&self) -> bool {
        self.pipelined_requests()
    }

    fn read_aside(&self) -> usize {
        if self.pipelined_requests() {
            usize::MAX
        } else {
            0
        }
    }
}
