//! Per-flow accounting: what each flow (user) moved in the window, carried
//! compactly in a side's report, and the distribution of one measure over a
//! test's flows (how evenly the users were served, and whether any made no
//! progress at all).
//!
//! # The compact encoding
//!
//! A report of 20,000 users would be megabytes as JSON objects, so
//! [`FlowCounts`] serialises as one string: standard base64 (RFC 4648, with
//! padding) of a sequence of unsigned LEB128 integers: the number of flows,
//! then for each flow in increasing id order the id's difference from the
//! previous id (the first id itself), its transactions, its payload bytes
//! written and its payload bytes read in the window. Documented in
//! `docs/results-schema.md`.

use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most flows a report may carry (the protocol's own limit on users is far
/// below): a decoder refuses more before allocating for them.
pub const MAX_FLOWS: usize = 1 << 20;

/// What one flow moved inside the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCount {
    /// The flow's id (its user's index, from 0).
    pub flow: u32,
    /// Transactions completed (messages, for streams).
    pub transactions: u64,
    /// Payload bytes written.
    pub tx_bytes: u64,
    /// Payload bytes read.
    pub rx_bytes: u64,
}

/// Every flow one side carried, by id, in increasing order, each id once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowCounts(Vec<FlowCount>);

/// Why an encoded [`FlowCounts`] could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowCountsError {
    /// Not base64.
    #[error("per-flow counts are not base64: {0}")]
    Base64(String),
    /// The integers end early or overflow.
    #[error("per-flow counts are truncated or malformed")]
    Malformed,
    /// More flows than [`MAX_FLOWS`].
    #[error("per-flow counts name {0} flows, more than {MAX_FLOWS}")]
    TooMany(u64),
}

impl FlowCounts {
    /// Counts from any order, with a flow's repeated entries added together.
    pub fn from_counts(mut counts: Vec<FlowCount>) -> Self {
        counts.sort_unstable_by_key(|c| c.flow);
        let mut out: Vec<FlowCount> = Vec::with_capacity(counts.len());
        for c in counts {
            match out.last_mut() {
                Some(last) if last.flow == c.flow => {
                    last.transactions += c.transactions;
                    last.tx_bytes += c.tx_bytes;
                    last.rx_bytes += c.rx_bytes;
                }
                _ => out.push(c),
            }
        }
        FlowCounts(out)
    }

    /// The flows, by increasing id.
    pub fn as_slice(&self) -> &[FlowCount] {
        &self.0
    }

    /// Whether no flow is recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of flows recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The flow with id `flow`, if recorded.
    pub fn get(&self, flow: u32) -> Option<&FlowCount> {
        self.0
            .binary_search_by_key(&flow, |c| c.flow)
            .ok()
            .map(|i| &self.0[i])
    }

    /// Both sets together, a flow in both added up (the reports of several
    /// client groups or pairs, whose flows are renumbered apart by the caller).
    pub fn merged(parts: &[&FlowCounts]) -> Self {
        FlowCounts::from_counts(parts.iter().flat_map(|p| p.0.iter().copied()).collect())
    }

    /// These flows with `offset` added to every id.
    pub fn shifted(&self, offset: u32) -> Self {
        FlowCounts(
            self.0
                .iter()
                .map(|c| FlowCount {
                    flow: c.flow.saturating_add(offset),
                    ..*c
                })
                .collect(),
        )
    }

    /// The compact encoding (see the module notes).
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(4 + self.0.len() * 8);
        put_leb128(&mut bytes, self.0.len() as u64);
        let mut prev = 0u32;
        for c in &self.0 {
            put_leb128(&mut bytes, u64::from(c.flow - prev));
            prev = c.flow;
            put_leb128(&mut bytes, c.transactions);
            put_leb128(&mut bytes, c.tx_bytes);
            put_leb128(&mut bytes, c.rx_bytes);
        }
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Reads the compact encoding. Never panics; ids that do not increase or
    /// leave `u32` are refused as malformed.
    pub fn decode(text: &str) -> Result<Self, FlowCountsError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| FlowCountsError::Base64(e.to_string()))?;
        let mut r = bytes.as_slice();
        let n = take_leb128(&mut r)?;
        // Every flow takes at least 4 bytes: a count beyond that is a lie.
        if n > MAX_FLOWS as u64 {
            return Err(FlowCountsError::TooMany(n));
        }
        if n.saturating_mul(4) > r.len() as u64 {
            return Err(FlowCountsError::Malformed);
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut prev: Option<u32> = None;
        for _ in 0..n {
            let delta = take_leb128(&mut r)?;
            let flow = match prev {
                None => u32::try_from(delta).map_err(|_| FlowCountsError::Malformed)?,
                Some(p) if delta > 0 => u64::from(p)
                    .checked_add(delta)
                    .and_then(|f| u32::try_from(f).ok())
                    .ok_or(FlowCountsError::Malformed)?,
                Some(_) => return Err(FlowCountsError::Malformed),
            };
            prev = Some(flow);
            out.push(FlowCount {
                flow,
                transactions: take_leb128(&mut r)?,
                tx_bytes: take_leb128(&mut r)?,
                rx_bytes: take_leb128(&mut r)?,
            });
        }
        if !r.is_empty() {
            return Err(FlowCountsError::Malformed);
        }
        Ok(FlowCounts(out))
    }
}

fn put_leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn take_leb128(r: &mut &[u8]) -> Result<u64, FlowCountsError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = r.split_first().ok_or(FlowCountsError::Malformed)?;
        *r = rest;
        let part = u64::from(byte & 0x7f);
        if shift == 63 && part > 1 {
            return Err(FlowCountsError::Malformed);
        }
        v |= part << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(FlowCountsError::Malformed)
}

impl Serialize for FlowCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for FlowCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        FlowCounts::decode(&text).map_err(serde::de::Error::custom)
    }
}

/// Which per-flow figure a distribution is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowMeasure {
    /// Transactions completed (request/response), as the client counted them.
    Transactions,
    /// Payload bytes received, by whichever side received them (streams).
    ReceivedBytes,
}

impl fmt::Display for FlowMeasure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowMeasure::Transactions => "transactions",
            FlowMeasure::ReceivedBytes => "received bytes",
        })
    }
}

/// Jain's fairness index below which a run's flows count as unfairly served
/// (the terminal table then shows their distribution). 1.0 is perfectly even;
/// `1/n` is one flow taking everything. 0.9 is the customary "fair enough"
/// line (Jain, Chiu and Hawe, DEC-TR-301, 1984, define the index; the 0.9
/// line is a product choice: one flow in ten served not at all gives 0.9).
pub const UNFAIR_JAIN: f64 = 0.9;

/// How one figure spread over a run's flows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowStats {
    /// The figure.
    pub measure: FlowMeasure,
    /// Flows the test had (its users), each counted, 0 if it reported nothing.
    pub flows: u32,
    /// Smallest.
    pub min: f64,
    /// 10th percentile (nearest rank).
    pub p10: f64,
    /// Median (nearest rank).
    pub median: f64,
    /// Largest.
    pub max: f64,
    /// Flows with nothing at all in the window.
    pub no_progress: u32,
    /// Jain's fairness index, `(Σx)² / (n·Σx²)`: 1 when every flow got the
    /// same, `1/n` when one got everything; `None` when all are 0.
    #[serde(default)]
    pub jain: Option<f64>,
}

impl FlowStats {
    /// The distribution of `values`, one per flow (`None` without flows).
    pub fn of(measure: FlowMeasure, values: &[u64]) -> Option<FlowStats> {
        if values.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = values.to_vec();
        v.sort_unstable();
        let n = v.len();
        // Nearest rank: the smallest value with at least q·n values at or below it.
        let rank = |q: f64| v[((q * n as f64).ceil() as usize).clamp(1, n) - 1] as f64;
        let sum: f64 = v.iter().map(|&x| x as f64).sum();
        let sum_sq: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
        let jain = (sum_sq > 0.0)
            .then(|| sum * sum / (n as f64 * sum_sq))
            .filter(|j| j.is_finite());
        Some(FlowStats {
            measure,
            flows: u32::try_from(n).unwrap_or(u32::MAX),
            min: v[0] as f64,
            p10: rank(0.10),
            median: rank(0.50),
            max: v[n - 1] as f64,
            no_progress: u32::try_from(v.iter().take_while(|&&x| x == 0).count())
                .unwrap_or(u32::MAX),
            jain,
        })
    }

    /// Whether the flows were served unevenly: some made no progress, or
    /// Jain's index is below [`UNFAIR_JAIN`].
    pub fn unfair(&self) -> bool {
        self.no_progress > 0 || self.jain.is_some_and(|j| j < UNFAIR_JAIN)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn fc(flow: u32, t: u64, tx: u64, rx: u64) -> FlowCount {
        FlowCount {
            flow,
            transactions: t,
            tx_bytes: tx,
            rx_bytes: rx,
        }
    }

    #[test]
    fn repeated_flows_add_up_in_id_order() {
        let c = FlowCounts::from_counts(vec![fc(3, 1, 2, 3), fc(0, 5, 5, 5), fc(3, 1, 1, 1)]);
        assert_eq!(c.as_slice(), &[fc(0, 5, 5, 5), fc(3, 2, 3, 4)]);
        assert_eq!(c.get(3), Some(&fc(3, 2, 3, 4)));
        assert_eq!(c.get(1), None);
    }

    #[test]
    fn encoding_is_exact_and_small() {
        let c = FlowCounts::from_counts((0..1000).map(|i| fc(i, 30_000, 900_000, 1)).collect());
        let text = c.encode();
        assert!(text.len() < 1000 * 12, "{} bytes", text.len());
        assert_eq!(FlowCounts::decode(&text).unwrap(), c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<FlowCounts>(&json).unwrap(), c);
        assert_eq!(
            FlowCounts::decode(&FlowCounts::default().encode()).unwrap(),
            FlowCounts::default()
        );
    }

    #[test]
    fn bad_encodings_are_refused() {
        assert!(matches!(
            FlowCounts::decode("!!"),
            Err(FlowCountsError::Base64(_))
        ));
        // 2 flows announced, one given.
        let mut b = Vec::new();
        for v in [2u64, 0, 1, 1, 1] {
            put_leb128(&mut b, v);
        }
        let text = base64::engine::general_purpose::STANDARD.encode(&b);
        assert_eq!(FlowCounts::decode(&text), Err(FlowCountsError::Malformed));
        // A repeated id (delta 0 after the first).
        let mut b = Vec::new();
        for v in [2u64, 5, 1, 1, 1, 0, 1, 1, 1] {
            put_leb128(&mut b, v);
        }
        let text = base64::engine::general_purpose::STANDARD.encode(&b);
        assert_eq!(FlowCounts::decode(&text), Err(FlowCountsError::Malformed));
        // A huge count is refused before anything is allocated for it.
        let mut b = Vec::new();
        put_leb128(&mut b, u64::MAX);
        let text = base64::engine::general_purpose::STANDARD.encode(&b);
        assert!(matches!(
            FlowCounts::decode(&text),
            Err(FlowCountsError::TooMany(_))
        ));
    }

    #[test]
    fn distribution_by_nearest_rank() {
        let v: Vec<u64> = (1..=10).collect();
        let s = FlowStats::of(FlowMeasure::Transactions, &v).unwrap();
        assert_eq!((s.min, s.p10, s.median, s.max), (1.0, 1.0, 5.0, 10.0));
        assert_eq!(s.no_progress, 0);
        // (55)² / (10 × 385) = 0.7857…
        assert!((s.jain.unwrap() - 3025.0 / 3850.0).abs() < 1e-12);
        assert!(s.unfair());

        let even = FlowStats::of(FlowMeasure::ReceivedBytes, &[7, 7, 7]).unwrap();
        assert_eq!(even.jain, Some(1.0));
        assert!(!even.unfair());

        let stalled = FlowStats::of(FlowMeasure::Transactions, &[0, 9, 9, 9]).unwrap();
        assert_eq!(stalled.no_progress, 1);
        assert!(stalled.unfair());

        let none = FlowStats::of(FlowMeasure::Transactions, &[0, 0]).unwrap();
        assert_eq!((none.no_progress, none.jain), (2, None));
        assert!(FlowStats::of(FlowMeasure::Transactions, &[]).is_none());
    }

    proptest! {
        #[test]
        fn any_counts_round_trip(raw in proptest::collection::vec((0u32..5000, any::<u64>(), any::<u64>(), any::<u64>()), 0..200)) {
            let c = FlowCounts::from_counts(raw.into_iter().map(|(f, a, b, d)| fc(f, a / 4, b / 4, d / 4)).collect());
            prop_assert_eq!(FlowCounts::decode(&c.encode()).unwrap(), c);
        }

        #[test]
        fn decoding_any_text_never_panics(text in ".{0,64}") {
            let _ = FlowCounts::decode(&text);
        }

        #[test]
        fn jain_lies_between_one_over_n_and_one(v in proptest::collection::vec(0u64..1_000_000, 1..100)) {
            let s = FlowStats::of(FlowMeasure::Transactions, &v).unwrap();
            if let Some(j) = s.jain {
                let n = v.len() as f64;
                prop_assert!(j <= 1.0 + 1e-9 && j >= 1.0 / n - 1e-9, "{j}");
            }
            prop_assert!(s.min <= s.p10 && s.p10 <= s.median && s.median <= s.max);
        }
    }
}
