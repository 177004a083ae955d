//! The server side of a test: one listener (or UDP socket) per worker, flows
//! that answer requests or stream, and counters of what the server itself saw.

mod accept;
mod drive;
mod udp_stream;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkperf_metrics::TcpInfoAggregator;
use linkperf_wire::{DataToken, UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::counters::{Counters, FlowSlotId};
use crate::driver::{self, Driver, Flows, Turn};
use crate::flow::{RrServer, Want};
use crate::gate::{PreambleGate, Presented, SessionPreamble};
use crate::io::socket::{
    tcp_listener, udp_bind, unix_listener, Conn, DataEndpoints, Listener, Settings,
};
use crate::io::stream::{StreamHalves, StreamIo};
use crate::io::{accept_next, Accept};
use crate::live::{LiveStats, Publisher};
use crate::schedule::Schedule;
use crate::signals::{Parked, Signals};
use crate::worker::{
    cpus_for, retransmits_so_far, sample_tcp_info, Buffers, SocketFacts, WindowClock, WorkerReport,
    WAKER,
};
use crate::EngineError;

const LISTENER: Token = Token(usize::MAX - 1);
/// Workers give up on their own this long after the drain deadline, whatever
/// the session says.
const SAFETY_MARGIN: Duration = Duration::from_secs(10);

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

enum Source {
    Listener(Listener),
    Udp(mio::net::UdpSocket),
}

struct Worker {
    spec: TestSpec,
    opts: Settings,
    token: DataToken,
    signals: Arc<Signals>,
    io: Driver,
    source: Source,
    flows: Slab<ServerFlow>,
    /// Connections accepted that have not presented their preamble yet.
    gate: PreambleGate,
    bufs: Buffers,
    counters: Counters,
    clock: WindowClock,
    schedule: Option<Schedule>,
    tcp: TcpInfoAggregator,
    connections: u64,
    /// Each flow's counting slot, by flow id.
    slots: HashMap<u32, FlowSlotId>,
    /// Whether each slot's flow has a connection open now: a flow holds at
    /// most one at a time (a crr flow's next connection comes after the
    /// server closed the last), so a token admits no more connections than
    /// its test's users.
    open: Vec<bool>,
    /// Workers of this side: flow `i` is worker `i % workers`'s.
    workers: usize,
    udp_peer: Option<IpAddr>,
    socket: Option<SocketFacts>,
    index: usize,
    live: Option<Arc<LiveStats>>,
    /// Flows this worker will carry (users `i` with `i % workers == index`).
    expected: usize,
    /// When this drive's last read of a request ended, if it read one.
    last_read: Option<Instant>,
    /// A UDP stream's flows, by slot.
    udp: udp_stream::UdpStreams,
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
        let opts = Settings::for_test(&cfg.spec);
        let setup = |e: io::Error| EngineError::Setup(e.to_string());
        let (sources, endpoints) = bind_sources(&cfg, threads, &opts)?;
        let signals = Arc::new(Signals::default());
        let mut wakers = Vec::new();
        let mut handles = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        for (w, mut source) in sources.into_iter().enumerate() {
            let poll = Poll::new().map_err(|e| EngineError::Worker(e.to_string()))?;
            let waker = Arc::new(
                Waker::new(poll.registry(), WAKER)
                    .map_err(|e| EngineError::Worker(e.to_string()))?,
            );
            let reg = match &mut source {
                Source::Listener(l) => {
                    poll.registry()
                        .register(l.source(), LISTENER, Interest::READABLE)
                }
                // A UDP stream's senders wait for room in the socket buffer.
                Source::Udp(s) if cfg.spec.is_udp_stream() => {
                    poll.registry()
                        .register(s, LISTENER, Interest::READABLE | Interest::WRITABLE)
                }
                Source::Udp(s) => poll.registry().register(s, LISTENER, Interest::READABLE),
            };
            reg.map_err(setup)?;
            wakers.push(waker);
            let cpus = cpus_for(w, cfg.affinity.as_ref());
            let spec = cfg.spec.clone();
            let opts = opts.clone();
            let signals = signals.clone();
            let ready_tx = ready_tx.clone();
            let token = cfg.token;
            let busy_poll = cfg.busy_poll;
            let preamble_timeout = cfg.preamble_timeout;
            let live = cfg.live.clone();
            let udp_peer = cfg.udp_peer;
            let users = cfg.spec.users as usize;
            let h = std::thread::Builder::new()
                .name(format!("lp-server-{w}"))
                .spawn(move || {
                    let clock = match WindowClock::start(w as u32, cpus) {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return WorkerReport::empty(w as u32);
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    drop(ready_tx);
                    let largest = spec.workload.largest_message().as_usize() + UDP_HEADER_LEN;
                    let udp = spec.protocol == Protocol::Udp;
                    let expected = users / threads + usize::from(w < users % threads);
                    let cap = crate::worker::preamble_cap(expected);
                    let worker = Worker {
                        spec,
                        opts,
                        token,
                        signals,
                        io: Driver::new(poll, busy_poll),
                        source,
                        flows: Slab::new(),
                        gate: PreambleGate::new(SessionPreamble(token), cap, preamble_timeout),
                        bufs: Buffers::new(largest, udp),
                        counters: Counters::new(false),
                        clock,
                        schedule: None,
                        tcp: TcpInfoAggregator::new(),
                        connections: 0,
                        slots: HashMap::new(),
                        open: Vec::new(),
                        workers: threads,
                        udp_peer,
                        socket: None,
                        index: w,
                        live,
                        expected,
                        last_read: None,
                        udp: udp_stream::UdpStreams::default(),
                    };
                    worker.run()
                })
                .map_err(|e| EngineError::Worker(e.to_string()))?;
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

fn new_logic(w: &Workload, flow: u32) -> Logic {
    match w {
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
            Logic::Rr(RrServer::with_sizes(sizes, flow))
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
    fn run(mut self) -> WorkerReport {
        let mut events = Events::with_capacity(1024);
        let mut serving = Serving {
            publisher: Publisher::new(Instant::now()),
            w: &mut self,
        };
        let _ = driver::run(&mut serving, &mut events);
        if self.signals.aborted() {
            // The seconds after this one never ran.
            self.counters.stop(Instant::now());
        }
        if !self.clock.closed {
            self.clock.close();
            self.read_tcp_info();
        }
        let keys: Vec<usize> = self.flows.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close(k);
        }
        if let Some(live) = &self.live {
            live.publish(self.index, &self.counters.totals);
        }
        let flows = u32::try_from(self.counters.flow_count()).unwrap_or(u32::MAX);
        let (cpu, placement) = self.clock.finish(flows);
        WorkerReport {
            counters: self.counters,
            cpu,
            placement,
            tcp: self.tcp,
            connections: self.connections,
            socket: self.socket,
            flow_totals: Vec::new(),
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
            self.drive(k);
        }
    }

    /// Each connection's retransmits as the window opens.
    fn mark_retransmits(&mut self) {
        for (_, f) in self.flows.iter_mut() {
            if f.conn.is_tcp() {
                f.retrans_before = retransmits_so_far(f.conn.as_raw_fd());
            }
        }
    }

    fn read_tcp_info(&mut self) {
        for (_, f) in self.flows.iter() {
            if f.conn.is_tcp() && !matches!(f.logic, Logic::Preamble) {
                sample_tcp_info(f.conn.as_raw_fd(), f.retrans_before, &mut self.tcp);
            }
        }
    }
}

/// A server worker's flows as the driver's loop turns them.
struct Serving<'a> {
    w: &'a mut Worker,
    publisher: Publisher,
}

impl Flows for Serving<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.w.io
    }

    fn turn(&mut self, now: Instant) -> Turn {
        let w = &mut *self.w;
        if let Some(live) = &w.live {
            if self.publisher.due(now) {
                live.publish(w.index, &w.counters.totals);
            }
        }
        if w.schedule.is_none() {
            if let Some(s) = w.signals.schedule() {
                w.begin(s, now);
            }
        }
        if let Some(s) = w.schedule {
            if w.clock.opening(&s, now) {
                w.mark_retransmits();
            }
            if w.clock.tick(&s, now) {
                w.read_tcp_info();
            }
            if now > s.drain_until + SAFETY_MARGIN {
                return Turn::Stop;
            }
        }
        if w.signals.finishing() || w.signals.aborted() {
            return Turn::Stop;
        }
        w.expire_preambles(now);
        if let Some(k) = w.single_flow() {
            w.drive(k);
            // The next turn reuses the time the request's read ended at.
            return Turn::Again(w.last_read.take());
        }
        w.fire_udp_timers(now);
        Turn::Wait(w.io.timeout(
            now,
            w.schedule.as_ref(),
            w.gate.next_deadline(),
            !w.udp.again.is_empty(),
        ))
    }

    fn event(&mut self, event: &mio::event::Event, _now: Instant) {
        match event.token() {
            LISTENER => {
                if event.is_readable() {
                    self.w.on_source();
                }
                if event.is_writable() {
                    self.w.udp_writable();
                }
            }
            Token(k) => self.w.drive(k),
        }
    }

    fn again(&mut self, key: usize, _now: Instant) {
        self.w.drive(key);
    }

    fn turned(&mut self, _now: Instant) {
        self.w.udp_again();
    }
}
