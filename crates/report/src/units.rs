//! Units of the report: link capacities in bits per second, and how figures are
//! written for people (rates in bit/s, times in µs or ms, percentages).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ReportError;

/// A rate in bits per second, e.g. a link's capacity in each direction.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitsPerSecond(pub f64);

impl BitsPerSecond {
    /// The rate of `bytes_per_s` payload bytes per second.
    pub fn from_bytes_per_s(bytes_per_s: f64) -> Self {
        BitsPerSecond(bytes_per_s * 8.0)
    }
}

/// Accepted unit words after the number and its multiplier.
const UNIT_WORDS: &[&str] = &["", "bit", "bits", "bit/s", "bits/s"];

impl FromStr for BitsPerSecond {
    type Err = ReportError;

    /// Reads `1gbit`, `10g`, `100mbit/s`, `2.5g`, `1000000`: a number, an
    /// optional multiplier `k`, `m`, `g` or `t` (powers of 1000, as link speeds
    /// are counted) and an optional `bit`, `bits`, `bit/s` or `bits/s`. Byte
    /// units (`1gb`, `1gbps`, which tc reads as bytes per second) are refused
    /// rather than guessed.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| ReportError::Capacity {
            input: input.to_string(),
            reason,
        };
        let s = input.trim().to_ascii_lowercase();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, rest) = s.split_at(split);
        let value: f64 = number.parse().map_err(|_| {
            fail("expected a number of bits per second such as 1gbit, 10g or 100mbit".into())
        })?;
        let rest = rest.trim_start();
        let (multiplier, unit) = match rest.chars().next() {
            Some('k') => (1e3, &rest[1..]),
            Some('m') => (1e6, &rest[1..]),
            Some('g') => (1e9, &rest[1..]),
            Some('t') => (1e12, &rest[1..]),
            _ => (1.0, rest),
        };
        if !UNIT_WORDS.contains(&unit) {
            return Err(fail(format!(
                "unknown unit \"{}\": write bits per second, e.g. 1gbit, 10g, 100mbit (k, m, g, t are powers of 1000)",
                rest
            )));
        }
        let bits = value * multiplier;
        if !(bits.is_finite() && bits > 0.0) {
            return Err(fail("the capacity must be more than 0 bit/s".into()));
        }
        Ok(BitsPerSecond(bits))
    }
}

impl fmt::Display for BitsPerSecond {
    /// `1 Gbit/s`, `2.5 Gbit/s`, `100 Mbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, unit) = scale_bits(self.0);
        write!(f, "{} {unit}", trim_number(value, 2))
    }
}

/// `bits` in the largest of bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s that keeps
/// the number at least 1.
fn scale_bits(bits: f64) -> (f64, &'static str) {
    let abs = bits.abs();
    if abs >= 1e12 {
        (bits / 1e12, "Tbit/s")
    } else if abs >= 1e9 {
        (bits / 1e9, "Gbit/s")
    } else if abs >= 1e6 {
        (bits / 1e6, "Mbit/s")
    } else if abs >= 1e3 {
        (bits / 1e3, "kbit/s")
    } else {
        (bits, "bit/s")
    }
}

/// `value` with at most `decimals` decimals and no trailing zeros: `1`, `2.5`.
fn trim_number(value: f64, decimals: usize) -> String {
    let s = format!("{value:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A payload rate for people: `9.41 Gbit/s`, `812.3 Mbit/s`.
pub(crate) fn rate(bytes_per_s: f64) -> String {
    let (value, unit) = scale_bits(bytes_per_s * 8.0);
    let decimals = if unit == "Gbit/s" || unit == "Tbit/s" {
        2
    } else {
        1
    };
    format!("{value:.decimals$} {unit}")
}

/// A transaction time for people: `23.4 µs`, `12.35 ms`.
pub(crate) fn time_us(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

/// Payload per CPU-second for people: `812.3 MB/CPU-s`, `2.41 GB/CPU-s`,
/// `64.2 kB/CPU-s` (powers of 1000).
pub(crate) fn per_cpu_s(bytes: f64) -> String {
    if bytes >= 1e9 {
        format!("{:.2} GB/CPU-s", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.1} MB/CPU-s", bytes / 1e6)
    } else if bytes >= 1e3 {
        format!("{:.1} kB/CPU-s", bytes / 1e3)
    } else {
        format!("{bytes:.0} B/CPU-s")
    }
}

/// Transactions per second for people: `43897/s`.
pub(crate) fn per_s(n: f64) -> String {
    format!("{n:.0}/s")
}

/// A relative difference: `+12.3%`, `-4.5%`, `+0.0%`.
pub(crate) fn percent(pct: f64) -> String {
    // -0.04 rounds to "-0.0": say +0.0.
    let rounded = (pct * 10.0).round() / 10.0;
    if rounded == 0.0 {
        "+0.0%".into()
    } else {
        format!("{rounded:+.1}%")
    }
}

/// A user count from interpolation: `~50`.
pub(crate) fn about(users: f64) -> String {
    format!("~{:.0}", users)
}

/// Text for a file name: letters, digits, `.`, `-` and `_` kept, anything else
/// `_`.
pub(crate) fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(s: &str) -> f64 {
        s.parse::<BitsPerSecond>().unwrap().0
    }

    #[test]
    fn capacities_are_bits_per_second_in_powers_of_1000() {
        assert_eq!(bits("1gbit"), 1e9);
        assert_eq!(bits("1Gbit"), 1e9);
        assert_eq!(bits("10g"), 1e10);
        assert_eq!(bits("100mbit/s"), 1e8);
        assert_eq!(bits("100 Mbits/s"), 1e8);
        assert_eq!(bits("2.5g"), 2.5e9);
        assert_eq!(bits("640k"), 640e3);
        assert_eq!(bits("1t"), 1e12);
        assert_eq!(bits("1000000"), 1e6);
        assert_eq!(bits(" 1gbit "), 1e9);
    }

    #[test]
    fn byte_units_and_nonsense_are_refused() {
        for bad in [
            "1gb", "1gbps", "1GB/s", "fast", "", "g", "0", "0gbit", "-1g", "1x",
        ] {
            let e = bad.parse::<BitsPerSecond>().unwrap_err().to_string();
            assert!(e.starts_with("read capacity"), "{bad}: {e}");
        }
        let e = "1gbps".parse::<BitsPerSecond>().unwrap_err().to_string();
        assert!(e.contains("1gbit"), "{e}");
    }

    #[test]
    fn capacities_display_in_the_largest_unit() {
        assert_eq!(BitsPerSecond(1e9).to_string(), "1 Gbit/s");
        assert_eq!(BitsPerSecond(2.5e9).to_string(), "2.5 Gbit/s");
        assert_eq!(BitsPerSecond(1e8).to_string(), "100 Mbit/s");
        assert_eq!(BitsPerSecond(1e10).to_string(), "10 Gbit/s");
    }

    #[test]
    fn figures_read_for_people() {
        assert_eq!(rate(1.25e9 * 9.41 / 10.0 * 8.0 / 8.0), "9.41 Gbit/s");
        assert_eq!(rate(1e6), "8.0 Mbit/s");
        assert_eq!(time_us(23.44), "23.4 µs");
        assert_eq!(time_us(12_345.0), "12.35 ms");
        assert_eq!(per_cpu_s(812.34e6), "812.3 MB/CPU-s");
        assert_eq!(per_cpu_s(64_230.0), "64.2 kB/CPU-s");
        assert_eq!(percent(12.345), "+12.3%");
        assert_eq!(percent(-4.55), "-4.6%");
        assert_eq!(percent(-0.04), "+0.0%");
        assert_eq!(about(49.6), "~50");
        assert_eq!(
            file_safe("mix:200x200*1,200x8k*3--udp"),
            "mix_200x200_1_200x8k_3--udp"
        );
    }
}
