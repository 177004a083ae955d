//! Live progress of a running side, for progress bars and interval lines.
//!
//! Each worker publishes into its own slot a few times a second
//! ([`PUBLISH_EVERY`]): its whole-life totals, and on the client each second
//! of traffic once it is over (its counts, its transaction times, the
//! retransmits of its connections). Readers add the slots up. Workers never
//! contend on one counter and never wait for a reader: a worker that finds
//! its slot being read keeps its seconds for the next turn. Nothing is done
//! per transaction: a second's transaction times are the histogram the
//! worker records into anyway ([`crate::Counters`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use linkperf_measured::{Interval, Totals};
use linkperf_metrics::LatencyRecorder;

use crate::counters::Counters;

/// How often a worker publishes.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// One second of a side's traffic as its workers counted it, live, with
/// its transaction times as a histogram (so that workers' seconds add up):
/// on the client, what the client wrote and read (each direction at the
/// client, not at its receiver as in a run's `intervals`). Its window
/// seconds are the side's report's `intervals`, count for count: both are
/// made by the same function of the counters.
pub type LiveInterval = Interval<LatencyRecorder>;

#[derive(Debug, Default)]
struct Handed {
    /// Seconds over, not yet taken by the reader.
    seconds: Vec<LiveInterval>,
    /// The worker has handed over its last second.
    last: bool,
}

#[derive(Debug, Default)]
struct Slot {
    tx_bytes: AtomicU64,
    rx_bytes: AtomicU64,
    transactions: AtomicU64,
    seconds: Mutex<Handed>,
}

/// What the reader took from each worker and has not yet merged.
#[derive(Debug, Default)]
struct Reader {
    pending: Vec<VecDeque<LiveInterval>>,
    last: Vec<bool>,
}

/// Live totals and seconds of one side, one slot per worker.
#[derive(Debug)]
pub struct LiveStats {
    slots: Vec<Slot>,
    /// Workers that publish seconds: set by the side once it knows.
    workers: AtomicUsize,
    reader: Mutex<Reader>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LiveStats {
    /// Room for `workers` workers.
    pub fn new(workers: usize) -> Self {
        LiveStats {
            slots: (0..workers.max(1)).map(|_| Slot::default()).collect(),
            workers: AtomicUsize::new(0),
            reader: Mutex::new(Reader::default()),
        }
    }

    /// Workers `0..n` will publish seconds (the side calls it before they start).
    pub(crate) fn expect_workers(&self, n: usize) {
        self.workers
            .store(n.min(self.slots.len()), Ordering::Release);
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

    /// Worker `w` hands over `seconds` (emptied when they were taken); its
    /// `last` ones at its end. Never waits for a reader but at the end.
    fn hand_over(&self, w: usize, seconds: &mut Vec<LiveInterval>, last: bool) {
        let Some(slot) = self.slots.get(w) else {
            seconds.clear();
            return;
        };
        let mut handed = if last {
            lock(&slot.seconds)
        } else {
            match slot.seconds.try_lock() {
                Ok(h) => h,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            }
        };
        handed.seconds.append(seconds);
        handed.last |= last;
    }

    /// The seconds every worker has handed over since the last call, each
    /// added up over the workers, in order. One reader at a time: each
    /// second is returned once.
    pub fn intervals(&self) -> Vec<LiveInterval> {
        self.read(false)
    }

    /// Every second handed over, whether every worker has handed it over or
    /// not: for after the side has stopped (a worker that failed before the
    /// traffic began hands over nothing).
    pub fn drain(&self) -> Vec<LiveInterval> {
        self.read(true)
    }

    fn read(&self, all: bool) -> Vec<LiveInterval> {
        let workers = self.workers.load(Ordering::Acquire);
        let mut r = lock(&self.reader);
        r.pending.resize_with(workers, VecDeque::new);
        r.last.resize(workers, false);
        for (w, slot) in self.slots.iter().enumerate().take(workers) {
            let mut h = lock(&slot.seconds);
            r.pending[w].extend(h.seconds.drain(..));
            r.last[w] |= h.last;
        }
        let mut out = Vec::new();
        loop {
            // Every worker's k-th second is the same second: the next is
            // ready when each worker has handed it over or is done.
            let waiting = (0..workers).any(|w| r.pending[w].is_empty() && !r.last[w]);
            if waiting && !all {
                break;
            }
            let mut merged: Option<LiveInterval> = None;
            for q in &mut r.pending {
                if let Some(s) = q.pop_front() {
                    match &mut merged {
                        Some(m) => {
                            // A worker stopped a moment later ran a moment longer.
                            m.length_s = m.length_s.max(s.length_s);
                            m.add(&s);
                        }
                        None => merged = Some(s),
                    }
                }
            }
            match merged {
                Some(m) => out.push(m),
                None => break,
            }
        }
        out
    }
}

/// A worker's publishing: its schedule, the seconds it could not hand over
/// yet, and what its connections had retransmitted when last read.
#[derive(Debug)]
pub struct Publisher {
    next: Instant,
    unsent: Vec<LiveInterval>,
    retransmits_seen: Option<Vec<u32>>,
}

impl Publisher {
    /// Publishes first at `now`.
    pub fn new(now: Instant) -> Self {
        Publisher {
            next: now,
            unsent: Vec::new(),
            retransmits_seen: None,
        }
    }

    /// True when it is time to publish again.
    pub fn due(&mut self, now: Instant) -> bool {
        if now >= self.next {
            self.next = now + PUBLISH_EVERY;
            return true;
        }
        false
    }

    /// Worker `w` publishes its totals and the seconds over by `now`.
    /// `retransmits` reads, flow slot by flow slot, each TCP connection's
    /// retransmits so far (`None` for a flow without one); it is called only
    /// when a second is over (and once at first, to know where they start).
    pub(crate) fn publish<I>(
        &mut self,
        live: &LiveStats,
        w: usize,
        counters: &mut Counters,
        now: Instant,
        retransmits: impl FnOnce() -> I,
    ) where
        I: IntoIterator<Item = Option<u32>>,
    {
        live.publish(w, &counters.totals);
        let seconds = counters.take_seconds(now);
        self.add(seconds, retransmits);
        live.hand_over(w, &mut self.unsent, false);
    }

    /// Worker `w`, done, publishes its totals and every second left.
    pub(crate) fn publish_last<I>(
        &mut self,
        live: &LiveStats,
        w: usize,
        counters: &mut Counters,
        retransmits: impl FnOnce() -> I,
    ) where
        I: IntoIterator<Item = Option<u32>>,
    {
        live.publish(w, &counters.totals);
        let seconds = counters.take_rest();
        self.add(seconds, retransmits);
        live.hand_over(w, &mut self.unsent, true);
    }

    fn add<I>(&mut self, seconds: Vec<LiveInterval>, retransmits: impl FnOnce() -> I)
    where
        I: IntoIterator<Item = Option<u32>>,
    {
        if seconds.is_empty() && self.retransmits_seen.is_some() {
            return;
        }
        let read = self.retransmits_since(retransmits());
        let n = seconds.len();
        for (k, s) in seconds.into_iter().enumerate() {
            let mut iv = s;
            if k + 1 == n {
                iv.retransmits = read;
            }
            self.unsent.push(iv);
        }
    }

    /// Retransmits since the last reading, over the connections read now
    /// (`None` if there is none). A connection whose count went down is a
    /// new one (connect per transaction): it counts from its connect.
    fn retransmits_since(&mut self, now: impl IntoIterator<Item = Option<u32>>) -> Option<u64> {
        let seen = self.retransmits_seen.get_or_insert_with(Vec::new);
        let mut sum = None;
        for (i, r) in now.into_iter().enumerate() {
            if i >= seen.len() {
                seen.resize(i + 1, 0);
            }
            match r {
                Some(r) => {
                    let new = r.checked_sub(seen[i]).unwrap_or(r);
                    *sum.get_or_insert(0) += u64::from(new);
                    seen[i] = r;
                }
                None => seen[i] = 0,
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;

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

    fn sched(t0: Instant) -> Schedule {
        Schedule::new(
            t0,
            Duration::from_millis(500),
            Duration::from_secs(2),
            Duration::from_secs(1),
        )
    }

    #[test]
    fn a_second_is_read_once_every_worker_has_published_it() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let live = LiveStats::new(4);
        live.expect_workers(2);
        let mut c: Vec<Counters> = (0..2).map(|_| Counters::new(true)).collect();
        let mut p: Vec<Publisher> = (0..2).map(|_| Publisher::new(t0)).collect();
        for (w, c) in c.iter_mut().enumerate() {
            c.set_schedule(sched(t0));
            let f = c.add_flow(w as u32);
            c.tx(f, 100, ms(100));
            c.transactions(f, 1, Duration::from_micros(10 * (w as u64 + 1)), ms(700));
            c.tx(f, 1, ms(800));
            p[w].publish(&live, w, c, t0, || [Some(0)]);
        }
        assert!(live.intervals().is_empty(), "nothing over yet");
        // Worker 0 is past the warm-up and the window's first second; worker 1 is not yet.
        p[0].publish(&live, 0, &mut c[0], ms(1600), || [Some(3)]);
        assert!(
            live.intervals().is_empty(),
            "worker 1 has not published them"
        );
        p[1].publish(&live, 1, &mut c[1], ms(600), || [None]);
        let got = live.intervals();
        assert_eq!(got.len(), 1, "the warm-up's second: {got:?}");
        assert!(got[0].warmup);
        assert_eq!((got[0].start_s, got[0].length_s), (-0.5, 0.5));
        assert_eq!(got[0].tx_bytes, 200);
        assert_eq!(
            got[0].retransmits, None,
            "worker 0 read its for the later second"
        );
        p[1].publish(&live, 1, &mut c[1], ms(1500), || [Some(2)]);
        let got = live.intervals();
        assert_eq!(got.len(), 1);
        assert!(!got[0].warmup);
        assert_eq!((got[0].tx_bytes, got[0].transactions), (2, 2));
        assert_eq!(got[0].retransmits, Some(5));
        let l = got[0].latency.as_ref().unwrap().summary().unwrap();
        assert_eq!((l.count, l.min, l.max), (2, 10.0, 20.0));
        // One worker is done early (aborted); the other's seconds come alone.
        c[0].stop(ms(1700));
        p[0].publish_last(&live, 0, &mut c[0], || [None]);
        assert!(live.intervals().is_empty());
        p[1].publish_last(&live, 1, &mut c[1], || [None]);
        let got = live.intervals();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].length_s, 1.0, "worker 1 ran to the end");
        assert!(live.intervals().is_empty() && live.drain().is_empty());
    }

    #[test]
    fn retransmits_count_from_the_last_reading_and_from_a_new_connect() {
        let mut p = Publisher::new(Instant::now());
        assert_eq!(p.retransmits_since([Some(5), None]), Some(5));
        assert_eq!(p.retransmits_since([Some(7), None]), Some(2));
        // A new connection on the first slot, a first one on the second.
        assert_eq!(p.retransmits_since([Some(1), Some(4)]), Some(5));
        assert_eq!(p.retransmits_since([None, None]), None);
    }
}
