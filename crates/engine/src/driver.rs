//! The I/O driver every engine worker runs on: a test's client and server
//! workers and a profile's on either side (and, for its event wait, the
//! iperf3 server's per-test loop). It owns the event wait and what
//! decides how long to sleep in it (busy-poll, the window's next edge, the
//! next timer, flows to drive again at once), the timers, the flows whose
//! last drive stopped at its budget with the socket still ready, and the
//! single flow's blocking fast path. What a worker does with a readiness
//! event, a timer or a flow is its own: the flows themselves are sans-IO
//! state machines (flow.rs, udp_stream.rs, program/user.rs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Registry, Token};

use crate::schedule::Schedule;
use crate::signals::{Parked, Signals};
use crate::transport::Conn;
use crate::worker::MAX_SLEEP;

/// Timers by deadline: each names what it is for (a flow's key) and a
/// generation, so that one armed before its flow moved on is told apart
/// from a current one.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize, u64)>>,
}

impl Timers {
    /// Arms a timer for `key` at `at`, of generation `seq`.
    pub(crate) fn arm(&mut self, at: Instant, key: usize, seq: u64) {
        self.heap.push(Reverse((at, key, seq)));
    }

    /// The next deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// A timer due by `now` (deadline, key, generation), taken off. Call
    /// until `None`.
    pub(crate) fn due(&mut self, now: Instant) -> Option<(Instant, usize, u64)> {
        let &Reverse(t) = self.heap.peek()?;
        if t.0 > now {
            return None;
        }
        self.heap.pop();
        Some(t)
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
}

impl Driver {
    /// A driver around `poll` (its waker already registered); `busy_poll`
    /// never sleeps in the wait.
    pub fn new(poll: Poll, busy_poll: bool) -> Self {
        Driver {
            poll,
            busy_poll,
            timers: Timers::default(),
            again: Vec::new(),
        }
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
    pub(crate) fn again(&mut self, key: usize) {
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
        let timer = [self.timers.next(), deadline].into_iter().flatten().min();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(busy_poll: bool) -> Driver {
        Driver::new(Poll::new().unwrap(), busy_poll)
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
}
