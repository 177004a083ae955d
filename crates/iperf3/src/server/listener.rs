//! The iperf3 port: every TCP connection starts with a 37-byte cookie, on the
//! control connection of a new test and on each of a test's data streams
//! alike. One acceptor thread reads the cookies of all new connections
//! without blocking, behind the engine's gate (bounded in number, the
//! oldest closed to make room, and in time), on the engine's one acceptor
//! (`linkperf_engine::worker::Acceptor`: the event loop, the accepts, the
//! stop), and routes each: to the test that is waiting for its streams, to a new
//! test thread, or away with `ACCESS_DENIED`.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use linkperf_engine::io::gate::{Gate, Greeting, Presented};
use linkperf_engine::worker::{Acceptor, Admission, Conns, Held, Stop};
use mio::net::{TcpListener, TcpStream};
use socket2::{Domain, Protocol, Socket, Type};

use crate::codec::{Cookie, State, COOKIE_LEN};
use crate::server::registry::{DataConn, Route, Shared};
use crate::server::{session, ServerConfig};
use crate::ServerError;

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
    stop: Stop,
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
        self.stop.stop();
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

    /// Serves on a thread of its own, on the engine's acceptor.
    pub fn spawn(self) -> Result<ServerHandle, ServerError> {
        let (acceptor, stop) = Acceptor::new(self.listener).map_err(ServerError::Setup)?;
        let addr = self.addr;
        let shared = self.shared;
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lp-iperf3".into())
            .spawn(move || run(acceptor, sh))
            .map_err(ServerError::Setup)?;
        Ok(ServerHandle {
            addr,
            stop,
            thread: Some(thread),
            shared,
        })
    }
}

fn run(acceptor: Acceptor, shared: Arc<Shared>) {
    let cfg = &shared.cfg;
    let gate = Gate::new(CookieGreeting, cfg.max_pending, cfg.handshake_timeout);
    let mut cookies = Cookies {
        shared: shared.clone(),
        gate,
        seq: 0,
    };
    if let Err(e) = acceptor.run(&mut cookies) {
        eprintln!("linkperf serve: iperf3 listener failed: {e}");
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

impl Held for Pending {
    fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

/// The iperf3 port's admission, on the engine's acceptor: new connections
/// wait behind the engine's gate (at most `max_pending`, the oldest closed
/// to make room, each at most the handshake timeout) until their cookie
/// routes them.
struct Cookies {
    shared: Arc<Shared>,
    gate: Gate<CookieGreeting>,
    seq: u64,
}

impl Admission for Cookies {
    type Conn = Pending;

    fn admit(
        &mut self,
        conns: &mut Conns<'_, Pending>,
        key: usize,
        stream: TcpStream,
        peer: SocketAddr,
        now: Instant,
    ) {
        self.seq += 1;
        let seq = self.seq;
        conns.insert(key, Pending { stream, peer, seq });
        if let Some(oldest) = self.gate.admit(key, now) {
            conns.close(oldest);
        }
        // The cookie is often there already.
        self.progress(conns, key, now);
    }

    fn progress(&mut self, conns: &mut Conns<'_, Pending>, key: usize, _now: Instant) {
        let Some(p) = conns.get_mut(key) else {
            return;
        };
        match self.gate.read(key, &mut p.stream) {
            Presented::Waiting => {}
            Presented::Refused => conns.close(key),
            Presented::Through(cookie) => {
                if let Some(p) = conns.remove(key) {
                    self.dispatch(cookie, p);
                }
            }
        }
    }

    fn due(&mut self, now: Instant) -> Option<usize> {
        self.gate.expired(now)
    }

    /// Its time for its cookie ran out (the gate has forgotten it).
    fn expire(&mut self, conns: &mut Conns<'_, Pending>, key: usize, _now: Instant) {
        conns.close(key);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.gate.next_deadline()
    }
}

impl Cookies {
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
