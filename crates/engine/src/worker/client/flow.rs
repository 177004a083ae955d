//! A client flow: one user of a built-in workload as the client's worker
//! carries it, from its connect to its close. It says what it wants
//! (connect, carry its bytes, close, nothing until its deadline) and when
//! it must next be looked at; the worker's kind does the I/O.

use std::time::{Duration, Instant};

use linkperf_workload::{Protocol, TestSpec, TransactionSizes, Workload};

use crate::counters::Counters;
use crate::flow::step::{Deadline, Flow, Step, Told};
use crate::flow::udp_stream::UdpStreamHalves;
use crate::flow::{OpenLoop, RrClient};
use crate::io::stream::StreamHalves;
use crate::io::Register;
use crate::schedule::{Phase, Schedule};

/// What a flow carries.
pub(crate) enum Logic {
    Rr(RrClient),
    Crr(RrClient),
    Udp(RrClient),
    Stream(StreamHalves),
    /// Boxed: its receiver's bitmap makes it the largest by far.
    UdpStream(Box<UdpStreamHalves>),
    /// An open-loop user.
    Open(Box<OpenLoop>),
}

impl Logic {
    /// Flow `flow`'s logic for `spec`, in a session tagged `tag`.
    pub(super) fn new(spec: &TestSpec, flow: u32, tag: u32) -> Self {
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
        if let Some(load) = &spec.offered {
            let seed = u64::from(tag) << 32 | u64::from(flow);
            let user = OpenLoop::new(sizes, flow, spec.users, load, seed, Instant::now());
            return Logic::Open(Box::new(user));
        }
        let rr = RrClient::with_sizes(sizes, flow);
        match (w, protocol) {
            (_, Protocol::Udp) => Logic::Udp(rr),
            (Workload::Crr { .. }, _) => Logic::Crr(rr),
            _ => Logic::Rr(rr),
        }
    }
}

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Wants a connection (its first, or a connect-per-transaction flow's
    /// next), waiting for a connect slot.
    Queued,
    /// Connecting, then greeting the server (its preamble).
    Dialing,
    /// A UDP stream's registration sent, its answer awaited (sent again
    /// when due, given up at its deadline).
    Registering(Register),
    /// Open, the test not yet started.
    Ready,
    /// Carrying payload.
    Open,
    /// Connect-per-transaction: response read, reading until the server's
    /// close.
    AwaitClose,
    /// Connect-per-transaction: a connect failed; the next at `until`.
    Waiting {
        /// When to connect again.
        until: Instant,
    },
    /// Finished: its connection is to close.
    Closing,
    /// Gone.
    Closed,
}

/// One user of the test on the client.
pub(crate) struct ClientFlow {
    /// Its flow number.
    pub id: u32,
    /// Which of the server's data endpoints it connects to.
    pub endpoint: usize,
    pub logic: Logic,
    /// Its connection's number (a connect-per-transaction flow's count up).
    pub seq: u64,
    pub stage: Stage,
    /// The test's schedule, once it started.
    pub schedule: Option<Schedule>,
    /// How long a UDP transaction waits for its answer.
    pub udp_timeout: Duration,
    /// When its UDP transaction is given up.
    pub udp_due: Option<Instant>,
    /// When its drive must come whatever its socket does: a UDP stream's
    /// next send, an open loop's next arrival (or loss).
    pub wake: Option<Deadline>,
}

impl ClientFlow {
    /// Flow `id` of `spec`.
    pub(super) fn new(spec: &TestSpec, id: u32, endpoint: usize, tag: u32) -> Self {
        ClientFlow {
            id,
            endpoint,
            logic: Logic::new(spec, id, tag),
            seq: 0,
            stage: Stage::Queued,
            schedule: None,
            udp_timeout: spec.udp_timeout,
            udp_due: None,
            wake: None,
        }
    }

    /// Whether it connects a socket per transaction.
    pub(super) fn per_transaction(&self) -> bool {
        matches!(self.logic, Logic::Crr(_))
    }

    /// The test starts at `now` on `schedule` with `users` users.
    pub(super) fn start(&mut self, now: Instant, schedule: Schedule, users: u32) {
        self.schedule = Some(schedule);
        if self.stage == Stage::Ready {
            self.stage = Stage::Open;
        }
        match &mut self.logic {
            Logic::Rr(rr) | Logic::Crr(rr) => rr.start(now),
            Logic::Udp(rr) => {
                rr.start(now);
                self.udp_due = Some(now + self.udp_timeout);
            }
            Logic::Stream(halves) => halves.start(now),
            Logic::Open(user) => {
                user.opens_at(schedule.measure_from);
                user.start(now, users);
            }
            Logic::UdpStream(halves) => halves.start(now),
        }
    }

    /// Whether the test is draining (or over) at `at`.
    pub(super) fn draining(&self, at: Instant) -> bool {
        self.schedule
            .is_some_and(|s| s.phase(at) >= Phase::Draining)
    }

    /// Its deadline came at `at`.
    fn timer(&mut self, at: Instant, now: Instant, counters: &mut Counters) {
        match (&mut self.logic, self.stage) {
            (Logic::Udp(rr), Stage::Open) if rr.in_transaction() => {
                // The datagram or its answer was lost.
                let id = self.id;
                counters.error(now, || format!("flow {id}: udp transaction timed out"));
                if self
                    .schedule
                    .is_some_and(|s| s.phase(now) >= Phase::Draining)
                {
                    rr.finish();
                    self.udp_due = None;
                    self.stage = Stage::Closing;
                } else {
                    rr.lost(now);
                    self.udp_due = Some(now + self.udp_timeout);
                }
            }
            (_, Stage::Waiting { .. }) => self.stage = Stage::Queued,
            _ => {
                if self.wake.is_some_and(|w| w.at <= at) {
                    self.wake = None;
                }
            }
        }
    }
}

impl Flow for ClientFlow {
    type Counts = Counters;

    fn step(&mut self, _now: Instant, _counts: &mut Counters) -> Step {
        match self.stage {
            Stage::Queued | Stage::Dialing | Stage::Registering(_) => Step::Connect(0),
            Stage::Ready | Stage::Waiting { .. } => Step::Wait,
            Stage::Open => Step::Carry(0),
            Stage::AwaitClose | Stage::Closing => Step::Close(0),
            Stage::Closed => Step::Done,
        }
    }

    fn told(&mut self, what: Told, now: Instant, counts: &mut Counters) {
        match what {
            Told::Connected(_) => {
                if self.schedule.is_none() {
                    self.stage = Stage::Ready;
                    return;
                }
                self.stage = Stage::Open;
                if let Logic::Crr(rr) = &mut self.logic {
                    if !rr.in_transaction() {
                        rr.start(now);
                    }
                }
            }
            Told::Timer(at) => self.timer(at, now, counts),
            // The kind moved its stage on as it did the I/O.
            _ => {}
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        match self.stage {
            Stage::Registering(reg) => {
                let due = reg.due();
                Some(Deadline::at(reg.deadline().map_or(due, |d| d.min(due))))
            }
            Stage::Waiting { until } => Some(Deadline::at(until)),
            Stage::Open => match &self.logic {
                Logic::Udp(_) => self.udp_due.map(Deadline::at),
                // Both halves end with the window: a flow that only
                // receives hears of it from this deadline.
                Logic::UdpStream(_) => {
                    let end = self.schedule.map(|s| Deadline::at(s.measure_until));
                    match (self.wake, end) {
                        (Some(w), Some(e)) if e.at < w.at => Some(e),
                        (Some(w), _) => Some(w),
                        (None, e) => e,
                    }
                }
                Logic::Open(_) => self.wake,
                _ => None,
            },
            _ => None,
        }
    }

    fn parkable(&self) -> bool {
        matches!(self.logic, Logic::Rr(_)) && self.stage == Stage::Open
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spec(workload: &str, protocol: Protocol) -> TestSpec {
        TestSpec::new(
            workload.parse().unwrap(),
            protocol,
            1,
            Duration::from_secs(1),
        )
    }

    fn schedule(start: Instant) -> Schedule {
        Schedule::new(
            start,
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_millis(100),
        )
    }

    #[test]
    fn a_flow_connects_waits_for_the_start_then_carries_and_closes() {
        let s = spec("rr1c-1x1", Protocol::Tcp);
        let mut f = ClientFlow::new(&s, 3, 0, 7);
        let (mut c, now) = (Counters::new(false), Instant::now());
        assert_eq!(f.step(now, &mut c), Step::Connect(0));
        f.stage = Stage::Dialing;
        assert_eq!(f.step(now, &mut c), Step::Connect(0));
        f.told(Told::Connected(0), now, &mut c);
        assert_eq!(
            f.step(now, &mut c),
            Step::Wait,
            "ready: the test has not started"
        );
        assert!(!f.parkable());
        f.start(now, schedule(now), 1);
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        assert!(f.parkable());
        f.stage = Stage::Closing;
        assert_eq!(f.step(now, &mut c), Step::Close(0));
        f.stage = Stage::Closed;
        assert_eq!(f.step(now, &mut c), Step::Done);
    }

    #[test]
    fn an_unanswered_udp_transaction_is_lost_at_its_deadline_and_the_next_gets_its_own() {
        let mut s = spec("rr1c-1x1", Protocol::Udp);
        s.udp_timeout = Duration::from_millis(50);
        let mut f = ClientFlow::new(&s, 0, 0, 1);
        let (mut c, t0) = (Counters::new(false), Instant::now());
        c.set_schedule(schedule(t0));
        f.told(Told::Connected(0), t0, &mut c);
        f.start(t0, schedule(t0), 1);
        let Logic::Udp(rr) = &mut f.logic else {
            panic!("a UDP flow");
        };
        rr.wrote(1);
        let first = f.deadline().unwrap().at;
        assert_eq!(first, t0 + Duration::from_millis(50));
        let t1 = first + Duration::from_millis(1);
        f.told(Told::Timer(first), t1, &mut c);
        assert_eq!(c.errors, 1, "counted lost");
        assert_eq!(f.deadline().unwrap().at, t1 + Duration::from_millis(50));
        assert_eq!(
            f.step(t1, &mut c),
            Step::Carry(0),
            "the next transaction goes"
        );
    }

    #[test]
    fn a_crr_flow_whose_connect_failed_connects_again_at_its_deadline() {
        let s = spec("crr:1x1", Protocol::Tcp);
        let mut f = ClientFlow::new(&s, 0, 0, 1);
        let (mut c, now) = (Counters::new(false), Instant::now());
        f.told(Told::Connected(0), now, &mut c);
        f.start(now, schedule(now), 1);
        let until = now + Duration::from_millis(5);
        f.stage = Stage::Waiting { until };
        assert_eq!(f.step(now, &mut c), Step::Wait);
        assert_eq!(f.deadline(), Some(Deadline::at(until)));
        f.told(Told::Timer(until), until, &mut c);
        assert_eq!(f.step(until, &mut c), Step::Connect(0));
        assert!(
            !f.parkable(),
            "one connection per transaction: never parked"
        );
    }

    #[test]
    fn a_udp_streams_deadline_is_its_next_send_or_the_windows_end_whichever_is_first() {
        let mut s = spec("str-writex1000", Protocol::Udp);
        s.rate = Some(linkperf_workload::BitsPerSecond(10_000_000));
        let mut f = ClientFlow::new(&s, 0, 0, 1);
        let (mut c, now) = (Counters::new(false), Instant::now());
        f.told(Told::Connected(0), now, &mut c);
        let sch = schedule(now);
        f.start(now, sch, 1);
        assert_eq!(f.deadline(), Some(Deadline::at(sch.measure_until)));
        let soon = now + Duration::from_millis(3);
        f.wake = Some(Deadline::at(soon));
        assert_eq!(f.deadline(), Some(Deadline::at(soon)));
        f.told(Told::Timer(soon), soon, &mut c);
        assert_eq!(f.deadline(), Some(Deadline::at(sch.measure_until)));
    }
}
