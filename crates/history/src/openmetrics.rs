//! The latest figures as OpenMetrics text (and Prometheus's text format,
//! which reads the same lines): a gauge family per metric, a sample per
//! configuration label, test and mesh pair, with its environment's
//! fingerprint as a label; and when each test last ran.
//!
//! Names: `linkperf_` and the metric's key with `.` as `_`
//! (`throughput.bytes_per_s` → `linkperf_throughput_bytes_per_s`). Samples
//! carry no timestamps: Prometheus records them at the scrape, and
//! `linkperf_run_timestamp_seconds` says when each figure was measured.
//! The specification: <https://github.com/prometheus/OpenMetrics/blob/main/specification/OpenMetrics.md>.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::series::Latest;

/// The content type of [`exposition`]'s text as OpenMetrics.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the same text as Prometheus's text format.
pub const CONTENT_TYPE_PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metric family's name of a metric key.
pub fn family(key: &str) -> String {
    let mut name = String::from("linkperf_");
    name.extend(
        key.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    name
}

/// A label value, escaped: `\` `"` and line feeds.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// The labels of a sample of `l`.
fn labels(l: &Latest) -> String {
    let mut parts = vec![
        format!("label=\"{}\"", escape(&l.key.label)),
        format!("test=\"{}\"", escape(&l.key.test)),
    ];
    if let Some((source, target)) = l.key.pair.split_once("->") {
        parts.push(format!("source=\"{}\"", escape(source)));
        parts.push(format!("target=\"{}\"", escape(target)));
    }
    parts.push(format!("environment=\"{}\"", escape(&l.key.environment)));
    parts.join(",")
}

/// The OpenMetrics exposition of `latest`, ending with `# EOF`.
pub fn exposition(latest: &[Latest]) -> String {
    let mut families: BTreeMap<String, Vec<&Latest>> = BTreeMap::new();
    let mut runs: BTreeMap<String, i64> = BTreeMap::new();
    for l in latest {
        families
            .entry(l.key.metric.key().to_string())
            .or_default()
            .push(l);
        let at = runs.entry(labels(l)).or_insert(l.started_ms);
        *at = (*at).max(l.started_ms);
    }
    let mut out = String::new();
    for (key, samples) in &families {
        let metric = samples[0].key.metric;
        let name = family(key);
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(
            out,
            "# HELP {name} {} ({}), the latest ok run",
            metric.label(),
            metric.unit()
        );
        for l in samples {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(l), l.value);
        }
    }
    if !runs.is_empty() {
        let name = "linkperf_run_timestamp_seconds";
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(
            out,
            "# HELP {name} when the run of the latest figures started"
        );
        for (labels, ms) in &runs {
            let _ = writeln!(out, "{name}{{{labels}}} {}", *ms as f64 / 1000.0);
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeriesKey;
    use linkperf_report::Metric;

    #[test]
    fn families_are_named_after_the_metric_and_labels_are_escaped() {
        let l = |metric, pair: &str, value| Latest {
            key: SeriesKey {
                label: "nightly \"a\"".into(),
                test: "rr1c-1x1--1".into(),
                pair: pair.into(),
                metric,
                environment: "0123456789abcdef".into(),
            },
            value,
            started_ms: 1_700_000_000_500,
        };
        let text = exposition(&[
            l(Metric::Throughput, "n1-pod->n2-pod", 1.5e9),
            l(Metric::TimeMean, "", 42.25),
        ]);
        assert!(
            text.contains("# TYPE linkperf_throughput_bytes_per_s gauge\n"),
            "{text}"
        );
        assert!(text.contains(
            "linkperf_throughput_bytes_per_s{label=\"nightly \\\"a\\\"\",test=\"rr1c-1x1--1\",source=\"n1-pod\",target=\"n2-pod\",environment=\"0123456789abcdef\"} 1500000000\n"
        ), "{text}");
        assert!(text.contains("linkperf_transaction_time_us_mean{label=\"nightly \\\"a\\\"\",test=\"rr1c-1x1--1\",environment=\"0123456789abcdef\"} 42.25\n"), "{text}");
        assert!(text.contains("} 1700000000.5\n"), "{text}");
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(exposition(&[]), "# EOF\n");
    }
}
