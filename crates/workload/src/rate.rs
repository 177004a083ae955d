//! Rates in bits per second: the rate a link is shaped to, the capacity a
//! report judges saturation against.
//!
//! The multiples are powers of 1000 (`1gbit` = 10⁹ bit/s), as tc and link
//! speeds count them, so what the user writes is exactly what tc receives.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A rate in whole bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitsPerSecond(pub u64);

/// The multiples, largest first, as tc writes them.
const UNITS: [(&str, u64); 5] = [
    ("tbit", 1_000_000_000_000),
    ("gbit", 1_000_000_000),
    ("mbit", 1_000_000),
    ("kbit", 1_000),
    ("bit", 1),
];

/// What may follow the number and its multiple: nothing (bits), or bits
/// written out.
const UNIT_WORDS: [&str; 5] = ["", "bit", "bits", "bit/s", "bits/s"];

impl BitsPerSecond {
    /// The rate in bytes per second.
    pub fn bytes_per_s(self) -> u64 {
        self.0 / 8
    }

    /// The rate as a float, for arithmetic with measured rates.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }

    /// The rate of `bits` bits per second from a float (a results file's
    /// number), to the nearest whole bit; `None` when it is not a number, is
    /// negative, or is beyond what a `u64` holds.
    pub fn from_f64(bits: f64) -> Option<Self> {
        let rounded = bits.round();
        // 2^64 is exact as an f64; anything at or above it does not fit.
        (0.0..18_446_744_073_709_551_616.0)
            .contains(&rounded)
            .then_some(BitsPerSecond(rounded as u64))
    }
}

impl fmt::Display for BitsPerSecond {
    /// The largest multiple that shows the rate exactly, as tc reads it:
    /// `10gbit`, `2500mbit`, `1234bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, scale) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}bit", self.0)
    }
}

/// Why a rate could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RateError {
    /// No digits where the number should be.
    #[error("no number")]
    NoNumber,
    /// Digits and dots that do not make a number (`1.2.3`).
    #[error("not a number")]
    NotANumber,
    /// What follows the number is not a multiple and a bit unit; byte units
    /// (`1gb`, `1gbps`, which tc reads as bytes per second) are among these.
    #[error("unknown unit \"{0}\"")]
    UnknownUnit(String),
    /// A fraction of a bit per second (`1.5bit`).
    #[error("not a whole number of bits per second")]
    NotWhole,
    /// More bits per second than a `u64` holds.
    #[error("too large")]
    TooLarge,
}

impl FromStr for BitsPerSecond {
    type Err = RateError;

    /// Reads `10gbit`, `1G`, `2.5g`, `500mbit`, `100mbit/s`, `100 Mbits/s`,
    /// `1000000`: a number, an optional multiple `k`, `m`, `g` or `t` (powers
    /// of 1000) and an optional `bit`, `bits`, `bit/s` or `bits/s`, in any
    /// case. Byte units are refused rather than guessed.
    fn from_str(text: &str) -> Result<Self, RateError> {
        let t = text.trim().to_ascii_lowercase();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, rest) = t.split_at(split);
        if number.is_empty() {
            return Err(RateError::NoNumber);
        }
        let rest = rest.trim_start();
        let (scale, unit) = match rest.chars().next() {
            Some('k') => (1e3, &rest[1..]),
            Some('m') => (1e6, &rest[1..]),
            Some('g') => (1e9, &rest[1..]),
            Some('t') => (1e12, &rest[1..]),
            _ => (1.0, rest),
        };
        if !UNIT_WORDS.contains(&unit) {
            return Err(RateError::UnknownUnit(rest.to_string()));
        }
        let value: f64 = number.parse().map_err(|_| RateError::NotANumber)?;
        let bits = value * scale;
        if bits.is_finite() && bits.fract() != 0.0 {
            return Err(RateError::NotWhole);
        }
        BitsPerSecond::from_f64(bits).ok_or(RateError::TooLarge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(s: &str) -> u64 {
        s.parse::<BitsPerSecond>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .0
    }

    #[test]
    fn rates_read_in_powers_of_1000_with_or_without_a_bit_unit() {
        for (s, n) in [
            ("10Gbit", 10_000_000_000),
            ("2.5g", 2_500_000_000),
            ("1t", 1_000_000_000_000),
            ("9000bits", 9_000),
            ("100mbit/s", 100_000_000),
            ("100 Mbits/s", 100_000_000),
            ("640k", 640_000),
            ("1000000", 1_000_000),
            (" 1gbit ", 1_000_000_000),
            ("0", 0),
        ] {
            assert_eq!(bits(s), n, "{s}");
        }
    }

    #[test]
    fn what_is_not_a_rate_says_why() {
        for (s, want) in [
            ("", RateError::NoNumber),
            ("gbit", RateError::NoNumber),
            ("-1g", RateError::NoNumber),
            ("1.2.3gbit", RateError::NotANumber),
            ("1gb", RateError::UnknownUnit("gb".into())),
            ("1gbps", RateError::UnknownUnit("gbps".into())),
            ("1GB/s", RateError::UnknownUnit("gb/s".into())),
            ("1x", RateError::UnknownUnit("x".into())),
            ("1.5bit", RateError::NotWhole),
            ("99999999999999999999999tbit", RateError::TooLarge),
            (&"9".repeat(400), RateError::TooLarge),
        ] {
            assert_eq!(s.parse::<BitsPerSecond>(), Err(want), "{s}");
        }
    }

    #[test]
    fn rates_display_in_the_largest_exact_multiple_and_read_back() {
        for (n, s) in [
            (10_000_000_000, "10gbit"),
            (2_500_000_000, "2500mbit"),
            (1_500_000, "1500kbit"),
            (9_001, "9001bit"),
        ] {
            assert_eq!(BitsPerSecond(n).to_string(), s);
            assert_eq!(s.parse::<BitsPerSecond>(), Ok(BitsPerSecond(n)));
        }
        assert_eq!(BitsPerSecond(1_000_000_000).bytes_per_s(), 125_000_000);
    }

    #[test]
    fn floats_become_whole_bits_when_they_fit() {
        assert_eq!(
            BitsPerSecond::from_f64(1e9),
            Some(BitsPerSecond(1_000_000_000))
        );
        assert_eq!(BitsPerSecond::from_f64(2.4), Some(BitsPerSecond(2)));
        assert_eq!(BitsPerSecond::from_f64(0.0), Some(BitsPerSecond(0)));
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1.9e19] {
            assert_eq!(BitsPerSecond::from_f64(bad), None, "{bad}");
        }
    }
}
