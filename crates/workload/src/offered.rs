//! Open-loop load: transactions offered at a rate, over all users, at times
//! a schedule sets, whatever the answers do. A closed-loop user sends its
//! next request only when the last answer came back, so a server that
//! stalls slows its client down and the stall is never timed (coordinated
//! omission); an open-loop user sends on schedule, and each transaction is
//! timed from when it was due.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;

/// Transactions per second, over all users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TransactionsPerSecond(pub u64);

/// The most transactions per second a test may offer: far beyond what a
/// host sends, and far from the overflow of the schedules computed from it.
pub const MAX_OFFERED: TransactionsPerSecond = TransactionsPerSecond(1_000_000_000);

/// Transactions one connection may have sent and not yet had answered, at
/// most.
pub const MAX_OUTSTANDING: u32 = 1024;

/// How the arrivals of transactions are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential inter-arrival times: a Poisson process of the offered
    /// rate (Lancet's and mutilate's default: independent clients).
    #[default]
    Poisson,
    /// Evenly spaced, `1 / rate` apart over all users (wrk2's constant
    /// rate).
    Fixed,
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrival::Poisson => "poisson",
            Arrival::Fixed => "fixed",
        })
    }
}

impl std::str::FromStr for Arrival {
    type Err = WorkloadError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "poisson" => Ok(Arrival::Poisson),
            "fixed" => Ok(Arrival::Fixed),
            other => Err(WorkloadError::Offered(format!(
                "arrival '{other}': poisson or fixed"
            ))),
        }
    }
}

/// An open-loop test's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OfferedLoad {
    /// Transactions offered per second, over all users.
    pub rate: TransactionsPerSecond,
    /// How their arrivals are spaced.
    pub arrival: Arrival,
    /// Transactions a connection may have outstanding (sent, not yet
    /// answered); an arrival past them waits, counted late, and one that
    /// finds too many waiting is dropped, counted.
    pub max_outstanding: u32,
}

impl OfferedLoad {
    /// Poisson arrivals at `rate`, one outstanding per connection.
    pub fn new(rate: TransactionsPerSecond) -> Self {
        OfferedLoad {
            rate,
            arrival: Arrival::Poisson,
            max_outstanding: 1,
        }
    }

    /// Each of `users` users' share of the rate, per second.
    pub fn per_user(&self, users: u32) -> f64 {
        self.rate.0 as f64 / f64::from(users.max(1))
    }

    /// Whether the load can be asked for: a rate and an outstanding count
    /// within their bounds.
    pub fn check(&self) -> Result<(), WorkloadError> {
        if self.rate.0 == 0 || self.rate > MAX_OFFERED {
            return Err(WorkloadError::Offered(format!(
                "an offered rate must be between 1 and {} transactions per second, got {}",
                label(MAX_OFFERED),
                self.rate.0
            )));
        }
        if self.max_outstanding == 0 || self.max_outstanding > MAX_OUTSTANDING {
            return Err(WorkloadError::Offered(format!(
                "outstanding transactions per connection must be between 1 and {MAX_OUTSTANDING}, got {}",
                self.max_outstanding
            )));
        }
        Ok(())
    }
}

/// Reads an offered rate in transactions per second: a number with an
/// optional SI multiple (`50k` is 50,000; `1.5m` is 1,500,000; `k`, `m`
/// and `g` are powers of 1000), optionally followed by `/s` or `tps`.
pub fn parse_offered(s: &str) -> Result<TransactionsPerSecond, WorkloadError> {
    let bad = |why: &str| {
        WorkloadError::Offered(format!(
            "offered rate '{s}': {why} (transactions per second over all users: 50k is 50,000, 1.5m, 200)"
        ))
    };
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("tps"))
        .unwrap_or(&t);
    let (number, scale) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 1e3),
        Some((i, 'm')) => (&t[..i], 1e6),
        Some((i, 'g')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    if number.is_empty() {
        return Err(bad("no number"));
    }
    if !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad("not a positive number"));
    }
    let value: f64 = number.parse().map_err(|_| bad("not a number"))?;
    let rate = (value * scale).round();
    if !rate.is_finite() || rate < 1.0 {
        return Err(bad("at least 1 transaction per second"));
    }
    if rate > MAX_OFFERED.0 as f64 {
        return Err(bad("more than 1g per second"));
    }
    Ok(TransactionsPerSecond(rate as u64))
}

/// A rate as a test's name shows it: the largest SI multiple that is exact
/// (`50k`, `1500k`, `1m`, `750`).
pub fn label(rate: TransactionsPerSecond) -> String {
    for (unit, scale) in [("g", 1_000_000_000), ("m", 1_000_000), ("k", 1_000)] {
        if rate.0 >= scale && rate.0.is_multiple_of(scale) {
            return format!("{}{unit}", rate.0 / scale);
        }
    }
    rate.0.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_rates_read_with_si_multiples() {
        let r = |s: &str| parse_offered(s).map(|r| r.0);
        assert_eq!(r("50k").unwrap(), 50_000);
        assert_eq!(r("1.5m").unwrap(), 1_500_000);
        assert_eq!(r("200").unwrap(), 200);
        assert_eq!(r("10K/s").unwrap(), 10_000);
        assert_eq!(r("2ktps").unwrap(), 2_000);
        assert_eq!(r("1g").unwrap(), 1_000_000_000);
    }

    #[test]
    fn zero_negative_and_junk_rates_are_refused_saying_why() {
        for bad in [
            "0", "-5k", "", "k", "fast", "1.2.3k", "0.4", "2g", "nan", "1e3",
        ] {
            let e = parse_offered(bad).unwrap_err().to_string();
            assert!(e.contains("offered rate"), "{bad}: {e}");
            assert!(e.contains("50k is 50,000"), "{bad}: {e}");
        }
    }

    #[test]
    fn labels_are_exact_and_short() {
        assert_eq!(label(TransactionsPerSecond(50_000)), "50k");
        assert_eq!(label(TransactionsPerSecond(1_500_000)), "1500k");
        assert_eq!(label(TransactionsPerSecond(2_000_000)), "2m");
        assert_eq!(label(TransactionsPerSecond(750)), "750");
        assert_eq!(label(TransactionsPerSecond(1_001)), "1001");
    }

    #[test]
    fn only_request_response_on_persistent_connections_takes_a_load_and_its_name_says_it() {
        use crate::{Protocol, TestSpec};
        use std::time::Duration;
        let spec = |w: &str, p: Protocol| {
            let mut s = TestSpec::new(w.parse().unwrap(), p, 8, Duration::from_secs(5));
            s.offered = Some(OfferedLoad::new(TransactionsPerSecond(50_000)));
            s
        };
        assert!(spec("rr1c-1x1", Protocol::Tcp).validate().is_ok());
        assert!(spec("mix:1x1*1,200x8k*1", Protocol::Unix)
            .validate()
            .is_ok());
        assert!(spec("rr:200x1000", Protocol::Udp).validate().is_ok());
        for w in ["str-readx30k", "crr:1x1"] {
            let e = spec(w, Protocol::Tcp).validate().unwrap_err().to_string();
            assert!(
                e.contains("request/response on persistent connections"),
                "{e}"
            );
        }
        assert_eq!(spec("rr1c-1x1", Protocol::Tcp).name(), "rr1c-1x1--8--50k/s");
        assert_eq!(
            spec("rr1c-1x1", Protocol::Unix).name(),
            "rr1c-1x1--8--unix--50k/s"
        );
        // Closed loop keeps its name and its wire form.
        let closed = TestSpec::new(
            "rr1c-1x1".parse().unwrap(),
            Protocol::Tcp,
            8,
            Duration::from_secs(5),
        );
        assert_eq!(closed.name(), "rr1c-1x1--8");
        assert!(!serde_json::to_string(&closed).unwrap().contains("offered"));
    }

    #[test]
    fn a_load_is_checked_and_shared_over_the_users() {
        let mut l = OfferedLoad::new(TransactionsPerSecond(10_000));
        assert!(l.check().is_ok());
        assert_eq!(l.per_user(4), 2500.0);
        l.max_outstanding = 0;
        assert!(l
            .check()
            .unwrap_err()
            .to_string()
            .contains("between 1 and 1024"));
        l.max_outstanding = 8;
        l.rate = TransactionsPerSecond(0);
        assert!(l.check().is_err());
        assert_eq!("fixed".parse::<Arrival>().unwrap(), Arrival::Fixed);
        assert!("bursty".parse::<Arrival>().is_err());
    }
}
