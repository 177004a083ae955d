//! uperf profiles on linkperf's engine. A profile is compiled for one side
//! (script.rs: the client's flowops, or the server's mirrored ones), each
//! user becomes a state machine (user.rs) carried by event-loop workers
//! (worker/profile.rs) that count into the engine's counters, with the
//! profile's own counts per transaction element and flowop type beside
//! them (stats.rs); the driver and the workers meet in coord.rs.
//!
//! The client keeps time: all users end transaction `i` before any starts
//! `i + 1`. A timed transaction's end reaches the server as each user's
//! iteration count; the server stops its mirrored users there and answers
//! with what they wrote, which the client reads and discards before going
//! on, so every transaction starts on clean connections.

pub(crate) mod coord;
pub(crate) mod flow;
pub(crate) mod script;
pub(crate) mod stats;
pub(crate) mod user;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use linkperf_measured::{ProfileReport, SideReport, Totals, WorkerPlacement};
use linkperf_metrics::ProcessCpu;
use linkperf_protocol::DataToken;
use linkperf_workload::profile::Profile;
use mio::net::TcpListener;

pub use coord::Arrival;
pub use script::{compile, CompileError, Compiled};
pub use stats::{most_stats_bytes, ProfileCounters};
pub use user::{Role, STALL};

use crate::io::socket::{tcp_listener, Listener, Settings};
use crate::worker::profile::{self as worker, ProgramWorkerReport, WorkerSetup};
use crate::worker::spawn::WorkerLoop;
use crate::worker::{cpus_for, SocketFacts};
use crate::EngineError;
use coord::Coord;
use user::User;

/// One side of a profile run.
#[derive(Debug)]
pub struct ProgramConfig {
    /// The profile as this side runs it (the server's is mirrored).
    pub profile: Profile,
    /// Which side.
    pub role: Role,
    /// Event-loop workers.
    pub threads: u32,
    /// CPUs to pin workers to.
    pub affinity: Option<Vec<usize>>,
    /// Never sleep in the event wait.
    pub busy_poll: bool,
    /// The session's data token.
    pub token: DataToken,
    /// Where this side's `connect` flowops go, one endpoint per worker of the
    /// other side (user `i` to `endpoints[i % len]`): the server's listeners
    /// for the client, the client's (for its `accept` flowops) for the server.
    pub endpoints: Vec<SocketAddr>,
    /// Listeners for this side's `accept` flowops, one per worker (see
    /// [`workers_for`] and [`bind_listeners`]); empty: bound on `bind_ip`.
    pub listeners: Vec<TcpListener>,
    /// Where to bind listeners when none are given (`None`: no listeners),
    /// and, on the server of a profile with UDP connections, one datagram
    /// socket per worker.
    pub bind_ip: Option<IpAddr>,
    /// Client: the server's datagram sockets, one per server worker.
    pub udp_endpoints: Vec<SocketAddr>,
    /// Server: the only address whose datagrams are taken in and answered
    /// (the daemon gives the control connection's peer). `None`: any address.
    pub udp_peer: Option<IpAddr>,
    /// Where workers publish their whole-life totals a few times a second, if
    /// anyone watches (a progress bar, the daemon's limit on bytes per
    /// session); one slot per worker ([`workers_for`]).
    pub live: Option<Arc<crate::LiveStats>>,
}

/// The workers a side runs for `threads` asked and `profile`'s users.
pub fn workers_for(threads: u32, profile: &Profile) -> usize {
    threads.clamp(1, profile.users().max(1)) as usize
}

/// Whether `profile`, as this side runs it, takes connections (has `accept` flowops).
pub fn accepts(profile: &Profile) -> bool {
    profile
        .groups
        .iter()
        .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
        .any(|f| matches!(f.kind, linkperf_workload::profile::FlowopKind::Accept(_)))
}

/// `n` TCP listeners on `ip`, ephemeral ports.
pub fn bind_listeners(ip: IpAddr, n: usize) -> Result<Vec<TcpListener>, EngineError> {
    (0..n)
        .map(|_| match tcp_listener(ip, &Settings::default()) {
            Ok(Listener::Tcp(l)) => Ok(l),
            Ok(_) => Err(EngineError::Setup("not a TCP listener".into())),
            Err(e) => Err(EngineError::Setup(e.to_string())),
        })
        .collect()
}

/// A running side of a profile.
pub struct ProgramRun {
    coord: Arc<Coord>,
    handles: Vec<JoinHandle<ProgramWorkerReport>>,
    endpoints: Vec<SocketAddr>,
    udp_endpoints: Vec<SocketAddr>,
    compiled: Compiled,
    name: String,
    started: Instant,
}

/// What one side measured over a profile run.
#[derive(Debug)]
pub struct ProgramOutcome {
    /// Counts of all workers, their window the run's (their intervals end
    /// where it did).
    pub counts: ProfileCounters,
    /// Connections opened or accepted.
    pub connections: u64,
    /// The per-element and per-type report.
    pub report: ProfileReport,
    /// Sum of the workers' thread CPU.
    pub worker_cpu: ProcessCpu,
    /// Where the workers ran.
    pub workers: Vec<WorkerPlacement>,
    /// Facts of one data socket.
    pub socket: Option<SocketFacts>,
    /// Seconds from the start to the end of the run.
    pub window_s: f64,
    /// Whole-run totals.
    pub totals: Totals,
    /// The first failure, if a user failed.
    pub failure: Option<String>,
}

impl ProgramOutcome {
    /// This side's record, with `cpu` as measured around the run; the
    /// per-element report is attached when `with_profile`. The bytes read
    /// are those its read flowops took: what was read only to be thrown
    /// away between transactions (the other side's writes past the end of a
    /// timed transaction) is in `totals` alone.
    ///
    /// Its CPU and what its sampler saw are taken as for every other side
    /// (see [`Aggregate::side_report`](crate::Aggregate::side_report)); the
    /// data socket's facts go into `env`.
    pub fn side_report(
        &self,
        window: Option<&crate::WindowCpu>,
        asked: linkperf_measured::ProcessMethod,
        busy_poll: bool,
        env: &mut linkperf_measured::Environment,
    ) -> SideReport {
        let cpu = crate::aggregate::window_cpu(window, asked, self.worker_cpu);
        if let Some(s) = &self.socket {
            s.record(env);
        }
        let c = &self.counts.counters;
        let latency = c.window_latency();
        let mut report = SideReport {
            window_s: self.window_s,
            tx_bytes: self.totals.tx_bytes,
            rx_bytes: self.totals.rx_bytes.saturating_sub(self.counts.drained),
            transactions: self.totals.transactions,
            errors: c.errors,
            totals: self.totals,
            latency: latency.summary(),
            intervals: c.intervals(),
            cpu,
            tcp_info: None,
            workers: self.workers.clone(),
            busy_poll,
            connections: self.connections,
            error_samples: c.error_samples.clone(),
            profile: Some(self.report.clone()),
            latency_histogram: latency.encode_histogram(),
            flows: Default::default(),
            udp: None,
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
        };
        if let Some(w) = window {
            w.fill(&mut report);
        }
        report
    }
}

impl ProgramRun {
    /// Compiles the profile and starts the workers: a client's users wait
    /// for [`release`](Self::release) of transaction 0; a server's listen
    /// (one endpoint per worker) and wait for their connections.
    pub fn start(cfg: ProgramConfig) -> Result<ProgramRun, EngineError> {
        let compiled =
            compile(&cfg.profile).map_err(|e| EngineError::Setup(format!("profile: {e}")))?;
        let total = compiled.total_users();
        let threads = workers_for(cfg.threads, &cfg.profile);
        let coord = Arc::new(Coord::new(total as usize));
        let mut given = cfg.listeners;
        if given.is_empty() {
            if let Some(ip) = cfg.bind_ip {
                given = bind_listeners(ip, threads)?;
            }
        }
        if !given.is_empty() && given.len() != threads {
            return Err(EngineError::Setup(format!(
                "{} listeners for {threads} workers",
                given.len()
            )));
        }
        let listen_addrs = given
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EngineError::Setup(e.to_string()))?;
        let mut listeners: Vec<Option<TcpListener>> = given.into_iter().map(Some).collect();
        let endpoints = cfg.endpoints.clone();
        let mut udp: Vec<Option<mio::net::UdpSocket>> = Vec::new();
        if let (Role::Server, Some(ip), true) = (cfg.role, cfg.bind_ip, compiled.uses_udp()) {
            for _ in 0..threads {
                let s = crate::io::socket::udp_bind(ip, &Settings::default())
                    .map_err(|e| EngineError::Setup(e.to_string()))?;
                udp.push(Some(s));
            }
        }
        let udp_addrs = udp
            .iter()
            .flatten()
            .map(|s| s.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EngineError::Setup(e.to_string()))?;
        let now = Instant::now();
        let mut per_worker: Vec<Vec<User>> = (0..threads).map(|_| Vec::new()).collect();
        for id in 0..total {
            let Some((script, member, _)) = compiled.user(id) else {
                continue;
            };
            per_worker[id as usize % threads].push(User::new(id, member, cfg.role, script, now));
        }
        let mut handles = Vec::new();
        let largest = compiled.largest_op();
        for (w, users) in per_worker.into_iter().enumerate() {
            let side = match cfg.role {
                Role::Client => "client",
                Role::Server => "server",
            };
            let worker = WorkerLoop::new(
                format!("lp-profile-{side}-{w}"),
                w as u32,
                cpus_for(w, cfg.affinity.as_ref()),
                cfg.busy_poll,
            )?;
            coord.add_waker(worker.waker());
            let setup = WorkerSetup {
                id: w as u32,
                role: cfg.role,
                users,
                workers: threads,
                transactions: compiled.transactions(),
                slots: compiled.slots.len(),
                endpoints: endpoints.clone(),
                listener: listeners.get_mut(w).and_then(Option::take),
                udp_endpoints: cfg.udp_endpoints.clone(),
                udp: udp.get_mut(w).and_then(Option::take),
                udp_peer: cfg.udp_peer,
                token: cfg.token,
                coord: coord.clone(),
                largest,
                live: cfg.live.clone(),
            };
            let h = worker.spawn(move |driver, clock| worker::run(setup, driver, clock));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    coord.abort();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(ProgramRun {
            coord,
            handles,
            udp_endpoints: udp_addrs,
            endpoints: listen_addrs,
            compiled,
            name: cfg.profile.name.clone(),
            started: now,
        })
    }

    /// This side's listeners' addresses (the server's: where the client connects).
    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    /// Server: this side's datagram sockets (empty without UDP connections).
    pub fn udp_endpoints(&self) -> &[SocketAddr] {
        &self.udp_endpoints
    }

    /// The compiled profile.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Client: starts transaction `txn`; each user first discards
    /// `drain[user][conn]` bytes. Releasing one past the last ends the run.
    pub fn release(&self, txn: usize, drain: Vec<Vec<u64>>) {
        self.coord.release(txn, drain);
    }

    /// Client: runs the whole profile. Releases transaction 0, then for each
    /// transaction waits for all users to end it; after a timed one, asks
    /// `exchange(txn, iterations by user)` for the bytes the server wrote
    /// per user and connection, and has each user discard what it did not
    /// read before the next transaction starts. `cancelled` is asked every
    /// 100 ms. Returns the first failure.
    pub fn drive(
        &self,
        mut exchange: impl FnMut(usize, Vec<u64>) -> Result<Vec<Vec<u64>>, String>,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        let n = self.compiled.transactions();
        self.release(0, Vec::new());
        for i in 0..n {
            let arrivals = loop {
                if cancelled() {
                    return Err("cancelled".into());
                }
                let until = Instant::now() + std::time::Duration::from_millis(100);
                match self.wait_barrier(i + 1, until) {
                    Ok(a) => break a,
                    Err(e) if e.ends_with("in time") => continue,
                    Err(e) => return Err(e),
                }
            };
            let mut drain = Vec::new();
            if self.compiled.timed(i) {
                let iterations = arrivals.iter().map(|a| a.iterations).collect();
                let written = exchange(i, iterations)?;
                drain = arrivals
                    .iter()
                    .enumerate()
                    .map(|(u, a)| {
                        let w = written.get(u).map(Vec::as_slice).unwrap_or(&[]);
                        a.read
                            .iter()
                            .enumerate()
                            .map(|(c, r)| w.get(c).copied().unwrap_or(0).saturating_sub(*r))
                            .collect()
                    })
                    .collect();
            }
            self.release(i + 1, drain);
        }
        Ok(())
    }

    /// Client: waits until every user waits for transaction `next`.
    pub fn wait_barrier(&self, next: usize, until: Instant) -> Result<Vec<Arrival>, String> {
        self.coord.wait_barrier(next, until)
    }

    /// Server: the client did `iterations[user]` of timed transaction `txn`.
    pub fn stop(&self, txn: usize, iterations: Vec<u64>) {
        self.coord.stop(txn, iterations);
    }

    /// Server: waits until every user whose group has a timed transaction
    /// `txn` has ended it; the bytes each wrote per connection, by user.
    pub fn wait_ended(&self, txn: usize, until: Instant) -> Result<Vec<Vec<u64>>, String> {
        let expected: Vec<bool> = (0..self.compiled.total_users())
            .map(|id| {
                self.compiled.user(id).is_some_and(|(s, _, _)| {
                    matches!(
                        s.txns.get(txn).map(|t| t.limit),
                        Some(linkperf_workload::profile::Limit::Duration(_))
                    )
                })
            })
            .collect();
        self.coord.wait_ended(txn, &expected, until)
    }

    /// The first failure of a user.
    pub fn failure(&self) -> Option<String> {
        self.coord.failure()
    }

    /// Waits, until `until` at the latest, for every user's script to be
    /// over; true when all are.
    pub fn wait_all_finished(&self, until: Instant) -> bool {
        self.coord.wait_all_finished(until)
    }

    /// Stops every worker now.
    pub fn abort(&self) {
        self.coord.abort();
    }

    /// Waits for the workers (abort first to stop them early) and merges
    /// what they counted.
    pub fn finish(self) -> ProgramOutcome {
        let mut worker_cpu = ProcessCpu {
            user_s: 0.0,
            system_s: 0.0,
        };
        let mut reports = Vec::new();
        for h in self.handles {
            match h.join() {
                Ok(r) => reports.push(r),
                Err(_) => self.coord.fail("a profile worker died".into()),
            }
        }
        // The side's window opens with its first worker's and closes now.
        let start = reports
            .iter()
            .filter_map(|r| r.counts.started())
            .min()
            .unwrap_or(self.started);
        let mut counts = ProfileCounters::new(self.compiled.slots.len());
        counts.start(start);
        let mut workers = Vec::new();
        let mut socket = None;
        let mut connections = 0;
        for r in reports {
            counts.merge(&r.counts);
            connections += r.connections;
            worker_cpu += r.cpu;
            workers.push(r.placement);
            if socket.is_none() {
                socket = r.socket;
            }
        }
        let end = Instant::now();
        counts.counters.stop(end);
        let window_s = end.saturating_duration_since(start).as_secs_f64();
        let report = counts.profile_report(&self.name, &self.compiled.slots);
        ProgramOutcome {
            totals: counts.counters.totals,
            report,
            worker_cpu,
            workers,
            socket,
            window_s,
            failure: self.coord.failure(),
            connections,
            counts,
        }
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
