//! A server worker: the one generic worker ([`generic::Worker`]) of a
//! [`ServerKind`], which accepts its share of a test's data connections
//! behind the preamble gate (or takes its users' datagrams on its UDP
//! socket) and carries their flows ([`ServerFlow`]), counting what it saw
//! itself.

mod accept;
mod drive;
mod flow;
mod udp;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_protocol::{DataToken, UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};
use mio::event::Event;
use mio::{Events, Interest, Token};
use slab::Slab;

use crate::counters::{Counters, FlowSlotId};
use crate::flow::step::{Step, Told};
use crate::flow::RrServer;
use crate::io::gate::{PreambleGate, Presented, SessionPreamble};
use crate::io::socket::{Conn, Listener, Settings};
use crate::io::stream::StreamHalves;
use crate::io::{accept_behind, AcceptRetry, Behind};
use crate::live::LiveStats;
use crate::worker::driver::Driver;
use crate::worker::generic::{self, Core, Kind, KIND_TOKENS};
use crate::worker::signals::Signals;
use crate::worker::{Buffers, SocketFacts, WindowClock, WorkerReport};

use flow::{Logic, ServerFlow};

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

/// A worker's data source.
pub(crate) enum Source {
    /// A TCP or Unix listener.
    Listener(Listener),
    /// A UDP socket.
    Udp(mio::net::UdpSocket),
}

/// What a server worker keeps beside its flows: its data source, the
/// connections behind the gate (outside the flows, under tokens from
/// [`KIND_TOKENS`]), which flows are its own and connected, and its UDP
/// flows by user.
pub(crate) struct ServerKind {
    spec: TestSpec,
    opts: Settings,
    token: DataToken,
    signals: Arc<Signals>,
    source: Source,
    /// Connections accepted, under token `KIND_TOKENS + k`: behind the
    /// gate, or through it (their flow's, which their events drive).
    pending: Slab<Pending>,
    /// Their gate.
    gate: PreambleGate,
    /// When to take again what an accept stopped at (out of descriptors).
    accept_retry: AcceptRetry,
    bufs: Buffers,
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
    /// Whether the test started (its schedule came).
    started: bool,
    /// The datagram socket's state.
    udp: udp::UdpState,
}

/// A connection accepted, under the worker's token `KIND_TOKENS + k`.
enum Pending {
    /// It has not presented its preamble yet.
    Gate(Conn),
    /// Through the gate: flow `key`'s connection.
    Flow(usize),
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

/// A server worker: the generic worker of a [`ServerKind`].
pub(crate) struct Worker(generic::Worker<ServerKind>);

impl Worker {
    pub(crate) fn new(s: Setup) -> Self {
        let largest = s.spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
        let udp = s.spec.protocol == Protocol::Udp;
        let threads = s.workers.max(1);
        let expected = s.users / threads + usize::from(s.index < s.users % threads);
        let cap = crate::io::gate::preamble_cap(expected, 0);
        let now = Instant::now();
        let core = Core::new(
            s.driver,
            s.clock,
            s.live,
            s.index,
            false,
            Counters::new(false),
            now,
        );
        let kind = ServerKind {
            gate: PreambleGate::new(SessionPreamble(s.token), cap, s.preamble_timeout),
            accept_retry: AcceptRetry::default(),
            opts: s.opts,
            token: s.token,
            signals: s.signals,
            source: s.source,
            pending: Slab::new(),
            bufs: Buffers::new(largest, udp),
            connections: 0,
            slots: HashMap::new(),
            open: Vec::new(),
            connected: 0,
            workers: threads,
            udp_peer: s.udp_peer,
            socket: None,
            index: s.index,
            expected,
            started: false,
            // Registered for room too if it carries streams (server.rs).
            udp: udp::UdpState::new(&s.spec),
            spec: s.spec,
        };
        Worker(generic::Worker::new(core, kind))
    }

    pub(crate) fn run(self) -> WorkerReport {
        let mut w = self.0;
        let _ = w.run(&mut Events::with_capacity(1024));
        let generic::Worker { mut core, kind } = w;
        core.end(kind.signals.aborted());
        #[cfg(test)]
        let parked = core.parked_once();
        let mut parts = core.into_parts();
        let flows = u32::try_from(parts.counts.flow_count()).unwrap_or(u32::MAX);
        let (cpu, placement, tcp) = parts.finish(flows);
        WorkerReport {
            counters: parts.counts,
            cpu,
            placement,
            tcp,
            connections: kind.connections,
            socket: kind.socket,
            flow_totals: Vec::new(),
            #[cfg(test)]
            parked,
        }
    }
}

impl Kind for ServerKind {
    type Flow = ServerFlow;
    type Counts = Counters;
    const TCP_INFO: bool = true;

    fn begin(&mut self, core: &mut Core<Self>, now: Instant) {
        if !self.started {
            if let Some(s) = self.signals.schedule() {
                self.start(core, s, now);
            }
        }
        self.expire_preambles(core, now);
        if self.accept_retry.due(now) {
            self.accept_all(core);
        }
    }

    fn stop(&mut self, core: &Core<Self>, now: Instant) -> bool {
        if core
            .schedule()
            .is_some_and(|s| now > s.drain_until + SAFETY_MARGIN)
        {
            return true;
        }
        self.signals.finishing() || self.signals.aborted()
    }

    fn perform(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        step: Step,
        now: &mut Instant,
    ) -> Option<Told> {
        match step {
            Step::Carry(c) => Some(self.carry(core, key, c, now)),
            Step::Close(c) => Some(self.close(core, key, c)),
            _ => None,
        }
    }

    fn event(&mut self, core: &mut Core<Self>, event: &Event, now: Instant) {
        if event.token() == LISTENER {
            if event.is_readable() {
                match &self.source {
                    Source::Listener(_) => self.accept_all(core),
                    Source::Udp(_) => self.receive_udp(core, now),
                }
            }
            if event.is_writable() {
                self.udp_writable(core);
            }
            return;
        }
        if let Some(k) = event.token().0.checked_sub(KIND_TOKENS) {
            self.read_preamble(core, k, now);
        }
    }

    fn route(&self, token: usize) -> Option<usize> {
        match self.pending.get(token.checked_sub(KIND_TOKENS)?)? {
            Pending::Flow(key) => Some(*key),
            Pending::Gate(_) => None,
        }
    }

    fn done(&mut self, core: &mut Core<Self>, key: usize) {
        // Its connection is closed: nothing of it is kept.
        core.remove(key);
    }

    fn deadline(&self, _core: &Core<Self>) -> Option<Instant> {
        [
            self.gate.next_deadline(),
            self.accept_retry.deadline(),
            self.udp.again_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn single(&self, core: &Core<Self>) -> Option<Arc<Signals>> {
        // The one request/response flow of a worker that carries exactly
        // one, once it runs, waits in its own read rather than in the event
        // wait (one system call less per transaction, a direct wake-up).
        (self.expected == 1 && self.started && !core.busy_polls()).then(|| self.signals.clone())
    }

    fn turned(&mut self, core: &mut Core<Self>, now: Instant) {
        if self.udp.again_at.take().is_some() {
            self.receive_udp(core, now);
        }
    }
}

impl ServerKind {
    /// The test starts at `now` on schedule `s`: the streams' halves start
    /// and every flow is driven.
    fn start(&mut self, core: &mut Core<Self>, s: crate::schedule::Schedule, now: Instant) {
        self.started = true;
        core.set_schedule(s);
        core.counts.set_schedule(s);
        let keys: Vec<usize> = core.slots.iter().map(|(k, _)| k).collect();
        for k in keys {
            if let Some(slot) = core.slots.get_mut(k) {
                match &mut slot.flow.logic {
                    Logic::Stream(halves) => halves.start(now),
                    Logic::UdpStream { halves, .. } => halves.start(now),
                    _ => {}
                }
            }
            core.driver().again(k);
        }
        let pending: Vec<usize> = (self.pending.iter())
            .filter(|(_, p)| matches!(p, Pending::Gate(_)))
            .map(|(k, _)| k)
            .collect();
        for k in pending {
            self.read_preamble(core, k, now);
        }
    }
}
