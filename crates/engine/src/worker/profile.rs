//! The worker kind that carries a share of a profile's users, on either
//! side, on the generic worker: its users are flows
//! ([`ProfileUser`](crate::program::flow::ProfileUser)) whose steps it does
//! the I/O of (connect, accept, read, write, sendfile, close, datagrams),
//! and what they share stays here: the coordinator's barriers, releases
//! and stops, the data listener behind its preamble gate, the datagram
//! socket. Users wait for I/O on the event loop, never in a thread of
//! their own.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_measured::WorkerPlacement;
use linkperf_metrics::ProcessCpu;
use linkperf_protocol::{ConnectSeq, DataToken, Preamble, UdpHeader, UDP_HEADER_LEN};
use mio::event::Event;
use mio::net::{TcpListener, UdpSocket};
use mio::{Events, Interest, Token};

use crate::counters::OPEN_WINDOW;
use crate::flow::step::{Carried, Step, Told};
use crate::io::datagram::{receive_one, send_one, Received};
use crate::io::sendfile::{payload_file, send_file};
use crate::io::socket::{tcp_connect, udp_connect, Conn, Settings};
use crate::io::stream::{drain_to_close, read_some, write_some};
use crate::io::{
    accept_behind, AcceptRetry, Behind, Dial, DialError, Listener, Register, Registration,
};
use crate::program::coord::{Arrival, Coord};
use crate::program::flow::{Closing, ProfileUser};
use crate::program::script::{ConnOptions, MAX_CONNS};
use crate::program::stats::ProfileCounters;
use crate::program::user::{Need, Role, User};
use crate::schedule::Schedule;
use crate::worker::driver::Driver;
use crate::worker::generic::{self, Kind, Worker, KIND_TOKENS};
use crate::worker::{SocketFacts, WindowClock};

mod conns;
mod data;
mod udp;

use crate::io::gate::{PreambleGate, Presented, SessionPreamble};
use conns::{conn_settings, failed, pending_cap, Accepted, PENDING_BASE, PREAMBLE_TIMEOUT};
use data::MAX_CHUNK;
use udp::{datagram, Registrations, UDP};

const LISTENER: Token = Token(usize::MAX - 1);

/// What one socket of a user's connection is, beside the socket the core
/// keeps (the server's side of a datagram connection has none of its own).
#[derive(Debug)]
enum SocketState {
    /// A TCP connection (`dial` while it connects and sends its preamble).
    Tcp { dial: Option<Dial> },
    /// The client's UDP socket, connected to the server's datagram endpoint;
    /// registered once the server answered its registration (`register`
    /// until then).
    Udp {
        seq: u64,
        register: Option<Register>,
    },
    /// The server's side of a UDP connection: the worker's socket and the
    /// client's address (from its first datagram).
    Peer { addr: SocketAddr, seq: u64 },
}

impl SocketState {
    /// Whether the core keeps a socket for it.
    fn socket(&self) -> bool {
        !matches!(self, SocketState::Peer { .. })
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
    /// Largest single operation in the profile.
    pub largest: u64,
    /// Where it publishes its totals (slot `id`), if anyone watches.
    pub live: Option<Arc<crate::LiveStats>>,
}

/// The profile's worker kind: what its users share on one worker (the
/// coordinator's barriers, releases and stops, the data listener and its
/// preamble gate, the datagram socket) and the I/O of their steps.
pub(crate) struct ProfileKind {
    role: Role,
    /// Users on this worker (flow `u` is user `u`).
    users: usize,
    /// Per user, per connection: what its sockets are, newest last (each
    /// connect opens one more; data and disconnect use the newest), beside
    /// the sockets the core keeps for the same connection.
    sockets: Vec<Vec<Vec<SocketState>>>,
    arrived: Vec<Option<usize>>,
    workers: usize,
    transactions: usize,
    endpoints: Vec<SocketAddr>,
    listener: Option<Listener>,
    udp_endpoints: Vec<SocketAddr>,
    udp: Option<UdpSocket>,
    udp_peer: Option<IpAddr>,
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
    /// Connections opened or accepted.
    connections: u64,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
    release_seen: u64,
    stop_seen: u64,
    changes_seen: u64,
    finished: usize,
    aborted: bool,
    socket: Option<SocketFacts>,
}

type Core = generic::Core<ProfileKind>;

/// Runs a worker to the end of its users' scripts (or the abort), with
/// its clock (the thread pinned) or why the pin failed.
pub fn run(
    setup: WorkerSetup,
    driver: Driver,
    clock: Result<WindowClock, String>,
) -> ProgramWorkerReport {
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
    let mut counts = ProfileCounters::new(setup.slots);
    if setup.role == Role::Server {
        counts.start(start);
    }
    let mut core = Core::new(
        driver,
        clock,
        setup.live,
        setup.id as usize,
        false,
        counts,
        start,
    );
    // The run as the window sees it: a window from the worker's start to
    // its end (at most a day), open (its CPU) now.
    core.set_schedule(Schedule::new(
        start,
        Duration::ZERO,
        OPEN_WINDOW,
        Duration::ZERO,
    ));
    core.window_turn(start);
    let kind = ProfileKind {
        role: setup.role,
        users: setup.users.len(),
        sockets: setup
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
        workers: setup.workers.max(1),
        transactions: setup.transactions,
        endpoints: setup.endpoints,
        listener: setup.listener.map(Listener::Tcp),
        udp_endpoints: setup.udp_endpoints,
        udp: setup.udp,
        udp_peer: setup.udp_peer,
        peers: HashMap::new(),
        udp_opened: HashMap::new(),
        udp_blocked: Vec::new(),
        pending: slab::Slab::new(),
        gate,
        accept_retry: AcceptRetry::default(),
        accepted: HashMap::new(),
        token: setup.token,
        coord: setup.coord.clone(),
        connections: 0,
        buf: vec![0x5a; chunk],
        file: None,
        release_seen: 0,
        stop_seen: 0,
        changes_seen: 0,
        finished: 0,
        aborted: false,
        socket: None,
    };
    for user in setup.users {
        // Flow `u` is user `u` (a fresh slab hands out keys in order).
        core.add(ProfileUser::new(user, setup.coord.clone()));
    }
    let mut w = Worker::new(core, kind);
    if w.kind.register(&mut w.core) {
        let mut events = Events::with_capacity(1024);
        if let Err(e) = w.run(&mut events) {
            w.kind.coord.fail(format!("event wait: {e}"));
        }
    }
    // Not cut as an aborted test's: a profile's counting ends where the
    // run does (`ProgramRun::finish`), and the server's always ends so.
    w.core.end(false);
    let Worker { core, kind } = w;
    let mut parts = core.into_parts();
    let (cpu, placement, _) = parts.finish(n_users);
    ProgramWorkerReport {
        counts: parts.counts,
        connections: kind.connections,
        cpu,
        placement,
        socket: kind.socket,
    }
}

impl ProfileKind {
    /// Registers the data listener and the datagram socket; false (the
    /// run failed) if one could not be.
    fn register(&mut self, core: &mut Core) -> bool {
        if let Some(l) = self.listener.as_mut() {
            if let Err(e) =
                core.driver()
                    .registry()
                    .register(l.source(), LISTENER, Interest::READABLE)
            {
                self.coord.fail(format!("register the data listener: {e}"));
                return false;
            }
        }
        if let Some(u) = self.udp.as_mut() {
            let both = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = core.driver().registry().register(u, UDP, both) {
                self.coord
                    .fail(format!("register the datagram socket: {e}"));
                return false;
            }
        }
        if self.role == Role::Server {
            for u in 0..self.users {
                core.driver().again(u);
            }
        }
        true
    }

    /// User `u`.
    fn user(core: &Core, u: usize) -> &User {
        &core.slots[u].flow.user
    }

    /// Takes in releases (client) and stops (server) the driver posted.
    fn check_coord(&mut self, core: &mut Core) {
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
                    core.counts.start(now);
                }
                let last = self.transactions.saturating_sub(1);
                for u in 0..self.users {
                    let user = &mut core.slots[u].flow.user;
                    if user.finished() {
                        continue;
                    }
                    let id = user.id as usize;
                    let empty = Vec::new();
                    let drain = r.drain.get(id).unwrap_or(&empty);
                    user.release(r.txn, drain, now, last);
                    core.driver().again(u);
                }
            }
            Role::Server => {
                let (generation, stops) = self.coord.stops();
                if generation == self.stop_seen {
                    return;
                }
                self.stop_seen = generation;
                let stops = Arc::new(stops);
                for u in 0..self.users {
                    core.slots[u].flow.set_stops(stops.clone());
                    core.driver().again(u);
                }
            }
        }
    }

    fn worker_index(&self, core: &Core) -> usize {
        core.slots
            .get(0)
            .map(|s| s.flow.user.id as usize % self.workers)
            .unwrap_or(0)
    }
}

impl Kind for ProfileKind {
    type Flow = ProfileUser;
    type Counts = ProfileCounters;
    /// A profile's report carries no TCP_INFO (its results documents have
    /// none), so its window reads no socket.
    const TCP_INFO: bool = false;

    fn begin(&mut self, core: &mut Core, now: Instant) {
        if self.coord.aborted() {
            if !self.aborted {
                self.aborted = true;
                for (_, s) in core.slots.iter_mut() {
                    s.flow.user.abandon("aborted");
                }
            }
            return;
        }
        self.check_coord(core);
        self.expire_pending(core, now);
        if self.accept_retry.due(now) {
            self.accept_all(core);
        }
    }

    fn stop(&mut self, _core: &Core, _now: Instant) -> bool {
        self.aborted || self.finished == self.users || self.coord.aborted()
    }

    fn perform(
        &mut self,
        core: &mut Core,
        u: usize,
        step: Step,
        now: &mut Instant,
    ) -> Option<Told> {
        match step {
            Step::Connect(c) => self.connect(core, u, c, *now),
            Step::Accept(c) => self.take_accepted(core, u, c, *now),
            Step::Close(c) => match core.slots[u].flow.closing {
                Closing::Disconnect => self.disconnect(core, u, c, *now),
                Closing::Abandoned => {
                    self.drop_link(core, u, c);
                    Some(Told::Closed(c))
                }
                Closing::TimedOut => {
                    if self.connecting(u, c) || self.registering(u, c) {
                        self.drop_link(core, u, c);
                    }
                    Some(Told::Closed(c))
                }
            },
            Step::Carry(c) => match core.slots[u].flow.need {
                Need::Write { len, sendfile, .. } => {
                    Some(self.write(core, u, c, len, sendfile, now))
                }
                Need::Read { len, .. } | Need::Drain { len, .. } => {
                    Some(self.read(core, u, c, len, now))
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn event(&mut self, core: &mut Core, event: &Event, _now: Instant) {
        match event.token() {
            LISTENER => self.accept_all(core),
            UDP => {
                if event.is_readable() {
                    self.receive_datagrams(core);
                }
                if event.is_writable() {
                    for u in std::mem::take(&mut self.udp_blocked) {
                        core.driver().again(u);
                    }
                }
            }
            Token(t) if t >= PENDING_BASE => self.preamble(core, t - PENDING_BASE),
            Token(_) => {}
        }
    }

    fn held(&mut self, core: &mut Core, u: usize, next: usize) {
        if self.arrived[u] != Some(next) {
            self.arrived[u] = Some(next);
            let user = Self::user(core, u);
            self.coord.arrive(
                user.id,
                next,
                Arrival {
                    iterations: user.iterations(),
                    read: user.read_per_conn().to_vec(),
                },
            );
        }
    }

    fn done(&mut self, core: &mut Core, u: usize) {
        for c in 0..self.sockets[u].len() {
            while !self.sockets[u][c].is_empty() {
                self.drop_link(core, u, c);
            }
        }
        self.finished += 1;
        self.coord.user_finished();
        let user = Self::user(core, u);
        if let Some(m) = user.failure() {
            match self.role {
                Role::Client if m != "aborted" => self.coord.fail(m.to_string()),
                Role::Client => {}
                Role::Server => self.coord.gone(user.id),
            }
        }
    }

    fn deadline(&self, _core: &Core) -> Option<Instant> {
        self.accept_retry.deadline()
    }
}
