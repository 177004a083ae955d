//! Units of the reports and the terminal: link capacities in bits per second,
//! and how figures are written for people, one convention everywhere: rates
//! in bit/s and CPU efficiency in bytes per CPU-second scale by powers of 1000
//! (k, M, G); times scale µs, ms, s; sizes in workloads (64k, 1m) are powers of
//! 1024 and are not written here.

use linkperf_workload::{BitsPerSecond, RateError};
use serde::Serializer;

use crate::ReportError;

/// A link capacity as the user gives it (`--capacity`): one of
/// [`BitsPerSecond`]'s forms (`1gbit`, `10g`, `100mbit/s`, `2.5g`,
/// `1000000`), more than 0 bit/s.
pub fn parse_capacity(input: &str) -> Result<BitsPerSecond, ReportError> {
    let fail = |reason: String| ReportError::Capacity {
        input: input.to_string(),
        reason,
    };
    let bits = input.parse::<BitsPerSecond>().map_err(|e| {
        fail(match e {
            RateError::NoNumber | RateError::NotANumber => {
                "expected a number of bits per second such as 1gbit, 10g or 100mbit".into()
            }
            RateError::UnknownUnit(unit) => format!(
                "unknown unit \"{unit}\": write bits per second, e.g. 1gbit, 10g, 100mbit (k, m, g, t are powers of 1000)"
            ),
            other => other.to_string(),
        })
    })?;
    if bits.0 == 0 {
        return Err(fail("the capacity must be more than 0 bit/s".into()));
    }
    Ok(bits)
}

/// A link capacity for people: `1 Gbit/s`, `2.5 Gbit/s`, `100 Mbit/s`.
pub fn capacity(bits_per_s: f64) -> String {
    let (value, unit) = scale_bits(bits_per_s);
    format!("{} {unit}", trim_number(value, 2))
}

/// A capacity in a report's JSON: a number of bits per second written as a
/// float (`1000000000.0`), as the report has always written it.
pub(crate) fn capacity_as_f64<S: Serializer>(
    c: &Option<BitsPerSecond>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_some(&c.as_f64()),
        None => s.serialize_none(),
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

/// How a kind of figure is written: its units from the smallest up, each
/// with its size in the figure's base unit and its decimals. One unit is
/// chosen for a set of figures (a line, a table's column) from the largest of
/// them, and every figure of the set is written in it ([`Scale::unit_for`]),
/// so no line reads "p99 6877.2 µs, p99.9 14.30 ms". A zero is written `0`
/// whatever the unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// (size in the base unit, symbol, decimals), by increasing size; a unit
    /// is chosen when the largest figure is at least its `from`.
    steps: &'static [Step],
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Step {
    /// The figure (in the base unit) from which this unit is chosen.
    from: f64,
    /// The unit's size in the base unit.
    size: f64,
    symbol: &'static str,
    decimals: usize,
}

const fn step(from: f64, size: f64, symbol: &'static str, decimals: usize) -> Step {
    Step {
        from,
        size,
        symbol,
        decimals,
    }
}

impl Scale {
    /// Bits per second, from a rate in bits per second: `bit/s` to `Tbit/s`
    /// in powers of 1000.
    pub const BITS: Scale = Scale {
        steps: &[
            step(0.0, 1.0, "bit/s", 1),
            step(1e3, 1e3, "kbit/s", 1),
            step(1e6, 1e6, "Mbit/s", 1),
            step(1e9, 1e9, "Gbit/s", 2),
            step(1e12, 1e12, "Tbit/s", 2),
        ],
    };
    /// Times, from microseconds: µs up to 9999.9 µs, then ms, then s.
    pub const TIME_US: Scale = Scale {
        steps: &[
            step(0.0, 1.0, "µs", 1),
            step(1e4, 1e3, "ms", 2),
            step(1e6, 1e6, "s", 2),
        ],
    };
    /// CPU time per transaction, from CPU-microseconds.
    pub const CPU_US: Scale = Scale {
        steps: &[
            step(0.0, 1.0, "CPU-µs", 2),
            step(1e4, 1e3, "CPU-ms", 1),
            step(1e6, 1e6, "CPU-s", 2),
        ],
    };
    /// Payload per CPU-second, from bytes: powers of 1000.
    pub const PER_CPU_S: Scale = Scale {
        steps: &[
            step(0.0, 1.0, "B/CPU-s", 0),
            step(1e3, 1e3, "kB/CPU-s", 1),
            step(1e6, 1e6, "MB/CPU-s", 1),
            step(1e9, 1e9, "GB/CPU-s", 2),
        ],
    };

    /// The unit for all of `values` (in the base unit): the largest unit the
    /// largest of them reaches; the smallest unit when there is none (or
    /// none is finite).
    pub fn unit_for(self, values: impl IntoIterator<Item = f64>) -> Unit {
        let largest = values
            .into_iter()
            .filter(|v| v.is_finite())
            .map(f64::abs)
            .fold(0.0, f64::max);
        let step = self
            .steps
            .iter()
            .rev()
            .find(|s| largest >= s.from)
            .unwrap_or(&self.steps[0]);
        Unit(*step)
    }

    /// `values` each written in the one unit of them all.
    pub fn all(self, values: &[f64]) -> Vec<String> {
        let unit = self.unit_for(values.iter().copied());
        values.iter().map(|&v| unit.format(v)).collect()
    }

    /// One figure in its own unit.
    pub fn one(self, value: f64) -> String {
        self.unit_for([value]).format(value)
    }
}

/// A unit chosen by [`Scale::unit_for`] for a set of figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit(Step);

impl Unit {
    /// The unit's symbol: `ms`, `Gbit/s`.
    pub fn symbol(self) -> &'static str {
        self.0.symbol
    }

    /// `value` (in the base unit) as a number in this unit, without the
    /// symbol (a table's column, its unit in the heading): `12.35`; a zero,
    /// or what rounds to none, `0`.
    pub fn number(self, value: f64) -> String {
        let v = value / self.0.size;
        let s = format!("{v:.*}", self.0.decimals);
        if s.trim_start_matches('-')
            .chars()
            .all(|c| c == '0' || c == '.')
        {
            "0".into()
        } else {
            s
        }
    }

    /// `value` in this unit with its symbol: `12.35 ms`, `0 ms`.
    pub fn format(self, value: f64) -> String {
        format!("{} {}", self.number(value), self.0.symbol)
    }
}

/// A payload rate for people: `9.41 Gbit/s`, `812.3 Mbit/s`.
pub fn rate(bytes_per_s: f64) -> String {
    Scale::BITS.one(bytes_per_s * 8.0)
}

/// A transaction time for people: `23.4 µs`, `12.35 ms`, `2.50 s`.
pub fn time_us(us: f64) -> String {
    Scale::TIME_US.one(us)
}

/// CPU time per transaction for people: `7.36 CPU-µs`, `12.4 CPU-ms`.
pub fn cpu_us(us: f64) -> String {
    Scale::CPU_US.one(us)
}

/// Payload per CPU-second for people: `812.3 MB/CPU-s`, `2.41 GB/CPU-s`,
/// `64.2 kB/CPU-s` (powers of 1000).
pub fn per_cpu_s(bytes: f64) -> String {
    Scale::PER_CPU_S.one(bytes)
}

/// A count and its noun, singular or plural: `1 test`, `2 tests`, `0 runs`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Transactions per second for people: `43897/s`.
pub fn per_s(n: f64) -> String {
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
        parse_capacity(s).unwrap().as_f64()
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
            let e = parse_capacity(bad).unwrap_err().to_string();
            assert!(e.starts_with("read capacity"), "{bad}: {e}");
        }
        let e = parse_capacity("1gbps").unwrap_err().to_string();
        assert!(e.contains("1gbit"), "{e}");
    }

    #[test]
    fn capacities_are_written_to_json_as_floats_as_before() {
        let options = crate::Options {
            capacity_bits_per_s: Some(BitsPerSecond(1_000_000_000)),
            ..crate::Options::default()
        };
        let json = serde_json::to_string(&options).unwrap();
        assert!(
            json.contains(r#""capacity_bits_per_s":1000000000.0"#),
            "{json}"
        );
        let none = serde_json::to_string(&crate::Options::default()).unwrap();
        assert!(none.contains(r#""capacity_bits_per_s":null"#), "{none}");
    }

    #[test]
    fn capacities_display_in_the_largest_unit() {
        assert_eq!(capacity(1e9), "1 Gbit/s");
        assert_eq!(capacity(2.5e9), "2.5 Gbit/s");
        assert_eq!(capacity(1e8), "100 Mbit/s");
        assert_eq!(capacity(1e10), "10 Gbit/s");
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
        assert_eq!(rate(0.0), "0 bit/s");
        assert_eq!(count(1u32, "test"), "1 test");
        assert_eq!(count(0u32, "test"), "0 tests");
        assert_eq!(count(8u64, "run"), "8 runs");
        assert_eq!(time_us(0.0), "0 µs");
        assert_eq!(
            file_safe("mix:200x200*1,200x8k*3--udp"),
            "mix_200x200_1_200x8k_3--udp"
        );
    }

    /// Issue 35: "p99 6877.2 µs, p99.9 14.30 ms" on one line.
    #[test]
    fn a_set_of_figures_is_written_in_the_unit_of_its_largest() {
        assert_eq!(
            Scale::TIME_US.all(&[6877.2, 14_300.0]),
            ["6.88 ms", "14.30 ms"]
        );
        assert_eq!(Scale::TIME_US.all(&[23.44, 812.0]), ["23.4 µs", "812.0 µs"]);
        assert_eq!(Scale::TIME_US.all(&[150.0, 2_500_000.0]), ["0 s", "2.50 s"]);
        assert_eq!(
            Scale::BITS.all(&[1.25e6, 9.41e9, 0.0]),
            ["0 Gbit/s", "9.41 Gbit/s", "0 Gbit/s"]
        );
        assert_eq!(Scale::BITS.all(&[8e3, 0.0]), ["8.0 kbit/s", "0 kbit/s"]);
        // A unit for a column, its symbol in the heading.
        let u = Scale::TIME_US.unit_for([20.0, 12_345.0, f64::NAN]);
        assert_eq!(u.symbol(), "ms");
        assert_eq!(u.number(12_345.0), "12.35");
        assert_eq!(u.number(-0.0001), "0");
        // Nothing, or nothing finite: the smallest unit.
        assert_eq!(Scale::TIME_US.unit_for([]).symbol(), "µs");
        assert_eq!(Scale::BITS.unit_for([f64::INFINITY]).symbol(), "bit/s");
        assert_eq!(
            Scale::CPU_US.all(&[7.364, 12_400.0]),
            ["0 CPU-ms", "12.4 CPU-ms"]
        );
        assert_eq!(
            Scale::PER_CPU_S.all(&[64_230.0, 812.34e6]),
            ["0.1 MB/CPU-s", "812.3 MB/CPU-s"]
        );
    }
}
