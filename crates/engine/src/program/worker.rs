//! The event loop that carries a share of a profile's users, on either side:
//! it asks each user what it needs, does the I/O (connect, accept, read,
//! write, sendfile, close) or arms a timer, and tells the user what
//! happened. Users wait for I/O on the event loop, never in a thread of
//! their own.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_metrics::{ProcessCpu, WorkerPlacement};
use linkperf_wire::{DataToken, Preamble, UdpHeader, PREAMBLE_LEN, UDP_HEADER_LEN};
use linkperf_workload::SocketOptions;
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};
use socket2::SockRef;

use super::coord::{Arrival, Coord};
use super::script::{ConnOptions, MAX_CONNS};
use super::stats::Stats;
use super::user::{Need, Role, User};
use crate::schedule::Schedule;
use crate::transport::{tcp_connect, udp_connect, Conn, DataOptions};
use crate::worker::{SocketFacts, WindowClock, MAX_SLEEP, WAKER};

const LISTENER: Token = Token(usize::MAX - 1);
const PENDING_BASE: usize = 1 << 48;
/// Steps one user takes before the others get a turn.
const BUDGET: u32 = 64;
/// Longest a new connection may take to send its preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections a worker lets wait for their preamble beyond twice the
/// connections its users hold; past that, the oldest waiting is closed for
/// each new one (as the workload server does: anyone may open one).
const PREAMBLE_SLACK: usize = 64;
/// Connections accepted for one user's connection slot and not yet taken by
/// it (the next iteration's, arriving before the user reached it), at least;
/// a slot the script opens more sockets on at once may have as many.
const ACCEPTED_PER_SLOT: usize = 2;
/// Longest a busy think spins before the worker turns to its other users.
const SPIN_SLICE: Duration = Duration::from_millis(1);
/// Largest single read or write.
const MAX_CHUNK: usize = 256 * 1024;

/// One user's connection.
#[derive(Debug)]
enum Link {
    /// A TCP connection (while `connecting`, its preamble not all sent yet).
    Tcp {
        stream: TcpStream,
        connecting: bool,
        preamble: Option<([u8; PREAMBLE_LEN], usize)>,
    },
    /// The client's UDP socket, connected to the server's datagram endpoint;
    /// registered once the server answered its registration (sent again at
    /// `retry` until then).
    Udp {
        sock: UdpSocket,
        seq: u64,
        registered: bool,
        retry: Instant,
        /// This socket's place among the connects of its user and
        /// connection, from 1: the server's n-th accept takes the n-th.
        ordinal: u64,
    },
    /// The server's side of a UDP connection: the worker's socket and the
    /// client's address (from its first datagram).
    Peer { addr: SocketAddr, seq: u64 },
}

impl Link {
    fn source(&mut self) -> Option<&mut dyn mio::event::Source> {
        match self {
            Link::Tcp { stream, .. } => Some(stream),
            Link::Udp { sock, .. } => Some(sock),
            Link::Peer { .. } => None,
        }
    }
}

/// Datagrams queued on a server worker per (user, connection) before each
/// user reads them; more are dropped (the path is then losing them anyway).
const MAX_QUEUED: usize = 8192;
/// How long a UDP connection's registration waits for the server's answer
/// before it is sent again.
const REGISTER_RETRY: Duration = Duration::from_millis(100);
const UDP: Token = Token(usize::MAX - 2);

struct Pending {
    stream: TcpStream,
    buf: [u8; PREAMBLE_LEN],
    got: usize,
    since: Instant,
}

/// What a worker hands back.
#[derive(Debug)]
pub struct ProgramWorkerReport {
    /// Its counts.
    pub stats: Stats,
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
    /// The poll its waker is registered with.
    pub poll: Poll,
    /// Pinning.
    pub cpus: Option<Vec<usize>>,
    /// Never sleep in the event wait.
    pub busy_poll: bool,
    /// Largest single operation in the profile.
    pub largest: u64,
    /// Where it publishes its totals (slot `id`), if anyone watches.
    pub live: Option<Arc<crate::LiveStats>>,
}

/// Server: one connection's UDP registrations not yet accepted. A client
/// sends a registration again until it is answered, so the same socket's
/// may arrive twice, late, or after the next socket's: each names its
/// socket's ordinal, and the n-th accept takes the n-th socket.
#[derive(Debug, Default)]
struct Registrations {
    /// Not yet accepted: (transaction, ordinal, address), by ordinal.
    waiting: VecDeque<(u64, u64, SocketAddr)>,
    /// The ordinal of the socket accepted last.
    taken: u64,
}

impl Registrations {
    /// A registration arrived. Ordinal 0 (a client that does not number
    /// its sockets) replaces whatever waits.
    fn register(&mut self, txn: u64, ordinal: u64, from: SocketAddr) {
        if ordinal == 0 {
            self.waiting.clear();
            self.waiting.push_back((txn, 0, from));
            return;
        }
        if ordinal <= self.taken || self.waiting.iter().any(|w| w.1 == ordinal) {
            return;
        }
        if self.waiting.len() >= MAX_QUEUED {
            return;
        }
        let at = self.waiting.partition_point(|w| w.1 < ordinal);
        self.waiting.insert(at, (txn, ordinal, from));
    }

    /// The address of the next socket registered in transaction `txn`;
    /// those of earlier transactions (the client ran ahead of a timed
    /// transaction's end) are dropped.
    fn take(&mut self, txn: u64) -> Option<SocketAddr> {
        while self.waiting.front().is_some_and(|w| w.0 < txn) {
            self.waiting.pop_front();
        }
        let &(t, ordinal, addr) = self.waiting.front()?;
        if t != txn {
            return None;
        }
        self.waiting.pop_front();
        self.taken = self.taken.max(ordinal);
        Some(addr)
    }
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
    listener: Option<TcpListener>,
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
    pending: slab::Slab<Pending>,
    accepted: HashMap<(usize, usize), VecDeque<(u64, TcpStream)>>,
    token: DataToken,
    coord: Arc<Coord>,
    poll: Poll,
    busy_poll: bool,
    stats: Stats,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    ready: VecDeque<usize>,
    spinning: Vec<usize>,
    release_seen: u64,
    stop_seen: u64,
    changes_seen: u64,
    stops: HashMap<usize, Arc<Vec<u64>>>,
    finished: usize,
    socket: Option<SocketFacts>,
    index: usize,
    live: Option<Arc<crate::LiveStats>>,
    publisher: crate::live::Publisher,
}

/// Runs a worker to the end of its users' scripts (or the abort).
pub fn run(setup: WorkerSetup) -> ProgramWorkerReport {
    let mut clock = match WindowClock::start(setup.id, setup.cpus.clone()) {
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
                stats: Stats::new(setup.slots),
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
    let mut w = Worker {
        role: setup.role,
        links: setup
            .users
            .iter()
            .map(|u| (0..u.conns()).map(|_| Vec::new()).collect())
            .collect(),
        arrived: vec![None; setup.users.len()],
        done: vec![false; setup.users.len()],
        users: setup.users,
        workers: setup.workers.max(1),
        transactions: setup.transactions,
        endpoints: setup.endpoints,
        listener: setup.listener,
        udp_endpoints: setup.udp_endpoints,
        udp: setup.udp,
        udp_peer: setup.udp_peer,
        dgrams: HashMap::new(),
        peers: HashMap::new(),
        udp_opened: HashMap::new(),
        udp_blocked: Vec::new(),
        pending: slab::Slab::new(),
        accepted: HashMap::new(),
        token: setup.token,
        coord: setup.coord,
        poll: setup.poll,
        busy_poll: setup.busy_poll,
        stats: Stats::new(setup.slots),
        buf: vec![0x5a; chunk],
        file: None,
        timers: BinaryHeap::new(),
        ready: VecDeque::new(),
        spinning: Vec::new(),
        release_seen: 0,
        stop_seen: 0,
        changes_seen: 0,
        stops: HashMap::new(),
        finished: 0,
        socket: None,
        index: setup.id as usize,
        live: setup.live,
        publisher: crate::live::Publisher::new(Instant::now()),
    };
    let start = Instant::now();
    clock.tick(
        &Schedule::new(
            start,
            Duration::ZERO,
            Duration::from_secs(86_400),
            Duration::ZERO,
        ),
        start,
    );
    if w.role == Role::Server {
        w.stats.start = Some(start);
    }
    w.event_loop();
    if let Some(live) = &w.live {
        live.publish(w.index, &w.stats.totals);
    }
    clock.close();
    let (cpu, placement) = clock.finish(n_users);
    ProgramWorkerReport {
        stats: w.stats,
        cpu,
        placement,
        socket: w.socket,
    }
}

impl Worker {
    fn event_loop(&mut self) {
        if let Some(l) = self.listener.as_mut() {
            if let Err(e) = self
                .poll
                .registry()
                .register(l, LISTENER, Interest::READABLE)
            {
                self.coord.fail(format!("register the data listener: {e}"));
                return;
            }
        }
        if let Some(u) = self.udp.as_mut() {
            let both = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = self.poll.registry().register(u, UDP, both) {
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
        let mut last_sweep = Instant::now();
        loop {
            if self.coord.aborted() {
                for u in &mut self.users {
                    u.abandon("aborted");
                }
                break;
            }
            self.check_coord();
            let now = Instant::now();
            if let Some(live) = &self.live {
                if self.publisher.due(now) {
                    live.publish(self.index, &self.stats.totals);
                }
            }
            // Users that are due: ready ones, spinners, expired timers.
            let mut due: Vec<usize> = self.ready.drain(..).collect();
            let spinning = std::mem::take(&mut self.spinning);
            due.extend(spinning);
            while let Some(Reverse((at, u))) = self.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.timers.pop();
                due.push(u);
            }
            for u in due {
                self.drive(u);
            }
            if self.finished == self.users.len() {
                break;
            }
            if now.duration_since(last_sweep) >= Duration::from_secs(1) {
                last_sweep = now;
                self.pending
                    .retain(|_, p| now.duration_since(p.since) < PREAMBLE_TIMEOUT);
            }
            let timeout = if self.busy_poll || !self.ready.is_empty() || !self.spinning.is_empty() {
                Duration::ZERO
            } else {
                let next = self.timers.peek().map(|Reverse((at, _))| *at);
                next.map_or(MAX_SLEEP, |at| {
                    at.saturating_duration_since(Instant::now()).min(MAX_SLEEP)
                })
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.coord.fail(format!("event wait: {e}"));
                    break;
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    LISTENER => self.accept_all(),
                    UDP => {
                        if ev.is_readable() {
                            self.receive_datagrams();
                        }
                        if ev.is_writable() {
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
                    self.stats.start = Some(now);
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
                        self.timers.push(Reverse((until, u)));
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
                                self.users[u].stop_draining(&mut self.stats);
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
                            self.timers.push(Reverse((d, u)));
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

    fn connect(&mut self, u: usize, c: usize, now: Instant) -> bool {
        let udp = self.users[u].script().conn_options[c].udp;
        // A UDP registration under way goes on.
        if self.registering(u, c) {
            return self.await_udp_answer(u, c, now);
        }
        // A connect under way goes on; otherwise this one opens another
        // socket, the earlier ones staying open (as uperf's connect does).
        if !self.connecting(u, c) {
            if udp {
                return self.connect_udp(u, c, now);
            }
            if self.endpoints.is_empty() {
                return self.fail(u, "no endpoint to connect to", now);
            }
            let id = self.users[u].id;
            let addr = self.endpoints[id as usize % self.endpoints.len()];
            let opts = data_options(&self.users[u].script().conn_options[c]);
            let stream = match tcp_connect(addr, &opts) {
                Ok(Conn::Tcp(s)) => s,
                Ok(Conn::Unix(_)) => return self.fail(u, "not a TCP connection", now),
                Err(e) => return self.fail(u, &format!("connect to {addr}: {e}"), now),
            };
            // The connection number, and the transaction it is opened in:
            // an accepting side takes only its current transaction's.
            let txn = self.users[u].txn() as u64;
            let pre = Preamble {
                token: self.token,
                flow: id,
                seq: (txn << 32) | c as u64,
            }
            .encode();
            let mut link = Link::Tcp {
                stream,
                connecting: true,
                preamble: Some((pre, 0)),
            };
            if let Some(src) = link.source() {
                if let Err(e) = self.poll.registry().register(
                    src,
                    Self::user_token(u, c),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    return self.fail(u, &format!("register a connection: {e}"), now);
                }
            }
            self.links[u][c].push(link);
            return false;
        }
        let Some(Link::Tcp {
            stream,
            connecting,
            preamble,
        }) = self.links[u][c].last_mut()
        else {
            return false;
        };
        if *connecting {
            match stream.take_error() {
                Ok(Some(e)) | Err(e) => {
                    self.drop_link(u, c);
                    return self.fail(u, &format!("connect: {e}"), now);
                }
                Ok(None) => {}
            }
            match stream.peer_addr() {
                Ok(_) => *connecting = false,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return false,
                Err(e) => {
                    self.drop_link(u, c);
                    return self.fail(u, &format!("connect: {e}"), now);
                }
            }
        }
        if let Some((pre, sent)) = preamble.as_mut() {
            while *sent < PREAMBLE_LEN {
                match stream.write(&pre[*sent..]) {
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.drop_link(u, c);
                        return self.fail(u, &format!("send the preamble: {e}"), now);
                    }
                }
            }
            *preamble = None;
        }
        self.established(u, c);
        self.users[u].op_done(now, &mut self.stats);
        true
    }

    /// A UDP "connection": a socket connected to the server's datagram
    /// endpoint, registered with the server (a header-only datagram naming
    /// the user, the connection and the transaction, which the server
    /// answers) so that the server knows where to send before the client
    /// sends anything: a connection the server writes to first works too.
    fn connect_udp(&mut self, u: usize, c: usize, now: Instant) -> bool {
        if self.udp_endpoints.is_empty() {
            return self.fail(u, "the server offered no datagram endpoint", now);
        }
        let id = self.users[u].id;
        let addr = self.udp_endpoints[id as usize % self.udp_endpoints.len()];
        let opts = data_options(&self.users[u].script().conn_options[c]).socket;
        let mut sock = match udp_connect(addr, &opts) {
            Ok(s) => s,
            Err(e) => return self.fail(u, &format!("connect to {addr}: {e}"), now),
        };
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut sock, Self::user_token(u, c), Interest::READABLE)
        {
            return self.fail(u, &format!("register a connection: {e}"), now);
        }
        let ordinal = self.udp_opened.entry((u, c)).or_default();
        *ordinal += 1;
        let ordinal = *ordinal;
        self.links[u][c].push(Link::Udp {
            sock,
            seq: 0,
            registered: false,
            retry: now,
            ordinal,
        });
        self.await_udp_answer(u, c, now)
    }

    /// Whether connection `c`'s newest socket is a UDP registration the
    /// server has not answered yet.
    fn registering(&self, u: usize, c: usize) -> bool {
        matches!(
            self.links[u][c].last(),
            Some(Link::Udp {
                registered: false,
                ..
            })
        )
    }

    /// The header of user `u`'s registration of connection `c`'s newest
    /// socket in its current transaction (the socket's ordinal where the
    /// streams put their send time).
    fn registration(&self, u: usize, c: usize) -> [u8; UDP_HEADER_LEN] {
        let txn = self.users[u].txn() as u64;
        let ordinal = match self.links[u][c].last() {
            Some(Link::Udp { ordinal, .. }) => *ordinal,
            _ => 0,
        };
        let mut out = [0u8; UDP_HEADER_LEN];
        UdpHeader {
            tag: self.token.session_tag(),
            flow: self.users[u].id,
            seq: ((c as u64) << 48) | (txn & ((1 << 48) - 1)),
            sent_ns: ordinal,
        }
        .encode(&mut out);
        out
    }

    /// Reads the server's answer to connection `c`'s registration, sending
    /// the registration (again) when it is due; true once answered.
    fn await_udp_answer(&mut self, u: usize, c: usize, now: Instant) -> bool {
        let reg = self.registration(u, c);
        let Some(Link::Udp {
            sock,
            registered,
            retry,
            ..
        }) = self.links[u][c].last_mut()
        else {
            return false;
        };
        let mut answer = [0u8; UDP_HEADER_LEN + 1];
        loop {
            match sock.recv(&mut answer) {
                Ok(k) if answer[..k] == reg => {
                    *registered = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let e = e.to_string();
                    return self.fail(u, &format!("register with the server: {e}"), now);
                }
            }
        }
        if !*registered {
            if now >= *retry {
                let _ = sock.send(&reg);
                *retry = now + REGISTER_RETRY;
            }
            let at = *retry;
            self.timers.push(Reverse((at, u)));
            return false;
        }
        self.stats.connections += 1;
        self.users[u].op_done(now, &mut self.stats);
        true
    }

    fn established(&mut self, u: usize, c: usize) {
        self.stats.connections += 1;
        if self.socket.is_none() {
            if let Some(Link::Tcp { stream, .. }) = self.links[u][c].last() {
                let ip = stream.local_addr().ok().map(|a| a.ip());
                self.socket = Some(SocketFacts::read(stream.as_raw_fd(), ip, true));
            }
        }
    }

    /// Whether connection `c`'s newest socket is a connect under way.
    fn connecting(&self, u: usize, c: usize) -> bool {
        matches!(
            self.links[u][c].last(),
            Some(Link::Tcp { connecting, preamble, .. }) if *connecting || preamble.is_some()
        )
    }

    /// Closes connection `c`'s newest socket.
    fn drop_link(&mut self, u: usize, c: usize) {
        if let Some(mut l) = self.links[u][c].pop() {
            if let Some(src) = l.source() {
                let _ = self.poll.registry().deregister(src);
            }
        }
    }

    fn take_accepted(&mut self, u: usize, c: usize, now: Instant) -> bool {
        if self.users[u].script().conn_options[c].udp {
            // A datagram "connection" is there once the client registered it
            // in this transaction.
            let txn = self.users[u].txn() as u64;
            let Some(addr) = self.peers.get_mut(&(u, c)).and_then(|r| r.take(txn)) else {
                return false;
            };
            self.links[u][c].push(Link::Peer { addr, seq: 0 });
            self.stats.connections += 1;
            self.users[u].op_done(now, &mut self.stats);
            return true;
        }
        // Connections opened for an earlier transaction (the other side ran
        // ahead of a timed transaction's end) are stale: close them.
        let txn = self.users[u].txn() as u64;
        let Some(q) = self.accepted.get_mut(&(u, c)) else {
            return false;
        };
        while q.front().is_some_and(|(t, _)| *t < txn) {
            if let Some((_, mut stale)) = q.pop_front() {
                let _ = self.poll.registry().deregister(&mut stale);
            }
        }
        if q.front().is_none_or(|(t, _)| *t != txn) {
            return false;
        }
        let Some((_, stream)) = q.pop_front() else {
            return false;
        };
        if let Err(e) = apply_options(&stream, &self.users[u].script().conn_options[c]) {
            return self.fail(u, &format!("socket options: {e}"), now);
        }
        self.links[u][c].push(Link::Tcp {
            stream,
            connecting: false,
            preamble: None,
        });
        self.established(u, c);
        self.users[u].op_done(now, &mut self.stats);
        true
    }

    fn disconnect(&mut self, u: usize, c: usize, now: Instant) -> bool {
        if self.links[u][c].is_empty() {
            // uperf: "Connection already closed".
            return self.fail(u, "the connection is not open", now);
        }
        let tcp = matches!(self.links[u][c].last(), Some(Link::Tcp { .. }));
        if !tcp || self.role == Role::Client {
            // Datagrams have no close to wait for.
            self.drop_link(u, c);
            self.users[u].op_done(now, &mut self.stats);
            return true;
        }
        // The server closes once the client has: read to its EOF.
        loop {
            let Some(Link::Tcp { stream, .. }) = self.links[u][c].last_mut() else {
                return true;
            };
            match stream.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => self.stats.drained(n as u64, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.drop_link(u, c);
        self.users[u].op_done(now, &mut self.stats);
        true
    }

    fn write(&mut self, u: usize, c: usize, len: u64, sendfile: bool, now: Instant) -> bool {
        if sendfile && self.file.is_none() {
            match payload_file(&self.buf) {
                Ok(f) => self.file = Some(f),
                Err(e) => return self.fail(u, &format!("sendfile payload: {e}"), now),
            }
        }
        let id = self.users[u].id;
        let tag = self.token.session_tag();
        let r = match self.links[u][c].last_mut() {
            None => return self.fail(u, "the connection is not open", now),
            Some(Link::Tcp { stream, .. }) => {
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                if sendfile {
                    let file = self.file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
                    send_file(stream.as_raw_fd(), file, n)
                } else {
                    stream.write(&self.buf[..n])
                }
            }
            Some(Link::Udp { sock, seq, .. }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                sock.send(&self.buf[..n]).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                })
            }
            Some(Link::Peer { addr, seq }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                let Some(sock) = self.udp.as_ref() else {
                    return self.fail(u, "no datagram socket", now);
                };
                let r = sock.send_to(&self.buf[..n], *addr).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                });
                if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                    self.udp_blocked.push(u);
                }
                r
            }
        };
        match r {
            Ok(0) if len > 0 => self.fail(u, "the connection wrote nothing", now),
            Ok(k) => {
                self.users[u].wrote(k as u64, Instant::now(), &mut self.stats);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(e) => {
                if matches!(self.links[u][c].last(), Some(Link::Tcp { .. })) {
                    self.drop_link(u, c);
                }
                self.fail(u, &e.to_string(), now)
            }
        }
    }

    fn read(&mut self, u: usize, c: usize, len: u64, now: Instant) -> bool {
        let tag = self.token.session_tag();
        match self.links[u][c].last_mut() {
            None => self.fail(u, "the connection is not open", now),
            Some(Link::Tcp { stream, .. }) => {
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                match stream.read(&mut self.buf[..n]) {
                    Ok(0) => {
                        self.drop_link(u, c);
                        self.fail(u, "the other side closed the connection", now)
                    }
                    Ok(k) => {
                        self.users[u].got(k as u64, Instant::now(), &mut self.stats);
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
                    Err(e) => {
                        self.drop_link(u, c);
                        self.fail(u, &e.to_string(), now)
                    }
                }
            }
            Some(Link::Udp { sock, .. }) => loop {
                match sock.recv(&mut self.buf) {
                    Ok(k) => {
                        // Only this session's datagrams count; one of the
                        // header alone is a late answer to a registration.
                        let ours = k > UDP_HEADER_LEN
                            && UdpHeader::decode(&self.buf[..k]).is_ok_and(|h| h.tag == tag);
                        if ours {
                            let n = (k - UDP_HEADER_LEN) as u64;
                            self.users[u].got_datagram(n, Instant::now(), &mut self.stats);
                            return true;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // An ICMP error for an earlier datagram: the read times
                    // out if the server stays away.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return self.fail(u, &e.to_string(), now),
                }
            },
            Some(Link::Peer { .. }) => {
                let Some((_, n)) = self.dgrams.get_mut(&(u, c)).and_then(|q| q.pop_front()) else {
                    return false;
                };
                self.users[u].got_datagram(n as u64, Instant::now(), &mut self.stats);
                true
            }
        }
    }

    /// Server: takes in every datagram waiting on the worker's socket, queues
    /// each for its user and connection, and runs the users that got one.
    fn receive_datagrams(&mut self) {
        let tag = self.token.session_tag();
        let me = self.worker_index();
        let mut woken: Vec<usize> = Vec::new();
        loop {
            let Some(sock) = self.udp.as_ref() else {
                return;
            };
            match sock.recv_from(&mut self.buf) {
                Ok((k, from)) => {
                    if !crate::transport::answers(self.udp_peer, from.ip()) {
                        continue;
                    }
                    let Ok(h) = UdpHeader::decode(&self.buf[..k]) else {
                        continue;
                    };
                    let id = h.flow as usize;
                    if h.tag != tag || id % self.workers != me {
                        continue;
                    }
                    let u = id / self.workers;
                    let c = (h.seq >> 48) as usize;
                    if u >= self.users.len() || c >= self.users[u].conns() {
                        continue;
                    }
                    if k == UDP_HEADER_LEN {
                        // A registration: where this connection's datagrams
                        // go, answered with itself.
                        let txn = h.seq & ((1 << 48) - 1);
                        self.peers
                            .entry((u, c))
                            .or_default()
                            .register(txn, h.sent_ns, from);
                        let _ = sock.send_to(&self.buf[..k], from);
                        if !woken.contains(&u) {
                            woken.push(u);
                        }
                        continue;
                    }
                    let q = self.dgrams.entry((u, c)).or_default();
                    if q.len() < MAX_QUEUED {
                        q.push_back((from, k - UDP_HEADER_LEN));
                    }
                    if !woken.contains(&u) {
                        woken.push(u);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        for u in woken {
            self.drive(u);
        }
    }

    fn accept_all(&mut self) {
        loop {
            let Some(l) = self.listener.as_ref() else {
                return;
            };
            match l.accept() {
                Ok((mut stream, _)) => {
                    // Connections that never present a preamble stay bounded.
                    if self.pending.len() >= self.pending_cap() {
                        self.evict_oldest_pending();
                    }
                    let entry = self.pending.vacant_entry();
                    let key = entry.key();
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(PENDING_BASE + key), Interest::READABLE)
                        .is_ok()
                    {
                        entry.insert(Pending {
                            stream,
                            buf: [0; PREAMBLE_LEN],
                            got: 0,
                            since: Instant::now(),
                        });
                        self.preamble(key);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors or a connection reset before accept: try later.
                Err(_) => return,
            }
        }
    }

    /// Reads a new connection's preamble and hands it to its user.
    fn preamble(&mut self, key: usize) {
        let Some(p) = self.pending.get_mut(key) else {
            return;
        };
        loop {
            if p.got == PREAMBLE_LEN {
                break;
            }
            match p.stream.read(&mut p.buf[p.got..]) {
                Ok(0) => {
                    self.drop_pending(key);
                    return;
                }
                Ok(n) => p.got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_pending(key);
                    return;
                }
            }
        }
        let mut p = self.pending.remove(key);
        let _ = self.poll.registry().deregister(&mut p.stream);
        let Ok(pre) = Preamble::decode(&p.buf) else {
            return;
        };
        if pre.token != self.token {
            return;
        }
        let id = pre.flow as usize;
        if id % self.workers != self.worker_index() {
            return;
        }
        let u = id / self.workers;
        let txn = pre.seq >> 32;
        let Ok(c) = usize::try_from(pre.seq & 0xffff_ffff) else {
            return;
        };
        if u >= self.users.len() || c >= self.users[u].conns() {
            return;
        }
        // No more than a user's connection can take: more are not a user's.
        let most = usize::try_from(self.users[u].script().peaks[c])
            .unwrap_or(usize::MAX)
            .max(ACCEPTED_PER_SLOT);
        if self.accepted.get(&(u, c)).is_some_and(|q| q.len() >= most) {
            return;
        }
        if self
            .poll
            .registry()
            .register(
                &mut p.stream,
                Self::user_token(u, c),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            return;
        }
        self.accepted
            .entry((u, c))
            .or_default()
            .push_back((txn, p.stream));
        self.drive(u);
    }

    /// How many accepted connections may wait for their preamble at once.
    fn pending_cap(&self) -> usize {
        let conns = self.users.iter().fold(0usize, |n, u| {
            let peaks = u.script().peaks.iter().map(|p| *p as usize);
            n.saturating_add(peaks.fold(0usize, usize::saturating_add))
        });
        conns.saturating_mul(2).saturating_add(PREAMBLE_SLACK)
    }

    /// Closes the connection that has waited longest for its preamble.
    fn evict_oldest_pending(&mut self) {
        if let Some(key) = self
            .pending
            .iter()
            .min_by_key(|(_, p)| p.since)
            .map(|(k, _)| k)
        {
            self.drop_pending(key);
        }
    }

    fn worker_index(&self) -> usize {
        self.users
            .first()
            .map(|u| u.id as usize % self.workers)
            .unwrap_or(0)
    }

    fn drop_pending(&mut self, key: usize) {
        let mut p = self.pending.remove(key);
        let _ = self.poll.registry().deregister(&mut p.stream);
    }
}

/// Sets a connection's profile options on an accepted socket.
fn apply_options(s: &TcpStream, o: &ConnOptions) -> io::Result<()> {
    let r = SockRef::from(s);
    r.set_nodelay(o.nodelay)?;
    if let Some(w) = o.wndsz {
        let w = usize::try_from(w).unwrap_or(usize::MAX);
        r.set_send_buffer_size(w)?;
        r.set_recv_buffer_size(w)?;
    }
    if let Some(cc) = &o.cc {
        r.set_tcp_congestion(cc.as_bytes())?;
    }
    Ok(())
}

/// Writes a datagram's header into `buf`: the session's tag, the user, the
/// connection in the sequence's top 16 bits. Returns the datagram's length
/// with `len` payload bytes.
fn datagram(buf: &mut [u8], tag: u32, user: u32, conn: usize, seq: u64, len: u64) -> usize {
    let payload = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(buf.len() - UDP_HEADER_LEN);
    let header = UdpHeader {
        tag,
        flow: user,
        seq: ((conn as u64) << 48) | (seq & ((1 << 48) - 1)),
        sent_ns: 0,
    };
    if let Some(h) = buf.first_chunk_mut::<UDP_HEADER_LEN>() {
        header.encode(h);
    }
    UDP_HEADER_LEN + payload
}

fn data_options(o: &ConnOptions) -> DataOptions {
    let wnd = o.wndsz.map(|w| u32::try_from(w).unwrap_or(u32::MAX));
    DataOptions {
        nodelay: o.nodelay,
        socket: SocketOptions {
            nodelay: Some(o.nodelay),
            sndbuf: wnd,
            rcvbuf: wnd,
            cc: o.cc.clone(),
            mss: None,
        },
    }
}

/// An anonymous file holding `payload`, for sendfile(2).
fn payload_file(payload: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns
    // a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"linkperf-sendfile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just created and own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned.try_clone()?);
    f.write_all(payload)?;
    Ok(owned)
}

/// sendfile(2) of `n` bytes of `file` from its start to `sock`.
fn send_file(sock: RawFd, file: RawFd, n: usize) -> io::Result<usize> {
    let mut off: libc::off_t = 0;
    // SAFETY: both descriptors are open for the call; `off` is a valid
    // pointer the kernel updates.
    let r = unsafe { libc::sendfile(sock, file, &mut off, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::Registrations;
    use std::net::SocketAddr;

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn each_accept_takes_the_next_socket_whatever_order_and_repeats_arrive_in() {
        let mut r = Registrations::default();
        // The second socket's registration overtakes the first's, and the
        // first is sent twice.
        r.register(0, 2, at(2));
        r.register(0, 1, at(1));
        r.register(0, 1, at(1));
        assert_eq!(r.take(0), Some(at(1)));
        // A late repeat of an accepted socket is not accepted again.
        r.register(0, 1, at(1));
        assert_eq!(r.take(0), Some(at(2)));
        assert_eq!(r.take(0), None);
        // The same port again (the kernel may reuse it) is a new socket.
        r.register(0, 3, at(1));
        assert_eq!(r.take(0), Some(at(1)));
    }

    #[test]
    fn registrations_of_an_earlier_transaction_are_dropped() {
        let mut r = Registrations::default();
        r.register(4, 1, at(1));
        r.register(5, 2, at(2));
        assert_eq!(r.take(5), Some(at(2)));
        // One of a later transaction waits for it.
        r.register(6, 3, at(3));
        assert_eq!(r.take(5), None);
        assert_eq!(r.take(6), Some(at(3)));
    }

    #[test]
    fn a_client_that_does_not_number_its_sockets_is_taken_as_it_comes() {
        let mut r = Registrations::default();
        r.register(0, 0, at(1));
        r.register(0, 0, at(1));
        assert_eq!(r.take(0), Some(at(1)));
        assert_eq!(r.take(0), None);
    }
}
