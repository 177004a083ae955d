//! Values: `$variables` substituted, then numbers, sizes, times, rates.

use std::borrow::Cow;
use std::time::Duration;

use crate::profile::check::{MAX_TIME, MAX_XFER};
use crate::profile::model::Size;
use crate::size::{parse_size, SizeError};

/// Longest profile text read (and longest attribute value once variables
/// are substituted): 1 MiB.
pub(super) const MAX_TEXT: usize = 1024 * 1024;

/// How many characters of a value from the file an error message repeats.
const SHOWN_CHARS: usize = 40;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// At most [`SHOWN_CHARS`] characters of `s`, for an error message.
pub(super) fn shown(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => Cow::Owned(format!("{}...", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

// Variables.

/// Why a value's variables could not be substituted.
pub(super) struct Unsubstituted {
    /// In words.
    pub(super) message: String,
    /// The variable that is not set, if that is why.
    pub(super) unset: Option<String>,
}

impl From<String> for Unsubstituted {
    fn from(message: String) -> Self {
        Unsubstituted {
            message,
            unset: None,
        }
    }
}

/// Replaces every `$name` and `${name}` in `value` with `var(name)`.
pub(super) fn substitute<'v>(
    value: &'v str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Cow<'v, str>, Unsubstituted> {
    if !value.contains('$') {
        return Ok(Cow::Borrowed(value));
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, used) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(j) => (&braced[..j], j + 2),
                None => {
                    return Err(
                        format!("{} is not closed: write ${{name}}", shown(&rest[i..])).into(),
                    )
                }
            },
            None => {
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                (&after[..n], n)
            }
        };
        let valid = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "{} is not a variable: a $ starts a variable name ($name or ${{name}}: letters, digits and _, not starting with a digit)",
                shown(&rest[i..(i + 1 + used).min(rest.len())])
            )
            .into());
        }
        let value = var(name).ok_or_else(|| Unsubstituted {
            message: format!("variable ${name} is not set: set it in the environment"),
            unset: Some(name.to_string()),
        })?;
        out.push_str(&value);
        if out.len() > MAX_TEXT {
            return Err(
                "the value is longer than 1 MiB once variables are substituted"
                    .to_string()
                    .into(),
            );
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

// Numbers, sizes, times, rates.

/// Decimal digits with an optional binary suffix: `64`, `64k`, `64KB`, `1m`,
/// `2g`: the sizes of [`parse_size`], and uperf's `b` after the multiple.
pub(super) fn number(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let b = t.as_bytes();
    let end = b.len();
    // `| 0x20` lowers ASCII letters and leaves every non-ASCII byte non-ASCII.
    if end >= 2 && (b[end - 1] | 0x20) == b'b' && matches!(b[end - 2] | 0x20, b'k' | b'm' | b'g') {
        return parse_size(&t[..end - 1]);
    }
    parse_size(t)
}

/// `key=value` read with [`number`], with a message naming both.
fn number_value(key: &str, value: &str) -> Result<u64, String> {
    number(value).map_err(|e| match e {
        SizeError::NotANumber => format!(
            "{key}={} is not a number: write digits with an optional k, m or g suffix (64k is 65536)",
            shown(value)
        ),
        SizeError::TooLarge => format!("{key}={} is too large", shown(value)),
    })
}

/// `key=value`, a number in `min..=max`.
pub(super) fn number_in(
    key: &str,
    value: &str,
    min: u64,
    max: u64,
    max_text: &str,
) -> Result<u64, String> {
    let n = number_value(key, value)?;
    if n < min || n > max {
        let range = if max == u64::MAX {
            format!("it must be at least {min}")
        } else {
            format!("it must be between {min} and {max_text}")
        };
        return Err(format!("{key}={} is out of range: {range}", shown(value)));
    }
    Ok(n)
}

/// `size=N` or `size=rand(min,max)`, each between 1 byte and 64 MiB.
pub(super) fn size_value(key: &str, value: &str) -> Result<Size, String> {
    let t = value.trim();
    let is_rand = t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("rand("));
    if !is_rand {
        return number_in(key, t, 1, MAX_XFER, "64m").map(Size::Fixed);
    }
    let whole = shown(t);
    let inner = t[5..].strip_suffix(')').ok_or_else(|| {
        format!("{key}={whole} is missing its closing ): write {key}=rand(min,max)")
    })?;
    let Some((a, b)) = inner.split_once(',').filter(|(_, b)| !b.contains(',')) else {
        return Err(format!(
            "{key}={whole} must give two sizes: write {key}=rand(min,max), such as rand(1k,64k)"
        ));
    };
    let bound = |part: &str| -> Result<u64, String> {
        let n = number(part).map_err(|e| match e {
            SizeError::NotANumber => format!(
                "{key}={whole}: {} is not a number: write digits with an optional k, m or g suffix (64k is 65536)",
                shown(part.trim())
            ),
            SizeError::TooLarge => format!("{key}={whole}: {} is too large", shown(part.trim())),
        })?;
        if n == 0 || n > MAX_XFER {
            return Err(format!(
                "{key}={whole} is out of range: both sizes must be between 1 and 64m"
            ));
        }
        Ok(n)
    };
    let (min, max) = (bound(a)?, bound(b)?);
    if min > max {
        return Err(format!(
            "{key}={whole}: the smallest size comes first: write rand(min,max)"
        ));
    }
    Ok(Size::Rand { min, max })
}

/// A decimal number such as `30`, `0.5` or `.5`, as its integer and
/// fraction digits.
fn decimal(s: &str) -> Option<(&str, &str)> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    Some((int, frac))
}

const TIME_HELP: &str = "write a number and a unit: 30s, 0.5 (seconds), 10ms or 10m (milliseconds, as uperf reads m), 100us or 100u, 500ns or 500n";

/// A time: a number, possibly fractional, with an optional unit (`s`, `m` or
/// `ms` for milliseconds, `u`/`us`, `n`/`ns`; none is seconds). Must be > 0.
pub(super) fn time_value(key: &str, value: &str) -> Result<Duration, String> {
    let t = value.trim();
    if t.starts_with('-') {
        return Err(format!("{key}={} is negative: {TIME_HELP}", shown(value)));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let unit_nanos: u128 = if unit.is_empty() || unit.eq_ignore_ascii_case("s") {
        NANOS_PER_SEC
    } else if unit.eq_ignore_ascii_case("m") || unit.eq_ignore_ascii_case("ms") {
        1_000_000
    } else if unit.eq_ignore_ascii_case("u") || unit.eq_ignore_ascii_case("us") {
        1_000
    } else if unit.eq_ignore_ascii_case("n") || unit.eq_ignore_ascii_case("ns") {
        1
    } else {
        return Err(format!("{key}={} is not a time: {TIME_HELP}", shown(value)));
    };
    let (int, frac) =
        decimal(num).ok_or_else(|| format!("{key}={} is not a time: {TIME_HELP}", shown(value)))?;
    let too_long = || format!("{key}={} is too long", shown(value));
    let mut whole: u128 = 0;
    for d in int.bytes() {
        whole = whole
            .checked_mul(10)
            .and_then(|w| w.checked_add(u128::from(d - b'0')))
            .ok_or_else(too_long)?;
    }
    // Digits past the 18th of the fraction are below a nanosecond.
    let (mut part, mut scale): (u128, u128) = (0, 1);
    for d in frac.bytes().take(18) {
        part = part * 10 + u128::from(d - b'0');
        scale *= 10;
    }
    let nanos = whole
        .checked_mul(unit_nanos)
        .and_then(|w| w.checked_add(part * unit_nanos / scale))
        .ok_or_else(too_long)?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_long())?;
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| too_long())?;
    let d = Duration::new(secs, sub);
    if d.is_zero() {
        return Err(format!("{key}={} must be longer than zero", shown(value)));
    }
    if d > MAX_TIME {
        return Err(format!(
            "{key}={} is too long: at most 365 days ({}s)",
            shown(value),
            MAX_TIME.as_secs()
        ));
    }
    Ok(d)
}

/// `rate=R`: a positive number, possibly fractional.
pub(super) fn rate_value(value: &str) -> Result<f64, String> {
    let t = value.trim();
    let bad = || {
        format!(
            "rate={} is not a rate: write the iterations per second of each user, such as 100 or 0.5",
            shown(value)
        )
    };
    decimal(t).ok_or_else(bad)?;
    let r: f64 = t.parse().map_err(|_| bad())?;
    if !r.is_finite() {
        return Err(format!("rate={} is too large", shown(value)));
    }
    if r <= 0.0 {
        return Err(format!("rate={} must be more than zero", shown(value)));
    }
    Ok(r)
}
