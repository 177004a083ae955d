//! Reading numbers and flags the way iperf3 does. iperf3 stores JSON numbers
//! as doubles and reads them as integers; 3.12 prints -1 as
//! 18446744073709551615 (its 64-bit integer printing of a negative value), and
//! a flag counts as set when its key is present at all, whatever its value.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};

struct IntVisitor;

impl<'de> Visitor<'de> for IntVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        // Two's complement, as iperf3 meant it: 18446744073709551615 is -1.
        Ok(v as i64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.is_finite() {
            Ok(v as i64)
        } else {
            Err(E::custom("a number out of range"))
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<i64, E> {
        Ok(i64::from(v))
    }
}

/// A signed integer from any JSON number (a float is truncated, a u64 above
/// `i64::MAX` wraps to its negative value).
pub(crate) fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(IntVisitor)
}

/// Like [`int`], for an optional key.
pub(crate) fn opt_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    int(d).map(Some)
}

/// A count from any JSON number: negative values (iperf3's "unknown") are 0.
pub(crate) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            Ok(u64::try_from(v).unwrap_or(0))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
            if v.is_finite() {
                Ok(if v <= 0.0 { 0 } else { v as u64 })
            } else {
                Err(E::custom("a number out of range"))
            }
        }
    }
    d.deserialize_any(V)
}

/// Like [`count`], for an optional key.
pub(crate) fn opt_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    count(d).map(Some)
}

/// A float from any JSON number.
pub(crate) fn float<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
    }
    d.deserialize_any(V)
}

/// Like [`float`], for an optional key.
pub(crate) fn opt_float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    float(d).map(Some)
}

/// True when the key is present, whatever its value (iperf3 tests presence).
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(d).map(|_| true)
}

use serde::Deserialize;

/// Skips a `false` flag when writing (iperf3 writes only the flags it sets).
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
