//! The handshake table: the control connections still in their handshake
//! (and those closing after one failed), by the key the daemon's loop keeps
//! them under. It is bounded in all and for each source address: past either
//! bound the oldest (of all, or of that source) is pushed out for the new
//! one, so silent connections cannot lock out a client that answers in a
//! round trip. Each connection has a deadline; the loop asks which passed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Instant;

/// Most handshakes one source address may hold: a quarter of the slots (at
/// least 8).
pub(crate) fn per_source(max: usize) -> usize {
    (max / 4).max(8)
}

#[derive(Debug)]
struct Entry {
    /// Its place in the order of arrival.
    seq: u64,
    source: IpAddr,
    deadline: Option<Instant>,
}

/// Connections in their handshake, oldest first, each with a deadline.
#[derive(Debug)]
pub(crate) struct Handshakes {
    max: usize,
    per_source: usize,
    entries: HashMap<usize, Entry>,
    /// Keys by arrival.
    order: BTreeMap<u64, usize>,
    /// Each source's arrivals.
    sources: HashMap<IpAddr, BTreeSet<u64>>,
    /// The deadlines still to come, with the arrival they belong to.
    deadlines: BTreeSet<(Instant, u64)>,
    next_seq: u64,
}

impl Handshakes {
    /// A table of at most `max` connections (at least one), a quarter of
    /// them ([`per_source`]) from one address.
    pub(crate) fn new(max: usize) -> Self {
        Handshakes {
            max: max.max(1),
            per_source: per_source(max),
            entries: HashMap::new(),
            order: BTreeMap::new(),
            sources: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_seq: 0,
        }
    }

    /// Connection `key` from `source` begins its handshake, to be over by
    /// `deadline`. Returns the keys pushed out to make room (the oldest of
    /// `source` when it holds its share, then the oldest of all when the
    /// table is full): the caller closes them, the table has forgotten them.
    pub(crate) fn admit(&mut self, key: usize, source: IpAddr, deadline: Instant) -> Vec<usize> {
        self.remove(key);
        let mut out = Vec::new();
        let oldest_of_source = |t: &Self| -> Option<usize> {
            let seqs = t.sources.get(&source)?;
            if seqs.len() < t.per_source {
                return None;
            }
            seqs.first().map(|s| t.order[s])
        };
        while let Some(old) = oldest_of_source(self) {
            self.remove(old);
            out.push(old);
        }
        while self.entries.len() >= self.max {
            let Some((_, &old)) = self.order.first_key_value() else {
                break;
            };
            self.remove(old);
            out.push(old);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(
            key,
            Entry {
                seq,
                source,
                deadline: Some(deadline),
            },
        );
        self.order.insert(seq, key);
        self.sources.entry(source).or_default().insert(seq);
        self.deadlines.insert((deadline, seq));
        out
    }

    /// Connection `key` is no longer in its handshake (through, or closed).
    /// Returns whether the table held it.
    pub(crate) fn remove(&mut self, key: usize) -> bool {
        let Some(e) = self.entries.remove(&key) else {
            return false;
        };
        self.order.remove(&e.seq);
        if let Some(seqs) = self.sources.get_mut(&e.source) {
            seqs.remove(&e.seq);
            if seqs.is_empty() {
                self.sources.remove(&e.source);
            }
        }
        if let Some(d) = e.deadline {
            self.deadlines.remove(&(d, e.seq));
        }
        true
    }

    /// A connection whose deadline passed by `now`, its deadline taken off:
    /// the caller removes it or gives it another. Call until `None`.
    pub(crate) fn due(&mut self, now: Instant) -> Option<usize> {
        let &(deadline, seq) = self.deadlines.first()?;
        if deadline > now {
            return None;
        }
        self.deadlines.pop_first();
        let key = self.order[&seq];
        if let Some(e) = self.entries.get_mut(&key) {
            e.deadline = None;
        }
        Some(key)
    }

    /// Connection `key` now has until `at` (a failed handshake's error
    /// being sent and the connection closed). Its place in the order of
    /// arrival does not change.
    pub(crate) fn set_deadline(&mut self, key: usize, at: Instant) {
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        if let Some(d) = e.deadline.replace(at) {
            self.deadlines.remove(&(d, e.seq));
        }
        self.deadlines.insert((at, e.seq));
    }

    /// The next deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    /// Connections in the table now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every connection in the table, forgotten (the daemon shuts down).
    pub(crate) fn drain(&mut self) -> Vec<usize> {
        let keys = self.order.values().copied().collect();
        *self = Handshakes::new(self.max);
        keys
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn keys(h: &Handshakes) -> Vec<usize> {
        h.order.values().copied().collect()
    }

    #[test]
    fn a_full_table_pushes_out_its_oldest_and_one_source_holds_its_share() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        // 16 slots, 8 per source.
        let mut h = Handshakes::new(16);
        assert_eq!(h.per_source, 8);
        for k in 0..8 {
            assert!(h.admit(k, ip(1), later).is_empty());
        }
        assert_eq!(h.admit(8, ip(1), later), [0], "a's oldest goes");
        for k in 9..16 {
            assert!(h.admit(k, ip(2), later).is_empty());
        }
        assert_eq!(h.len(), 15);
        assert!(h.admit(16, ip(2), later).is_empty());
        assert_eq!(h.len(), 16);
        assert_eq!(h.admit(17, ip(3), later), [1], "full: the oldest of all");
        // A source at its share when the table is also full: its own oldest
        // makes room, and no one else's.
        assert_eq!(h.admit(18, ip(2), later), [9]);
        assert_eq!(h.len(), 16);
        assert!(h.remove(5));
        assert!(!h.remove(5));
        assert!(!h.remove(99));
        assert_eq!(
            keys(&h),
            [2, 3, 4, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18]
        );
        assert_eq!(per_source(256), 64);
        assert_eq!(per_source(4), 8);
    }

    #[test]
    fn a_table_smaller_than_a_share_still_holds_its_bound() {
        let t = Instant::now();
        let mut h = Handshakes::new(2);
        assert!(h.admit(1, ip(1), t).is_empty());
        assert!(h.admit(2, ip(1), t).is_empty());
        assert_eq!(h.admit(3, ip(1), t), [1]);
        assert_eq!(h.len(), 2);
        let mut none = Handshakes::new(0);
        assert!(none.admit(1, ip(1), t).is_empty());
        assert_eq!(none.admit(2, ip(1), t), [1], "at least one slot");
    }

    #[test]
    fn deadlines_come_due_in_order_and_a_new_one_keeps_the_place_in_line() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut h = Handshakes::new(8);
        h.admit(1, ip(1), t0 + 5 * s);
        h.admit(2, ip(1), t0 + 6 * s);
        h.admit(3, ip(2), t0 + 7 * s);
        assert_eq!(h.next_deadline(), Some(t0 + 5 * s));
        assert_eq!(h.due(t0 + 4 * s), None);
        assert_eq!(h.due(t0 + 6 * s), Some(1));
        assert_eq!(h.due(t0 + 6 * s), Some(2));
        assert_eq!(h.due(t0 + 6 * s), None);
        // 1 failed and closes within a second; 2 is closed.
        h.set_deadline(1, t0 + 7 * s);
        h.remove(2);
        assert_eq!(h.next_deadline(), Some(t0 + 7 * s));
        // 3 fails early: its deadline moves up.
        h.set_deadline(3, t0 + 6 * s);
        assert_eq!(h.due(t0 + 6 * s), Some(3));
        assert_eq!(h.due(t0 + 6 * s), None);
        // Still the oldest: pushed out first.
        let full = (10..17).flat_map(|k| h.admit(k, ip(k as u8), t0 + 9 * s));
        assert_eq!(full.collect::<Vec<_>>(), [1]);
        assert_eq!(h.len(), 8);
        assert_eq!(h.drain().len(), 8);
        assert_eq!((h.len(), h.next_deadline()), (0, None));
    }
}
