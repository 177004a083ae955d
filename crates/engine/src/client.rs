//! The client side of a test: workers that open the users' connections, drive
//! their flows, and count.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_metrics::TcpInfoAggregator;
use linkperf_protocol::DataToken;
use linkperf_workload::TestSpec;
use mio::Waker;

use crate::counters::Counters;
use crate::io::socket::{DataEndpoints, Settings};
use crate::live::LiveStats;
use crate::schedule::Schedule;
use crate::worker::signals::Signals;
use crate::worker::spawn::WorkerLoop;
use crate::worker::{cpus_for, WorkerReport};

use crate::worker::client::{ClientWorker, SetupEvent};

/// How long after the drain's end a worker still waiting for an answer is
/// released (its blocking read ended) by [`ClientTest::wait`].
const EXPIRE_GRACE: Duration = Duration::from_secs(1);

/// A running client side.
pub struct ClientTest {
    signals: Arc<Signals>,
    wakers: Vec<Arc<Waker>>,
    handles: Vec<JoinHandle<WorkerReport>>,
    /// Disconnected once every worker thread has returned.
    done: mpsc::Receiver<()>,
    spec: TestSpec,
}

/// Everything needed to run the client side.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The test.
    pub spec: TestSpec,
    /// Worker threads.
    pub threads: u32,
    /// CPUs to pin the workers to.
    pub affinity: Option<Vec<usize>>,
    /// Poll without sleeping.
    pub busy_poll: bool,
    /// Where the server's data endpoints are.
    pub endpoints: DataEndpoints,
    /// The session's token, sent in every data connection's preamble.
    pub token: DataToken,
    /// How long connecting all users may take.
    pub connect_timeout: Duration,
    /// Where workers publish live totals, if anyone watches.
    pub live: Option<Arc<LiveStats>>,
    /// Bytes every data connection sends first instead of linkperf's preamble
    /// (for servers of another protocol, e.g. iperf3's cookie).
    pub greeting: Option<Arc<[u8]>>,
}

impl ClientTest {
    /// Starts the workers and connects every user; returns once all are connected.
    pub fn connect(cfg: ClientConfig) -> Result<ClientTest, crate::EngineError> {
        if matches!(
            cfg.spec.workload,
            linkperf_workload::Workload::Profile { .. }
        ) {
            return Err(crate::EngineError::Setup(
                "a profile runs on the profile engine (engine::program), not as a workload".into(),
            ));
        }
        let threads = cfg.threads.clamp(1, cfg.spec.users.max(1)) as usize;
        if let Some(live) = &cfg.live {
            live.expect_workers(threads);
        }
        let signals = Arc::new(Signals::default());
        let (setup_tx, setup_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel::<()>();
        let mut wakers = Vec::new();
        let mut handles = Vec::new();
        let opts = Settings::for_test(&cfg.spec);
        for w in 0..threads {
            let cpus = cpus_for(w, cfg.affinity.as_ref());
            let worker = WorkerLoop::new(format!("lp-client-{w}"), w as u32, cpus, cfg.busy_poll)?;
            wakers.push(worker.waker());
            let ids: Vec<u32> = (0..cfg.spec.users)
                .filter(|u| *u as usize % threads == w)
                .collect();
            let spec = cfg.spec.clone();
            let endpoints = cfg.endpoints.clone();
            let signals = signals.clone();
            let setup_tx = setup_tx.clone();
            let opts = opts.clone();
            let token = cfg.token;
            let live = cfg.live.clone();
            let greeting = cfg.greeting.clone();
            let done_tx = done_tx.clone();
            let h = worker.spawn(move |driver, clock| {
                let _done = done_tx;
                let clock = match clock {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = setup_tx.send(SetupEvent::Failed(e));
                        return WorkerReport::empty(w as u32);
                    }
                };
                let worker = ClientWorker::new(
                    w as u32, spec, opts, endpoints, token, signals, driver, clock, &ids, live,
                    greeting,
                );
                worker.run(setup_tx)
            })?;
            handles.push(h);
        }
        drop(setup_tx);
        drop(done_tx);
        let test = ClientTest {
            signals,
            wakers,
            handles,
            done,
            spec: cfg.spec,
        };
        let deadline = Instant::now() + cfg.connect_timeout;
        let mut ready = 0;
        while ready < threads {
            let left = deadline.saturating_duration_since(Instant::now());
            match setup_rx.recv_timeout(left) {
                Ok(SetupEvent::Ready) => ready += 1,
                Ok(SetupEvent::Failed(e)) => {
                    test.abort_and_join();
                    return Err(if e.starts_with("worker") {
                        crate::EngineError::Affinity(e)
                    } else {
                        crate::EngineError::Connect(e)
                    });
                }
                Err(_) => {
                    test.abort_and_join();
                    return Err(crate::EngineError::Connect(format!(
                        "{} users could not all connect within {:?}",
                        ready, cfg.connect_timeout
                    )));
                }
            }
        }
        Ok(test)
    }

    fn abort_and_join(mut self) {
        self.abort();
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
    }

    /// Starts traffic now: warmup, then the window.
    pub fn start(&self, drain: Duration) -> Schedule {
        let s = Schedule::new(Instant::now(), self.spec.warmup, self.spec.duration, drain);
        let s = self.signals.start(s);
        for w in &self.wakers {
            let _ = w.wake();
        }
        s
    }

    /// Stops at once; what was measured is kept.
    pub fn abort(&self) {
        self.signals.abort();
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    /// A handle to abort from another thread.
    pub fn aborter(&self) -> Aborter {
        Aborter {
            signals: self.signals.clone(),
            wakers: self.wakers.clone(),
        }
    }

    /// Waits until every flow has finished, and returns the workers' reports.
    /// A worker still waiting for an answer a moment after the drain has
    /// ended (the server or the path is gone) is released then.
    pub fn wait(mut self) -> Result<Vec<WorkerReport>, crate::EngineError> {
        if let Some(s) = self.signals.schedule() {
            let deadline = s.drain_until + EXPIRE_GRACE;
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(mpsc::RecvTimeoutError::Timeout) = self.done.recv_timeout(left) {
                self.signals.expire();
            }
        }
        let mut out = Vec::new();
        for h in std::mem::take(&mut self.handles) {
            out.push(
                h.join()
                    .map_err(|_| crate::EngineError::Worker("a client worker panicked".into()))?,
            );
        }
        Ok(out)
    }
}

/// A side dropped before it was waited for (its session failed on the way)
/// stops its workers: one blocked in a read, or waiting for a start that will
/// not come, would otherwise outlive it.
impl Drop for ClientTest {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.abort();
        }
    }
}

/// Aborts a running side from another thread.
#[derive(Clone)]
pub struct Aborter {
    signals: Arc<Signals>,
    wakers: Vec<Arc<Waker>>,
}

impl Aborter {
    pub(crate) fn new(signals: Arc<Signals>, wakers: Vec<Arc<Waker>>) -> Self {
        Aborter { signals, wakers }
    }

    /// Aborts.
    pub fn abort(&self) {
        self.signals.abort();
        for w in &self.wakers {
            let _ = w.wake();
        }
    }
}

impl WorkerReport {
    pub(crate) fn empty(id: u32) -> Self {
        WorkerReport {
            counters: Counters::new(false),
            cpu: linkperf_metrics::ProcessCpu {
                user_s: 0.0,
                system_s: 0.0,
            },
            placement: linkperf_measured::WorkerPlacement {
                worker: id,
                pinned: None,
                allowed_cpus: vec![],
                last_cpu: None,
                flows: 0,
            },
            tcp: TcpInfoAggregator::new(),
            connections: 0,
            socket: None,
            flow_totals: Vec::new(),
            #[cfg(test)]
            parked: false,
        }
    }
}
