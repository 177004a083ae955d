//! Request/response as state machines: the client writes a request, reads
//! the whole response and times the transaction; the server reads a whole
//! request and answers it. Neither touches a socket or a clock: the worker
//! does the I/O and passes the time in.

use std::collections::VecDeque;
use std::time::Instant;

use linkperf_workload::TransactionSizes;

use super::want::{clamp, Completed, Want};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RrClientState {
    Idle,
    Sending { left: u64 },
    Receiving { left: u64 },
    Done,
}

/// The client side of a request/response exchange: write the request, read the
/// whole response, record the transaction, start the next one unless told to stop.
#[derive(Debug, Clone)]
pub struct RrClient {
    sizes: TransactionSizes,
    flow: u32,
    seq: u64,
    request: u64,
    response: u64,
    state: RrClientState,
    started: Option<Instant>,
}

impl RrClient {
    /// A flow that will send `request` bytes and expect `response` bytes back.
    pub fn new(request: u64, response: u64) -> Self {
        RrClient::with_sizes(TransactionSizes::Fixed { request, response }, 0)
    }

    /// A flow whose transaction `n` has the sizes `sizes.at(flow, n)`.
    pub fn with_sizes(sizes: TransactionSizes, flow: u32) -> Self {
        let (request, response) = sizes.at(flow, 0);
        RrClient {
            sizes,
            flow,
            seq: 0,
            request,
            response,
            state: RrClientState::Idle,
            started: None,
        }
    }

    /// Starts the first transaction at `now`.
    pub fn start(&mut self, now: Instant) {
        if self.state == RrClientState::Idle {
            self.state = RrClientState::Sending { left: self.request };
            self.started = Some(now);
        }
    }

    /// What to do next.
    pub fn want(&self) -> Want {
        match self.state {
            RrClientState::Idle => Want::Idle,
            RrClientState::Sending { left } => Want::Write(clamp(left)),
            RrClientState::Receiving { left } => Want::Read(clamp(left)),
            RrClientState::Done => Want::Done,
        }
    }

    /// True while a transaction is in flight (started, not yet answered).
    pub fn in_transaction(&self) -> bool {
        matches!(
            self.state,
            RrClientState::Sending { .. } | RrClientState::Receiving { .. }
        )
    }

    /// `n` request bytes were written.
    pub fn wrote(&mut self, n: usize) {
        if let RrClientState::Sending { left } = self.state {
            let left = left.saturating_sub(n as u64);
            self.state = if left == 0 {
                RrClientState::Receiving {
                    left: self.response,
                }
            } else {
                RrClientState::Sending { left }
            };
        }
    }

    /// `n` response bytes were read at `now`. When the response is complete the
    /// transaction is returned, and the next one starts unless `stop`.
    pub fn read(&mut self, n: usize, now: Instant, stop: bool) -> Option<Completed> {
        let RrClientState::Receiving { left } = self.state else {
            return None;
        };
        let left = left.saturating_sub(n as u64);
        if left > 0 {
            self.state = RrClientState::Receiving { left };
            return None;
        }
        let took = self
            .started
            .map(|s| now.saturating_duration_since(s))
            .unwrap_or_default();
        self.advance();
        if stop {
            self.state = RrClientState::Done;
        } else {
            self.state = RrClientState::Sending { left: self.request };
            self.started = Some(now);
        }
        Some(Completed {
            took,
            service: None,
        })
    }

    /// Moves to the next transaction number and its sizes.
    fn advance(&mut self) {
        self.seq += 1;
        (self.request, self.response) = self.sizes.at(self.flow, self.seq);
    }

    /// The transaction in flight is given up as lost at `now` (UDP): the next
    /// one starts.
    pub fn lost(&mut self, now: Instant) {
        self.advance();
        self.state = RrClientState::Sending { left: self.request };
        self.started = Some(now);
    }

    /// Number of the transaction in flight (0 for the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Abandons the flow (error or forced stop).
    pub fn finish(&mut self) {
        self.state = RrClientState::Done;
    }

    /// Restarts the transaction timer from `now` without a new transaction (used
    /// by connect-per-transaction flows to include the connect in the time).
    pub fn restart_at(&mut self, now: Instant) {
        self.state = RrClientState::Sending { left: self.request };
        self.started = Some(now);
    }

    /// When the transaction in flight started.
    pub fn started(&self) -> Option<Instant> {
        self.started
    }
}

/// The server side of request/response: read whole requests, answer each.
/// A client with several requests outstanding (an open loop's, pipelined)
/// may send them back to back: the server reads what came, as many as it
/// holds, and answers them all in one write.
#[derive(Debug, Clone)]
pub struct RrServer {
    sizes: TransactionSizes,
    flow: u32,
    /// Number of the request being read.
    seq: u64,
    /// Its size and its answer's, and how much of it is still to read.
    request: u64,
    response: u64,
    reading: u64,
    /// The answers owed, bytes left of each, oldest first (the first
    /// perhaps written in part), and their sum.
    owed: VecDeque<u64>,
    owed_bytes: u64,
    /// The client may send its next requests before their answers (an
    /// open loop with several outstanding).
    pipelined: bool,
}

impl RrServer {
    /// A flow that expects `request` bytes and answers with `response` bytes.
    pub fn new(request: u64, response: u64) -> Self {
        RrServer::with_sizes(TransactionSizes::Fixed { request, response }, 0)
    }

    /// A flow whose transaction `n` has the sizes `sizes.at(flow, n)`, as the
    /// client of flow `flow` computes them.
    pub fn with_sizes(sizes: TransactionSizes, flow: u32) -> Self {
        let (request, response) = sizes.at(flow, 0);
        // A request has a byte at least (a size of 0 would never end a
        // read).
        let request = request.max(1);
        RrServer {
            sizes,
            flow,
            seq: 0,
            request,
            response,
            reading: request,
            owed: VecDeque::new(),
            owed_bytes: 0,
            pipelined: false,
        }
    }

    /// The client may send requests before the answers to its last (an open
    /// loop with several outstanding per connection).
    pub fn pipelining(mut self, pipelined: bool) -> Self {
        self.pipelined = pipelined;
        self
    }

    /// Whether the client may send requests before their answers.
    pub fn pipelined_requests(&self) -> bool {
        self.pipelined
    }

    /// What to do next: answer what is owed, all of it at once; else read
    /// the rest of the request, or, pipelined, whatever came (requests
    /// only: a read cannot take more than the client sent).
    pub fn want(&self) -> Want {
        if self.owed_bytes > 0 {
            Want::Write(clamp(self.owed_bytes))
        } else if self.pipelined {
            Want::Read(usize::MAX)
        } else {
            Want::Read(clamp(self.reading))
        }
    }

    /// `n` request bytes were read; how many requests they completed (each
    /// owes its answer from then on).
    pub fn read(&mut self, n: usize) -> u64 {
        let mut n = n as u64;
        let mut completed = 0;
        while n > 0 {
            let k = n.min(self.reading);
            (self.reading, n) = (self.reading - k, n - k);
            if self.reading > 0 {
                break;
            }
            self.owed.push_back(self.response);
            self.owed_bytes += self.response;
            self.seq += 1;
            let (request, response) = self.sizes.at(self.flow, self.seq);
            (self.request, self.response) = (request.max(1), response);
            self.reading = self.request;
            completed += 1;
        }
        completed
    }

    /// `n` response bytes were written; how many answers (and so
    /// transactions) they completed.
    pub fn wrote(&mut self, n: usize) -> u64 {
        let mut n = (n as u64).min(self.owed_bytes);
        self.owed_bytes -= n;
        let mut completed = 0;
        while n > 0 {
            let Some(left) = self.owed.front_mut() else {
                break;
            };
            let k = n.min(*left);
            (*left, n) = (*left - k, n - k);
            if *left == 0 {
                self.owed.pop_front();
                completed += 1;
            }
        }
        completed
    }

    /// True between transactions (nothing of the next request read, no
    /// answer owed).
    pub fn between_transactions(&self) -> bool {
        self.owed_bytes == 0 && self.reading == self.request
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rr_client_cycles_request_then_response() {
        let t0 = Instant::now();
        let mut f = RrClient::new(200, 1000);
        assert_eq!(f.want(), Want::Idle);
        f.start(t0);
        assert_eq!(f.want(), Want::Write(200));
        f.wrote(150);
        assert_eq!(f.want(), Want::Write(50));
        f.wrote(50);
        assert_eq!(f.want(), Want::Read(1000));
        assert_eq!(f.read(400, t0 + Duration::from_micros(5), false), None);
        let done = f.read(600, t0 + Duration::from_micros(10), false).unwrap();
        assert_eq!(done.took, Duration::from_micros(10));
        assert_eq!(f.want(), Want::Write(200), "next transaction starts");
        f.wrote(200);
        let done = f.read(1000, t0 + Duration::from_micros(30), true).unwrap();
        assert_eq!(
            done.took,
            Duration::from_micros(20),
            "timed from the previous completion"
        );
        assert_eq!(f.want(), Want::Done);
    }

    #[test]
    fn rr_server_answers_each_request_once() {
        let mut s = RrServer::new(1, 1);
        assert!(s.between_transactions());
        assert_eq!(s.want(), Want::Read(1));
        assert_eq!(s.read(1), 1);
        assert_eq!(s.want(), Want::Write(1));
        assert_eq!(s.wrote(1), 1);
        assert!(s.between_transactions());
    }

    #[test]
    fn mixed_sizes_agree_on_both_ends() {
        let sizes: TransactionSizes = "mix:200x200*1,200x8k*3"
            .parse::<linkperf_workload::Workload>()
            .unwrap()
            .transaction_sizes()
            .unwrap();
        let t0 = Instant::now();
        let mut c = RrClient::with_sizes(sizes.clone(), 5);
        let mut s = RrServer::with_sizes(sizes, 5);
        c.start(t0);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let Want::Write(req) = c.want() else {
                panic!("client writes first")
            };
            c.wrote(req);
            assert_eq!(s.want(), Want::Read(req));
            assert_eq!(s.read(req), 1);
            let Want::Write(resp) = s.want() else {
                panic!("server answers")
            };
            assert_eq!(
                c.want(),
                Want::Read(resp),
                "client expects what the server sends"
            );
            assert_eq!(s.wrote(resp), 1);
            assert!(c.read(resp, t0, false).is_some());
            seen.insert(resp);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![200, 8192]);
    }

    /// Pipelined requests read in chunks that fall anywhere: each completed
    /// one owes its answer, all owed go in one write, and the answers count
    /// as they complete, whatever the write's boundaries.
    #[test]
    fn a_pipelined_server_answers_every_request_read_in_one_write() {
        let mut s = RrServer::new(3, 5).pipelining(true);
        assert_eq!(s.want(), Want::Read(usize::MAX), "whatever came");
        assert_eq!(s.read(2), 0);
        assert_eq!(
            s.read(8),
            3,
            "the 1st ends, the 2nd and 3rd whole, a byte of the 4th"
        );
        assert_eq!(s.want(), Want::Write(15), "three answers at once");
        assert_eq!(s.wrote(7), 1);
        assert_eq!(s.want(), Want::Write(8));
        assert_eq!(s.read(1), 0, "another byte of the 4th");
        assert_eq!(s.wrote(8), 2);
        assert!(!s.between_transactions(), "the 4th is begun");
        assert_eq!(s.read(1), 1);
        assert_eq!(s.wrote(5), 1);
        assert!(s.between_transactions());
        // Not pipelined: a read never asks past the request.
        let mut s = RrServer::new(3, 5);
        assert_eq!(s.want(), Want::Read(3));
        s.read(1);
        assert_eq!(s.want(), Want::Read(2));
    }
}
