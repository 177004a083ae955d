//! Transaction-time histograms.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

use linkperf_measured::{Latencies, LatencySummary};

/// Largest encoded histogram a report may carry (a histogram of 3 significant
/// figures spanning 1 ns to 13 days is a few tens of KiB).
const MAX_ENCODED: usize = 1 << 20;

/// Significant figures kept by the histogram: values are exact to 0.1%.
const SIGFIG: u8 = 3;

/// Largest value put in the histogram (about 13 days). Larger values are
/// recorded at this value, but still count exactly in the mean and maximum.
const MAX_HISTOGRAM_NS: u64 = 1 << 50;

/// Records transaction times in nanoseconds into an HDR histogram (3 significant
/// figures, resizing itself as values grow, so sub-microsecond times keep their
/// resolution) and summarises them in microseconds.
///
/// The mean, minimum and maximum are kept exactly beside the histogram;
/// percentiles come from the histogram, within 0.1%. An empty recorder holds
/// no histogram: it is allocated with the first value (16 KiB), and grows
/// with the values to at most [`MAX_HISTOGRAM_BYTES`], so that a profile's
/// statistics for transactions a worker never runs cost nothing.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Option<Histogram<u64>>,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

/// The most memory one recorder's histogram takes, bytes: its counts once
/// it has grown to `MAX_HISTOGRAM_NS` (a value of about 13 days), 3
/// significant figures from 1 ns: 42 half-buckets of 1,024 counts of 8
/// bytes (336 KiB).
pub const MAX_HISTOGRAM_BYTES: u64 = histogram_bytes(MAX_HISTOGRAM_NS);

/// The memory of a histogram of 3 significant figures from 1 ns that has
/// grown to hold `max_ns`: hdrhistogram's bucket count for it, plus one,
/// times half a bucket's 2,048 sub-buckets, times 8 bytes a count.
const fn histogram_bytes(max_ns: u64) -> u64 {
    const SUB_BUCKETS: u64 = 2048;
    let mut untrackable = SUB_BUCKETS;
    let mut buckets = 1;
    while untrackable <= max_ns {
        untrackable <<= 1;
        buckets += 1;
    }
    (buckets + 1) * (SUB_BUCKETS / 2) * 8
}

/// An empty histogram that grows as values come.
fn empty_histogram() -> Histogram<u64> {
    match Histogram::new(SIGFIG) {
        Ok(h) => h,
        // 3 significant figures is within hdrhistogram's 0..=5; this cannot fail.
        Err(e) => unreachable!("hdrhistogram refused {SIGFIG} significant figures: {e}"),
    }
}

impl LatencyRecorder {
    /// An empty recorder (it holds no histogram until its first value).
    pub fn new() -> Self {
        LatencyRecorder {
            hist: None,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// The histogram, allocated now if it was not.
    fn hist_mut(&mut self) -> &mut Histogram<u64> {
        self.hist.get_or_insert_with(empty_histogram)
    }

    /// The memory its histogram holds now, bytes (0 while empty).
    pub fn histogram_bytes(&self) -> u64 {
        self.hist
            .as_ref()
            .map_or(0, |h| h.distinct_values() as u64 * 8)
    }

    /// Records one transaction time in nanoseconds. 0 is recorded as 1 ns (the
    /// histogram's lowest value). Never panics.
    pub fn record_ns(&mut self, ns: u64) {
        self.record_n_ns(ns, 1);
    }

    /// Records `count` transactions that each took `ns` nanoseconds, in one step.
    pub fn record_n_ns(&mut self, ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let ns = ns.max(1);
        self.sum_ns += u128::from(ns) * u128::from(count);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        let v = ns.min(MAX_HISTOGRAM_NS);
        let hist = self.hist_mut();
        if hist.record_n(v, count).is_err() {
            hist.saturating_record_n(v, count);
        }
    }

    /// Adds another recorder's values to this one.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        let Some(theirs) = other.hist.as_ref().filter(|h| !h.is_empty()) else {
            return;
        };
        let hist = self.hist_mut();
        if hist.add(theirs).is_err() {
            // Only if resizing failed: add value by value, clamped.
            for v in theirs.iter_recorded() {
                hist.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Transactions recorded.
    pub fn count(&self) -> u64 {
        self.hist.as_ref().map_or(0, |h| h.len())
    }

    /// The histogram in a compact text form for a side's report: standard
    /// base64 of HdrHistogram's V2 encoding (uncompressed), values in
    /// nanoseconds; `None` when nothing was recorded. Any HdrHistogram
    /// implementation reads it (`docs/results-schema.md`).
    pub fn encode_histogram(&self) -> Option<String> {
        if self.count() == 0 {
            return None;
        }
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(self.hist.as_ref()?, &mut bytes)
            .ok()?;
        Some(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// A recorder holding what a report's `summary` and its encoded
    /// `histogram` describe, to merge with others: the exact mean, minimum and
    /// maximum come from the summary, the distribution from the histogram.
    pub fn from_report(summary: &LatencySummary, histogram: &str) -> Result<Self, String> {
        if histogram.len() > MAX_ENCODED {
            return Err(format!(
                "an encoded histogram of {} bytes is larger than {MAX_ENCODED}",
                histogram.len()
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(histogram)
            .map_err(|e| format!("the histogram is not base64: {e}"))?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("the histogram does not decode: {e:?}"))?;
        // A decoded histogram keeps the range it was sent with; one that
        // grows as values come keeps merges with wider ones exact.
        let mut hist = empty_histogram();
        hist.add(&decoded)
            .map_err(|e| format!("the histogram does not merge: {e:?}"))?;
        if hist.len() != summary.count {
            return Err(format!(
                "the histogram holds {} values, its summary {}",
                hist.len(),
                summary.count
            ));
        }
        let ns = |us: f64| (us * 1e3).round().clamp(0.0, u64::MAX as f64) as u64;
        Ok(LatencyRecorder {
            hist: Some(hist),
            sum_ns: (summary.mean * 1e3 * summary.count as f64).round().max(0.0) as u128,
            min_ns: ns(summary.min),
            max_ns: ns(summary.max),
        })
    }

    /// The distribution in microseconds, `None` if nothing was recorded.
    /// Percentiles are clamped to the exact `[min, max]`.
    pub fn summary(&self) -> Option<LatencySummary> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let (min, max) = (us(self.min_ns), us(self.max_ns));
        let hist = self.hist.as_ref()?;
        let q = |quantile: f64| us(hist.value_at_quantile(quantile)).clamp(min, max);
        Some(LatencySummary {
            count,
            mean: self.sum_ns as f64 / count as f64 / 1e3,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            min,
            max,
        })
    }
}

impl LatencyRecorder {
    /// The range of values, in nanoseconds, that the `rank`-th smallest
    /// recorded value (from 1) may have been: the bounds of the histogram
    /// bucket that holds it (0.1 % wide), clamped to the exact minimum and
    /// maximum, and reaching the exact maximum in the last bucket (where values
    /// past about 13 days were recorded). `None` when `rank` is 0 or more than
    /// the count.
    pub(crate) fn range_at_rank(&self, rank: u64) -> Option<(u64, u64)> {
        if rank == 0 || rank > self.count() {
            return None;
        }
        let hist = self.hist.as_ref()?;
        let mut below = 0u64;
        for bucket in hist.iter_recorded() {
            below = below.saturating_add(bucket.count_at_value());
            if below >= rank {
                let top = bucket.value_iterated_to();
                let low = hist.lowest_equivalent(top).max(self.min_ns);
                let high = if top >= MAX_HISTOGRAM_NS {
                    self.max_ns
                } else {
                    top.min(self.max_ns)
                };
                return Some((low.min(high), high));
            }
        }
        None
    }
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

/// A second's transaction times add up when its counts do
/// (`linkperf_measured::Interval::add`).
impl Latencies for LatencyRecorder {
    fn merge_times(&mut self, other: &Self) {
        self.merge(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_n_at_once_equals_recording_one_by_one() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        a.record_n_ns(1500, 3);
        a.record_ns(40);
        for ns in [1500, 1500, 1500, 40] {
            b.record_ns(ns);
        }
        assert_eq!(a.summary(), b.summary());
        a.record_n_ns(7, 0);
        assert_eq!(a.count(), 4);
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= want.abs() * rel
    }

    #[test]
    fn an_empty_recorder_holds_no_histogram_and_a_full_one_is_within_its_bound() {
        let mut r = LatencyRecorder::new();
        assert_eq!(r.histogram_bytes(), 0);
        let mut other = LatencyRecorder::new();
        r.merge(&other);
        assert_eq!(r.histogram_bytes(), 0, "merging nothing allocates nothing");
        other.record_ns(1);
        r.merge(&other);
        assert_eq!(r.histogram_bytes(), 16 * 1024, "the first value: 16 KiB");
        r.record_ns(u64::MAX);
        assert_eq!(r.histogram_bytes(), MAX_HISTOGRAM_BYTES);
        assert_eq!(MAX_HISTOGRAM_BYTES, 42 * 1024 * 8);
        // What the bound says of other values is what the histogram takes.
        for ns in [1, 1_000, 1_000_000, 3_600_000_000_000] {
            let mut one = LatencyRecorder::new();
            one.record_ns(ns);
            assert_eq!(one.histogram_bytes(), histogram_bytes(ns), "{ns} ns");
        }
        assert_eq!(r.count(), 2);
    }

    #[test]
    fn empty_has_no_summary() {
        let r = LatencyRecorder::new();
        assert_eq!(r.count(), 0);
        assert!(r.summary().is_none());
    }

    #[test]
    fn summarises_one_to_a_thousand_microseconds() {
        let mut r = LatencyRecorder::default();
        for us in 1..=1000u64 {
            r.record_ns(us * 1000);
        }
        let s = r.summary().unwrap();
        assert_eq!(s.count, 1000);
        assert!(close(s.mean, 500.5, 1e-12), "mean {}", s.mean);
        assert!(close(s.p50, 500.0, 1e-3), "p50 {}", s.p50);
        assert!(close(s.p90, 900.0, 1e-3), "p90 {}", s.p90);
        assert!(close(s.p99, 990.0, 1e-3), "p99 {}", s.p99);
        assert!(close(s.p999, 999.0, 1e-3), "p999 {}", s.p999);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
    }

    #[test]
    fn keeps_sub_microsecond_resolution() {
        let mut r = LatencyRecorder::new();
        r.record_ns(250);
        r.record_ns(750);
        let s = r.summary().unwrap();
        assert!(close(s.p50, 0.25, 1e-3), "p50 {}", s.p50);
        assert_eq!(s.min, 0.25);
        assert_eq!(s.max, 0.75);
        assert_eq!(s.mean, 0.5);
    }

    #[test]
    fn zero_and_huge_values_never_panic() {
        let mut r = LatencyRecorder::new();
        r.record_ns(0);
        r.record_ns(u64::MAX);
        let s = r.summary().unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(s.min, 0.001);
        assert_eq!(s.max, u64::MAX as f64 / 1e3);
        assert!(s.p999 <= s.max);
    }

    #[test]
    fn merging_encoded_histograms_gives_the_percentiles_of_all_values() {
        // Two sides of very different speed: the merged median is neither's.
        let mut fast = LatencyRecorder::new();
        let mut slow = LatencyRecorder::new();
        let mut all = LatencyRecorder::new();
        for us in 1..=1000u64 {
            fast.record_ns(us * 1000);
            all.record_ns(us * 1000);
        }
        for us in 1001..=3000u64 {
            slow.record_ns(us * 1000);
            all.record_ns(us * 1000);
        }
        let mut merged = LatencyRecorder::from_report(
            &fast.summary().unwrap(),
            &fast.encode_histogram().unwrap(),
        )
        .unwrap();
        merged.merge(
            &LatencyRecorder::from_report(
                &slow.summary().unwrap(),
                &slow.encode_histogram().unwrap(),
            )
            .unwrap(),
        );
        let (m, a) = (merged.summary().unwrap(), all.summary().unwrap());
        assert_eq!(m.count, 3000);
        assert!(close(m.p50, a.p50, 1e-9), "{} {}", m.p50, a.p50);
        assert!(close(m.p99, a.p99, 1e-9));
        assert!(close(m.mean, a.mean, 1e-9));
        assert_eq!((m.min, m.max), (a.min, a.max));
        assert!(LatencyRecorder::new().encode_histogram().is_none());
    }

    #[test]
    fn a_bad_or_inconsistent_histogram_is_refused() {
        let mut r = LatencyRecorder::new();
        r.record_ns(5000);
        let s = r.summary().unwrap();
        assert!(LatencyRecorder::from_report(&s, "not base64!").is_err());
        assert!(LatencyRecorder::from_report(&s, "AAAA").is_err());
        let mut other = s;
        other.count = 2;
        assert!(LatencyRecorder::from_report(&other, &r.encode_histogram().unwrap()).is_err());
    }

    #[test]
    fn a_rank_falls_in_its_bucket() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record_ns(us * 1000);
        }
        for rank in [1, 2, 500, 999, 1000] {
            let (low, high) = r.range_at_rank(rank).unwrap();
            let exact = rank * 1000;
            assert!(low <= exact && exact <= high, "rank {rank}: {low}..{high}");
            assert!(high - low <= exact / 1000 + 1, "rank {rank}: {low}..{high}");
        }
        // The extremes are exact.
        assert_eq!(r.range_at_rank(1), Some((1000, 1000)));
        assert_eq!(r.range_at_rank(1000).map(|(_, high)| high), Some(1_000_000));
        assert_eq!(r.range_at_rank(0), None);
        assert_eq!(r.range_at_rank(1001), None);
        // Past the histogram's range, the exact maximum.
        let mut r = LatencyRecorder::new();
        r.record_ns(10);
        r.record_ns(u64::MAX);
        assert_eq!(r.range_at_rank(2).map(|(_, high)| high), Some(u64::MAX));
        assert_eq!(r.range_at_rank(1), Some((10, 10)));
    }

    #[test]
    fn merge_adds_counts_and_extremes() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        for ns in [1_000, 2_000, 3_000] {
            a.record_ns(ns);
        }
        for ns in [10_000_000, 500] {
            b.record_ns(ns);
        }
        a.merge(&b);
        a.merge(&LatencyRecorder::new());
        let s = a.summary().unwrap();
        assert_eq!(a.count(), 5);
        assert_eq!(s.min, 0.5);
        assert_eq!(s.max, 10_000.0);
        assert!(close(
            s.mean,
            (1_000.0 + 2_000.0 + 3_000.0 + 10_000_000.0 + 500.0) / 5.0 / 1e3,
            1e-12
        ));
        assert!(close(s.p50, 2.0, 1e-3), "p50 {}", s.p50);
        let mut empty = LatencyRecorder::new();
        empty.merge(&a);
        assert_eq!(empty.summary(), a.summary());
    }
}
