//! The one acceptor: an event loop of its own where new TCP connections
//! wait until they are someone's (the daemon's lobby, where control
//! connections make their handshake; the iperf3 port, where each presents
//! its cookie). Besides the workers' (spawn.rs), the only event loop made.
//!
//! It owns what every such loop does alike: the event wait and the
//! listener's registration, the accept loop (`io::accept_all`, a batch a
//! turn, and its retry after an accept stopped for want of a resource),
//! the keys its connections are registered under (never the waker's),
//! their map, the expiry of those whose time ran out, the wait until the
//! next deadline, and the stop (a flag and the waker, [`Stop`], which a
//! shutdown handle keeps). What stays the caller's ([`Admission`]) is its
//! own: a new connection's admission (a bounded table or gate, pushing out
//! whom it must), moving a connection on when it is ready (reading its
//! greeting or handshake, writing what it is owed), its deadlines, and
//! handing it over or closing it; and what it tells those still waiting
//! when the loop stops.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Registry, Token, Waker};

use crate::io::{accept_all, AcceptRetry, Accepting, Conn, Listener, Round};
use crate::worker::driver::{self, Driver, Flows, Turn, WAKER};
use crate::worker::wake::WAKE;

/// The listener's token.
const LISTENER: Token = Token(0);
/// The first key a connection is registered under.
const FIRST_KEY: usize = 1;
/// Most connections accepted in one turn before the others' bytes are read
/// (the rest are taken at the next turn, without waiting).
pub const ACCEPT_BATCH: usize = 64;
/// Longest sleep with nothing due (a stop wakes the loop at once).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Events taken in one wait.
const EVENTS: usize = 1024;

/// A connection an acceptor holds: what it keeps of it, its socket among it.
pub trait Held {
    /// Its socket, registered under its key.
    fn stream(&mut self) -> &mut TcpStream;
}

/// What the caller of an [`Acceptor`] decides: what its connections are
/// and what becomes of them. Each method is given the connections held
/// ([`Conns`]) to look at, keep, close or hand over.
pub trait Admission {
    /// A connection as the caller keeps it.
    type Conn: Held;

    /// A connection from `peer`, taken at `now` and registered (readable)
    /// under `key`: the caller makes it its own and keeps it
    /// ([`Conns::insert`]), or drops it (closed). Its admission may push
    /// others out ([`Conns::close`]); what came with it is usually read at
    /// once.
    fn admit(
        &mut self,
        conns: &mut Conns<'_, Self::Conn>,
        key: usize,
        stream: TcpStream,
        peer: SocketAddr,
        now: Instant,
    );

    /// Connection `key` is ready (readable or writable) at `now`: moved on
    /// as far as it goes without blocking.
    fn progress(&mut self, conns: &mut Conns<'_, Self::Conn>, key: usize, now: Instant);

    /// A connection whose deadline passed by `now` (taken off the caller's
    /// deadlines); call until `None`.
    fn due(&mut self, now: Instant) -> Option<usize>;

    /// Connection `key`'s deadline passed at `now`.
    fn expire(&mut self, conns: &mut Conns<'_, Self::Conn>, key: usize, now: Instant);

    /// When the next of its deadlines is (an early answer only costs a
    /// turn).
    fn next_deadline(&self) -> Option<Instant>;

    /// The start of every turn, at `now`, before the deadlines: for what
    /// the caller keeps beside its connections (a log's budget).
    fn turn(&mut self, now: Instant) {
        let _ = now;
    }

    /// Whether the loop should stop, beside its [`Stop`] (a flag the
    /// caller shares with others).
    fn stopping(&self) -> bool {
        false
    }

    /// The loop stops: the connections still held are the caller's to
    /// tell; all are closed when this returns.
    fn stop(&mut self, conns: &mut Conns<'_, Self::Conn>) {
        let _ = conns;
    }
}

/// The connections an acceptor holds, each registered under its key.
pub struct Conns<'a, C> {
    map: &'a mut HashMap<usize, C>,
    registry: &'a Registry,
}

impl<C: Held> Conns<'_, C> {
    /// Keeps connection `key` (as [`Admission::admit`] was given it).
    pub fn insert(&mut self, key: usize, conn: C) {
        self.map.insert(key, conn);
    }

    /// Connection `key`.
    pub fn get(&self, key: usize) -> Option<&C> {
        self.map.get(&key)
    }

    /// Connection `key`, to change.
    pub fn get_mut(&mut self, key: usize) -> Option<&mut C> {
        self.map.get_mut(&key)
    }

    /// Whether connection `key` is held.
    pub fn contains(&self, key: usize) -> bool {
        self.map.contains_key(&key)
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Connection `key`, no longer held nor registered (handed over).
    pub fn remove(&mut self, key: usize) -> Option<C> {
        let mut conn = self.map.remove(&key)?;
        let _ = self.registry.deregister(conn.stream());
        Some(conn)
    }

    /// Closes connection `key`.
    pub fn close(&mut self, key: usize) {
        drop(self.remove(key));
    }

    /// Connection `key` waits to write too (a write would have blocked):
    /// its events come when it is writable as well as readable. An error
    /// is the registry's (the caller closes it).
    pub fn want_writes(&mut self, key: usize) -> io::Result<()> {
        let conn = self.map.get_mut(&key).ok_or(io::ErrorKind::NotFound)?;
        let both = Interest::READABLE | Interest::WRITABLE;
        self.registry.reregister(conn.stream(), Token(key), both)
    }

    /// Every connection held, no longer held (the loop stops: they are
    /// closed once dropped).
    pub fn drain(&mut self) -> impl Iterator<Item = (usize, C)> + '_ {
        self.map.drain()
    }
}

/// Stops an [`Acceptor`]'s loop from another thread: sets its flag and
/// wakes its wait, so that it sees it at once.
#[derive(Debug, Clone)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl Stop {
    /// Stops the loop (its caller is told, [`Admission::stop`]).
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }
}

/// A listener and the event loop that will accept on it.
pub struct Acceptor {
    driver: Driver,
    listener: Listener,
    addr: SocketAddr,
    stopped: Arc<AtomicBool>,
}

impl Acceptor {
    /// The event loop for `listener` (not blocking), registered with it,
    /// and what stops it.
    pub fn new(mut listener: TcpListener) -> io::Result<(Acceptor, Stop)> {
        let addr = listener.local_addr()?;
        let (driver, waker) = Driver::new(false)?;
        driver
            .registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let stopped = Arc::new(AtomicBool::new(false));
        let stop = Stop {
            flag: stopped.clone(),
            waker,
        };
        let acceptor = Acceptor {
            driver,
            listener: Listener::Tcp(listener),
            addr,
            stopped,
        };
        Ok((acceptor, stop))
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accepts and turns the connections with `admission` until stopped
    /// ([`Stop::stop`] or [`Admission::stopping`]). An error is the event
    /// wait's.
    pub fn run<A: Admission>(self, admission: &mut A) -> io::Result<()> {
        let mut turning = Turning {
            driver: self.driver,
            listener: self.listener,
            stopped: self.stopped,
            admission,
            conns: HashMap::new(),
            next_key: FIRST_KEY,
            more: false,
            retry: AcceptRetry::default(),
        };
        driver::run(&mut turning, &mut Events::with_capacity(EVENTS))
    }
}

/// An acceptor's loop, turning.
struct Turning<'a, A: Admission> {
    driver: Driver,
    listener: Listener,
    stopped: Arc<AtomicBool>,
    admission: &'a mut A,
    conns: HashMap<usize, A::Conn>,
    next_key: usize,
    /// The last round stopped at its batch: accept more next turn.
    more: bool,
    retry: AcceptRetry,
}

impl<A: Admission> Turning<'_, A> {
    /// A key no connection holds, nor the listener, the waker or the timer.
    fn new_key(&mut self) -> usize {
        loop {
            let key = self.next_key;
            self.next_key = key.wrapping_add(1).max(FIRST_KEY);
            if key != WAKER.0 && key != WAKE.0 && !self.conns.contains_key(&key) {
                return key;
            }
        }
    }

    fn accept(&mut self) {
        self.more = accept_all(self, ACCEPT_BATCH) == Round::Full;
    }
}

impl<A: Admission> Accepting for Turning<'_, A> {
    fn listener(&self) -> Option<&Listener> {
        Some(&self.listener)
    }

    fn retry(&mut self) -> &mut AcceptRetry {
        &mut self.retry
    }

    fn taken(&mut self, conn: Conn, now: Instant) {
        let Conn::Tcp(mut stream) = conn else {
            return;
        };
        // Reset before it was taken: gone.
        let Ok(peer) = stream.peer_addr() else {
            return;
        };
        let key = self.new_key();
        let registry = self.driver.registry();
        if registry
            .register(&mut stream, Token(key), Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut conns = Conns {
            map: &mut self.conns,
            registry,
        };
        self.admission.admit(&mut conns, key, stream, peer, now);
    }
}

impl<A: Admission> Flows for Turning<'_, A> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    fn turn(&mut self, now: Instant) -> Turn {
        if self.stopped.load(Ordering::Acquire) || self.admission.stopping() {
            let mut conns = Conns {
                map: &mut self.conns,
                registry: self.driver.registry(),
            };
            self.admission.stop(&mut conns);
            self.conns.clear();
            return Turn::Stop;
        }
        if self.more || self.retry.due(now) {
            self.accept();
        }
        self.admission.turn(now);
        while let Some(key) = self.admission.due(now) {
            let mut conns = Conns {
                map: &mut self.conns,
                registry: self.driver.registry(),
            };
            self.admission.expire(&mut conns, key, now);
        }
        if self.more {
            return Turn::Wait(Duration::ZERO);
        }
        let wake = [self.admission.next_deadline(), self.retry.deadline()]
            .into_iter()
            .flatten()
            .fold(now + IDLE_WAIT, Instant::min);
        Turn::Wait(wake.saturating_duration_since(now))
    }

    fn event(&mut self, event: &Event, now: Instant) {
        match event.token() {
            LISTENER => self.accept(),
            Token(key) => {
                let mut conns = Conns {
                    map: &mut self.conns,
                    registry: self.driver.registry(),
                };
                self.admission.progress(&mut conns, key, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::gate::{Gate, Greeting, Presented};
    use std::io::{Read, Write};
    use std::net::TcpStream as StdStream;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    /// What the test's connections say first.
    struct Helo;

    impl Greeting for Helo {
        const LEN: usize = 4;
        type Said = ();
        fn check(&self, bytes: &[u8]) -> Option<()> {
            (bytes == b"helo").then_some(())
        }
    }

    struct Waiting(TcpStream);

    impl Held for Waiting {
        fn stream(&mut self) -> &mut TcpStream {
            &mut self.0
        }
    }

    /// Admits behind a gate, hands a greeted connection over on a channel,
    /// and keeps the most it ever held and what it held when stopped.
    struct Greeted {
        gate: Gate<Helo>,
        handed: mpsc::Sender<TcpStream>,
        most: Arc<AtomicUsize>,
        at_stop: Arc<AtomicUsize>,
    }

    impl Admission for Greeted {
        type Conn = Waiting;
        fn admit(
            &mut self,
            conns: &mut Conns<'_, Waiting>,
            key: usize,
            stream: TcpStream,
            _peer: SocketAddr,
            now: Instant,
        ) {
            conns.insert(key, Waiting(stream));
            if let Some(oldest) = self.gate.admit(key, now) {
                conns.close(oldest);
            }
            self.most.fetch_max(conns.len(), Ordering::AcqRel);
            self.progress(conns, key, now);
        }
        fn progress(&mut self, conns: &mut Conns<'_, Waiting>, key: usize, _now: Instant) {
            let Some(c) = conns.get_mut(key) else {
                return;
            };
            match self.gate.read(key, &mut c.0) {
                Presented::Waiting => {}
                Presented::Refused => conns.close(key),
                Presented::Through(()) => {
                    if let Some(c) = conns.remove(key) {
                        let _ = self.handed.send(c.0);
                    }
                }
            }
        }
        fn due(&mut self, now: Instant) -> Option<usize> {
            self.gate.expired(now)
        }
        fn expire(&mut self, conns: &mut Conns<'_, Waiting>, key: usize, _now: Instant) {
            conns.close(key);
        }
        fn next_deadline(&self) -> Option<Instant> {
            self.gate.next_deadline()
        }
        fn stop(&mut self, conns: &mut Conns<'_, Waiting>) {
            self.at_stop.store(conns.len(), Ordering::Release);
        }
    }

    struct Running {
        addr: SocketAddr,
        stop: Stop,
        handed: mpsc::Receiver<TcpStream>,
        most: Arc<AtomicUsize>,
        at_stop: Arc<AtomicUsize>,
        thread: std::thread::JoinHandle<io::Result<()>>,
    }

    fn start(cap: usize, timeout: Duration) -> Running {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let (acceptor, stop) = Acceptor::new(listener).unwrap();
        let addr = acceptor.local_addr();
        let (tx, handed) = mpsc::channel();
        let (most, at_stop) = (Arc::default(), Arc::new(AtomicUsize::new(usize::MAX)));
        let mut greeted = Greeted {
            gate: Gate::new(Helo, cap, timeout),
            handed: tx,
            most: Arc::clone(&most),
            at_stop: Arc::clone(&at_stop),
        };
        let thread = std::thread::spawn(move || acceptor.run(&mut greeted));
        Running {
            addr,
            stop,
            handed,
            most,
            at_stop,
            thread,
        }
    }

    /// Reads `s` until its end: whether the acceptor closed it (`Ok(0)` or
    /// a reset; the read timeout only keeps a broken test from hanging).
    fn closed_by_peer(s: &mut StdStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut b = [0u8; 16];
        match s.read(&mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }

    /// A flood of silent connections holds no more than the admission's
    /// bound (the oldest closed for each new one), a connection that greets
    /// behind it is handed over with its socket, and the stop closes the
    /// rest, the admission told of those it still held.
    #[test]
    fn a_flood_stays_within_the_bound_and_a_greeting_behind_it_is_handed_over() {
        const CAP: usize = 4;
        let r = start(CAP, Duration::from_secs(600));
        let mut silent: Vec<StdStream> = (0..40)
            .map(|_| StdStream::connect(r.addr).unwrap())
            .collect();
        let mut user = StdStream::connect(r.addr).unwrap();
        user.write_all(b"helo").unwrap();
        let taken = r.handed.recv().unwrap();
        // The handed-over socket is the user's: what it sends next arrives.
        user.write_all(b"data").unwrap();
        let mut got = [0u8; 4];
        let mut taken: StdStream = taken.into();
        taken.set_nonblocking(false).unwrap();
        taken.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"data");
        // Accepted in order, all 40 were admitted before the user: the
        // first ones were pushed out.
        assert!(closed_by_peer(&mut silent[0]));
        assert!(r.most.load(Ordering::Acquire) <= CAP);
        r.stop.stop();
        r.thread.join().unwrap().unwrap();
        assert_eq!(r.at_stop.load(Ordering::Acquire), CAP - 1);
        assert!(closed_by_peer(silent.last_mut().unwrap()));
    }

    /// A connection silent past its deadline is closed on the acceptor's
    /// timer, with nothing else happening on the port.
    #[test]
    fn a_connection_silent_past_its_deadline_is_closed() {
        let r = start(8, Duration::from_millis(50));
        let mut silent = StdStream::connect(r.addr).unwrap();
        assert!(closed_by_peer(&mut silent));
        r.stop.stop();
        r.thread.join().unwrap().unwrap();
        assert_eq!(r.at_stop.load(Ordering::Acquire), 0);
    }
}
