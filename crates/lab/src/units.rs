//! Units of a link: its rate (the workspace's [`BitsPerSecond`], with the
//! lab's rules) and its MTU in bytes.
//!
//! Rates follow `tc`'s convention: `kbit`, `mbit`, `gbit`, `tbit` are powers of
//! 1000 (`1gbit` = 10⁹ bit/s), so what the user writes is exactly what `tc`
//! receives.

use std::fmt;
use std::str::FromStr;

use linkperf_workload::BitsPerSecond;
use serde::{Deserialize, Serialize};

use crate::LabError;

/// Slowest rate accepted: below it `tc` rounds and TCP stalls.
pub const MIN_RATE: BitsPerSecond = BitsPerSecond(8_000);
/// Fastest rate accepted (`tc` takes 64-bit rates; nothing virtual goes faster).
pub const MAX_RATE: BitsPerSecond = BitsPerSecond(1_000_000_000_000);

/// A link's rate: `10gbit`, `1gbit`, `2.5gbit`, `500mbit`, `10g`, `100m`
/// ([`BitsPerSecond`]'s forms), with a unit (a bare number is refused, not
/// guessed) and between [`MIN_RATE`] and [`MAX_RATE`].
pub fn parse_rate(s: &str) -> Result<BitsPerSecond, LabError> {
    let bad = |why: &str| {
        LabError::Option(format!(
            "rate '{s}': {why} (examples: 10gbit, 1gbit, 500mbit)"
        ))
    };
    if s.trim().ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(bad("no unit"));
    }
    let rate = s
        .parse::<BitsPerSecond>()
        .map_err(|e| bad(&e.to_string()))?;
    if rate < MIN_RATE || rate > MAX_RATE {
        return Err(bad(&format!("must be between {MIN_RATE} and {MAX_RATE}")));
    }
    Ok(rate)
}

/// A link MTU in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Mtu(pub u32);

/// Smallest MTU IPv4 allows.
pub const MIN_MTU: Mtu = Mtu(68);
/// Largest MTU a veth takes.
pub const MAX_MTU: Mtu = Mtu(65_535);

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Mtu {
    type Err = LabError;

    fn from_str(s: &str) -> Result<Self, LabError> {
        let n: u32 = s.trim().parse().map_err(|_| {
            LabError::Option(format!("mtu '{s}': not a number of bytes (example: 9000)"))
        })?;
        Mtu::new(n)
    }
}

impl Mtu {
    /// An MTU within [`MIN_MTU`]..=[`MAX_MTU`].
    pub fn new(n: u32) -> Result<Mtu, LabError> {
        if !(MIN_MTU.0..=MAX_MTU.0).contains(&n) {
            return Err(LabError::Option(format!(
                "mtu {n}: must be between {MIN_MTU} and {MAX_MTU}"
            )));
        }
        Ok(Mtu(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_tc_units() {
        for (s, bits) in [
            ("10gbit", 10_000_000_000),
            ("1gbit", 1_000_000_000),
            ("1G", 1_000_000_000),
            ("2.5gbit", 2_500_000_000),
            ("500mbit", 500_000_000),
            ("100m", 100_000_000),
            ("64kbit", 64_000),
            ("1tbit", 1_000_000_000_000),
            ("9000bit", 9_000),
        ] {
            assert_eq!(parse_rate(s).unwrap(), BitsPerSecond(bits), "{s}");
        }
    }

    #[test]
    fn bad_rates_say_why() {
        for (s, why) in [
            ("", "no number"),
            ("gbit", "no number"),
            ("10", "no unit"),
            ("10gbps", "unknown unit"),
            ("1.2.3gbit", "not a number"),
            ("1.5bit", "whole number"),
            ("1bit", "between"),
            ("2tbit", "between"),
        ] {
            let e = parse_rate(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn mtus_are_checked() {
        assert_eq!("9000".parse::<Mtu>().unwrap(), Mtu(9000));
        assert!("67".parse::<Mtu>().is_err());
        assert!("65536".parse::<Mtu>().is_err());
        assert!("jumbo"
            .parse::<Mtu>()
            .unwrap_err()
            .to_string()
            .contains("example"));
    }
}
