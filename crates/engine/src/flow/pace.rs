//! The one pacer: keeps a sender at a rate of units per second (bits for a
//! UDP stream, linkperf's and the iperf3 server's alike; iterations for a
//! profile's paced transaction). The next unit is due when the units sent so
//! far, at the rate, reach the time since the pacer's origin. Integer
//! arithmetic throughout: exact at a terabit per second, with no rounding
//! that adds up per datagram. The time is passed in.

use std::time::{Duration, Instant};

use linkperf_workload::BitsPerSecond;

/// Most a linkperf UDP sender that fell behind its pace may catch up at
/// once: the time its pacer lets it send back to back. The worker's timers
/// wake it about once a millisecond, so a few milliseconds of datagrams are
/// due at each wake-up at any rate; a sender held up for longer (its CPU
/// taken, a full socket buffer) gives the rest up rather than bursting it
/// onto the path, and sends less than it was asked to (the results say so).
pub const MAX_CATCH_UP: Duration = Duration::from_millis(10);

/// A rate is kept in thousandths of a unit per second, so that a profile's
/// fractional rate (`rate=0.5`) paces exactly too.
const MILLI: u128 = 1000;
const NANOS: u128 = 1_000_000_000;

/// A sender's pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    /// Units per second, times [`MILLI`] (at least 1).
    rate: u128,
    origin: Instant,
    sent: u128,
    /// How far behind its pace a sender may fall and still catch up; `None`:
    /// however far (iperf3's server bursts to catch up, as iperf3 does).
    catch_up: Option<Duration>,
}

impl Pacer {
    /// A pacer of `per_second` units from `now` (a rate of 0 paces as
    /// slowly as it can, one thousandth of a unit per second), catching up
    /// at most `catch_up` of lag.
    pub fn new(per_second: u64, now: Instant, catch_up: Option<Duration>) -> Self {
        Pacer {
            rate: (u128::from(per_second) * MILLI).max(1),
            origin: now,
            sent: 0,
            catch_up,
        }
    }

    /// A pacer of `rate` bits per second from `now` for linkperf's UDP
    /// streams: a sender further behind than [`MAX_CATCH_UP`] gives the rest
    /// of its lag up. Count what goes with [`Pacer::sent_bytes`].
    pub fn bits(rate: BitsPerSecond, now: Instant) -> Self {
        Pacer::new(rate.0, now, Some(MAX_CATCH_UP))
    }

    /// A pacer of `per_second` units (a fraction allowed; at least a
    /// thousandth) from `now`, catching up however far behind: a profile's
    /// transaction paced at so many iterations per second.
    pub fn per_second(per_second: f64, now: Instant) -> Self {
        let milli = (per_second * MILLI as f64).round();
        let rate = if milli.is_finite() && milli >= 1.0 {
            milli as u128
        } else {
            1
        };
        Pacer {
            rate,
            origin: now,
            sent: 0,
            catch_up: None,
        }
    }

    /// When the unit after those sent is due.
    pub fn due(&self) -> Instant {
        let ns = self.sent.saturating_mul(NANOS * MILLI) / self.rate;
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or(self.origin + Duration::from_secs(86_400 * 365))
    }

    /// Whether the next unit may go at `now`. A sender further behind its
    /// pace than its catch-up allows gives up the rest of its lag.
    pub fn may_send(&mut self, now: Instant) -> bool {
        let due = self.due();
        if due > now {
            return false;
        }
        if let Some(most) = self.catch_up {
            if now.saturating_duration_since(due) > most {
                self.origin = now - most;
                self.sent = 0;
            }
        }
        true
    }

    /// `n` units went.
    pub fn sent(&mut self, n: u64) {
        self.sent += u128::from(n);
    }

    /// `n` bytes went (a pacer of bits).
    pub fn sent_bytes(&mut self, n: u64) {
        self.sent += u128::from(n) * 8;
    }

    /// How many items of `each` units are due at `now`, at most `max`
    /// (after [`Pacer::may_send`]'s catch-up limit).
    pub fn due_now(&mut self, now: Instant, each: u64, max: u64) -> u64 {
        if !self.may_send(now) {
            return 0;
        }
        let elapsed = now.saturating_duration_since(self.origin).as_nanos();
        let allowed = elapsed.saturating_mul(self.rate) / (NANOS * MILLI);
        let each = u128::from(each).max(1);
        let due = allowed.saturating_sub(self.sent) / each + 1;
        u64::try_from(due).unwrap_or(u64::MAX).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_keeps_the_rate() {
        let t0 = Instant::now();
        // 8 Mbit/s, 1000-byte datagrams: one every millisecond.
        let mut p = Pacer::bits(BitsPerSecond(8_000_000), t0);
        assert!(p.may_send(t0));
        p.sent_bytes(1000);
        assert_eq!(p.due(), t0 + Duration::from_millis(1));
        assert!(!p.may_send(t0 + Duration::from_micros(999)));
        assert!(p.may_send(t0 + Duration::from_millis(1)));
        p.sent_bytes(1000);
        // A wake-up 3.5 ms late sends what is due back to back.
        let now = t0 + Duration::from_micros(5500);
        let mut n = 0;
        while p.may_send(now) {
            p.sent_bytes(1000);
            n += 1;
        }
        assert_eq!(n, 4, "datagrams due at 2, 3, 4 and 5 ms");
        assert_eq!(p.due(), t0 + Duration::from_millis(6));
    }

    #[test]
    fn the_pacer_counts_what_is_due() {
        let t0 = Instant::now();
        let mut p = Pacer::bits(BitsPerSecond(8_000_000), t0);
        assert_eq!(p.due_now(t0, 8000, 64), 1);
        p.sent_bytes(1000);
        assert_eq!(p.due_now(t0 + Duration::from_micros(999), 8000, 64), 0);
        assert_eq!(p.due_now(t0 + Duration::from_micros(3500), 8000, 64), 3);
        assert_eq!(p.due_now(t0 + Duration::from_micros(3500), 8000, 2), 2);
        // Far behind: at most the catch-up's worth.
        assert_eq!(p.due_now(t0 + Duration::from_secs(1), 8000, 64), 11);
    }

    #[test]
    fn a_pacer_far_behind_gives_the_lag_up() {
        let t0 = Instant::now();
        let mut p = Pacer::bits(BitsPerSecond(8_000_000), t0);
        p.sent_bytes(1000);
        // Held up for a second: at most MAX_CATCH_UP of datagrams go at once.
        let now = t0 + Duration::from_secs(1);
        let mut n = 0;
        while p.may_send(now) {
            p.sent_bytes(1000);
            n += 1;
        }
        assert_eq!(n, 11, "10 ms at one per millisecond, and the one due now");
        assert_eq!(p.due(), now + Duration::from_millis(1));
    }

    #[test]
    fn a_pacer_without_a_catch_up_limit_bursts_its_whole_lag() {
        let t0 = Instant::now();
        // iperf3's server: 1 MB/s, 1000-byte blocks.
        let mut p = Pacer::new(8_000_000, t0, None);
        assert!(p.may_send(t0), "the first block goes at once");
        p.sent_bytes(1000);
        let now = t0 + Duration::from_secs(1);
        let mut n = 0;
        while p.may_send(now) {
            p.sent_bytes(1000);
            n += 1;
        }
        assert_eq!(n, 1000, "a second late: the second's blocks, back to back");
        let mut p = Pacer::new(8_000_000, t0, None);
        p.sent_bytes(100_000);
        assert!(!p.may_send(t0 + Duration::from_millis(50)));
        assert!(p.may_send(t0 + Duration::from_millis(101)));
        assert_eq!(p.due(), t0 + Duration::from_millis(100));
    }

    #[test]
    fn the_pacer_is_exact_at_a_terabit() {
        let t0 = Instant::now();
        let mut p = Pacer::bits(BitsPerSecond(1_000_000_000_000), t0);
        for _ in 0..1_000_000 {
            p.sent_bytes(1400);
        }
        // 1e6 × 11200 bits at 1e12 bit/s: 11.2 ms, without rounding per datagram.
        assert_eq!(p.due(), t0 + Duration::from_micros(11_200));
    }

    #[test]
    fn a_fractional_rate_of_iterations_is_kept_exactly() {
        let t0 = Instant::now();
        let mut p = Pacer::per_second(20.0, t0);
        for i in 0..10u64 {
            assert_eq!(p.due(), t0 + Duration::from_millis(50 * i));
            p.sent(1);
        }
        let mut half = Pacer::per_second(0.5, t0);
        half.sent(3);
        assert_eq!(half.due(), t0 + Duration::from_secs(6));
        // Nothing at all, or nonsense: as slowly as it can, never a panic.
        assert_eq!(Pacer::per_second(0.0, t0).due(), t0);
        let mut never = Pacer::per_second(f64::NAN, t0);
        never.sent(1);
        assert_eq!(never.due(), t0 + Duration::from_secs(1000));
    }
}
