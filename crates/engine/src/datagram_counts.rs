//! What a worker counts of a UDP stream's datagrams, beside its byte counts:
//! those it sent, and what its receivers' accounting said of those it
//! received ([`crate::flow::udp_stream::SequenceRx`]), over the window and per
//! second, with each flow's jitter. Kept by [`crate::Counters`], which places
//! each count in its seconds: the warm-up's (for live display only), then
//! the window's.

use linkperf_measured::{DatagramCounts, Interval, JitterSum};

use crate::counters::FlowSlotId;
use crate::flow::udp_stream::Arrival;

/// One second's datagrams at a receiver, as they are counted; they go into
/// the second's [`Interval`] ([`SecondDatagrams::fill`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SecondDatagrams {
    /// New datagrams received (no duplicates, none too late to tell).
    pub received: u64,
    /// Sequence numbers the second's arrivals accounted for (RFC 3550's
    /// "expected").
    pub expected: u64,
    /// Sum over the flows that received in this second of their jitter at
    /// their last datagram in it, ns, and how many flows that is.
    pub jitter_sum_ns: f64,
    /// Flows in `jitter_sum_ns`.
    pub jitter_flows: u32,
}

impl SecondDatagrams {
    /// Datagrams lost: `expected − received`, 0 when late arrivals of
    /// earlier datagrams outnumber the losses (RFC 3550).
    #[cfg(test)]
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// The receiving flows' jitter, averaged over them, µs; `None` when no
    /// flow received.
    #[cfg(test)]
    pub fn jitter_us(&self) -> Option<f64> {
        (self.jitter_flows > 0).then(|| self.jitter_sum_ns / f64::from(self.jitter_flows) / 1e3)
    }

    /// Puts these counts in `iv`, their second.
    pub(crate) fn fill<L>(&self, iv: &mut Interval<L>) {
        iv.set_datagrams(
            self.received,
            self.expected,
            JitterSum {
                ns: self.jitter_sum_ns,
                flows: self.jitter_flows,
            },
        );
    }

    /// Adds `o`'s counts: the same second of another worker.
    pub fn add(&mut self, o: &SecondDatagrams) {
        self.received += o.received;
        self.expected += o.expected;
        self.jitter_sum_ns += o.jitter_sum_ns;
        self.jitter_flows += o.jitter_flows;
    }
}

/// A flow's jitter at its last datagram, and that datagram's second; and at
/// its last datagram in the window.
#[derive(Debug, Clone, Copy, Default)]
struct FlowJitter {
    last: Option<(usize, f64)>,
    window_last: Option<f64>,
}

/// A worker's datagram counts.
#[derive(Debug, Clone, Default)]
pub struct DatagramCounters {
    /// Whether a UDP stream counts here (its report then has a `udp` block).
    active: bool,
    /// Whether anything was received here (its intervals then say so).
    receiving: bool,
    window: DatagramCounts,
    /// By second, as [`crate::Counters`] numbers them: the warm-up's, then
    /// the window's.
    seconds: Vec<SecondDatagrams>,
    flows: Vec<FlowJitter>,
}

impl DatagramCounters {
    /// Marks the counters as a UDP stream's, whether or not anything is counted.
    pub fn activate(&mut self) {
        self.active = true;
    }

    /// Room for `seconds` seconds.
    pub(crate) fn set_seconds(&mut self, seconds: usize) {
        self.seconds = vec![SecondDatagrams::default(); seconds];
    }

    /// `n` datagrams were sent, in the window when `inside`.
    pub(crate) fn sent(&mut self, inside: bool, n: u64) {
        self.active = true;
        if inside {
            self.window.sent += n;
        }
    }

    /// A datagram arrived for the flow in `slot`, as `arrival` says, its flow's
    /// jitter now `jitter_ns`; `second` is the second it is counted in, if
    /// any, `inside` whether that is one of the window's.
    pub(crate) fn received(
        &mut self,
        slot: FlowSlotId,
        arrival: &Arrival,
        jitter_ns: f64,
        second: Option<usize>,
        inside: bool,
    ) {
        self.active = true;
        self.receiving = true;
        let Some(k) = second else {
            return;
        };
        if inside {
            let w = &mut self.window;
            w.received += u64::from(arrival.received);
            w.expected += arrival.expected;
            w.out_of_order += u64::from(arrival.out_of_order);
            w.duplicates += u64::from(arrival.duplicate);
            w.late += u64::from(arrival.late);
        }
        if let Some(s) = self.seconds.get_mut(k) {
            s.received += u64::from(arrival.received);
            s.expected += arrival.expected;
        }
        if !arrival.received {
            return;
        }
        if self.flows.len() <= slot {
            // Slots are handed out one by one: this grows by one at a time.
            self.flows.resize(slot + 1, FlowJitter::default());
        }
        let f = &mut self.flows[slot];
        if let Some((prev, j)) = f.last {
            if prev != k {
                // The flow's last value of an earlier second is that second's.
                if let Some(s) = self.seconds.get_mut(prev) {
                    s.jitter_sum_ns += j;
                    s.jitter_flows += 1;
                }
            }
        }
        f.last = Some((k, jitter_ns));
        if inside {
            f.window_last = Some(jitter_ns);
        }
    }

    /// Adds another worker's counts.
    pub(crate) fn merge(&mut self, o: &DatagramCounters) {
        self.active |= o.active;
        self.receiving |= o.receiving;
        self.window.merge(&o.window);
        if self.seconds.len() < o.seconds.len() {
            self.seconds
                .resize(o.seconds.len(), SecondDatagrams::default());
        }
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.add(b);
        }
        self.flows.extend_from_slice(&o.flows);
    }

    /// Second `k`'s datagrams, when this side received a UDP stream.
    pub(crate) fn second(&self, k: usize) -> Option<SecondDatagrams> {
        if !self.receiving {
            return None;
        }
        let mut s = self.seconds.get(k).copied().unwrap_or_default();
        for f in &self.flows {
            if let Some((last, j)) = f.last {
                if last == k {
                    s.jitter_sum_ns += j;
                    s.jitter_flows += 1;
                }
            }
        }
        Some(s)
    }

    /// The window's counts, when a UDP stream counted here.
    pub(crate) fn report(&self) -> Option<DatagramCounts> {
        if !self.active {
            return None;
        }
        let mut w = self.window;
        let last: Vec<f64> = self.flows.iter().filter_map(|f| f.window_last).collect();
        w.jitter_flows = u32::try_from(last.len()).unwrap_or(u32::MAX);
        w.jitter_us =
            (!last.is_empty()).then(|| last.iter().sum::<f64>() / last.len() as f64 / 1e3);
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(expected: u64) -> Arrival {
        Arrival {
            expected,
            received: true,
            ..Arrival::default()
        }
    }

    /// Second `k`'s received, expected and jitter (µs).
    fn at(c: &DatagramCounters, k: usize) -> Option<(u64, u64, Option<f64>)> {
        c.second(k).map(|s| (s.received, s.expected, s.jitter_us()))
    }

    #[test]
    fn seconds_and_window_add_up() {
        let mut c = DatagramCounters::default();
        // A second of warm-up, then three of the window.
        c.set_seconds(4);
        assert_eq!(c.report(), None, "nothing of a UDP stream yet");
        assert_eq!(c.second(1), None);
        // Flow 0: second 1 with jitter 1 µs then 3 µs; second 3, 5 µs (one lost before it).
        c.received(0, &new(1), 1000.0, Some(1), true);
        c.received(0, &new(1), 3000.0, Some(1), true);
        c.received(0, &new(2), 5000.0, Some(3), true);
        // Flow 1: one in the warm-up, second 1 at 7 µs; a duplicate in second 2.
        c.received(1, &new(1), 9000.0, Some(0), false);
        c.received(1, &new(1), 7000.0, Some(1), true);
        let dup = Arrival {
            duplicate: true,
            ..Arrival::default()
        };
        c.received(1, &dup, 7000.0, Some(2), true);
        // Flow 2: only in the warm-up (its jitter is in no figure of the window).
        c.received(2, &new(3), 40_000.0, Some(0), false);
        c.sent(true, 1);
        c.sent(false, 1);
        assert_eq!(
            at(&c, 0),
            Some((2, 4, Some(24.5))),
            "the warm-up's, for display: flows 1 and 2"
        );
        assert_eq!(
            at(&c, 1),
            Some((3, 3, Some(5.0))),
            "flow 0 at 3, flow 1 at 7"
        );
        assert_eq!(at(&c, 2), Some((0, 0, None)));
        assert_eq!(at(&c, 3), Some((1, 2, Some(5.0))));
        assert_eq!(c.second(3).unwrap().lost(), 1);
        let r = c.report().unwrap();
        assert_eq!(
            (r.sent, r.received, r.expected, r.duplicates, r.lost()),
            (1, 4, 5, 1, 1)
        );
        assert_eq!(r.jitter_us, Some(6.0), "flows at 5 and 7 µs");
        assert_eq!(r.jitter_flows, 2);
        // Merged with a worker whose one flow is at 12 µs.
        let mut o = DatagramCounters::default();
        o.set_seconds(4);
        o.received(0, &new(1), 12_000.0, Some(3), true);
        c.merge(&o);
        let r = c.report().unwrap();
        assert_eq!(r.jitter_us, Some(8.0));
        assert_eq!(at(&c, 3), Some((2, 3, Some(8.5))));
    }

    #[test]
    fn a_sender_reports_what_it_sent_only() {
        let mut c = DatagramCounters::default();
        c.set_seconds(1);
        c.sent(true, 1);
        let r = c.report().unwrap();
        assert_eq!((r.sent, r.received, r.jitter_us), (1, 0, None));
        assert_eq!(c.second(0), None, "its intervals say nothing of datagrams");
        let mut idle = DatagramCounters::default();
        idle.activate();
        assert_eq!(idle.report().unwrap(), DatagramCounts::default());
    }

    #[test]
    fn seconds_add_up_their_loss_and_flows() {
        let mut a = SecondDatagrams {
            received: 9,
            expected: 10,
            jitter_sum_ns: 2000.0,
            jitter_flows: 1,
        };
        a.add(&SecondDatagrams {
            received: 5,
            expected: 4,
            jitter_sum_ns: 4000.0,
            jitter_flows: 1,
        });
        assert_eq!((a.received, a.expected, a.lost()), (14, 14, 0));
        assert_eq!(a.jitter_us(), Some(3.0));
        let late = SecondDatagrams {
            received: 3,
            expected: 1,
            ..SecondDatagrams::default()
        };
        assert_eq!(late.lost(), 0, "late arrivals never make a gain");
        assert_eq!(late.jitter_us(), None);
    }
}
