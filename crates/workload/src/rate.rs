//! A UDP stream's pace: bits per second per user, written as iperf3's `-b`
//! takes it (`100m` is 100,000,000 bit/s: rates use powers of 1000, sizes
//! keep k = 1024). `0` is no pace: as fast as the socket takes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;

/// A sending rate in bits per second (payload bits, per user); 0 is no pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(pub u64);

/// Fastest pace a user may ask for: 1 Tbit/s (nothing carries more, and the
/// time between datagrams stays above a picosecond).
pub const MAX_RATE: BitRate = BitRate(1_000_000_000_000);

/// The pace of a UDP stream when none is given: 1 Mbit/s per user, as
/// iperf3's `-u` without `-b`.
pub const DEFAULT_UDP_RATE: BitRate = BitRate(1_000_000);

const UNITS: [(char, u64); 4] = [
    ('t', 1_000_000_000_000),
    ('g', 1_000_000_000),
    ('m', 1_000_000),
    ('k', 1_000),
];

impl BitRate {
    /// True for `0`: no pace, as fast as the socket takes.
    pub fn is_unpaced(self) -> bool {
        self.0 == 0
    }

    /// The rate as a float, bits per second.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}

impl fmt::Display for BitRate {
    /// The largest SI unit that shows the rate exactly: `100m`, `2500k`,
    /// `1g`, `9001`; `0` for no pace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, scale) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl FromStr for BitRate {
    type Err = WorkloadError;

    /// `100m`, `100M`, `1.5g`, `64k`, `250000`, `100mbit`, `0`
    /// (case-insensitive; k, m, g, t are powers of 1000).
    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        let bad = |why: &str| {
            WorkloadError::Rate(format!(
                "rate '{s}': {why} (bits per second: 100m is 100,000,000 bit/s, 1g, 500k, 0 for as fast as the socket takes)"
            ))
        };
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_suffix("bit").unwrap_or(&t);
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(bad("no number"));
        }
        let scale = match unit {
            "" => 1u64,
            u => match UNITS
                .iter()
                .find(|(c, _)| u.len() == 1 && u.starts_with(*c))
            {
                Some((_, scale)) => *scale,
                None => return Err(bad("unknown unit")),
            },
        };
        if num.bytes().filter(|&b| b == b'.').count() > 1 || num == "." {
            return Err(bad("not a number"));
        }
        let value: f64 = num.parse().map_err(|_| bad("not a number"))?;
        let bits = value * scale as f64;
        if !bits.is_finite() || bits > MAX_RATE.0 as f64 {
            return Err(bad("faster than 1 Tbit/s per user"));
        }
        if bits.fract() != 0.0 {
            return Err(bad("not a whole number of bits per second"));
        }
        Ok(BitRate(bits as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_iperf3_reads_b() {
        for (s, bits) in [
            ("100m", 100_000_000),
            ("100M", 100_000_000),
            ("1g", 1_000_000_000),
            ("1.5G", 1_500_000_000),
            ("64k", 64_000),
            ("250000", 250_000),
            ("100mbit", 100_000_000),
            ("1t", 1_000_000_000_000),
            ("0", 0),
            (" 10m ", 10_000_000),
        ] {
            assert_eq!(s.parse::<BitRate>().unwrap(), BitRate(bits), "{s}");
        }
        assert!("0".parse::<BitRate>().unwrap().is_unpaced());
    }

    #[test]
    fn bad_rates_say_why() {
        for (s, why) in [
            ("", "no number"),
            ("m", "no number"),
            ("10mbps", "unknown unit"),
            ("10x", "unknown unit"),
            ("1.2.3m", "not a number"),
            ("1.5", "whole number"),
            ("2t", "faster than"),
            ("-1m", "no number"),
        ] {
            let e = s.parse::<BitRate>().unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.contains("100m is 100,000,000"), "{e}");
        }
    }

    #[test]
    fn rates_display_compactly_and_read_back() {
        for (bits, s) in [
            (100_000_000, "100m"),
            (2_500_000, "2500k"),
            (1_000_000_000, "1g"),
            (9_001, "9001"),
            (0, "0"),
        ] {
            assert_eq!(BitRate(bits).to_string(), s);
            assert_eq!(s.parse::<BitRate>().unwrap(), BitRate(bits));
        }
    }
}
