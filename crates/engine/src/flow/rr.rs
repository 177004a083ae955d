//! Request/response as state machines: the client writes a request, reads
//! the whole response and times the transaction; the server reads a whole
//! request and answers it. Neither touches a socket or a clock: the worker
//! does the I/O and passes the time in.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RrServerState {
    Receiving { left: u64 },
    Sending { left: u64 },
}

/// The server side of request/response: read a whole request, write the response.
#[derive(Debug, Clone)]
pub struct RrServer {
    sizes: TransactionSizes,
    flow: u32,
    seq: u64,
    request: u64,
    response: u64,
    state: RrServerState,
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
        RrServer {
            sizes,
            flow,
            seq: 0,
            request,
            response,
            state: RrServerState::Receiving { left: request },
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

    /// What to do next.
    pub fn want(&self) -> Want {
        match self.state {
            RrServerState::Receiving { left } => Want::Read(clamp(left)),
            RrServerState::Sending { left } => Want::Write(clamp(left)),
        }
    }

    /// `n` request bytes were read; true when the request is complete.
    pub fn read(&mut self, n: usize) -> bool {
        if let RrServerState::Receiving { left } = self.state {
            let left = left.saturating_sub(n as u64);
            if left == 0 {
                self.state = RrServerState::Sending {
                    left: self.response,
                };
                return true;
            }
            self.state = RrServerState::Receiving { left };
        }
        false
    }

    /// `n` response bytes were written; true when the response (and so the
    /// transaction) is complete.
    pub fn wrote(&mut self, n: usize) -> bool {
        if let RrServerState::Sending { left } = self.state {
            let left = left.saturating_sub(n as u64);
            if left == 0 {
                self.seq += 1;
                (self.request, self.response) = self.sizes.at(self.flow, self.seq);
                self.state = RrServerState::Receiving { left: self.request };
                return true;
            }
            self.state = RrServerState::Sending { left };
        }
        false
    }

    /// True between transactions (nothing of the next request read yet).
    pub fn between_transactions(&self) -> bool {
        self.state == RrServerState::Receiving { left: self.request }
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
        assert!(s.read(1));
        assert_eq!(s.want(), Want::Write(1));
        assert!(s.wrote(1));
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
            assert!(s.read(req));
            let Want::Write(resp) = s.want() else {
                panic!("server answers")
            };
            assert_eq!(
                c.want(),
                Want::Read(resp),
                "client expects what the server sends"
            );
            assert!(s.wrote(resp));
            assert!(c.read(resp, t0, false).is_some());
            seen.insert(resp);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![200, 8192]);
    }
}
