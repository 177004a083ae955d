//! What a profile worker counts: per transaction element, per flowop type,
//! and the side's totals with per-second intervals.

use std::time::{Duration, Instant};

use linkperf_metrics::LatencyRecorder;
use linkperf_records::{Interval, ProfileFlowop, ProfileReport, ProfileTransaction, Totals};

use super::script::{SlotInfo, TYPES, TYPE_NAMES};

/// Distinct error messages kept.
const MAX_ERROR_SAMPLES: usize = 4;

/// Counts of one transaction element or one flowop type.
#[derive(Debug, Default)]
pub struct Tally {
    /// Iterations (transactions) or operations (flowop types).
    pub count: u64,
    /// Payload bytes written.
    pub tx: u64,
    /// Payload bytes read.
    pub rx: u64,
    /// Failed operations.
    pub errors: u64,
    /// Times of each iteration or operation.
    pub latency: LatencyRecorder,
    /// First start and last end (transactions only).
    pub span: Option<(Instant, Instant)>,
}

impl Tally {
    fn merge(&mut self, o: &Tally) {
        self.count += o.count;
        self.tx += o.tx;
        self.rx += o.rx;
        self.errors += o.errors;
        self.latency.merge(&o.latency);
        self.span = match (self.span, o.span) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
    }
}

/// The most memory a profile's statistics take on one side: each of its
/// `workers`, and the merge of theirs when the run ends, keeps a histogram
/// for each of its `transactions` (transaction elements of all groups), for
/// each flowop type and for every iteration, each allocated with its first
/// value and at most [`linkperf_metrics::MAX_HISTOGRAM_BYTES`].
pub fn most_stats_bytes(transactions: usize, workers: usize) -> u64 {
    let histograms = (transactions as u64).saturating_add(TYPES as u64 + 1);
    let sets = (workers as u64).saturating_add(1);
    histograms
        .saturating_mul(sets)
        .saturating_mul(linkperf_metrics::MAX_HISTOGRAM_BYTES)
}

/// One worker's counts for a profile run.
#[derive(Debug)]
pub struct Stats {
    /// When the profile started (the first transaction's release).
    pub start: Option<Instant>,
    /// Per transaction element.
    pub txns: Vec<Tally>,
    /// Per flowop type, indexed like `TYPE_NAMES`.
    pub types: Vec<Tally>,
    /// Whole-run totals (every byte, including what was drained).
    pub totals: Totals,
    /// Bytes read and thrown away between transactions (in `totals`, but
    /// not read by any read flowop).
    pub drained: u64,
    /// Failed operations.
    pub errors: u64,
    /// Every iteration's time.
    pub latency: LatencyRecorder,
    /// Per-second (tx, rx, iterations) since `start`.
    buckets: Vec<(u64, u64, u64)>,
    /// Connections opened or accepted.
    pub connections: u64,
    /// A few distinct error messages.
    pub error_samples: Vec<String>,
}

impl Stats {
    /// Empty counts for `slots` transaction elements.
    pub fn new(slots: usize) -> Self {
        Stats {
            start: None,
            txns: (0..slots).map(|_| Tally::default()).collect(),
            types: (0..TYPES).map(|_| Tally::default()).collect(),
            totals: Totals::default(),
            drained: 0,
            errors: 0,
            latency: LatencyRecorder::new(),
            buckets: Vec::new(),
            connections: 0,
            error_samples: Vec::new(),
        }
    }

    fn bucket(&mut self, now: Instant) -> Option<&mut (u64, u64, u64)> {
        let s = self.start?;
        let i = now.saturating_duration_since(s).as_secs() as usize;
        // A day of seconds at most; beyond that the last bucket takes it.
        let i = i.min(86_400);
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, (0, 0, 0));
        }
        self.buckets.get_mut(i)
    }

    /// `n` bytes written by an operation of type `ty` in transaction `slot`.
    pub fn tx(&mut self, n: u64, slot: usize, ty: usize, now: Instant) {
        self.totals.tx_bytes += n;
        self.txns[slot].tx += n;
        self.types[ty].tx += n;
        if let Some(b) = self.bucket(now) {
            b.0 += n;
        }
    }

    /// `n` bytes counted as written that nobody will read (the server wrote
    /// them on a connection it opened in an iteration the client never
    /// began): taken back, so that both sides count delivered payload.
    pub fn retract_tx(&mut self, n: u64, slot: usize, ty: usize) {
        self.totals.tx_bytes = self.totals.tx_bytes.saturating_sub(n);
        self.txns[slot].tx = self.txns[slot].tx.saturating_sub(n);
        self.types[ty].tx = self.types[ty].tx.saturating_sub(n);
        if let Some(b) = self.buckets.last_mut() {
            b.0 = b.0.saturating_sub(n);
        }
    }

    /// `n` bytes read by an operation of type `ty` in transaction `slot`.
    pub fn rx(&mut self, n: u64, slot: usize, ty: usize, now: Instant) {
        self.totals.rx_bytes += n;
        self.txns[slot].rx += n;
        self.types[ty].rx += n;
        if let Some(b) = self.bucket(now) {
            b.1 += n;
        }
    }

    /// `n` bytes read and thrown away between transactions (what the other
    /// side wrote past the end of a timed transaction).
    pub fn drained(&mut self, n: u64, now: Instant) {
        self.totals.rx_bytes += n;
        self.drained += n;
        if let Some(b) = self.bucket(now) {
            b.1 += n;
        }
    }

    /// An operation of type `ty` done, taking `took`.
    pub fn operation(&mut self, ty: usize, took: Duration) {
        let t = &mut self.types[ty];
        t.count += 1;
        t.latency.record_ns(nanos(took));
    }

    /// An iteration of transaction `slot` done at `now`, begun at `began`.
    pub fn iteration(&mut self, slot: usize, began: Instant, now: Instant) {
        let took = nanos(now.saturating_duration_since(began));
        let t = &mut self.txns[slot];
        t.count += 1;
        t.latency.record_ns(took);
        self.latency.record_ns(took);
        self.totals.transactions += 1;
        if let Some(b) = self.bucket(now) {
            b.2 += 1;
        }
    }

    /// Transaction `slot` ran for a user from `from` to `to`.
    pub fn span(&mut self, slot: usize, from: Instant, to: Instant) {
        let t = &mut self.txns[slot];
        t.span = Some(match t.span {
            Some((a, b)) => (a.min(from), b.max(to)),
            None => (from, to),
        });
    }

    /// A failed operation of type `ty` in transaction `slot`.
    pub fn error(&mut self, slot: usize, ty: usize, message: impl FnOnce() -> String) {
        self.errors += 1;
        self.txns[slot].errors += 1;
        self.types[ty].errors += 1;
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            let m = message();
            if !self.error_samples.contains(&m) {
                self.error_samples.push(m);
            }
        }
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &Stats) {
        self.start = match (self.start, o.start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (a, b) in self.txns.iter_mut().zip(&o.txns) {
            a.merge(b);
        }
        for (a, b) in self.types.iter_mut().zip(&o.types) {
            a.merge(b);
        }
        self.totals.tx_bytes += o.totals.tx_bytes;
        self.totals.rx_bytes += o.totals.rx_bytes;
        self.totals.transactions += o.totals.transactions;
        self.drained += o.drained;
        self.errors += o.errors;
        self.latency.merge(&o.latency);
        // Buckets are relative to each worker's start; all start together
        // (the release), so they line up to within the release's wake-up.
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), (0, 0, 0));
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            a.0 += b.0;
            a.1 += b.1;
            a.2 += b.2;
        }
        self.connections += o.connections;
        for m in &o.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES && !self.error_samples.contains(m) {
                self.error_samples.push(m.clone());
            }
        }
    }

    /// Per-second intervals over `window_s`.
    pub fn intervals(&self, window_s: f64) -> Vec<Interval> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let start_s = i as f64;
                Interval {
                    start_s,
                    length_s: (window_s - start_s).clamp(0.0, 1.0),
                    tx_bytes: b.0,
                    rx_bytes: b.1,
                    transactions: b.2,
                    ..Default::default()
                }
            })
            .filter(|i| i.length_s > 0.0)
            .collect()
    }

    /// The per-element and per-type report.
    pub fn profile_report(&self, name: &str, slots: &[SlotInfo]) -> ProfileReport {
        let transactions = slots
            .iter()
            .zip(&self.txns)
            .map(|(s, t)| ProfileTransaction {
                group: s.group,
                index: s.index,
                line: s.line,
                limit: s.limit.clone(),
                users: s.users,
                iterations: t.count,
                seconds: t
                    .span
                    .map(|(a, b)| b.saturating_duration_since(a).as_secs_f64())
                    .unwrap_or(0.0),
                tx_bytes: t.tx,
                rx_bytes: t.rx,
                errors: t.errors,
                latency: t.latency.summary(),
            })
            .collect();
        let flowops = TYPE_NAMES
            .iter()
            .zip(&self.types)
            .filter(|(_, t)| t.count > 0 || t.errors > 0)
            .map(|(n, t)| ProfileFlowop {
                kind: (*n).to_string(),
                operations: t.count,
                tx_bytes: t.tx,
                rx_bytes: t.rx,
                errors: t.errors,
                latency: t.latency.summary(),
            })
            .collect();
        ProfileReport {
            name: name.to_string(),
            transactions,
            flowops,
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
