//! The HTML page's open-loop sections: per group (workload, protocol,
//! users) each file's knee, the latency-against-load chart, per candidate
//! the differences at equal offered load, and each file's figures per
//! offered rate.

use std::fmt::Write as _;

use super::html::{esc, verdict_class, Page};
use super::markdown::{open_loop_heading, point_note, OPEN_LOOP_METRICS};
use crate::chart::Purpose;
use crate::figures::rate_label;
use crate::units::{per_s, time_us};
use crate::{OpenLoopGroup, KNEE_P99_FACTOR};

/// The anchor of a group's section.
pub(super) fn anchor(g: &OpenLoopGroup) -> String {
    format!("o-{}", g.slug())
}

impl Page<'_> {
    pub(super) fn open_loop(&mut self, g: &OpenLoopGroup) {
        let r = self.report;
        let _ = writeln!(
            self.out,
            "<section class=\"workload open-loop\" id=\"{}\">\n<h2>{}, open loop</h2>",
            anchor(g),
            esc(&g.title)
        );
        let _ = writeln!(
            self.out,
            "<p class=\"method\">Transaction time from each transaction's due time (p50, p99, p99.9: means over each test's ok runs) against the offered rate; achieved: transactions answered per second. The knee is the highest offered rate whose p99 stays within {}× of its value at the lowest offered rate.</p>",
            KNEE_P99_FACTOR
        );
        self.w("<ul class=\"notes\">\n");
        for c in &g.curves {
            let _ = writeln!(self.out, "<li class=\"knee\">{}</li>", esc(&c.text));
        }
        self.w("</ul>\n");
        let name = format!("latency-load-{}", g.slug());
        let chart = self
            .charts
            .iter()
            .find(|ch| ch.purpose == Purpose::LatencyLoad && ch.name == name);
        self.figure(chart);
        for c in &r.comparisons {
            let tests: Vec<_> = c
                .workload(&g.key)
                .into_iter()
                .filter(|t| t.users == g.users)
                .collect();
            if tests.is_empty() {
                continue;
            }
            let _ = writeln!(
                self.out,
                "<h3>{} against {}, at equal offered load</h3>\n<div class=\"scroll\"><table>\n<tr><th rowspan=\"2\">offered</th>",
                esc(&c.candidate),
                esc(&c.base)
            );
            for m in OPEN_LOOP_METRICS {
                let _ = write!(
                    self.out,
                    "<th colspan=\"3\">{}</th>",
                    esc(open_loop_heading(m))
                );
            }
            self.w("<th rowspan=\"2\">verdict</th><th rowspan=\"2\">runs</th></tr>\n<tr>");
            for _ in OPEN_LOOP_METRICS {
                let _ = write!(
                    self.out,
                    "<th>{}</th><th>{}</th><th>Δ</th>",
                    esc(&c.base),
                    esc(&c.candidate)
                );
            }
            self.w("</tr>\n");
            let columns =
                OPEN_LOOP_METRICS.map(|m| crate::export::markdown::compared_column(&tests, m));
            for t in tests {
                let rate = t.offered_per_s.map_or_else(String::new, rate_label);
                let _ = write!(self.out, "<tr><td>{}</td>", esc(&rate));
                for (m, col) in OPEN_LOOP_METRICS.into_iter().zip(&columns) {
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
        }
        self.w("<h3>Per offered rate</h3>\n<div class=\"scroll\"><table>\n<tr><th>offered</th><th class=\"text\">file</th><th>ok runs</th><th>suspect</th><th>achieved</th><th>p50</th><th>p99</th><th>p99.9</th><th class=\"text\">note</th></tr>\n");
        for rate in &g.rates_per_s {
            let rows: Vec<_> = g
                .curves
                .iter()
                .filter_map(|c| {
                    let p = c.points.iter().find(|p| p.offered_per_s == *rate)?;
                    Some((c.label.as_str(), p))
                })
                .collect();
            for (i, (label, p)) in rows.iter().enumerate() {
                self.w("<tr>");
                if i == 0 {
                    let _ = write!(
                        self.out,
                        "<td rowspan=\"{}\">{}</td>",
                        rows.len(),
                        esc(&rate_label(*rate))
                    );
                }
                let time = |v: Option<f64>| v.map_or_else(|| "n/a".into(), time_us);
                let _ = writeln!(
                    self.out,
                    "<td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text wrap\">{}</td></tr>",
                    esc(label),
                    p.ok_runs,
                    p.suspect_runs,
                    esc(&p.achieved_per_s.map_or_else(|| "n/a".into(), per_s)),
                    esc(&time(p.p50_us)),
                    esc(&time(p.p99_us)),
                    esc(&time(p.p999_us)),
                    esc(&point_note(p))
                );
            }
        }
        self.w("</table></div>\n</section>\n");
    }
}
