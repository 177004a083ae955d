//! One second of traffic: the one type every per-second figure is made of.
//!
//! A worker counts a second ([`Interval`]); the same value is a side's
//! report's `intervals` (serialised: its counts), a live second handed to
//! the progress line and the JSON-lines stream (with its warm-up mark,
//! errors, retransmits and transaction times), and a run's per-second
//! sample. The rates and summaries shown beside it are derived from it where
//! they are written (`linkperf-results`), never kept beside it.

use serde::{Deserialize, Serialize};

use crate::LatencySummary;

/// Transaction times that add up when seconds do (the histogram a worker
/// records into, `linkperf_metrics::LatencyRecorder`).
pub trait Latencies: Clone {
    /// Adds `other`'s times to these.
    fn merge_times(&mut self, other: &Self);
}

/// The flows' interarrival jitter (RFC 3550) in one interval, as counted:
/// each receiving flow's at its last datagram of the interval, summed, and
/// how many flows that is. Kept so that the same second of several workers
/// (or sides) adds up to exactly the mean one worker of them all would have
/// counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JitterSum {
    /// The flows' jitters summed, ns.
    pub ns: f64,
    /// Flows in `ns`.
    pub flows: u32,
}

impl JitterSum {
    /// The mean over the flows, µs; `None` when no flow received.
    pub fn mean_us(&self) -> Option<f64> {
        (self.flows > 0).then(|| self.ns / f64::from(self.flows) / 1e3)
    }
}

/// One second of a side's traffic (the warm-up's last, the window's last or
/// the second a stopped test ended in may be shorter), as its workers
/// counted it. Serialised (a side's report's `intervals`) it is its counts:
/// `start_s`, `length_s`, `tx_bytes`, `rx_bytes`, `transactions`, and a UDP
/// stream's `datagrams`, `expected`, `jitter_us`; the rest is what the live
/// seconds carry (`#[serde(skip)]`: absent from documents, default when
/// read). `L` is the form of its transaction times: a
/// [`Latencies`] histogram while seconds are added up, a [`LatencySummary`]
/// once they are written.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval<L = LatencySummary> {
    /// Start of the interval, seconds since the measurement window opened;
    /// negative in the warm-up.
    pub start_s: f64,
    /// Length of the interval in seconds (the last one may be shorter).
    pub length_s: f64,
    /// A second of the warm-up, in no figure of the run (live seconds only).
    #[serde(skip)]
    pub warmup: bool,
    /// Payload bytes written by this side.
    pub tx_bytes: u64,
    /// Payload bytes read by this side.
    pub rx_bytes: u64,
    /// Transactions completed (messages, for streams).
    pub transactions: u64,
    /// Failed or lost transactions (live seconds only).
    #[serde(skip)]
    pub errors: u64,
    /// TCP segments retransmitted by the side's connections, read when the
    /// second was handed over; `None` when none was read (UDP, Unix sockets,
    /// or a worker that handed over several seconds at once and read them
    /// for the last one). Live seconds only.
    #[serde(skip)]
    pub retransmits: Option<u64>,
    /// UDP streams: datagrams this side received in the interval (new ones:
    /// no duplicates, none too late to tell). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<u64>,
    /// UDP streams: sequence numbers the interval's arrivals accounted for
    /// (RFC 3550's "expected"); `expected − datagrams` were lost, net of late
    /// arrivals of earlier ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u64>,
    /// UDP streams: the flows' interarrival jitter at their last datagram of
    /// the interval, averaged over the flows that received one, µs (the mean
    /// of `jitter_sum` where it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_us: Option<f64>,
    /// What `jitter_us` is the mean of, where this interval was counted
    /// (not read back from a document): seconds add up by it.
    #[serde(skip)]
    pub jitter_sum: Option<JitterSum>,
    /// The second's transaction times, where the side records them (live
    /// seconds only).
    #[serde(skip)]
    pub latency: Option<L>,
}

impl<L> Default for Interval<L> {
    fn default() -> Self {
        Interval {
            start_s: 0.0,
            length_s: 0.0,
            warmup: false,
            tx_bytes: 0,
            rx_bytes: 0,
            transactions: 0,
            errors: 0,
            retransmits: None,
            datagrams: None,
            expected: None,
            jitter_us: None,
            jitter_sum: None,
            latency: None,
        }
    }
}

/// `a + b` where either is there.
fn add_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

impl<L> Interval<L> {
    /// A UDP stream's datagrams received in the interval, `expected` of them
    /// and the flows' jitter summed: all `None` where none were counted.
    pub fn set_datagrams(&mut self, received: u64, expected: u64, jitter: JitterSum) {
        self.datagrams = Some(received);
        self.expected = Some(expected);
        self.jitter_us = jitter.mean_us();
        self.jitter_sum = Some(jitter);
    }

    /// Datagrams lost on their way to this side, `expected − datagrams`
    /// (0 when late arrivals of earlier ones outnumber the losses); `None`
    /// where it counted none.
    pub fn lost(&self) -> Option<u64> {
        self.expected
            .map(|e| e.saturating_sub(self.datagrams.unwrap_or(0)))
    }

    /// Adds `other`'s counts to these (not its transaction times): the same
    /// second of another worker or side, or a following second (the caller
    /// then extends `length_s`).
    pub fn add_counts<M>(&mut self, other: &Interval<M>) {
        self.tx_bytes += other.tx_bytes;
        self.rx_bytes += other.rx_bytes;
        self.transactions += other.transactions;
        self.errors += other.errors;
        self.retransmits = add_some(self.retransmits, other.retransmits);
        self.datagrams = add_some(self.datagrams, other.datagrams);
        self.expected = add_some(self.expected, other.expected);
        match (self.jitter_sum, other.jitter_sum) {
            (Some(a), Some(b)) => {
                let sum = JitterSum {
                    ns: a.ns + b.ns,
                    flows: a.flows + b.flows,
                };
                self.jitter_us = sum.mean_us();
                self.jitter_sum = Some(sum);
            }
            (_, None) if other.jitter_us.is_none() => {}
            (None, Some(b)) if self.jitter_us.is_none() => {
                self.jitter_us = other.jitter_us;
                self.jitter_sum = Some(b);
            }
            _ => {
                // Read back from documents: the flows are not known, each
                // interval weighs the same.
                self.jitter_us = match (self.jitter_us, other.jitter_us) {
                    (Some(a), Some(b)) => Some((a + b) / 2.0),
                    (a, b) => a.or(b),
                };
                self.jitter_sum = None;
            }
        }
    }

    /// The same interval with its transaction times in another form (a
    /// histogram's summary, to be written).
    pub fn with_latency<M>(self, latency: Option<M>) -> Interval<M> {
        Interval {
            start_s: self.start_s,
            length_s: self.length_s,
            warmup: self.warmup,
            tx_bytes: self.tx_bytes,
            rx_bytes: self.rx_bytes,
            transactions: self.transactions,
            errors: self.errors,
            retransmits: self.retransmits,
            datagrams: self.datagrams,
            expected: self.expected,
            jitter_us: self.jitter_us,
            jitter_sum: self.jitter_sum,
            latency,
        }
    }
}

impl<L: Latencies> Interval<L> {
    /// Adds `other` to this: its counts and its transaction times.
    pub fn add(&mut self, other: &Interval<L>) {
        self.add_counts(other);
        match (&mut self.latency, &other.latency) {
            (Some(a), Some(b)) => a.merge_times(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialised_it_is_its_counts_only() {
        let mut i: Interval = Interval {
            start_s: -0.5,
            length_s: 0.5,
            warmup: true,
            tx_bytes: 1,
            rx_bytes: 2,
            transactions: 3,
            errors: 4,
            retransmits: Some(5),
            latency: Some(LatencySummary::default()),
            ..Interval::default()
        };
        let v = serde_json::to_string(&i).unwrap();
        assert_eq!(
            v,
            r#"{"start_s":-0.5,"length_s":0.5,"tx_bytes":1,"rx_bytes":2,"transactions":3}"#
        );
        i.set_datagrams(
            9,
            10,
            JitterSum {
                ns: 3000.0,
                flows: 2,
            },
        );
        let v = serde_json::to_string(&i).unwrap();
        assert!(
            v.ends_with(r#""transactions":3,"datagrams":9,"expected":10,"jitter_us":1.5}"#),
            "{v}"
        );
        let back: Interval = serde_json::from_str(&v).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), v);
        assert_eq!(
            (back.errors, back.warmup, back.jitter_sum),
            (0, false, None)
        );
    }

    #[test]
    fn seconds_add_up_exactly_by_their_jitter_sums() {
        let mut a: Interval = Interval::default();
        let mut b: Interval = Interval::default();
        a.set_datagrams(1, 2, JitterSum { ns: 0.1, flows: 1 });
        b.set_datagrams(3, 3, JitterSum { ns: 0.2, flows: 2 });
        a.add_counts(&b);
        assert_eq!(
            (a.datagrams, a.expected, a.lost()),
            (Some(4), Some(5), Some(1))
        );
        assert_eq!(a.jitter_us, Some((0.1 + 0.2) / 3.0 / 1e3));
        // A second without datagrams adds none.
        a.add_counts(&Interval::<LatencySummary>::default());
        assert_eq!(
            a.jitter_sum,
            Some(JitterSum {
                ns: 0.1 + 0.2,
                flows: 3
            })
        );
        // No flow received: no jitter, the counts still there.
        let mut c: Interval = Interval::default();
        c.set_datagrams(0, 1, JitterSum::default());
        assert_eq!((c.jitter_us, c.lost()), (None, Some(1)));
    }
}
