//! A client worker: one event loop that connects its share of the users and
//! drives their flows.

mod udp_stream;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_metrics::TcpInfoAggregator;
use linkperf_wire::{DataToken, Preamble, UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};
use mio::{Events, Interest, Poll, Token};

use crate::counters::Counters;
use crate::flow::{RrClient, Want};
use crate::live::{LiveStats, Publisher};
use crate::schedule::{Phase, Schedule};
use crate::signals::Signals;
use crate::stream_io::{StreamHalves, StreamIo};
use crate::transport::{tcp_connect, udp_connect, unix_connect, Conn, DataEndpoints, DataOptions};
use crate::udp_stream::UdpStreamHalves;
use crate::worker::{
    poll_timeout, retransmits_so_far, sample_tcp_info, Buffers, SocketFacts, WindowClock,
    WorkerReport, WAKER,
};

/// Connects started but not finished, per worker, at most.
const MAX_CONNECTING: usize = 256;
/// Delay before a connect-per-transaction flow retries after a failed connect.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(5);

/// What a worker says during setup.
pub(crate) enum SetupEvent {
    Ready,
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for a connect slot.
    Queued,
    /// Connect in progress.
    Connecting,
    /// Sending the preamble; this many bytes written.
    Preamble(usize),
    /// A UDP stream's registration sent, its answer awaited: sent again at
    /// `next`, given up at `deadline`.
    Registering {
        /// When to send it again.
        next: Instant,
        /// When to give up.
        deadline: Instant,
    },
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
}

struct Flow {
    id: u32,
    endpoint: usize,
    conn: Option<Conn>,
    udp: Option<mio::net::UdpSocket>,
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

/// One client worker's state.
pub(crate) struct Worker {
    _id: u32,
    spec: TestSpec,
    opts: DataOptions,
    endpoints: DataEndpoints,
    token: DataToken,
    busy_poll: bool,
    /// Its one request/response flow's socket blocks (see `single_flow_socket`):
    /// a read or write that moved only part of a message returns to the loop.
    blocking: bool,
    signals: Arc<Signals>,
    poll: Poll,
    flows: Vec<Flow>,
    queued: VecDeque<usize>,
    connecting: usize,
    open: usize,
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    bufs: Buffers,
    counters: Counters,
    clock: WindowClock,
    tcp: TcpInfoAggregator,
    connections: u64,
    socket: Option<SocketFacts>,
    connect_error: Option<String>,
    /// Flows whose last drive stopped at its budget with the socket still ready.
    again: Vec<usize>,
    index: usize,
    live: Option<Arc<LiveStats>>,
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
        opts: DataOptions,
        endpoints: DataEndpoints,
        token: DataToken,
        busy_poll: bool,
        signals: Arc<Signals>,
        poll: Poll,
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
                udp: None,
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
        let largest = spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
        Worker {
            _id: id,
            opts,
            endpoints,
            token,
            busy_poll,
            blocking: false,
            signals,
            poll,
            queued: (0..flows.len()).collect(),
            flows,
            connecting: 0,
            open: 0,
            timers: BinaryHeap::new(),
            bufs: Buffers::new(largest, spec.protocol == Protocol::Udp),
            counters,
            clock,
            tcp: TcpInfoAggregator::new(),
            connections: 0,
            socket: None,
            connect_error: None,
            again: Vec::new(),
            index: id as usize,
            live,
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
        while self.open < self.flows.len() {
            if let Some(e) = self.connect_error.take() {
                let _ = setup_tx.send(SetupEvent::Failed(e));
                return self.report();
            }
            if self.signals.aborted() {
                return self.report();
            }
            if let Err(e) = self.poll.poll(&mut events, Some(crate::worker::MAX_SLEEP)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    let _ = setup_tx.send(SetupEvent::Failed(format!("event wait failed: {e}")));
                    return self.report();
                }
            }
            for ev in events.iter() {
                if ev.token() != WAKER {
                    self.advance_setup(ev.token().0);
                }
            }
            self.retry_registrations(Instant::now());
            self.fill_connect_slots();
        }
        let _ = setup_tx.send(SetupEvent::Ready);
        drop(setup_tx);
        // Wait for the start.
        let schedule = loop {
            if self.signals.aborted() {
                return self.report();
            }
            if let Some(s) = self.signals.schedule() {
                break s;
            }
            let _ = self.poll.poll(&mut events, Some(crate::worker::MAX_SLEEP));
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
        let signals = self.signals.clone();
        let parked = self.single_flow_socket().map(|fd| signals.park(fd));
        let single = parked.is_some();
        self.blocking = single;
        // Run until every flow is closed or the drain deadline passes. The
        // single flow's loop reuses the time its last read ended at: one
        // clock read per transaction.
        let mut publisher = Publisher::new(now);
        let mut last = None;
        loop {
            let now = last.take().unwrap_or_else(Instant::now);
            if let Some(live) = &self.live {
                if publisher.due(now) {
                    let flows = &self.flows;
                    let retransmits = || flows.iter().map(Flow::retransmits);
                    publisher.publish(live, self.index, &mut self.counters, now, retransmits);
                }
            }
            if self.clock.opening(&schedule, now) {
                self.mark_retransmits();
            }
            if self.clock.tick(&schedule, now) {
                self.read_tcp_info();
            }
            let phase = schedule.phase(now);
            if phase == Phase::Over || self.signals.aborted() || self.signals.expired() {
                break;
            }
            if self.open == 0 {
                break;
            }
            if single && self.flows[0].stage == Stage::Open {
                last = Some(self.drive(0, schedule, now));
                continue;
            }
            self.fire_timers(now, schedule);
            let timeout = if self.again.is_empty() {
                poll_timeout(
                    self.busy_poll,
                    now,
                    Some(&schedule),
                    self.timers.peek().map(|Reverse((t, _, _))| *t),
                )
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            let now = Instant::now();
            for ev in events.iter() {
                if ev.token() == WAKER {
                    continue;
                }
                let i = ev.token().0;
                if i < self.flows.len() {
                    self.on_event(i, schedule, now);
                }
            }
            for i in std::mem::take(&mut self.again) {
                self.drive(i, schedule, now);
            }
        }
        drop(parked);
        if self.signals.aborted() {
            // The seconds after this one never ran.
            self.counters.stop(Instant::now());
        }
        if !self.clock.closed {
            self.clock.close();
            self.read_tcp_info();
        }
        if let Some(live) = &self.live {
            let flows = &self.flows;
            let retransmits = || flows.iter().map(Flow::retransmits);
            publisher.publish_last(live, self.index, &mut self.counters, retransmits);
        }
        for i in 0..self.flows.len() {
            self.close(i);
        }
        self.report()
    }

    /// A duplicate of the socket of this worker's one request/response flow,
    /// now blocking and out of the event wait, if that is what it carries
    /// (and it does not busy-poll).
    fn single_flow_socket(&mut self) -> Option<std::os::fd::OwnedFd> {
        if self.busy_poll || self.flows.len() != 1 {
            return None;
        }
        let f = &mut self.flows[0];
        if !matches!(f.logic, Logic::Rr(_)) || f.stage != Stage::Open {
            return None;
        }
        let conn = f.conn.as_mut()?;
        let dup = conn.duplicate().ok()?;
        // Registered, every arrival would also wake the event wait's list
        // (a lock and a queue per packet) though nobody waits there now.
        self.poll.registry().deregister(conn.source()).ok()?;
        if conn.block(crate::worker::MAX_SLEEP).is_err() {
            // Back to the event wait, as it was.
            let both = Interest::READABLE | Interest::WRITABLE;
            let _ = self.poll.registry().register(conn.source(), Token(0), both);
            return None;
        }
        Some(dup)
    }

    fn report(&mut self) -> WorkerReport {
        let (cpu, placement) = self.clock.finish(self.flows.len() as u32);
        let flow_totals = self.counters.flow_totals();
        WorkerReport {
            counters: std::mem::replace(&mut self.counters, Counters::new(false)),
            cpu,
            placement,
            tcp: std::mem::take(&mut self.tcp),
            connections: self.connections,
            socket: self.socket.take(),
            flow_totals,
        }
    }

    /// Each connection's retransmits as the window opens.
    fn mark_retransmits(&mut self) {
        for f in &mut self.flows {
            if let Some(c) = &f.conn {
                if c.is_tcp() {
                    f.retrans_before = retransmits_so_far(c.as_raw_fd());
                }
            }
        }
    }

    fn read_tcp_info(&mut self) {
        for f in &self.flows {
            if let Some(c) = &f.conn {
                if c.is_tcp() {
                    sample_tcp_info(c.as_raw_fd(), f.retrans_before, &mut self.tcp);
                }
            }
        }
    }

    fn fill_connect_slots(&mut self) {
        while self.connecting < MAX_CONNECTING {
            let Some(i) = self.queued.pop_front() else {
                break;
            };
            if let Err(e) = self.begin_connect(i) {
                let f = &self.flows[i];
                self.connect_error = Some(format!(
                    "flow {} could not connect to {}: {e}",
                    f.id,
                    self.describe_endpoint(f.endpoint)
                ));
                return;
            }
        }
    }

    fn describe_endpoint(&self, i: usize) -> String {
        match &self.endpoints {
            DataEndpoints::Tcp(v) | DataEndpoints::Udp(v) => {
                v.get(i).map(|a| a.to_string()).unwrap_or_default()
            }
            DataEndpoints::Unix(v) => v.get(i).map(|n| format!("@{n}")).unwrap_or_default(),
        }
    }

    /// Starts connecting flow `i` (UDP sockets are ready at once).
    fn begin_connect(&mut self, i: usize) -> io::Result<()> {
        let ep = self.flows[i].endpoint;
        let token = Token(i);
        match &self.endpoints {
            DataEndpoints::Udp(addrs) => {
                let mut s = udp_connect(addrs[ep], &self.opts.socket)?;
                let stream = matches!(self.flows[i].logic, Logic::UdpStream(_));
                let interest = if stream {
                    // A stream's sender waits for room in its socket buffer.
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                self.poll.registry().register(&mut s, token, interest)?;
                if stream {
                    // Runs of datagrams in one read, where the kernel has them so.
                    crate::datagram_io::receive_runs(s.as_raw_fd());
                }
                if self.socket.is_none() {
                    self.socket = Some(SocketFacts::read(
                        s.as_raw_fd(),
                        s.local_addr().ok().map(|a| a.ip()),
                        false,
                    ));
                }
                let f = &mut self.flows[i];
                f.udp = Some(s);
                self.connections += 1;
                if stream {
                    self.connecting += 1;
                    self.register(i, Instant::now())?;
                } else {
                    f.stage = Stage::Open;
                    self.open += 1;
                }
                Ok(())
            }
            DataEndpoints::Tcp(addrs) => {
                let conn = tcp_connect(addrs[ep], &self.opts)?;
                self.register_connecting(i, conn)
            }
            DataEndpoints::Unix(names) => {
                let conn = unix_connect(&names[ep], &self.opts)?;
                self.register_connecting(i, conn)
            }
        }
    }

    fn register_connecting(&mut self, i: usize, mut conn: Conn) -> io::Result<()> {
        self.poll.registry().register(
            conn.source(),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let f = &mut self.flows[i];
        f.conn = Some(conn);
        f.retrans_before = 0;
        f.stage = Stage::Connecting;
        self.connecting += 1;
        self.connections += 1;
        Ok(())
    }

    /// Moves a connecting flow on: connect completion, then the preamble.
    /// Returns true once the flow is open.
    fn advance_connect(&mut self, i: usize) -> io::Result<bool> {
        let f = &mut self.flows[i];
        let Some(conn) = f.conn.as_mut() else {
            return Ok(false);
        };
        if f.stage == Stage::Connecting {
            if let Some(e) = conn.take_error()? {
                return Err(e);
            }
            if !conn.is_connected()? {
                return Ok(false);
            }
            f.stage = Stage::Preamble(0);
        }
        if let Stage::Preamble(done) = f.stage {
            let preamble = Preamble {
                token: self.token,
                flow: f.id,
                seq: f.seq,
            }
            .encode();
            let bytes: &[u8] = match &self.greeting {
                Some(g) => g,
                None => &preamble,
            };
            let mut done = done;
            while done < bytes.len() {
                match conn.write(&bytes[done..]) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "connection closed during preamble",
                        ))
                    }
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        f.stage = Stage::Preamble(done);
                        return Ok(false);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            f.stage = Stage::Open;
            if self.socket.is_none() {
                self.socket = Some(SocketFacts::read(
                    conn.as_raw_fd(),
                    conn.local_ip(),
                    conn.is_tcp(),
                ));
            }
            return Ok(true);
        }
        Ok(f.stage == Stage::Open)
    }

    fn advance_setup(&mut self, i: usize) {
        if i >= self.flows.len() {
            return;
        }
        if matches!(self.flows[i].stage, Stage::Registering { .. }) {
            self.await_registration(i);
            return;
        }
        match self.advance_connect(i) {
            Ok(true) => {
                self.connecting -= 1;
                self.open += 1;
            }
            Ok(false) => {}
            Err(e) => {
                let f = &self.flows[i];
                self.connect_error = Some(format!(
                    "flow {} could not connect to {}: {e}",
                    f.id,
                    self.describe_endpoint(f.endpoint)
                ));
            }
        }
    }

    fn start_flow(&mut self, i: usize, now: Instant, schedule: Schedule) {
        let f = &mut self.flows[i];
        match &mut f.logic {
            Logic::Rr(rr) | Logic::Crr(rr) | Logic::Udp(rr) => {
                rr.start(now);
                if let Logic::Udp(_) = f.logic {
                    let seq = f.seq;
                    self.timers
                        .push(Reverse((now + self.spec.udp_timeout, i, seq)));
                }
            }
            Logic::Stream(halves) => halves.start(now),
            Logic::UdpStream(halves) => {
                halves.start(now);
                // Both halves end with the window: a flow that only receives
                // hears of it from this timer.
                let seq = f.seq;
                self.timers.push(Reverse((schedule.measure_until, i, seq)));
            }
        }
    }

    fn on_event(&mut self, i: usize, schedule: Schedule, now: Instant) {
        match self.flows[i].stage {
            Stage::Connecting | Stage::Preamble(_) => match self.advance_connect(i) {
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

    /// A connect-per-transaction connection failed: count it, retry after a pause.
    fn crr_failed(&mut self, i: usize, e: io::Error, schedule: Schedule) {
        let now = Instant::now();
        let id = self.flows[i].id;
        self.counters.error(now, || format!("flow {id}: {e}"));
        self.drop_conn(i);
        if schedule.phase(now) == Phase::Measuring || schedule.phase(now) == Phase::Warmup {
            self.flows[i].stage = Stage::Waiting;
            let seq = self.flows[i].seq;
            self.timers.push(Reverse((now + RECONNECT_BACKOFF, i, seq)));
        } else {
            self.flows[i].stage = Stage::Closed;
            self.open -= 1;
        }
    }

    fn drop_conn(&mut self, i: usize) {
        if let Some(mut c) = self.flows[i].conn.take() {
            let _ = self.poll.registry().deregister(c.source());
        }
        if let Some(mut s) = self.flows[i].udp.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
    }

    fn close(&mut self, i: usize) {
        if self.flows[i].stage != Stage::Closed {
            // A flow that ends as the window closes is sampled now, before its socket goes.
            if !self.clock.closed
                && self
                    .signals
                    .schedule()
                    .is_some_and(|s| Instant::now() >= s.measure_until)
            {
                let f = &self.flows[i];
                if let Some(c) = &f.conn {
                    if c.is_tcp() {
                        sample_tcp_info(c.as_raw_fd(), f.retrans_before, &mut self.tcp);
                    }
                }
            }
            if self.live.is_some() {
                // Its last second's retransmits are read after it is gone.
                self.flows[i].retrans_at_close = self.flows[i].retransmits();
            }
            self.drop_conn(i);
            if matches!(
                self.flows[i].stage,
                Stage::Open
                    | Stage::AwaitClose
                    | Stage::Waiting
                    | Stage::Connecting
                    | Stage::Preamble(_)
                    | Stage::Registering { .. }
            ) {
                self.open = self.open.saturating_sub(1);
            }
            self.flows[i].stage = Stage::Closed;
        }
    }

    fn fire_timers(&mut self, now: Instant, schedule: Schedule) {
        while let Some(Reverse((at, i, seq))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
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
                        self.timers
                            .push(Reverse((now + self.spec.udp_timeout, i, seq)));
                        self.drive(i, schedule, now);
                    }
                }
                (Logic::Crr(_), Stage::Waiting) => self.reconnect(i, now, schedule),
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

    fn reconnect(&mut self, i: usize, now: Instant, schedule: Schedule) {
        let ep = self.flows[i].endpoint;
        let r = match &self.endpoints {
            DataEndpoints::Tcp(a) => tcp_connect(a[ep], &self.opts),
            DataEndpoints::Unix(n) => unix_connect(&n[ep], &self.opts),
            DataEndpoints::Udp(_) => return,
        };
        let token = Token(i);
        match r.and_then(|mut c| {
            self.poll.registry().register(
                c.source(),
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(c)
        }) {
            Ok(c) => {
                let f = &mut self.flows[i];
                f.conn = Some(c);
                // A new connection counts its retransmits from its connect.
                f.retrans_before = 0;
                f.stage = Stage::Connecting;
                if let Logic::Crr(rr) = &mut f.logic {
                    rr.restart_at(now);
                }
                self.connections += 1;
            }
            Err(e) => self.crr_failed(i, e, schedule),
        }
    }

    /// Reads a connect-per-transaction connection until the server closes it.
    fn await_close(&mut self, i: usize, schedule: Schedule) {
        let Some(conn) = self.flows[i].conn.as_mut() else {
            return;
        };
        loop {
            match conn.read(&mut self.bufs.read) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.drop_conn(i);
        let now = Instant::now();
        let stop = schedule.phase(now) >= Phase::Draining;
        let f = &mut self.flows[i];
        if stop {
            f.stage = Stage::Closed;
            self.open -= 1;
        } else {
            f.seq += 1;
            self.reconnect(i, now, schedule);
        }
    }

    /// Drives an open flow as far as its socket allows.
    /// `now` is a recent time (no older than the last event wait); returns
    /// the latest time this call took (a request/response flow's reads take
    /// it as they complete).
    fn drive(&mut self, i: usize, schedule: Schedule, now: Instant) -> Instant {
        if self.flows[i].stage != Stage::Open {
            return now;
        }
        let mut now = now;
        let outcome = match self.flows[i].logic {
            Logic::Rr(_) | Logic::Crr(_) => self.drive_rr(i, schedule, &mut now),
            Logic::Udp(_) => self.drive_udp(i, schedule),
            Logic::Stream(_) => self.drive_stream(i, schedule),
            Logic::UdpStream(_) => self.drive_udp_stream(i, schedule),
        };
        match outcome {
            Io::Blocked => return now,
            Io::Again => {
                self.again.push(i);
                return now;
            }
            _ => {}
        }
        let now = Instant::now();
        let id = self.flows[i].id;
        // A stop shuts a parked socket down: its ending is not the server's doing.
        let stopped = self.signals.aborted() || self.signals.expired();
        match outcome {
            Io::Blocked | Io::Again => {}
            Io::Finished => self.close(i),
            Io::Eof if stopped => self.close(i),
            Io::Failed(_) if stopped => self.close(i),
            Io::Eof => {
                let early = schedule.phase(now) < Phase::Draining;
                if early {
                    self.counters.error(now, || format!("flow {id}: the server closed the connection before the end of the test"));
                }
                self.close(i);
            }
            Io::Failed(e) => {
                if let Logic::Crr(_) = self.flows[i].logic {
                    self.crr_failed(i, e, schedule);
                } else {
                    self.counters.error(now, || format!("flow {id}: {e}"));
                    self.close(i);
                }
            }
        }
        now
    }

    fn drive_rr(&mut self, i: usize, schedule: Schedule, now: &mut Instant) -> Io {
        let f = &mut self.flows[i];
        let crr = matches!(f.logic, Logic::Crr(_));
        let (Logic::Rr(rr) | Logic::Crr(rr)) = &mut f.logic else {
            return Io::Blocked;
        };
        let Some(conn) = f.conn.as_mut() else {
            return Io::Blocked;
        };
        loop {
            match rr.want() {
                Want::Write(n) => {
                    let n = n.min(self.bufs.write.len());
                    match conn.write(&self.bufs.write[..n]) {
                        Ok(0) => return Io::Eof,
                        Ok(k) => {
                            self.counters.tx(i, k, *now);
                            rr.wrote(k);
                            if matches!(rr.want(), Want::Read(_)) {
                                // The request is out. Edge-triggered readiness reports the
                                // response when it arrives; reading now would only find nothing.
                                return Io::Blocked;
                            }
                            // Part of a large request went (a blocking write may have
                            // waited for room): the rest is stamped with a fresh time.
                            *now = Instant::now();
                            if self.blocking {
                                // Back to the loop (its intervals and window edges)
                                // before the next part.
                                return Io::Blocked;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if self.blocking {
                                // A blocking write waited its 50 ms for room and none
                                // came: the loop goes on from now, not from before.
                                *now = Instant::now();
                            }
                            return Io::Blocked;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Io::Failed(e),
                    }
                }
                Want::Read(n) => {
                    let n = n.min(self.bufs.read.len());
                    match conn.read(&mut self.bufs.read[..n]) {
                        Ok(0) => return Io::Eof,
                        Ok(k) => {
                            *now = Instant::now();
                            let now = *now;
                            self.counters.rx(i, k, now);
                            let stop = crr || schedule.phase(now) >= Phase::Draining;
                            let Some(done) = rr.read(k, now, stop) else {
                                if self.blocking {
                                    // Part of the response: back to the loop before
                                    // waiting for the rest.
                                    return Io::Blocked;
                                }
                                continue;
                            };
                            self.counters.transactions(i, 1, done.took, now);
                            if crr {
                                f.stage = Stage::AwaitClose;
                                // The server closes after its response; wait for that.
                                return self.after_crr_response(i, schedule);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Io::Failed(e),
                    }
                }
                Want::Idle => return Io::Blocked,
                Want::Done => return Io::Finished,
            }
        }
    }

    fn after_crr_response(&mut self, i: usize, schedule: Schedule) -> Io {
        self.await_close(i, schedule);
        Io::Blocked
    }

    fn drive_udp(&mut self, i: usize, schedule: Schedule) -> Io {
        let tag = self.token.session_tag();
        let udp_timeout = self.spec.udp_timeout;
        let f = &mut self.flows[i];
        let Logic::Udp(rr) = &mut f.logic else {
            return Io::Blocked;
        };
        let Some(sock) = f.udp.as_ref() else {
            return Io::Blocked;
        };
        loop {
            match rr.want() {
                Want::Write(n) => {
                    let len = UDP_HEADER_LEN + n;
                    if len > self.bufs.datagram.len() {
                        return Io::Failed(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "request larger than a datagram",
                        ));
                    }
                    let mut hdr = [0u8; UDP_HEADER_LEN];
                    UdpHeader {
                        tag,
                        flow: f.id,
                        seq: rr.seq(),
                        sent_ns: 0,
                    }
                    .encode(&mut hdr);
                    self.bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
                    match sock.send(&self.bufs.datagram[..len]) {
                        Ok(_) => {
                            self.counters.tx(i, n, Instant::now());
                            rr.wrote(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // An ICMP error (nobody listening) shows here; the timeout counts the loss.
                        Err(_) => {
                            rr.wrote(n);
                        }
                    }
                }
                Want::Read(_) => match sock.recv(&mut self.bufs.read) {
                    Ok(k) => {
                        let Ok(h) = UdpHeader::decode(&self.bufs.read[..k]) else {
                            continue;
                        };
                        if h.tag != tag || h.flow != f.id || h.seq != rr.seq() {
                            continue; // a late answer to a transaction already counted lost
                        }
                        let now = Instant::now();
                        let payload = k - UDP_HEADER_LEN;
                        self.counters.rx(i, payload, now);
                        let stop = schedule.phase(now) >= Phase::Draining;
                        if let Some(done) = rr.read(payload.max(1), now, stop) {
                            self.counters.transactions(i, 1, done.took, now);
                            f.seq += 1;
                            if !stop {
                                self.timers.push(Reverse((now + udp_timeout, i, f.seq)));
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Io::Blocked,
                    Err(e) => return Io::Failed(e),
                },
                Want::Idle => return Io::Blocked,
                Want::Done => return Io::Finished,
            }
        }
    }

    fn drive_stream(&mut self, i: usize, schedule: Schedule) -> Io {
        let f = &mut self.flows[i];
        let (Logic::Stream(halves), Some(conn)) = (&mut f.logic, f.conn.as_mut()) else {
            return Io::Blocked;
        };
        match halves.drive(conn, &mut self.bufs, &mut self.counters, i, Some(&schedule)) {
            StreamIo::Blocked => Io::Blocked,
            StreamIo::Again => Io::Again,
            StreamIo::PeerClosed {
                still_sending: true,
            } => Io::Eof,
            StreamIo::PeerClosed {
                still_sending: false,
            } => Io::Finished,
            StreamIo::Failed(e) => Io::Failed(e),
        }
    }
}
