//! The gate every data acceptor shares (a test's server workers, a
//! profile's, and the iperf3 port's acceptor): an accepted connection must
//! present its greeting (linkperf's preamble carrying the session's token,
//! iperf3's cookie) before it is anyone's. Anyone may open a
//! connection to a data port, so the connections still waiting are bounded
//! (the oldest waiting is closed to make room: a real user's preamble comes
//! with its connection) and each waits at most a timeout.
//!
//! The gate holds no socket: the acceptor keeps its connections under its
//! own keys and hands the gate the socket to read from. So a connection
//! stays registered under one token from its accept to its close.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::time::{Duration, Instant};

use linkperf_protocol::{DataToken, Preamble, PREAMBLE_LEN};

/// The longest greeting a gate reads.
pub const MAX_GREETING: usize = 64;

/// What a connection must say first, and what a whole one says.
pub trait Greeting {
    /// Its length in bytes, at most [`MAX_GREETING`].
    const LEN: usize;
    /// What a whole greeting says.
    type Said;
    /// A whole greeting's bytes: what it says, or `None` if it is refused.
    fn check(&self, bytes: &[u8]) -> Option<Self::Said>;
}

/// linkperf's data preamble, carrying the session's token.
#[derive(Debug, Clone, Copy)]
pub struct SessionPreamble(pub DataToken);

impl Greeting for SessionPreamble {
    const LEN: usize = PREAMBLE_LEN;
    type Said = Preamble;
    fn check(&self, bytes: &[u8]) -> Option<Preamble> {
        let bytes: &[u8; PREAMBLE_LEN] = bytes.try_into().ok()?;
        Preamble::decode(bytes).ok().filter(|p| p.token == self.0)
    }
}

/// Room a worker keeps, beyond its own flows, for connections that have not
/// yet sent their preamble (anyone may open one to a data port).
pub(crate) const PREAMBLE_SLACK: usize = 64;

/// How many accepted data connections may wait for their preamble at once
/// on a worker that carries `expected` flows, `open` of them connected now:
/// the flows not connected (each may be on its way) plus
/// [`PREAMBLE_SLACK`]. Past it, the one that waited longest is closed for
/// each new one. So a worker holds, connected and waiting, at most its
/// flows plus 64, whatever else connects to its port; a flood cannot make
/// it hold more descriptors than its budget charged. The workload server
/// follows its connected flows (its gate's cap is set again at each
/// accept); a profile's worker keeps the cap of none connected.
pub(crate) fn preamble_cap(expected: usize, open: usize) -> usize {
    expected.saturating_sub(open).saturating_add(PREAMBLE_SLACK)
}

/// What a test's server side, over its `workers` workers, holds beyond its
/// connections at most: connections waiting for their preamble, 64 a
/// worker (see the gate's cap, `preamble_cap`). The daemon's budget
/// charges these descriptors beside the connections themselves.
pub fn waiting_beyond(workers: u64) -> u64 {
    workers.max(1).saturating_mul(PREAMBLE_SLACK as u64)
}

/// A gate for linkperf's data connections.
pub type PreambleGate = Gate<SessionPreamble>;

/// What reading a waiting connection's greeting came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Presented<T> {
    /// Not all of it yet: the connection still waits.
    Waiting,
    /// The connection is not one that may pass (closed by its peer,
    /// failed, junk, another token): the caller closes it.
    Refused,
    /// The greeting and what it says: the connection is through the gate.
    Through(T),
}

struct Waiting {
    buf: [u8; MAX_GREETING],
    got: usize,
    deadline: Instant,
}

/// Connections waiting for their greeting, by the acceptor's key.
pub struct Gate<G> {
    greeting: G,
    timeout: Duration,
    cap: usize,
    waiting: HashMap<usize, Waiting>,
    /// (deadline, key) in the order they came, some stale (their
    /// connection went through or was closed since; a key may have been
    /// reused), kept at most about twice as long as `waiting`.
    order: VecDeque<(Instant, usize)>,
}

impl<G: Greeting> Gate<G> {
    const FITS: () = assert!(
        G::LEN <= MAX_GREETING,
        "a greeting longer than MAX_GREETING"
    );

    /// A gate for connections that greet so, at most `cap` waiting, each at
    /// most `timeout`.
    pub fn new(greeting: G, cap: usize, timeout: Duration) -> Self {
        let () = Self::FITS;
        Gate {
            greeting,
            timeout,
            cap: cap.max(1),
            waiting: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// At most `cap` waiting from now on (those already waiting stay; the
    /// next admissions make room).
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
    }

    /// Connection `key` was accepted at `now`. Returns the key of the one
    /// that waited longest if the gate was full: the caller closes it (the
    /// gate has forgotten it).
    pub fn admit(&mut self, key: usize, now: Instant) -> Option<usize> {
        let evicted = if self.waiting.len() >= self.cap {
            self.oldest()
        } else {
            None
        };
        let deadline = now + self.timeout;
        self.waiting.insert(
            key,
            Waiting {
                buf: [0; MAX_GREETING],
                got: 0,
                deadline,
            },
        );
        self.order.push_back((deadline, key));
        self.compact();
        evicted
    }

    /// Reads connection `key`'s greeting from `socket` as far as it has
    /// come. A connection refused or through the gate is forgotten.
    pub fn read(&mut self, key: usize, socket: &mut impl Read) -> Presented<G::Said> {
        let Some(w) = self.waiting.get_mut(&key) else {
            return Presented::Refused;
        };
        while w.got < G::LEN {
            match socket.read(&mut w.buf[w.got..G::LEN]) {
                Ok(0) => return self.refuse(key),
                Ok(n) => w.got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Presented::Waiting,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.refuse(key),
            }
        }
        let said = self.greeting.check(&w.buf[..G::LEN]);
        self.waiting.remove(&key);
        match said {
            Some(s) => Presented::Through(s),
            None => Presented::Refused,
        }
    }

    fn refuse(&mut self, key: usize) -> Presented<G::Said> {
        self.waiting.remove(&key);
        Presented::Refused
    }

    /// The caller closed connection `key`.
    pub fn forget(&mut self, key: usize) {
        self.waiting.remove(&key);
    }

    /// A connection whose time ran out by `now`, forgotten: the caller
    /// closes it. Call until `None`.
    pub fn expired(&mut self, now: Instant) -> Option<usize> {
        while let Some(&(deadline, key)) = self.order.front() {
            if deadline > now {
                return None;
            }
            self.order.pop_front();
            if self.is_current(deadline, key) {
                self.waiting.remove(&key);
                return Some(key);
            }
        }
        None
    }

    /// When the next connection's time may run out (an early answer is
    /// possible: the entry may be stale).
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.waiting.is_empty() {
            return None;
        }
        self.order.front().map(|&(d, _)| d)
    }

    /// The connection waiting longest, forgotten.
    fn oldest(&mut self) -> Option<usize> {
        while let Some((deadline, key)) = self.order.pop_front() {
            if self.is_current(deadline, key) {
                self.waiting.remove(&key);
                return Some(key);
            }
        }
        None
    }

    /// Whether `(deadline, key)` names a connection that still waits (and
    /// not a later one under a reused key).
    fn is_current(&self, deadline: Instant, key: usize) -> bool {
        self.waiting
            .get(&key)
            .is_some_and(|w| w.deadline == deadline)
    }

    /// Drops stale entries once they outnumber the waiting connections:
    /// a busy acceptor (a connection per transaction) keeps no more than
    /// what waits now.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.waiting.len() + 64 {
            let waiting = &self.waiting;
            self.order
                .retain(|&(d, k)| waiting.get(&k).is_some_and(|w| w.deadline == d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that has `chunks` to give, then would block (or is at its
    /// end, if `eof`).
    struct Arriving {
        chunks: VecDeque<Vec<u8>>,
        eof: bool,
    }

    impl Arriving {
        fn new(chunks: &[&[u8]], eof: bool) -> Self {
            Arriving {
                chunks: chunks.iter().map(|c| c.to_vec()).collect(),
                eof,
            }
        }
    }

    impl Read for Arriving {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(mut c) = self.chunks.pop_front() else {
                return if self.eof {
                    Ok(0)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            };
            let n = c.len().min(buf.len());
            buf[..n].copy_from_slice(&c[..n]);
            if n < c.len() {
                self.chunks.push_front(c.split_off(n));
            }
            Ok(n)
        }
    }

    fn token() -> DataToken {
        DataToken([7; 16])
    }

    fn preamble(token: DataToken, flow: u32) -> [u8; PREAMBLE_LEN] {
        Preamble {
            token,
            flow,
            seq: 0,
        }
        .encode()
    }

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_preamble_in_parts_passes_once_whole() {
        let mut gate = PreambleGate::new(SessionPreamble(token()), 8, T);
        let now = Instant::now();
        assert_eq!(gate.admit(3, now), None);
        let p = preamble(token(), 41);
        let mut sock = Arriving::new(&[&p[..5]], false);
        assert_eq!(gate.read(3, &mut sock), Presented::Waiting);
        assert!(gate.waiting.contains_key(&3));
        let mut sock = Arriving::new(&[&p[5..20], &p[20..]], false);
        match gate.read(3, &mut sock) {
            Presented::Through(got) => assert_eq!(got.flow, 41),
            other => panic!("{other:?}"),
        }
        assert!(!gate.waiting.contains_key(&3));
        assert_eq!(gate.waiting.len(), 0);
        // Through the gate, it is not expired later.
        assert_eq!(gate.expired(now + 2 * T), None);
    }

    #[test]
    fn another_token_junk_and_an_early_end_are_refused() {
        let mut gate = PreambleGate::new(SessionPreamble(token()), 8, T);
        let now = Instant::now();
        for k in 0..3 {
            gate.admit(k, now);
        }
        let theirs = preamble(DataToken([9; 16]), 0);
        assert_eq!(
            gate.read(0, &mut Arriving::new(&[&theirs], false)),
            Presented::Refused
        );
        let junk = [0xffu8; PREAMBLE_LEN];
        assert_eq!(
            gate.read(1, &mut Arriving::new(&[&junk], false)),
            Presented::Refused
        );
        let part = preamble(token(), 0);
        assert_eq!(
            gate.read(2, &mut Arriving::new(&[&part[..10]], true)),
            Presented::Refused
        );
        assert_eq!(gate.waiting.len(), 0);
        // A key it does not hold is refused too.
        assert_eq!(
            gate.read(5, &mut Arriving::new(&[&part], false)),
            Presented::Refused
        );
    }

    #[test]
    fn a_full_gate_pushes_out_the_one_waiting_longest() {
        let mut gate = PreambleGate::new(SessionPreamble(token()), 2, T);
        let t0 = Instant::now();
        assert_eq!(gate.admit(10, t0), None);
        assert_eq!(gate.admit(11, t0 + Duration::from_millis(1)), None);
        // 10 went through: 11 is now the oldest waiting.
        let p = preamble(token(), 1);
        assert!(matches!(
            gate.read(10, &mut Arriving::new(&[&p], false)),
            Presented::Through(_)
        ));
        assert_eq!(gate.admit(12, t0 + Duration::from_millis(2)), None);
        assert_eq!(gate.admit(13, t0 + Duration::from_millis(3)), Some(11));
        assert_eq!(gate.waiting.len(), 2);
        assert!(gate.waiting.contains_key(&12) && gate.waiting.contains_key(&13));
    }

    #[test]
    fn time_runs_out_in_arrival_order_and_a_reused_key_keeps_its_own_deadline() {
        let mut gate = PreambleGate::new(SessionPreamble(token()), 8, T);
        let t0 = Instant::now();
        gate.admit(1, t0);
        gate.admit(2, t0 + Duration::from_secs(1));
        // 1 is closed by its acceptor and its key reused later.
        gate.forget(1);
        gate.admit(1, t0 + Duration::from_secs(3));
        assert_eq!(gate.next_deadline(), Some(t0 + T));
        assert_eq!(gate.expired(t0 + T), None, "1's first deadline is stale");
        assert_eq!(gate.expired(t0 + T + Duration::from_secs(1)), Some(2));
        assert_eq!(gate.expired(t0 + T + Duration::from_secs(1)), None);
        assert_eq!(gate.expired(t0 + T + Duration::from_secs(3)), Some(1));
        assert_eq!(gate.next_deadline(), None);
    }

    #[test]
    fn a_worker_holds_at_most_its_flows_and_the_slack_connected_or_waiting() {
        for (expected, open) in [(300usize, 0usize), (300, 299), (300, 300), (0, 0), (5, 9)] {
            let cap = preamble_cap(expected, open);
            assert!(
                open.min(expected) + cap <= expected + PREAMBLE_SLACK,
                "{expected} {open}"
            );
            assert!(cap >= PREAMBLE_SLACK);
        }
        assert_eq!(waiting_beyond(16), 16 * 64);
        assert_eq!(waiting_beyond(0), 64);
        // A full gate made smaller evicts on the next admission.
        let mut gate = PreambleGate::new(SessionPreamble(token()), 4, T);
        let now = Instant::now();
        for k in 0..4 {
            assert_eq!(gate.admit(k, now), None);
        }
        gate.set_cap(2);
        assert_eq!(gate.admit(4, now), Some(0));
    }

    #[test]
    fn a_connection_per_transaction_keeps_the_gate_small() {
        let mut gate = PreambleGate::new(SessionPreamble(token()), 8, T);
        let now = Instant::now();
        let p = preamble(token(), 0);
        for k in 0..100_000 {
            gate.admit(k % 3, now);
            assert!(matches!(
                gate.read(k % 3, &mut Arriving::new(&[&p], false)),
                Presented::Through(_)
            ));
        }
        assert!(gate.order.len() <= 64 + 1, "{}", gate.order.len());
    }
}
