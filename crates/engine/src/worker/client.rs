//! A client worker: one event loop that connects its share of the users and
//! drives their flows.

mod connect;
mod drive;
mod udp_stream;

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_wire::{DataToken, Preamble, UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};
use mio::{Events, Interest, Token};

use crate::counters::Counters;
use crate::flow::udp_stream::UdpStreamHalves;
use crate::flow::{OpenLoop, RrClient, Want};
use crate::io::socket::{tcp_connect, udp_connect, unix_connect, Conn, DataEndpoints, Settings};
use crate::io::stream::{StreamHalves, StreamIo};
use crate::io::{Dial, DialError, Register};
use crate::live::LiveStats;
use crate::open_tally::OpenTally;
use crate::schedule::{Phase, Schedule};
use crate::worker::driver::{self, Driver, Flows, Polled, Turn};
use crate::worker::signals::{Parked, Signals};
use crate::worker::window::{Connections, Publish, Window};
use crate::worker::{retransmits_so_far, Buffers, SocketFacts, WindowClock, WorkerReport};

/// What a worker says during setup.
pub(crate) enum SetupEvent {
    Ready,
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for a connect slot.
    Queued,
    /// Connecting, then greeting the server (its preamble).
    Dialing(Dial),
    /// A UDP stream's registration sent, its answer awaited.
    Registering(Register),
    /// Carrying payload.
    Open,
    /// Connect-per-transaction: response read, waiting for the server's close.
    AwaitClose,
    /// Waiting for a timer (reconnect backoff).
    Waiting,
    /// Gone.
    Closed,
}

enum Logic {
    Rr(RrClient),
    Crr(RrClient),
    Udp(RrClient),
    Stream(StreamHalves),
    /// Boxed: its receiver's bitmap makes it the largest by far.
    UdpStream(Box<UdpStreamHalves>),
    /// An open-loop user, and the time its timer is armed for (and
    /// whether to the microsecond).
    Open {
        user: Box<OpenLoop>,
        armed: Option<(Instant, bool)>,
    },
}

struct Flow {
    id: u32,
    endpoint: usize,
    /// Its connection (a connected UDP socket for UDP).
    conn: Option<Conn>,
    stage: Stage,
    logic: Logic,
    seq: u64,
    /// Its connection's retransmits when the window opened (0 for one
    /// opened since).
    retrans_before: u32,
    /// Its connection's retransmits when it closed, for the live seconds.
    retrans_at_close: Option<u32>,
}

impl Flow {
    /// Its TCP connection's retransmits so far, or when it closed.
    fn retransmits(&self) -> Option<u32> {
        match self.conn.as_ref() {
            Some(c) if c.is_tcp() => Some(retransmits_so_far(c.as_raw_fd())),
            Some(_) => None,
            None => self.retrans_at_close,
        }
    }
}

/// A client worker's flows as its window reads their connections.
struct Tracked<'a>(&'a mut Vec<Flow>);

impl Connections for Tracked<'_> {
    fn each_tcp(&mut self, mut f: impl FnMut(&Conn, &mut u32)) {
        for flow in self.0.iter_mut() {
            if let Some(c) = flow.conn.as_ref().filter(|c| c.is_tcp()) {
                f(c, &mut flow.retrans_before);
            }
        }
    }

    fn retransmits(&self) -> impl Iterator<Item = Option<u32>> {
        self.0.iter().map(Flow::retransmits)
    }
}

/// One client worker's state.
pub(crate) struct Worker {
    _id: u32,
    spec: TestSpec,
    opts: Settings,
    endpoints: DataEndpoints,
    token: DataToken,
    /// Its one request/response flow's socket blocks (see `single_flow_socket`):
    /// a read or write that moved only part of a message returns to the loop.
    blocking: bool,
    signals: Arc<Signals>,
    io: Driver,
    flows: Vec<Flow>,
    queued: VecDeque<usize>,
    connecting: usize,
    open: usize,
    bufs: Buffers,
    counters: Counters,
    window: Window,
    connections: u64,
    socket: Option<SocketFacts>,
    connect_error: Option<String>,
    greeting: Option<Arc<[u8]>>,
    /// UDP stream flows whose registration is unanswered.
    registering: Vec<usize>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
    /// Whether its UDP streams send runs of datagrams in one call (until the
    /// kernel refuses one).
    udp_runs: bool,
}

fn new_logic(spec: &TestSpec, flow: u32, tag: u32) -> Logic {
    let (w, protocol) = (&spec.workload, spec.protocol);
    if let Workload::Stream { message, direction } = w {
        if let Some(rate) = spec.stream_rate() {
            return Logic::UdpStream(Box::new(UdpStreamHalves::for_side(
                tag,
                flow,
                message.as_usize(),
                *direction,
                rate,
                true,
            )));
        }
        return Logic::Stream(StreamHalves::for_side(message.0, *direction, true));
    }
    let sizes = w.transaction_sizes().unwrap_or(TransactionSizes::Fixed {
        request: 1,
        response: 1,
    });
    if let Some(load) = &spec.offered {
        let seed = u64::from(tag) << 32 | u64::from(flow);
        let user = OpenLoop::new(sizes, flow, spec.users, load, seed, Instant::now());
        return Logic::Open {
            user: Box::new(user),
            armed: None,
        };
    }
    let rr = RrClient::with_sizes(sizes, flow);
    match (w, protocol) {
        (_, Protocol::Udp) => Logic::Udp(rr),
        (Workload::Crr { .. }, _) => Logic::Crr(rr),
        _ => Logic::Rr(rr),
    }
}

enum Io {
    /// Nothing more to do now.
    Blocked,
    /// Still ready: drive again soon, without waiting for an event.
    Again,
    /// The flow is finished; close it.
    Finished,
    /// The connection failed.
    Failed(io::Error),
    /// The peer closed the connection.
    Eof,
}

impl Worker {
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
        let flows: Vec<Flow> = ids
            .iter()
            .map(|&fid| Flow {
                id: fid,
                endpoint: fid as usize % n_endpoints,
                conn: None,
                stage: Stage::Queued,
                logic: new_logic(&spec, fid, token.session_tag()),
                seq: 0,
                retrans_before: 0,
                retrans_at_close: None,
            })
            .collect();
        // Flow i counts in slot i.
        let mut counters = Counters::new(true);
        for f in &flows {
            counters.add_flow(f.id);
        }
        let mut driver = driver;
        if spec.offered.is_some() {
            let seed = u64::from(token.session_tag()) << 32 | u64::from(id);
            counters.open = Some(Box::new(OpenTally::new(seed)));
            // Its arrivals are due to the microsecond. Without the precise
            // timer (no timerfd) it keeps them to the millisecond: the
            // pacing error it records says so.
            let _ = driver.precise();
        }
        let largest = spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
        Worker {
            _id: id,
            opts,
            endpoints,
            token,
            blocking: false,
            signals,
            io: driver,
            queued: (0..flows.len()).collect(),
            flows,
            connecting: 0,
            open: 0,
            bufs: Buffers::new(largest, spec.protocol == Protocol::Udp),
            counters,
            window: Window::new(clock, live, id as usize, Publish::Seconds, Instant::now()),
            connections: 0,
            socket: None,
            connect_error: None,
            greeting,
            spec,
            registering: Vec::new(),
            clock0: Instant::now(),
            udp_runs: true,
        }
    }

    pub(crate) fn run(mut self, setup_tx: mpsc::Sender<SetupEvent>) -> WorkerReport {
        let mut events = Events::with_capacity(1024);
        // Setup: connect every flow, at most MAX_CONNECTING at a time.
        self.fill_connect_slots();
        let mut connecting = Connecting {
            w: &mut self,
            failed: None,
        };
        if let Err(e) = driver::run(&mut connecting, &mut events) {
            connecting.failed = Some(format!("event wait failed: {e}"));
        }
        if let Some(e) = connecting.failed {
            let _ = setup_tx.send(SetupEvent::Failed(e));
            return self.report();
        }
        if self.open < self.flows.len() {
            return self.report(); // aborted
        }
        let _ = setup_tx.send(SetupEvent::Ready);
        drop(setup_tx);
        // Wait for the start.
        let mut schedule = None;
        let signals = &self.signals;
        let mut starting = Polled::new(&mut self.io, |_| {
            if signals.aborted() {
                return Turn::Stop;
            }
            schedule = signals.schedule();
            match schedule {
                Some(_) => Turn::Stop,
                None => Turn::Wait(crate::worker::MAX_SLEEP),
            }
        });
        let _ = driver::run(&mut starting, &mut events);
        let Some(schedule) = schedule else {
            return self.report();
        };
        self.counters.set_schedule(schedule);
        let now = Instant::now();
        for i in 0..self.flows.len() {
            self.start_flow(i, now, schedule);
            self.drive(i, schedule, now);
        }
        // One request/response flow on this worker: it waits in its own
        // read rather than in the event wait (one system call less per
        // transaction, and the wake-up comes straight from the socket). Its
        // socket is parked in the signals, so that a stop ends the wait.
        let parked = self.park_single_flow();
        let single = parked.is_some();
        self.blocking = single;
        // Run until every flow is closed or the drain deadline passes. The
        // single flow's turns reuse the time its last read ended at: one
        // clock read per transaction.
        let mut running = Running {
            w: &mut self,
            schedule,
            single,
        };
        let _ = driver::run(&mut running, &mut events);
        drop(parked);
        let aborted = self.signals.aborted();
        self.window
            .end(&mut self.counters, &mut Tracked(&mut self.flows), aborted);
        for i in 0..self.flows.len() {
            self.close(i);
        }
        let report = self.report();
        #[cfg(test)]
        let report = WorkerReport {
            parked: single,
            ..report
        };
        report
    }

    /// The socket of this worker's one request/response flow, if that is
    /// what it carries, on the driver's blocking fast path.
    fn park_single_flow(&mut self) -> Option<Parked> {
        if self.flows.len() != 1 {
            return None;
        }
        let f = &mut self.flows[0];
        if !matches!(f.logic, Logic::Rr(_)) || f.stage != Stage::Open {
            return None;
        }
        let conn = f.conn.as_mut()?;
        self.io.park(conn, Token(0), &self.signals)
    }

    fn report(&mut self) -> WorkerReport {
        let (cpu, placement, tcp) = self.window.finish(self.flows.len() as u32);
        let flow_totals = self.counters.flow_totals();
        WorkerReport {
            counters: std::mem::replace(&mut self.counters, Counters::new(false)),
            cpu,
            placement,
            tcp,
            connections: self.connections,
            socket: self.socket.take(),
            flow_totals,
            #[cfg(test)]
            parked: false,
        }
    }

    fn on_event(&mut self, i: usize, schedule: Schedule, now: Instant) {
        match self.flows[i].stage {
            Stage::Dialing(_) => match self.advance_connect(i) {
                Ok(true) => {
                    let now = Instant::now();
                    if let Logic::Crr(rr) = &mut self.flows[i].logic {
                        if !rr.in_transaction() {
                            rr.start(now);
                        }
                    }
                    self.drive(i, schedule, now);
                }
                Ok(false) => {}
                Err(e) => self.crr_failed(i, e, schedule),
            },
            Stage::Open => {
                self.drive(i, schedule, now);
            }
            Stage::AwaitClose => self.await_close(i, schedule),
            Stage::Queued | Stage::Waiting | Stage::Closed | Stage::Registering { .. } => {}
        }
    }

    fn fire_timers(&mut self, now: Instant, schedule: Schedule) {
        while let Some((at, i, seq)) = self.io.timers.due(now) {
            let f = &mut self.flows[i];
            if f.seq != seq {
                continue;
            }
            match (&mut f.logic, f.stage) {
                (Logic::Udp(rr), Stage::Open) if rr.in_transaction() => {
                    // The datagram or its answer was lost.
                    let id = f.id;
                    self.counters
                        .error(now, || format!("flow {id}: udp transaction timed out"));
                    f.seq += 1;
                    if schedule.phase(now) >= Phase::Draining {
                        rr.finish();
                        self.close(i);
                    } else {
                        rr.lost(now);
                        let seq = f.seq;
                        self.io.timers.arm(now + self.spec.udp_timeout, i, seq);
                        self.drive(i, schedule, now);
                    }
                }
                (Logic::Crr(_), Stage::Waiting) => self.reconnect(i, now, schedule),
                // Only the timer armed last: one left behind when the same
                // time was armed again, precise or not, would drive the
                // flow for nothing (a read that finds nothing).
                (Logic::Open { armed, .. }, Stage::Open) if armed.is_some_and(|(a, _)| a == at) => {
                    *armed = None;
                    self.drive(i, schedule, now);
                }
                (Logic::UdpStream(h), Stage::Open) => {
                    if h.armed == Some(at) {
                        h.armed = None;
                    }
                    self.drive(i, schedule, now);
                }
                _ => {}
            }
        }
    }
}

/// A client worker connecting its flows, at most `MAX_CONNECTING` at a
/// time, until all are open, one fails, or the side is aborted.
struct Connecting<'a> {
    w: &'a mut Worker,
    /// Why the setup failed.
    failed: Option<String>,
}

impl Flows for Connecting<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.w.io
    }

    fn turn(&mut self, _now: Instant) -> Turn {
        if self.w.open >= self.w.flows.len() {
            return Turn::Stop;
        }
        if let Some(e) = self.w.connect_error.take() {
            self.failed = Some(e);
            return Turn::Stop;
        }
        if self.w.signals.aborted() {
            return Turn::Stop;
        }
        Turn::Wait(crate::worker::MAX_SLEEP)
    }

    fn event(&mut self, event: &mio::event::Event, _now: Instant) {
        self.w.advance_setup(event.token().0);
    }

    fn turned(&mut self, now: Instant) {
        self.w.retry_registrations(now);
        self.w.fill_connect_slots();
    }
}

/// A client worker from the start: its flows as the driver's loop turns them.
struct Running<'a> {
    w: &'a mut Worker,
    schedule: Schedule,
    /// The worker carries one request/response flow, parked on the blocking
    /// fast path.
    single: bool,
}

impl Flows for Running<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.w.io
    }

    fn turn(&mut self, now: Instant) -> Turn {
        let (w, schedule) = (&mut *self.w, self.schedule);
        let flows = &mut Tracked(&mut w.flows);
        w.window.turn(now, Some(&schedule), &mut w.counters, flows);
        let over = schedule.phase(now) == Phase::Over;
        if over || w.signals.aborted() || w.signals.expired() || w.open == 0 {
            return Turn::Stop;
        }
        if self.single && w.flows[0].stage == Stage::Open {
            return Turn::Again(Some(w.drive(0, schedule, now)));
        }
        w.fire_timers(now, schedule);
        Turn::Wait(w.io.timeout(now, Some(&schedule), None, false))
    }

    fn event(&mut self, event: &mio::event::Event, now: Instant) {
        let i = event.token().0;
        if i < self.w.flows.len() {
            self.w.on_event(i, self.schedule, now);
        }
    }

    fn again(&mut self, key: usize, now: Instant) {
        self.w.drive(key, self.schedule, now);
    }
}
