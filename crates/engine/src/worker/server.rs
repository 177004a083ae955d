//! A server worker: one event loop that accepts its share of a test's data
//! connections behind the preamble gate (or takes its users' datagrams on
//! its UDP socket) and drives their flows, counting what it saw itself.

mod accept;
mod drive;
mod udp_stream;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_wire::{DataToken, UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};
use mio::{Events, Interest, Token};
use slab::Slab;

use crate::counters::{Counters, FlowSlotId};
use crate::flow::RrServer;
use crate::io::gate::{PreambleGate, Presented, SessionPreamble};
use crate::io::socket::{Conn, Listener, Settings};
use crate::io::stream::{StreamHalves, StreamIo};
use crate::io::{accept_next, Accept, AcceptRetry};
use crate::live::LiveStats;
use crate::schedule::Schedule;
use crate::worker::driver::{self, Driver, Flows, Turn};
use crate::worker::signals::{Parked, Signals};
use crate::worker::window::{Connections, Publish, Window};
use crate::worker::{Buffers, SocketFacts, WindowClock, WorkerReport};

/// The token of a worker's data source (its listener or UDP socket).
pub(crate) const LISTENER: Token = Token(usize::MAX - 1);
/// Workers give up on their own this long after the drain deadline, whatever
/// the session says.
const SAFETY_MARGIN: Duration = Duration::from_secs(10);

/// What a server worker is given.
pub(crate) struct Setup {
    /// Its number among the side's workers.
    pub index: usize,
    /// Workers of the side.
    pub workers: usize,
    /// Users of the test.
    pub users: usize,
    pub spec: TestSpec,
    pub opts: Settings,
    pub token: DataToken,
    pub signals: Arc<Signals>,
    pub driver: Driver,
    /// Its data source, registered with `driver` under [`LISTENER`].
    pub source: Source,
    pub clock: WindowClock,
    /// How long an accepted connection may take to present its preamble.
    pub preamble_timeout: Duration,
    pub live: Option<Arc<LiveStats>>,
    pub udp_peer: Option<IpAddr>,
}

enum Logic {
    /// Behind the preamble gate.
    Preamble,
    Rr(RrServer),
    Crr(RrServer),
    Stream(StreamHalves),
}

struct ServerFlow {
    conn: Conn,
    logic: Logic,
    /// Its socket blocks (the worker's single flow waits in its read) and is
    /// parked in the signals, so that a stop ends the wait.
    parked: Option<Parked>,
    /// Its connection's retransmits when the window opened (0 for one
    /// accepted since).
    retrans_before: u32,
    /// Where its traffic is counted (set once its preamble names the flow).
    slot: FlowSlotId,
}

/// A worker's data source.
pub(crate) enum Source {
    /// A TCP or Unix listener.
    Listener(Listener),
    /// A UDP socket.
    Udp(mio::net::UdpSocket),
}

/// A server worker's flows as its window reads their connections: those
/// through the gate.
struct Tracked<'a>(&'a mut Slab<ServerFlow>);

impl Connections for Tracked<'_> {
    fn each_tcp(&mut self, mut f: impl FnMut(&Conn, &mut u32)) {
        for (_, flow) in self.0.iter_mut() {
            if flow.conn.is_tcp() && !matches!(flow.logic, Logic::Preamble) {
                f(&flow.conn, &mut flow.retrans_before);
            }
        }
    }

    fn retransmits(&self) -> impl Iterator<Item = Option<u32>> {
        // The server publishes its totals only.
        std::iter::empty()
    }
}

pub(crate) struct Worker {
    spec: TestSpec,
    opts: Settings,
    token: DataToken,
    signals: Arc<Signals>,
    io: Driver,
    source: Source,
    flows: Slab<ServerFlow>,
    /// Connections accepted that have not presented their preamble yet.
    gate: PreambleGate,
    /// When to take again what an accept stopped at (out of descriptors).
    accept_retry: AcceptRetry,
    bufs: Buffers,
    counters: Counters,
    window: Window,
    schedule: Option<Schedule>,
    connections: u64,
    /// Each flow's counting slot, by flow id.
    slots: HashMap<u32, FlowSlotId>,
    /// Whether each slot's flow has a connection open now: a flow holds at
    /// most one at a time (a crr flow's next connection comes after the
    /// server closed the last), so a token admits no more connections than
    /// its test's users.
    open: Vec<bool>,
    /// How many of `open` are true: the flows connected now.
    connected: usize,
    /// Workers of this side: flow `i` is worker `i % workers`'s.
    workers: usize,
    udp_peer: Option<IpAddr>,
    socket: Option<SocketFacts>,
    index: usize,
    /// Flows this worker will carry (users `i` with `i % workers == index`).
    expected: usize,
    /// When this drive's last read of a request ended, if it read one.
    last_read: Option<Instant>,
    /// A UDP stream's flows, by slot.
    udp: udp_stream::UdpStreams,
    /// Whether a flow of this worker went on the single-flow fast path.
    #[cfg(test)]
    parked: bool,
}

fn new_logic(spec: &TestSpec, flow: u32) -> Logic {
    // An open loop with several outstanding sends requests ahead of their
    // answers.
    let pipelined = spec.offered.is_some_and(|l| l.max_outstanding > 1);
    match &spec.workload {
        Workload::Stream { message, direction } => {
            Logic::Stream(StreamHalves::for_side(message.0, *direction, false))
        }
        Workload::Crr { request, response } => Logic::Crr(RrServer::new(request.0, response.0)),
        other => {
            let sizes = other
                .transaction_sizes()
                .unwrap_or(TransactionSizes::Fixed {
                    request: 1,
                    response: 1,
                });
            Logic::Rr(RrServer::with_sizes(sizes, flow).pipelining(pipelined))
        }
    }
}

enum Io {
    Blocked,
    /// Still ready: drive again soon, without waiting for an event.
    Again,
    Close,
}

impl Worker {
    pub(crate) fn new(s: Setup) -> Self {
        let largest = s.spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
        let udp = s.spec.protocol == Protocol::Udp;
        let threads = s.workers.max(1);
        let expected = s.users / threads + usize::from(s.index < s.users % threads);
        let cap = crate::io::gate::preamble_cap(expected, 0);
        Worker {
            gate: PreambleGate::new(SessionPreamble(s.token), cap, s.preamble_timeout),
            accept_retry: AcceptRetry::default(),
            spec: s.spec,
            opts: s.opts,
            token: s.token,
            signals: s.signals,
            io: s.driver,
            source: s.source,
            flows: Slab::new(),
            bufs: Buffers::new(largest, udp),
            counters: Counters::new(false),
            window: Window::new(s.clock, s.live, s.index, Publish::Totals, Instant::now()),
            schedule: None,
            connections: 0,
            slots: HashMap::new(),
            open: Vec::new(),
            connected: 0,
            workers: threads,
            udp_peer: s.udp_peer,
            socket: None,
            index: s.index,
            expected,
            last_read: None,
            udp: udp_stream::UdpStreams::default(),
            #[cfg(test)]
            parked: false,
        }
    }

    pub(crate) fn run(mut self) -> WorkerReport {
        let mut events = Events::with_capacity(1024);
        let mut serving = Serving { w: &mut self };
        let _ = driver::run(&mut serving, &mut events);
        let aborted = self.signals.aborted();
        self.window
            .end(&mut self.counters, &mut Tracked(&mut self.flows), aborted);
        let keys: Vec<usize> = self.flows.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close(k);
        }
        let flows = u32::try_from(self.counters.flow_count()).unwrap_or(u32::MAX);
        let (cpu, placement, tcp) = self.window.finish(flows);
        WorkerReport {
            counters: self.counters,
            cpu,
            placement,
            tcp,
            connections: self.connections,
            socket: self.socket,
            flow_totals: Vec::new(),
            #[cfg(test)]
            parked: self.parked,
        }
    }

    /// The one request/response flow of a worker that carries exactly one,
    /// once it runs: it then waits in its own read rather than in the event
    /// wait (one system call less per transaction, a direct wake-up).
    fn single_flow(&mut self) -> Option<usize> {
        if self.io.busy_polls() || self.expected != 1 || self.schedule.is_none() {
            return None;
        }
        if self.flows.len() != 1 {
            return None;
        }
        let (k, f) = self.flows.iter_mut().next()?;
        if !matches!(f.logic, Logic::Rr(_)) {
            return None;
        }
        if f.parked.is_none() {
            // The flow stays on this path until it closes.
            f.parked = Some(self.io.park(&mut f.conn, Token(k), &self.signals)?);
            #[cfg(test)]
            {
                self.parked = true;
            }
        }
        Some(k)
    }

    fn begin(&mut self, s: Schedule, now: Instant) {
        self.schedule = Some(s);
        self.counters.set_schedule(s);
        self.start_udp_streams(now);
        let keys: Vec<usize> = self.flows.iter().map(|(k, _)| k).collect();
        for k in keys {
            if let Some(f) = self.flows.get_mut(k) {
                if let Logic::Stream(halves) = &mut f.logic {
                    halves.start(now);
                }
            }
            self.drive(k, now);
        }
    }
}

/// A server worker's flows as the driver's loop turns them.
struct Serving<'a> {
    w: &'a mut Worker,
}

impl Flows for Serving<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.w.io
    }

    fn turn(&mut self, now: Instant) -> Turn {
        let w = &mut *self.w;
        if w.schedule.is_none() {
            if let Some(s) = w.signals.schedule() {
                w.begin(s, now);
            }
        }
        let flows = &mut Tracked(&mut w.flows);
        w.window
            .turn(now, w.schedule.as_ref(), &mut w.counters, flows);
        if let Some(s) = w.schedule {
            if now > s.drain_until + SAFETY_MARGIN {
                return Turn::Stop;
            }
        }
        if w.signals.finishing() || w.signals.aborted() {
            return Turn::Stop;
        }
        w.expire_preambles(now);
        if w.accept_retry.due(now) {
            w.accept_all();
        }
        if let Some(k) = w.single_flow() {
            w.drive(k, now);
            // The next turn reuses the time the request's read ended at.
            return Turn::Again(w.last_read.take());
        }
        w.fire_udp_timers(now);
        let deadline = [w.gate.next_deadline(), w.accept_retry.deadline()]
            .into_iter()
            .flatten()
            .min();
        Turn::Wait(w.io.timeout(now, w.schedule.as_ref(), deadline, !w.udp.again.is_empty()))
    }

    fn event(&mut self, event: &mio::event::Event, now: Instant) {
        match event.token() {
            LISTENER => {
                if event.is_readable() {
                    self.w.on_source();
                }
                if event.is_writable() {
                    self.w.udp_writable();
                }
            }
            Token(k) => self.w.drive(k, now),
        }
    }

    fn again(&mut self, key: usize, now: Instant) {
        self.w.drive(key, now);
    }

    fn turned(&mut self, _now: Instant) {
        self.w.udp_again();
    }
}
