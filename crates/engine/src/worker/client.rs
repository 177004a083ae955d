//! A client worker: the engine's one worker ([`generic`]) carrying its
//! share of a test's users, each a [`ClientFlow`]. What stays the client's
//! own ([`ClientKind`]): connecting its users at most [`MAX_CONNECTING`] at
//! a time, each with its greeting (or a UDP stream's registration), saying
//! when all are open, starting them when the test starts, and the I/O of
//! their carries (drive.rs, udp_stream.rs) and connects (connect.rs).
//!
//! [`generic`]: crate::worker::generic

mod connect;
mod drive;
pub(crate) mod flow;
mod udp_stream;

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use linkperf_protocol::{DataToken, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec};
use mio::Events;

use crate::counters::Counters;
use crate::flow::step::{Step, Told};
use crate::io::socket::{DataEndpoints, Settings};
use crate::io::Dial;
use crate::live::LiveStats;
use crate::open_tally::OpenTally;
use crate::schedule::{Phase, Schedule};
use crate::worker::driver::Driver;
use crate::worker::generic::{Core, Kind, Parts, Worker};
use crate::worker::signals::Signals;
use crate::worker::{Buffers, SocketFacts, WindowClock, WorkerReport};

use flow::ClientFlow;

/// What a worker says during setup.
pub(crate) enum SetupEvent {
    Ready,
    Failed(String),
}

/// Where a client worker is in its test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Connecting its users.
    Setup,
    /// All open: waiting for the start.
    Set,
    /// Carrying the test on its schedule.
    Running(Schedule),
}

/// What a client worker keeps beside its flows.
pub(crate) struct ClientKind {
    spec: TestSpec,
    opts: Settings,
    endpoints: DataEndpoints,
    token: DataToken,
    signals: Arc<Signals>,
    greeting: Option<Arc<[u8]>>,
    bufs: Buffers,
    run: Run,
    setup: Option<mpsc::Sender<SetupEvent>>,
    /// Flows waiting for a connect slot.
    queued: VecDeque<usize>,
    /// Connects under way.
    connecting: usize,
    /// Flows open (or connecting again, or waiting to), not yet closed.
    open: usize,
    /// Flows in all.
    flows: usize,
    /// A flow's greeting being written, by key.
    dials: Vec<Option<Dial>>,
    connections: u64,
    socket: Option<SocketFacts>,
    connect_error: Option<String>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
    /// Whether its UDP streams send runs of datagrams in one call (until the
    /// kernel refuses one).
    udp_runs: bool,
}

/// One client worker.
pub(crate) struct ClientWorker {
    worker: Worker<ClientKind>,
}

impl ClientWorker {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u32,
        spec: TestSpec,
        opts: Settings,
        endpoints: DataEndpoints,
        token: DataToken,
        signals: Arc<Signals>,
        driver: Driver,
        clock: WindowClock,
        ids: &[u32],
        live: Option<Arc<LiveStats>>,
        greeting: Option<Arc<[u8]>>,
    ) -> Self {
        let n_endpoints = endpoints.len().max(1);
        let tag = token.session_tag();
        // Flow i counts in slot i, and is the worker's flow i.
        let mut counters = Counters::new(true);
        let mut driver = driver;
        if spec.offered.is_some() {
            let seed = u64::from(tag) << 32 | u64::from(id);
            counters.open = Some(Box::new(OpenTally::new(seed)));
            // Its arrivals are due to the microsecond. Without the precise
            // timer (no timerfd) it keeps them to the millisecond: the
            // pacing error it records says so.
            let _ = driver.precise();
        }
        let now = Instant::now();
        let mut core = Core::new(driver, clock, live, id as usize, true, counters, now);
        for &fid in ids {
            Counters::add_flow(&mut core.counts, fid);
            let key = core.add(ClientFlow::new(&spec, fid, fid as usize % n_endpoints, tag));
            debug_assert_eq!(key as u32 + 1, core.slots.len() as u32);
        }
        let largest = spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
        let kind = ClientKind {
            bufs: Buffers::new(largest, spec.protocol == Protocol::Udp),
            opts,
            endpoints,
            token,
            signals,
            greeting,
            run: Run::Setup,
            setup: None,
            queued: VecDeque::new(),
            connecting: 0,
            open: 0,
            flows: ids.len(),
            dials: (0..ids.len()).map(|_| None).collect(),
            connections: 0,
            socket: None,
            connect_error: None,
            clock0: now,
            udp_runs: true,
            spec,
        };
        ClientWorker {
            worker: Worker::new(core, kind),
        }
    }

    /// Connects the users, says so on `setup_tx`, waits for the start,
    /// carries the test; its report.
    pub(crate) fn run(mut self, setup_tx: mpsc::Sender<SetupEvent>) -> WorkerReport {
        let w = &mut self.worker;
        w.kind.setup = Some(setup_tx);
        let mut events = Events::with_capacity(1024);
        // Every flow asks to connect: the first MAX_CONNECTING do, the
        // others queue for a slot.
        for key in 0..w.core.slots.len() {
            w.drive(key, Instant::now());
        }
        if let Err(e) = w.run(&mut events) {
            w.kind
                .connect_error
                .get_or_insert(format!("event wait failed: {e}"));
        }
        let k = &mut w.kind;
        if k.run == Run::Setup {
            if let (Some(e), Some(tx)) = (k.connect_error.take(), k.setup.take()) {
                let _ = tx.send(SetupEvent::Failed(e));
            }
            return self.report();
        }
        let aborted = k.signals.aborted();
        w.core.end(aborted);
        for key in 0..w.core.slots.len() {
            w.core.close(key, 0, false);
        }
        self.report()
    }

    fn report(self) -> WorkerReport {
        let Worker { core, mut kind } = self.worker;
        let parked = core.parked_once();
        let n = u32::try_from(core.slots.len()).unwrap_or(u32::MAX);
        let mut parts: Parts<ClientFlow, Counters> = core.into_parts();
        let (cpu, placement, tcp) = parts.finish(n);
        let flow_totals = parts.counts.flow_totals();
        let _ = parked;
        WorkerReport {
            counters: parts.counts,
            cpu,
            placement,
            tcp,
            connections: kind.connections,
            socket: kind.socket.take(),
            flow_totals,
            #[cfg(test)]
            parked,
        }
    }
}

impl ClientKind {
    /// The test starts at `now` on `schedule`: every flow starts and is
    /// driven.
    fn start(&mut self, core: &mut Core<Self>, schedule: Schedule, now: Instant) {
        self.run = Run::Running(schedule);
        core.counts.set_schedule(schedule);
        core.set_schedule(schedule);
        let users = self.spec.users;
        for key in 0..core.slots.len() {
            core.slots[key].flow.start(now, schedule, users);
            core.driver().again(key);
        }
    }
}

impl Kind for ClientKind {
    type Flow = ClientFlow;
    type Counts = Counters;
    const TCP_INFO: bool = true;

    fn begin(&mut self, core: &mut Core<Self>, now: Instant) {
        if self.run == Run::Set {
            if let Some(s) = self.signals.schedule() {
                self.start(core, s, now);
            }
        }
    }

    fn stop(&mut self, _core: &Core<Self>, now: Instant) -> bool {
        match self.run {
            Run::Setup => {
                if self.connect_error.is_some() || self.signals.aborted() {
                    return true;
                }
                if self.open >= self.flows {
                    self.run = Run::Set;
                    if let Some(tx) = self.setup.take() {
                        let _ = tx.send(SetupEvent::Ready);
                    }
                }
                false
            }
            Run::Set => self.signals.aborted(),
            Run::Running(s) => {
                s.phase(now) == Phase::Over
                    || self.signals.aborted()
                    || self.signals.expired()
                    || self.open == 0
            }
        }
    }

    fn perform(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        step: Step,
        now: &mut Instant,
    ) -> Option<Told> {
        match step {
            Step::Connect(_) => self.connect(core, key, *now),
            Step::Carry(_) => Some(self.carry(core, key, now)),
            Step::Close(_) => self.close(core, key),
            _ => None,
        }
    }

    fn single(&self, _core: &Core<Self>) -> Option<Arc<Signals>> {
        match self.run {
            Run::Running(_) if self.flows == 1 => Some(self.signals.clone()),
            _ => None,
        }
    }
}
