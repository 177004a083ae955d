//! One user of a profile as a state machine: where it is in its script
//! (transaction, iteration, flowop, repetition), what it needs next from its
//! connections or the clock, and what it has counted. It never touches a
//! socket or reads the clock; the worker does and tells it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_workload::profile::Limit;

use super::script::{size_key, OpKind, Script};
use super::stats::ProfileCounters;
use crate::flow::Pacer;

/// Which end of the profile a user runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The profile as written: opens connections, keeps time, paces.
    Client,
    /// The mirrored profile: follows the client's data; a timed transaction
    /// ends when the client says how many iterations it did.
    Server,
}

/// Longest a client operation without `timeout=` may take.
pub const STALL: Duration = Duration::from_secs(60);
/// Longest a client waits for a datagram without `timeout=`: then it is lost.
pub const UDP_WAIT: Duration = Duration::from_secs(1);
/// Longest a client waits for the bytes the server wrote past a timed
/// transaction's end (datagrams may have been lost; a stream's arrive).
const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// How long a server user reading datagrams waits, once the client has ended
/// a timed transaction and nothing more arrives, for the client's datagrams
/// it has not had: then they are lost (the path dropped them), and the user
/// ends the transaction at the client's count, as uperf's slave does.
pub const UDP_QUIET: Duration = Duration::from_millis(500);

/// What a user needs next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Need {
    /// Open connection `conn` (client).
    Connect(usize),
    /// Take connection `conn` when the other side opens it.
    Accept(usize),
    /// Close connection `conn` (the server first waits for the client's EOF).
    Disconnect(usize),
    /// Write up to `len` bytes on `conn`, with sendfile(2) if `sendfile`.
    Write {
        /// Connection.
        conn: usize,
        /// Bytes left in the operation.
        len: u64,
        /// From a file.
        sendfile: bool,
    },
    /// Read up to `len` bytes from `conn`.
    Read {
        /// Connection.
        conn: usize,
        /// Bytes left in the operation.
        len: u64,
    },
    /// Read and discard up to `len` bytes from `conn` before the next
    /// transaction (what the server wrote past a timed transaction's end).
    Drain {
        /// Connection.
        conn: usize,
        /// Bytes left to discard.
        len: u64,
    },
    /// Nothing until `until`; spinning if `busy`.
    Wait {
        /// When.
        until: Instant,
        /// Spin on the CPU.
        busy: bool,
    },
    /// Spin on the CPU for this much more of a busy think: the user's own
    /// CPU time, so users sharing a worker spin one after another (each
    /// burns its think's duration, as each of uperf's threads does).
    Spin(Duration),
    /// Wait for the release of transaction `.0` (client; the ones before are done).
    Barrier(usize),
    /// The script is over.
    Done,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Waiting for the release of transaction `.0` (client), or done with
    /// transaction `.0 - 1`.
    Held(usize),
    Running,
    Done,
    Failed(String),
}

/// One user.
#[derive(Debug)]
pub struct User {
    /// Its number on its side (users numbered group after group).
    pub id: u32,
    /// Its number within its group (for size draws, the same on both ends).
    pub member: u32,
    role: Role,
    script: Arc<Script>,
    phase: Phase,
    txn: usize,
    iter: u64,
    op: usize,
    rep: u64,
    in_iteration: bool,
    left: u64,
    op_started: Option<Instant>,
    think_until: Option<Instant>,
    spin_left: Duration,
    iter_started: Instant,
    txn_started: Instant,
    /// Bytes written and read per connection in the current transaction.
    written: Vec<u64>,
    read: Vec<u64>,
    drain: Vec<u64>,
    drain_until: Option<Instant>,
    /// Server: iterations the client did in the current timed transaction.
    stop_after: Option<u64>,
    /// Server: since when nothing has come in for it past the client's end
    /// of the current timed transaction.
    quiet_since: Option<Instant>,
    /// Per connection: the iteration (of the current transaction) in which
    /// it was last opened, and the bytes written on it before that.
    opened: Vec<Option<(u64, u64)>>,
    /// Server: a timed transaction just ended: its index, the bytes written
    /// per connection the client may read, and the connections opened in the
    /// iteration it abandoned (the client never took them: close them).
    pub ended: Option<(usize, Vec<u64>, Vec<usize>)>,
}

impl User {
    /// A user at the start of its script, held until transaction 0 is
    /// released (client) or running at once (server).
    pub fn new(id: u32, member: u32, role: Role, script: Arc<Script>, now: Instant) -> Self {
        let conns = script.conns;
        User {
            id,
            member,
            role,
            script,
            phase: match role {
                Role::Client => Phase::Held(0),
                Role::Server => Phase::Running,
            },
            txn: 0,
            iter: 0,
            op: 0,
            rep: 0,
            in_iteration: false,
            left: 0,
            op_started: None,
            think_until: None,
            spin_left: Duration::ZERO,
            iter_started: now,
            txn_started: now,
            written: vec![0; conns],
            read: vec![0; conns],
            drain: vec![0; conns],
            drain_until: None,
            stop_after: None,
            quiet_since: None,
            opened: vec![None; conns],
            ended: None,
        }
    }

    /// Connections the user holds.
    pub fn conns(&self) -> usize {
        self.script.conns
    }

    /// Which side it runs.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The script.
    pub fn script(&self) -> &Script {
        &self.script
    }

    /// The transaction it is in (or held before).
    pub fn txn(&self) -> usize {
        match self.phase {
            Phase::Held(t) => t,
            _ => self.txn,
        }
    }

    /// Iterations done in the current transaction.
    pub fn iterations(&self) -> u64 {
        self.iter
    }

    /// Bytes read per connection in the current transaction.
    pub fn read_per_conn(&self) -> &[u64] {
        &self.read
    }

    /// Why it failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        match &self.phase {
            Phase::Failed(m) => Some(m),
            _ => None,
        }
    }

    /// Whether the script is over (or failed).
    pub fn finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed(_))
    }

    /// Client: transaction `txn` starts at `now`; first discard `drain[c]`
    /// bytes on each connection. A transaction past the end of the user's
    /// script is over at once (the user waits at the next barrier); one past
    /// `last` ends the script.
    pub fn release(&mut self, txn: usize, drain: &[u64], now: Instant, last: usize) {
        if self.finished() {
            return;
        }
        if txn > last {
            self.phase = Phase::Done;
            return;
        }
        self.begin_txn(txn, now);
        for (d, n) in self.drain.iter_mut().zip(drain) {
            *d = *n;
        }
        self.drain_until = self
            .drain
            .iter()
            .any(|d| *d > 0)
            .then(|| now + self.drain_wait());
        self.phase = Phase::Running;
    }

    /// Server: the client did `n` iterations of timed transaction `txn`,
    /// as known at `now`.
    pub fn stop_at(&mut self, txn: usize, n: u64, now: Instant) {
        if self.txn == txn && self.stop_after.is_none() {
            self.stop_after = Some(n);
            self.quiet_since = Some(now);
        }
    }

    fn begin_txn(&mut self, txn: usize, now: Instant) {
        self.txn = txn;
        self.iter = 0;
        self.op = 0;
        self.rep = 0;
        self.in_iteration = false;
        self.left = 0;
        self.op_started = None;
        self.think_until = None;
        self.txn_started = now;
        self.stop_after = None;
        self.quiet_since = None;
        self.written.iter_mut().for_each(|w| *w = 0);
        self.read.iter_mut().for_each(|r| *r = 0);
        self.opened.iter_mut().for_each(|o| *o = None);
    }

    /// The transaction is over for this user at `now`.
    fn end_txn(&mut self, now: Instant, stats: &mut ProfileCounters) {
        if let Some(t) = self.script.txns.get(self.txn) {
            stats.span(t.slot, self.txn_started, now);
            if self.role == Role::Server && matches!(t.limit, Limit::Duration(_)) {
                // What the abandoned iteration opened, the client never took:
                // those connections close and their bytes are not the client's.
                let mut written = self.written.clone();
                let mut close = Vec::new();
                if self.in_iteration {
                    let write = super::script::TYPE_NAMES
                        .iter()
                        .position(|t| *t == "write")
                        .unwrap_or(0);
                    for (c, o) in self.opened.iter().enumerate() {
                        if let Some((iter, before)) = *o {
                            if iter == self.iter {
                                stats.retract_tx(written[c].saturating_sub(before), t.slot, write);
                                written[c] = before;
                                close.push(c);
                            }
                        }
                    }
                }
                self.ended = Some((self.txn, written, close));
            }
        }
        match self.role {
            Role::Client => self.phase = Phase::Held(self.txn + 1),
            Role::Server => {
                if self.txn + 1 >= self.script.txns.len() {
                    self.phase = Phase::Done;
                } else {
                    self.begin_txn(self.txn + 1, now);
                }
            }
        }
    }

    /// The deadline of the operation in progress, or of the drain before
    /// the transaction (client); on the server, of a datagram read the
    /// client's end of a timed transaction left waiting for what was lost
    /// ([`UDP_QUIET`] after the last that came).
    pub fn deadline(&self) -> Option<Instant> {
        if self.phase != Phase::Running {
            return None;
        }
        if self.role == Role::Server {
            self.stop_after?;
            let op = self.script.txns.get(self.txn)?.ops.get(self.op)?;
            let udp = self.script.conn_options.get(op.conn).is_some_and(|o| o.udp);
            return match op.kind {
                OpKind::Read(..) if udp => Some(self.quiet_since? + UDP_QUIET),
                _ => None,
            };
        }
        if self.drain.iter().any(|d| *d > 0) {
            return self.drain_until;
        }
        let started = self.op_started?;
        let op = self.script.txns.get(self.txn)?.ops.get(self.op)?;
        let udp = self.script.conn_options.get(op.conn).is_some_and(|o| o.udp);
        match op.kind {
            OpKind::Think { .. } | OpKind::Nop => None,
            OpKind::Read(..) if udp => Some(started + op.timeout.unwrap_or(UDP_WAIT)),
            _ => Some(started + op.timeout.unwrap_or(STALL)),
        }
    }

    /// The drain before the transaction gave up waiting; what did not
    /// arrive is counted as an error. True if the user was draining.
    pub fn stop_draining(&mut self, now: Instant, stats: &mut ProfileCounters) -> bool {
        if self.drain.iter().all(|d| *d == 0) {
            return false;
        }
        // Datagrams written past the client's end may be dropped at its full
        // socket while it waits at the barrier: not an error of the path.
        let missing: u64 = self
            .drain
            .iter()
            .enumerate()
            .filter(|(c, _)| !self.udp(*c))
            .map(|(_, d)| *d)
            .sum();
        self.drain.iter_mut().for_each(|d| *d = 0);
        self.drain_until = None;
        if missing == 0 {
            return true;
        }
        let id = self.id;
        let slot = self.script.txns.get(self.txn).map_or(0, |t| t.slot);
        let read = super::script::TYPE_NAMES
            .iter()
            .position(|t| *t == "read")
            .unwrap_or(0);
        stats.error(slot, read, now, || {
            format!(
                "user {id}: {missing} bytes the server wrote past a timed transaction's end never arrived"
            )
        });
        true
    }

    /// Whether connection `c` carries datagrams.
    fn udp(&self, c: usize) -> bool {
        self.script.conn_options.get(c).is_some_and(|o| o.udp)
    }

    /// How long a drain may wait: [`DRAIN_WAIT`]; [`UDP_QUIET`] since the
    /// last datagram when only datagrams are left to drain.
    fn drain_wait(&self) -> Duration {
        let udp_only = self
            .drain
            .iter()
            .enumerate()
            .all(|(c, d)| *d == 0 || self.udp(c));
        if udp_only {
            UDP_QUIET
        } else {
            DRAIN_WAIT
        }
    }

    /// Server: the client's datagrams this user waits for past the client's
    /// end of the timed transaction did not come ([`User::deadline`]): they
    /// were lost. The transaction ends at `now` at the client's count, the
    /// iterations it could not mirror counted as one error.
    pub fn give_up_lost(&mut self, now: Instant, stats: &mut ProfileCounters) {
        let Some(n) = self.stop_after else {
            return;
        };
        let Some(txn) = self.script.txns.get(self.txn) else {
            return;
        };
        let missing = n.saturating_sub(self.iter);
        let (id, index, slot) = (self.id, self.txn, txn.slot);
        let read = super::script::TYPE_NAMES
            .iter()
            .position(|t| *t == "read")
            .unwrap_or(0);
        stats.error(slot, read, now, || {
            format!(
                "user {id}: datagrams of {missing} of the client's {n} iterations of transaction {index} never arrived (lost)"
            )
        });
        self.end_txn(now, stats);
    }

    /// One datagram of `n` payload bytes came in at `now`: a datagram read
    /// (or a drain) takes exactly one, whatever its size.
    pub fn got_datagram(&mut self, n: u64, now: Instant, stats: &mut ProfileCounters) {
        if self.quiet_since.is_some() {
            self.quiet_since = Some(now);
        }
        if let Some(conn) = self.drain.iter().position(|d| *d > 0) {
            self.drain[conn] = self.drain[conn].saturating_sub(n.max(1));
            stats.drained(n, now);
            if self.drain_wait() == UDP_QUIET {
                // What still comes is not lost yet.
                self.drain_until = Some(now + UDP_QUIET);
            }
            return;
        }
        if let Some((slot, ty, conn)) = self.slot_and_type() {
            stats.rx(n, slot, ty, now);
            self.read[conn] += n;
            self.left = 0;
            self.op_done(now, stats);
        }
    }

    /// What the user needs next at `now`. Instant steps (nop, a think that is
    /// over, a finished iteration) are taken here, at most `budget` of them.
    pub fn need(&mut self, now: Instant, stats: &mut ProfileCounters, budget: &mut u32) -> Need {
        loop {
            match &self.phase {
                Phase::Held(t) => return Need::Barrier(*t),
                Phase::Done | Phase::Failed(_) => return Need::Done,
                Phase::Running => {}
            }
            if let Some(conn) = self.drain.iter().position(|d| *d > 0) {
                return Need::Drain {
                    conn,
                    len: self.drain[conn],
                };
            }
            let Some(txn) = self.script.txns.get(self.txn) else {
                // Past this group's script (client): nothing to do here.
                self.end_txn(now, stats);
                continue;
            };
            // The end of a timed transaction on the server: as soon as the
            // client's count is reached, even mid-iteration.
            if self.role == Role::Server {
                if let (Limit::Duration(_), Some(n)) = (txn.limit, self.stop_after) {
                    if self.iter >= n {
                        self.end_txn(now, stats);
                        continue;
                    }
                }
            }
            if !self.in_iteration {
                let over = match (txn.limit, self.role) {
                    (Limit::Iterations(n), _) => self.iter >= n,
                    (Limit::Duration(d), Role::Client) => now >= self.txn_started + d,
                    (Limit::Duration(_), Role::Server) => false,
                };
                if over {
                    self.end_txn(now, stats);
                    continue;
                }
                if let (Some(rate), Role::Client) = (txn.rate, self.role) {
                    // Iteration `i` is due `i / rate` after the transaction
                    // started (Profile::check bounds the rate).
                    let mut pace = Pacer::per_second(rate, self.txn_started);
                    pace.sent(self.iter);
                    let at = pace.due();
                    if now < at {
                        return Need::Wait {
                            until: at,
                            busy: false,
                        };
                    }
                }
                if txn.ops.is_empty() {
                    // Profile::check refuses empty transactions; were one to
                    // run, its iterations still spend the budget, so the
                    // worker goes on to its clock and its signals.
                    self.iter += 1;
                    if *budget == 0 {
                        return Need::Wait {
                            until: now,
                            busy: false,
                        };
                    }
                    *budget -= 1;
                    continue;
                }
                self.in_iteration = true;
                self.iter_started = now;
            }
            if *budget == 0 {
                return Need::Wait {
                    until: now,
                    busy: false,
                };
            }
            *budget -= 1;
            let op = &txn.ops[self.op];
            if self.op_started.is_none() {
                self.op_started = Some(now);
                let key = size_key(self.member, self.txn, self.iter, op.index, self.rep);
                match op.kind {
                    OpKind::Read(s, _) | OpKind::Write(s) | OpKind::Sendfile(s) => {
                        self.left = s.at(key)
                    }
                    OpKind::Think {
                        duration,
                        busy: true,
                    } => self.spin_left = duration,
                    OpKind::Think { duration, .. } => self.think_until = Some(now + duration),
                    _ => {}
                }
            }
            let conn = op.conn;
            match op.kind {
                OpKind::Connect => return Need::Connect(conn),
                OpKind::Accept => return Need::Accept(conn),
                OpKind::Disconnect => return Need::Disconnect(conn),
                OpKind::Read(_, chunk) if self.left > 0 => {
                    return Need::Read {
                        conn,
                        len: chunk.map_or(self.left, |c| self.left.min(c.max(1))),
                    }
                }
                OpKind::Write(_) | OpKind::Sendfile(_) if self.left > 0 => {
                    return Need::Write {
                        conn,
                        len: self.left,
                        sendfile: matches!(op.kind, OpKind::Sendfile(_)),
                    }
                }
                OpKind::Think { busy: true, .. } => {
                    if !self.spin_left.is_zero() {
                        return Need::Spin(self.spin_left);
                    }
                    self.op_done(now, stats);
                }
                OpKind::Think { busy, .. } => {
                    let until = self.think_until.unwrap_or(now);
                    if now < until {
                        return Need::Wait { until, busy };
                    }
                    self.op_done(now, stats);
                }
                _ => self.op_done(now, stats),
            }
        }
    }

    /// The current operation is complete at `now`.
    pub fn op_done(&mut self, now: Instant, stats: &mut ProfileCounters) {
        let Some(txn) = self.script.txns.get(self.txn) else {
            return;
        };
        let Some(op) = txn.ops.get(self.op) else {
            return;
        };
        if let Some(s) = self.op_started.take() {
            stats.operation(op.type_slot, now.saturating_duration_since(s));
        }
        if matches!(op.kind, OpKind::Connect | OpKind::Accept) {
            if let Some(o) = self.opened.get_mut(op.conn) {
                *o = Some((self.iter, self.written[op.conn]));
            }
        }
        self.next_op(now, stats);
    }

    fn next_op(&mut self, now: Instant, stats: &mut ProfileCounters) {
        let Some(txn) = self.script.txns.get(self.txn) else {
            return;
        };
        let count = txn.ops.get(self.op).map(|o| o.count).unwrap_or(1);
        self.op_started = None;
        self.think_until = None;
        self.spin_left = Duration::ZERO;
        self.left = 0;
        self.rep += 1;
        if self.rep < count {
            return;
        }
        self.rep = 0;
        self.op += 1;
        if self.op < txn.ops.len() {
            return;
        }
        self.op = 0;
        self.in_iteration = false;
        stats.iteration(txn.slot, self.iter_started, now);
        self.iter += 1;
    }

    fn slot_and_type(&self) -> Option<(usize, usize, usize)> {
        let txn = self.script.txns.get(self.txn)?;
        let op = txn.ops.get(self.op)?;
        Some((txn.slot, op.type_slot, op.conn))
    }

    /// The user spun `d` of its busy think.
    pub fn spun(&mut self, d: Duration) {
        self.spin_left = self.spin_left.saturating_sub(d);
    }

    /// `n` bytes of the current write went out at `now`.
    pub fn wrote(&mut self, n: u64, now: Instant, stats: &mut ProfileCounters) {
        if let Some((slot, ty, conn)) = self.slot_and_type() {
            stats.tx(n, slot, ty, now);
            self.written[conn] += n;
            self.left = self.left.saturating_sub(n);
            if self.left == 0 {
                self.op_done(now, stats);
            }
        }
    }

    /// `n` bytes of the current read (or drain) came in at `now`.
    pub fn got(&mut self, n: u64, now: Instant, stats: &mut ProfileCounters) {
        if let Some(conn) = self.drain.iter().position(|d| *d > 0) {
            self.drain[conn] = self.drain[conn].saturating_sub(n);
            stats.drained(n, now);
            return;
        }
        if let Some((slot, ty, conn)) = self.slot_and_type() {
            stats.rx(n, slot, ty, now);
            self.read[conn] += n;
            self.left = self.left.saturating_sub(n);
            if self.left == 0 {
                self.op_done(now, stats);
            }
        }
    }

    /// The current operation failed at `now`. With `canfail` it is counted
    /// and the user goes on; otherwise the user fails with a message naming
    /// the flowop, which is returned.
    pub fn fail(&mut self, why: &str, now: Instant, stats: &mut ProfileCounters) -> Option<String> {
        let Some(txn) = self.script.txns.get(self.txn) else {
            self.phase = Phase::Failed(why.to_string());
            return Some(why.to_string());
        };
        let Some(op) = txn.ops.get(self.op) else {
            self.phase = Phase::Failed(why.to_string());
            return Some(why.to_string());
        };
        let kind = super::script::TYPE_NAMES[op.type_slot];
        let msg = format!("user {}: {kind} failed: {why}", self.id);
        let (slot, ty, canfail) = (txn.slot, op.type_slot, op.canfail);
        stats.error(slot, ty, now, || msg.clone());
        if canfail {
            self.next_op(now, stats);
            None
        } else {
            self.phase = Phase::Failed(msg.clone());
            Some(msg)
        }
    }

    /// Gives up (the test is aborted).
    pub fn abandon(&mut self, why: &str) {
        if !self.finished() {
            self.phase = Phase::Failed(why.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::fixtures::{connect_then, op, x};
    use crate::program::script::compile;
    use linkperf_workload::profile::{FlowopKind, Group, Profile, ProfileProtocol, Transaction};

    fn rr_profile(limit: Limit) -> Profile {
        profile_over(limit, ProfileProtocol::Tcp)
    }

    fn profile_over(limit: Limit, protocol: ProfileProtocol) -> Profile {
        let flowops = vec![
            op(FlowopKind::Write(x(90)), 2),
            op(FlowopKind::Read(x(90)), 1),
        ];
        connect_then(limit, protocol, flowops)
    }

    #[test]
    fn a_client_user_walks_its_script_and_counts_iterations() {
        let c = compile(&rr_profile(Limit::Iterations(3))).unwrap();
        let t0 = Instant::now();
        let mut stats = ProfileCounters::new(c.slots.len());
        stats.start(t0);
        let mut u = User::new(0, 0, Role::Client, c.scripts[0].clone(), t0);
        let mut budget = 1000;
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Barrier(0));
        u.release(0, &[0], t0, 1);
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Connect(0));
        u.op_done(t0, &mut stats);
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Barrier(1));
        u.release(1, &[0], t0, 1);
        for _ in 0..3 {
            for _ in 0..2 {
                let n = u.need(t0, &mut stats, &mut budget);
                assert_eq!(
                    n,
                    Need::Write {
                        conn: 0,
                        len: 90,
                        sendfile: false
                    }
                );
                u.wrote(50, t0, &mut stats);
                u.wrote(40, t0, &mut stats);
            }
            assert_eq!(
                u.need(t0, &mut stats, &mut budget),
                Need::Read { conn: 0, len: 90 }
            );
            u.got(90, t0, &mut stats);
        }
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Barrier(2));
        assert_eq!(stats.txns[1].count, 3);
        assert_eq!(stats.txns[1].tx, 3 * 180);
        assert_eq!(stats.txns[1].rx, 3 * 90);
        assert_eq!(stats.types[4].count, 6, "six writes");
        // The side's totals are the elements' (the connect's iteration too).
        let c = &stats.counters;
        assert_eq!(c.totals.tx_bytes, 3 * 180);
        assert_eq!(c.totals.rx_bytes, 3 * 90);
        assert_eq!(c.totals.transactions, 1 + 3);
        assert_eq!(c.window_latency().count(), 1 + 3);
        u.release(2, &[0], t0, 1);
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Done);
    }

    /// uperf's `rate=` on a timed transaction, in virtual time: iteration
    /// `i` starts no earlier than `i / rate` after the transaction did, so
    /// 500 ms at 20 per second is exactly ten iterations, each on its slot.
    #[test]
    fn a_paced_timed_transaction_runs_its_rate_times_its_duration() {
        let p = Profile {
            name: "paced".into(),
            groups: vec![Group {
                number: 0,
                users: 1,
                line: 1,
                transactions: vec![Transaction {
                    limit: Limit::Duration(Duration::from_millis(500)),
                    rate: Some(linkperf_workload::profile::Rate(20.0)),
                    flowops: vec![op(FlowopKind::Write(x(1)), 1)],
                    line: 2,
                }],
            }],
        };
        let c = compile(&p).unwrap();
        let t0 = Instant::now();
        let mut stats = ProfileCounters::new(c.slots.len());
        stats.start(t0);
        let mut u = User::new(0, 0, Role::Client, c.scripts[0].clone(), t0);
        let mut budget = u32::MAX;
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Barrier(0));
        u.release(0, &[0], t0, 0);
        let mut now = t0;
        let mut starts = Vec::new();
        loop {
            match u.need(now, &mut stats, &mut budget) {
                Need::Write { len, .. } => {
                    starts.push(now - t0);
                    u.wrote(len, now, &mut stats);
                }
                Need::Wait { until, .. } => {
                    assert!(until > now, "a wait moves time on");
                    now = until;
                }
                Need::Barrier(_) | Need::Done => break,
                other => panic!("unexpected {other:?}"),
            }
            assert!(starts.len() <= 100, "the transaction never ends");
        }
        let slots: Vec<Duration> = (0..10).map(|i| Duration::from_millis(50 * i)).collect();
        assert_eq!(starts, slots);
        assert_eq!(stats.txns[0].count, 10);
    }

    #[test]
    fn a_server_user_stops_a_timed_transaction_at_the_clients_count() {
        let p = linkperf_workload::profile::mirror(&rr_profile(Limit::Duration(
            Duration::from_secs(1),
        )));
        let c = compile(&p).unwrap();
        let t0 = Instant::now();
        let mut stats = ProfileCounters::new(c.slots.len());
        stats.start(t0);
        let mut u = User::new(0, 0, Role::Server, c.scripts[0].clone(), t0);
        let mut budget = 1000;
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Accept(0));
        u.op_done(t0, &mut stats);
        // One whole iteration, then the write of the second is under way.
        for _ in 0..2 {
            assert_eq!(
                u.need(t0, &mut stats, &mut budget),
                Need::Read { conn: 0, len: 90 }
            );
            u.got(90, t0, &mut stats);
        }
        u.wrote(90, t0, &mut stats);
        assert!(matches!(
            u.need(t0, &mut stats, &mut budget),
            Need::Read { .. }
        ));
        u.stop_at(1, 1, t0);
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Done);
        assert_eq!(u.ended, Some((1, vec![90], vec![])));
    }

    #[test]
    fn a_server_user_behind_on_lost_datagrams_gives_them_up_after_a_quiet_time() {
        let p = linkperf_workload::profile::mirror(&profile_over(
            Limit::Duration(Duration::from_secs(1)),
            ProfileProtocol::Udp,
        ));
        let c = compile(&p).unwrap();
        let t0 = Instant::now();
        let mut stats = ProfileCounters::new(c.slots.len());
        stats.start(t0);
        let mut u = User::new(0, 0, Role::Server, c.scripts[0].clone(), t0);
        let mut budget = 1000;
        assert_eq!(u.need(t0, &mut stats, &mut budget), Need::Accept(0));
        u.op_done(t0, &mut stats);
        // The client's writes are the mirror's reads: two datagrams then an answer.
        assert!(matches!(
            u.need(t0, &mut stats, &mut budget),
            Need::Read { .. }
        ));
        assert_eq!(
            u.deadline(),
            None,
            "no end of the transaction yet: it waits"
        );
        u.got_datagram(90, t0, &mut stats);
        // The client did 5 iterations; the rest of its datagrams do not come.
        let t1 = t0 + Duration::from_millis(100);
        u.stop_at(1, 5, t1);
        assert_eq!(u.deadline(), Some(t1 + UDP_QUIET));
        // One more arrives: the quiet time starts again.
        let t2 = t1 + Duration::from_millis(300);
        u.got_datagram(90, t2, &mut stats);
        assert!(matches!(
            u.need(t2, &mut stats, &mut budget),
            Need::Write { .. }
        ));
        assert_eq!(u.deadline(), None, "a write is not waiting for the client");
        u.wrote(90, t2, &mut stats);
        assert!(matches!(
            u.need(t2, &mut stats, &mut budget),
            Need::Read { .. }
        ));
        assert_eq!(u.deadline(), Some(t2 + UDP_QUIET));
        let t3 = t2 + UDP_QUIET;
        u.give_up_lost(t3, &mut stats);
        assert_eq!(stats.counters.errors, 1);
        assert_eq!(u.need(t3, &mut stats, &mut budget), Need::Done);
        assert_eq!(u.ended, Some((1, vec![90], vec![])));
        // TCP reads are never given up: their bytes come.
        let p = linkperf_workload::profile::mirror(&rr_profile(Limit::Duration(
            Duration::from_secs(1),
        )));
        let c = compile(&p).unwrap();
        let mut u = User::new(0, 0, Role::Server, c.scripts[0].clone(), t0);
        u.need(t0, &mut stats, &mut budget);
        u.op_done(t0, &mut stats);
        u.need(t0, &mut stats, &mut budget);
        u.stop_at(1, 5, t1);
        assert_eq!(u.deadline(), None);
    }

    #[test]
    fn a_failure_without_canfail_ends_the_user_and_names_the_flowop() {
        let c = compile(&rr_profile(Limit::Iterations(1))).unwrap();
        let t0 = Instant::now();
        let mut stats = ProfileCounters::new(c.slots.len());
        stats.start(t0);
        let mut u = User::new(3, 3, Role::Client, c.scripts[0].clone(), t0);
        u.release(0, &[0], t0, 1);
        let mut budget = 10;
        let _ = u.need(t0, &mut stats, &mut budget);
        let m = u.fail("connection refused", t0, &mut stats).unwrap();
        assert_eq!(m, "user 3: connect failed: connection refused");
        assert!(u.finished());
        assert_eq!(stats.counters.errors, 1);
    }
}
