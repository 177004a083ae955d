//! HTML: one self-contained page (inline CSS and SVG, no script, no external
//! asset) that opens from disk. On top the summary sentence and verdict
//! counts, then the consistency notes and the overview; per workload its notes
//! (break-even, saturation), charts and a table of absolute and relative values
//! coloured better/worse; per open-loop group its knees, its latency against
//! load and its tables (html_open_loop.rs); at the end the environments side by side with their
//! differences highlighted and the exact commands that produced each file.

use std::fmt::Write as _;

use super::html_environment::capacity_note;
use super::markdown::consistency_lines;
use super::Exporter;
use crate::chart::{charts, Chart, Purpose};
use crate::compare::Verdict;
use crate::significance::Outcome;
use crate::units::file_safe;
use crate::{Metric, Report, ReportError, WorkloadReport};

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
.suspect-included { background: #fff4e5; border: 2px solid #d97706; border-radius: 8px; padding: 10px 14px; font-weight: 600; }
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
.inconclusive { color: #4a4a7a; font-style: italic; }
.chip.inconclusive { background: #e6e6f5; }
td.inconclusive { font-weight: normal; }
.method { font-size: 14px; color: #444; margin: 4px 0; }
ul.notes { padding-left: 20px; }
ul.notes li { margin: 3px 0; }
li.saturation { color: #8a1c12; }
li.insufficient { color: #8a1c12; font-weight: 600; }
li.sufficient { color: #1d5e20; }
p.insufficient { color: #8a1c12; font-weight: 600; }
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
.scroll { overflow-x: auto; max-width: 100%; }
table.env { table-layout: fixed; width: 100%; }
table.env td, table.env th { white-space: normal; overflow-wrap: anywhere; }
table.env td:first-child, table.env th:first-child { width: 11em; }
td.wrap { white-space: normal; }
pre { background: #f6f8fa; border: 1px solid var(--line); padding: 8px 12px; white-space: pre-wrap;
      word-break: break-all; font-size: 13px; }
details { margin: 6px 0 14px; }
summary { cursor: pointer; color: #0645ad; }
footer { margin-top: 40px; color: #777; font-size: 13px; }
"#;

pub(super) struct Page<'a> {
    pub(super) report: &'a Report,
    pub(super) charts: &'a [Chart],
    pub(super) out: String,
}

/// Text for HTML.
pub(crate) fn esc(s: &str) -> String {
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

pub(crate) fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Better => "better",
        Outcome::Worse => "worse",
        Outcome::Same => "same",
        Outcome::Inconclusive => "inconclusive",
    }
}

pub(crate) fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::Same => "same",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Mixed => "mixed",
        Verdict::NoData => "nodata",
    }
}

fn anchor(w: &WorkloadReport) -> String {
    format!("w-{}", file_safe(&w.title))
}

impl Page<'_> {
    pub(super) fn w(&mut self, s: &str) {
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
        if let Some(note) = r.suspect_note() {
            let _ = writeln!(
                self.out,
                "<p class=\"suspect-included\" id=\"suspect-included\">{}</p>",
                esc(&note)
            );
        }
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
        for g in &r.open_loop {
            self.open_loop(g);
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
                "<div class=\"chips\"><span class=\"chip better\">better {}</span><span class=\"chip same\">same {}</span><span class=\"chip worse\">worse {}</span><span class=\"chip inconclusive\">inconclusive {}</span><span class=\"chip mixed\">mixed {}</span><span class=\"chip nodata\">no data {}</span><span class=\"chip same\">{} tests compared</span></div>",
                n.better, n.same, n.worse, n.inconclusive, n.mixed, n.no_data, n.total()
            );
            let _ = writeln!(self.out, "<p class=\"method\">{}</p>", esc(&c.method_note));
        }
        for t in r.insufficient() {
            let _ = writeln!(self.out, "<p class=\"insufficient\">{}</p>", esc(t));
        }
        let eff = Metric::headline(r.options.cpu_side)[2];
        let _ = writeln!(
            self.out,
            "<p class=\"method\">A test's verdict comes from its throughput, mean transaction time and {}: better when one is better by more than the noise and none worse, worse the other way round, mixed when some are better and others worse, same when each is shown within the threshold, inconclusive when the runs show neither. In the tables, a difference in parentheses is within the threshold, one followed by ? is inconclusive; hover a difference for its test, interval and power.</p>\n</section>",
            esc(eff.label())
        );
    }

    fn single_summary(&mut self) {
        let f = &self.report.figures[0];
        let runs = f.tests.iter().map(|t| t.ok_runs).max().unwrap_or(0);
        let _ = writeln!(
            self.out,
            "<section class=\"summary\" id=\"summary\">\n<p class=\"sentence\">{} of {}, up to {runs} ok run{} each.</p>\n<p class=\"method\">Absolute figures: means over each test's ok runs; ± is the half width of the 95% confidence interval of the mean (with repeats).</p>",
            crate::units::count(f.tests.len() as u64, "test"),
            esc(&f.label),
            if runs == 1 { "" } else { "s" }
        );
        for t in self.report.insufficient() {
            let _ = writeln!(self.out, "<p class=\"insufficient\">{}</p>", esc(t));
        }
        self.w("</section>\n");
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
        for g in &self.report.open_loop {
            let _ = write!(
                self.out,
                "<a href=\"#{}\">{} (open loop)</a>",
                super::html_open_loop::anchor(g),
                esc(&g.title)
            );
        }
        self.w(
            "<a href=\"#environments\">environments</a><a href=\"#commands\">commands</a></nav>\n",
        );
    }

    pub(super) fn figure(&mut self, chart: Option<&Chart>) {
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
        for n in &w.sufficiency {
            let class = if n.finding.is_insufficient() {
                "insufficient"
            } else {
                "sufficient"
            };
            let _ = writeln!(self.out, "<li class=\"{class}\">{}</li>", esc(&n.text));
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
        let of = |purpose: Purpose| {
            self.charts
                .iter()
                .filter(move |ch| ch.workload.as_ref() == Some(&w.key) && ch.purpose == purpose)
        };
        self.figure(of(Purpose::Candidates).next());
        for c in &r.comparisons {
            let chart =
                of(Purpose::Relative).find(|ch| ch.candidate.as_deref() == Some(&c.candidate));
            self.figure(chart);
            let tests = c.workload(&w.key);
            if !tests.is_empty() {
                self.comparison_table(w, c, &tests);
            }
        }
        if !r.is_comparison() {
            self.single_table(w);
        }
        self.figure(of(Purpose::Throughput).next());
        self.figure(of(Purpose::TransactionTime).next());
        if let Some(series) = of(Purpose::TimeSeries).next() {
            let _ = writeln!(
                self.out,
                "<h3>Per second</h3>\n<p class=\"method\">Every ok run of every test, second by second as its receivers counted it: a stall, a slow start or a drift shows here before it shows in a mean. Each panel has its own scale{}.</p>",
                if w.is_transactional() {
                    " (transactions per second)"
                } else {
                    " (payload bits per second, both directions)"
                }
            );
            self.figure(Some(series));
        }
        self.tests_table(w);
        self.w("</section>\n");
    }
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
        // absolute charts and its per-second samples.
        assert_eq!(html.matches("<svg").count(), 5, "charts inline");
        assert!(html.contains("<figure id=\"chart-timeseries-rr1c-1x1\">"));
        // The environments wrap rather than widen the page.
        assert!(html.contains("<table class=\"env\">"));
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
    fn retransmits_and_placement_are_shown_per_test() {
        let (mut osa, mut hs) = small();
        for (i, r) in osa.tests[0].runs.iter_mut().enumerate() {
            r.tcp_info = Some(linkperf_measured::TcpInfoSummary {
                retransmits: 12 + i as u64,
                ..Default::default()
            });
        }
        let t = &mut hs.tests[1];
        t.config.client_placement.threads = linkperf_workload::Threads::Count(2);
        t.config.client_placement.affinity = Some("0-1".parse().unwrap());
        t.config.server_placement.busy_poll = true;
        let r = crate::Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        );
        let html = HtmlExporter.render(&r).unwrap();
        assert!(html.contains("<h3>Runs, retransmits and worker placement</h3>"));
        // osa at 1 user: one ok run with 12 retransmits, free workers.
        assert!(
            html.contains("<tr><td rowspan=\"2\">1</td><td class=\"text\">osa</td><td>1 / 1</td><td>0</td><td>12</td><td class=\"text wrap\">1 thread, free</td><td class=\"text wrap\">1 thread, free</td></tr>"),
            "{html}"
        );
        // hs at 10 users: no TCP_INFO, pinned client, busy-polling server.
        assert!(html.contains("<tr><td class=\"text\">hs</td><td>1 / 1</td><td>0</td><td>n/a</td><td class=\"text wrap\">2 threads, pinned to 0,1</td><td class=\"text wrap\">1 thread, free, busy-poll</td></tr>"), "{html}");
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
