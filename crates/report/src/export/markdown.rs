//! Markdown: the summary, the consistency notes, and per workload the
//! break-even and saturation notes and a table of absolute and relative
//! values, for a terminal, an issue or a wiki page.

use std::fmt::Write as _;

use super::Exporter;
use crate::compare::{CandidateComparison, TestComparison};
use crate::significance::Outcome;
use crate::units::percent;
use crate::{Metric, Report, ReportError, WorkloadReport};

/// The report as Markdown.
#[derive(Debug, Clone, Copy, Default)]
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn name(&self) -> &'static str {
        "md"
    }

    fn file_name(&self, comparison: bool) -> &'static str {
        if comparison {
            "comparison.md"
        } else {
            "report.md"
        }
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut s = String::new();
        if report.is_comparison() {
            comparison(report, &mut s);
        } else {
            single(report, &mut s);
        }
        Ok(s)
    }
}

/// The consistency notes as list items (the caller says "Nothing to point
/// out." when there are none).
pub(crate) fn consistency_lines(report: &Report) -> Vec<String> {
    let c = &report.consistency;
    let mut lines = Vec::new();
    if !c.environment.is_empty() {
        let diffs: Vec<String> = c.environment.iter().map(|d| d.describe()).collect();
        lines.push(format!(
            "Environments differ: {}. Unless that is what is being compared, it is part of every difference below.",
            diffs.join("; ")
        ));
    }
    for d in &c.placement {
        lines.push(format!(
            "Placement differs in {}: {} in {}; {} in {}. On one host whether the sides share CPUs moves request/response results by several times: rerun both with the same placement (same, split or free).",
            d.side, d.base, d.base_label, d.candidate, d.candidate_label
        ));
    }
    lines.extend(c.offered.iter().cloned());
    for t in &c.unstable {
        lines.push(format!("Unstable: {} {}: {}", t.label, t.test, t.reason));
    }
    lines.extend(c.stability_unjudged.iter().cloned());
    for t in &c.failed {
        lines.push(format!("Failed runs: {} {}: {}", t.label, t.test, t.reason));
    }
    for t in &c.suspect {
        lines.push(format!(
            "Suspect runs: {} {}: {}",
            t.label, t.test, t.reason
        ));
    }
    for t in &c.incomplete {
        lines.push(format!(
            "Incomplete runs: {} {}: {}",
            t.label, t.test, t.reason
        ));
    }
    lines.extend(c.capacity.iter().cloned());
    lines.extend(c.counting.iter().cloned());
    for cmp in &report.comparisons {
        if !cmp.only_in_base.is_empty() {
            lines.push(format!(
                "Only in {} (not compared): {}",
                cmp.base,
                cmp.only_in_base.join(", ")
            ));
        }
        if !cmp.only_in_candidate.is_empty() {
            lines.push(format!(
                "Only in {} (not compared): {}",
                cmp.candidate,
                cmp.only_in_candidate.join(", ")
            ));
        }
        for n in &cmp.not_compared {
            lines.push(format!("No data: {}: {}", n.name, n.reason));
        }
    }
    lines
}

fn comparison(report: &Report, s: &mut String) {
    let _ = writeln!(s, "# linkperf comparison: {}\n", report.title());
    if let Some(note) = report.suspect_note() {
        let _ = writeln!(s, "**{note}**\n");
    }
    for c in &report.comparisons {
        let _ = writeln!(s, "{}\n", c.summary);
    }
    for t in report.insufficient() {
        let _ = writeln!(s, "{t}\n");
    }
    for c in &report.comparisons {
        let _ = writeln!(s, "{}", c.method_note);
    }
    let side = report.options.cpu_side;
    let _ = writeln!(
        s,
        "Verdicts come from throughput, mean transaction time and {} CPU efficiency (system-wide). Relative differences are positive when the candidate is better; a difference in parentheses is within the threshold, one followed by ? is inconclusive (the runs show neither a difference nor its absence).\n",
        side
    );
    let _ = writeln!(
        s,
        "| candidate | better | same | worse | inconclusive | mixed | no data | compared |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for c in &report.comparisons {
        let n = &c.counts;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.candidate,
            n.better,
            n.same,
            n.worse,
            n.inconclusive,
            n.mixed,
            n.no_data,
            n.total()
        );
    }
    consistency(report, s);
    for w in &report.workloads {
        let _ = writeln!(s, "\n## {}\n", w.title);
        notes(w, s);
        for c in &report.comparisons {
            let tests = c.workload(&w.key);
            if tests.is_empty() {
                continue;
            }
            if report.comparisons.len() > 1 {
                let _ = writeln!(s, "### {} against {}\n", c.candidate, c.base);
            }
            comparison_table(report, w, c, &tests, s);
        }
    }
    open_loop(report, s);
    files(report, s);
}

fn consistency(report: &Report, s: &mut String) {
    let _ = writeln!(s, "\n## Consistency\n");
    let lines = consistency_lines(report);
    if lines.is_empty() {
        let _ = writeln!(s, "Nothing to point out.");
    }
    for l in lines {
        let _ = writeln!(s, "- {l}");
    }
}

fn notes(w: &WorkloadReport, s: &mut String) {
    let mut any = false;
    for b in &w.break_even {
        let _ = writeln!(s, "- {}: {}", b.candidate, b.text);
        any = true;
    }
    for n in &w.saturation {
        let _ = writeln!(s, "- {}", n.text);
        any = true;
    }
    for n in &w.sufficiency {
        let _ = writeln!(s, "- {}", n.text);
        any = true;
    }
    if any {
        s.push('\n');
    }
}

/// A relative difference; in parentheses when within the noise.
pub(crate) fn delta(t: &TestComparison, metric: Metric) -> String {
    match t.metric(metric) {
        Some(m) if m.judgement.outcome == Outcome::Same => {
            format!("({})", percent(m.judgement.relative_pct))
        }
        Some(m) if m.judgement.outcome == Outcome::Inconclusive => {
            format!("{}?", percent(m.judgement.relative_pct))
        }
        Some(m) => percent(m.judgement.relative_pct),
        None => "n/a".into(),
    }
}

/// A metric's base and candidate means of `tests` in one unit (both
/// columns, so that they read side by side).
pub(crate) fn compared_column(tests: &[&TestComparison], m: Metric) -> crate::Column {
    m.column(
        tests
            .iter()
            .filter_map(|t| t.metric(m))
            .flat_map(|j| [j.judgement.base_mean, j.judgement.candidate_mean]),
    )
}

fn comparison_table(
    report: &Report,
    w: &WorkloadReport,
    c: &CandidateComparison,
    tests: &[&TestComparison],
    s: &mut String,
) {
    let transactional = crate::figures::transactional(&w.kind);
    let headline = Metric::headline(report.options.cpu_side).map(|m| m.shown_for(transactional));
    let columns = headline.map(|m| compared_column(tests, m));
    let mut header = String::from("| users |");
    let mut rule = String::from("|---:|");
    for m in headline {
        let _ = write!(
            header,
            " {} {} | {} {} | Δ |",
            m.label(),
            c.base,
            m.label(),
            c.candidate
        );
        rule.push_str("---:|---:|---:|");
    }
    header.push_str(" verdict |");
    rule.push_str("---|");
    let _ = writeln!(s, "{header}\n{rule}");
    for t in tests {
        let mut row = format!("| {} |", t.users);
        for (m, col) in headline.into_iter().zip(&columns) {
            let (b, cand) = match t.metric(m) {
                Some(j) => (
                    col.format(j.judgement.base_mean),
                    col.format(j.judgement.candidate_mean),
                ),
                None => ("n/a".into(), "n/a".into()),
            };
            let _ = write!(row, " {b} | {cand} | {} |", delta(t, m));
        }
        let note = t
            .verdict_notes()
            .map_or_else(String::new, |n| format!(" ({n})"));
        let _ = writeln!(s, "{row} {}{note} |", t.verdict.word());
    }
}

fn single(report: &Report, s: &mut String) {
    let _ = writeln!(s, "# linkperf report: {}\n", report.title());
    let f = &report.figures[0];
    let runs = f.tests.iter().map(|t| t.ok_runs).max().unwrap_or(0);
    let _ = writeln!(
        s,
        "{} test{}, up to {runs} ok run{} each; ± is the half width of the 95% confidence interval of the mean.",
        f.tests.len(),
        if f.tests.len() == 1 { "" } else { "s" },
        if runs == 1 { "" } else { "s" }
    );
    for t in report.insufficient() {
        let _ = writeln!(s, "\n{t}");
    }
    consistency(report, s);
    let eff = Metric::headline(report.options.cpu_side)[2];
    for w in &report.workloads {
        let _ = writeln!(s, "\n## {}\n", w.title);
        notes(w, s);
        let _ = writeln!(
            s,
            "| users | runs | throughput | ± | transactions/s | mean transaction time | p99 transaction time | {} |",
            eff.label()
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
        let rows = f.workload(&w.key);
        // Each column in one unit, from its largest mean (the ± in the
        // throughput's).
        let column = |m: Metric| m.column(rows.iter().filter_map(|t| t.mean(m)));
        let columns: std::collections::HashMap<Metric, crate::Column> = [
            Metric::Throughput,
            Metric::TransactionRate,
            Metric::TimeMean,
            Metric::TimeP99,
            eff,
        ]
        .into_iter()
        .map(|m| (m, column(m)))
        .collect();
        for t in &rows {
            let fmt = |m: Metric| {
                t.metrics
                    .get(&m)
                    .map_or_else(|| "n/a".to_string(), |st| columns[&m].format(st.mean))
            };
            let ci = t
                .metrics
                .get(&Metric::Throughput)
                .and_then(|st| st.ci95_high.map(|h| h - st.mean))
                .map_or_else(
                    || "-".to_string(),
                    |h| columns[&Metric::Throughput].format(h),
                );
            let note = if t.unstable { " (unstable)" } else { "" };
            let _ = writeln!(
                s,
                "| {}{note} | {} | {} | {ci} | {} | {} | {} | {} |",
                t.users,
                t.ok_runs,
                fmt(Metric::Throughput),
                fmt(Metric::TransactionRate),
                fmt(Metric::TimeMean),
                fmt(Metric::TimeP99),
                fmt(eff),
            );
        }
    }
    open_loop(report, s);
    files(report, s);
}

/// The metrics of an open-loop comparison table: the achieved rate and the
/// transaction time's percentiles.
pub(crate) const OPEN_LOOP_METRICS: [Metric; 4] = [
    Metric::TransactionRate,
    Metric::TimeP50,
    Metric::TimeP99,
    Metric::TimeP999,
];

/// A metric's heading in the open-loop tables: "achieved", "p50", ….
pub(crate) fn open_loop_heading(m: Metric) -> &'static str {
    match m {
        Metric::TransactionRate => "achieved",
        Metric::TimeP50 => "p50",
        Metric::TimeP99 => "p99",
        Metric::TimeP999 => "p99.9",
        other => other.label(),
    }
}

/// Per open-loop group: each file's knee, its figures per offered rate,
/// and per candidate the differences at equal offered load.
fn open_loop(report: &Report, s: &mut String) {
    for g in &report.open_loop {
        let _ = writeln!(s, "\n## {}, open loop\n", g.title);
        for c in &g.curves {
            let _ = writeln!(s, "- {}", c.text);
        }
        let _ = writeln!(
            s,
            "\nTransaction time from each transaction's due time (means over the ok runs); achieved: transactions answered per second.\n"
        );
        let _ = writeln!(
            s,
            "| offered | file | ok runs | achieved | p50 | p99 | p99.9 | note |"
        );
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---|");
        // The three percentiles' columns in one unit, from the largest.
        let unit = crate::units::Scale::TIME_US.unit_for(
            g.curves
                .iter()
                .flat_map(|c| &c.points)
                .flat_map(|p| [p.p50_us, p.p99_us, p.p999_us])
                .flatten(),
        );
        for rate in &g.rates_per_s {
            for c in &g.curves {
                let Some(p) = c.points.iter().find(|p| p.offered_per_s == *rate) else {
                    continue;
                };
                let time = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |v| unit.format(v));
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    crate::figures::rate_label(*rate),
                    c.label,
                    p.ok_runs,
                    p.achieved_per_s
                        .map_or_else(|| "n/a".into(), crate::units::per_s),
                    time(p.p50_us),
                    time(p.p99_us),
                    time(p.p999_us),
                    point_note(p)
                );
            }
        }
        for c in &report.comparisons {
            let tests: Vec<&TestComparison> = c
                .workload(&g.key)
                .into_iter()
                .filter(|t| t.users == g.users)
                .collect();
            if tests.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "\n### {} against {}, at equal offered load\n",
                c.candidate, c.base
            );
            let mut header = String::from("| offered |");
            let mut rule = String::from("|---:|");
            for m in OPEN_LOOP_METRICS {
                let h = open_loop_heading(m);
                let _ = write!(header, " {h} {} | {h} {} | Δ |", c.base, c.candidate);
                rule.push_str("---:|---:|---:|");
            }
            let _ = writeln!(s, "{header} verdict |\n{rule}---|");
            let columns = OPEN_LOOP_METRICS.map(|m| compared_column(&tests, m));
            for t in &tests {
                let rate = t
                    .offered_per_s
                    .map_or_else(String::new, crate::figures::rate_label);
                let mut row = format!("| {rate} |");
                for (m, col) in OPEN_LOOP_METRICS.into_iter().zip(&columns) {
                    let (b, cand) = match t.metric(m) {
                        Some(j) => (
                            col.format(j.judgement.base_mean),
                            col.format(j.judgement.candidate_mean),
                        ),
                        None => ("n/a".into(), "n/a".into()),
                    };
                    let _ = write!(row, " {b} | {cand} | {} |", delta(t, m));
                }
                let note = t
                    .verdict_notes()
                    .map_or_else(String::new, |n| format!(" ({n})"));
                let _ = writeln!(s, "{row} {}{note} |", t.verdict.word());
            }
        }
    }
}

/// What an open-loop point's row adds: the achieved rate short of the
/// offered, suspect runs left out.
pub(crate) fn point_note(p: &crate::LoadPoint) -> String {
    let mut notes = Vec::new();
    if p.falls_short() {
        notes.push("achieved short of offered".to_string());
    }
    if p.suspect_runs > 0 {
        notes.push(format!(
            "{} suspect run{} left out ({})",
            p.suspect_runs,
            if p.suspect_runs == 1 { "" } else { "s" },
            p.suspect_reasons.join(", ")
        ));
    }
    notes.join("; ")
}

fn files(report: &Report, s: &mut String) {
    let _ = writeln!(s, "\n## Files\n");
    for f in &report.files {
        let _ = writeln!(
            s,
            "- {}: `{}`, {}, created {} by linkperf {}: `{}`",
            f.label,
            f.path,
            crate::units::count(f.tests as u64, "test"),
            f.created,
            f.linkperf_version,
            shell_words(&f.command_line)
        );
    }
}

/// A command line as one would type it: arguments with spaces or shell
/// characters in single quotes.
pub(crate) fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{small, small_report};
    use crate::{Options, Source};

    #[test]
    fn comparison_snapshot() {
        let md = MarkdownExporter.render(&small_report()).unwrap();
        let expected = "\
# linkperf comparison: hs against osa

hs is better in 1 of 2 tests, about the same in 1, worse in 0.

No repeated runs: a difference counts when it is larger than 2%; with a single run no significance test is possible (run the suites with --repeat 3 for one).
Verdicts come from throughput, mean transaction time and server CPU efficiency (system-wide). Relative differences are positive when the candidate is better; a difference in parentheses is within the threshold, one followed by ? is inconclusive (the runs show neither a difference nor its absence).

| candidate | better | same | worse | inconclusive | mixed | no data | compared |
|---|---:|---:|---:|---:|---:|---:|---:|
| hs | 1 | 1 | 0 | 0 | 0 | 0 | 2 |

## Consistency

- Instability cannot be judged: every test has a single run (repeat each test's runs, three times or more, to see how much they vary).

## rr1c-1x1

- hs: no crossing in 1–10 users (hs better throughout)

| users | transactions/s osa | transactions/s hs | Δ | mean transaction time osa | mean transaction time hs | Δ | server CPU efficiency (system-wide) osa | server CPU efficiency (system-wide) hs | Δ | verdict |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
| 1 | 1000/s | 1500/s | +50.0% | 20.0 µs | 15.0 µs | +25.0% | 50.0 MB/CPU-s | 60.0 MB/CPU-s | +20.0% | better |
| 10 | 4000/s | 4040/s | (+1.0%) | 50.0 µs | 49.5 µs | (+1.0%) | 50.0 MB/CPU-s | 50.0 MB/CPU-s | (+0.0%) | same |

## Files

- osa: `osa.json`, 2 tests, created 2024-05-01T10:00:00Z by linkperf 0.1.0: `linkperf suite uperf45 --label osa`
- hs: `hs.json`, 2 tests, created 2024-05-01T10:00:00Z by linkperf 0.1.0: `linkperf suite uperf45 --label hs`
";
        assert_eq!(md, expected);
    }

    #[test]
    fn one_file_snapshot() {
        let (osa, _) = small();
        let r = crate::Report::single(Source::new("osa.json", &osa), Options::default());
        let md = MarkdownExporter.render(&r).unwrap();
        let expected = "\
# linkperf report: osa

2 tests, up to 1 ok run each; ± is the half width of the 95% confidence interval of the mean.

## Consistency

- Instability cannot be judged: every test has a single run (repeat each test's runs, three times or more, to see how much they vary).

## rr1c-1x1

| users | runs | throughput | ± | transactions/s | mean transaction time | p99 transaction time | server CPU efficiency (system-wide) |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 1 | 1 | 8.0 Mbit/s | - | 1000/s | 20.0 µs | 40.0 µs | 50.0 MB/CPU-s |
| 10 | 1 | 32.0 Mbit/s | - | 4000/s | 50.0 µs | 100.0 µs | 50.0 MB/CPU-s |

## Files

- osa: `osa.json`, 2 tests, created 2024-05-01T10:00:00Z by linkperf 0.1.0: `linkperf suite uperf45 --label osa`
";
        assert_eq!(md, expected);
    }

    #[test]
    fn command_lines_are_quoted_for_a_shell() {
        let args: Vec<String> = [
            "linkperf",
            "run",
            "--label",
            "my osa",
            "-w",
            "mix:200x200*1,200x8k*3",
            "it's",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            shell_words(&args),
            "linkperf run --label 'my osa' -w 'mix:200x200*1,200x8k*3' 'it'\\''s'"
        );
    }
}
