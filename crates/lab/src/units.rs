//! Units of a link: its rate in bits per second and its MTU in bytes.
//!
//! Rates follow `tc`'s convention: `kbit`, `mbit`, `gbit`, `tbit` are powers of
//! 1000 (`1gbit` = 10⁹ bit/s), so what the user writes is exactly what `tc`
//! receives.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::LabError;

/// A link rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitsPerSecond(pub u64);

/// Slowest rate accepted: below it `tc` rounds and TCP stalls.
pub const MIN_RATE: BitsPerSecond = BitsPerSecond(8_000);
/// Fastest rate accepted (`tc` takes 64-bit rates; nothing virtual goes faster).
pub const MAX_RATE: BitsPerSecond = BitsPerSecond(1_000_000_000_000);

const UNITS: [(&str, u64); 5] = [
    ("tbit", 1_000_000_000_000),
    ("gbit", 1_000_000_000),
    ("mbit", 1_000_000),
    ("kbit", 1_000),
    ("bit", 1),
];

impl BitsPerSecond {
    /// The rate in bytes per second.
    pub fn bytes_per_s(self) -> u64 {
        self.0 / 8
    }

    /// The rate as a float, for results documents.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}

impl fmt::Display for BitsPerSecond {
    /// The largest unit that shows the rate exactly: `10gbit`, `2500mbit`, `1234bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, scale) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}bit", self.0)
    }
}

impl FromStr for BitsPerSecond {
    type Err = LabError;

    /// `10gbit`, `1gbit`, `2.5gbit`, `500mbit`, `10g`, `100m` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, LabError> {
        let bad = |why: &str| {
            LabError::Option(format!(
                "rate '{s}': {why} (examples: 10gbit, 1gbit, 500mbit)"
            ))
        };
        let t = s.trim().to_ascii_lowercase();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(bad("no number"));
        }
        let scale = match unit {
            "" => return Err(bad("no unit")),
            "bit" => 1u64,
            "k" | "kbit" => 1_000,
            "m" | "mbit" => 1_000_000,
            "g" | "gbit" => 1_000_000_000,
            "t" | "tbit" => 1_000_000_000_000,
            _ => return Err(bad("unknown unit")),
        };
        let value: f64 = num.parse().map_err(|_| bad("not a number"))?;
        let bits = value * scale as f64;
        if !bits.is_finite() || bits.fract() != 0.0 {
            return Err(bad("not a whole number of bits per second"));
        }
        let rate = BitsPerSecond(bits as u64);
        if rate < MIN_RATE || rate > MAX_RATE {
            return Err(bad(&format!("must be between {MIN_RATE} and {MAX_RATE}")));
        }
        Ok(rate)
    }
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
            assert_eq!(
                s.parse::<BitsPerSecond>().unwrap(),
                BitsPerSecond(bits),
                "{s}"
            );
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
            let e = s.parse::<BitsPerSecond>().unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn rates_display_in_the_largest_exact_unit() {
        for (bits, s) in [
            (10_000_000_000, "10gbit"),
            (2_500_000_000, "2500mbit"),
            (1_500_000, "1500kbit"),
            (9_001, "9001bit"),
        ] {
            assert_eq!(BitsPerSecond(bits).to_string(), s);
            assert_eq!(s.parse::<BitsPerSecond>().unwrap(), BitsPerSecond(bits));
        }
        assert_eq!(BitsPerSecond(1_000_000_000).bytes_per_s(), 125_000_000);
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
