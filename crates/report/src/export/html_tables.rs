//! The HTML page's tables of figures: per candidate the headline metrics
//! against the base, every metric in a fold-out, and a one-file report's
//! absolute figures.

use std::fmt::Write as _;

use super::html::{esc, outcome_class, verdict_class, Page};
use crate::compare::{CandidateComparison, TestComparison};
use crate::significance::{Method, Outcome};
use crate::units::percent;
use crate::{Metric, WorkloadReport};

impl Page<'_> {
    pub(super) fn comparison_table(&mut self, c: &CandidateComparison, tests: &[&TestComparison]) {
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

    pub(super) fn single_table(&mut self, w: &WorkloadReport) {
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
}
