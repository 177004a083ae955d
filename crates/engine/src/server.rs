//! The server side of a test: one listener (or UDP socket) per worker, bound
//! before the test starts, and the workers (worker/server.rs) that answer
//! requests or stream and count what the server itself saw.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_protocol::DataToken;
use linkperf_workload::{Protocol, TestSpec};
use mio::{Interest, Waker};

use crate::io::socket::{tcp_listener, udp_bind, unix_listener, DataEndpoints, Listener, Settings};
use crate::live::LiveStats;
use crate::schedule::Schedule;
use crate::worker::server::{Setup, Source, Worker, LISTENER};
use crate::worker::signals::Signals;
use crate::worker::spawn::WorkerLoop;
use crate::worker::{cpus_for, WorkerReport};
use crate::EngineError;

/// Everything needed to run the server side.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The test.
    pub spec: TestSpec,
    /// Worker threads (at most one per user).
    pub threads: u32,
    /// CPUs to pin the workers to.
    pub affinity: Option<Vec<usize>>,
    /// Poll without sleeping.
    pub busy_poll: bool,
    /// Address to bind the data listeners to.
    pub bind_ip: IpAddr,
    /// The session's token; connections presenting another are dropped.
    pub token: DataToken,
    /// How long an accepted connection may take to present its preamble.
    pub preamble_timeout: Duration,
    /// Where workers publish their whole-life totals a few times a second, if
    /// anyone watches (the daemon's limit on bytes per session).
    pub live: Option<Arc<LiveStats>>,
    /// UDP: the only address whose datagrams are answered (the daemon gives
    /// the control connection's peer), so that a client cannot have the
    /// server send its responses to another host. `None`: any address.
    pub udp_peer: Option<IpAddr>,
}

/// A running server side.
pub struct ServerTest {
    signals: Arc<Signals>,
    wakers: Vec<Arc<Waker>>,
    handles: Vec<JoinHandle<WorkerReport>>,
    endpoints: DataEndpoints,
    spec: TestSpec,
}

impl ServerTest {
    /// Binds one data endpoint per worker and starts the workers, which accept
    /// connections from now on and start traffic when [`ServerTest::start`] is called.
    pub fn bind(cfg: ServerConfig) -> Result<ServerTest, EngineError> {
        if matches!(
            cfg.spec.workload,
            linkperf_workload::Workload::Profile { .. }
        ) {
            return Err(crate::EngineError::Setup(
                "a profile runs on the profile engine (engine::program), not as a workload".into(),
            ));
        }
        let threads = cfg.threads.clamp(1, cfg.spec.users.max(1)) as usize;
        let opts = Settings::for_server(&cfg.spec);
        let setup = |e: io::Error| EngineError::Setup(e.to_string());
        let (sources, endpoints) = bind_sources(&cfg, threads, &opts)?;
        let signals = Arc::new(Signals::default());
        let mut wakers = Vec::new();
        let mut handles = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        for (w, mut source) in sources.into_iter().enumerate() {
            let cpus = cpus_for(w, cfg.affinity.as_ref());
            let worker = WorkerLoop::new(format!("lp-server-{w}"), w as u32, cpus, cfg.busy_poll)?;
            let registry = worker.registry();
            let reg = match &mut source {
                Source::Listener(l) => registry.register(l.source(), LISTENER, Interest::READABLE),
                // A UDP stream's senders wait for room in the socket buffer
                // (request/response answers watch for it only once one had
                // to wait: every datagram sent would raise an edge).
                Source::Udp(s) if cfg.spec.is_udp_stream() => {
                    registry.register(s, LISTENER, Interest::READABLE | Interest::WRITABLE)
                }
                Source::Udp(s) => registry.register(s, LISTENER, Interest::READABLE),
            };
            reg.map_err(setup)?;
            wakers.push(worker.waker());
            let spec = cfg.spec.clone();
            let opts = opts.clone();
            let signals = signals.clone();
            let ready_tx = ready_tx.clone();
            let token = cfg.token;
            let preamble_timeout = cfg.preamble_timeout;
            let live = cfg.live.clone();
            let udp_peer = cfg.udp_peer;
            let users = cfg.spec.users as usize;
            let h = worker.spawn(move |driver, clock| {
                let clock = match clock {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return WorkerReport::empty(w as u32);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                drop(ready_tx);
                let worker = Worker::new(Setup {
                    index: w,
                    workers: threads,
                    users,
                    spec,
                    opts,
                    token,
                    signals,
                    driver,
                    source,
                    clock,
                    preamble_timeout,
                    live,
                    udp_peer,
                });
                worker.run()
            })?;
            handles.push(h);
        }
        drop(ready_tx);
        let test = ServerTest {
            signals,
            wakers,
            handles,
            endpoints,
            spec: cfg.spec,
        };
        for _ in 0..threads {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    test.abort();
                    let _ = test.finish();
                    return Err(EngineError::Affinity(e));
                }
                Err(_) => break,
            }
        }
        Ok(test)
    }

    /// Where clients connect.
    pub fn endpoints(&self) -> &DataEndpoints {
        &self.endpoints
    }

    /// How many of its workers' sockets are parked (on the blocking
    /// single-flow fast path) now.
    #[cfg(test)]
    pub(crate) fn parked_sockets(&self) -> usize {
        self.signals.parked_count()
    }

    /// Starts traffic on `schedule` (the client side's, so that both sides
    /// count in the same window).
    #[cfg(test)]
    pub(crate) fn start_on(&self, schedule: Schedule) -> Schedule {
        let s = self.signals.start(schedule);
        self.wake();
        s
    }

    /// Starts traffic now.
    pub fn start(&self, drain: Duration) -> Schedule {
        let s = Schedule::new(Instant::now(), self.spec.warmup, self.spec.duration, drain);
        let s = self.signals.start(s);
        self.wake();
        s
    }

    fn wake(&self) {
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    /// Stops at once; what was measured is kept.
    pub fn abort(&self) {
        self.signals.abort();
        self.wake();
    }

    /// A handle to abort from another thread.
    pub fn aborter(&self) -> crate::Aborter {
        crate::client::Aborter::new(self.signals.clone(), self.wakers.clone())
    }

    /// Closes everything (the client is done) and returns the workers' reports.
    pub fn finish(mut self) -> Result<Vec<WorkerReport>, EngineError> {
        self.signals.finish();
        self.wake();
        let mut out = Vec::new();
        for h in std::mem::take(&mut self.handles) {
            out.push(
                h.join()
                    .map_err(|_| EngineError::Worker("a server worker panicked".into()))?,
            );
        }
        Ok(out)
    }
}

/// A side dropped before it finished (its session failed on the way) stops
/// its workers: one blocked in a read would otherwise outlive it.
impl Drop for ServerTest {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.abort();
        }
    }
}

/// One data source per worker (a TCP or Unix listener, or a UDP socket),
/// and the endpoints clients are told to connect to.
fn bind_sources(
    cfg: &ServerConfig,
    threads: usize,
    opts: &Settings,
) -> Result<(Vec<Source>, DataEndpoints), EngineError> {
    let setup = |e: io::Error| EngineError::Setup(e.to_string());
    let mut sources = Vec::new();
    let mut tcp = Vec::new();
    let mut udp = Vec::new();
    let mut unix = Vec::new();
    for w in 0..threads {
        match cfg.spec.protocol {
            Protocol::Tcp => {
                let l = tcp_listener(cfg.bind_ip, opts).map_err(setup)?;
                let Listener::Tcp(t) = &l else {
                    unreachable!("tcp_listener returns TCP")
                };
                tcp.push(t.local_addr().map_err(setup)?);
                sources.push(Source::Listener(l));
            }
            Protocol::Udp => {
                let s = udp_bind(cfg.bind_ip, opts).map_err(setup)?;
                if cfg.spec.is_udp_stream() {
                    // Runs of datagrams in one read, where the kernel has them so.
                    crate::io::datagram::receive_runs(s.as_raw_fd());
                }
                udp.push(s.local_addr().map_err(setup)?);
                sources.push(Source::Udp(s));
            }
            Protocol::Unix => {
                let name = format!("linkperf-{}-{w}", cfg.token);
                let l = unix_listener(&name, opts).map_err(setup)?;
                unix.push(name);
                sources.push(Source::Listener(l));
            }
        }
    }
    let endpoints = match cfg.spec.protocol {
        Protocol::Tcp => DataEndpoints::Tcp(tcp),
        Protocol::Udp => DataEndpoints::Udp(udp),
        Protocol::Unix => DataEndpoints::Unix(unix),
    };
    Ok((sources, endpoints))
}
