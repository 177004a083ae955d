//! The daemon: accepts control connections and serves each session on its own
//! thread, within limits, until shut down.
//!
//! Limits and what they cost a stranger (see `docs/security.md`):
//! - a control connection that has not finished its handshake (hello, and the
//!   key's challenge–response when there is a key) holds a thread for at most
//!   [`DaemonConfig::handshake_timeout`]; at most [`DaemonConfig::max_handshakes`]
//!   of them at once, the rest are refused at once;
//! - [`DaemonConfig::max_sessions`] counts sessions past their handshake, so
//!   connections that never authenticate cannot take the slots of those that do;
//! - a test is admitted only within [`DaemonConfig::max_duration`],
//!   [`DaemonConfig::max_users`] and [`DaemonConfig::max_connections`] (data
//!   connections of all running tests together, one per user), and stopped when
//!   the server's own byte counters pass [`DaemonConfig::max_bytes_per_session`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_metrics::ProcessMethod;
use linkperf_wire::{encode_server, ErrorCode, ServerMessage};

use crate::auth::AuthKey;
use crate::server::serve_session;
use crate::SessionError;

/// How long a shut-down daemon waits for its sessions to tell their clients.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(4);

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Control address.
    pub listen: SocketAddr,
    /// Longest test (warmup + duration) accepted.
    pub max_duration: Duration,
    /// Most sessions served at once, counted once their handshake is done.
    pub max_sessions: usize,
    /// Most control connections in their handshake at once; more are refused at once.
    pub max_handshakes: usize,
    /// Most users in one test.
    pub max_users: u32,
    /// Most data connections (one per user) of all running tests together.
    pub max_connections: u64,
    /// Most payload bytes one session's server side may send and receive
    /// together; the test is stopped when its counters pass it. `None`: no limit.
    pub max_bytes_per_session: Option<u64>,
    /// Largest control frame accepted.
    pub max_frame: usize,
    /// How long a new control connection may take to say hello and, with a key,
    /// to authenticate. Slower ones are dropped.
    pub handshake_timeout: Duration,
    /// How long a control connection may stay silent while it negotiates a test.
    pub control_timeout: Duration,
    /// How long a client may take, once its test is accepted, to connect its
    /// users and say `start`.
    pub start_timeout: Duration,
    /// The pre-shared key sessions must prove they hold; `None`: no authentication.
    pub auth_key: Option<AuthKey>,
    /// How the server's process CPU is taken: `RusageSelf` for a daemon of its
    /// own, `RusageThreadSum` when it shares a process with the client.
    pub process_method: ProcessMethod,
    /// The command line that started the daemon, for the environment record.
    pub command_line: Vec<String>,
    /// Print one line per session to stderr.
    pub log: bool,
}

/// Default of [`DaemonConfig::max_bytes_per_session`]: 1 TiB.
pub const DEFAULT_MAX_BYTES_PER_SESSION: u64 = 1 << 40;
/// Default of [`DaemonConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: u64 = 50_000;
/// Default of [`DaemonConfig::max_handshakes`].
pub const DEFAULT_MAX_HANDSHAKES: usize = 4096;
/// Default of [`DaemonConfig::handshake_timeout`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`DaemonConfig::control_timeout`].
pub const DEFAULT_CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`DaemonConfig::start_timeout`].
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

impl DaemonConfig {
    /// Defaults for a daemon on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        DaemonConfig {
            listen,
            max_duration: Duration::from_secs(3600),
            max_sessions: 64,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_users: 20_000,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_bytes_per_session: Some(DEFAULT_MAX_BYTES_PER_SESSION),
            max_frame: linkperf_wire::DEFAULT_MAX_FRAME,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            control_timeout: DEFAULT_CONTROL_TIMEOUT,
            start_timeout: DEFAULT_START_TIMEOUT,
            auth_key: None,
            process_method: ProcessMethod::RusageSelf,
            command_line: Vec::new(),
            log: false,
        }
    }
}

/// State shared by the daemon's session threads.
#[derive(Debug, Default)]
pub(crate) struct DaemonState {
    pub next_session: AtomicU64,
    /// Session threads alive (every control connection being served).
    pub threads: AtomicUsize,
    /// Control connections still in their handshake.
    pub handshaking: AtomicUsize,
    /// Sessions past their handshake.
    pub sessions: AtomicUsize,
    /// Data connections reserved by running tests.
    pub connections: AtomicU64,
    /// Tests aborted because the daemon shut down.
    pub aborted: AtomicUsize,
    pub shutdown: AtomicBool,
}

impl DaemonState {
    /// Takes `n` from a counter if it stays within `max`; returns what was in use.
    pub(crate) fn reserve_connections(&self, n: u64, max: u64) -> Result<(), u64> {
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= max)
            })
            .map(|_| ())
    }

    /// Gives back `n` reserved data connections.
    pub(crate) fn release_connections(&self, n: u64) {
        self.connections.fetch_sub(n, Ordering::AcqRel);
    }

    /// Takes a session slot if fewer than `max` are taken.
    pub(crate) fn take_session(&self, max: usize) -> bool {
        self.sessions
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// True once the daemon is shutting down.
    pub(crate) fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }
}

/// A bound daemon.
pub struct Daemon {
    listener: TcpListener,
    config: DaemonConfig,
    state: Arc<DaemonState>,
}

/// A daemon running on a background thread; dropping it shuts it down.
pub struct DaemonHandle {
    addr: SocketAddr,
    shutdown: Shutdown,
    handle: Option<JoinHandle<ServeSummary>>,
}

/// Shuts a serving daemon down from another thread (a signal handler).
#[derive(Debug, Clone)]
pub struct Shutdown {
    addr: SocketAddr,
    state: Arc<DaemonState>,
}

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeSummary {
    /// Tests aborted by the shutdown (their clients were told).
    pub aborted_tests: usize,
    /// Session threads still running when the daemon stopped waiting for them.
    pub abandoned_sessions: usize,
}

impl Daemon {
    /// Binds the control listener.
    pub fn bind(config: DaemonConfig) -> Result<Daemon, SessionError> {
        let listener = TcpListener::bind(config.listen).map_err(|source| SessionError::Bind {
            addr: config.listen.to_string(),
            source,
        })?;
        Ok(Daemon {
            listener,
            config,
            state: Arc::new(DaemonState::default()),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    /// A handle that stops [`Daemon::serve`] from another thread.
    pub fn shutdown_handle(&self) -> Shutdown {
        Shutdown {
            addr: self.local_addr(),
            state: self.state.clone(),
        }
    }

    /// Serves sessions until shut down, each on its own thread. On shutdown,
    /// running tests are aborted and their clients told so; this returns once
    /// every session has ended, or after a grace of a few seconds.
    pub fn serve(self) -> ServeSummary {
        let config = Arc::new(self.config);
        for conn in self.listener.incoming() {
            if self.state.shutting_down() {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(_) => {
                    // Out of descriptors, or a connection reset before accept:
                    // do not spin; the sessions ending will free descriptors.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            let state = self.state.clone();
            if state.handshaking.load(Ordering::Acquire) >= config.max_handshakes {
                refuse_now(stream, config.max_handshakes);
                continue;
            }
            let accepted = Instant::now();
            let id = state.next_session.fetch_add(1, Ordering::Relaxed) + 1;
            state.handshaking.fetch_add(1, Ordering::AcqRel);
            state.threads.fetch_add(1, Ordering::AcqRel);
            let config = config.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("lp-session-{id}"))
                .spawn({
                    let state = state.clone();
                    move || {
                        serve_session(stream, id, accepted, &config, &state);
                        state.threads.fetch_sub(1, Ordering::AcqRel);
                    }
                });
            if spawned.is_err() {
                state.handshaking.fetch_sub(1, Ordering::AcqRel);
                state.threads.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // Sessions see the flag within a fraction of a second, abort their
        // tests and tell their clients.
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while self.state.threads.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        ServeSummary {
            aborted_tests: self.state.aborted.load(Ordering::Acquire),
            abandoned_sessions: self.state.threads.load(Ordering::Acquire),
        }
    }

    /// Serves on a background thread.
    pub fn spawn(self) -> DaemonHandle {
        let addr = self.local_addr();
        let shutdown = self.shutdown_handle();
        let handle = std::thread::Builder::new()
            .name("lp-daemon".into())
            .spawn(move || self.serve())
            .ok();
        DaemonHandle {
            addr,
            shutdown,
            handle,
        }
    }
}

/// Too many connections in their handshake: say so if the socket takes it at
/// once, and close.
fn refuse_now(stream: TcpStream, max: usize) {
    use std::io::Write;
    let _ = stream.set_nonblocking(true);
    let frame = encode_server(&ServerMessage::Error {
        code: ErrorCode::Limit,
        message: format!(
            "the server already has {max} connections waiting for their handshake \
             (its --max-handshakes); try again later"
        ),
    });
    let _ = (&stream).write(&frame);
}

impl Shutdown {
    /// Stops accepting, aborts running tests (their clients get an `aborted`
    /// error) and lets [`Daemon::serve`] return.
    pub fn shutdown(&self) {
        self.state.shutdown.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_millis(200));
    }
}

/// An address that reaches a listener bound to `addr` (an unspecified address
/// is reached on loopback).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

impl DaemonHandle {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Control connections being served now.
    pub fn active_sessions(&self) -> usize {
        self.shutdown.state.threads.load(Ordering::Acquire)
    }
}

impl Drop for DaemonHandle {
    fn drop(&mut self) {
        self.shutdown.shutdown();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_reserved_within_the_limit() {
        let s = DaemonState::default();
        assert_eq!(s.reserve_connections(60, 100), Ok(()));
        assert_eq!(s.reserve_connections(50, 100), Err(60));
        assert_eq!(s.reserve_connections(40, 100), Ok(()));
        s.release_connections(60);
        assert_eq!(s.reserve_connections(u64::MAX, 100), Err(40));
        assert_eq!(s.connections.load(Ordering::Acquire), 40);
    }

    #[test]
    fn session_slots_stop_at_the_limit() {
        let s = DaemonState::default();
        assert!(s.take_session(2));
        assert!(s.take_session(2));
        assert!(!s.take_session(2));
        s.sessions.fetch_sub(1, Ordering::AcqRel);
        assert!(s.take_session(2));
    }

    #[test]
    fn unspecified_addresses_are_woken_on_loopback() {
        let a: SocketAddr = "0.0.0.0:7410".parse().unwrap();
        assert_eq!(wake_addr(a), "127.0.0.1:7410".parse().unwrap());
        let a: SocketAddr = "[::]:7410".parse().unwrap();
        assert_eq!(wake_addr(a), "[::1]:7410".parse().unwrap());
        let a: SocketAddr = "10.1.2.3:7410".parse().unwrap();
        assert_eq!(wake_addr(a), a);
    }
}
