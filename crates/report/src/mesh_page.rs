//! The mesh report's page (`index.html`): the summary, the class
//! comparisons (each with its full report in a sub-directory), a heatmap per
//! test and metric, the slowest pairs, per-node totals and the failed runs.

use std::fmt::Write as _;

use crate::export::esc;
use crate::mesh_report::{Heatmap, MeshReport};
use crate::{Better, Metric};

const STYLE: &str = r#"
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1300px; }
table { border-collapse: collapse; margin: 8px 0 20px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; }
td.name, th.name { text-align: left; }
.better { background: #d8f0d8; } .worse { background: #f6d5d5; }
.same { background: #eee; } .inconclusive, .mixed, .nodata { background: #fff6d0; }
.note { color: #555; font-size: 13px; }
td.suspect { font-style: italic; color: #777; }
"#;

/// A figure in its metric's unit, short.
fn show(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Throughput => format!("{:.3} Gb/s", v * 8.0 / 1e9),
        Metric::TimeP99 | Metric::TimeMean => format!("{v:.1} µs"),
        Metric::TransactionRate => format!("{v:.0}/s"),
        _ => format!("{:.2} GB/cpu-s", v / 1e9),
    }
}

/// The lowest and highest value of a map's cells of ok runs.
fn range(h: &Heatmap) -> (f64, f64) {
    h.cells
        .iter()
        .flatten()
        .flatten()
        .filter(|c| !c.suspect)
        .fold((f64::MAX, f64::MIN), |(a, b), c| {
            (a.min(c.value), b.max(c.value))
        })
}

/// A cell's background: green for the best, red for the worst, by the
/// cell's place between the map's lowest and highest value (`lo`, `hi`).
fn shade(h: &Heatmap, (lo, hi): (f64, f64), v: f64) -> String {
    let mut t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    if h.metric.better() == Better::Lower {
        t = 1.0 - t;
    }
    // Red (worst) to white to green (best).
    let (r, g, b) = if t < 0.5 {
        let k = t * 2.0;
        (246.0, 200.0 + 55.0 * k, 200.0 + 55.0 * k)
    } else {
        let k = (t - 0.5) * 2.0;
        (255.0 - 55.0 * k, 255.0 - 15.0 * k, 255.0 - 55.0 * k)
    };
    format!("background: rgb({:.0},{:.0},{:.0})", r, g, b)
}

/// One test's heatmap: sources by rows, destinations by columns.
fn heatmap(o: &mut String, r: &MeshReport, h: &crate::mesh_report::Heatmap) {
    let _ = write!(
        o,
        "<h2>{}: {} (source rows × destination columns)</h2>",
        esc(&h.test),
        esc(h.metric.label())
    );
    let _ = write!(
        o,
        "<p class=note>Each cell: the mean of the pair's ok runs; green the best, red the worst{}. \
         A value in italics with * is of suspect runs only (no ok run), left out of the median.</p>",
        h.median
            .map(|m| format!("; median {}", show(h.metric, m)))
            .unwrap_or_default()
    );
    o.push_str("<table><tr><th class=name>source \\ destination</th>");
    for a in &r.agents {
        let _ = write!(o, "<th>{}</th>", esc(a));
    }
    o.push_str("</tr>");
    let scale = range(h);
    for (s, row) in h.cells.iter().enumerate() {
        let _ = write!(o, "<tr><th class=name>{}</th>", esc(&r.agents[s]));
        for (d, v) in row.iter().enumerate() {
            match v {
                Some(c) if c.suspect => {
                    let _ = write!(
                        o,
                        "<td class=suspect title=\"suspect runs only: not in the median\">{}*</td>",
                        show(h.metric, c.value)
                    );
                }
                Some(c) => {
                    let _ = write!(
                        o,
                        "<td style=\"{}\">{}</td>",
                        shade(h, scale, c.value),
                        show(h.metric, c.value)
                    );
                }
                None if s == d => o.push_str("<td></td>"),
                None => o.push_str("<td>–</td>"),
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

/// The page.
pub fn mesh_page(r: &MeshReport) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>linkperf mesh</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(
        o,
        "<h1>Mesh of {} agents</h1><p>{} runs ok, {} failed or aborted.</p>",
        r.agents.len(),
        r.ok_runs,
        r.failures.len()
    );
    o.push_str("<h2>Path classes</h2><table><tr><th class=name>class</th><th>pairs</th><th>ok runs</th></tr>");
    for (c, p, ok) in &r.classes {
        let _ = write!(
            o,
            "<tr><td class=name>{}</td><td>{p}</td><td>{ok}</td></tr>",
            esc(c)
        );
    }
    o.push_str("</table>");
    if !r.comparisons.is_empty() {
        o.push_str("<h2>Path classes compared</h2><p class=note>Each class's runs (every pair of the class a sample) against the class it differs from in one thing; positive = the first-named class is better; significance and verdicts as in every linkperf comparison.</p>");
        for c in &r.comparisons {
            let _ = write!(
                o,
                "<h3>{}</h3><p>{} <a href=\"{}/index.html\">full comparison</a></p>",
                esc(&c.title),
                esc(&c.comparison.summary),
                esc(&c.dir)
            );
            o.push_str("<table><tr><th class=name>test</th><th>throughput</th><th>p99 transaction time</th><th>verdict</th><th>runs (candidate / base)</th></tr>");
            for t in &c.comparison.tests {
                let cell = |m: Metric| match t.metric(m) {
                    Some(x) => format!(
                        "<td class={}>{:+.1} %</td>",
                        crate::export::outcome_class(x.judgement.outcome),
                        x.judgement.relative_pct
                    ),
                    None => "<td>n/a</td>".into(),
                };
                let _ = write!(
                    o,
                    "<tr><td class=name>{}</td>{}{}<td class={}>{}</td><td>{} / {}</td></tr>",
                    esc(&t.name),
                    cell(Metric::Throughput),
                    cell(Metric::TimeP99),
                    crate::export::verdict_class(t.verdict),
                    t.verdict.word(),
                    t.candidate_runs,
                    t.base_runs
                );
            }
            o.push_str("</table>");
        }
    }
    for h in &r.heatmaps {
        heatmap(&mut o, r, h);
    }
    if r.agents.len() > crate::mesh_report::MAX_HEATMAP_AGENTS {
        let _ = write!(
            o,
            "<p class=note>No heatmaps: {} agents are more than {} a page can show; see the per-node totals.</p>",
            r.agents.len(),
            crate::mesh_report::MAX_HEATMAP_AGENTS
        );
    }
    if !r.slowest.is_empty() {
        o.push_str("<h2>Slowest pairs</h2><table><tr><th class=name>test</th><th class=name>pair</th><th class=name>class</th><th>throughput</th><th>below the median</th></tr>");
        for p in &r.slowest {
            let _ = write!(
                o,
                "<tr><td class=name>{}</td><td class=name>{}</td><td class=name>{}</td><td>{}</td><td>{:.1} %</td></tr>",
                esc(&p.test),
                esc(&p.pair),
                esc(&p.class),
                show(Metric::Throughput, p.bytes_per_s),
                p.below_median_pct
            );
        }
        o.push_str("</table>");
    }
    o.push_str("<h2>Per node</h2><table><tr><th class=name>node</th><th>agents</th><th>mean throughput as source</th><th>as destination</th><th>ok runs</th><th>failed runs</th></tr>");
    for n in &r.nodes {
        let f = |v: Option<f64>| v.map_or("–".into(), |v| show(Metric::Throughput, v));
        let _ = write!(
            o,
            "<tr><td class=name>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.node),
            n.agents,
            f(n.as_source_bytes_per_s),
            f(n.as_target_bytes_per_s),
            n.ok_runs,
            n.failed_runs
        );
    }
    o.push_str("</table>");
    if !r.failures.is_empty() {
        o.push_str("<h2>Runs that did not complete</h2><table><tr><th class=name>test</th><th class=name>why</th></tr>");
        for (t, why) in &r.failures {
            let _ = write!(
                o,
                "<tr><td class=name>{}</td><td class=name>{}</td></tr>",
                esc(t),
                esc(why)
            );
        }
        o.push_str("</table>");
    }
    o.push_str(
        "<footer>linkperf mesh report; the runs are in ../mesh.json.</footer></body></html>\n",
    );
    o
}
