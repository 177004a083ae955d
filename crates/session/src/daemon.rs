//! The daemon: accepts control connections and serves each session on its own
//! thread, within limits.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use linkperf_metrics::ProcessMethod;

use crate::server::serve_session;
use crate::SessionError;

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Control address.
    pub listen: SocketAddr,
    /// Longest test (warmup + duration) accepted.
    pub max_duration: Duration,
    /// Most sessions served at once.
    pub max_sessions: usize,
    /// Most users in one test.
    pub max_users: u32,
    /// Largest control frame accepted.
    pub max_frame: usize,
    /// How long a control connection may stay silent while it negotiates.
    pub control_timeout: Duration,
    /// How the server's process CPU is taken: `RusageSelf` for a daemon of its
    /// own, `RusageThreadSum` when it shares a process with the client.
    pub process_method: ProcessMethod,
    /// The command line that started the daemon, for the environment record.
    pub command_line: Vec<String>,
    /// Print one line per session to stderr.
    pub log: bool,
}

impl DaemonConfig {
    /// Defaults for a daemon on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        DaemonConfig {
            listen,
            max_duration: Duration::from_secs(3600),
            max_sessions: 64,
            max_users: 20_000,
            max_frame: linkperf_wire::DEFAULT_MAX_FRAME,
            control_timeout: Duration::from_secs(10),
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
    pub active: AtomicUsize,
    pub shutdown: AtomicBool,
}

/// A bound daemon.
pub struct Daemon {
    listener: TcpListener,
    config: DaemonConfig,
    state: Arc<DaemonState>,
}

/// A daemon running on a background thread.
pub struct DaemonHandle {
    addr: SocketAddr,
    state: Arc<DaemonState>,
    handle: Option<JoinHandle<()>>,
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

    /// Serves sessions until shut down; each session runs on its own thread.
    pub fn serve(self) {
        let config = Arc::new(self.config);
        for conn in self.listener.incoming() {
            if self.state.shutdown.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = conn else { continue };
            let state = self.state.clone();
            let config = config.clone();
            let id = state.next_session.fetch_add(1, Ordering::Relaxed) + 1;
            let active = state.active.fetch_add(1, Ordering::AcqRel) + 1;
            let over_limit = active > config.max_sessions;
            let spawned = std::thread::Builder::new()
                .name(format!("lp-session-{id}"))
                .spawn(move || {
                    serve_session(stream, id, &config, over_limit);
                    state.active.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                self.state.active.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Serves on a background thread.
    pub fn spawn(self) -> DaemonHandle {
        let addr = self.local_addr();
        let state = self.state.clone();
        let handle = std::thread::Builder::new()
            .name("lp-daemon".into())
            .spawn(move || self.serve())
            .ok();
        DaemonHandle {
            addr,
            state,
            handle,
        }
    }
}

impl DaemonHandle {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sessions being served now.
    pub fn active_sessions(&self) -> usize {
        self.state.active.load(Ordering::Acquire)
    }
}

impl Drop for DaemonHandle {
    fn drop(&mut self) {
        self.state.shutdown.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
