//! The daemon: accepts control connections, lets each through its
//! handshake on one event loop (the lobby, shell/lobby.rs), and serves each
//! session past it on its own thread, within limits, until shut down.
//!
//! Limits and what they cost a stranger (see `docs/security.md`):
//! - a control connection that has not finished its handshake (hello, and
//!   the key's challenge–response when there is a key) holds no thread: it
//!   waits in the lobby, with at most a 4 KiB frame read and a welcome to
//!   send, for at most [`DaemonConfig::handshake_timeout`]; at most
//!   [`DaemonConfig::max_handshakes`] of them at once, and a quarter of
//!   those from one source address: past either, the oldest is dropped for
//!   the new one, so silent connections cannot lock out clients that answer;
//! - [`DaemonConfig::max_sessions`] counts sessions past their handshake, so
//!   connections that never authenticate cannot take the slots of those that
//!   do; a session gets its thread only with a slot;
//! - a test is admitted only within [`DaemonConfig::max_duration`] and
//!   [`DaemonConfig::max_users`], and only if what its server side will hold
//!   (threads, descriptors, memory, data connections: [`Cost`]) fits what the
//!   running tests leave of [`DaemonConfig::budget`], charged before anything
//!   is allocated and given back when it ends; it is stopped when the server's
//!   own byte counters pass [`DaemonConfig::max_bytes_per_session`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_engine::worker::{Acceptor, Stop};
use mio::net::TcpListener;
use socket2::{Domain, Protocol, Socket, Type};

use linkperf_measured::{AgentIdentity, ProcessMethod};

use crate::proto::auth::AuthKey;
use crate::proto::budget::{Budget, Ledger};
use crate::shell::lobby;
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
    /// Most control connections in their handshake at once (a quarter of
    /// them from one address); past it, the oldest is dropped for a new one.
    pub max_handshakes: usize,
    /// Most users in one test.
    pub max_users: u32,
    /// Most data connections (one per user) of all running tests together.
    pub max_connections: u64,
    /// What all running tests together may hold: threads, descriptors,
    /// memory, data connections ([`Budget::of_host`] by default).
    pub budget: Budget,
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
    /// How the front end names each [`Setting`] a message points to (the
    /// CLI: by its `serve` flag); `None`: [`Setting::describe`]'s words.
    pub setting_name: Option<fn(Setting) -> &'static str>,
    /// Who this daemon is as an agent of a mesh, stated in every `welcome`
    /// (`None`: it states nothing).
    pub identity: Option<AgentIdentity>,
}

/// A setting of the daemon that a message to a client or to the log points
/// to, so the user knows what to change. The library names none of the front
/// end's flags: [`DaemonConfig::setting_name`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// One of the limits a request is checked against.
    Limit(linkperf_protocol::LimitKind),
    /// How long the daemon waits for each control message.
    ControlTimeout,
    /// How long a new connection has for its handshake.
    HandshakeTimeout,
    /// The largest control message it takes after the handshake.
    MaxFrame,
    /// Its pre-shared key.
    AuthKey,
}

impl Setting {
    /// The setting in words, for a front end that names none.
    pub fn describe(self) -> &'static str {
        use linkperf_protocol::LimitKind as K;
        match self {
            Setting::Limit(K::Users) => "limit on users",
            Setting::Limit(K::DurationS) => "limit on duration",
            Setting::Limit(K::Threads) => "limit on threads",
            Setting::Limit(K::Descriptors) => "limit on descriptors",
            Setting::Limit(K::MemoryBytes) => "limit on memory",
            Setting::Limit(K::Connections) => "limit on connections",
            Setting::Limit(K::Sessions) => "limit on sessions",
            Setting::Limit(K::BytesPerSession) => "limit on bytes per session",
            Setting::ControlTimeout => "control timeout",
            Setting::HandshakeTimeout => "handshake timeout",
            Setting::MaxFrame => "largest control message",
            Setting::AuthKey => "a pre-shared key",
        }
    }
}

impl DaemonConfig {
    /// How the front end names `setting`.
    pub fn name(&self, setting: Setting) -> &'static str {
        self.setting_name
            .map_or_else(|| setting.describe(), |name| name(setting))
    }
}

/// Default of [`DaemonConfig::max_bytes_per_session`]: 1 TiB.
pub const DEFAULT_MAX_BYTES_PER_SESSION: u64 = 1 << 40;
/// Default of [`DaemonConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: u64 = 50_000;
/// Default of [`DaemonConfig::max_handshakes`]: with the oldest evicted for a
/// new one when full, a few hundred slots let every client that answers its
/// challenge in a round trip through a flood of silent connections.
pub const DEFAULT_MAX_HANDSHAKES: usize = 256;
/// Default of [`DaemonConfig::handshake_timeout`]: a client that holds the
/// key answers in a round trip.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
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
            budget: Budget::of_host(
                DEFAULT_MAX_CONNECTIONS,
                control_descriptors(DEFAULT_MAX_HANDSHAKES, 64),
                Overrides::default(),
            ),
            max_bytes_per_session: Some(DEFAULT_MAX_BYTES_PER_SESSION),
            max_frame: linkperf_protocol::DEFAULT_MAX_FRAME,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            control_timeout: DEFAULT_CONTROL_TIMEOUT,
            start_timeout: DEFAULT_START_TIMEOUT,
            auth_key: None,
            process_method: ProcessMethod::RusageSelf,
            command_line: Vec::new(),
            log: false,
            setting_name: None,
            identity: None,
        }
    }
}

/// Descriptors a daemon keeps for its control connections, out of the tests'
/// budget: one per handshake slot and per session, and a few of its own.
pub fn control_descriptors(max_handshakes: usize, max_sessions: usize) -> u64 {
    max_handshakes as u64 + max_sessions as u64 + 32
}

/// What a daemon's operator sets instead of the host's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--max-threads`.
    pub threads: Option<u64>,
    /// `--max-descriptors`.
    pub descriptors: Option<u64>,
    /// `--max-memory`, bytes.
    pub memory_bytes: Option<u64>,
}

impl Budget {
    /// The budget of a daemon on this host: 8 threads per CPU it may use (at
    /// least 16), the descriptors its RLIMIT_NOFILE leaves after `control`,
    /// half the host's available memory, and `connections` data connections;
    /// each replaced by `o`'s where set.
    pub fn of_host(connections: u64, control: u64, o: Overrides) -> Budget {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Budget {
            threads: o.threads.unwrap_or((8 * cpus).max(16)),
            descriptors: o.descriptors.unwrap_or_else(|| {
                linkperf_metrics::fd_limit()
                    .unwrap_or(1024)
                    .saturating_sub(control)
            }),
            memory_bytes: o.memory_bytes.unwrap_or_else(|| {
                linkperf_metrics::memory_available_bytes().map_or(1 << 30, |b| b / 2)
            }),
            connections,
        }
    }

    /// No bound but the host's own (the embedded daemon, which serves its
    /// own process alone).
    pub fn unlimited() -> Budget {
        Budget {
            threads: u64::MAX,
            descriptors: u64::MAX,
            memory_bytes: u64::MAX,
            connections: u64::MAX,
        }
    }
}

/// A count of running things that a thread can wait to see fall to zero.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    n: Mutex<usize>,
    zero: Condvar,
}

impl Gauge {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.n.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more.
    pub(crate) fn up(&self) {
        *self.count() += 1;
    }

    /// One fewer; at zero, the waiters wake.
    pub(crate) fn down(&self) {
        let mut n = self.count();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.zero.notify_all();
        }
    }

    /// How many now.
    pub(crate) fn get(&self) -> usize {
        *self.count()
    }

    /// Waits until the count is zero, or until `deadline`; the count then.
    pub(crate) fn wait_zero(&self, deadline: Instant) -> usize {
        let wait = deadline.saturating_duration_since(Instant::now());
        let n = match self.zero.wait_timeout_while(self.count(), wait, |n| *n > 0) {
            Ok((n, _)) => n,
            Err(e) => e.into_inner().0,
        };
        *n
    }
}

/// State shared by the daemon's session threads.
#[derive(Debug, Default)]
pub(crate) struct DaemonState {
    pub next_session: AtomicU64,
    /// Session threads alive (every control connection past its handshake).
    pub threads: Gauge,
    /// Sessions past their handshake.
    pub sessions: AtomicUsize,
    /// What running tests hold, charged against the budget.
    pub ledger: Ledger,
    /// Tests aborted because the daemon shut down.
    pub aborted: AtomicUsize,
    pub shutdown: AtomicBool,
}

impl DaemonState {
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
    /// The control listener and the lobby's event loop on it.
    acceptor: Acceptor,
    /// What stops that loop.
    stop: Stop,
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
    state: Arc<DaemonState>,
    /// Wakes the lobby's loop to see the flag.
    stop: Stop,
}

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeSummary {
    /// Tests aborted by the shutdown (their clients were told).
    pub aborted_tests: usize,
    /// Session threads still running when the daemon stopped waiting for them.
    pub abandoned_sessions: usize,
}

/// Most connections the kernel holds for the lobby to accept: a flood
/// fills a short queue, and a client behind a full one waits for its
/// connection to be retried.
const BACKLOG: i32 = 1024;

/// The control listener on `addr`, not blocking.
fn control_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    s.set_nonblocking(true)?;
    Ok(TcpListener::from_std(s.into()))
}

impl Daemon {
    /// Binds the control listener.
    pub fn bind(config: DaemonConfig) -> Result<Daemon, SessionError> {
        let failed = |source| SessionError::Bind {
            addr: config.listen.to_string(),
            source,
        };
        let listener = control_listener(config.listen).map_err(failed)?;
        let (acceptor, stop) = Acceptor::new(listener).map_err(failed)?;
        Ok(Daemon {
            acceptor,
            stop,
            config,
            state: Arc::new(DaemonState::default()),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.acceptor.local_addr()
    }

    /// A handle that stops [`Daemon::serve`] from another thread.
    pub fn shutdown_handle(&self) -> Shutdown {
        Shutdown {
            state: self.state.clone(),
            stop: self.stop.clone(),
        }
    }

    /// Serves until shut down: the handshakes on this thread's event loop,
    /// each session past its handshake on a thread of its own. On
    /// shutdown, connections still in their handshake are closed, running
    /// tests are aborted and their clients told so; this returns once every
    /// session has ended, or after a grace of a few seconds.
    pub fn serve(self) -> ServeSummary {
        let Daemon {
            acceptor,
            config,
            state,
            ..
        } = self;
        let config = Arc::new(config);
        if let Err(e) = lobby::serve(acceptor, &config, &state) {
            eprintln!("linkperf serve: the control port's event loop failed: {e}; shutting down");
            state.shutdown.store(true, Ordering::Release);
        }
        // Sessions see the flag within a fraction of a second, abort their
        // tests and tell their clients.
        let abandoned_sessions = state.threads.wait_zero(Instant::now() + SHUTDOWN_GRACE);
        ServeSummary {
            aborted_tests: state.aborted.load(Ordering::Acquire),
            abandoned_sessions,
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

impl Shutdown {
    /// Stops accepting, closes the connections still in their handshake,
    /// aborts running tests (their clients get an `aborted` error) and lets
    /// [`Daemon::serve`] return.
    pub fn shutdown(&self) {
        self.state.shutdown.store(true, Ordering::Release);
        self.stop.stop();
    }
}

impl DaemonHandle {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sessions past their handshake being served now (each on its thread).
    pub fn active_sessions(&self) -> usize {
        self.shutdown.state.threads.get()
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
    fn a_gauge_wakes_its_waiter_when_it_falls_to_zero_and_no_later_than_the_deadline() {
        let g = Arc::new(Gauge::default());
        g.up();
        g.up();
        assert_eq!(g.get(), 2);
        // A deadline already past: the count at once.
        assert_eq!(g.wait_zero(Instant::now()), 2);
        let downs = std::thread::spawn({
            let g = g.clone();
            move || {
                g.down();
                g.down();
            }
        });
        // Woken by the last down, long before this deadline.
        assert_eq!(g.wait_zero(Instant::now() + Duration::from_secs(600)), 0);
        downs.join().unwrap();
        g.down();
        assert_eq!(g.get(), 0, "never below zero");
    }

    #[test]
    fn the_host_sets_the_budget_unless_told() {
        let b = Budget::of_host(100, 300, Overrides::default());
        assert!(b.threads >= 16);
        assert_eq!(b.connections, 100);
        assert!(b.memory_bytes > 0);
        let fds = linkperf_metrics::fd_limit().unwrap();
        assert_eq!(b.descriptors, fds.saturating_sub(300));
        let o = Overrides {
            threads: Some(4),
            descriptors: Some(2048),
            memory_bytes: Some(1 << 20),
        };
        let b = Budget::of_host(100, 300, o);
        assert_eq!(
            (b.threads, b.descriptors, b.memory_bytes),
            (4, 2048, 1 << 20)
        );
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
}
