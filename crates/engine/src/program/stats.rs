//! What a profile worker counts: the one accounting type every test's
//! worker counts into ([`Counters`]: totals, errors and their samples,
//! per-second intervals, iteration times), its window the whole run, and
//! what a profile adds to it (per transaction element, per flowop type,
//! what was drained between transactions).

use std::time::{Duration, Instant};

use linkperf_measured::{ProfileFlowop, ProfileReport, ProfileTransaction};
use linkperf_metrics::LatencyRecorder;

use super::script::{SlotInfo, TYPES, TYPE_NAMES};
use crate::counters::{Counters, NO_FLOW};

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

/// The most memory a profile's counts take on one side: each of its
/// `workers`, and the merge of theirs when the run ends, keeps a histogram
/// for each of its `transactions` (transaction elements of all groups) and
/// for each flowop type, and its [`Counters`] two for the iterations (the
/// window's and the second's), each allocated with its first value and at
/// most [`linkperf_metrics::MAX_HISTOGRAM_BYTES`].
pub fn most_stats_bytes(transactions: usize, workers: usize) -> u64 {
    let histograms = (transactions as u64).saturating_add(TYPES as u64 + 2);
    let sets = (workers as u64).saturating_add(1);
    histograms
        .saturating_mul(sets)
        .saturating_mul(linkperf_metrics::MAX_HISTOGRAM_BYTES)
}

/// One worker's counts for a profile run: its [`Counters`] and the
/// profile's extension of them.
#[derive(Debug)]
pub struct ProfileCounters {
    /// The side's counts as every test's: whole-run totals (every byte,
    /// including what was drained), errors and their samples, each
    /// iteration's time, and per-second intervals; its window opens at
    /// the start ([`ProfileCounters::start`]) and runs to the end.
    pub counters: Counters,
    /// Per transaction element.
    pub txns: Vec<Tally>,
    /// Per flowop type, indexed like `TYPE_NAMES`.
    pub types: Vec<Tally>,
    /// Bytes read and thrown away between transactions (in the counters'
    /// totals, but not read by any read flowop).
    pub drained: u64,
}

impl ProfileCounters {
    /// Empty counts for `slots` transaction elements.
    pub fn new(slots: usize) -> Self {
        ProfileCounters {
            counters: Counters::new(true),
            txns: (0..slots).map(|_| Tally::default()).collect(),
            types: (0..TYPES).map(|_| Tally::default()).collect(),
            drained: 0,
        }
    }

    /// The profile started at `start` (the first transaction's release on
    /// the client, the worker's start on the server): its seconds count
    /// from here.
    pub fn start(&mut self, start: Instant) {
        self.counters.set_open_window(start);
    }

    /// When the profile started, if it has.
    pub fn started(&self) -> Option<Instant> {
        self.counters.schedule().map(|s| s.start)
    }

    /// `n` bytes written by an operation of type `ty` in transaction `slot`.
    pub fn tx(&mut self, n: u64, slot: usize, ty: usize, now: Instant) {
        self.counters.tx(NO_FLOW, bytes(n), now);
        self.txns[slot].tx += n;
        self.types[ty].tx += n;
    }

    /// `n` bytes counted as written that nobody will read (the server wrote
    /// them on a connection it opened in an iteration the client never
    /// began): taken back, so that both sides count delivered payload.
    pub fn retract_tx(&mut self, n: u64, slot: usize, ty: usize) {
        self.counters.retract_tx(n);
        self.txns[slot].tx = self.txns[slot].tx.saturating_sub(n);
        self.types[ty].tx = self.types[ty].tx.saturating_sub(n);
    }

    /// `n` bytes read by an operation of type `ty` in transaction `slot`.
    pub fn rx(&mut self, n: u64, slot: usize, ty: usize, now: Instant) {
        self.counters.rx(NO_FLOW, bytes(n), now);
        self.txns[slot].rx += n;
        self.types[ty].rx += n;
    }

    /// `n` bytes read and thrown away between transactions (what the other
    /// side wrote past the end of a timed transaction).
    pub fn drained(&mut self, n: u64, now: Instant) {
        self.counters.rx(NO_FLOW, bytes(n), now);
        self.drained += n;
    }

    /// An operation of type `ty` done, taking `took`.
    pub fn operation(&mut self, ty: usize, took: Duration) {
        let t = &mut self.types[ty];
        t.count += 1;
        t.latency.record_ns(nanos(took));
    }

    /// An iteration of transaction `slot` done at `now`, begun at `began`.
    pub fn iteration(&mut self, slot: usize, began: Instant, now: Instant) {
        let took = now.saturating_duration_since(began);
        let t = &mut self.txns[slot];
        t.count += 1;
        t.latency.record_ns(nanos(took));
        self.counters.transactions(NO_FLOW, 1, took, now);
    }

    /// Transaction `slot` ran for a user from `from` to `to`.
    pub fn span(&mut self, slot: usize, from: Instant, to: Instant) {
        let t = &mut self.txns[slot];
        t.span = Some(match t.span {
            Some((a, b)) => (a.min(from), b.max(to)),
            None => (from, to),
        });
    }

    /// A failed operation of type `ty` in transaction `slot`, at `now`.
    pub fn error(
        &mut self,
        slot: usize,
        ty: usize,
        now: Instant,
        message: impl FnOnce() -> String,
    ) {
        self.counters.error(now, message);
        self.txns[slot].errors += 1;
        self.types[ty].errors += 1;
    }

    /// Adds another worker's counts. Each worker's seconds count from its
    /// own start; all start together (the release), so they line up to
    /// within the release's wake-up.
    pub fn merge(&mut self, o: &ProfileCounters) {
        self.counters.merge(&o.counters);
        for (a, b) in self.txns.iter_mut().zip(&o.txns) {
            a.merge(b);
        }
        for (a, b) in self.types.iter_mut().zip(&o.types) {
            a.merge(b);
        }
        self.drained += o.drained;
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

/// A count of bytes as the counters take it.
fn bytes(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In virtual time: a profile's counts go into its counters, whose
    /// window opens at the start and whose intervals end where counting
    /// stopped; the elements beside them add up to the same bytes.
    #[test]
    fn a_profiles_counts_are_its_counters_with_the_elements_beside_them() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let read = TYPE_NAMES.iter().position(|t| *t == "read").unwrap();
        let write = TYPE_NAMES.iter().position(|t| *t == "write").unwrap();
        let mut a = ProfileCounters::new(2);
        a.start(t0);
        a.tx(100, 0, write, ms(200));
        a.rx(40, 0, read, ms(300));
        a.iteration(0, ms(100), ms(300));
        a.tx(50, 1, write, ms(1500));
        a.retract_tx(20, 1, write);
        a.drained(7, ms(1600));
        a.error(1, read, ms(1700), || "lost".into());
        // A second worker, started a little later.
        let mut b = ProfileCounters::new(2);
        b.start(ms(5));
        b.rx(9, 1, read, ms(2100));
        b.iteration(1, ms(2000), ms(2100));
        b.error(1, read, ms(2200), || "lost".into());

        let mut side = ProfileCounters::new(2);
        side.start(t0);
        side.merge(&a);
        side.merge(&b);
        side.counters.stop(ms(2500));
        let c = &side.counters;
        assert_eq!(
            (c.totals.tx_bytes, c.totals.rx_bytes, c.totals.transactions),
            (130, 56, 2)
        );
        assert_eq!(
            (c.errors, c.error_samples.clone()),
            (2, vec!["lost".to_string()])
        );
        assert_eq!(c.window_latency().count(), 2);
        assert_eq!(side.drained, 7);
        let iv = c.intervals();
        let rows: Vec<_> = iv
            .iter()
            .map(|i| {
                (
                    i.start_s,
                    i.length_s,
                    i.tx_bytes,
                    i.rx_bytes,
                    i.transactions,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (0.0, 1.0, 100, 40, 1),
                (1.0, 1.0, 30, 7, 0),
                (2.0, 0.5, 0, 9, 1)
            ]
        );
        assert_eq!(
            (side.txns[0].tx, side.txns[1].tx, side.types[write].tx),
            (100, 30, 130)
        );
        assert_eq!((side.txns[1].errors, side.types[read].errors), (2, 2));
        assert_eq!(side.txns[1].rx + side.txns[0].rx + side.drained, 56);

        // Nothing counted yet: no interval, as before any release.
        let mut idle = ProfileCounters::new(1);
        idle.start(t0);
        idle.counters.stop(ms(800));
        assert!(idle.counters.intervals().is_empty());
    }
}
