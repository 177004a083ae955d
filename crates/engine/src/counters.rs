//! What one worker counts: window totals, whole-life totals, per-second
//! intervals, transaction times, and each flow's own counts. The worker passes
//! the time in, and says which of its flows (a slot from [`Counters::add_flow`])
//! each count belongs to.

use std::time::{Duration, Instant};

use linkperf_metrics::{FlowCount, FlowCounts, Interval, LatencyRecorder, Totals};

use crate::datagram_counts::DatagramCounters;
use crate::schedule::Schedule;
use crate::udp_stream::Arrival;

/// Distinct error messages kept per worker for the report.
const MAX_ERROR_SAMPLES: usize = 4;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    tx: u64,
    rx: u64,
    txns: u64,
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
    /// Transaction times recorded in the window.
    pub latency: LatencyRecorder,
    buckets: Vec<Bucket>,
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
            buckets: Vec::new(),
            current: 0,
            // An empty range: the first count takes the long way.
            current_from: now,
            current_until: now,
            error_samples: Vec::new(),
            flows: Vec::new(),
            datagrams: DatagramCounters::default(),
        }
    }

    /// A slot for flow `flow`, for the counts of its traffic. A flow that
    /// comes back (a connect-per-transaction flow's next connection) should
    /// be given the slot it had: [`Counters::flow_slot`] finds it.
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
        let secs = schedule.window().as_secs_f64().ceil().max(1.0) as usize;
        self.buckets = vec![Bucket::default(); secs];
        self.datagrams.set_seconds(secs);
        self.schedule = Some(schedule);
        self.current = 0;
        self.current_from = schedule.measure_from;
        self.current_until = schedule.measure_from;
    }

    fn bucket(&mut self, now: Instant) -> Option<&mut Bucket> {
        let k = self.second(now)?;
        self.buckets.get_mut(k)
    }

    /// The second of the window `now` falls in, if inside it.
    fn second(&mut self, now: Instant) -> Option<usize> {
        if now >= self.current_from && now < self.current_until {
            return Some(self.current);
        }
        let s = self.schedule?;
        if now < s.measure_from || now >= s.measure_until {
            return None;
        }
        let last = self.buckets.len().saturating_sub(1);
        let idx = ((now - s.measure_from).as_secs() as usize).min(last);
        // Interval idx runs from its second to the next, the last one to the
        // window's end.
        let from = s.measure_from + Duration::from_secs(idx as u64);
        self.current = idx;
        self.current_from = from;
        self.current_until = if idx == last {
            s.measure_until
        } else {
            (from + Duration::from_secs(1)).min(s.measure_until)
        };
        Some(idx)
    }

    /// `n` of a UDP stream's datagrams went at `now` (their bytes are
    /// counted by [`Counters::tx`]).
    pub fn datagram_sent(&mut self, now: Instant, n: u64) {
        let k = self.second(now);
        self.datagrams.sent(k, n);
    }

    /// A UDP stream's datagram arrived at `now` for the flow in `slot`, as
    /// its receiver's accounting says, the flow's jitter now `jitter_ns`
    /// (its bytes are counted by [`Counters::rx`]).
    pub fn datagram_received(
        &mut self,
        slot: FlowSlotId,
        arrival: &Arrival,
        jitter_ns: f64,
        now: Instant,
    ) {
        let k = self.second(now);
        self.datagrams.received(slot, arrival, jitter_ns, k);
    }

    /// `n` payload bytes written by the flow in `slot` at `now`.
    pub fn tx(&mut self, slot: FlowSlotId, n: usize, now: Instant) {
        let n = n as u64;
        self.totals.tx_bytes += n;
        let inside = if let Some(b) = self.bucket(now) {
            b.tx += n;
            self.tx_bytes += n;
            true
        } else {
            false
        };
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
        let inside = if let Some(b) = self.bucket(now) {
            b.rx += n;
            self.rx_bytes += n;
            true
        } else {
            false
        };
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
        let record = self.record_latency;
        let inside = if let Some(b) = self.bucket(now) {
            b.txns += count;
            self.transactions += count;
            if record {
                let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                self.latency.record_n_ns(ns, count);
            }
            true
        } else {
            false
        };
        if let Some(f) = self.flows.get_mut(slot) {
            f.totals.transactions += count;
            if inside {
                f.window.transactions += count;
            }
        }
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

    /// One error: counted if it happens inside the window (like every other
    /// metric); its message is kept whenever it happens.
    pub fn error(&mut self, now: Instant, message: impl FnOnce() -> String) {
        let counted = self
            .schedule
            .is_some_and(|s| now >= s.measure_from && now < s.measure_until);
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
        self.latency.merge(&other.latency);
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), Bucket::default());
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.tx += b.tx;
            a.rx += b.rx;
            a.txns += b.txns;
        }
        for m in &other.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES && !self.error_samples.contains(m) {
                self.error_samples.push(m.clone());
            }
        }
        if self.schedule.is_none() {
            self.schedule = other.schedule;
        }
        self.flows.extend_from_slice(&other.flows);
        self.datagrams.merge(&other.datagrams);
    }

    /// The per-second intervals of the window.
    pub fn intervals(&self) -> Vec<Interval> {
        let Some(s) = self.schedule else {
            return Vec::new();
        };
        let window = s.window().as_secs_f64();
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let start = i as f64;
                let udp = self.datagrams.second(i);
                Interval {
                    start_s: start,
                    length_s: (window - start).clamp(0.0, 1.0),
                    tx_bytes: b.tx,
                    rx_bytes: b.rx,
                    transactions: b.txns,
                    datagrams: udp.map(|u| u.0),
                    expected: udp.map(|u| u.1),
                    jitter_us: udp.and_then(|u| u.2),
                }
            })
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
        assert_eq!(c.latency.count(), 2);
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
}
