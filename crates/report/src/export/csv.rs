//! CSV, one row per test and metric (the long form, for spreadsheets and
//! scripts). A comparison has one row per candidate, test and metric with both
//! means and the relative difference; a one-file report one row per test and
//! metric with its statistics. Numbers are plain (no units, no `%`, `.` as
//! decimal point); an empty field is "not known". Columns: docs/reports.md.

use std::fmt::Write as _;

use super::Exporter;
use crate::{Report, ReportError};

/// The report as CSV.
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvExporter;

/// Columns of a comparison.
const COMPARISON_COLUMNS: &str = "base,candidate,test,workload,protocol,users,metric,unit,better,headline,base_mean,candidate_mean,relative_pct,p_value,method,outcome,verdict,base_runs,candidate_runs,unstable,verdict_note,base_suspect_runs,candidate_suspect_runs,interval_low_pct,interval_high_pct,power";

/// Columns of a one-file report.
const SINGLE_COLUMNS: &str =
    "label,test,workload,protocol,users,metric,unit,runs,mean,stddev,ci95_low,ci95_high,min,max,unstable,runs_missing";

impl Exporter for CsvExporter {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn file_name(&self, comparison: bool) -> &'static str {
        if comparison {
            "comparison.csv"
        } else {
            "report.csv"
        }
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut out = String::new();
        if report.is_comparison() {
            out.push_str(COMPARISON_COLUMNS);
            out.push('\n');
            for c in &report.comparisons {
                for t in &c.tests {
                    for m in &t.metrics {
                        let j = &m.judgement;
                        let row = [
                            field(&c.base),
                            field(&c.candidate),
                            field(&t.name),
                            field(&t.workload.workload),
                            t.workload.protocol.to_string(),
                            t.users.to_string(),
                            m.metric.key().to_string(),
                            field(m.metric.unit()),
                            word(&m.metric.better()),
                            m.headline.to_string(),
                            j.base_mean.to_string(),
                            j.candidate_mean.to_string(),
                            j.relative_pct.to_string(),
                            j.p_value.map(|p| p.to_string()).unwrap_or_default(),
                            word(&j.method),
                            word(&j.outcome),
                            t.verdict.word().to_string(),
                            t.base_runs.to_string(),
                            t.candidate_runs.to_string(),
                            t.unstable.to_string(),
                            field(&t.verdict_note().unwrap_or_default()),
                            suspect(report, &c.base, &t.name).to_string(),
                            suspect(report, &c.candidate, &t.name).to_string(),
                            j.interval_pct.map(|i| i[0].to_string()).unwrap_or_default(),
                            j.interval_pct.map(|i| i[1].to_string()).unwrap_or_default(),
                            j.power.map(|p| p.to_string()).unwrap_or_default(),
                        ];
                        let _ = writeln!(out, "{}", row.join(","));
                    }
                }
                // A test with no clean run on a side: its verdict and why,
                // no metric.
                for n in &c.not_compared {
                    let mut row = vec![field(&c.base), field(&c.candidate), field(&n.name)];
                    row.extend(std::iter::repeat_n(String::new(), 13));
                    row.push(n.verdict.word().to_string());
                    row.extend(std::iter::repeat_n(String::new(), 3));
                    row.push(field(&n.reason));
                    row.push(suspect(report, &c.base, &n.name).to_string());
                    row.push(suspect(report, &c.candidate, &n.name).to_string());
                    row.extend(std::iter::repeat_n(String::new(), 3));
                    let _ = writeln!(out, "{}", row.join(","));
                }
            }
        } else {
            out.push_str(SINGLE_COLUMNS);
            out.push('\n');
            for f in &report.figures {
                for t in &f.tests {
                    for metric in crate::Metric::ALL {
                        let missing = t.missing_runs.get(&metric).copied().unwrap_or(0);
                        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
                        let stats = match t.metrics.get(&metric) {
                            Some(s) => [
                                s.n.to_string(),
                                s.mean.to_string(),
                                s.stddev.to_string(),
                                opt(s.ci95_low),
                                opt(s.ci95_high),
                                s.min.to_string(),
                                s.max.to_string(),
                            ],
                            // Some ok runs lack it, so it has no statistics:
                            // the row says how many have it and how many not.
                            None if missing > 0 && missing < t.ok_runs => [
                                (t.ok_runs - missing).to_string(),
                                String::new(),
                                String::new(),
                                String::new(),
                                String::new(),
                                String::new(),
                                String::new(),
                            ],
                            // Not measured in any ok run: no row.
                            None => continue,
                        };
                        let mut row = vec![
                            field(&f.label),
                            field(&t.name),
                            field(&t.workload.workload),
                            t.workload.protocol.to_string(),
                            t.users.to_string(),
                            metric.key().to_string(),
                            field(metric.unit()),
                        ];
                        row.extend(stats);
                        row.push(t.unstable.to_string());
                        row.push(missing.to_string());
                        let _ = writeln!(out, "{}", row.join(","));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The suspect runs of test `name` in the file labelled `label`.
fn suspect(report: &Report, label: &str, name: &str) -> u32 {
    report
        .figures
        .iter()
        .find(|f| f.label == label)
        .and_then(|f| f.test(name))
        .map_or(0, |t| t.suspect_runs)
}

/// A text field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The snake_case name serde gives an enum value.
fn word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(String::from))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{small, small_report};
    use crate::{Options, Source};

    #[test]
    fn comparison_snapshot() {
        let csv = CsvExporter.render(&small_report()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        // A header and one row per test and metric: 2 tests × 12 metrics.
        assert_eq!(lines.len(), 1 + 2 * 12);
        assert_eq!(lines[0], COMPARISON_COLUMNS);
        assert_eq!(
            lines[1..4],
            [
                "osa,hs,rr1c-1x1--1,rr1c-1x1,tcp,1,throughput.bytes_per_s,bytes/s,higher,true,1000000,1500000,50,,threshold_only,better,better,1,1,false,,0,0,,,",
                "osa,hs,rr1c-1x1--1,rr1c-1x1,tcp,1,throughput.transactions_per_s,1/s,higher,false,1000,1500,50,,threshold_only,better,better,1,1,false,,0,0,,,",
                "osa,hs,rr1c-1x1--1,rr1c-1x1,tcp,1,transaction_time_us.mean,µs,lower,true,20,15,25,,threshold_only,better,better,1,1,false,,0,0,,,",
            ]
        );
        assert_eq!(
            lines[15],
            "osa,hs,rr1c-1x1--10,rr1c-1x1,tcp,10,transaction_time_us.mean,µs,lower,true,50,49.5,1,,threshold_only,same,same,1,1,false,,0,0,,,"
        );
        // Every row has as many fields as the header.
        let columns = COMPARISON_COLUMNS.split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == columns));
    }

    #[test]
    fn one_file_snapshot() {
        let (osa, _) = small();
        let r = crate::Report::single(Source::new("osa.json", &osa), Options::default());
        let csv = CsvExporter.render(&r).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 12);
        assert_eq!(lines[0], SINGLE_COLUMNS);
        assert_eq!(
            lines[1],
            "osa,rr1c-1x1--1,rr1c-1x1,tcp,1,throughput.bytes_per_s,bytes/s,1,1000000,0,,,1000000,1000000,false,0"
        );
        assert_eq!(
            lines[15],
            "osa,rr1c-1x1--10,rr1c-1x1,tcp,10,transaction_time_us.mean,µs,1,50,0,,,50,50,false,0"
        );
    }

    #[test]
    fn fields_with_commas_are_quoted() {
        assert_eq!(
            field("mix:200x200*1,200x8k*3"),
            "\"mix:200x200*1,200x8k*3\""
        );
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("plain"), "plain");
    }
}
