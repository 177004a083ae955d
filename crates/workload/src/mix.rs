//! Weighted mixes of request/response sizes (`mix:200x200*1,200x8k*3`), and
//! the sizes of each transaction as both ends compute them.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Bytes, WorkloadError};

/// Most entries in one mix.
pub const MAX_MIX_ENTRIES: usize = 64;
/// Largest weight of one entry.
pub const MAX_MIX_WEIGHT: u32 = 1_000_000;

/// One kind of transaction in a mix, and how often it comes relative to the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MixEntry {
    /// Request payload.
    pub request: Bytes,
    /// Response payload.
    pub response: Bytes,
    /// Relative weight (1 = as often as another entry of weight 1).
    pub weight: u32,
}

impl fmt::Display for MixEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}*{}", self.request, self.response, self.weight)
    }
}

/// Reads `200x200*1,200x8k*3` (a missing `*W` means weight 1).
pub fn parse_mix(s: &str, whole: &str) -> Result<Vec<MixEntry>, WorkloadError> {
    let bad = |why: &str| WorkloadError::Invalid(format!("invalid mix '{whole}': {why}"));
    let mut entries = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("empty entry"));
        }
        let (sizes, weight) = match part.split_once('*') {
            Some((a, w)) => (
                a,
                w.trim()
                    .parse::<u32>()
                    .map_err(|_| bad(&format!("weight '{w}' is not a whole number")))?,
            ),
            None => (part, 1),
        };
        let (req, resp) = sizes
            .split_once(['x', 'X'])
            .ok_or_else(|| bad(&format!("entry '{part}' is not REQxRESP[*WEIGHT]")))?;
        entries.push(MixEntry {
            request: req.parse()?,
            response: resp.parse()?,
            weight,
        });
    }
    check_entries(&entries).map_err(|why| bad(&why))?;
    Ok(entries)
}

/// The bounds every mix keeps, however it was made (parsed from a name, or
/// received by a server on the wire): at least one and at most
/// [`MAX_MIX_ENTRIES`] entries, each weight from 1 to [`MAX_MIX_WEIGHT`].
pub fn check_entries(entries: &[MixEntry]) -> Result<(), String> {
    if entries.is_empty() {
        return Err("a mix needs at least one entry".into());
    }
    if entries.len() > MAX_MIX_ENTRIES {
        return Err(format!(
            "{} entries, more than {MAX_MIX_ENTRIES}",
            entries.len()
        ));
    }
    if let Some(e) = entries
        .iter()
        .find(|e| e.weight == 0 || e.weight > MAX_MIX_WEIGHT)
    {
        return Err(format!(
            "weight {} must be between 1 and {MAX_MIX_WEIGHT}",
            e.weight
        ));
    }
    Ok(())
}

/// The sizes of every transaction of a request/response workload: fixed, or
/// drawn from a mix by a pure function of (flow, transaction number), so that
/// the server answers each request with the size the client expects without
/// any header on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionSizes {
    /// Every transaction the same.
    Fixed {
        /// Request bytes.
        request: u64,
        /// Response bytes.
        response: u64,
    },
    /// Weighted choice among entries.
    Mix(Arc<[MixEntry]>),
}

/// splitmix64 (Steele, Lea, Flood 2014): a well-mixed 64-bit hash of a counter.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl TransactionSizes {
    /// Request and response bytes of transaction `seq` of flow `flow`.
    pub fn at(&self, flow: u32, seq: u64) -> (u64, u64) {
        match self {
            TransactionSizes::Fixed { request, response } => (*request, *response),
            TransactionSizes::Mix(entries) => {
                let total: u64 = entries.iter().map(|e| u64::from(e.weight)).sum();
                let mut pick = splitmix64((u64::from(flow) << 40) ^ seq) % total.max(1);
                for e in entries.iter() {
                    let w = u64::from(e.weight);
                    if pick < w {
                        return (e.request.0, e.response.0);
                    }
                    pick -= w;
                }
                entries
                    .last()
                    .map(|e| (e.request.0, e.response.0))
                    .unwrap_or((1, 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_weights_and_defaults() {
        let m = parse_mix("200x200*1,200x8k*3", "x").unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[1],
            MixEntry {
                request: Bytes(200),
                response: Bytes(8192),
                weight: 3
            }
        );
        assert_eq!(parse_mix("1x1", "x").unwrap()[0].weight, 1);
    }

    #[test]
    fn refuses_bad_mixes() {
        for bad in ["", "1x1*0", "1x1*a", "1*2", "1x1,,2x2"] {
            assert!(parse_mix(bad, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn choices_follow_the_weights_and_are_deterministic() {
        let m = TransactionSizes::Mix(parse_mix("200x200*1,200x8k*3", "x").unwrap().into());
        let n = 40_000u64;
        let big = (0..n).filter(|s| m.at(7, *s).1 == 8192).count() as f64 / n as f64;
        assert!((big - 0.75).abs() < 0.02, "share of 8k responses {big}");
        assert_eq!(m.at(3, 99), m.at(3, 99));
    }
}
