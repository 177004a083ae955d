//! What an open-loop client's workers count beside their [`Counters`]
//! (an extension of them, in the window the counters keep): arrivals and
//! what became of them, service times, pacing errors, each second's
//! transaction-time histogram (for the stationarity of p99) and a bounded
//! sample of the gaps between sends (for the check of the arrivals'
//! distribution).
//!
//! [`Counters`]: crate::Counters

use std::time::{Duration, Instant};

use linkperf_measured::OpenLoopRecord;
use linkperf_metrics::LatencyRecorder;

/// Gaps between sends kept per worker: enough for a goodness-of-fit test
/// (one is run on a few thousand at most), bounded whatever the rate.
pub const MAX_GAPS: usize = 4096;

/// One worker's open-loop counts over the window.
#[derive(Debug, Clone)]
pub struct OpenTally {
    arrivals: u64,
    sent: u64,
    late: u64,
    dropped: u64,
    behind: u64,
    service: LatencyRecorder,
    pacing: LatencyRecorder,
    /// Transaction times (from the due time) per window second.
    seconds: Vec<LatencyRecorder>,
    /// A uniform sample of the gaps seen (reservoir), and how many were seen.
    gaps: Vec<u64>,
    gaps_seen: u64,
    rng: fastrand::Rng,
}

impl OpenTally {
    /// An empty tally, its reservoir drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        OpenTally {
            arrivals: 0,
            sent: 0,
            late: 0,
            dropped: 0,
            behind: 0,
            service: LatencyRecorder::new(),
            pacing: LatencyRecorder::new(),
            seconds: Vec::new(),
            gaps: Vec::new(),
            gaps_seen: 0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// An arrival came due in the window; `late` if it had to wait.
    pub fn arrived(&mut self, late: bool) {
        self.arrivals += 1;
        self.late += u64::from(late);
    }

    /// `n` arrivals came due in the window and were dropped.
    pub fn dropped(&mut self, n: u64) {
        self.arrivals += n;
        self.dropped += n;
    }

    /// An arrival was sent in the window `delay` after it was due, `waited`
    /// or not; `gap` since the user's arrival before it as the generator
    /// offered them.
    pub fn sent(&mut self, delay: Duration, waited: bool, gap: Option<Duration>) {
        self.sent += 1;
        if let Some(g) = gap {
            self.sample_gap(nanos(g));
        }
        if waited {
            return;
        }
        self.pacing.record_ns(nanos(delay));
        if delay > crate::flow::open_loop::BEHIND_AFTER {
            self.behind += 1;
        }
    }

    /// A transaction completed in window second `second`: `took` from its
    /// due time, `service` from its send.
    pub fn completed(&mut self, second: usize, took: Duration, service: Duration) {
        self.service.record_ns(nanos(service));
        if self.seconds.len() <= second {
            self.seconds.resize_with(second + 1, LatencyRecorder::new);
        }
        self.seconds[second].record_ns(nanos(took));
    }

    fn sample_gap(&mut self, ns: u64) {
        self.gaps_seen += 1;
        if self.gaps.len() < MAX_GAPS {
            self.gaps.push(ns);
        } else {
            // Reservoir sampling (Vitter's algorithm R): each gap seen is
            // kept with probability MAX_GAPS / seen.
            let j = self.rng.u64(0..self.gaps_seen);
            if let Ok(j) = usize::try_from(j) {
                if j < MAX_GAPS {
                    self.gaps[j] = ns;
                }
            }
        }
    }

    /// Adds another worker's tally.
    pub fn merge(&mut self, o: &OpenTally) {
        self.arrivals += o.arrivals;
        self.sent += o.sent;
        self.late += o.late;
        self.dropped += o.dropped;
        self.behind += o.behind;
        self.service.merge(&o.service);
        self.pacing.merge(&o.pacing);
        if self.seconds.len() < o.seconds.len() {
            self.seconds
                .resize_with(o.seconds.len(), LatencyRecorder::new);
        }
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.merge(b);
        }
        // Each worker's sample stands for its own gaps: keep them all,
        // within a bound of several workers' worth.
        let room = (4 * MAX_GAPS).saturating_sub(self.gaps.len());
        self.gaps.extend(o.gaps.iter().take(room));
        self.gaps_seen += o.gaps_seen;
    }

    /// The side's record, its window `seconds` long.
    pub fn record(&self, seconds: usize) -> OpenLoopRecord {
        let mut p99 = Vec::with_capacity(seconds);
        for i in 0..seconds.max(self.seconds.len()) {
            p99.push(self.seconds.get(i).and_then(|r| r.summary()).map(|s| s.p99));
        }
        OpenLoopRecord {
            arrivals: self.arrivals,
            sent: self.sent,
            late: self.late,
            dropped: self.dropped,
            behind: self.behind,
            service: self.service.summary(),
            service_histogram: self.service.encode_histogram(),
            pacing: self.pacing.summary(),
            pacing_histogram: self.pacing.encode_histogram(),
            seconds_p99_us: p99,
            gaps_ns: self.gaps.clone(),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Whether `at` falls in the window `[from, until)`.
pub(crate) fn within(at: Instant, from: Instant, until: Instant) -> bool {
    at >= from && at < until
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_counts_keeps_a_bounded_sample_and_merges() {
        let mut a = OpenTally::new(1);
        for i in 0..10_000u64 {
            a.arrived(i % 10 == 0);
            a.sent(
                Duration::from_micros(5),
                false,
                Some(Duration::from_nanos(i + 1)),
            );
            a.completed(
                (i / 5000) as usize,
                Duration::from_micros(40),
                Duration::from_micros(30),
            );
        }
        // A dropped arrival came due too.
        a.dropped(1);
        a.sent(Duration::from_millis(3), false, None);
        a.sent(Duration::from_millis(9), true, None);
        let r = a.record(2);
        assert_eq!(
            (r.arrivals, r.sent, r.late, r.dropped, r.behind),
            (10_001, 10_002, 1000, 1, 1)
        );
        assert_eq!(r.gaps_ns.len(), MAX_GAPS);
        assert!(
            r.gaps_ns.iter().any(|g| *g > 5_000),
            "later gaps reach the sample"
        );
        assert_eq!(r.seconds_p99_us.len(), 2);
        assert!((r.service.unwrap().p50 - 30.0).abs() < 0.1);
        let mut b = OpenTally::new(2);
        b.arrived(false);
        b.completed(3, Duration::from_micros(10), Duration::from_micros(10));
        b.merge(&a);
        let r = b.record(2);
        assert_eq!(r.arrivals, 10_002);
        assert_eq!(r.seconds_p99_us.len(), 4);
        assert_eq!(r.seconds_p99_us[2], None);
    }
}
