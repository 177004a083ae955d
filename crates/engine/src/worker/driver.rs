//! The I/O driver every engine worker runs on: the event wait and what
//! decides how long to sleep in it (busy-poll, the window's next edge, the
//! next timer, flows to drive again at once), the timers, the flows whose
//! last drive stopped at their budget with the socket still ready, the
//! single flow's blocking park, and the one loop ([`run`]). The one worker
//! that turns it is generic over what it carries (`worker::generic`: a
//! test's client and server workers, a profile's, the iperf3 server's
//! streams); the one acceptor (`worker::acceptor`, for the daemon's lobby
//! and the iperf3 port) and the control shells turn it too, and [`Polled`]
//! turns a closure on it for a phase that looks at its sockets itself (the
//! iperf3 server's tail).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use crate::io::Conn;
use crate::schedule::Schedule;
use crate::worker::signals::{Parked, Signals};
use crate::worker::wake::{Wake, WAKE};

/// Token of a worker's waker.
pub const WAKER: Token = Token(usize::MAX);

/// Longest a worker sleeps before looking at its signals again.
pub const MAX_SLEEP: Duration = Duration::from_millis(50);

/// How far ahead of a timer's deadline a precise driver ([`Driver::precise`])
/// ends its sleep, to poll the rest of the way: what a wake-up from the
/// event wait takes on a busy host, well past its median (tens of
/// microseconds on a virtual machine, past 60 µs at its p99 with the
/// server on the same two CPUs).
pub const SPIN_AHEAD: Duration = Duration::from_micros(100);

/// Timers by deadline: each names what it is for (a flow's key) and a
/// generation, so that one armed before its flow moved on is told apart
/// from a current one. A precise timer (an arrival that goes the moment it
/// is due) is kept apart: a precise driver polls the last stretch before
/// it ([`SPIN_AHEAD`]), and before no other.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    precise: BinaryHeap<Reverse<(Instant, usize, u64)>>,
}

impl Timers {
    /// Arms a timer for `key` at `at`, of generation `seq`.
    pub(crate) fn arm(&mut self, at: Instant, key: usize, seq: u64) {
        self.heap.push(Reverse((at, key, seq)));
    }

    /// Arms a timer that must fire on time to the microsecond (see
    /// [`Driver::precise`]).
    pub(crate) fn arm_precise(&mut self, at: Instant, key: usize, seq: u64) {
        self.precise.push(Reverse((at, key, seq)));
    }

    /// Timers armed and not yet due (stale ones too).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len() + self.precise.len()
    }

    /// The next deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        [&self.heap, &self.precise]
            .into_iter()
            .filter_map(|h| h.peek().map(|Reverse((at, _, _))| *at))
            .min()
    }

    /// The next precise deadline.
    fn next_precise(&self) -> Option<Instant> {
        self.precise.peek().map(|Reverse((at, _, _))| *at)
    }

    /// A timer due by `now` (deadline, key, generation), taken off. Call
    /// until `None`.
    pub(crate) fn due(&mut self, now: Instant) -> Option<(Instant, usize, u64)> {
        let heap = [&mut self.heap, &mut self.precise]
            .into_iter()
            .filter(|h| h.peek().is_some_and(|Reverse(t)| t.0 <= now))
            .min_by_key(|h| h.peek().map(|Reverse(t)| t.0))?;
        heap.pop().map(|Reverse(t)| t)
    }
}

/// A worker's event wait and what paces it.
pub struct Driver {
    poll: Poll,
    busy_poll: bool,
    /// Timers of the worker's flows.
    pub(crate) timers: Timers,
    /// Flows to drive again without waiting for an event.
    again: Vec<usize>,
    /// A precise wake-up, when the worker keeps a schedule to the
    /// microsecond (an open-loop generator).
    wake: Option<Wake>,
}

impl Driver {
    /// A new event wait, and the waker that ends it from another thread
    /// (its events come under [`WAKER`]); `busy_poll` never sleeps in the
    /// wait. Every worker's and acceptor's event loop is made here.
    pub fn new(busy_poll: bool) -> io::Result<(Self, Arc<Waker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let driver = Driver {
            poll,
            busy_poll,
            timers: Timers::default(),
            again: Vec::new(),
            wake: None,
        };
        Ok((driver, waker))
    }

    /// Makes the wait end at its timers' deadlines to the microsecond,
    /// rather than at epoll's next whole millisecond (plus the kernel's
    /// slack): for a worker that keeps a schedule (an open-loop generator).
    /// It sleeps until [`SPIN_AHEAD`] before a deadline and polls the
    /// rest: one more system call per sleep, and the CPU of the polling
    /// (at most `SPIN_AHEAD` per deadline) counted as the worker's.
    pub fn precise(&mut self) -> io::Result<()> {
        if self.wake.is_none() {
            self.wake = Some(Wake::new(self.poll.registry())?);
        }
        Ok(())
    }

    /// Where sockets are registered.
    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// Whether the wait never sleeps.
    pub(crate) fn busy_polls(&self) -> bool {
        self.busy_poll
    }

    /// Flow `key` stopped at its budget with its socket still ready: it is
    /// driven again after this turn's events, and the wait does not sleep.
    pub fn again(&mut self, key: usize) {
        self.again.push(key);
    }

    /// The flows to drive again now.
    pub(crate) fn take_again(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.again)
    }

    /// How long the wait may sleep at `now`: not at all while work is
    /// queued (`queued`, or flows to drive again) or when busy-polling,
    /// else until the window's next edge, the next timer, `deadline` or
    /// 50 ms (a worker's longest sleep), whichever is first.
    pub fn timeout(
        &self,
        now: Instant,
        schedule: Option<&Schedule>,
        deadline: Option<Instant>,
        queued: bool,
    ) -> Duration {
        if self.busy_poll || queued || !self.again.is_empty() {
            return Duration::ZERO;
        }
        let mut timer = [self.timers.next(), deadline].into_iter().flatten().min();
        if let (Some(_), Some(at)) = (&self.wake, self.timers.next_precise()) {
            // A schedule kept to the microsecond: the sleep ends short of
            // the deadline by what a wake-up may take, and the wait is
            // polled, without sleeping, for the rest.
            if at.saturating_duration_since(now) <= SPIN_AHEAD {
                return Duration::ZERO;
            }
            let ahead = at - SPIN_AHEAD;
            timer = Some(timer.map_or(ahead, |t| t.min(ahead)));
        }
        let edge = schedule.and_then(|s| s.next_boundary(now));
        [timer, edge]
            .into_iter()
            .flatten()
            .map(|at| at.saturating_duration_since(now))
            .fold(MAX_SLEEP, Duration::min)
    }

    /// Waits for readiness into `events`, at most `timeout`. A signal that
    /// interrupts the wait is no error: the events are then empty.
    pub fn wait(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        let mut timeout = timeout;
        if let Some(w) = &self.wake {
            // A sleep that ends before the wait's next whole millisecond
            // ends on the timer instead, to the microsecond.
            if !timeout.is_zero() && timeout < MAX_SLEEP && w.arm(timeout).is_ok() {
                timeout += Duration::from_millis(1);
            }
        }
        match self.poll.poll(events, Some(timeout)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                events.clear();
                Ok(())
            }
            other => other,
        }
    }

    /// The blocking fast path of a worker that carries one request/response
    /// flow (and does not busy-poll): its socket `conn`, registered under
    /// `token`, leaves the event wait (registered, every arrival would also
    /// wake the wait's list, a lock and a queue per packet, for nobody) and
    /// blocks, its writes at most [`MAX_SLEEP`]; a duplicate is parked in
    /// `signals`, so that abort, finish or the deadline end a wait in its
    /// read. `None`, the socket back in the event wait as it was, if any
    /// step fails.
    pub(crate) fn park(
        &mut self,
        conn: &mut Conn,
        token: Token,
        signals: &Arc<Signals>,
    ) -> Option<Parked> {
        if self.busy_poll {
            return None;
        }
        let dup = conn.duplicate().ok()?;
        self.poll.registry().deregister(conn.source()).ok()?;
        if conn.block(MAX_SLEEP).is_err() {
            let both = Interest::READABLE | Interest::WRITABLE;
            let _ = self.poll.registry().register(conn.source(), token, both);
            return None;
        }
        Some(signals.park(dup))
    }
}

/// What the start of one turn of [`run`] comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The loop is over.
    Stop,
    /// Turn again at once, without waiting, from the time given if any (the
    /// single flow's blocking fast path drove its flow, and the time its
    /// last read ended saves a clock read).
    Again(Option<Instant>),
    /// Wait for readiness, at most this long (see [`Driver::timeout`]).
    Wait(Duration),
}

/// What the one loop ([`run`]) turns: the generic worker carrying flows
/// (`worker::generic::Worker`), the one acceptor (`worker::acceptor`: the
/// session's lobby, the iperf3 port), a control connection's shell (the
/// iperf3 client), or a [`Polled`]
/// closure. The loop owns when
/// a turn starts, waits and hands over its events; the implementor what a
/// turn, an event and a flow driven again do.
pub trait Flows {
    /// The driver the flows are registered with.
    fn driver(&mut self) -> &mut Driver;
    /// The start of a turn at `now`: the window's edges, timers and queued
    /// work that are due, and whether to stop, turn again or wait.
    fn turn(&mut self, now: Instant) -> Turn;
    /// A readiness event (never the waker's), read at `now`, after the wait.
    fn event(&mut self, event: &Event, now: Instant);
    /// A flow queued with [`Driver::again`], after the turn's events.
    fn again(&mut self, key: usize, now: Instant) {
        let _ = (key, now);
    }
    /// The end of a turn, after its events and the flows driven again.
    fn turned(&mut self, now: Instant) {
        let _ = now;
    }
}

/// Flows that look at their sockets themselves at each turn and take no
/// events: a worker waiting for its start, a phase that reads its streams
/// until they are quiet. Its turn is a closure.
pub struct Polled<'a, T> {
    driver: &'a mut Driver,
    turn: T,
}

impl<'a, T: FnMut(Instant) -> Turn> Polled<'a, T> {
    /// Turns `turn` on `driver`.
    pub fn new(driver: &'a mut Driver, turn: T) -> Self {
        Polled { driver, turn }
    }
}

impl<T: FnMut(Instant) -> Turn> Flows for Polled<'_, T> {
    fn driver(&mut self) -> &mut Driver {
        self.driver
    }
    fn turn(&mut self, now: Instant) -> Turn {
        (self.turn)(now)
    }
    fn event(&mut self, _event: &Event, _now: Instant) {}
}

/// The loop: turns until [`Flows::turn`] says stop. Each turn starts, waits
/// as long as the turn allows, hands every readiness event to the flows,
/// then the flows queued to be driven again, then ends. A failed wait ends
/// the loop with its error (an interrupted one is an empty turn).
pub fn run<F: Flows + ?Sized>(flows: &mut F, events: &mut Events) -> io::Result<()> {
    let mut from = None;
    loop {
        let now = from.take().unwrap_or_else(Instant::now);
        let timeout = match flows.turn(now) {
            Turn::Stop => return Ok(()),
            Turn::Again(at) => {
                from = at;
                continue;
            }
            Turn::Wait(timeout) => timeout,
        };
        flows.driver().wait(events, timeout)?;
        let now = Instant::now();
        for ev in events.iter() {
            if ev.token() != WAKER && ev.token() != WAKE {
                flows.event(ev, now);
            }
        }
        for key in flows.driver().take_again() {
            flows.again(key, now);
        }
        flows.turned(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(busy_poll: bool) -> Driver {
        Driver::new(busy_poll).unwrap().0
    }

    #[test]
    fn timers_come_due_in_deadline_order_with_their_key_and_generation() {
        let mut t = Timers::default();
        let t0 = Instant::now();
        t.arm(t0 + Duration::from_millis(30), 1, 7);
        t.arm(t0 + Duration::from_millis(10), 2, 0);
        t.arm(t0 + Duration::from_millis(20), 1, 8);
        assert_eq!(t.next(), Some(t0 + Duration::from_millis(10)));
        assert_eq!(t.due(t0), None);
        let now = t0 + Duration::from_millis(25);
        assert_eq!(t.due(now), Some((t0 + Duration::from_millis(10), 2, 0)));
        assert_eq!(t.due(now), Some((t0 + Duration::from_millis(20), 1, 8)));
        assert_eq!(t.due(now), None);
        assert_eq!(t.next(), Some(t0 + Duration::from_millis(30)));
    }

    #[test]
    fn the_wait_sleeps_until_the_first_of_timer_edge_and_deadline_at_most_max_sleep() {
        let mut d = driver(false);
        let t0 = Instant::now();
        assert_eq!(d.timeout(t0, None, None, false), MAX_SLEEP);
        d.timers.arm(t0 + Duration::from_millis(20), 0, 0);
        assert_eq!(d.timeout(t0, None, None, false), Duration::from_millis(20));
        let deadline = Some(t0 + Duration::from_millis(5));
        assert_eq!(
            d.timeout(t0, None, deadline, false),
            Duration::from_millis(5)
        );
        // The window opens in 3 ms.
        let s = Schedule::new(
            t0,
            Duration::from_millis(3),
            Duration::from_secs(1),
            Duration::ZERO,
        );
        assert_eq!(
            d.timeout(t0, Some(&s), deadline, false),
            Duration::from_millis(3)
        );
        // A deadline already past: no sleep.
        assert_eq!(
            d.timeout(t0 + Duration::from_millis(40), None, None, false),
            Duration::ZERO
        );
    }

    /// A precise driver sleeps until `SPIN_AHEAD` before a precise timer
    /// and polls the rest of the way; a plain timer it sleeps up to, as
    /// any driver does. Both kinds come due in one deadline order.
    #[test]
    fn a_precise_driver_polls_the_last_stretch_before_a_precise_timer_only() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut d = driver(false);
        d.precise().unwrap();
        d.timers.arm(t0 + ms(10), 0, 0);
        assert_eq!(d.timeout(t0, None, None, false), ms(10), "plain: no poll");
        d.timers.arm_precise(t0 + ms(20), 1, 0);
        assert_eq!(d.timeout(t0, None, None, false), ms(10));
        let later = t0 + ms(15);
        assert_eq!(d.timers.due(later), Some((t0 + ms(10), 0, 0)));
        assert_eq!(
            d.timeout(later, None, None, false),
            ms(5) - SPIN_AHEAD,
            "woken short of it"
        );
        let close = t0 + ms(20) - SPIN_AHEAD / 2;
        assert_eq!(d.timeout(close, None, None, false), Duration::ZERO);
        assert_eq!(d.timers.due(close), None, "polled until it is due");
        d.timers.arm(t0 + ms(30), 2, 0);
        assert_eq!(d.timers.due(t0 + ms(40)), Some((t0 + ms(20), 1, 0)));
        assert_eq!(d.timers.due(t0 + ms(40)), Some((t0 + ms(30), 2, 0)));
        // A driver that is not precise sleeps up to a precise timer too.
        let mut plain = driver(false);
        plain.timers.arm_precise(t0 + ms(20), 1, 0);
        assert_eq!(plain.timeout(t0, None, None, false), ms(20));
    }

    #[test]
    fn queued_work_flows_to_drive_again_and_busy_poll_never_sleep() {
        let t0 = Instant::now();
        let mut d = driver(false);
        assert_eq!(d.timeout(t0, None, None, true), Duration::ZERO);
        d.again(3);
        d.again(5);
        assert_eq!(d.timeout(t0, None, None, false), Duration::ZERO);
        assert_eq!(d.take_again(), vec![3, 5]);
        assert_eq!(d.timeout(t0, None, None, false), MAX_SLEEP);
        let busy = driver(true);
        assert_eq!(busy.timeout(t0, None, None, false), Duration::ZERO);
    }

    /// Flows that note what the loop asked of them, over a real socket pair.
    struct Noted {
        d: Driver,
        conn: mio::net::UnixStream,
        seen: Vec<String>,
        turns: u32,
        given: Option<Instant>,
        bytes: usize,
    }

    impl Flows for Noted {
        fn driver(&mut self) -> &mut Driver {
            &mut self.d
        }
        fn turn(&mut self, now: Instant) -> Turn {
            self.turns += 1;
            assert!(self.turns < 100, "the loop did not stop");
            if self.turns == 1 {
                self.given = Some(now - Duration::from_secs(1));
                self.seen.push("turn".into());
                return Turn::Again(self.given);
            }
            if self.turns == 2 {
                assert_eq!(Some(now), self.given, "the time given is the next turn's");
                self.seen.push("turn from the time given".into());
            }
            if self.bytes >= 3 {
                Turn::Stop
            } else {
                Turn::Wait(Duration::from_secs(30))
            }
        }
        fn event(&mut self, event: &Event, _now: Instant) {
            let mut b = [0u8; 16];
            while let Ok(n @ 1..) = std::io::Read::read(&mut self.conn, &mut b) {
                self.bytes += n;
            }
            self.seen.push(format!("event {}", event.token().0));
            self.d.again(7);
        }
        fn again(&mut self, key: usize, _now: Instant) {
            self.seen.push(format!("again {key}"));
        }
        fn turned(&mut self, _now: Instant) {
            self.seen.push("turned".into());
        }
    }

    #[test]
    fn a_turn_starts_waits_hands_over_events_then_flows_again_then_ends() {
        let (mut conn, mut peer) = mio::net::UnixStream::pair().unwrap();
        let d = driver(false);
        d.registry()
            .register(&mut conn, Token(1), Interest::READABLE)
            .unwrap();
        std::io::Write::write_all(&mut peer, b"abc").unwrap();
        let mut flows = Noted {
            d,
            conn,
            seen: Vec::new(),
            turns: 0,
            given: None,
            bytes: 0,
        };
        run(&mut flows, &mut Events::with_capacity(8)).unwrap();
        assert_eq!(flows.bytes, 3);
        assert_eq!(
            flows.seen,
            [
                "turn",
                "turn from the time given",
                "event 1",
                "again 7",
                "turned"
            ]
        );
        assert_eq!(flows.turns, 3, "the turn after the bytes came stops");
    }

    #[test]
    fn polled_flows_look_for_themselves_each_turn_and_stop_when_they_say() {
        let (mut conn, mut peer) = mio::net::UnixStream::pair().unwrap();
        let mut d = driver(false);
        d.registry()
            .register(&mut conn, Token(1), Interest::READABLE)
            .unwrap();
        std::io::Write::write_all(&mut peer, b"ab").unwrap();
        let (mut turns, mut bytes) = (0, 0);
        let mut polled = Polled::new(&mut d, |_| {
            turns += 1;
            let mut b = [0u8; 4];
            while let Ok(n @ 1..) = std::io::Read::read(&mut conn, &mut b) {
                bytes += n;
            }
            if bytes >= 2 || turns >= 100 {
                Turn::Stop
            } else {
                Turn::Wait(Duration::from_secs(30))
            }
        });
        run(&mut polled, &mut Events::with_capacity(8)).unwrap();
        assert_eq!(
            (turns, bytes),
            (1, 2),
            "it read on its first turn and stopped"
        );
    }
}
