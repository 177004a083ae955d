//! Durations as people write them: with a unit (`30s`, `500ms`, `2m`,
//! `1h 30m`), or a bare number, which is seconds (`10`, `2.5`), as iperf3's
//! `-t 10` and netperf's `-l 10` mean. Every duration linkperf reads, on the
//! command line or in a suite file, goes through [`parse_duration`].

use std::time::Duration;

use crate::WorkloadError;

/// Nanoseconds in a second.
const NANOS_PER_SECOND: u32 = 1_000_000_000;

/// Reads a duration: a number with a unit (`30s`, `500ms`, `2m`, `1h 30m`;
/// the units of humantime) or a bare number of seconds (`10`, `0.25`).
pub fn parse_duration(s: &str) -> Result<Duration, WorkloadError> {
    let t = s.trim();
    if let Some(d) = bare_seconds(t)? {
        return Ok(d);
    }
    humantime::parse_duration(t).map_err(|e| WorkloadError::Duration(e.to_string()))
}

/// `10`, `2.5`: seconds. `None` when `t` is not a bare number.
fn bare_seconds(t: &str) -> Result<Option<Duration>, WorkloadError> {
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || t.ends_with('.') {
        return Ok(None);
    }
    let seconds: u64 = whole
        .parse()
        .map_err(|_| WorkloadError::Duration(format!("{t} seconds is too long")))?;
    // The first nine digits of the fraction are nanoseconds; more are below a nanosecond.
    let mut nanos = 0u32;
    let mut unit = NANOS_PER_SECOND;
    for d in fraction.bytes().take(9) {
        unit /= 10;
        nanos += u32::from(d - b'0') * unit;
    }
    Ok(Some(Duration::new(seconds, nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_number_is_seconds() {
        for (s, d) in [
            ("5", Duration::from_secs(5)),
            ("0", Duration::ZERO),
            (" 10 ", Duration::from_secs(10)),
            ("2.5", Duration::from_millis(2500)),
            ("0.25", Duration::from_millis(250)),
            ("1.0000000019", Duration::new(1, 1)),
        ] {
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
    }

    #[test]
    fn units_are_humantime_s() {
        for (s, d) in [
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("2m", Duration::from_secs(120)),
            ("1h 30m", Duration::from_secs(5400)),
            ("7s 500ms", Duration::from_millis(7500)),
        ] {
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in [
            "",
            "s",
            "-5",
            "5x",
            "1.",
            ".5",
            "1.5.2",
            "ten",
            "99999999999999999999",
        ] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains("a bare number is seconds"), "{bad}: {e}");
        }
    }
}
