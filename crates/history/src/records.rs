//! A results document's runs as the history keeps them: each with its
//! series' coordinates (configuration label, test, mesh pair, environment),
//! its start, status and reasons, the figure of every metric it has, and a
//! key that stays the same however often, and from whichever copy, the run
//! is imported.

use sha2::{Digest, Sha256};

use linkperf_report::Metric;
use linkperf_results::{ResultsDocument, Run, RunStatus, TestResult};

use crate::fingerprint::{hex, Fingerprint};
use crate::HistoryError;

/// One run, ready to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Digest of what identifies the run: its configuration label, test,
    /// start, status, error and every figure (not its number, which a
    /// resumed suite renumbers).
    pub key: String,
    /// The results document's label (the configuration under test).
    pub label: String,
    /// The test's name, without a mesh's `@SOURCE->TARGET`.
    pub test: String,
    /// A mesh run's `SOURCE->TARGET`; empty otherwise.
    pub pair: String,
    /// Its environment.
    pub environment: Fingerprint,
    /// When it started, RFC 3339 UTC, as the document says.
    pub started: String,
    /// The same, milliseconds since the Unix epoch: the series' order.
    pub started_ms: i64,
    /// Its number within its test in the document.
    pub run: u32,
    /// How it ended.
    pub status: RunStatus,
    /// Why it is not `ok`.
    pub reasons: Vec<String>,
    /// Each metric it has a figure of.
    pub values: Vec<(Metric, f64)>,
}

/// Every run of `doc` (read from `origin`, for messages), in document order.
pub fn records_of(doc: &ResultsDocument, origin: &str) -> Result<Vec<RunRecord>, HistoryError> {
    let mut out = Vec::new();
    for test in &doc.tests {
        for run in &test.runs {
            out.push(record_of(doc, test, run, origin)?);
        }
    }
    Ok(out)
}

/// A mesh run's test name without its pair, and the pair.
fn split_pair(test: &TestResult, run: &Run) -> (String, String) {
    if let Some(a) = &run.agents {
        let pair = format!("{}->{}", a.source.name, a.target.name);
        if let Some(base) = test.name.strip_suffix(&format!("@{pair}")) {
            return (base.to_string(), pair);
        }
        return (test.name.clone(), pair);
    }
    (test.name.clone(), String::new())
}

/// Run `run` of `test` in `doc` (read from `origin`) as a record.
pub fn record_of(
    doc: &ResultsDocument,
    test: &TestResult,
    run: &Run,
    origin: &str,
) -> Result<RunRecord, HistoryError> {
    let fail = |detail: String| HistoryError::Run {
        origin: origin.to_string(),
        test: test.name.clone(),
        run: run.run,
        detail,
    };
    let started_ms = started_ms(&run.started).ok_or_else(|| {
        fail(format!(
            "its start time {:?} is not an RFC 3339 time",
            run.started
        ))
    })?;
    let (name, pair) = split_pair(test, run);
    let values: Vec<(Metric, f64)> = if run.status.completed() {
        Metric::ALL
            .iter()
            .filter_map(|m| m.value(run).map(|v| (*m, v)))
            .collect()
    } else {
        Vec::new()
    };
    let mut reasons = run.status_reasons.clone();
    if reasons.is_empty() {
        if let Some(e) = &run.error {
            reasons.push(e.clone());
        }
    }
    Ok(RunRecord {
        key: run_key(&doc.label, &test.name, run),
        label: doc.label.clone(),
        test: name,
        pair,
        environment: Fingerprint::of(doc, test, run),
        started: run.started.clone(),
        started_ms,
        run: run.run,
        status: run.status,
        reasons,
        values,
    })
}

/// Milliseconds since the Unix epoch of an RFC 3339 time.
pub fn started_ms(started: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(started.trim()).ok()?;
    let ms = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).ok()?,
        Err(e) => -i64::try_from(e.duration().as_millis()).ok()?,
    };
    Some(ms)
}

/// The run's key: SHA-256 over its label, test, start, status, error,
/// errors and every figure a metric reads (bit for bit), hex.
fn run_key(label: &str, test: &str, run: &Run) -> String {
    let mut h = Sha256::new();
    for part in [label, test, &run.started, run.status.word()] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(run.error.as_deref().unwrap_or("").as_bytes());
    h.update([0]);
    h.update(run.errors.to_le_bytes());
    for m in Metric::ALL {
        match m.value(run) {
            Some(v) => h.update(v.to_bits().to_le_bytes()),
            None => h.update([0xff]),
        }
    }
    hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_are_read_to_the_millisecond() {
        assert_eq!(started_ms("1970-01-01T00:00:01.250Z"), Some(1250));
        assert_eq!(started_ms("2024-05-01T10:00:00Z"), Some(1_714_557_600_000));
        assert_eq!(started_ms("yesterday"), None);
        assert_eq!(started_ms(""), None);
    }
}
