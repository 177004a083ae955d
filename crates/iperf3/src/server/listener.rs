//! The iperf3 port: every TCP connection starts with a 37-byte cookie, on the
//! control connection of a new test and on each of a test's data streams
//! alike. One acceptor thread reads the cookies of all new connections
//! without blocking (bounded in number and time) and routes each: to the
//! test that is waiting for its streams, to a new test thread, or away with
//! `ACCESS_DENIED`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, Socket, Type};

use crate::server::registry::{DataConn, Route, Shared};
use crate::server::{session, ServerConfig};
use crate::wire::{Cookie, State, COOKIE_LEN};
use crate::ServerError;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;
/// After a failed accept (out of descriptors), when to try again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

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
        while self.shared.running() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
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
        let poll = Poll::new().map_err(ServerError::Setup)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(ServerError::Setup)?);
        let stop = Arc::new(AtomicBool::new(false));
        let addr = self.addr;
        let shared = self.shared.clone();
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lp-iperf3".into())
            .spawn(move || self.run(poll, st))
            .map_err(ServerError::Setup)?;
        Ok(ServerHandle {
            addr,
            stop,
            waker,
            thread: Some(thread),
            shared,
        })
    }

    fn run(mut self, mut poll: Poll, stop: Arc<AtomicBool>) {
        if let Err(e) = poll
            .registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)
        {
            eprintln!("linkperf serve: iperf3 listener failed: {e}");
            return;
        }
        let mut acceptor = Acceptor {
            shared: self.shared.clone(),
            pending: HashMap::new(),
            next_token: FIRST_CONN,
            seq: 0,
            retry_accept: None,
        };
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let mut wake = now + Duration::from_secs(1);
            if let Some(d) = acceptor.pending.values().map(|p| p.deadline).min() {
                wake = wake.min(d);
            }
            if let Some(r) = acceptor.retry_accept {
                wake = wake.min(r);
            }
            if let Err(e) = poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
                if e.kind() != io::ErrorKind::Interrupted {
                    eprintln!("linkperf serve: iperf3 listener failed: {e}");
                    return;
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => acceptor.accept(&self.listener, &poll),
                    WAKER => {}
                    Token(t) => acceptor.read_cookie(t, &poll),
                }
            }
            if acceptor.retry_accept.is_some_and(|r| Instant::now() >= r) {
                acceptor.retry_accept = None;
                acceptor.accept(&self.listener, &poll);
            }
            acceptor.expire(&poll);
        }
    }
}

struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    buf: [u8; COOKIE_LEN],
    got: usize,
    deadline: Instant,
    seq: u64,
}

struct Acceptor {
    shared: Arc<Shared>,
    pending: HashMap<usize, Pending>,
    next_token: usize,
    seq: u64,
    retry_accept: Option<Instant>,
}

impl Acceptor {
    fn accept(&mut self, listener: &TcpListener, poll: &Poll) {
        loop {
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.pending.len() >= self.shared.cfg.max_pending {
                        continue; // dropped: closes it
                    }
                    let token = self.next_token;
                    self.next_token = self.next_token.wrapping_add(1).max(FIRST_CONN);
                    if poll
                        .registry()
                        .register(&mut stream, Token(token), Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    self.seq += 1;
                    self.pending.insert(
                        token,
                        Pending {
                            stream,
                            peer,
                            buf: [0; COOKIE_LEN],
                            got: 0,
                            deadline: Instant::now() + self.shared.cfg.handshake_timeout,
                            seq: self.seq,
                        },
                    );
                    // The cookie is often there already.
                    self.read_cookie(token, poll);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors or similar: the backlog waits a moment.
                    self.retry_accept = Some(Instant::now() + ACCEPT_RETRY);
                    return;
                }
            }
        }
    }

    fn read_cookie(&mut self, token: usize, poll: &Poll) {
        let Some(p) = self.pending.get_mut(&token) else {
            return;
        };
        loop {
            match p.stream.read(&mut p.buf[p.got..]) {
                Ok(0) => {
                    self.pending.remove(&token);
                    return;
                }
                Ok(n) => {
                    p.got += n;
                    if p.got == COOKIE_LEN {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.pending.remove(&token);
                    return;
                }
            }
        }
        let Some(mut p) = self.pending.remove(&token) else {
            return;
        };
        let _ = poll.registry().deregister(&mut p.stream);
        self.dispatch(p);
    }

    fn dispatch(&mut self, mut p: Pending) {
        // Not a cookie: not an iperf3 client. Close.
        let Ok(cookie) = Cookie::parse(&p.buf) else {
            return;
        };
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

    fn expire(&mut self, poll: &Poll) {
        let now = Instant::now();
        let late: Vec<usize> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(mut p) = self.pending.remove(&t) {
                let _ = poll.registry().deregister(&mut p.stream);
            }
        }
    }
}
