//! A client worker's connections: connecting its users a bounded number at
//! a time (each with its preamble, or a UDP stream's registration),
//! reconnecting a crr flow per transaction, closing.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use linkperf_protocol::Preamble;

use super::flow::{ClientFlow, Logic, Stage};
use super::{ClientKind, Run};
use crate::flow::step::{Carried, Told};
use crate::io::socket::{tcp_connect, udp_connect, unix_connect, DataEndpoints};
use crate::io::stream::drain_to_close;
use crate::io::{Dial, DialError};
use crate::schedule::Phase;
use crate::worker::generic::Core;
use crate::worker::SocketFacts;

/// Connects started but not finished, per worker, at most.
pub(super) const MAX_CONNECTING: usize = 256;

/// Delay before a connect-per-transaction flow retries after a failed connect.
pub(super) const RECONNECT_BACKOFF: Duration = Duration::from_millis(5);

impl ClientKind {
    pub(super) fn describe_endpoint(&self, i: usize) -> String {
        match &self.endpoints {
            DataEndpoints::Tcp(v) | DataEndpoints::Udp(v) => {
                v.get(i).map(|a| a.to_string()).unwrap_or_default()
            }
            DataEndpoints::Unix(v) => v.get(i).map(|n| format!("@{n}")).unwrap_or_default(),
        }
    }

    /// How flow `f` dials the server: its preamble (the session's token,
    /// the flow, its connection's number), or the greeting the test was
    /// given (iperf3's cookie).
    fn dial(&self, f: &ClientFlow) -> Dial {
        match &self.greeting {
            Some(g) => Dial::new(g),
            None => Dial::new(
                &Preamble {
                    token: self.token,
                    flow: f.id,
                    seq: f.seq,
                }
                .encode(),
            ),
        }
    }

    /// Flow `key` wants its connection: started if a connect slot is free
    /// (else queued for one), moved on if under way. `Connected` once open.
    pub(super) fn connect(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        now: Instant,
    ) -> Option<Told> {
        let stage = core.slots.get(key)?.flow.stage;
        let told = match stage {
            Stage::Queued => self.begin_connect(core, key, now),
            Stage::Dialing => self.advance_dial(core, key),
            Stage::Registering(_) => self.await_registration(core, key, now),
            _ => None,
        };
        if matches!(told, Some(Told::Connected(_))) {
            self.connected(core, key);
        }
        told
    }

    /// A connect ended (open, or failed): its slot goes to the next queued.
    fn slot_free(&mut self, core: &mut Core<Self>) {
        self.connecting = self.connecting.saturating_sub(1);
        if let Some(next) = self.queued.pop_front() {
            core.driver().again(next);
        }
    }

    fn connected(&mut self, core: &mut Core<Self>, key: usize) {
        if self.run == Run::Setup {
            self.open += 1;
        }
        if self.socket.is_none() {
            if let Some(l) = core.slots[key].links.last() {
                let c = &l.conn;
                self.socket = Some(SocketFacts::read(c.as_raw_fd(), c.local_ip(), c.is_tcp()));
            }
        }
    }

    /// A connect failed with `e` before the flow ever opened: the setup
    /// fails, naming the flow and where it connected.
    fn setup_failed(&mut self, f: &ClientFlow, e: &io::Error) {
        let (id, at) = (f.id, self.describe_endpoint(f.endpoint));
        self.connect_error
            .get_or_insert_with(|| format!("flow {id} could not connect to {at}: {e}"));
    }

    fn begin_connect(&mut self, core: &mut Core<Self>, key: usize, now: Instant) -> Option<Told> {
        let started = self.run != Run::Setup;
        if !started && self.connecting >= MAX_CONNECTING {
            if !self.queued.contains(&key) {
                self.queued.push_back(key);
            }
            return None;
        }
        let f = &core.slots[key].flow;
        let ep = f.endpoint;
        let opened = match &self.endpoints {
            DataEndpoints::Udp(addrs) => udp_connect(addrs[ep], None, &self.opts),
            DataEndpoints::Tcp(addrs) => tcp_connect(addrs[ep], &self.opts),
            DataEndpoints::Unix(names) => unix_connect(&names[ep], &self.opts),
        };
        let conn = match opened.and_then(|c| {
            let fd = c.as_raw_fd();
            core.attach(key, 0, c).map(|()| fd)
        }) {
            Ok(fd) => fd,
            Err(e) => return self.connect_failed(core, key, e, now),
        };
        self.connections += 1;
        if !started {
            self.connecting += 1;
        }
        let f = &mut core.slots[key].flow;
        if let Logic::Crr(rr) = &mut f.logic {
            if started {
                rr.restart_at(now);
            }
        }
        if matches!(self.endpoints, DataEndpoints::Udp(_)) {
            if !matches!(f.logic, Logic::UdpStream(_)) {
                // A UDP socket is ready at once.
                self.slot_free(core);
                return Some(Told::Connected(0));
            }
            // Runs of datagrams in one read, where the kernel has them so.
            crate::io::datagram::receive_runs(conn);
            let socket = core.slots[key].links.last().map(|l| &l.conn);
            if self.socket.is_none() {
                if let Some(c) = socket {
                    self.socket = Some(SocketFacts::read(c.as_raw_fd(), c.local_ip(), false));
                }
            }
            return match self.register(core, key, now) {
                Ok(()) => None,
                Err(e) => {
                    self.fail_registration(&core.slots[key].flow, e);
                    None
                }
            };
        }
        let dial = self.dial(&core.slots[key].flow);
        self.dials[key] = Some(dial);
        core.slots[key].flow.stage = Stage::Dialing;
        None
    }

    /// Moves a dialing flow on: connect completion, then the preamble.
    fn advance_dial(&mut self, core: &mut Core<Self>, key: usize) -> Option<Told> {
        let slot = core.slots.get_mut(key)?;
        let conn = &mut slot.links.last_mut()?.conn;
        let dial = self.dials[key].as_mut()?;
        match dial.advance(conn) {
            Ok(false) => None,
            Ok(true) => {
                self.dials[key] = None;
                if self.run == Run::Setup {
                    self.slot_free(core);
                }
                Some(Told::Connected(0))
            }
            Err(e) => {
                self.dials[key] = None;
                let e = DialError::into_inner(e);
                self.connect_failed(core, key, e, Instant::now())
            }
        }
    }

    /// A connect failed: before the test, the setup fails; a
    /// connect-per-transaction flow's counts as an error and is tried
    /// again after a pause.
    fn connect_failed(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        e: io::Error,
        now: Instant,
    ) -> Option<Told> {
        match self.run {
            Run::Setup | Run::Set => {
                self.setup_failed(&core.slots[key].flow, &e);
                None
            }
            Run::Running(schedule) => {
                let id = core.slots[key].flow.id;
                core.counts.error(now, || format!("flow {id}: {e}"));
                core.drop_link(key, 0);
                let f = &mut core.slots[key].flow;
                let phase = schedule.phase(now);
                if phase == Phase::Measuring || phase == Phase::Warmup {
                    f.stage = Stage::Waiting {
                        until: now + RECONNECT_BACKOFF,
                    };
                } else {
                    f.stage = Stage::Closed;
                    self.open -= 1;
                }
                None
            }
        }
    }

    /// A crr flow's connection failed mid-transaction.
    pub(super) fn crr_failed(&mut self, core: &mut Core<Self>, key: usize, e: io::Error) {
        let _ = self.connect_failed(core, key, e, Instant::now());
    }

    /// Closes flow `key`: a finished one's connection (its TCP_INFO read
    /// first if the window is open), or, for a connect-per-transaction
    /// flow, reads its connection until the server closes it, then
    /// connects again (or ends, once the test drains).
    pub(super) fn close(&mut self, core: &mut Core<Self>, key: usize) -> Option<Told> {
        let slot = core.slots.get_mut(key)?;
        match slot.flow.stage {
            Stage::AwaitClose => {
                let conn = &mut slot.links.last_mut()?.conn;
                if !drain_to_close(conn, &mut self.bufs.read, |_| {}) {
                    return None;
                }
                core.drop_link(key, 0);
                let now = Instant::now();
                let f = &mut core.slots[key].flow;
                if f.draining(now) {
                    f.stage = Stage::Closed;
                    self.open -= 1;
                } else {
                    f.seq += 1;
                    f.stage = Stage::Queued;
                }
                Some(Told::Closed(0))
            }
            _ => {
                let crr = slot.flow.per_transaction();
                core.close(key, 0, crr);
                core.slots[key].flow.stage = Stage::Closed;
                self.open = self.open.saturating_sub(1);
                Some(Told::Closed(0))
            }
        }
    }

    /// How a carry's end moves the flow on: a finished flow closes, a
    /// peer's early close is an error, a crr flow's failure reconnects.
    pub(super) fn carried(&mut self, core: &mut Core<Self>, key: usize, how: Carried) -> Carried {
        if matches!(how, Carried::Blocked | Carried::Again) {
            // The common case, each transaction's: nothing ended.
            return how;
        }
        let now = Instant::now();
        let id = core.slots[key].flow.id;
        // A stop shuts a parked socket down: its ending is not the server's doing.
        let stopped = self.signals.aborted() || self.signals.expired();
        match how {
            Carried::Blocked | Carried::Again => return how,
            Carried::Finished => {}
            Carried::Eof | Carried::Failed(_) if stopped => {}
            Carried::Eof => {
                if !core.slots[key].flow.draining(now) {
                    core.counts.error(now, || {
                        format!("flow {id}: the server closed the connection before the end of the test")
                    });
                }
            }
            Carried::Failed(e) => {
                if core.slots[key].flow.per_transaction() {
                    self.crr_failed(core, key, e);
                    return Carried::Blocked;
                }
                core.counts.error(now, || format!("flow {id}: {e}"));
            }
        }
        let f = &mut core.slots[key].flow;
        if f.stage == Stage::Open {
            f.stage = Stage::Closing;
        }
        Carried::Finished
    }
}
