//! The event loop that carries a share of a profile's users, on either side:
//! it asks each user what it needs, does the I/O (connect, accept, read,
//! write, sendfile, close) or arms a timer, and tells the user what
//! happened. Users wait for I/O on the event loop, never in a thread of
//! their own.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_metrics::ProcessCpu;
use linkperf_records::WorkerPlacement;
use linkperf_wire::{ConnectSeq, DataToken, Preamble, UdpHeader, UDP_HEADER_LEN};
use mio::net::{TcpListener, UdpSocket};
use mio::{Events, Interest, Token};

use crate::counters::OPEN_WINDOW;
use crate::io::socket::{tcp_connect, udp_connect, Conn, Settings};
use crate::io::{
    accept_next, Accept, AcceptRetry, Dial, DialError, Listener, Register, Registration,
};
use crate::program::coord::{Arrival, Coord};
use crate::program::script::{ConnOptions, MAX_CONNS};
use crate::program::stats::ProfileCounters;
use crate::program::user::{Need, Role, User};
use crate::schedule::Schedule;
use crate::worker::driver::{self, Driver, Flows, Turn};
use crate::worker::window::{Connections, Publish, Window};
use crate::worker::{SocketFacts, WindowClock};

mod data;
mod links;
mod udp;

use crate::io::gate::{PreambleGate, Presented, SessionPreamble};
use data::MAX_CHUNK;
use links::{conn_settings, pending_cap, Accepted, PENDING_BASE, PREAMBLE_TIMEOUT};
use udp::{datagram, Registrations, UDP};

const LISTENER: Token = Token(usize::MAX - 1);
/// Steps one user takes before the others get a turn.
const BUDGET: u32 = 64;
/// Longest a busy think spins before the worker turns to its other users.
const SPIN_SLICE: Duration = Duration::from_millis(1);

/// One user's connection.
#[derive(Debug)]
enum Link {
    /// A TCP connection (`dial` while it connects and sends its preamble).
    Tcp { conn: Conn, dial: Option<Dial> },
    /// The client's UDP socket, connected to the server's datagram endpoint;
    /// registered once the server answered its registration (`register`
    /// until then).
    Udp {
        conn: Conn,
        seq: u64,
        register: Option<Register>,
    },
    /// The server's side of a UDP connection: the worker's socket and the
    /// client's address (from its first datagram).
    Peer { addr: SocketAddr, seq: u64 },
}

impl Link {
    fn source(&mut self) -> Option<&mut dyn mio::event::Source> {
        match self {
            Link::Tcp { conn, .. } | Link::Udp { conn, .. } => Some(conn.source()),
            Link::Peer { .. } => None,
        }
    }
}

/// A profile worker's connections as its window reads them: none. A
/// profile's report carries no TCP_INFO (its results documents have none),
/// so its window reads no socket.
struct Unread;

impl Connections for Unread {
    fn each_tcp(&mut self, _f: impl FnMut(&Conn, &mut u32)) {}

    fn retransmits(&self) -> impl Iterator<Item = Option<u32>> {
        std::iter::empty()
    }
}

/// What a worker hands back.
#[derive(Debug)]
pub struct ProgramWorkerReport {
    /// Its counts.
    pub counts: ProfileCounters,
    /// Connections it opened or accepted.
    pub connections: u64,
    /// Its thread's CPU.
    pub cpu: ProcessCpu,
    /// Where it ran.
    pub placement: WorkerPlacement,
    /// Facts of one of its connections.
    pub socket: Option<SocketFacts>,
}

/// Everything a worker needs.
pub struct WorkerSetup {
    /// Its number.
    pub id: u32,
    /// Which side.
    pub role: Role,
    /// Its users (user `id` lives on worker `id % workers`).
    pub users: Vec<User>,
    /// Workers on this side.
    pub workers: usize,
    /// Transactions of the longest group.
    pub transactions: usize,
    /// Statistics slots.
    pub slots: usize,
    /// Client: the server's data endpoints (user `id` goes to `id % len`).
    pub endpoints: Vec<SocketAddr>,
    /// This worker's listener for `accept` flowops.
    pub listener: Option<TcpListener>,
    /// Client: the server's datagram endpoints (user `id` to `id % len`).
    pub udp_endpoints: Vec<SocketAddr>,
    /// Server: this worker's datagram socket.
    pub udp: Option<UdpSocket>,
    /// Server: the only address whose datagrams it takes in (`None`: any).
    pub udp_peer: Option<IpAddr>,
    /// The session's token.
    pub token: DataToken,
    /// Shared with the driver.
    pub coord: Arc<Coord>,
    /// Its event wait (its waker with the coordinator).
    pub driver: Driver,
    /// Largest single operation in the profile.
    pub largest: u64,
    /// Where it publishes its totals (slot `id`), if anyone watches.
    pub live: Option<Arc<crate::LiveStats>>,
}

struct Worker {
    role: Role,
    users: Vec<User>,
    /// Per user, per connection: the sockets open on it, newest last (each
    /// connect opens one more; data and disconnect use the newest).
    links: Vec<Vec<Vec<Link>>>,
    arrived: Vec<Option<usize>>,
    done: Vec<bool>,
    workers: usize,
    transactions: usize,
    endpoints: Vec<SocketAddr>,
    listener: Option<Listener>,
    udp_endpoints: Vec<SocketAddr>,
    udp: Option<UdpSocket>,
    udp_peer: Option<IpAddr>,
    dgrams: HashMap<(usize, usize), VecDeque<(SocketAddr, usize)>>,
    /// Server: by user and connection, the UDP registrations not yet
    /// accepted, in the clients' connect order.
    peers: HashMap<(usize, usize), Registrations>,
    /// Client: by user and connection, how many UDP sockets it opened.
    udp_opened: HashMap<(usize, usize), u64>,
    udp_blocked: Vec<usize>,
    /// Accepted connections that have not presented their preamble yet.
    pending: slab::Slab<Conn>,
    gate: PreambleGate,
    /// When to take again what an accept stopped at (out of descriptors).
    accept_retry: AcceptRetry,
    accepted: HashMap<(usize, usize), Accepted<Conn>>,
    /// Per user, per connection: the transaction and how many TCP
    /// connections were established on it in that transaction (the
    /// client's connects, the server's accepts), which numbers the next.
    tcp_count: Vec<Vec<(u64, u64)>>,
    token: DataToken,
    coord: Arc<Coord>,
    io: Driver,
    stats: ProfileCounters,
    /// Connections opened or accepted.
    connections: u64,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
    ready: VecDeque<usize>,
    spinning: Vec<usize>,
    release_seen: u64,
    stop_seen: u64,
    changes_seen: u64,
    stops: HashMap<usize, Arc<Vec<u64>>>,
    finished: usize,
    socket: Option<SocketFacts>,
    /// Its turn duties: live totals, its CPU over the run.
    window: Window,
    /// The run as the window sees it: a window from the worker's start to
    /// its end (at most a day).
    schedule: Schedule,
}

/// Runs a worker to the end of its users' scripts (or the abort), with
/// its clock (the thread pinned) or why the pin failed.
pub fn run(setup: WorkerSetup, clock: Result<WindowClock, String>) -> ProgramWorkerReport {
    let clock = match clock {
        Ok(c) => c,
        Err(e) => {
            setup.coord.fail(e);
            let c = WindowClock::start(setup.id, None).ok();
            let (cpu, placement) = c.map(|c| c.finish(0)).unwrap_or_else(|| {
                (
                    ProcessCpu {
                        user_s: 0.0,
                        system_s: 0.0,
                    },
                    WorkerPlacement {
                        worker: setup.id,
                        pinned: None,
                        allowed_cpus: Vec::new(),
                        last_cpu: None,
                        flows: 0,
                    },
                )
            });
            return ProgramWorkerReport {
                counts: ProfileCounters::new(setup.slots),
                connections: 0,
                cpu,
                placement,
                socket: None,
            };
        }
    };
    let n_users = setup.users.len() as u32;
    let chunk = usize::try_from(setup.largest)
        .unwrap_or(MAX_CHUNK)
        .clamp(128 * 1024, MAX_CHUNK);
    let gate = PreambleGate::new(
        SessionPreamble(setup.token),
        pending_cap(&setup.users),
        PREAMBLE_TIMEOUT,
    );
    let start = Instant::now();
    let window = Window::new(clock, setup.live, setup.id as usize, Publish::Totals, start);
    let mut w = Worker {
        role: setup.role,
        links: setup
            .users
            .iter()
            .map(|u| (0..u.conns()).map(|_| Vec::new()).collect())
            .collect(),
        tcp_count: setup
            .users
            .iter()
            .map(|u| vec![(0, 0); u.conns()])
            .collect(),
        arrived: vec![None; setup.users.len()],
        done: vec![false; setup.users.len()],
        users: setup.users,
        workers: setup.workers.max(1),
        transactions: setup.transactions,
        endpoints: setup.endpoints,
        listener: setup.listener.map(Listener::Tcp),
        udp_endpoints: setup.udp_endpoints,
        udp: setup.udp,
        udp_peer: setup.udp_peer,
        dgrams: HashMap::new(),
        peers: HashMap::new(),
        udp_opened: HashMap::new(),
        udp_blocked: Vec::new(),
        pending: slab::Slab::new(),
        gate,
        accept_retry: AcceptRetry::default(),
        accepted: HashMap::new(),
        token: setup.token,
        coord: setup.coord,
        io: setup.driver,
        stats: ProfileCounters::new(setup.slots),
        connections: 0,
        buf: vec![0x5a; chunk],
        file: None,
        ready: VecDeque::new(),
        spinning: Vec::new(),
        release_seen: 0,
        stop_seen: 0,
        changes_seen: 0,
        stops: HashMap::new(),
        finished: 0,
        socket: None,
        window,
        schedule: Schedule::new(start, Duration::ZERO, OPEN_WINDOW, Duration::ZERO),
    };
    if w.role == Role::Server {
        w.stats.start(start);
    }
    // The window (its CPU) opens now.
    w.window
        .turn(start, Some(&w.schedule), &mut w.stats.counters, &mut Unread);
    w.event_loop();
    // Not cut as an aborted test's: a profile's counting ends where the
    // run does (`ProgramRun::finish`), and the server's always ends so.
    w.window.end(&mut w.stats.counters, &mut Unread, false);
    let (cpu, placement, _) = w.window.finish(n_users);
    ProgramWorkerReport {
        counts: w.stats,
        connections: w.connections,
        cpu,
        placement,
        socket: w.socket,
    }
}

impl Worker {
    fn event_loop(&mut self) {
        if let Some(l) = self.listener.as_mut() {
            if let Err(e) = self
                .io
                .registry()
                .register(l.source(), LISTENER, Interest::READABLE)
            {
                self.coord.fail(format!("register the data listener: {e}"));
                return;
            }
        }
        if let Some(u) = self.udp.as_mut() {
            let both = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = self.io.registry().register(u, UDP, both) {
                self.coord
                    .fail(format!("register the datagram socket: {e}"));
                return;
            }
        }
        let mut events = Events::with_capacity(1024);
        if self.role == Role::Server {
            for u in 0..self.users.len() {
                self.ready.push_back(u);
            }
        }
        if let Err(e) = driver::run(self, &mut events) {
            self.coord.fail(format!("event wait: {e}"));
        }
    }

    /// Takes in releases (client) and stops (server) the driver posted.
    fn check_coord(&mut self) {
        let changes = self.coord.changes();
        if changes == self.changes_seen {
            return;
        }
        self.changes_seen = changes;
        match self.role {
            Role::Client => {
                let Some(r) = self.coord.current_release() else {
                    return;
                };
                if r.generation == self.release_seen {
                    return;
                }
                self.release_seen = r.generation;
                let now = Instant::now();
                if r.txn == 0 {
                    self.stats.start(now);
                }
                let last = self.transactions.saturating_sub(1);
                for u in 0..self.users.len() {
                    if self.users[u].finished() {
                        continue;
                    }
                    let id = self.users[u].id as usize;
                    let empty = Vec::new();
                    let drain = r.drain.get(id).unwrap_or(&empty);
                    self.users[u].release(r.txn, drain, now, last);
                    self.ready.push_back(u);
                }
            }
            Role::Server => {
                let (generation, stops) = self.coord.stops();
                if generation == self.stop_seen {
                    return;
                }
                self.stop_seen = generation;
                self.stops = stops;
                for u in 0..self.users.len() {
                    self.ready.push_back(u);
                }
            }
        }
    }

    fn user_token(u: usize, c: usize) -> Token {
        Token(u * MAX_CONNS + c)
    }

    /// Runs user `u` until it waits.
    fn drive(&mut self, u: usize) {
        if self.done[u] {
            return;
        }
        if self.users[u].finished() {
            self.finish_user(u);
            return;
        }
        let mut budget = BUDGET;
        loop {
            let now = Instant::now();
            if self.role == Role::Server {
                let txn = self.users[u].txn();
                if let Some(s) = self.stops.get(&txn) {
                    let id = self.users[u].id as usize;
                    if let Some(n) = s.get(id) {
                        self.users[u].stop_at(txn, *n, now);
                    }
                }
            }
            let need = self.users[u].need(now, &mut self.stats, &mut budget);
            if let Some((txn, written, close)) = self.users[u].ended.take() {
                for c in close {
                    self.drop_link(u, c);
                }
                self.coord.ended(txn, self.users[u].id, written);
            }
            let go_on = match need {
                Need::Connect(c) => self.connect(u, c, now),
                Need::Accept(c) => self.take_accepted(u, c, now),
                Need::Disconnect(c) => self.disconnect(u, c, now),
                Need::Write {
                    conn,
                    len,
                    sendfile,
                } => self.write(u, conn, len, sendfile, now),
                Need::Read { conn, len } | Need::Drain { conn, len } => {
                    self.read(u, conn, len, now)
                }
                Need::Wait { until, busy } => {
                    if until <= now {
                        self.ready.push_back(u);
                    } else if busy {
                        self.spinning.push(u);
                    } else {
                        self.io.timers.arm(until, u, 0);
                    }
                    false
                }
                Need::Spin(left) => {
                    // This user's CPU time: the worker spins for it alone, a
                    // slice at a time so the others (and their I/O) get turns.
                    let slice = left.min(SPIN_SLICE);
                    let start = Instant::now();
                    while start.elapsed() < slice {
                        std::hint::spin_loop();
                    }
                    self.users[u].spun(start.elapsed());
                    self.ready.push_back(u);
                    false
                }
                Need::Barrier(next) => {
                    if self.arrived[u] != Some(next) {
                        self.arrived[u] = Some(next);
                        let user = &self.users[u];
                        self.coord.arrive(
                            user.id,
                            next,
                            Arrival {
                                iterations: user.iterations(),
                                read: user.read_per_conn().to_vec(),
                            },
                        );
                    }
                    false
                }
                Need::Done => {
                    self.finish_user(u);
                    false
                }
            };
            if !go_on {
                // Waiting on I/O: make sure the deadline is watched.
                if let Some(d) = self.users[u].deadline() {
                    if matches!(
                        need,
                        Need::Connect(_)
                            | Need::Accept(_)
                            | Need::Disconnect(_)
                            | Need::Write { .. }
                            | Need::Read { .. }
                            | Need::Drain { .. }
                    ) {
                        if d <= now {
                            if matches!(need, Need::Drain { .. }) {
                                self.users[u].stop_draining(now, &mut self.stats);
                                continue;
                            }
                            if self.role == Role::Server {
                                // What the client sent before its end of the
                                // timed transaction and never came was lost.
                                self.users[u].give_up_lost(now, &mut self.stats);
                                continue;
                            }
                            if let Need::Connect(c) = need {
                                // A connect (or a UDP registration) that timed
                                // out leaves nothing open.
                                if self.connecting(u, c) || self.registering(u, c) {
                                    self.drop_link(u, c);
                                }
                            }
                            let why = if self.is_udp(u, &need) {
                                "no datagram before its timeout (lost)"
                            } else {
                                "no progress before its timeout"
                            };
                            if self.fail(u, why, now) {
                                continue;
                            }
                        } else {
                            self.io.timers.arm(d, u, 0);
                        }
                    }
                }
                return;
            }
        }
    }

    fn finish_user(&mut self, u: usize) {
        if std::mem::replace(&mut self.done[u], true) {
            return;
        }
        for c in 0..self.links[u].len() {
            while !self.links[u][c].is_empty() {
                self.drop_link(u, c);
            }
        }
        self.finished += 1;
        self.coord.user_finished();
        if let Some(m) = self.users[u].failure() {
            match self.role {
                Role::Client if m != "aborted" => self.coord.fail(m.to_string()),
                Role::Client => {}
                Role::Server => self.coord.gone(self.users[u].id),
            }
        }
    }

    /// The current operation failed; true if the user goes on (canfail).
    fn fail(&mut self, u: usize, why: &str, now: Instant) -> bool {
        match self.users[u].fail(why, now, &mut self.stats) {
            None => true,
            Some(_) => {
                self.finish_user(u);
                false
            }
        }
    }

    fn is_udp(&self, u: usize, need: &Need) -> bool {
        let c = match *need {
            Need::Read { conn, .. } | Need::Drain { conn, .. } | Need::Write { conn, .. } => conn,
            _ => return false,
        };
        self.users[u]
            .script()
            .conn_options
            .get(c)
            .is_some_and(|o| o.udp)
    }

    fn worker_index(&self) -> usize {
        self.users
            .first()
            .map(|u| u.id as usize % self.workers)
            .unwrap_or(0)
    }
}

/// The worker's users as the driver's loop turns them.
impl Flows for Worker {
    fn driver(&mut self) -> &mut Driver {
        &mut self.io
    }

    fn turn(&mut self, now: Instant) -> Turn {
        if self.coord.aborted() {
            for u in &mut self.users {
                u.abandon("aborted");
            }
            return Turn::Stop;
        }
        self.check_coord();
        self.window.turn(
            now,
            Some(&self.schedule),
            &mut self.stats.counters,
            &mut Unread,
        );
        // Users that are due: ready ones, spinners, expired timers.
        let mut due: Vec<usize> = self.ready.drain(..).collect();
        let spinning = std::mem::take(&mut self.spinning);
        due.extend(spinning);
        while let Some((_, u, _)) = self.io.timers.due(now) {
            due.push(u);
        }
        for u in due {
            self.drive(u);
        }
        if self.finished == self.users.len() {
            return Turn::Stop;
        }
        self.expire_pending(now);
        if self.accept_retry.due(now) {
            self.accept_all();
        }
        let queued = !self.ready.is_empty() || !self.spinning.is_empty();
        let retry = self.accept_retry.deadline();
        Turn::Wait(self.io.timeout(Instant::now(), None, retry, queued))
    }

    fn event(&mut self, event: &mio::event::Event, _now: Instant) {
        match event.token() {
            LISTENER => self.accept_all(),
            UDP => {
                if event.is_readable() {
                    self.receive_datagrams();
                }
                if event.is_writable() {
                    for u in std::mem::take(&mut self.udp_blocked) {
                        self.drive(u);
                    }
                }
            }
            Token(t) if t >= PENDING_BASE => self.preamble(t - PENDING_BASE),
            Token(t) => {
                let u = t / MAX_CONNS;
                if u < self.users.len() {
                    self.drive(u);
                }
            }
        }
    }
}
