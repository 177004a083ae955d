//! HTML: one self-contained page (inline CSS and SVG, no script, no external
//! asset) that opens from disk. On top the summary sentence and verdict
//! counts, then the consistency notes and the overview; per workload its notes
//! (break-even, saturation), charts and a table of absolute and relative values
//! coloured better/worse; at the end the environments side by side with their
//! differences highlighted and the exact commands that produced each file.

use std::fmt::Write as _;

use linkperf_metrics::Environment;

use super::markdown::{consistency_lines, shell_words};
use super::Exporter;
use crate::chart::{charts, Chart};
use crate::compare::{CandidateComparison, TestComparison, Verdict};
use crate::significance::{Method, Outcome};
use crate::units::{capacity, file_safe, percent};
use crate::{CapacityOrigin, Metric, Report, ReportError, WorkloadReport};

/// The report as one self-contained HTML page.
#[derive(Debug, Clone, Copy, Default)]
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn name(&self) -> &'static str {
        "html"
    }

    fn file_name(&self, _comparison: bool) -> &'static str {
        "index.html"
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let charts = charts(report);
        let mut page = Page {
            report,
            charts: &charts,
            out: String::new(),
        };
        page.render();
        Ok(page.out)
    }
}

const STYLE: &str = r#"
:root { --better: #d7f0dd; --better-ink: #0f5c28; --worse: #f8d9d5; --worse-ink: #8a1c12;
        --mixed: #fdefc7; --mixed-ink: #6b4d00; --same-ink: #555; --line: #d8d8d8; --diff: #fff3b0; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1240px; padding: 24px 20px 60px; color: #1d1d1d; line-height: 1.45; }
h1 { font-size: 28px; margin: 0 0 4px; }
h2 { font-size: 22px; margin: 36px 0 10px; border-bottom: 2px solid #eee; padding-bottom: 4px; }
h3 { font-size: 18px; margin: 22px 0 8px; }
.meta { color: #666; margin: 0 0 18px; font-size: 14px; }
.summary { background: #f6f8fa; border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; }
.sentence { font-size: 21px; font-weight: 600; margin: 6px 0 10px; }
.chips { display: flex; flex-wrap: wrap; gap: 8px; margin: 0 0 10px; }
.chip { border-radius: 16px; padding: 3px 14px; font-weight: 600; font-size: 15px; }
.better { background: var(--better); color: var(--better-ink); }
.worse { background: var(--worse); color: var(--worse-ink); }
.mixed { background: var(--mixed); color: var(--mixed-ink); }
.nodata { background: #eee; color: #555; }
.same { color: var(--same-ink); }
.chip.same { background: #e8e8e8; }
.method { font-size: 14px; color: #444; margin: 4px 0; }
ul.notes { padding-left: 20px; }
ul.notes li { margin: 3px 0; }
li.saturation { color: #8a1c12; }
li.none { color: #666; }
nav { margin: 18px 0; font-size: 15px; }
nav a { margin-right: 14px; }
figure { margin: 12px 0 18px; }
figure svg { width: 100%; height: auto; display: block; border: 1px solid #eee; }
.warning { background: var(--mixed); padding: 8px 12px; border-radius: 6px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: right; vertical-align: top; }
td { white-space: nowrap; }
th { background: #f3f3f3; font-weight: 600; }
td.text, th.text { text-align: left; }
td.delta { font-weight: 600; }
td.same { font-weight: normal; }
tr.diff td { background: var(--diff); }
tr.diff td.better, tr.diff td.worse { background: inherit; }
.scroll { overflow-x: auto; }
pre { background: #f6f8fa; border: 1px solid var(--line); padding: 8px 12px; white-space: pre-wrap;
      word-break: break-all; font-size: 13px; }
details { margin: 6px 0 14px; }
summary { cursor: pointer; color: #0645ad; }
footer { margin-top: 40px; color: #777; font-size: 13px; }
"#;

struct Page<'a> {
    report: &'a Report,
    charts: &'a [Chart],
    out: String,
}

/// Text for HTML.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Better => "better",
        Outcome::Worse => "worse",
        Outcome::Same => "same",
    }
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::Same => "same",
        Verdict::Mixed => "mixed",
        Verdict::NoData => "nodata",
    }
}

fn anchor(w: &WorkloadReport) -> String {
    format!("w-{}", file_safe(&w.title))
}

impl Page<'_> {
    fn w(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn render(&mut self) {
        let r = self.report;
        let kind = if r.is_comparison() {
            "comparison"
        } else {
            "report"
        };
        let title = format!("linkperf {kind}: {}", r.title());
        let _ = write!(
            self.out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n",
            esc(&title),
            esc(&title)
        );
        let capacity = capacity_note(r);
        let judged = if r.is_comparison() {
            format!(
                " · threshold {}% · Welch p &lt; {} with repeats",
                r.options.threshold_pct,
                crate::SIGNIFICANCE_LEVEL
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            self.out,
            "<p class=\"meta\">made by linkperf {}{judged} · CPU efficiency of the {} side · {}</p>\n</header>",
            esc(r.linkperf_version),
            r.options.cpu_side,
            esc(&capacity)
        );
        if r.is_comparison() {
            self.summary();
        } else {
            self.single_summary();
        }
        self.consistency();
        self.nav();
        if r.is_comparison() {
            self.w("<section id=\"overview\">\n<h2>Overview</h2>\n");
            for c in &r.comparisons {
                let chart = self.charts.iter().find(|ch| {
                    ch.workload.is_none() && ch.candidate.as_deref() == Some(&c.candidate)
                });
                self.figure(chart);
            }
            self.w("</section>\n");
        }
        for w in &r.workloads {
            self.workload(w);
        }
        self.environments();
        self.commands();
        let _ = writeln!(
            self.out,
            "<footer>Sign convention: positive = the candidate is better. Higher-is-better metrics (throughput, efficiency): (candidate / base − 1) × 100. Lower-is-better metrics (transaction time, CPU per transaction): (base − candidate) / base × 100. Methods: docs/reports.md.</footer>\n</body>\n</html>"
        );
    }

    fn summary(&mut self) {
        let r = self.report;
        self.w("<section class=\"summary\" id=\"summary\">\n");
        for c in &r.comparisons {
            let n = c.counts;
            let _ = writeln!(self.out, "<p class=\"sentence\">{}</p>", esc(&c.summary));
            let _ = writeln!(
                self.out,
                "<div class=\"chips\"><span class=\"chip better\">better {}</span><span class=\"chip same\">same {}</span><span class=\"chip worse\">worse {}</span><span class=\"chip mixed\">mixed {}</span><span class=\"chip nodata\">no data {}</span><span class=\"chip same\">{} tests compared</span></div>",
                n.better, n.same, n.worse, n.mixed, n.no_data, n.total()
            );
            let _ = writeln!(self.out, "<p class=\"method\">{}</p>", esc(&c.method_note));
        }
        let eff = Metric::headline(r.options.cpu_side)[2];
        let _ = writeln!(
            self.out,
            "<p class=\"method\">A test's verdict comes from its throughput, mean transaction time and {}: better when one is better by more than the noise and none worse, worse the other way round, mixed when some are better and others worse, same otherwise. In the tables, a difference in parentheses is within the noise.</p>\n</section>",
            esc(eff.label())
        );
    }

    fn single_summary(&mut self) {
        let f = &self.report.figures[0];
        let runs = f.tests.iter().map(|t| t.ok_runs).max().unwrap_or(0);
        let _ = writeln!(
            self.out,
            "<section class=\"summary\" id=\"summary\">\n<p class=\"sentence\">{} tests of {}, up to {runs} ok run(s) each.</p>\n<p class=\"method\">Absolute figures: means over each test's ok runs; ± is the half width of the 95% confidence interval of the mean (with repeats).</p>\n</section>",
            f.tests.len(),
            esc(&f.label)
        );
    }

    fn consistency(&mut self) {
        let lines = consistency_lines(self.report);
        self.w("<section id=\"consistency\">\n<h2>Consistency</h2>\n");
        if lines.is_empty() {
            self.w("<p>Nothing to point out: no unstable or failed test, no unmatched test, and the environments agree in kernel, CPU count, MTU and linkperf version.</p>\n");
        } else {
            self.w("<ul class=\"notes\">\n");
            for l in lines {
                let _ = writeln!(self.out, "<li>{}</li>", esc(&l));
            }
            self.w("</ul>\n");
        }
        self.w("</section>\n");
    }

    fn nav(&mut self) {
        self.w("<nav>");
        if self.report.is_comparison() {
            self.w("<a href=\"#overview\">overview</a>");
        }
        for w in &self.report.workloads {
            let _ = write!(self.out, "<a href=\"#{}\">{}</a>", anchor(w), esc(&w.title));
        }
        self.w(
            "<a href=\"#environments\">environments</a><a href=\"#commands\">commands</a></nav>\n",
        );
    }

    fn figure(&mut self, chart: Option<&Chart>) {
        let Some(chart) = chart else { return };
        match chart.svg() {
            Ok(svg) => {
                let _ = writeln!(
                    self.out,
                    "<figure id=\"chart-{}\">{}</figure>",
                    esc(&chart.name),
                    svg.trim()
                );
            }
            Err(e) => {
                let _ = writeln!(
                    self.out,
                    "<p class=\"warning\">Chart {} not drawn: failed to {}</p>",
                    esc(&chart.name),
                    esc(&e.to_string())
                );
            }
        }
    }

    fn workload(&mut self, w: &WorkloadReport) {
        let r = self.report;
        let _ = writeln!(
            self.out,
            "<section class=\"workload\" id=\"{}\">\n<h2>{}</h2>",
            anchor(w),
            esc(&w.title)
        );
        self.w("<ul class=\"notes\">\n");
        for b in &w.break_even {
            let _ = writeln!(
                self.out,
                "<li class=\"breakeven\">{}: {}</li>",
                esc(&b.candidate),
                esc(&b.text)
            );
        }
        for s in &w.saturation {
            let _ = writeln!(self.out, "<li class=\"saturation\">{}</li>", esc(&s.text));
        }
        let saturated: Vec<&str> = w.saturation.iter().map(|s| s.label.as_str()).collect();
        for f in &r.files {
            if !saturated.contains(&f.label.as_str()) {
                let _ = writeln!(
                    self.out,
                    "<li class=\"none\">{}: no saturation found in {} users.</li>",
                    esc(&f.label),
                    users_range(&w.users)
                );
            }
        }
        self.w("</ul>\n");
        for c in &r.comparisons {
            let chart = self.charts.iter().find(|ch| {
                ch.workload.as_ref() == Some(&w.key)
                    && ch.candidate.as_deref() == Some(&c.candidate)
            });
            self.figure(chart);
            let tests = c.workload(&w.key);
            if !tests.is_empty() {
                self.comparison_table(c, &tests);
            }
        }
        if !r.is_comparison() {
            self.single_table(w);
        }
        let absolute: Vec<&Chart> = self
            .charts
            .iter()
            .filter(|ch| ch.workload.as_ref() == Some(&w.key) && ch.candidate.is_none())
            .collect();
        for chart in absolute {
            self.figure(Some(chart));
        }
        self.w("</section>\n");
    }

    fn comparison_table(&mut self, c: &CandidateComparison, tests: &[&TestComparison]) {
        let headline = Metric::headline(self.report.options.cpu_side);
        let _ = writeln!(
            self.out,
            "<h3>{} against {}</h3>\n<div class=\"scroll\"><table>\n<tr><th rowspan=\"2\">users</th>",
            esc(&c.candidate),
            esc(&c.base)
        );
        for m in headline {
            let _ = write!(self.out, "<th colspan=\"3\">{}</th>", esc(m.label()));
        }
        self.w("<th rowspan=\"2\">verdict</th><th rowspan=\"2\">runs</th></tr>\n<tr>");
        for _ in headline {
            let _ = write!(
                self.out,
                "<th>{}</th><th>{}</th><th>Δ</th>",
                esc(&c.base),
                esc(&c.candidate)
            );
        }
        self.w("</tr>\n");
        for t in tests {
            let _ = write!(self.out, "<tr><td>{}</td>", t.users);
            for m in headline {
                self.delta_cells(t, m);
            }
            let notes = t
                .verdict_notes()
                .map_or_else(String::new, |n| format!(" ({n})"));
            let _ = writeln!(
                self.out,
                "<td class=\"text {}\">{}{}</td><td>{} / {}</td></tr>",
                verdict_class(t.verdict),
                t.verdict.word(),
                esc(&notes),
                t.base_runs,
                t.candidate_runs
            );
        }
        self.w("</table></div>\n");
        // Every metric, for those who want the rest.
        let _ = writeln!(
            self.out,
            "<details><summary>All metrics of {} against {}</summary>\n<div class=\"scroll\"><table>\n<tr><th class=\"text\">metric</th>{}</tr>",
            esc(&c.candidate),
            esc(&c.base),
            tests
                .iter()
                .map(|t| format!("<th colspan=\"3\">{} users</th>", t.users))
                .collect::<String>()
        );
        for m in Metric::ALL {
            if tests.iter().all(|t| t.metric(m).is_none()) {
                continue;
            }
            let _ = write!(self.out, "<tr><td class=\"text\">{}</td>", esc(m.label()));
            for t in tests {
                self.delta_cells(t, m);
            }
            self.w("</tr>\n");
        }
        self.w("</table></div>\n</details>\n");
    }

    /// Base value, candidate value and coloured difference of one metric.
    fn delta_cells(&mut self, t: &TestComparison, m: Metric) {
        match t.metric(m) {
            Some(mc) => {
                let j = &mc.judgement;
                let text = percent(j.relative_pct);
                let shown = if j.outcome == Outcome::Same {
                    format!("({text})")
                } else {
                    text
                };
                let how = match (j.method, j.p_value) {
                    (Method::Welch, Some(p)) => format!("Welch p = {p:.3}"),
                    (Method::ConstantRuns, _) => "runs did not vary: threshold alone".into(),
                    _ => "single run: threshold alone".into(),
                };
                let _ = write!(
                    self.out,
                    "<td>{}</td><td>{}</td><td class=\"delta {}\" title=\"{}\">{}</td>",
                    esc(&m.format(j.base_mean)),
                    esc(&m.format(j.candidate_mean)),
                    outcome_class(j.outcome),
                    esc(&how),
                    esc(&shown)
                );
            }
            None => self.w("<td>n/a</td><td>n/a</td><td>n/a</td>"),
        }
    }

    fn single_table(&mut self, w: &WorkloadReport) {
        let f = &self.report.figures[0];
        let eff = Metric::headline(self.report.options.cpu_side)[2];
        let _ = writeln!(
            self.out,
            "<div class=\"scroll\"><table>\n<tr><th>users</th><th>runs</th><th>throughput</th><th>±</th><th>transactions/s</th><th>mean transaction time</th><th>±</th><th>p99 transaction time</th><th>{}</th><th class=\"text\">note</th></tr>",
            esc(eff.label())
        );
        for t in f.workload(&w.key) {
            let mean = |m: Metric| {
                t.metrics
                    .get(&m)
                    .map_or_else(|| "n/a".to_string(), |s| m.format(s.mean))
            };
            let half = |m: Metric| {
                t.metrics
                    .get(&m)
                    .and_then(|s| s.ci95_high.map(|h| m.format(h - s.mean)))
                    .unwrap_or_else(|| "-".into())
            };
            let note = if t.unstable {
                format!(
                    "unstable (throughput CV {:.1}%)",
                    t.throughput_cv.unwrap_or(0.0) * 100.0
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                self.out,
                "<tr><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
                t.users,
                t.ok_runs,
                t.runs,
                esc(&mean(Metric::Throughput)),
                esc(&half(Metric::Throughput)),
                esc(&mean(Metric::TransactionRate)),
                esc(&mean(Metric::TimeMean)),
                esc(&half(Metric::TimeMean)),
                esc(&mean(Metric::TimeP99)),
                esc(&mean(eff)),
                esc(&note)
            );
        }
        self.w("</table></div>\n");
    }

    fn environments(&mut self) {
        let r = self.report;
        self.w("<section id=\"environments\">\n<h2>Environments</h2>\n<p>Each file's client and server hosts, and how its tests were set up. A highlighted row differs between the files on the same side.</p>\n<div class=\"scroll\"><table>\n<tr><th class=\"text\"></th>");
        for f in &r.files {
            let _ = write!(
                self.out,
                "<th class=\"text\">{} client</th><th class=\"text\">{} server</th>",
                esc(&f.label),
                esc(&f.label)
            );
        }
        self.w("</tr>\n");
        type Field = fn(&Environment) -> String;
        let fields: Vec<(&str, Field)> = vec![
            ("hostname", |e| e.hostname.clone()),
            ("kernel", |e| e.kernel.clone()),
            ("OS", |e| e.os.clone()),
            ("CPU model", |e| e.cpu_model.clone()),
            ("CPU count", |e| e.cpu_count.to_string()),
            ("interface", |e| {
                e.interface.clone().unwrap_or_else(|| "-".into())
            }),
            ("MTU", |e| {
                e.mtu.map_or_else(|| "-".into(), |m| m.to_string())
            }),
            ("congestion control", |e| {
                e.congestion_control.clone().unwrap_or_else(|| "-".into())
            }),
            ("tcp_rmem", |e| {
                e.tcp_rmem.clone().unwrap_or_else(|| "-".into())
            }),
            ("tcp_wmem", |e| {
                e.tcp_wmem.clone().unwrap_or_else(|| "-".into())
            }),
            ("socket SO_SNDBUF", |e| {
                e.socket_sndbuf
                    .map_or_else(|| "-".into(), |b| b.to_string())
            }),
            ("socket SO_RCVBUF", |e| {
                e.socket_rcvbuf
                    .map_or_else(|| "-".into(), |b| b.to_string())
            }),
            ("socket TCP_NODELAY", |e| {
                e.socket_nodelay
                    .map_or_else(|| "-".into(), |on| if on { "on" } else { "off" }.into())
            }),
            ("linkperf version", |e| e.linkperf_version.clone()),
        ];
        for (name, get) in fields {
            let client: Vec<String> = r
                .files
                .iter()
                .map(|f| {
                    f.environment
                        .client
                        .as_ref()
                        .map_or_else(|| "-".into(), get)
                })
                .collect();
            let server: Vec<String> = r
                .files
                .iter()
                .map(|f| {
                    f.environment
                        .server
                        .as_ref()
                        .map_or_else(|| "-".into(), get)
                })
                .collect();
            let differs = |v: &[String]| v.iter().any(|x| *x != v[0]);
            let class = if differs(&client) || differs(&server) {
                " class=\"diff\""
            } else {
                ""
            };
            let _ = write!(self.out, "<tr{class}><td class=\"text\">{}</td>", esc(name));
            for (c, s) in client.iter().zip(&server) {
                let _ = write!(
                    self.out,
                    "<td class=\"text\">{}</td><td class=\"text\">{}</td>",
                    esc(c),
                    esc(s)
                );
            }
            self.w("</tr>\n");
        }
        // File-wide rows: the link, the suite, the test settings (one cell per file).
        let mut rows: Vec<(String, Vec<String>)> = vec![
            (
                "link".into(),
                r.files
                    .iter()
                    .map(|f| match &f.link {
                        Some(l) => match l.capacity_bits_per_s {
                            Some(c) => format!("{} ({})", l.configuration, capacity(c)),
                            None => l.configuration.clone(),
                        },
                        None => "not recorded".into(),
                    })
                    .collect(),
            ),
            (
                "suite".into(),
                r.files
                    .iter()
                    .map(|f| f.suite.clone().unwrap_or_else(|| "-".into()))
                    .collect(),
            ),
            (
                "created".into(),
                r.files.iter().map(|f| f.created.clone()).collect(),
            ),
        ];
        if let Some(first) = r.files.first() {
            for (i, (name, _)) in first.settings.iter().enumerate() {
                rows.push((
                    name.clone(),
                    r.files
                        .iter()
                        .map(|f| f.settings.get(i).map(|s| s.1.clone()).unwrap_or_default())
                        .collect(),
                ));
            }
        }
        for (name, values) in rows {
            let differs = values.iter().any(|v| *v != values[0]) && name != "created";
            let class = if differs { " class=\"diff\"" } else { "" };
            let _ = write!(
                self.out,
                "<tr{class}><td class=\"text\">{}</td>",
                esc(&name)
            );
            for v in values {
                let _ = write!(
                    self.out,
                    "<td class=\"text\" colspan=\"2\">{}</td>",
                    esc(&v)
                );
            }
            self.w("</tr>\n");
        }
        self.w("</table></div>\n</section>\n");
    }

    fn commands(&mut self) {
        self.w("<section id=\"commands\">\n<h2>Commands</h2>\n<p>The exact commands that produced each results file, to reproduce it.</p>\n");
        for f in &self.report.files {
            let _ = writeln!(
                self.out,
                "<h3>{} <small>({})</small></h3>\n<pre>{}</pre>",
                esc(&f.label),
                esc(&f.path),
                esc(&shell_words(&f.command_line))
            );
            if let Some(link) = &f.link {
                if !link.commands.is_empty() {
                    let _ = writeln!(
                        self.out,
                        "<p>The link ({}) was set up with:</p>\n<pre>{}</pre>",
                        esc(&link.configuration),
                        esc(&link.commands.join("\n"))
                    );
                }
            }
        }
        self.w("</section>\n");
    }
}

/// The link capacities saturation was judged against: "link capacity 1
/// Gbit/s (command line)" when one was given for every file, else per file.
fn capacity_note(r: &Report) -> String {
    let all_given = r
        .files
        .iter()
        .all(|f| f.capacity_origin == Some(CapacityOrigin::AllFiles));
    match r.options.capacity_bits_per_s {
        Some(c) if all_given => {
            return format!("link capacity {} (command line)", capacity(c.as_f64()))
        }
        _ => {}
    }
    if r.files.iter().all(|f| f.capacity_bits_per_s.is_none()) {
        return "link capacity not known (none given, none recorded)".into();
    }
    let each: Vec<String> = r
        .files
        .iter()
        .map(|f| match (f.capacity_bits_per_s, f.capacity_origin) {
            (Some(c), Some(o)) => {
                format!("{} {} ({})", f.label, capacity(c.as_f64()), o.describe())
            }
            _ => format!("{} not known", f.label),
        })
        .collect();
    format!("link capacity: {}", each.join(", "))
}

/// "1–250" or "10".
fn users_range(users: &[u32]) -> String {
    match (users.first(), users.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
        (Some(a), _) => a.to_string(),
        _ => "no".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{small, small_report};
    use crate::{Options, Source};

    #[test]
    fn the_page_leads_with_the_summary_and_is_self_contained() {
        let html = HtmlExporter.render(&small_report()).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
        let sentence = html
            .find("hs is better in 1 of 2 tests, about the same in 1, worse in 0.")
            .expect("summary sentence");
        let counts = html.find("better 1</span>").expect("verdict counts");
        let workload = html.find("<h2>rr1c-1x1</h2>").expect("workload section");
        let environments = html.find("<h2>Environments</h2>").expect("environments");
        let commands = html.find("<h2>Commands</h2>").expect("commands");
        assert!(
            sentence < counts
                && counts < workload
                && workload < environments
                && environments < commands
        );
        // Nothing to fetch: no script, no stylesheet link, no image or URL
        // other than SVG's namespace.
        for forbidden in ["<script", "<link", "<img", "src=", "url(", "@import"] {
            assert!(!html.contains(forbidden), "{forbidden}");
        }
        let without_ns = html.replace("http://www.w3.org/2000/svg", "");
        assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
        // Charts inline: the overview, the workload's relative chart, its two
        // absolute charts.
        assert_eq!(html.matches("<svg").count(), 4, "charts inline");
        // Coloured differences, the exact commands.
        assert!(html.contains(
            "<td class=\"delta better\" title=\"single run: threshold alone\">+50.0%</td>"
        ));
        assert!(html.contains(
            "<td class=\"delta same\" title=\"single run: threshold alone\">(+1.0%)</td>"
        ));
        assert!(html.contains("<pre>linkperf suite uperf45 --label osa</pre>"));
        assert!(html.contains("no crossing in 1–10 users (hs better throughout)"));
    }

    #[test]
    fn environments_that_differ_are_highlighted() {
        let (osa, mut hs) = small();
        hs.environment.client.as_mut().unwrap().mtu = Some(9000);
        let r = crate::Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        );
        let html = HtmlExporter.render(&r).unwrap();
        assert!(
            html.contains("<tr class=\"diff\"><td class=\"text\">MTU</td>"),
            "MTU row highlighted"
        );
        assert!(
            html.contains("<tr><td class=\"text\">kernel</td>"),
            "kernel row not highlighted"
        );
        assert!(html.contains("MTU (client): 65536 in osa, 9000 in hs"));
    }

    #[test]
    fn the_capacities_judged_against_are_said_per_file() {
        let (osa, hs) = small();
        let page = |hs_cap, all| {
            let r = crate::Report::comparison(
                Source::new("osa.json", &osa),
                &[Source::new("hs.json", &hs).with_capacity(hs_cap)],
                Options {
                    capacity_bits_per_s: all,
                    ..Options::default()
                },
            );
            HtmlExporter.render(&r).unwrap()
        };
        let gbit = Some(linkperf_workload::BitsPerSecond(1_000_000_000));
        assert!(page(None, None).contains("link capacity not known (none given, none recorded)"));
        assert!(page(None, gbit).contains("link capacity 1 Gbit/s (command line)"));
        assert!(page(gbit, None)
            .contains("link capacity: osa not known, hs 1 Gbit/s (given for this file)"));
        assert!(page(gbit, Some(linkperf_workload::BitsPerSecond(10_000_000_000))).contains(
            "link capacity: osa 10 Gbit/s (given for every file), hs 1 Gbit/s (given for this file)"
        ));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        let (mut osa, hs) = small();
        osa.label = "<b>osa</b>".into();
        let r = crate::Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        );
        let html = HtmlExporter.render(&r).unwrap();
        assert!(!html.contains("<b>osa</b>"));
        assert!(html.contains("&lt;b&gt;osa&lt;/b&gt;"));
    }
}
