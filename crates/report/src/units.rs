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

/// A payload rate for people: `9.41 Gbit/s`, `812.3 Mbit/s`.
pub fn rate(bytes_per_s: f64) -> String {
    let (value, unit) = scale_bits(bytes_per_s * 8.0);
    let decimals = if unit == "Gbit/s" || unit == "Tbit/s" {
        2
    } else {
        1
    };
    format!("{value:.decimals$} {unit}")
}

/// A transaction time for people: `23.4 µs`, `12.35 ms`, `2.50 s`.
pub fn time_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 10_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

/// CPU time per transaction for people: `7.36 CPU-µs`, `12.4 CPU-ms`.
pub fn cpu_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} CPU-s", us / 1e6)
    } else if us >= 10_000.0 {
        format!("{:.1} CPU-ms", us / 1000.0)
    } else {
        format!("{us:.2} CPU-µs")
    }
}

/// Payload per CPU-second for people: `812.3 MB/CPU-s`, `2.41 GB/CPU-s`,
/// `64.2 kB/CPU-s` (powers of 1000).
pub fn per_cpu_s(bytes: f64) -> String {
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
        assert_eq!(
            file_safe("mix:200x200*1,200x8k*3--udp"),
            "mix_200x200_1_200x8k_3--udp"
        );
    }
}
