//! The one worker, generic over what it carries ([`Kind`]): its flows
//! ([`Flow`]: sans-IO, they say what they want and are told what came of
//! it) and what stays the kind's own (how a test starts and stops, how a
//! flow's connection is opened or taken, and the I/O of carrying its
//! bytes). The worker owns the turn, in one order for every kind:
//!
//! 1. the kind's start of a turn ([`Kind::begin`]: a schedule that came, a
//!    release, the end of omitted seconds);
//! 2. the window: live publishing, the CPU clock at the window's edges,
//!    TCP_INFO of its flows' connections;
//! 3. the stop checks ([`Kind::stop`]);
//! 4. the single flow's blocking fast path: a parkable flow alone on its
//!    worker is carried in its own socket's blocking read, and the next
//!    turn reuses the time that read ended at;
//! 5. the flows' deadlines that have come: each flow is told only of the
//!    deadline it gave last ([`Told::Timer`]), then driven;
//! 6. the wait, as long as the window's next edge, the timers and the
//!    kind's own deadline allow; then the events (a flow's socket drives
//!    that flow; any other token is the kind's), then the flows that
//!    stopped at their budget.
//!
//! Driving a flow is asking it what it wants until it waits: the worker
//! spins for it, holds it at a barrier, or hands the step that needs I/O
//! to the kind ([`Kind::perform`]) and tells the flow what came of it.
//! After each drive the flow's deadline is armed if it changed (one
//! generation per flow, so that a timer armed before the flow moved on
//! drives nothing; a plain deadline put off keeps its timer, which arms the
//! later one when it comes).

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::{Events, Interest, Token};
use slab::Slab;

use crate::counters::Counters;
use crate::flow::step::{Carried, ConnIx, Deadline, Flow, Step, Told, MAX_CONNS};
use crate::io::Conn;
use crate::live::LiveStats;
use crate::schedule::Schedule;
use crate::worker::driver::{self, Driver, Flows, Turn};
use crate::worker::handover::retransmits_so_far;
use crate::worker::signals::{Parked, Signals};
use crate::worker::window::{Connections, Publish, Window};
use crate::worker::WindowClock;

/// Tokens from here up are no flow's: the kind's own sources (a listener,
/// a shared datagram socket, a control connection, connections behind the
/// gate), handed to [`Kind::event`].
pub const KIND_TOKENS: usize = 1 << 48;

/// Steps one drive of a flow takes before the worker's other flows get a
/// turn (the flow is driven again after this turn's events).
const STEP_BUDGET: u32 = 64;

/// Longest a spinning flow (a profile's busy think) holds the worker
/// before its other flows get a turn.
pub const SPIN_SLICE: Duration = Duration::from_millis(1);

/// The token of flow `key`'s connection `c`.
pub fn token(key: usize, c: ConnIx) -> Token {
    Token(key * MAX_CONNS + c)
}

/// One socket of a flow.
#[derive(Debug)]
pub struct Link {
    /// Which of the flow's connections.
    pub c: ConnIx,
    /// The socket.
    pub conn: Conn,
    /// Its retransmits when the window opened (0 for one opened since).
    pub retrans_before: u32,
}

/// A flow where the worker keeps it: the flow, its sockets (newest last)
/// and its armed deadline.
#[derive(Debug)]
pub struct Slot<F> {
    /// The flow.
    pub flow: F,
    /// Its sockets, newest last (a profile stacks connects on one
    /// connection).
    pub links: Vec<Link>,
    /// The deadline armed for it last, and its generation.
    armed: Option<Deadline>,
    generation: u64,
    /// Whether that deadline's timer is still to come (not yet due).
    pending: bool,
    done: bool,
    /// Its TCP connection's retransmits when its last one closed.
    retrans_at_close: Option<u32>,
    /// Whether its sockets may have something to read, or room to write:
    /// set by their readiness events, cleared by the kind when a call would
    /// block (a drive for a deadline then skips what cannot move).
    pub readable: bool,
    /// See `readable`.
    pub writable: bool,
}

impl<F> Slot<F> {
    /// The newest socket of connection `c`.
    pub fn link(&mut self, c: ConnIx) -> Option<&mut Link> {
        self.links.iter_mut().rev().find(|l| l.c == c)
    }

    /// Whether the flow is done.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// What a worker kind keeps of its own, and the I/O its flows' steps need.
pub trait Kind: Sized {
    /// Its flows.
    type Flow: Flow<Counts = Self::Counts>;
    /// What its flows count into: the engine's counters, perhaps with the
    /// kind's own figures beside them.
    type Counts: AsMut<Counters>;
    /// Whether its window reads its flows' TCP connections (TCP_INFO at
    /// the window's close, retransmits in the live seconds).
    const TCP_INFO: bool;

    /// The start of a turn at `now`, before anything else.
    fn begin(&mut self, core: &mut Core<Self>, now: Instant) {
        let _ = (core, now);
    }

    /// Whether the loop is over at `now` (asked after the window's turn and
    /// again after the flows' timers).
    fn stop(&mut self, core: &Core<Self>, now: Instant) -> bool;

    /// Does the I/O of `step` (one of Connect, Accept, Carry, Close) for
    /// flow `key`, at `now` (moved on to when its last read ended, if it
    /// read). What came of it is told to the flow; `None` is nothing yet
    /// (a connect or accept under way): the flow waits.
    fn perform(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        step: Step,
        now: &mut Instant,
    ) -> Option<Told>;

    /// The flow whose socket is registered under `token`, one of the
    /// kind's own ([`Core::adopt`]): the event drives that flow. `None`: the
    /// event is the kind's ([`Kind::event`]).
    fn route(&self, token: usize) -> Option<usize> {
        let _ = token;
        None
    }

    /// A readiness event under a token that is no flow's.
    fn event(&mut self, core: &mut Core<Self>, event: &Event, now: Instant) {
        let _ = (core, event, now);
    }

    /// Flow `key` holds at barrier `n`.
    fn held(&mut self, core: &mut Core<Self>, key: usize, n: usize) {
        let _ = (core, key, n);
    }

    /// Flow `key` is done.
    fn done(&mut self, core: &mut Core<Self>, key: usize) {
        let _ = (core, key);
    }

    /// The kind's own next deadline (the test's limit, a gate's expiry).
    fn deadline(&self, core: &Core<Self>) -> Option<Instant> {
        let _ = core;
        None
    }

    /// Where the single flow's socket is parked, if the worker may carry
    /// its one flow on the blocking fast path now.
    fn single(&self, core: &Core<Self>) -> Option<Arc<Signals>> {
        let _ = core;
        None
    }

    /// The end of a turn, after its events and the flows driven again.
    fn turned(&mut self, core: &mut Core<Self>, now: Instant) {
        let _ = (core, now);
    }
}

/// What every worker has, whatever it carries.
pub struct Core<K: Kind> {
    driver: Driver,
    window: Window,
    /// What the flows count.
    pub counts: K::Counts,
    /// The flows by key.
    pub slots: Slab<Slot<K::Flow>>,
    /// The test's schedule, once it has one: the window opens and closes
    /// on it and the wait ends at its edges.
    schedule: Option<Schedule>,
    /// A window that keeps other edges than the counting's (the iperf3
    /// server's CPU covers its omitted seconds too).
    window_schedule: Option<Schedule>,
    /// Flows not done.
    live: usize,
    /// The single flow on the blocking fast path, and its parked socket.
    parked: Option<(usize, Parked)>,
    /// A parkable flow was looked at and could not be parked: not again.
    unparkable: bool,
    /// Whether a flow was ever carried on the fast path.
    parked_once: bool,
    /// The last generation a flow's deadline was armed with.
    generations: u64,
    /// Whether the window publishes each second (with the flows'
    /// retransmits), or totals only.
    seconds: bool,
}

impl<K: Kind> Core<K> {
    /// A worker's core on `driver`, its window on `clock` publishing into
    /// `live` (slot `index`) from `now`.
    pub fn new(
        driver: Driver,
        clock: WindowClock,
        live: Option<Arc<LiveStats>>,
        index: usize,
        seconds: bool,
        counts: K::Counts,
        now: Instant,
    ) -> Self {
        let publish = if seconds {
            Publish::Seconds
        } else {
            Publish::Totals
        };
        Core {
            driver,
            window: Window::new(clock, live, index, publish, now),
            counts,
            slots: Slab::new(),
            schedule: None,
            window_schedule: None,
            live: 0,
            parked: None,
            unparkable: false,
            parked_once: false,
            generations: 0,
            seconds,
        }
    }

    /// The event wait.
    pub fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The schedule the window keeps.
    pub fn schedule(&self) -> Option<&Schedule> {
        self.schedule.as_ref()
    }

    /// Sets the schedule the window opens and closes on, and whose edges
    /// end the wait.
    pub fn set_schedule(&mut self, schedule: Schedule) {
        self.schedule = Some(schedule);
    }

    /// Sets other edges for the window than the schedule's.
    pub fn set_window_schedule(&mut self, schedule: Schedule) {
        self.window_schedule = Some(schedule);
    }

    /// Adds a flow; its key.
    pub fn add(&mut self, flow: K::Flow) -> usize {
        self.live += 1;
        self.slots.insert(Slot {
            flow,
            links: Vec::new(),
            armed: None,
            generation: 0,
            pending: false,
            done: false,
            retrans_at_close: None,
            readable: true,
            writable: true,
        })
    }

    /// Tells flow `key` (if it is there and not done) `what` at `now`:
    /// what came for it outside its own steps, such as a datagram the kind
    /// read on a socket its flows share.
    pub fn tell(&mut self, key: usize, what: Told, now: Instant) {
        if let Some(s) = self.slots.get_mut(key).filter(|s| !s.done) {
            s.flow.told(what, now, &mut self.counts);
        }
    }

    /// Flows not done.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Whether the single flow is on the blocking fast path (its socket
    /// blocks: a read or write that moved part of a message returns).
    pub fn blocking(&self) -> bool {
        self.parked.is_some()
    }

    /// Whether a flow was ever carried on the blocking fast path.
    pub fn parked_once(&self) -> bool {
        self.parked_once
    }

    /// Gives flow `key` socket `conn` as its connection `c`, registered
    /// for both readiness edges under its token.
    pub fn attach(&mut self, key: usize, c: ConnIx, mut conn: Conn) -> std::io::Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        self.driver
            .registry()
            .register(conn.source(), token(key, c), interest)?;
        if let Some(s) = self.slots.get_mut(key) {
            s.links.push(Link {
                c,
                conn,
                retrans_before: 0,
            });
        }
        Ok(())
    }

    /// Gives flow `key` socket `conn` as its connection `c`, left
    /// registered with this worker's event wait under the kind's own token
    /// (one it held the socket under before a flow took it, as a connection
    /// behind a gate): its events go to the kind's [`Kind::route`], which
    /// names the flow they drive. No system call.
    pub fn adopt(&mut self, key: usize, c: ConnIx, conn: Conn) {
        if let Some(s) = self.slots.get_mut(key) {
            s.links.push(Link {
                c,
                conn,
                retrans_before: 0,
            });
        }
    }

    /// Takes flow `key` out of the worker, with its sockets (still
    /// registered): a kind keeps no flow that is done, or one that never
    /// got its connection. A deadline it had armed drives nothing.
    pub fn remove(&mut self, key: usize) -> Option<Slot<K::Flow>> {
        let slot = self.slots.try_remove(key)?;
        if !slot.done {
            self.live -= 1;
        }
        if self.parked.as_ref().is_some_and(|(k, _)| *k == key) {
            self.parked = None;
        }
        Some(slot)
    }

    /// Whether the event wait never sleeps (busy-polling).
    pub fn busy_polls(&self) -> bool {
        self.driver.busy_polls()
    }

    /// Closes flow `key`'s newest socket of connection `c`: the window
    /// reads its TCP_INFO first if it is one of the test's
    /// (`per_transaction`: one of a connect-per-transaction flow's many,
    /// whose retransmits only count). The socket, if there was one.
    pub fn close(&mut self, key: usize, c: ConnIx, per_transaction: bool) -> Option<Conn> {
        let slot = self.slots.get_mut(key)?;
        let at = slot.links.iter().rposition(|l| l.c == c)?;
        let mut link = slot.links.remove(at);
        if K::TCP_INFO {
            let schedule = self.schedule.as_ref();
            self.window
                .closing(&link.conn, link.retrans_before, per_transaction, schedule);
            // Kept for the live seconds' retransmits only (read after it
            // is gone): a window of totals, or one nobody watches, reads
            // nothing more as a connection closes.
            if self.seconds && self.window.watched() && link.conn.is_tcp() {
                slot.retrans_at_close = Some(retransmits_so_far(link.conn.as_raw_fd()));
            }
        }
        if self.parked.as_ref().is_some_and(|(k, _)| *k == key) {
            self.parked = None;
        }
        let _ = self.driver.registry().deregister(link.conn.source());
        Some(link.conn)
    }

    /// Drops flow `key`'s newest socket of connection `c` as it is (no
    /// TCP_INFO read): a connect-per-transaction flow's finished or failed
    /// connection.
    pub fn drop_link(&mut self, key: usize, c: ConnIx) -> Option<Conn> {
        let slot = self.slots.get_mut(key)?;
        let at = slot.links.iter().rposition(|l| l.c == c)?;
        let mut link = slot.links.remove(at);
        if self.parked.as_ref().is_some_and(|(k, _)| *k == key) {
            self.parked = None;
        }
        let _ = self.driver.registry().deregister(link.conn.source());
        Some(link.conn)
    }

    /// Marks flow `key` done.
    fn finish(&mut self, key: usize) {
        if let Some(s) = self.slots.get_mut(key) {
            if !std::mem::replace(&mut s.done, true) {
                self.live -= 1;
            }
        }
        if self.parked.as_ref().is_some_and(|(k, _)| *k == key) {
            self.parked = None;
        }
    }

    /// Arms flow `key`'s deadline if it changed since it was armed.
    ///
    /// A plain deadline put off while its timer is still to come keeps that
    /// timer: when it comes, the flow is not told, and its deadline is
    /// armed anew (a flow that moves its deadline on with each transaction,
    /// as a UDP user's loss timeout does, costs a timer per timeout, not
    /// one per transaction left in the heap until its time).
    fn arm(&mut self, key: usize) {
        let Some(s) = self.slots.get_mut(key) else {
            return;
        };
        let want = if s.done { None } else { s.flow.deadline() };
        if want == s.armed {
            return;
        }
        if let (Some(w), Some(a)) = (want, s.armed) {
            if s.pending && !w.precise && !a.precise && w.at > a.at {
                return;
            }
        }
        // Generations count across the worker's flows: a timer armed for
        // a flow since removed never matches one that took its key.
        self.generations += 1;
        s.generation = self.generations;
        s.armed = want;
        s.pending = want.is_some();
        if let Some(d) = want {
            if d.precise {
                self.driver.timers.arm_precise(d.at, key, s.generation);
            } else {
                self.driver.timers.arm(d.at, key, s.generation);
            }
        }
    }

    /// The window's turn at `now` (the loop turns it first thing; a kind
    /// whose window opens before its loop turns it then too).
    pub fn window_turn(&mut self, now: Instant) {
        let Core {
            window,
            counts,
            slots,
            schedule,
            window_schedule,
            ..
        } = self;
        let flows = &mut Linked::<K::Flow> {
            slots,
            read: K::TCP_INFO,
        };
        let edges = window_schedule.as_ref().or(schedule.as_ref());
        window.turn(now, edges, counts.as_mut(), flows);
    }

    /// The loop is over: the window closes (an aborted side's seconds stop
    /// now) and its last figures are published.
    pub fn end(&mut self, aborted: bool) {
        let flows = &mut Linked::<K::Flow> {
            slots: &mut self.slots,
            read: K::TCP_INFO,
        };
        self.window.end(self.counts.as_mut(), flows, aborted);
    }

    /// The window's CPU, where the worker ran (carrying `flows` flows) and
    /// its connections' TCP_INFO; the window closes now if it is open. For
    /// a worker that turns on past its window (the iperf3 server's streams,
    /// read until they hold all the client says it sent).
    pub fn finish_window(
        &mut self,
        flows: u32,
    ) -> (
        linkperf_metrics::ProcessCpu,
        linkperf_measured::WorkerPlacement,
        linkperf_metrics::TcpInfoAggregator,
    ) {
        self.window.finish(flows)
    }

    /// What is left of the worker at its end: its driver (for a tail that
    /// goes on without the flows' turn), its window clock, what it counted
    /// and its flows.
    pub fn into_parts(self) -> Parts<K::Flow, K::Counts> {
        Parts {
            driver: self.driver,
            window: self.window,
            counts: self.counts,
            slots: self.slots,
        }
    }
}

/// A worker's core taken apart at its end ([`Core::into_parts`]).
pub struct Parts<F, C> {
    /// Its event wait, its flows' sockets still registered.
    pub driver: Driver,
    pub(crate) window: Window,
    /// What it counted.
    pub counts: C,
    /// Its flows and their sockets.
    pub slots: Slab<Slot<F>>,
}

impl<F, C> Parts<F, C> {
    /// The window's CPU, where the worker ran (carrying `flows` flows) and
    /// its connections' TCP_INFO; the window closes now if it is open.
    pub fn finish(
        &mut self,
        flows: u32,
    ) -> (
        linkperf_metrics::ProcessCpu,
        linkperf_measured::WorkerPlacement,
        linkperf_metrics::TcpInfoAggregator,
    ) {
        self.window.finish(flows)
    }
}

/// A worker's flows as its window reads their connections.
struct Linked<'a, F> {
    slots: &'a mut Slab<Slot<F>>,
    /// Whether the kind's window reads them at all.
    read: bool,
}

impl<F> Connections for Linked<'_, F> {
    fn each_tcp(&mut self, mut f: impl FnMut(&Conn, &mut u32)) {
        if !self.read {
            return;
        }
        for (_, s) in self.slots.iter_mut() {
            for l in s.links.iter_mut().filter(|l| l.conn.is_tcp()) {
                f(&l.conn, &mut l.retrans_before);
            }
        }
    }

    fn retransmits(&self) -> impl Iterator<Item = Option<u32>> {
        let read = self.read;
        self.slots.iter().filter(move |_| read).map(|(_, s)| {
            match s.links.iter().rev().find(|l| l.conn.is_tcp()) {
                Some(l) => Some(retransmits_so_far(l.conn.as_raw_fd())),
                None => s.retrans_at_close,
            }
        })
    }
}

/// Drives flow `key` of `core` from `now` until it waits; the time its
/// last read ended at, or `now`. A kind may drive a flow it made ready in
/// its own event (an accept loop that serves each connection as it comes,
/// before it takes the next).
pub fn drive<K: Kind>(core: &mut Core<K>, kind: &mut K, key: usize, now: Instant) -> Instant {
    let mut now = now;
    let mut steps = 0;
    loop {
        let Some(slot) = core.slots.get_mut(key) else {
            return now;
        };
        if slot.done {
            break;
        }
        steps += 1;
        if steps > STEP_BUDGET {
            core.driver.again(key);
            break;
        }
        match slot.flow.step(now, &mut core.counts) {
            Step::Wait => break,
            Step::Again => {
                core.driver.again(key);
                break;
            }
            Step::Spin(left) => {
                // Its CPU time: the worker spins for it alone, a slice
                // at a time, so that the other flows get turns.
                let slice = left.min(SPIN_SLICE);
                let start = Instant::now();
                while start.elapsed() < slice {
                    std::hint::spin_loop();
                }
                now = Instant::now();
                slot.flow
                    .told(Told::Spun(now - start), now, &mut core.counts);
                core.driver.again(key);
                break;
            }
            Step::Hold(n) => {
                kind.held(core, key, n);
                break;
            }
            Step::Done => {
                core.finish(key);
                kind.done(core, key);
                break;
            }
            step => {
                let told = kind.perform(core, key, step, &mut now);
                match told {
                    None
                    | Some(Told::Carried {
                        how: Carried::Blocked,
                        ..
                    }) => break,
                    Some(Told::Carried {
                        how: Carried::Again,
                        ..
                    }) => {
                        core.driver.again(key);
                        break;
                    }
                    Some(t) => {
                        if let Some(s) = core.slots.get_mut(key) {
                            s.flow.told(t, now, &mut core.counts);
                        }
                    }
                }
            }
        }
    }
    core.arm(key);
    now
}

/// A worker: its core and its kind, turned by the driver's loop.
pub struct Worker<K: Kind> {
    /// What every worker has.
    pub core: Core<K>,
    /// What this one carries.
    pub kind: K,
}

impl<K: Kind> Worker<K> {
    /// A worker of `kind` on `core`.
    pub fn new(core: Core<K>, kind: K) -> Self {
        Worker { core, kind }
    }

    /// Turns the loop until the kind says stop; a failed event wait ends
    /// it with its error.
    pub fn run(&mut self, events: &mut Events) -> std::io::Result<()> {
        driver::run(self, events)
    }

    /// Drives flow `key` from `now` until it waits; the time its last read
    /// ended at, or `now`.
    pub fn drive(&mut self, key: usize, now: Instant) -> Instant {
        drive(&mut self.core, &mut self.kind, key, now)
    }

    /// Parks the single flow if the kind allows and it is parkable; its
    /// key once parked.
    fn fast(&mut self) -> Option<usize> {
        if let Some((key, _)) = &self.core.parked {
            return Some(*key);
        }
        if self.core.unparkable || self.core.live != 1 || self.core.slots.len() != 1 {
            return None;
        }
        let (_, slot) = self.core.slots.iter().next()?;
        if slot.done || !slot.flow.parkable() || slot.links.len() != 1 {
            return None;
        }
        let signals = self.kind.single(&self.core)?;
        let core = &mut self.core;
        let (key, slot) = core.slots.iter_mut().next()?;
        let link = &mut slot.links[0];
        match core
            .driver
            .park(&mut link.conn, token(key, link.c), &signals)
        {
            Some(p) => {
                core.parked = Some((key, p));
                core.parked_once = true;
                Some(key)
            }
            None => {
                core.unparkable = true;
                None
            }
        }
    }
}

impl<K: Kind> Flows for Worker<K> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.core.driver
    }

    fn turn(&mut self, now: Instant) -> Turn {
        self.kind.begin(&mut self.core, now);
        self.core.window_turn(now);
        if self.kind.stop(&self.core, now) {
            return Turn::Stop;
        }
        if let Some(key) = self.fast() {
            // The next turn goes on from the time its last read ended, if
            // it read (a read that waited in vain leaves the time as it was:
            // the next turn reads the clock).
            let at = self.drive(key, now);
            return Turn::Again((at != now).then_some(at));
        }
        while let Some((at, key, generation)) = self.core.driver.timers.due(now) {
            let Some(s) = self.core.slots.get_mut(key) else {
                continue;
            };
            // Only the deadline armed last; it stays armed (told once) until
            // the flow gives another.
            if s.done || s.generation != generation {
                continue;
            }
            s.pending = false;
            if s.flow.deadline().is_some_and(|d| d.at > at) {
                // Put off since it was armed: armed for when it is now.
                self.core.arm(key);
                continue;
            }
            s.flow.told(Told::Timer(at), now, &mut self.core.counts);
            self.drive(key, now);
        }
        if self.kind.stop(&self.core, now) {
            return Turn::Stop;
        }
        let deadline = self.kind.deadline(&self.core);
        let core = &self.core;
        Turn::Wait(
            core.driver
                .timeout(now, core.schedule.as_ref(), deadline, false),
        )
    }

    fn event(&mut self, event: &Event, now: Instant) {
        let t = event.token().0;
        if t >= KIND_TOKENS {
            match self.kind.route(t) {
                Some(key) => {
                    if self.core.slots.contains(key) {
                        self.drive(key, now);
                    }
                }
                None => self.kind.event(&mut self.core, event, now),
            }
            return;
        }
        let key = t / MAX_CONNS;
        let Some(s) = self.core.slots.get_mut(key) else {
            return;
        };
        s.readable |= event.is_readable() || event.is_read_closed() || event.is_error();
        s.writable |= event.is_writable() || event.is_write_closed();
        self.drive(key, now);
    }

    fn again(&mut self, key: usize, now: Instant) {
        self.drive(key, now);
    }

    fn turned(&mut self, now: Instant) {
        self.kind.turned(&mut self.core, now);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::Duration;

    use super::*;

    /// A flow that reads `want` bytes on its connection, with what it was
    /// told kept for the test.
    #[derive(Default)]
    struct Reader {
        want: usize,
        got: usize,
        /// CPU time to spin before it reads.
        spin: Duration,
        spun: Vec<Duration>,
        /// The deadline it gives now.
        deadline: Option<Deadline>,
        /// The deadline to give once bytes arrived.
        then: Option<Deadline>,
        /// Deadlines it was told of.
        timers: Vec<Instant>,
        /// Done once told of a deadline.
        done_at_timer: bool,
        parkable: bool,
    }

    impl Flow for Reader {
        type Counts = Counters;

        fn step(&mut self, _now: Instant, _counts: &mut Counters) -> Step {
            let spun: Duration = self.spun.iter().sum();
            if spun < self.spin {
                return Step::Spin(self.spin - spun);
            }
            if self.got >= self.want || (self.done_at_timer && !self.timers.is_empty()) {
                return Step::Done;
            }
            Step::Carry(0)
        }

        fn told(&mut self, what: Told, _now: Instant, _counts: &mut Counters) {
            match what {
                Told::Timer(at) => self.timers.push(at),
                Told::Spun(d) => self.spun.push(d),
                Told::Carried { .. } => {}
                other => panic!("told {other:?}"),
            }
        }

        fn deadline(&self) -> Option<Deadline> {
            self.deadline
        }

        fn parkable(&self) -> bool {
            self.parkable
        }
    }

    /// A kind that reads its flows' sockets, stops when its flows are
    /// done or at `limit`, and answers `again` carries with "still ready".
    struct Fake {
        limit: Instant,
        /// Carries to answer as stopped at the budget before reading.
        again: u32,
        carries: u32,
        /// Whether the carries found the socket blocking.
        blocking: Vec<bool>,
        signals: Option<Arc<Signals>>,
        /// Tokens of its own that are flows' sockets, and their flows.
        routes: Vec<(usize, usize)>,
    }

    impl Fake {
        fn new() -> Self {
            Fake {
                limit: Instant::now() + Duration::from_secs(20),
                again: 0,
                carries: 0,
                blocking: Vec::new(),
                signals: None,
                routes: Vec::new(),
            }
        }
    }

    impl Kind for Fake {
        type Flow = Reader;
        type Counts = Counters;
        const TCP_INFO: bool = false;

        fn stop(&mut self, core: &Core<Self>, now: Instant) -> bool {
            core.live() == 0 || now >= self.limit
        }

        fn perform(
            &mut self,
            core: &mut Core<Self>,
            key: usize,
            step: Step,
            now: &mut Instant,
        ) -> Option<Told> {
            let Step::Carry(c) = step else {
                panic!("asked {step:?}");
            };
            self.carries += 1;
            if self.carries <= self.again {
                return Some(Told::Carried {
                    conn: c,
                    how: Carried::Again,
                });
            }
            self.blocking.push(core.blocking());
            let slot = core.slots.get_mut(key)?;
            let mut buf = [0u8; 4096];
            loop {
                let link = slot.link(c)?;
                let how = match link.conn.read(&mut buf) {
                    Ok(0) => Carried::Eof,
                    Ok(n) => {
                        // The time the read ended.
                        *now = Instant::now();
                        slot.flow.got += n;
                        if let Some(d) = slot.flow.then.take() {
                            slot.flow.deadline = Some(d);
                        }
                        if slot.flow.got < slot.flow.want {
                            continue;
                        }
                        Carried::Finished
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Carried::Blocked,
                    Err(e) => Carried::Failed(e),
                };
                return Some(Told::Carried { conn: c, how });
            }
        }

        fn deadline(&self, _core: &Core<Self>) -> Option<Instant> {
            Some(self.limit)
        }

        fn single(&self, _core: &Core<Self>) -> Option<Arc<Signals>> {
            self.signals.clone()
        }

        fn route(&self, token: usize) -> Option<usize> {
            self.routes.iter().find(|r| r.0 == token).map(|r| r.1)
        }
    }

    fn worker(kind: Fake) -> Worker<Fake> {
        let (driver, _) = Driver::new(false).unwrap();
        let clock = WindowClock::start(0, None).unwrap();
        let now = Instant::now();
        let core = Core::new(driver, clock, None, 0, false, Counters::new(false), now);
        Worker::new(core, kind)
    }

    /// A flow on one end of a socket pair; the other end.
    fn with_pair(w: &mut Worker<Fake>, flow: Reader) -> (usize, std::os::unix::net::UnixStream) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let key = w.core.add(flow);
        let conn = Conn::Unix(mio::net::UnixStream::from_std(a));
        w.core.attach(key, 0, conn).unwrap();
        (key, b)
    }

    #[test]
    fn a_flow_is_driven_by_its_sockets_events_and_the_last_one_done_stops_the_loop() {
        let mut w = worker(Fake::new());
        let flow = Reader {
            want: 10_000,
            ..Reader::default()
        };
        let (key, mut peer) = with_pair(&mut w, flow);
        let writer = std::thread::spawn(move || {
            for _ in 0..10 {
                peer.write_all(&[7u8; 1000]).unwrap();
            }
            peer
        });
        w.run(&mut Events::with_capacity(16)).unwrap();
        let _peer = writer.join().unwrap();
        let s = &w.core.slots[key];
        assert_eq!(s.flow.got, 10_000);
        assert!(s.is_done());
        assert_eq!(w.core.live(), 0);
        assert!(
            Instant::now() < w.kind.limit,
            "stopped by its flow, not its limit"
        );
    }

    #[test]
    fn only_the_deadline_a_flow_gave_last_is_told() {
        let mut w = worker(Fake::new());
        let start = Instant::now();
        let (first, last) = (
            start + Duration::from_millis(30),
            start + Duration::from_millis(120),
        );
        let flow = Reader {
            want: usize::MAX,
            deadline: Some(Deadline::at(first)),
            then: Some(Deadline::at(last)),
            done_at_timer: true,
            ..Reader::default()
        };
        let (key, mut peer) = with_pair(&mut w, flow);
        // Driven with nothing to read: its first deadline is armed.
        w.drive(key, start);
        // Bytes come: it gives another deadline, which replaces the first.
        peer.write_all(b"x").unwrap();
        w.run(&mut Events::with_capacity(16)).unwrap();
        let s = &w.core.slots[key];
        assert_eq!(s.flow.got, 1);
        assert_eq!(s.flow.timers, vec![last], "told of its last deadline only");
        assert!(s.is_done());
        assert!(Instant::now() >= last);
    }

    /// A UDP user moves its loss timeout on with each transaction: the
    /// worker keeps one timer for it, not one per move, and tells it only
    /// of the deadline it gives when that timer comes.
    #[test]
    fn a_deadline_put_off_again_and_again_keeps_one_timer_and_is_told_once() {
        let mut kind = Fake::new();
        let start = Instant::now();
        kind.limit = start + Duration::from_secs(30);
        let mut w = worker(kind);
        let flow = Reader {
            want: usize::MAX,
            done_at_timer: true,
            ..Reader::default()
        };
        let (key, _peer) = with_pair(&mut w, flow);
        let mut last = start;
        for i in 0..100 {
            last = start + Duration::from_millis(20 + i);
            w.core.slots[key].flow.deadline = Some(Deadline::at(last));
            w.drive(key, start);
        }
        assert_eq!(w.core.driver.timers.len(), 1, "one timer for 100 moves");
        // Moved earlier than the timer armed: that one is armed too.
        let early = start + Duration::from_millis(10);
        w.core.slots[key].flow.deadline = Some(Deadline::at(early));
        w.drive(key, start);
        assert_eq!(w.core.driver.timers.len(), 2);
        w.core.slots[key].flow.deadline = Some(Deadline::at(last));
        w.drive(key, start);
        w.run(&mut Events::with_capacity(16)).unwrap();
        let s = &w.core.slots[key];
        assert_eq!(s.flow.timers, vec![last], "told of its last deadline only");
        assert!(s.is_done());
        assert!(Instant::now() >= last);
    }

    #[test]
    fn a_deadline_that_came_is_told_once_while_the_flow_gives_it_still() {
        let mut kind = Fake::new();
        let start = Instant::now();
        // The kind ends the loop well after the deadline.
        kind.limit = start + Duration::from_millis(150);
        let mut w = worker(kind);
        let at = start + Duration::from_millis(20);
        let flow = Reader {
            want: usize::MAX,
            deadline: Some(Deadline::at(at)),
            ..Reader::default()
        };
        let (key, _peer) = with_pair(&mut w, flow);
        w.drive(key, start);
        w.run(&mut Events::with_capacity(16)).unwrap();
        assert_eq!(w.core.slots[key].flow.timers, vec![at]);
    }

    #[test]
    fn a_carry_stopped_at_its_budget_is_carried_again_without_an_event() {
        let mut kind = Fake::new();
        kind.again = 3;
        let mut w = worker(kind);
        let flow = Reader {
            want: 5,
            ..Reader::default()
        };
        let (key, mut peer) = with_pair(&mut w, flow);
        peer.write_all(b"hello").unwrap();
        // One drive before the loop: its carries say "again" three times,
        // and the again queue carries it on, with no more bytes coming.
        w.drive(key, Instant::now());
        w.run(&mut Events::with_capacity(16)).unwrap();
        assert_eq!(w.kind.carries, 4);
        assert_eq!(w.core.slots[key].flow.got, 5);
        assert!(Instant::now() < w.kind.limit);
    }

    #[test]
    fn a_spinning_flow_spins_a_slice_at_a_time_and_is_told_each() {
        let mut w = worker(Fake::new());
        let flow = Reader {
            want: 1,
            spin: Duration::from_millis(5),
            ..Reader::default()
        };
        let (key, mut peer) = with_pair(&mut w, flow);
        peer.write_all(b"!").unwrap();
        w.drive(key, Instant::now());
        w.run(&mut Events::with_capacity(16)).unwrap();
        let f = &w.core.slots[key].flow;
        // A slice at a time: each but the last at least a whole slice (a
        // preempted one lasts longer), and more than one unless the first
        // was preempted past the whole spin.
        let whole = &f.spun[..f.spun.len() - 1];
        assert!(whole.iter().all(|d| *d >= SPIN_SLICE), "{:?}", f.spun);
        if f.spun[0] < Duration::from_millis(5) {
            assert!(f.spun.len() >= 2, "{:?}", f.spun);
        }
        assert!(f.spun.iter().sum::<Duration>() >= Duration::from_millis(5));
        assert_eq!(f.got, 1);
    }

    #[test]
    fn a_single_parkable_flow_is_carried_in_its_blocking_read_until_it_is_done() {
        let mut kind = Fake::new();
        kind.signals = Some(Arc::new(Signals::default()));
        let mut w = worker(kind);
        let flow = Reader {
            want: 3000,
            parkable: true,
            ..Reader::default()
        };
        let (key, mut peer) = with_pair(&mut w, flow);
        let writer = std::thread::spawn(move || {
            for _ in 0..3 {
                peer.write_all(&[1u8; 1000]).unwrap();
            }
            peer
        });
        w.run(&mut Events::with_capacity(16)).unwrap();
        let _peer = writer.join().unwrap();
        assert_eq!(w.core.slots[key].flow.got, 3000);
        assert!(w.kind.blocking.iter().all(|b| *b), "{:?}", w.kind.blocking);
        assert!(!w.core.blocking(), "unparked once done");
    }

    #[test]
    fn a_flow_that_is_not_parkable_or_not_alone_waits_in_the_event_wait() {
        let mut kind = Fake::new();
        kind.signals = Some(Arc::new(Signals::default()));
        let mut w = worker(kind);
        let (_, mut p1) = with_pair(
            &mut w,
            Reader {
                want: 1,
                parkable: true,
                ..Reader::default()
            },
        );
        let (_, mut p2) = with_pair(
            &mut w,
            Reader {
                want: 1,
                parkable: true,
                ..Reader::default()
            },
        );
        p1.write_all(b"a").unwrap();
        p2.write_all(b"b").unwrap();
        w.run(&mut Events::with_capacity(16)).unwrap();
        assert_eq!(w.core.live(), 0);
        assert!(w.kind.blocking.iter().all(|b| !*b), "{:?}", w.kind.blocking);
    }

    #[test]
    fn the_single_flows_next_turn_goes_on_from_when_its_read_ended_if_it_read() {
        let mut kind = Fake::new();
        kind.signals = Some(Arc::new(Signals::default()));
        let mut w = worker(kind);
        let flow = Reader {
            want: 1,
            parkable: true,
            ..Reader::default()
        };
        let (_, mut peer) = with_pair(&mut w, flow);
        peer.write_all(b"x").unwrap();
        let t0 = Instant::now();
        let Turn::Again(Some(at)) = w.turn(t0) else {
            panic!("the parked flow read: its time goes on");
        };
        assert!(at > t0);
        // Done without reading: the next turn reads the clock.
        let (_, _peer) = with_pair(
            &mut w,
            Reader {
                want: 0,
                parkable: true,
                ..Reader::default()
            },
        );
        w.core.remove(0);
        assert_eq!(w.core.live(), 1);
        assert_eq!(w.turn(Instant::now()), Turn::Again(None));
        assert_eq!(w.core.live(), 0);
    }

    #[test]
    fn an_adopted_sockets_events_under_the_kinds_token_drive_its_flow() {
        let mut w = worker(Fake::new());
        let (a, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut conn = Conn::Unix(mio::net::UnixStream::from_std(a));
        // The kind's own first (a connection behind a gate).
        let mine = KIND_TOKENS + 5;
        w.core
            .driver()
            .registry()
            .register(conn.source(), Token(mine), Interest::READABLE)
            .unwrap();
        let key = w.core.add(Reader {
            want: 2,
            ..Reader::default()
        });
        w.core.adopt(key, 0, conn);
        w.kind.routes.push((mine, key));
        // No drive: the bytes' event under the kind's token drives the flow.
        peer.write_all(b"hi").unwrap();
        w.run(&mut Events::with_capacity(16)).unwrap();
        assert_eq!(w.core.slots[key].flow.got, 2);
        assert_eq!(w.core.live(), 0);
        assert!(Instant::now() < w.kind.limit);
    }

    #[test]
    fn a_removed_flows_deadline_is_never_told_to_the_flow_that_takes_its_key() {
        let mut kind = Fake::new();
        let start = Instant::now();
        kind.limit = start + Duration::from_millis(150);
        let mut w = worker(kind);
        let (early, late) = (
            start + Duration::from_millis(20),
            start + Duration::from_millis(60),
        );
        let (gone, _p1) = with_pair(
            &mut w,
            Reader {
                want: usize::MAX,
                deadline: Some(Deadline::at(early)),
                ..Reader::default()
            },
        );
        w.drive(gone, start);
        assert!(w.core.remove(gone).is_some());
        assert_eq!(w.core.live(), 0);
        let (key, _p2) = with_pair(
            &mut w,
            Reader {
                want: usize::MAX,
                deadline: Some(Deadline::at(late)),
                done_at_timer: true,
                ..Reader::default()
            },
        );
        assert_eq!(key, gone, "the key is taken again");
        w.drive(key, start);
        w.run(&mut Events::with_capacity(16)).unwrap();
        assert_eq!(w.core.slots[key].flow.timers, vec![late]);
    }
}
