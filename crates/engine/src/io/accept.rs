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
//!
//! The loop itself is written once ([`accept_all`]): every acceptor (a
//! test's and a profile's server workers, through [`accept_behind`]; the
//! engine's one acceptor, `worker::acceptor`, for the daemon's lobby and
//! the iperf3 port) says where it accepts, its retry, and what it does
//! with each connection taken ([`Accepting`]). The data acceptors' step
//! after it is one too: kept under a key of theirs, admitted behind the
//! gate (the one waiting longest closed to make room), and what the
//! connection sent with it read at once ([`Behind`]).

use std::io;
use std::time::{Duration, Instant};

use crate::io::gate::{Gate, Greeting};
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

/// An acceptor's side of the one accept loop ([`accept_all`]).
pub trait Accepting {
    /// Where it accepts (`None`: nowhere, nothing is taken).
    fn listener(&self) -> Option<&Listener>;
    /// When it takes again what a stopped accept left in the backlog.
    fn retry(&mut self) -> &mut AcceptRetry;
    /// Connection `conn` was taken at `now`: the acceptor sets it up,
    /// registers and admits it, and reads what came with it, before the
    /// next is taken (so that its bound holds while a flood is accepted).
    fn taken(&mut self, conn: Conn, now: Instant);
}

/// What one round of [`accept_all`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// No connection is left waiting (or there is no listener).
    Drained,
    /// An accept stopped for want of a resource: the retry is armed.
    Stopped,
    /// It took as many as it was allowed: more may wait, and no new edge
    /// comes for them (the acceptor takes them at its next turn).
    Full,
}

/// The one accept loop: takes the connections waiting on `a`'s listener,
/// at most `most`, each handed to [`Accepting::taken`] with the time it
/// was taken; an accept that stops for want of a resource arms `a`'s
/// retry. A system call per connection and one to find the backlog
/// empty, as any edge-triggered acceptor makes.
pub fn accept_all<A: Accepting + ?Sized>(a: &mut A, most: usize) -> Round {
    for _ in 0..most {
        let Some(listener) = a.listener() else {
            return Round::Drained;
        };
        match accept_next(listener) {
            Accept::Conn(conn) => a.taken(conn, Instant::now()),
            Accept::Drained => return Round::Drained,
            Accept::Stopped(_) => {
                a.retry().stopped(Instant::now());
                return Round::Stopped;
            }
        }
    }
    Round::Full
}

/// A data acceptor whose new connections wait behind its gate until their
/// greeting ([`accept_behind`]): what is its own is where it keeps a
/// connection (its key, its token, its registration), how it closes one,
/// and what a greeting read leads to.
pub trait Behind {
    /// What its connections say first.
    type Greeting: Greeting;
    /// Where it accepts (`None`: nowhere).
    fn listener(&self) -> Option<&Listener>;
    /// When it takes again what a stopped accept left in the backlog.
    fn retry(&mut self) -> &mut AcceptRetry;
    /// Its gate.
    fn gate(&mut self) -> &mut Gate<Self::Greeting>;
    /// Sets connection `conn` up, registers it and keeps it: the key it is
    /// kept under, or `None` if it could not be (it is dropped, closed).
    /// The gate's bound may be set here, before it is admitted.
    fn keep(&mut self, conn: Conn, now: Instant) -> Option<usize>;
    /// Closes connection `key`, behind the gate (the gate has forgotten it).
    fn close(&mut self, key: usize);
    /// Reads connection `key`'s greeting as far as it has come (through
    /// the gate, it is the acceptor's to hand on).
    fn greet(&mut self, key: usize, now: Instant);
}

/// Accepts every connection waiting on `b`'s listener behind its gate:
/// each kept under its key, admitted (closing the one waiting longest if
/// the gate is full), and its greeting read at once (it often came with
/// the connection).
pub fn accept_behind<B: Behind + ?Sized>(b: &mut B) -> Round {
    accept_all(&mut Gated(b), usize::MAX)
}

/// A [`Behind`] acceptor as the accept loop sees it.
struct Gated<'a, B: ?Sized>(&'a mut B);

impl<B: Behind + ?Sized> Accepting for Gated<'_, B> {
    fn listener(&self) -> Option<&Listener> {
        self.0.listener()
    }
    fn retry(&mut self) -> &mut AcceptRetry {
        self.0.retry()
    }
    fn taken(&mut self, conn: Conn, now: Instant) {
        let Some(key) = self.0.keep(conn, now) else {
            return;
        };
        if let Some(oldest) = self.0.gate().admit(key, now) {
            self.0.close(oldest);
        }
        self.0.greet(key, now);
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
    use crate::io::gate::Presented;
    use crate::worker::driver::Driver;
    use std::collections::HashMap;
    use std::io::Write;
    use std::net::TcpStream;

    const LISTENER: mio::Token = mio::Token(0);

    struct Helo;

    impl Greeting for Helo {
        const LEN: usize = 4;
        type Said = ();
        fn check(&self, bytes: &[u8]) -> Option<()> {
            (bytes == b"helo").then_some(())
        }
    }

    /// A data acceptor as the workers are: its connections in a map under
    /// its keys, registered, behind its gate.
    struct Acceptor {
        driver: Driver,
        listener: Option<Listener>,
        retry: AcceptRetry,
        gate: Gate<Helo>,
        waiting: HashMap<usize, Conn>,
        next: usize,
        through: Vec<Conn>,
        closed: usize,
        most: usize,
    }

    impl Behind for Acceptor {
        type Greeting = Helo;
        fn listener(&self) -> Option<&Listener> {
            self.listener.as_ref()
        }
        fn retry(&mut self) -> &mut AcceptRetry {
            &mut self.retry
        }
        fn gate(&mut self) -> &mut Gate<Helo> {
            &mut self.gate
        }
        fn keep(&mut self, mut conn: Conn, _now: Instant) -> Option<usize> {
            self.next += 1; // never the listener's token
            let r = self.driver.registry();
            r.register(
                conn.source(),
                mio::Token(self.next),
                mio::Interest::READABLE,
            )
            .ok()?;
            self.waiting.insert(self.next, conn);
            Some(self.next)
        }
        fn close(&mut self, key: usize) {
            self.closed += 1;
            self.waiting.remove(&key);
        }
        fn greet(&mut self, key: usize, _now: Instant) {
            self.most = self.most.max(self.waiting.len());
            let Some(conn) = self.waiting.get_mut(&key) else {
                return;
            };
            match self.gate.read(key, conn) {
                Presented::Waiting => {}
                Presented::Refused => self.close(key),
                Presented::Through(()) => self.through.extend(self.waiting.remove(&key)),
            }
        }
    }

    /// A flood behind the gate holds no more than its bound, the oldest
    /// closed first, and a greeting that came with its connection is read
    /// at once; one round takes every connection waiting.
    #[test]
    fn accepting_behind_the_gate_keeps_its_bound_and_reads_the_greeting_at_once() {
        let listener = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut a = Acceptor {
            driver: Driver::new(false).unwrap().0,
            listener: Some(Listener::Tcp(listener)),
            retry: AcceptRetry::default(),
            gate: Gate::new(Helo, 3, Duration::from_secs(600)),
            waiting: HashMap::new(),
            next: 0,
            through: Vec::new(),
            closed: 0,
            most: 0,
        };
        if let Some(Listener::Tcp(l)) = &mut a.listener {
            a.driver
                .registry()
                .register(l, LISTENER, mio::Interest::READABLE)
                .unwrap();
        }
        let mut events = mio::Events::with_capacity(64);
        // Turns until `done`, on the listener's and the connections' events
        // (bounded: a broken acceptor fails here rather than hanging).
        let mut turn = |a: &mut Acceptor, done: &dyn Fn(&Acceptor) -> bool| {
            for _ in 0..600 {
                if done(a) {
                    return;
                }
                a.driver
                    .wait(&mut events, Duration::from_millis(100))
                    .unwrap();
                for ev in events.iter() {
                    match ev.token() {
                        LISTENER => assert_ne!(accept_behind(a), Round::Full),
                        mio::Token(k) => a.greet(k, Instant::now()),
                    }
                }
            }
            panic!("not done in time");
        };
        let _silent: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
        turn(&mut a, &|a| a.closed + a.waiting.len() == 20);
        let mut user = TcpStream::connect(addr).unwrap();
        user.write_all(b"helo").unwrap();
        turn(&mut a, &|a| a.through.len() == 1);
        assert!(a.most <= 3, "{}", a.most);
        // 21 admitted, 3 held at most: 18 closed, the user through.
        assert_eq!((a.closed, a.waiting.len()), (18, 2));
        assert_eq!(a.retry.stops(), 0);
        // No listener: nothing is taken.
        a.listener = None;
        assert_eq!(accept_behind(&mut a), Round::Drained);
    }

    /// A round of at most `most` stops there and says more may wait.
    #[test]
    fn a_round_stops_at_its_batch_and_the_next_takes_the_rest() {
        struct Count(Listener, AcceptRetry, usize);
        impl Accepting for Count {
            fn listener(&self) -> Option<&Listener> {
                Some(&self.0)
            }
            fn retry(&mut self) -> &mut AcceptRetry {
                &mut self.1
            }
            fn taken(&mut self, _conn: Conn, _now: Instant) {
                self.2 += 1;
            }
        }
        let listener = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let _peers: Vec<TcpStream> = (0..7).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut listener = listener;
        let mut driver = Driver::new(false).unwrap().0;
        driver
            .registry()
            .register(&mut listener, LISTENER, mio::Interest::READABLE)
            .unwrap();
        let mut c = Count(Listener::Tcp(listener), AcceptRetry::default(), 0);
        let mut events = mio::Events::with_capacity(8);
        // Bounded: a broken loop fails here rather than hanging.
        for _ in 0..600 {
            let before = c.2;
            let round = accept_all(&mut c, 5);
            let took = c.2 - before;
            assert!(took <= 5);
            // A round that took its batch says so; one that took less
            // found the backlog empty.
            assert_eq!(round == Round::Full, took == 5, "{round:?} {took}");
            if c.2 == 7 {
                break;
            }
            if round != Round::Full {
                driver
                    .wait(&mut events, Duration::from_millis(100))
                    .unwrap();
            }
        }
        assert_eq!(c.2, 7);
        assert_eq!(accept_all(&mut c, 5), Round::Drained);
    }

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
