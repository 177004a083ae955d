//! What a worker counts of a UDP stream's datagrams, beside its byte counts:
//! those it sent, and what its receivers' accounting said of those it
//! received ([`crate::udp_stream::SequenceRx`]), over the window and per
//! second, with each flow's jitter. Kept by [`crate::Counters`], which places
//! each count in the window's seconds.

use linkperf_metrics::DatagramCounts;

use crate::counters::FlowSlotId;
use crate::udp_stream::Arrival;

/// One second's datagrams.
#[derive(Debug, Clone, Copy, Default)]
struct Second {
    received: u64,
    expected: u64,
    /// Sum over the flows that received in this second of their jitter at
    /// their last datagram in it, and how many flows that is.
    jitter_sum_ns: f64,
    jitter_flows: u32,
}

/// A flow's jitter at its last datagram in the window, and that datagram's second.
#[derive(Debug, Clone, Copy, Default)]
struct FlowJitter {
    last: Option<(usize, f64)>,
}

/// A worker's datagram counts.
#[derive(Debug, Clone, Default)]
pub struct DatagramCounters {
    /// Whether a UDP stream counts here (its report then has a `udp` block).
    active: bool,
    /// Whether anything was received here (its intervals then say so).
    receiving: bool,
    window: DatagramCounts,
    seconds: Vec<Second>,
    flows: Vec<FlowJitter>,
}

impl DatagramCounters {
    /// Marks the counters as a UDP stream's, whether or not anything is counted.
    pub fn activate(&mut self) {
        self.active = true;
    }

    /// Room for a window of `seconds` seconds.
    pub(crate) fn set_seconds(&mut self, seconds: usize) {
        self.seconds = vec![Second::default(); seconds];
    }

    /// `n` datagrams were sent; `second` is their second of the window, if inside it.
    pub(crate) fn sent(&mut self, second: Option<usize>, n: u64) {
        self.active = true;
        if second.is_some() {
            self.window.sent += n;
        }
    }

    /// A datagram arrived for the flow in `slot`, as `arrival` says, its flow's
    /// jitter now `jitter_ns`; `second` is its second of the window, if inside it.
    pub(crate) fn received(
        &mut self,
        slot: FlowSlotId,
        arrival: &Arrival,
        jitter_ns: f64,
        second: Option<usize>,
    ) {
        self.active = true;
        self.receiving = true;
        let Some(k) = second else {
            return;
        };
        let w = &mut self.window;
        w.received += u64::from(arrival.received);
        w.expected += arrival.expected;
        w.out_of_order += u64::from(arrival.out_of_order);
        w.duplicates += u64::from(arrival.duplicate);
        w.late += u64::from(arrival.late);
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
    }

    /// Adds another worker's counts.
    pub(crate) fn merge(&mut self, o: &DatagramCounters) {
        self.active |= o.active;
        self.receiving |= o.receiving;
        self.window.merge(&o.window);
        if self.seconds.len() < o.seconds.len() {
            self.seconds.resize(o.seconds.len(), Second::default());
        }
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.received += b.received;
            a.expected += b.expected;
            a.jitter_sum_ns += b.jitter_sum_ns;
            a.jitter_flows += b.jitter_flows;
        }
        self.flows.extend_from_slice(&o.flows);
    }

    /// Second `k`'s datagrams received, expected and mean jitter (µs), when
    /// this side received a UDP stream.
    pub(crate) fn second(&self, k: usize) -> Option<(u64, u64, Option<f64>)> {
        if !self.receiving {
            return None;
        }
        let s = self.seconds.get(k).copied().unwrap_or_default();
        let (mut sum, mut n) = (s.jitter_sum_ns, s.jitter_flows);
        for f in &self.flows {
            if let Some((last, j)) = f.last {
                if last == k {
                    sum += j;
                    n += 1;
                }
            }
        }
        let jitter = (n > 0).then(|| sum / f64::from(n) / 1e3);
        Some((s.received, s.expected, jitter))
    }

    /// The window's counts, when a UDP stream counted here.
    pub(crate) fn report(&self) -> Option<DatagramCounts> {
        if !self.active {
            return None;
        }
        let mut w = self.window;
        let last: Vec<f64> = self
            .flows
            .iter()
            .filter_map(|f| f.last.map(|(_, j)| j))
            .collect();
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

    #[test]
    fn seconds_and_window_add_up() {
        let mut c = DatagramCounters::default();
        c.set_seconds(3);
        assert_eq!(c.report(), None, "nothing of a UDP stream yet");
        assert_eq!(c.second(0), None);
        // Flow 0: second 0 with jitter 1 µs then 3 µs; second 2, 5 µs (one lost before it).
        c.received(0, &new(1), 1000.0, Some(0));
        c.received(0, &new(1), 3000.0, Some(0));
        c.received(0, &new(2), 5000.0, Some(2));
        // Flow 1: second 0, 7 µs; a duplicate in second 1; one before the window.
        c.received(1, &new(1), 9000.0, None);
        c.received(1, &new(1), 7000.0, Some(0));
        let dup = Arrival {
            duplicate: true,
            ..Arrival::default()
        };
        c.received(1, &dup, 7000.0, Some(1));
        c.sent(Some(1), 1);
        c.sent(None, 1);
        assert_eq!(
            c.second(0),
            Some((3, 3, Some(5.0))),
            "flow 0 at 3, flow 1 at 7"
        );
        assert_eq!(c.second(1), Some((0, 0, None)));
        assert_eq!(c.second(2), Some((1, 2, Some(5.0))));
        let r = c.report().unwrap();
        assert_eq!(
            (r.sent, r.received, r.expected, r.duplicates, r.lost()),
            (1, 4, 5, 1, 1)
        );
        assert_eq!(r.jitter_us, Some(6.0), "flows at 5 and 7 µs");
        assert_eq!(r.jitter_flows, 2);
        // Merged with a worker whose one flow is at 12 µs.
        let mut o = DatagramCounters::default();
        o.set_seconds(3);
        o.received(0, &new(1), 12_000.0, Some(2));
        c.merge(&o);
        let r = c.report().unwrap();
        assert_eq!(r.jitter_us, Some(8.0));
        assert_eq!(c.second(2), Some((2, 3, Some(8.5))));
    }

    #[test]
    fn a_sender_reports_what_it_sent_only() {
        let mut c = DatagramCounters::default();
        c.set_seconds(1);
        c.sent(Some(0), 1);
        let r = c.report().unwrap();
        assert_eq!((r.sent, r.received, r.jitter_us), (1, 0, None));
        assert_eq!(c.second(0), None, "its intervals say nothing of datagrams");
        let mut idle = DatagramCounters::default();
        idle.activate();
        assert_eq!(idle.report().unwrap(), DatagramCounts::default());
    }
}
