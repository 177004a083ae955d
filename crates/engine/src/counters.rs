//! What one worker counts: window totals, whole-life totals, per-second
//! intervals, transaction times, and each flow's own counts. The worker passes
//! the time in, and says which of its flows (a slot from [`Counters::add_flow`])
//! each count belongs to.
//!
//! Seconds are counted from the start of the traffic: the warm-up's seconds
//! (for live display only), then the window's (the run's `intervals`). A
//! second handed over for display ([`Counters::take_seconds`]) is sealed: a
//! count stamped inside it that arrives later goes into the next second still
//! open, so that what was shown is what is saved.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use linkperf_measured::{FlowCount, FlowCounts, Interval, Totals};
use linkperf_metrics::LatencyRecorder;

use crate::datagram_counts::DatagramCounters;
use crate::flow::open_loop::Event as OpenEvent;
use crate::flow::udp_stream::Arrival;
use crate::live::LiveInterval;
use crate::open_tally::{self, OpenTally};
use crate::schedule::Schedule;

/// Distinct error messages kept per worker for the report.
const MAX_ERROR_SAMPLES: usize = 4;

/// No second: the transaction times of no second are being recorded.
const NO_SECOND: usize = usize::MAX;

/// The longest an open window ([`Counters::set_open_window`]) counts: a day.
pub const OPEN_WINDOW: Duration = Duration::from_secs(86_400);

/// The slot of no flow: counts that belong to the side but to no flow of
/// its own (a profile's users are not flows of the report).
pub const NO_FLOW: FlowSlotId = usize::MAX;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    tx: u64,
    rx: u64,
    txns: u64,
    errors: u64,
}

/// One flow's counts: in the window, and over its whole life.
#[derive(Debug, Clone, Copy, Default)]
struct FlowSlot {
    window: FlowCount,
    totals: Totals,
}

/// A flow's place in a worker's [`Counters`].
pub type FlowSlotId = usize;

/// One worker's counters for one test.
#[derive(Debug)]
pub struct Counters {
    schedule: Option<Schedule>,
    record_latency: bool,
    /// Payload bytes written in the window.
    pub tx_bytes: u64,
    /// Payload bytes read in the window.
    pub rx_bytes: u64,
    /// Transactions completed in the window.
    pub transactions: u64,
    /// Errors (failed or lost transactions, broken connections) in the window or after.
    pub errors: u64,
    /// Whole-life counts.
    pub totals: Totals,
    /// Transaction times of the window, but for those of the second being
    /// counted, which are in `second_latency` until the next second begins
    /// (one histogram per transaction either way).
    latency: LatencyRecorder,
    second_latency: LatencyRecorder,
    /// The second whose times `second_latency` holds, or [`NO_SECOND`].
    latency_second: usize,
    /// Seconds' transaction times kept for [`Counters::take_seconds`], once
    /// anyone takes seconds.
    kept_latency: VecDeque<(usize, LatencyRecorder)>,
    keep_latency: bool,
    /// The warm-up's seconds, then the window's.
    buckets: Vec<Bucket>,
    /// How many of `buckets` are the warm-up's.
    warmup_buckets: usize,
    /// An open window's: its seconds are made as counts come.
    open_window: bool,
    /// Seconds handed over: the first `sealed` buckets take no more counts.
    sealed: usize,
    /// Counting stopped here (the test was aborted): the seconds after it
    /// never ran.
    stopped: Option<Instant>,
    /// The interval the last count fell in, and its bounds: the next count
    /// usually falls in it too, and two comparisons then place it (a
    /// subtraction of times costs more, and there are three per transaction).
    current: usize,
    current_from: Instant,
    current_until: Instant,
    /// A few distinct error messages.
    pub error_samples: Vec<String>,
    /// Each flow's own counts, by slot.
    flows: Vec<FlowSlot>,
    /// A UDP stream's datagrams.
    pub datagrams: DatagramCounters,
    /// An open-loop client's schedule (its extension of these counts).
    pub open: Option<Box<OpenTally>>,
}

/// A worker's counts are its counters, or its counters with its kind's
/// own figures beside them (`worker::generic::Kind::Counts`).
impl AsMut<Counters> for Counters {
    fn as_mut(&mut self) -> &mut Counters {
        self
    }
}

impl Counters {
    /// Counters that record transaction times when `record_latency`.
    pub fn new(record_latency: bool) -> Self {
        let now = Instant::now();
        Counters {
            schedule: None,
            record_latency,
            tx_bytes: 0,
            rx_bytes: 0,
            transactions: 0,
            errors: 0,
            totals: Totals::default(),
            latency: LatencyRecorder::new(),
            second_latency: LatencyRecorder::new(),
            latency_second: NO_SECOND,
            kept_latency: VecDeque::new(),
            keep_latency: false,
            buckets: Vec::new(),
            warmup_buckets: 0,
            open_window: false,
            sealed: 0,
            stopped: None,
            current: 0,
            // An empty range: the first count takes the long way.
            current_from: now,
            current_until: now,
            error_samples: Vec::new(),
            flows: Vec::new(),
            datagrams: DatagramCounters::default(),
            open: None,
        }
    }

    /// A slot for flow `flow`, for the counts of its traffic. A flow that
    /// comes back (a connect-per-transaction flow's next connection) should
    /// be given the slot it had, which the caller keeps (a server worker maps
    /// each flow to its slot).
    pub fn add_flow(&mut self, flow: u32) -> FlowSlotId {
        self.flows.push(FlowSlot {
            window: FlowCount {
                flow,
                ..FlowCount::default()
            },
            totals: Totals::default(),
        });
        self.flows.len() - 1
    }

    /// Flows with a slot here.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Sets the schedule that defines the window.
    pub fn set_schedule(&mut self, schedule: Schedule) {
        let seconds = |d: Duration| d.as_secs_f64().ceil() as usize;
        let warmup = seconds(schedule.measure_from - schedule.start);
        let window = seconds(schedule.window()).max(1);
        self.buckets = vec![Bucket::default(); warmup + window];
        self.datagrams.set_seconds(warmup + window);
        self.warmup_buckets = warmup;
        self.open_window = false;
        self.schedule = Some(schedule);
        self.sealed = 0;
        self.stopped = None;
        self.current = 0;
        self.current_from = schedule.start;
        self.current_until = schedule.start;
    }

    /// Sets a window that opens at `start` with no warm-up and no known end
    /// (a profile's, which runs until its script is over): its seconds are
    /// made as counts come, up to a day, and its intervals end where
    /// counting stops ([`Counters::stop`]).
    pub fn set_open_window(&mut self, start: Instant) {
        self.schedule = Some(Schedule::new(
            start,
            Duration::ZERO,
            OPEN_WINDOW,
            Duration::ZERO,
        ));
        self.open_window = true;
        self.buckets = Vec::new();
        self.warmup_buckets = 0;
        self.sealed = 0;
        self.stopped = None;
        self.current = 0;
        self.current_from = start;
        self.current_until = start;
    }

    /// The schedule that defines the window, once set.
    pub fn schedule(&self) -> Option<Schedule> {
        self.schedule
    }

    /// `n` payload bytes counted as written are taken back (nobody will
    /// read them): from the whole-life totals, and from the second of the
    /// last count (and the window's, if it is one of the window's).
    pub fn retract_tx(&mut self, n: u64) {
        self.totals.tx_bytes = self.totals.tx_bytes.saturating_sub(n);
        if let Some(b) = self.buckets.get_mut(self.current) {
            b.tx = b.tx.saturating_sub(n);
            if self.current >= self.warmup_buckets {
                self.tx_bytes = self.tx_bytes.saturating_sub(n);
            }
        }
    }

    /// Counting stops at `now`: the test was aborted. The seconds after it
    /// never ran and are not in [`Counters::intervals`]; the one it falls in
    /// is cut there. Nothing is counted after it but whole-life totals.
    pub fn stop(&mut self, now: Instant) {
        if self.stopped.is_none() {
            self.stopped = Some(now);
            self.current_until = self.current_from;
        }
    }

    /// The length of the window that was counted, seconds, when counting
    /// stopped before the window's close (an aborted test): from the
    /// window's opening to the stop, where [`Counters::intervals`] end.
    /// `None` when counting was not cut short.
    pub fn cut_window_s(&self) -> Option<f64> {
        let s = self.schedule?;
        let stopped = self.stopped?;
        (stopped < s.measure_until).then(|| {
            self.end(&s)
                .saturating_duration_since(s.measure_from)
                .as_secs_f64()
        })
    }

    /// Counting is over and covered only the window's first `window_s`
    /// seconds (the side was cut short without its workers stopping: the
    /// other side ended the test): it stops there, so that the intervals
    /// end where the window did. Nothing when it already stopped, or when
    /// `window_s` reaches the window's close.
    pub fn stop_after_s(&mut self, window_s: f64) {
        let Some(s) = self.schedule else {
            return;
        };
        if self.stopped.is_some() || !window_s.is_finite() || window_s < 0.0 {
            return;
        }
        let at = s.measure_from + Duration::from_secs_f64(window_s);
        if at < s.measure_until {
            self.stop(at);
        }
    }

    /// Where counting ends: the window's close, or the stop before it.
    fn end(&self, s: &Schedule) -> Instant {
        self.stopped
            .map_or(s.measure_until, |t| t.min(s.measure_until))
    }

    /// Bucket `i`'s bounds, not cut by a stop.
    fn bounds(&self, s: &Schedule, i: usize) -> (Instant, Instant) {
        let second = Duration::from_secs(1);
        if i < self.warmup_buckets {
            let from = s.start + second * i as u32;
            (from, (from + second).min(s.measure_from))
        } else {
            let k = i - self.warmup_buckets;
            let from = s.measure_from + second * k as u32;
            let until = if i + 1 == self.buckets.len() && !self.open_window {
                // The last one runs to the window's end.
                s.measure_until
            } else {
                (from + second).min(s.measure_until)
            };
            (from, until)
        }
    }

    /// Buckets that ran: all of them, or those begun before the stop.
    fn ran(&self, s: &Schedule) -> usize {
        if self.stopped.is_none() {
            return self.buckets.len();
        }
        let end = self.end(s);
        (0..self.buckets.len())
            .take_while(|&i| self.bounds(s, i).0 < end)
            .count()
    }

    /// The bucket a count at `now` goes in, if it is counted at all.
    #[inline]
    fn place(&mut self, now: Instant) -> Option<usize> {
        if now >= self.current_from && now < self.current_until {
            return Some(self.current);
        }
        self.place_anew(now)
    }

    /// [`Counters::place`] when `now` is not in the bucket of the last count.
    #[inline(never)]
    fn place_anew(&mut self, now: Instant) -> Option<usize> {
        let s = self.schedule?;
        let end = self.end(&s);
        if now < s.start || now >= end {
            return None;
        }
        let idx = if now < s.measure_from {
            ((now - s.start).as_secs() as usize).min(self.warmup_buckets.saturating_sub(1))
        } else {
            self.warmup_buckets + (now - s.measure_from).as_secs() as usize
        };
        if self.open_window && idx >= self.buckets.len() {
            self.buckets.resize(idx + 1, Bucket::default());
        }
        if self.buckets.is_empty() {
            return None;
        }
        let last = self.buckets.len() - 1;
        // A count stamped in a second already handed over goes into the
        // next one still open.
        let idx = idx.max(self.sealed).min(last);
        let (from, until) = self.bounds(&s, idx);
        self.current = idx;
        self.current_from = from;
        self.current_until = until.min(end);
        Some(idx)
    }

    /// Whether bucket `i` is one of the window's.
    fn in_window(&self, i: Option<usize>) -> bool {
        i.is_some_and(|i| i >= self.warmup_buckets)
    }

    /// `n` of a UDP stream's datagrams went at `now` (their bytes are
    /// counted by [`Counters::tx`]).
    pub fn datagram_sent(&mut self, now: Instant, n: u64) {
        let i = self.place(now);
        let inside = self.in_window(i);
        self.datagrams.sent(inside, n);
    }

    /// A UDP stream's datagram arrived at `now` for the flow in `slot`, as
    /// its receiver's accounting says, the flow's jitter now `jitter_ns`
    /// (its bytes are counted by [`Counters::rx`]). Its second is the one
    /// its bytes go in: the warm-up's for display, the window's for the run.
    pub fn datagram_received(
        &mut self,
        slot: FlowSlotId,
        arrival: &Arrival,
        jitter_ns: f64,
        now: Instant,
    ) {
        let i = self.place(now);
        let inside = self.in_window(i);
        self.datagrams.received(slot, arrival, jitter_ns, i, inside);
    }

    /// `n` payload bytes written by the flow in `slot` at `now`.
    pub fn tx(&mut self, slot: FlowSlotId, n: usize, now: Instant) {
        let n = n as u64;
        self.totals.tx_bytes += n;
        let inside = match self.place(now) {
            Some(i) => {
                if let Some(b) = self.buckets.get_mut(i) {
                    b.tx += n;
                }
                i >= self.warmup_buckets
            }
            None => false,
        };
        if inside {
            self.tx_bytes += n;
        }
        if let Some(f) = self.flows.get_mut(slot) {
            f.totals.tx_bytes += n;
            if inside {
                f.window.tx_bytes += n;
            }
        }
    }

    /// `n` payload bytes read by the flow in `slot` at `now`.
    pub fn rx(&mut self, slot: FlowSlotId, n: usize, now: Instant) {
        let n = n as u64;
        self.totals.rx_bytes += n;
        let inside = match self.place(now) {
            Some(i) => {
                if let Some(b) = self.buckets.get_mut(i) {
                    b.rx += n;
                }
                i >= self.warmup_buckets
            }
            None => false,
        };
        if inside {
            self.rx_bytes += n;
        }
        if let Some(f) = self.flows.get_mut(slot) {
            f.totals.rx_bytes += n;
            if inside {
                f.window.rx_bytes += n;
            }
        }
    }

    /// `count` transactions of the flow in `slot` completed at `now`, each
    /// taking `took`.
    pub fn transactions(&mut self, slot: FlowSlotId, count: u64, took: Duration, now: Instant) {
        self.totals.transactions += count;
        let inside = match self.place(now) {
            Some(i) => {
                if let Some(b) = self.buckets.get_mut(i) {
                    b.txns += count;
                }
                if self.record_latency {
                    if i != self.latency_second {
                        self.fold_second_latency();
                        self.latency_second = i;
                    }
                    let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                    self.second_latency.record_n_ns(ns, count);
                }
                i >= self.warmup_buckets
            }
            None => false,
        };
        if inside {
            self.transactions += count;
        }
        if let Some(f) = self.flows.get_mut(slot) {
            f.totals.transactions += count;
            if inside {
                f.window.transactions += count;
            }
        }
    }

    /// The times of the second recorded so far join the window's (a
    /// warm-up second's do not), and are kept for display if wanted. Once a
    /// second: a histogram merge, not a cost per transaction.
    fn fold_second_latency(&mut self) {
        let i = std::mem::replace(&mut self.latency_second, NO_SECOND);
        if i == NO_SECOND || self.second_latency.count() == 0 {
            return;
        }
        if i >= self.warmup_buckets {
            self.latency.merge(&self.second_latency);
        }
        let times = std::mem::take(&mut self.second_latency);
        if self.keep_latency {
            self.kept_latency.push_back((i, times));
        }
    }

    /// The window's transaction times.
    pub fn window_latency(&self) -> LatencyRecorder {
        let mut l = self.latency.clone();
        if self.latency_second != NO_SECOND && self.latency_second >= self.warmup_buckets {
            l.merge(&self.second_latency);
        }
        l
    }

    /// The seconds over by `now` that were not taken before, in order; they
    /// are sealed (see the module's documentation). From the first call on,
    /// each second's transaction times are kept until taken.
    pub(crate) fn take_seconds(&mut self, now: Instant) -> Vec<LiveInterval> {
        self.keep_latency = true;
        let Some(s) = self.schedule else {
            return Vec::new();
        };
        let ran = self.ran(&s);
        let end = self.end(&s);
        let mut over = self.sealed;
        while over < ran && self.bounds(&s, over).1.min(end) <= now {
            over += 1;
        }
        self.seal(&s, over)
    }

    /// Every second not taken yet, up to where counting stopped: for when
    /// the worker is done.
    pub(crate) fn take_rest(&mut self) -> Vec<LiveInterval> {
        self.keep_latency = true;
        let Some(s) = self.schedule else {
            return Vec::new();
        };
        let ran = self.ran(&s);
        self.seal(&s, ran.max(self.sealed))
    }

    fn seal(&mut self, s: &Schedule, upto: usize) -> Vec<LiveInterval> {
        if self.latency_second < upto {
            self.fold_second_latency();
        }
        let mut out = Vec::with_capacity(upto.saturating_sub(self.sealed));
        for i in self.sealed..upto {
            let mut latency: Option<LatencyRecorder> = None;
            while let Some((j, _)) = self.kept_latency.front() {
                if *j > i {
                    break;
                }
                if let Some((j, l)) = self.kept_latency.pop_front() {
                    if j == i {
                        latency.get_or_insert_with(LatencyRecorder::new).merge(&l);
                    }
                }
            }
            if self.record_latency && latency.is_none() {
                latency = Some(LatencyRecorder::new());
            }
            // Its retransmits are read by the publisher, which hands it over.
            out.push(Interval {
                latency,
                ..self.second(s, i)
            });
        }
        self.sealed = self.sealed.max(upto);
        if self.current < self.sealed {
            // The next count takes the long way, past the sealed seconds.
            self.current_until = self.current_from;
        }
        out
    }

    /// Second `i` of the traffic (the warm-up's, then the window's) as
    /// counted: the one place a second's counts become an [`Interval`], for
    /// the live seconds and the report's intervals alike. No transaction
    /// times: the caller adds those it has.
    fn second<L>(&self, s: &Schedule, i: usize) -> Interval<L> {
        let warmup = i < self.warmup_buckets;
        let (start_s, length_s) = if warmup {
            let (from, until) = self.bounds(s, i);
            (
                -(s.measure_from - from).as_secs_f64(),
                (until.min(self.end(s)).saturating_duration_since(from)).as_secs_f64(),
            )
        } else {
            let k = i - self.warmup_buckets;
            (k as f64, self.window_length_s(s, k))
        };
        let b = self.buckets.get(i).copied().unwrap_or_default();
        let mut iv = Interval {
            start_s,
            length_s,
            warmup,
            tx_bytes: b.tx,
            rx_bytes: b.rx,
            transactions: b.txns,
            errors: b.errors,
            ..Interval::default()
        };
        if let Some(d) = self.datagrams.second(i) {
            d.fill(&mut iv);
        }
        iv
    }

    /// Length of window interval `k`: 1 s, the last one to the window's end
    /// or to the stop.
    fn window_length_s(&self, s: &Schedule, k: usize) -> f64 {
        let end_s = self
            .end(s)
            .saturating_duration_since(s.measure_from)
            .as_secs_f64();
        (end_s - k as f64).clamp(0.0, 1.0)
    }

    /// Each flow's counts in the window, a flow with several slots (in
    /// several workers) added up.
    pub fn flow_counts(&self) -> FlowCounts {
        FlowCounts::from_counts(self.flows.iter().map(|f| f.window).collect())
    }

    /// Each flow's whole-life counts, by flow id, in slot order.
    pub fn flow_totals(&self) -> Vec<(u32, Totals)> {
        self.flows
            .iter()
            .map(|f| (f.window.flow, f.totals))
            .collect()
    }

    /// The whole-life counts of the flow in `slot` (nothing for a slot not
    /// handed out).
    pub fn flow_total(&self, slot: FlowSlotId) -> Totals {
        self.flows
            .get(slot)
            .map_or_else(Totals::default, |f| f.totals)
    }

    /// One error: counted if it happens inside the window (like every other
    /// metric); its message is kept whenever it happens.
    pub fn error(&mut self, now: Instant, message: impl FnOnce() -> String) {
        let counted = match self.place(now) {
            Some(i) => {
                if let Some(b) = self.buckets.get_mut(i) {
                    b.errors += 1;
                }
                i >= self.warmup_buckets
            }
            None => false,
        };
        if counted {
            self.errors += 1;
        }
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            let m = message();
            if !self.error_samples.contains(&m) {
                self.error_samples.push(m);
            }
        }
    }

    /// Adds another worker's counters to these.
    pub fn merge(&mut self, other: &Counters) {
        self.tx_bytes += other.tx_bytes;
        self.rx_bytes += other.rx_bytes;
        self.transactions += other.transactions;
        self.errors += other.errors;
        self.totals.tx_bytes += other.totals.tx_bytes;
        self.totals.rx_bytes += other.totals.rx_bytes;
        self.totals.transactions += other.totals.transactions;
        self.latency.merge(&other.window_latency());
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), Bucket::default());
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.tx += b.tx;
            a.rx += b.rx;
            a.txns += b.txns;
            a.errors += b.errors;
        }
        for m in &other.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES && !self.error_samples.contains(m) {
                self.error_samples.push(m.clone());
            }
        }
        if self.schedule.is_none() {
            self.schedule = other.schedule;
            self.warmup_buckets = other.warmup_buckets;
            self.open_window = other.open_window;
        }
        // The side stopped when its last worker did.
        self.stopped = match (self.stopped, other.stopped) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.flows.extend_from_slice(&other.flows);
        self.datagrams.merge(&other.datagrams);
        if let Some(o) = &other.open {
            match &mut self.open {
                Some(t) => t.merge(o),
                None => self.open = Some(o.clone()),
            }
        }
    }

    /// Whether `at` is in the window (and before a stop).
    fn inside(&self, at: Instant) -> bool {
        self.schedule
            .is_some_and(|s| open_tally::within(at, s.measure_from, self.end(&s)))
    }

    /// What an open-loop user's schedule did, counted where it fell in the
    /// window: an arrival by when it was due, a send by when it went.
    pub fn open_event(&mut self, e: &OpenEvent) {
        let inside = match *e {
            OpenEvent::Arrived { due, .. } | OpenEvent::Dropped { due, .. } => self.inside(due),
            OpenEvent::Sent { sent, .. } => self.inside(sent),
        };
        let Some(t) = self.open.as_mut().filter(|_| inside) else {
            return;
        };
        match *e {
            OpenEvent::Arrived { late, .. } => t.arrived(late),
            OpenEvent::Dropped { n, .. } => t.dropped(n),
            OpenEvent::Sent {
                due,
                sent,
                waited,
                gap,
            } => t.sent(sent.saturating_duration_since(due), waited, gap),
        }
    }

    /// An open-loop transaction completed at `now`, `took` from its due
    /// time and `service` from its send.
    pub fn open_completed(&mut self, took: Duration, service: Duration, now: Instant) {
        let Some(s) = self.schedule else {
            return;
        };
        if !self.inside(now) {
            return;
        }
        let second = (now - s.measure_from).as_secs() as usize;
        if let Some(t) = self.open.as_mut() {
            t.completed(second, took, service);
        }
    }

    /// The per-second intervals of the window: every second of it, or, when
    /// counting stopped early, the seconds that ran, the last one cut where
    /// it stopped.
    pub fn intervals(&self) -> Vec<Interval> {
        let Some(s) = self.schedule else {
            return Vec::new();
        };
        let ran = self.ran(&s);
        (self.warmup_buckets..ran.min(self.buckets.len()))
            .map(|i| self.second(&s, i))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(t0: Instant) -> Schedule {
        Schedule::new(
            t0,
            Duration::from_secs(1),
            Duration::from_millis(2500),
            Duration::from_secs(1),
        )
    }

    #[test]
    fn counts_only_inside_the_window() {
        let t0 = Instant::now();
        let mut c = Counters::new(true);
        c.set_schedule(sched(t0));
        let f = c.add_flow(7);
        c.tx(f, 10, t0);
        c.tx(f, 20, t0 + Duration::from_millis(1100));
        c.rx(f, 5, t0 + Duration::from_millis(3400));
        c.rx(f, 7, t0 + Duration::from_millis(3600));
        c.transactions(
            f,
            2,
            Duration::from_micros(3),
            t0 + Duration::from_millis(2100),
        );
        assert_eq!((c.tx_bytes, c.rx_bytes, c.transactions), (20, 5, 2));
        assert_eq!(
            c.totals,
            Totals {
                tx_bytes: 30,
                rx_bytes: 12,
                transactions: 2
            }
        );
        assert_eq!(c.window_latency().count(), 2);
        assert_eq!(
            c.flow_counts().as_slice(),
            &[FlowCount {
                flow: 7,
                transactions: 2,
                tx_bytes: 20,
                rx_bytes: 5
            }]
        );
        assert_eq!(c.flow_totals(), vec![(7, c.totals)]);
        assert_eq!(c.flow_total(f), c.totals);
        assert_eq!(c.flow_total(f + 1), Totals::default(), "no such slot");
        let iv = c.intervals();
        assert_eq!(iv.len(), 3);
        assert_eq!(
            (iv[0].tx_bytes, iv[1].transactions, iv[2].rx_bytes),
            (20, 2, 5)
        );
        assert!((iv[2].length_s - 0.5).abs() < 1e-9);
    }

    #[test]
    fn intervals_are_the_same_in_any_order_of_times() {
        // The interval of the last count is kept to place the next: times out
        // of order, across edges and outside the window land where a direct
        // reckoning puts them.
        let t0 = Instant::now();
        let s = sched(t0);
        let mut c = Counters::new(false);
        c.set_schedule(s);
        let mut expected = [0u64; 3];
        let mut inside = 0u64;
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 0 to 5 s after t0, on and around the edges now and then.
            let ns = match i % 7 {
                0 => 1_000_000_000 * (x % 5),
                1 => (1_000_000_000 * (x % 5)).saturating_sub(1),
                _ => x % 5_000_000_000,
            };
            let now = t0 + Duration::from_nanos(ns);
            c.tx(usize::MAX, 1, now);
            if now >= s.measure_from && now < s.measure_until {
                let idx = ((now - s.measure_from).as_secs() as usize).min(2);
                expected[idx] += 1;
                inside += 1;
            }
        }
        let iv = c.intervals();
        assert_eq!(
            iv.iter().map(|i| i.tx_bytes).collect::<Vec<_>>(),
            expected.to_vec()
        );
        assert_eq!(c.tx_bytes, inside);
        assert_eq!(c.totals.tx_bytes, 20_000);
    }

    #[test]
    fn merge_adds_everything() {
        let t0 = Instant::now();
        let mut a = Counters::new(false);
        let mut b = Counters::new(false);
        a.set_schedule(sched(t0));
        b.set_schedule(sched(t0));
        let fa = a.add_flow(0);
        let fb = b.add_flow(1);
        let fb2 = b.add_flow(0);
        a.tx(fa, 1, t0 + Duration::from_millis(1500));
        b.tx(fb, 2, t0 + Duration::from_millis(1500));
        b.rx(fb2, 4, t0 + Duration::from_millis(1500));
        b.error(t0 + Duration::from_millis(1500), || "reset".into());
        b.error(t0 + Duration::from_millis(1600), || "reset".into());
        a.merge(&b);
        assert_eq!(a.tx_bytes, 3);
        assert_eq!(a.errors, 2);
        assert_eq!(a.error_samples, vec!["reset".to_string()]);
        assert_eq!(a.intervals()[0].tx_bytes, 3);
        let flows = a.flow_counts();
        assert_eq!(flows.len(), 2, "flow 0's two slots are one flow");
        assert_eq!(
            (
                flows.get(0).unwrap().tx_bytes,
                flows.get(0).unwrap().rx_bytes
            ),
            (1, 4)
        );
        assert_eq!(flows.get(1).unwrap().tx_bytes, 2);
    }

    #[test]
    fn warmup_seconds_are_counted_apart_from_the_window() {
        let t0 = Instant::now();
        let mut c = Counters::new(true);
        c.set_schedule(sched(t0));
        let f = c.add_flow(0);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // Someone watches from the start.
        assert!(c.take_seconds(t0).is_empty());
        c.tx(f, 3, ms(100));
        c.transactions(f, 1, Duration::from_micros(500), ms(200));
        c.error(ms(300), || "warm".into());
        c.tx(f, 5, ms(1100));
        c.transactions(f, 1, Duration::from_micros(10), ms(1200));
        // Nothing of the warm-up in the window.
        assert_eq!((c.tx_bytes, c.transactions, c.errors), (5, 1, 0));
        assert_eq!(c.window_latency().count(), 1);
        assert_eq!(c.intervals().len(), 3);
        assert_eq!(c.intervals()[0].tx_bytes, 5);
        // But the warm-up's second is there to be shown, marked.
        let s = c.take_seconds(ms(1000));
        assert_eq!(s.len(), 1);
        assert!(s[0].warmup);
        assert_eq!((s[0].start_s, s[0].length_s), (-1.0, 1.0));
        assert_eq!((s[0].tx_bytes, s[0].transactions, s[0].errors), (3, 1, 1));
        assert_eq!(s[0].latency.as_ref().map(|l| l.count()), Some(1));
    }

    #[test]
    fn seconds_taken_as_they_end_are_the_intervals() {
        let t0 = Instant::now();
        let mut c = Counters::new(true);
        c.set_schedule(sched(t0));
        let f = c.add_flow(0);
        let mut taken = Vec::new();
        // Every 10 ms from the start to past the window, a transaction, and
        // every 100 ms the seconds that are over.
        for step in 0..400u64 {
            let now = t0 + Duration::from_millis(10 * step);
            c.tx(f, 1, now);
            c.rx(f, 2, now);
            c.transactions(f, 1, Duration::from_micros(step + 1), now);
            if step % 10 == 0 {
                taken.extend(c.take_seconds(now));
            }
        }
        taken.extend(c.take_rest());
        let warm: Vec<&LiveInterval> = taken.iter().filter(|s| s.warmup).collect();
        let window: Vec<&LiveInterval> = taken.iter().filter(|s| !s.warmup).collect();
        assert_eq!(warm.len(), 1);
        let iv = c.intervals();
        assert_eq!(window.len(), iv.len());
        for (s, i) in window.iter().zip(&iv) {
            // The same second, all but its times (which the report keeps
            // for the whole window).
            assert_eq!(&(*s).clone().with_latency(None), i);
            assert_eq!(s.latency.as_ref().map(|l| l.count()), Some(i.transactions));
        }
        // Each second's times are its own: the window's are all of them.
        let all: u64 = window
            .iter()
            .map(|s| s.latency.as_ref().map_or(0, |l| l.count()))
            .sum();
        assert_eq!(all, c.window_latency().count());
        assert_eq!(c.transactions, c.window_latency().count());
    }

    #[test]
    fn a_count_late_for_a_sealed_second_goes_into_the_next() {
        let t0 = Instant::now();
        let mut c = Counters::new(false);
        c.set_schedule(sched(t0));
        let f = c.add_flow(0);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        c.tx(f, 1, ms(1500));
        assert_eq!(c.take_seconds(ms(2000)).len(), 2);
        // Stamped in the window's first second, counted after it was shown.
        c.tx(f, 10, ms(1900));
        c.tx(f, 100, ms(2100));
        let iv = c.intervals();
        assert_eq!((iv[0].tx_bytes, iv[1].tx_bytes), (1, 110));
        assert_eq!(c.tx_bytes, 111);
    }

    #[test]
    fn a_udp_streams_datagrams_go_in_the_seconds_of_their_bytes() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut c = Counters::new(false);
        c.set_schedule(sched(t0));
        let f = c.add_flow(0);
        let got = |expected: u64| Arrival {
            expected,
            received: true,
            ..Arrival::default()
        };
        // One in the warm-up: shown live, in no figure of the run.
        c.datagram_received(f, &got(1), 1000.0, ms(500));
        // Second 0 of the window: three arrive of four sent (one gap).
        c.datagram_received(f, &got(1), 2000.0, ms(1100));
        c.datagram_received(f, &got(2), 4000.0, ms(1200));
        c.datagram_received(f, &got(1), 6000.0, ms(1300));
        c.datagram_sent(ms(1300), 2);
        c.datagram_sent(ms(900), 5);
        let live = c.take_seconds(ms(2000));
        assert_eq!(live.len(), 2);
        let warm = &live[0];
        assert_eq!((warm.datagrams, warm.expected), (Some(1), Some(1)));
        let first = &live[1];
        assert_eq!(
            (first.datagrams, first.expected, first.lost()),
            (Some(3), Some(4), Some(1))
        );
        assert_eq!(first.jitter_us, Some(6.0));
        // Stamped in the window's first second, counted after it was shown:
        // in the next, live and in the run alike.
        c.datagram_received(f, &got(1), 8000.0, ms(1900));
        c.datagram_received(f, &got(1), 8000.0, ms(2100));
        let rest = c.take_rest();
        let iv = c.intervals();
        assert_eq!(iv.len(), 3);
        assert_eq!((iv[0].datagrams, iv[0].expected), (Some(3), Some(4)));
        assert_eq!(iv[0].jitter_us, Some(6.0), "as it was shown");
        assert_eq!((iv[1].datagrams, iv[1].expected), (Some(2), Some(2)));
        assert_eq!((iv[2].datagrams, iv[2].jitter_us), (Some(0), None));
        assert_eq!((rest[0].datagrams, rest[0].expected), (Some(2), Some(2)));
        // The window's counts: the warm-up's datagram is not among them.
        let r = c.datagrams.report().unwrap();
        assert_eq!((r.sent, r.received, r.expected, r.lost()), (2, 5, 6, 1));
        assert_eq!(r.jitter_us, Some(8.0));
    }

    #[test]
    fn a_stop_ends_the_intervals_where_counting_stopped() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut c = Counters::new(false);
        c.set_schedule(sched(t0));
        let f = c.add_flow(0);
        c.tx(f, 1, ms(1500));
        c.tx(f, 2, ms(2250));
        c.stop(ms(2400));
        // After the stop: whole-life totals only.
        c.tx(f, 4, ms(2450));
        let iv = c.intervals();
        assert_eq!(iv.len(), 2, "no second after the stop: {iv:?}");
        assert_eq!((iv[0].length_s, iv[0].tx_bytes), (1.0, 1));
        assert!((iv[1].length_s - 0.4).abs() < 1e-9, "{iv:?}");
        assert_eq!(iv[1].tx_bytes, 2);
        // The window counted is where the intervals end.
        let cut = c.cut_window_s().unwrap();
        assert!((cut - 1.4).abs() < 1e-9, "{cut}");
        assert!((cut - iv.iter().map(|i| i.length_s).sum::<f64>()).abs() < 1e-9);
        assert_eq!((c.tx_bytes, c.totals.tx_bytes), (3, 7));
        let rest = c.take_rest();
        assert_eq!(rest.len(), 3, "the warm-up's second and the two that ran");
        assert!((rest[2].length_s - 0.4).abs() < 1e-9);

        // Stopped in the warm-up: no interval at all.
        let mut w = Counters::new(false);
        w.set_schedule(sched(t0));
        w.stop(ms(500));
        assert!(w.intervals().is_empty());
        assert_eq!(w.cut_window_s(), Some(0.0));
        let rest = w.take_rest();
        assert_eq!(rest.len(), 1);
        assert!(rest[0].warmup && (rest[0].length_s - 0.5).abs() < 1e-9);

        // Stopped after the window: every interval, as if never stopped.
        let mut late = Counters::new(false);
        late.set_schedule(sched(t0));
        late.stop(ms(4000));
        assert_eq!(late.intervals().len(), 3);
        assert_eq!(late.cut_window_s(), None, "the window closed whole");
        assert_eq!(Counters::new(false).cut_window_s(), None);

        // Cut short by the other side, its workers never stopped: it stops
        // where the window it covered ended, and not past the window.
        let mut other = Counters::new(false);
        other.set_schedule(sched(t0));
        let f = other.add_flow(0);
        other.tx(f, 5, ms(1500));
        other.stop_after_s(0.75);
        assert_eq!(other.intervals().len(), 1);
        assert!((other.cut_window_s().unwrap() - 0.75).abs() < 1e-9);
        let mut whole = Counters::new(false);
        whole.set_schedule(sched(t0));
        whole.stop_after_s(2.5);
        assert_eq!((whole.cut_window_s(), whole.intervals().len()), (None, 3));
        c.stop_after_s(0.5);
        assert!(
            (c.cut_window_s().unwrap() - 1.4).abs() < 1e-9,
            "the first stop holds"
        );

        // Merged, the side stopped when its last worker did.
        let mut a = Counters::new(false);
        a.set_schedule(sched(t0));
        a.stop(ms(1200));
        let mut agg = Counters::new(false);
        agg.merge(&a);
        agg.merge(&c);
        assert_eq!(agg.intervals().len(), 2);
    }
}
