//! What the history holds, as read back: series and their points.

use linkperf_report::Metric;
use serde::Serialize;

/// Where a point belongs: one figure of one test, measured by one
/// configuration, between one pair (a mesh's) in one environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SeriesKey {
    /// The configuration's label (the results document's).
    pub label: String,
    /// The test (`rr1c-200x1000--50`).
    pub test: String,
    /// A mesh's `SOURCE->TARGET`; empty otherwise.
    pub pair: String,
    /// The metric.
    pub metric: Metric,
    /// The environment's fingerprint hash.
    pub environment: String,
}

impl SeriesKey {
    /// `label test[@pair] metric [environment]`, for tables and messages.
    pub fn describe(&self) -> String {
        let pair = if self.pair.is_empty() {
            String::new()
        } else {
            format!("@{}", self.pair)
        };
        format!(
            "{} {}{pair} {} [{}]",
            self.label,
            self.test,
            self.metric.key(),
            short(&self.environment)
        )
    }
}

/// The first 8 hex digits of a fingerprint: enough for people.
pub fn short(environment: &str) -> &str {
    environment.get(..8).unwrap_or(environment)
}

/// A series and how many points it has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesInfo {
    /// Its id in the database.
    pub id: i64,
    /// Its coordinates.
    pub key: SeriesKey,
    /// Points of `ok` runs.
    pub ok: u64,
    /// Points of suspect runs.
    pub suspect: u64,
    /// The start of its latest run, RFC 3339.
    pub last: String,
}

/// One run's figure in a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The run's id in the database.
    pub run_id: i64,
    /// When it started, RFC 3339.
    pub started: String,
    /// The same in milliseconds since the Unix epoch.
    pub started_ms: i64,
    /// Its number in its test, in its results file.
    pub run: u32,
    /// Whether the run was `ok` (else suspect).
    pub ok: bool,
    /// Why a suspect run is.
    pub reasons: Vec<String>,
    /// The figure.
    pub value: f64,
}

/// The latest `ok` figure of a test's metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latest {
    /// Its series.
    pub key: SeriesKey,
    /// The figure.
    pub value: f64,
    /// When its run started, milliseconds since the Unix epoch.
    pub started_ms: i64,
}
