//! The iperf3 port: every TCP connection starts with a 37-byte cookie, on the
//! control connection of a new test and on each of a test's data streams
//! alike. One acceptor thread reads the cookies of all new connections
//! without blocking, behind the engine's gate (bounded in number, the
//! oldest closed to make room, and in time), turned by the engine's loop,
//! and routes each: to the test that is waiting for its streams, to a new
//! test thread, or away with `ACCESS_DENIED`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_engine::driver::{self, Driver, Flows, Turn};
use linkperf_engine::io::gate::{Gate, Greeting, Presented};
use linkperf_engine::io::{accept_next, Accept, AcceptRetry, Conn, Listener};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Token, Waker};
use socket2::{Domain, Protocol, Socket, Type};

use crate::server::registry::{DataConn, Route, Shared};
use crate::server::{session, ServerConfig};
use crate::wire::{Cookie, State, COOKIE_LEN};
use crate::ServerError;

const LISTENER: Token = Token(0);
const FIRST_CONN: usize = 1;

/// A bound iperf3 server, not yet serving.
pub struct Iperf3Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    addr: SocketAddr,
}

/// A serving iperf3 server; dropping it stops accepting (running tests end
/// on their own, unless [`ServerHandle::terminator`] ended them).
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// Ends a server's running tests from anywhere (a signal handler): each sends
/// its client SERVER_TERMINATE within a tenth of a second.
#[derive(Clone)]
pub struct Terminator(Arc<Shared>);

impl Terminator {
    /// Ends every running test, and refuses new ones. Every test running now
    /// counts as aborted; one still setting up (parameters, streams) is told
    /// SERVER_TERMINATE at once, one in its data phase within a tenth of a
    /// second.
    pub fn terminate(&self) {
        self.0.terminating.store(true, Ordering::Release);
        self.0
            .terminated
            .fetch_max(self.0.running(), Ordering::AcqRel);
        self.0.terminate_setups();
    }
}

impl ServerHandle {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that ends the running tests.
    pub fn terminator(&self) -> Terminator {
        Terminator(self.shared.clone())
    }

    /// Waits until no test runs, at most until `deadline`; returns how many
    /// tests a [`Terminator`] ended.
    pub fn wait_tests(&self, deadline: Instant) -> usize {
        self.shared.wait_idle(deadline);
        self.shared.terminated.load(Ordering::Acquire)
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(TcpListener::from_std(s.into()))
}

fn udp_listener(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

impl Iperf3Server {
    /// Binds the TCP and UDP port of `cfg.addr` (port 0: one free for both).
    pub fn bind(cfg: ServerConfig) -> Result<Iperf3Server, ServerError> {
        let mut tries = if cfg.addr.port() == 0 { 10 } else { 1 };
        loop {
            let listener = tcp_listener(cfg.addr).map_err(|source| ServerError::Bind {
                addr: cfg.addr,
                source,
            })?;
            let addr = listener.local_addr().map_err(ServerError::Setup)?;
            match udp_listener(addr) {
                Ok(udp) => {
                    return Ok(Iperf3Server {
                        listener,
                        shared: Shared::new(cfg, udp),
                        addr,
                    })
                }
                Err(_) if tries > 1 => tries -= 1,
                Err(source) => return Err(ServerError::Bind { addr, source }),
            }
        }
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves on a thread of its own.
    pub fn spawn(self) -> Result<ServerHandle, ServerError> {
        let (driver, waker) = Driver::new(false).map_err(ServerError::Setup)?;
        let stop = Arc::new(AtomicBool::new(false));
        let addr = self.addr;
        let shared = self.shared.clone();
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lp-iperf3".into())
            .spawn(move || self.run(driver, st))
            .map_err(ServerError::Setup)?;
        Ok(ServerHandle {
            addr,
            stop,
            waker,
            thread: Some(thread),
            shared,
        })
    }

    fn run(mut self, driver: Driver, stop: Arc<AtomicBool>) {
        if let Err(e) = driver
            .registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)
        {
            eprintln!("linkperf serve: iperf3 listener failed: {e}");
            return;
        }
        let cfg = &self.shared.cfg;
        let gate = Gate::new(CookieGreeting, cfg.max_pending, cfg.handshake_timeout);
        let mut acceptor = Acceptor {
            driver,
            listener: Listener::Tcp(self.listener),
            shared: self.shared.clone(),
            stop,
            pending: HashMap::new(),
            gate,
            next_token: FIRST_CONN,
            seq: 0,
            retry_accept: AcceptRetry::default(),
        };
        let mut events = Events::with_capacity(256);
        if let Err(e) = driver::run(&mut acceptor, &mut events) {
            eprintln!("linkperf serve: iperf3 listener failed: {e}");
        }
    }
}

/// An iperf3 client's first 37 bytes: its cookie.
struct CookieGreeting;

impl Greeting for CookieGreeting {
    const LEN: usize = COOKIE_LEN;
    type Said = Cookie;
    fn check(&self, bytes: &[u8]) -> Option<Cookie> {
        // Not a cookie: not an iperf3 client.
        Cookie::parse(bytes).ok()
    }
}

/// A connection waiting for its cookie.
struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    seq: u64,
}

/// The iperf3 port's acceptor: new connections wait behind the engine's
/// gate (at most `max_pending`, the oldest closed to make room, each at
/// most the handshake timeout) until their cookie routes them.
struct Acceptor {
    driver: Driver,
    listener: Listener,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    pending: HashMap<usize, Pending>,
    gate: Gate<CookieGreeting>,
    next_token: usize,
    seq: u64,
    retry_accept: AcceptRetry,
}

impl Flows for Acceptor {
    fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    fn turn(&mut self, now: Instant) -> Turn {
        if self.stop.load(Ordering::Acquire) {
            return Turn::Stop;
        }
        if self.retry_accept.due(now) {
            self.accept();
        }
        while let Some(k) = self.gate.expired(now) {
            self.close(k);
        }
        let wake = [self.gate.next_deadline(), self.retry_accept.deadline()]
            .into_iter()
            .flatten()
            .fold(now + Duration::from_secs(1), Instant::min);
        Turn::Wait(wake.saturating_duration_since(now))
    }

    fn event(&mut self, event: &mio::event::Event, _now: Instant) {
        match event.token() {
            LISTENER => self.accept(),
            Token(t) => self.read_cookie(t),
        }
    }
}

impl Acceptor {
    fn accept(&mut self) {
        loop {
            let stream = match accept_next(&self.listener) {
                Accept::Conn(Conn::Tcp(stream)) => stream,
                Accept::Conn(_) => continue,
                Accept::Drained => return,
                Accept::Stopped(_) => {
                    // Out of descriptors or similar: the backlog waits a moment.
                    self.retry_accept.stopped(Instant::now());
                    return;
                }
            };
            let Ok(peer) = stream.peer_addr() else {
                continue; // reset before it was taken
            };
            let mut stream = stream;
            let token = self.next_token;
            self.next_token = self.next_token.wrapping_add(1).max(FIRST_CONN);
            let registry = self.driver.registry();
            if registry
                .register(&mut stream, Token(token), Interest::READABLE)
                .is_err()
            {
                continue;
            }
            self.seq += 1;
            let seq = self.seq;
            self.pending.insert(token, Pending { stream, peer, seq });
            if let Some(oldest) = self.gate.admit(token, Instant::now()) {
                self.close(oldest);
            }
            // The cookie is often there already.
            self.read_cookie(token);
        }
    }

    fn read_cookie(&mut self, token: usize) {
        let Some(p) = self.pending.get_mut(&token) else {
            return;
        };
        match self.gate.read(token, &mut p.stream) {
            Presented::Waiting => {}
            Presented::Refused => self.close(token),
            Presented::Through(cookie) => {
                if let Some(mut p) = self.pending.remove(&token) {
                    let _ = self.driver.registry().deregister(&mut p.stream);
                    self.dispatch(cookie, p);
                }
            }
        }
    }

    /// Closes a connection that will not pass (the gate has forgotten it).
    fn close(&mut self, token: usize) {
        if let Some(mut p) = self.pending.remove(&token) {
            let _ = self.driver.registry().deregister(&mut p.stream);
        }
    }

    fn dispatch(&mut self, cookie: Cookie, mut p: Pending) {
        match self.shared.route(cookie) {
            Route::Stream(tx) => {
                let _ = tx.send(DataConn {
                    stream: p.stream,
                    seq: p.seq,
                });
            }
            Route::Refuse => {
                let _ = p.stream.write(&[State::AccessDenied.to_byte()]);
            }
            Route::NewTest(ticket) => {
                let shared = self.shared.clone();
                let ctrl: std::net::TcpStream = p.stream.into();
                let peer = p.peer;
                let _ = std::thread::Builder::new()
                    .name(format!("lp-iperf3-{}", ticket.id))
                    .spawn(move || session::run(shared, ticket, ctrl, peer));
            }
        }
    }
}
