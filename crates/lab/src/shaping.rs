//! Shaping a link to a rate with tbf (token bucket filter), one qdisc on the
//! egress of each end, so both directions are capped.
//!
//! Why tbf and these numbers (`docs/lab.md`, "Shaping"):
//!
//! - **tbf, not htb**: one rate per device and no classes to classify into; tbf
//!   is the smallest qdisc that caps a device's egress.
//! - **burst** = the larger of one millisecond at the rate ([`BURST_TIME`]) and
//!   [`MIN_BURST`] (128 KiB). tbf refills its bucket from a high-resolution
//!   timer, so the bucket only needs to cover the timer's slack (well under a
//!   millisecond) and the largest packet. veth hands tbf GSO packets of up to
//!   64 KiB plus headers; a bucket smaller than one of them would make tbf cut
//!   every such packet into MTU-sized segments (extra CPU that a real NIC's
//!   TSO would not cost), hence twice that as the floor. At 1 Gbit/s the floor
//!   decides (128 KiB ≈ 1.05 ms of line rate), at 10 Gbit/s the millisecond
//!   (1.25 MB). A full bucket lets at most that much through above the rate,
//!   once: 0.2% of a 0.5 s window at either rate.
//! - **latency** = 5 ms ([`DEFAULT_LATENCY`]): the queue holds rate × 5 ms
//!   beyond the burst. Enough to keep the link busy while TCP's window
//!   recovers from a drop (the lab's base RTT is tens of microseconds), small
//!   enough that a request/response test sharing the link with a stream sees
//!   milliseconds of queueing, not the seconds of an unbounded queue.
//!
//! tbf counts whole packets (headers included), so the payload throughput a
//! test measures stays a few percent under the rate.

use std::time::Duration;

use linkperf_workload::BitsPerSecond;

use crate::LinkConfig;

/// The bucket holds at least this much of the rate.
pub const BURST_TIME: Duration = Duration::from_millis(1);
/// Smallest bucket: two 64 KiB GSO packets.
pub const MIN_BURST: u64 = 128 * 1024;
/// Queue length, as time to drain it at the rate.
pub const DEFAULT_LATENCY: Duration = Duration::from_millis(5);

/// One tbf qdisc's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// The rate.
    pub rate: BitsPerSecond,
    /// Bucket size in bytes.
    pub burst: u64,
    /// Queue length as time at the rate.
    pub latency: Duration,
}

impl Tbf {
    /// The shaping of `config`, or `None` when it is unshaped.
    pub fn for_config(config: &LinkConfig) -> Option<Tbf> {
        let rate = config.rate?;
        Some(Tbf {
            rate,
            burst: config.burst.map_or_else(|| default_burst(rate), |b| b.0),
            latency: config.latency.unwrap_or(DEFAULT_LATENCY),
        })
    }

    /// The arguments after `tc -n NS`: `qdisc add dev DEV root tbf rate … burst … latency …`.
    pub fn qdisc_args(&self, device: &str) -> String {
        format!(
            "qdisc add dev {device} root tbf rate {} burst {} latency {}",
            self.rate,
            self.burst,
            tc_time(self.latency)
        )
    }
}

/// [`BURST_TIME`] at `rate`, at least [`MIN_BURST`].
pub fn default_burst(rate: BitsPerSecond) -> u64 {
    let at_rate = (rate.bytes_per_s() as u128 * BURST_TIME.as_micros() / 1_000_000) as u64;
    at_rate.max(MIN_BURST)
}

/// A time as tc reads it: `5ms`, `500us`.
fn tc_time(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    #[test]
    fn burst_is_a_millisecond_at_the_rate_with_a_floor() {
        assert_eq!(default_burst(BitsPerSecond(10_000_000_000)), 1_250_000);
        assert_eq!(default_burst(BitsPerSecond(1_000_000_000)), MIN_BURST);
        assert_eq!(default_burst(BitsPerSecond(100_000_000)), MIN_BURST);
        assert_eq!(default_burst(BitsPerSecond(40_000_000_000)), 5_000_000);
    }

    #[test]
    fn qdisc_arguments() {
        let c = Catalog::builtin();
        assert_eq!(Tbf::for_config(c.get("veth").unwrap()), None);
        let t = Tbf::for_config(c.get("veth-10g").unwrap()).unwrap();
        assert_eq!(
            t.qdisc_args("lp-s1"),
            "qdisc add dev lp-s1 root tbf rate 10gbit burst 1250000 latency 5ms"
        );
        let custom = c
            .resolve("veth,rate=300mbit,burst=64k,latency=750us")
            .unwrap();
        assert_eq!(
            Tbf::for_config(&custom).unwrap().qdisc_args("x"),
            "qdisc add dev x root tbf rate 300mbit burst 65536 latency 750us"
        );
    }
}
