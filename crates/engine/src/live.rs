//! Live progress of a running side, for progress bars: each worker publishes
//! its whole-life totals into its own slot a few times a second; readers add
//! the slots up. Workers never contend on one counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use linkperf_metrics::Totals;

/// How often a worker publishes.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Slot {
    tx_bytes: AtomicU64,
    rx_bytes: AtomicU64,
    transactions: AtomicU64,
}

/// Live totals of one side, one slot per worker.
#[derive(Debug)]
pub struct LiveStats {
    slots: Vec<Slot>,
}

impl LiveStats {
    /// Room for `workers` workers.
    pub fn new(workers: usize) -> Self {
        LiveStats {
            slots: (0..workers.max(1)).map(|_| Slot::default()).collect(),
        }
    }

    /// Worker `w` publishes its totals.
    pub fn publish(&self, w: usize, t: &Totals) {
        if let Some(s) = self.slots.get(w) {
            s.tx_bytes.store(t.tx_bytes, Ordering::Relaxed);
            s.rx_bytes.store(t.rx_bytes, Ordering::Relaxed);
            s.transactions.store(t.transactions, Ordering::Relaxed);
        }
    }

    /// The sum over workers, as last published.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.slots {
            t.tx_bytes += s.tx_bytes.load(Ordering::Relaxed);
            t.rx_bytes += s.rx_bytes.load(Ordering::Relaxed);
            t.transactions += s.transactions.load(Ordering::Relaxed);
        }
        t
    }
}

/// A worker's publishing schedule.
#[derive(Debug)]
pub struct Publisher {
    next: Instant,
}

impl Publisher {
    /// Publishes first at `now`.
    pub fn new(now: Instant) -> Self {
        Publisher { next: now }
    }

    /// True when it is time to publish again.
    pub fn due(&mut self, now: Instant) -> bool {
        if now >= self.next {
            self.next = now + PUBLISH_EVERY;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_slots() {
        let l = LiveStats::new(2);
        l.publish(
            0,
            &Totals {
                tx_bytes: 1,
                rx_bytes: 2,
                transactions: 3,
            },
        );
        l.publish(
            1,
            &Totals {
                tx_bytes: 10,
                rx_bytes: 20,
                transactions: 30,
            },
        );
        l.publish(
            5,
            &Totals {
                tx_bytes: 99,
                rx_bytes: 99,
                transactions: 99,
            },
        );
        assert_eq!(
            l.totals(),
            Totals {
                tx_bytes: 11,
                rx_bytes: 22,
                transactions: 33
            }
        );
    }
}
