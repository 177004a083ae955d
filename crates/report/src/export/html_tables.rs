//! The HTML page's tables of figures: per candidate the headline metrics
//! against the base, every metric in a fold-out, and a one-file report's
//! absolute figures.

use std::fmt::Write as _;

use super::html::{esc, outcome_class, verdict_class, Page};
use crate::compare::{CandidateComparison, TestComparison};
use crate::significance::{Method, Outcome};
use crate::units::percent;
use linkperf_workload::{Placement, Threads};

use crate::export::markdown::compared_column;
use crate::{Column, Metric, WorkloadReport};

impl Page<'_> {
    pub(super) fn comparison_table(
        &mut self,
        w: &WorkloadReport,
        c: &CandidateComparison,
        tests: &[&TestComparison],
    ) {
        let transactional = crate::figures::transactional(&w.kind);
        let headline =
            Metric::headline(self.report.options.cpu_side).map(|m| m.shown_for(transactional));
        let columns = headline.map(|m| compared_column(tests, m));
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
            for (m, col) in headline.into_iter().zip(&columns) {
                self.delta_cells(t, m, col);
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
            // A metric's row in one unit.
            let col = compared_column(tests, m);
            for t in tests {
                self.delta_cells(t, m, &col);
            }
            self.w("</tr>\n");
        }
        self.w("</table></div>\n</details>\n");
    }

    /// Base value, candidate value and coloured difference of one metric.
    pub(super) fn delta_cells(&mut self, t: &TestComparison, m: Metric, col: &Column) {
        match t.metric(m) {
            Some(mc) => {
                let j = &mc.judgement;
                let text = percent(j.relative_pct);
                let shown = match j.outcome {
                    Outcome::Same => format!("({text})"),
                    Outcome::Inconclusive => format!("{text}?"),
                    _ => text,
                };
                let how = match (j.method, j.p_value) {
                    (Method::Welch, Some(p)) => {
                        let mut how = format!("Welch p = {p:.3}");
                        if let Some([lo, hi]) = j.interval_pct {
                            how.push_str(&format!(
                                "; 95% interval {} to {}",
                                percent(lo),
                                percent(hi)
                            ));
                        }
                        if let Some(power) = j.power {
                            how.push_str(&format!("; power {:.0}%", power * 100.0));
                        }
                        how
                    }
                    (Method::ConstantRuns, _) => "runs did not vary: threshold alone".into(),
                    _ => "single run: threshold alone".into(),
                };
                let _ = write!(
                    self.out,
                    "<td>{}</td><td>{}</td><td class=\"delta {}\" title=\"{}\">{}</td>",
                    esc(&col.format(j.base_mean)),
                    esc(&col.format(j.candidate_mean)),
                    outcome_class(j.outcome),
                    esc(&how),
                    esc(&shown)
                );
            }
            None => self.w("<td>n/a</td><td>n/a</td><td>n/a</td>"),
        }
    }

    pub(super) fn single_table(&mut self, w: &WorkloadReport) {
        let f = &self.report.figures[0];
        let eff = Metric::headline(self.report.options.cpu_side)[2];
        let _ = writeln!(
            self.out,
            "<div class=\"scroll\"><table>\n<tr><th>users</th><th>runs</th><th>throughput</th><th>±</th><th>transactions/s</th><th>mean transaction time</th><th>±</th><th>p99 transaction time</th><th>{}</th><th class=\"text\">note</th></tr>",
            esc(eff.label())
        );
        let rows = f.workload(&w.key);
        // Each column in one unit, from its largest mean (a ± in its mean's).
        let column = |m: Metric| m.column(rows.iter().filter_map(|t| t.mean(m)));
        let columns: std::collections::HashMap<Metric, Column> = [
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
            let mean = |m: Metric| {
                t.metrics
                    .get(&m)
                    .map_or_else(|| "n/a".to_string(), |s| columns[&m].format(s.mean))
            };
            let half = |m: Metric| {
                t.metrics
                    .get(&m)
                    .and_then(|s| s.ci95_high.map(|h| columns[&m].format(h - s.mean)))
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

    /// Per test and file: its runs, the segments TCP retransmitted in each
    /// ok run's window, and where the workers ran (pinned or free).
    pub(super) fn tests_table(&mut self, w: &WorkloadReport) {
        let r = self.report;
        self.w("<h3>Runs, retransmits and worker placement</h3>\n<div class=\"scroll\"><table class=\"tests\">\n<tr><th>users</th><th class=\"text\">file</th><th>ok runs</th><th>suspect</th><th title=\"tcp_info.retransmits: segments retransmitted in each ok run's window\">retransmits per run</th><th class=\"text\">client workers</th><th class=\"text\">server workers</th></tr>\n");
        for u in &w.users {
            let rows: Vec<(&str, &crate::TestFigures)> = r
                .figures
                .iter()
                .filter_map(|f| {
                    let t = f.workload(&w.key).into_iter().find(|t| t.users == *u)?;
                    Some((f.label.as_str(), t))
                })
                .collect();
            for (i, (label, t)) in rows.iter().enumerate() {
                self.w("<tr>");
                if i == 0 {
                    let _ = write!(self.out, "<td rowspan=\"{}\">{u}</td>", rows.len());
                }
                let _ = writeln!(
                    self.out,
                    "<td class=\"text\">{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td class=\"text wrap\">{}</td><td class=\"text wrap\">{}</td></tr>",
                    esc(label),
                    t.ok_runs,
                    t.runs,
                    t.suspect_runs,
                    esc(&retransmits(t)),
                    esc(&placement(&t.client_placement)),
                    esc(&placement(&t.server_placement))
                );
            }
        }
        self.w("</table></div>\n");
    }
}

/// The retransmits of a test's ok runs: "0 in each of 6 runs" when they
/// agree, each run's when there are a few ("0, 3, 12"), else their mean and
/// largest; "n/a" when no run read TCP_INFO (UDP).
fn retransmits(t: &crate::TestFigures) -> String {
    let r = &t.retransmits;
    match r.len() {
        0 => "n/a".into(),
        1 => r[0].to_string(),
        n if r.iter().all(|v| *v == r[0]) => format!("{} in each of {n} runs", r[0]),
        2..=6 => r.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        n => format!(
            "mean {:.1}, max {} ({n} runs)",
            r.iter().sum::<u64>() as f64 / n as f64,
            r.iter().max().copied().unwrap_or(0)
        ),
    }
}

/// Where a side's workers ran: "2 threads, pinned to 0-1", "1 thread, free",
/// "one per CPU (the server's default), free", with ", busy-poll".
pub(crate) fn placement(p: &Placement) -> String {
    let mut s = match p.threads {
        Threads::ServerDefault => "one per CPU (the server's default)".to_string(),
        Threads::Count(n) => format!("{n} thread{}", if n == 1 { "" } else { "s" }),
    };
    let policy = if p.policy.is_free() {
        String::new()
    } else {
        format!(" ({})", p.policy)
    };
    match &p.affinity {
        Some(a) => s.push_str(&format!(", pinned to {a}{policy}")),
        None if p.policy.is_free() => s.push_str(", free"),
        None => s.push_str(&format!(", {} on the server's host", p.policy)),
    }
    if p.busy_poll {
        s.push_str(", busy-poll");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{add, document, fig};

    fn with_retransmits(each: &[Option<u64>]) -> crate::TestFigures {
        let mut doc = document("a");
        let figs: Vec<_> = each.iter().map(|_| fig(1e6, 10.0, 1e8)).collect();
        add(&mut doc, "str-readx30k", 1, &figs);
        for (r, n) in doc.tests[0].runs.iter_mut().zip(each) {
            r.tcp_info = n.map(|n| linkperf_measured::TcpInfoSummary {
                retransmits: n,
                ..Default::default()
            });
        }
        crate::FileFigures::of(&doc, "a").tests.remove(0)
    }

    #[test]
    fn retransmits_read_per_run() {
        let text = |each: &[Option<u64>]| retransmits(&with_retransmits(each));
        assert_eq!(text(&[None, None]), "n/a");
        assert_eq!(text(&[Some(7)]), "7");
        assert_eq!(text(&[Some(0); 6]), "0 in each of 6 runs");
        assert_eq!(text(&[Some(0), Some(3), Some(12)]), "0, 3, 12");
        assert_eq!(
            text(&[
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
                Some(20)
            ]),
            "mean 5.9, max 20 (7 runs)"
        );
    }

    #[test]
    fn placement_says_pinned_or_free() {
        let mut p = Placement::with_threads(2);
        assert_eq!(placement(&p), "2 threads, free");
        p.affinity = Some("0-1".parse().unwrap());
        p.busy_poll = true;
        assert_eq!(placement(&p), "2 threads, pinned to 0,1, busy-poll");
        let own = Placement {
            threads: Threads::ServerDefault,
            ..Placement::with_threads(1)
        };
        assert_eq!(placement(&own), "one per CPU (the server's default), free");
        let split = Placement {
            policy: linkperf_workload::PlacementPolicy::Split,
            ..own
        };
        assert_eq!(
            placement(&split),
            "one per CPU (the server's default), split on the server's host"
        );
        let settled = Placement {
            affinity: Some("1".parse().unwrap()),
            ..split
        };
        assert_eq!(
            placement(&settled),
            "one per CPU (the server's default), pinned to 1 (split)"
        );
    }
}
