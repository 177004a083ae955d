//! When a test's phases begin and end, on one side's clock.

use std::time::{Duration, Instant};

/// The phases of one test on one side: warmup from `start`, the measurement
/// window `[measure_from, measure_until)`, then the drain until `drain_until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Traffic begins.
    pub start: Instant,
    /// The measurement window opens (end of warmup).
    pub measure_from: Instant,
    /// The window closes; flows stop issuing new transactions.
    pub measure_until: Instant,
    /// Flows still open now are closed by force.
    pub drain_until: Instant,
}

/// Where a given instant falls in a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Before the window: traffic runs, nothing is counted but totals.
    Warmup,
    /// Inside the measurement window.
    Measuring,
    /// After the window: flows finish what they started and close.
    Draining,
    /// After the drain deadline.
    Over,
}

impl Schedule {
    /// A schedule starting at `start`.
    pub fn new(start: Instant, warmup: Duration, duration: Duration, drain: Duration) -> Self {
        let measure_from = start + warmup;
        let measure_until = measure_from + duration;
        Schedule {
            start,
            measure_from,
            measure_until,
            drain_until: measure_until + drain,
        }
    }

    /// The phase at `now`.
    pub fn phase(&self, now: Instant) -> Phase {
        if now < self.measure_from {
            Phase::Warmup
        } else if now < self.measure_until {
            Phase::Measuring
        } else if now < self.drain_until {
            Phase::Draining
        } else {
            Phase::Over
        }
    }

    /// Length of the measurement window.
    pub fn window(&self) -> Duration {
        self.measure_until - self.measure_from
    }

    /// Seconds the counts cover: the whole window, or, for a run cut short
    /// (`cut_short`), up to now and at most the window.
    pub fn measured_s(&self, cut_short: bool) -> f64 {
        let nominal = self.window().as_secs_f64();
        if cut_short {
            Instant::now()
                .saturating_duration_since(self.measure_from)
                .as_secs_f64()
                .min(nominal)
        } else {
            nominal
        }
    }

    /// The next phase boundary after `now`, if any.
    pub fn next_boundary(&self, now: Instant) -> Option<Instant> {
        [self.measure_from, self.measure_until, self.drain_until]
            .into_iter()
            .find(|t| *t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_in_order() {
        let t0 = Instant::now();
        let s = Schedule::new(
            t0,
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(3),
        );
        assert_eq!(s.phase(t0), Phase::Warmup);
        assert_eq!(s.phase(t0 + Duration::from_millis(1500)), Phase::Measuring);
        assert_eq!(s.phase(t0 + Duration::from_secs(3)), Phase::Draining);
        assert_eq!(s.phase(t0 + Duration::from_secs(6)), Phase::Over);
        assert_eq!(s.window(), Duration::from_secs(2));
        assert_eq!(s.next_boundary(t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(s.next_boundary(t0 + Duration::from_secs(7)), None);
    }
}
