//! `history show --out DIR`: every series charted with the report's charts
//! (plotters, SVG and PNG): its points in time order, and the mean of each
//! stretch between change points as a second line, so that each change
//! point is the step in it. DIR/index.html holds the table and every chart
//! inline (no external assets), with the change points in words.

use std::fmt::Write;
use std::path::Path;

use anyhow::Context;
use linkperf_history::changes::Options;
use linkperf_history::short;
use linkperf_report::{Chart, ChartKind, Metric, Panel, PanelChart, Purpose, RunLine, ValueUnit};

use super::{change_words, test_words, Analysed};

/// Chart size, pixels.
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 420;

/// The chart's unit for `metric`'s values, and the factor from the
/// history's unit to it.
fn unit(metric: Metric) -> (ValueUnit, f64) {
    match metric {
        Metric::Throughput => (ValueUnit::BitsPerSecond, 8.0),
        Metric::LossRate => (ValueUnit::Percent, 100.0),
        Metric::TimeMean
        | Metric::TimeP99
        | Metric::TimeP50
        | Metric::TimeP999
        | Metric::Jitter
        | Metric::ClientCpuPerTxn
        | Metric::ServerCpuPerTxn
        | Metric::ClientSystemCpuPerTxn
        | Metric::ServerSystemCpuPerTxn
        | Metric::ClientPinnedCpuPerTxn
        | Metric::ServerPinnedCpuPerTxn => (ValueUnit::Microseconds, 1.0),
        _ => (ValueUnit::TransactionsPerSecond, 1.0),
    }
}

/// A file name for series `i`.
fn file_name(i: usize, s: &Analysed) -> String {
    let k = &s.info.key;
    let raw = format!("{i:03}-{}-{}-{}", k.test, k.pair, k.metric.key());
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn chart(i: usize, s: &Analysed) -> Chart {
    let k = &s.info.key;
    let (unit, factor) = unit(k.metric);
    let points: Vec<(f64, f64)> = s
        .points
        .iter()
        .enumerate()
        .map(|(x, p)| ((x + 1) as f64, p.value * factor))
        .collect();
    // The mean of each stretch between change points, as a step line.
    let mut means = Vec::new();
    let mut from = 0;
    let mut bounds: Vec<usize> = s.changes.iter().map(|c| c.index).collect();
    bounds.push(s.points.len());
    for to in bounds {
        if to > from {
            let m = s.points[from..to].iter().map(|p| p.value).sum::<f64>() / (to - from) as f64;
            means.push(((from + 1) as f64, m * factor));
            means.push((to as f64, m * factor));
        }
        from = to;
    }
    Chart {
        name: file_name(i, s),
        title: format!(
            "{} {} [{}]",
            test_words(k),
            k.metric.label(),
            short(&k.environment)
        ),
        width: WIDTH,
        height: HEIGHT,
        purpose: Purpose::TimeSeries,
        workload: None,
        candidate: None,
        kind: ChartKind::Panels(PanelChart {
            x_label: "run, in time order".into(),
            y_label: k.metric.label().into(),
            unit,
            files: vec![
                ("each run".into(), "#0072B2".into()),
                ("mean between change points".into(), "#D55E00".into()),
            ],
            columns: 1,
            panels: vec![Panel {
                title: format!("{} change points", s.changes.len()),
                test: k.test.clone(),
                log_y: false,
                lines: vec![
                    RunLine {
                        file: "each run".into(),
                        run: 1,
                        colour: "#0072B2".into(),
                        points,
                    },
                    RunLine {
                        file: "mean between change points".into(),
                        run: 2,
                        colour: "#D55E00".into(),
                        points: means,
                    },
                ],
            }],
        }),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes DIR/index.html and a PNG and SVG per series; returns how many.
pub fn write(dir: &Path, all: &[Analysed], db: &str, options: &Options) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>linkperf history</title>\
         <style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 8px;text-align:left}}\
         .change{{color:#D55E00}}</style></head><body>\n<h1>linkperf history</h1>\n\
         <p>{} — {} series; change points: E-divisive means, p &le; {}, window {}, min magnitude {} %.</p>\n",
        escape(db),
        all.len(),
        options.p_value,
        options.window,
        options.min_magnitude * 100.0
    );
    for (i, s) in all.iter().enumerate() {
        let c = chart(i, s);
        let svg = c
            .svg()
            .map_err(|e| anyhow::anyhow!("failed to draw {}: {e}", c.name))?;
        let png = c
            .png()
            .map_err(|e| anyhow::anyhow!("failed to draw {}: {e}", c.name))?;
        for (ext, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
            let f = dir.join(format!("{}.{ext}", c.name));
            std::fs::write(&f, bytes)
                .with_context(|| format!("failed to write {}", f.display()))?;
        }
        let _ = write!(
            html,
            "<h2>{}</h2>\n<p>{} ok points, {} suspect (suspect runs {}).</p>\n{svg}\n",
            escape(&c.title),
            s.info.ok,
            s.info.suspect,
            if s.points.iter().any(|p| !p.ok) {
                "charted"
            } else {
                "left out"
            },
        );
        if !s.changes.is_empty() {
            html.push_str("<ul>\n");
            for ch in &s.changes {
                let _ = writeln!(
                    html,
                    "<li class=\"change\">{}</li>",
                    escape(&change_words(s.info.key.metric, &s.points, ch))
                );
            }
            html.push_str("</ul>\n");
        }
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).with_context(|| format!("failed to write {}", index.display()))?;
    Ok(all.len())
}
