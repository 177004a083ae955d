use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;

/// A number of payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

impl Bytes {
    /// The size as a `usize`, for buffer arithmetic.
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }

    /// Checks `min <= self <= max`.
    pub fn check_range(
        self,
        what: &'static str,
        min: u64,
        max: u64,
    ) -> Result<Self, WorkloadError> {
        if self.0 < min || self.0 > max {
            return Err(WorkloadError::SizeRange {
                what,
                got: self.0,
                min,
                max,
            });
        }
        Ok(self)
    }
}

impl FromStr for Bytes {
    type Err = WorkloadError;

    /// Reads `200`, `30k`, `30K`, `1m`, `2g` (binary multiples): the one reader
    /// of byte sizes, `parse_size`, with the workload error.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size(s)
            .map(Bytes)
            .map_err(|_| WorkloadError::Size(s.to_string()))
    }
}

/// Why a size could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeError {
    /// Not digits with an optional `k`, `m` or `g`.
    NotANumber,
    /// More bytes than a `u64` holds.
    TooLarge,
}

/// The one reader of byte sizes: decimal digits with an optional binary
/// multiple `k`, `m` or `g` in either case (`200`, `30k`, `1M`, `2g`), spaces
/// around them ignored. Workload names, suite files and options read sizes
/// with it through [`Bytes`]; profiles (which also take uperf's `64kb`) call it
/// directly.
pub(crate) fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let (digits, multiple) = match t.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') => (&t[..t.len() - 1], KIB),
        Some(b'm') => (&t[..t.len() - 1], MIB),
        Some(b'g') => (&t[..t.len() - 1], GIB),
        _ => (t, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SizeError::NotANumber);
    }
    digits
        .bytes()
        .try_fold(0u64, |n, d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .and_then(|n| n.checked_mul(multiple))
        .ok_or(SizeError::TooLarge)
}

impl fmt::Display for Bytes {
    /// The compact form used in names: `30k` for 30720, `1m` for 1048576, else digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= GIB && n.is_multiple_of(GIB) {
            write!(f, "{}g", n / GIB)
        } else if n >= MIB && n.is_multiple_of(MIB) {
            write!(f, "{}m", n / MIB)
        } else if n >= KIB && n.is_multiple_of(KIB) {
            write!(f, "{}k", n / KIB)
        } else {
            write!(f, "{n}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_suffixes() {
        assert_eq!("30k".parse::<Bytes>(), Ok(Bytes(30 * 1024)));
        assert_eq!("1M".parse::<Bytes>(), Ok(Bytes(1024 * 1024)));
        assert_eq!("200".parse::<Bytes>(), Ok(Bytes(200)));
        assert_eq!("2g".parse::<Bytes>(), Ok(Bytes(2 * GIB)));
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in [
            "",
            "k",
            "1x",
            "-1",
            "1.5k",
            "99999999999999999999",
            "18014398509481984k",
        ] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn displays_compactly_and_round_trips() {
        for (n, s) in [
            (1, "1"),
            (1000, "1000"),
            (30720, "30k"),
            (MIB, "1m"),
            (1536, "1536"),
        ] {
            assert_eq!(Bytes(n).to_string(), s);
            assert_eq!(s.parse::<Bytes>(), Ok(Bytes(n)));
        }
    }
}

/// A percentage as a fraction: `"1%"`, `"1.5"` and `"0.25 %"` are 0.01, 0.015
/// and 0.0025. It must lie in [0, 100].
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    let pct: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a percentage (e.g. 1 or 0.5%)"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(format!("'{text}' is not between 0 and 100 %"));
    }
    Ok(pct / 100.0)
}

#[cfg(test)]
mod percent_tests {
    use super::parse_percent;

    #[test]
    fn percentages_read_as_fractions() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent(" 50 "), Ok(0.5));
        assert_eq!(parse_percent("0.5 %"), Ok(0.005));
        assert!(parse_percent("101").is_err());
        assert!(parse_percent("-1%").is_err());
        assert!(parse_percent("lots").is_err());
        assert!(parse_percent("NaN").is_err());
    }
}
