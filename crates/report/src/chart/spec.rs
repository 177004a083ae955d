//! What each chart shows, as data: built from the report (and so from the
//! results documents), never from engine state; drawn by `draw.rs`.

use serde::Serialize;

use crate::compare::CandidateComparison;
use crate::significance::Outcome;
use crate::units::{file_safe, rate_axis, time_axis};
use crate::{CpuSide, Metric, Report, WorkloadKey, WorkloadReport};

/// Width of every chart, pixels: readable on a 1200 px page.
pub const CHART_WIDTH: u32 = 1200;
/// Height of a per-workload chart, pixels.
pub const CHART_HEIGHT: u32 = 520;
/// Height of the overview chart, pixels (its test names stand on end).
pub const OVERVIEW_HEIGHT: u32 = 680;

/// A chart: its file name, title, size and content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// File name without extension, e.g. `relative-hs-rr1c-200x1000`.
    pub name: String,
    /// Title drawn above the chart.
    pub title: String,
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
    /// The workload it shows (`None` for an overview).
    pub workload: Option<WorkloadKey>,
    /// The candidate whose relative differences it shows (`None` for the
    /// absolute charts).
    pub candidate: Option<String>,
    /// What it shows.
    pub kind: ChartKind,
}

/// The two forms of chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    /// Grouped bars of relative differences (%), one group per category.
    Bars(BarChart),
    /// Lines of absolute values, one per results file.
    Lines(LineChart),
}

/// Grouped bars: at each category (a user count, or a test), one bar per
/// series; positive up, with the zero line marked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarChart {
    /// The categories on the X axis, left to right.
    pub categories: Vec<String>,
    /// X axis description.
    pub x_label: String,
    /// Y axis description, with its unit.
    pub y_label: String,
    /// One series per metric.
    pub series: Vec<BarSeries>,
    /// Whether the category names stand on end (many categories).
    pub vertical_labels: bool,
    /// A note shown with the legend, e.g. "positive = hs better".
    pub note: Option<String>,
}

/// One metric's bars.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarSeries {
    /// Legend text.
    pub label: String,
    /// Colour, `#rrggbb`.
    pub colour: String,
    /// Value per category, percent; `None` where not measured.
    pub values: Vec<Option<f64>>,
    /// Per category, whether the difference counts (larger than the noise);
    /// bars that do not are drawn pale.
    pub counts: Vec<bool>,
}

/// Lines of one figure against users, one per results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineChart {
    /// The categories on the X axis (user counts), left to right.
    pub categories: Vec<String>,
    /// X axis description.
    pub x_label: String,
    /// Y axis description, with its unit.
    pub y_label: String,
    /// One series per results file.
    pub series: Vec<LineSeries>,
}

/// One results file's line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineSeries {
    /// Legend text (the file's label).
    pub label: String,
    /// Colour, `#rrggbb`.
    pub colour: String,
    /// Per category: the mean, and the 95% confidence interval when the test
    /// was repeated, in the axis' unit; `None` where not measured.
    pub points: Vec<Option<LinePoint>>,
}

/// A mean and its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinePoint {
    /// The mean.
    pub mean: f64,
    /// The 95% confidence interval (low, high), with repeats.
    pub ci95: Option<(f64, f64)>,
}

/// Colours of the three headline metrics (Okabe–Ito, safe for colour-blind readers).
const METRIC_COLOURS: [&str; 3] = ["#0072B2", "#E69F00", "#009E73"];

/// Colours of the results files' lines: the base dark grey, then Okabe–Ito.
const FILE_COLOURS: [&str; 6] = [
    "#444444", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9",
];

/// Every chart of the report, in the order the HTML shows them: per
/// candidate its overview; per workload its relative charts (one per
/// candidate), then throughput and transaction time against users.
pub fn charts(report: &Report) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in &report.comparisons {
        out.push(overview(report, c));
    }
    for w in &report.workloads {
        for c in &report.comparisons {
            if let Some(chart) = relative(report, w, c) {
                out.push(chart);
            }
        }
        out.extend(throughput(report, w));
        out.extend(transaction_time(report, w));
    }
    // File names are unique even if two labels sanitise alike.
    let mut seen = std::collections::HashSet::new();
    for (i, c) in out.iter_mut().enumerate() {
        if !seen.insert(c.name.clone()) {
            c.name = format!("{}-{i}", c.name);
            seen.insert(c.name.clone());
        }
    }
    out
}

/// The headline metrics' series over `tests`.
fn headline_series(side: CpuSide, tests: &[&crate::TestComparison]) -> Vec<BarSeries> {
    Metric::headline(side)
        .iter()
        .zip(METRIC_COLOURS)
        .map(|(&m, colour)| {
            let judged: Vec<_> = tests.iter().map(|t| t.metric(m)).collect();
            BarSeries {
                label: m.label().to_string(),
                colour: colour.to_string(),
                values: judged
                    .iter()
                    .map(|j| j.map(|j| j.judgement.relative_pct))
                    .collect(),
                counts: judged
                    .iter()
                    .map(|j| j.is_some_and(|j| j.judgement.outcome != Outcome::Same))
                    .collect(),
            }
        })
        .collect()
}

/// The Y axis of relative differences.
const Y_RELATIVE: &str = "relative difference (%)";

fn sign_note(candidate: &str) -> Option<String> {
    Some(format!("positive = {candidate} better"))
}

/// The study's MTU-comparison form: every compared test on the X axis.
fn overview(report: &Report, c: &CandidateComparison) -> Chart {
    // Workload order, then users.
    let mut tests = Vec::new();
    for w in &report.workloads {
        tests.extend(c.workload(&w.key));
    }
    Chart {
        name: format!("overview-{}", file_safe(&c.candidate)),
        title: format!("All tests: {} against {}", c.candidate, c.base),
        width: CHART_WIDTH,
        height: OVERVIEW_HEIGHT,
        workload: None,
        candidate: Some(c.candidate.clone()),
        kind: ChartKind::Bars(BarChart {
            categories: tests.iter().map(|t| t.name.clone()).collect(),
            x_label: "test (workload--users)".into(),
            y_label: Y_RELATIVE.into(),
            series: headline_series(report.options.cpu_side, &tests),
            vertical_labels: true,
            note: sign_note(&c.candidate),
        }),
    }
}

/// The study's figure for one workload: grouped bars of the three relative
/// differences at each user count.
fn relative(report: &Report, w: &WorkloadReport, c: &CandidateComparison) -> Option<Chart> {
    let tests = c.workload(&w.key);
    if tests.is_empty() {
        return None;
    }
    Some(Chart {
        name: format!(
            "relative-{}-{}",
            file_safe(&c.candidate),
            file_safe(&w.title)
        ),
        title: format!("{}: {} against {}", w.title, c.candidate, c.base),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        workload: Some(w.key.clone()),
        candidate: Some(c.candidate.clone()),
        kind: ChartKind::Bars(BarChart {
            categories: tests.iter().map(|t| t.users.to_string()).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: Y_RELATIVE.into(),
            series: headline_series(report.options.cpu_side, &tests),
            vertical_labels: false,
            note: sign_note(&c.candidate),
        }),
    })
}

/// One absolute figure of `w` against users, a line per file, scaled by
/// `divisor`.
fn lines(report: &Report, w: &WorkloadReport, metric: Metric, divisor: f64) -> Vec<LineSeries> {
    report
        .figures
        .iter()
        .zip(FILE_COLOURS.iter().cycle())
        .map(|(f, colour)| {
            let tests = f.workload(&w.key);
            LineSeries {
                label: f.label.clone(),
                colour: colour.to_string(),
                points: w
                    .users
                    .iter()
                    .map(|u| {
                        let s = tests.iter().find(|t| t.users == *u)?.metrics.get(&metric)?;
                        Some(LinePoint {
                            mean: s.mean / divisor,
                            ci95: s
                                .ci95_low
                                .zip(s.ci95_high)
                                .map(|(l, h)| (l / divisor, h / divisor)),
                        })
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The largest mean of `metric` in `w` across the files.
fn largest(report: &Report, w: &WorkloadReport, metric: Metric) -> Option<f64> {
    report
        .figures
        .iter()
        .flat_map(|f| f.workload(&w.key))
        .filter_map(|t| {
            t.metrics
                .get(&metric)
                .map(|s| s.ci95_high.unwrap_or(s.mean).max(s.mean))
        })
        .reduce(f64::max)
}

fn throughput(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    let (unit, divisor) = rate_axis(largest(report, w, Metric::Throughput)?);
    Some(Chart {
        name: format!("throughput-{}", file_safe(&w.title)),
        title: format!("{}: throughput", w.title),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Lines(LineChart {
            categories: w.users.iter().map(u32::to_string).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: format!("throughput ({unit}, payload, both directions)"),
            series: lines(report, w, Metric::Throughput, divisor),
        }),
    })
}

fn transaction_time(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    let (unit, divisor) = time_axis(largest(report, w, Metric::TimeMean)?);
    Some(Chart {
        name: format!("transaction-time-{}", file_safe(&w.title)),
        title: format!("{}: mean transaction time", w.title),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Lines(LineChart {
            categories: w.users.iter().map(u32::to_string).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: format!("mean transaction time ({unit})"),
            series: lines(report, w, Metric::TimeMean, divisor),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::small_report;

    #[test]
    fn a_comparison_has_an_overview_and_per_workload_charts() {
        let r = small_report();
        let charts = charts(&r);
        let names: Vec<&str> = charts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "overview-hs",
                "relative-hs-rr1c-1x1",
                "throughput-rr1c-1x1",
                "transaction-time-rr1c-1x1"
            ]
        );
        let ChartKind::Bars(b) = &charts[1].kind else {
            panic!("bars")
        };
        assert_eq!(b.categories, vec!["1", "10"]);
        assert_eq!(b.series.len(), 3);
        assert_eq!(b.series[0].label, "throughput");
        assert_eq!(
            b.series[0].values,
            vec![Some(50.0), Some(1.0000000000000009)]
        );
        assert_eq!(b.series[0].counts, vec![true, false]);
        assert_eq!(b.y_label, "relative difference (%)");
        assert_eq!(b.note.as_deref(), Some("positive = hs better"));
        let ChartKind::Lines(l) = &charts[2].kind else {
            panic!("lines")
        };
        // 8 and 12 Mbit/s at 1 user: the axis is in Mbit/s.
        assert!(l.y_label.starts_with("throughput (Mbit/s"), "{}", l.y_label);
        assert_eq!(l.series.len(), 2);
        assert_eq!(l.series[0].label, "osa");
        assert_eq!(l.series[1].points[0].unwrap().mean, 12.0);
        assert_eq!(l.series[1].points[0].unwrap().ci95, None);
    }

    #[test]
    fn charts_are_valid_svg_and_png() {
        crate::font_status().expect("a font (install fonts-dejavu-core: scripts/setup.sh)");
        for chart in charts(&small_report()) {
            let svg = chart.svg().unwrap();
            let doc = roxmltree::Document::parse(&svg)
                .unwrap_or_else(|e| panic!("{}: not XML: {e}", chart.name));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            assert!(
                svg.contains("users (concurrent connections)")
                    || svg.contains("test (workload--users)")
            );
            let png = chart.png().unwrap();
            let decoder = png::Decoder::new(png.as_slice());
            let mut reader = decoder.read_info().unwrap();
            let mut buf = vec![0; reader.output_buffer_size()];
            let info = reader.next_frame(&mut buf).unwrap();
            assert_eq!((info.width, info.height), (chart.width, chart.height));
            let pixels = &buf[..info.buffer_size()];
            let first = &pixels[..3];
            assert!(
                pixels.chunks(3).any(|p| p != first),
                "{}: the PNG is one colour",
                chart.name
            );
        }
    }

    use crate::testdata::{add, document, fig};
    use crate::{Options, Source};

    /// osa and hs, rr1c-1x1 at 1 and 10 users, three runs each: throughput
    /// 1.0, 1.2 and 1.1 MB/s (osa) or twice that (hs), transaction times
    /// 20, 24 and 22 µs.
    fn repeated() -> Report {
        let (mut osa, mut hs) = (document("osa"), document("hs"));
        for u in [1, 10] {
            let runs = |k: f64| [1.0, 1.2, 1.1].map(|b| fig(b * k * 1e6, 20.0 * b, 5e7));
            add(&mut osa, "rr1c-1x1", u, &runs(1.0));
            add(&mut hs, "rr1c-1x1", u, &runs(2.0));
        }
        Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        )
    }

    fn chart<'a>(charts: &'a [Chart], name: &str) -> &'a Chart {
        charts
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no chart {name}"))
    }

    fn attr(n: roxmltree::Node<'_, '_>, a: &str) -> f64 {
        n.attribute(a)
            .unwrap_or_else(|| panic!("{a} missing"))
            .parse()
            .unwrap()
    }

    #[test]
    fn absolute_charts_carry_the_confidence_intervals_of_repeats() {
        let charts = charts(&repeated());
        // Throughput, osa at 1 user: mean 1.1 MB/s = 8.8 Mbit/s; standard
        // deviation 0.1 MB/s over 3 runs, half width t(0.975, 2) × s / √3 =
        // 4.302653 × 0.1 / 1.732051 MB/s = 0.248414 MB/s = 1.987310 Mbit/s.
        let ChartKind::Lines(l) = &chart(&charts, "throughput-rr1c-1x1").kind else {
            panic!("lines")
        };
        assert!(l.y_label.starts_with("throughput (Mbit/s"), "{}", l.y_label);
        let p = l.series[0].points[0].unwrap();
        assert!((p.mean - 8.8).abs() < 1e-9, "{p:?}");
        let (lo, hi) = p.ci95.expect("repeats have a confidence interval");
        assert!((lo - (8.8 - 1.987_310)).abs() < 1e-5, "{p:?}");
        assert!((hi - (8.8 + 1.987_310)).abs() < 1e-5, "{p:?}");
        // Every point of both files has one.
        for s in &l.series {
            assert!(s.points.iter().all(|p| p.unwrap().ci95.is_some()), "{s:?}");
        }
        // Transaction time: 20, 24 and 22 µs, mean 22, s = 2: ± 4.968275 µs.
        let ChartKind::Lines(l) = &chart(&charts, "transaction-time-rr1c-1x1").kind else {
            panic!("lines")
        };
        let p = l.series[1].points[1].unwrap();
        let (lo, hi) = p.ci95.unwrap();
        assert!((p.mean - 22.0).abs() < 1e-9, "{p:?}");
        assert!((hi - lo - 2.0 * 4.968_275).abs() < 1e-5, "{p:?}");
    }

    /// A vertical line in a drawn chart: x, top y, bottom y (pixels).
    type Whisker = (f64, f64, f64);

    /// The vertical whisker lines of `colour` in a drawn line chart, and its
    /// points (filled circles) as (x, y).
    fn whiskers_and_points(svg: &str, colour: &str) -> (Vec<Whisker>, Vec<(f64, f64)>) {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let whiskers = doc
            .descendants()
            .filter(|n| n.has_tag_name("line") && n.attribute("stroke") == Some(colour))
            .filter(|n| attr(*n, "x1") == attr(*n, "x2"))
            .map(|n| {
                let (a, b) = (attr(n, "y1"), attr(n, "y2"));
                (attr(n, "x1"), a.min(b), a.max(b))
            })
            .collect();
        let points = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some(colour))
            .map(|n| (attr(n, "cx"), attr(n, "cy")))
            .collect();
        (whiskers, points)
    }

    #[test]
    fn drawn_absolute_charts_have_whiskers_with_repeats_only() {
        crate::font_status().expect("a font (install fonts-dejavu-core: scripts/setup.sh)");
        let charts = charts(&repeated());
        for name in ["throughput-rr1c-1x1", "transaction-time-rr1c-1x1"] {
            let c = chart(&charts, name);
            let svg = c.svg().unwrap();
            assert!(
                svg.contains("(whiskers: 95% confidence interval)"),
                "{name}"
            );
            let ChartKind::Lines(l) = &c.kind else {
                panic!("lines")
            };
            for s in &l.series {
                let (whiskers, points) = whiskers_and_points(&svg, &s.colour);
                assert_eq!(points.len(), 2, "{name} {}: {points:?}", s.label);
                // One whisker through each point, reaching above and below it.
                for (x, y) in &points {
                    let w = whiskers
                        .iter()
                        .find(|w| (w.0 - x).abs() < 0.5)
                        .unwrap_or_else(|| panic!("{name} {}: no whisker at x = {x}", s.label));
                    assert!(w.1 < *y && *y < w.2, "{name} {}: {w:?} around {y}", s.label);
                    // The interval is ±18% of the mean (1.987 of 8.8 Mbit/s),
                    // so the whisker is a visible stretch, not a dot.
                    assert!(w.2 - w.1 > 10.0, "{name}: {w:?}");
                }
            }
        }
        // Single runs: points, but no whisker and no note of one.
        let charts = super::charts(&small_report());
        let c = chart(&charts, "throughput-rr1c-1x1");
        let svg = c.svg().unwrap();
        assert!(!svg.contains("whiskers"));
        let ChartKind::Lines(l) = &c.kind else {
            panic!("lines")
        };
        let (whiskers, points) = whiskers_and_points(&svg, &l.series[0].colour);
        assert_eq!(points.len(), 2);
        assert!(whiskers.is_empty(), "{whiskers:?}");
    }

    #[test]
    fn the_drawn_relative_chart_has_the_zero_line_and_the_percent_axis() {
        crate::font_status().expect("a font (install fonts-dejavu-core: scripts/setup.sh)");
        // The study's rr1c-200x1000: better at few users, worse at many, so
        // bars go both up and down from zero.
        let (osa, hs) = crate::tests::study();
        let r = Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        );
        let charts = charts(&r);
        let c = chart(&charts, "relative-hs-rr1c-200x1000");
        let svg = c.svg().unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        // The Y axis description, standing on end, with its unit.
        let y_label = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("text") && n.text().map(str::trim) == Some("relative difference (%)")
            })
            .expect("the Y axis label");
        assert!(
            y_label
                .attribute("transform")
                .is_some_and(|t| t.starts_with("rotate(270")),
            "{y_label:?}"
        );
        // The zero line: black, 2 px, horizontal across the plot.
        let zero: Vec<(f64, f64, f64)> = doc
            .descendants()
            .filter(|n| {
                n.has_tag_name("polyline")
                    && n.attribute("stroke") == Some("#000000")
                    && n.attribute("stroke-width") == Some("2")
            })
            .filter_map(|n| {
                let pts: Vec<(f64, f64)> = n
                    .attribute("points")?
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect();
                (pts.len() == 2 && pts[0].1 == pts[1].1).then(|| (pts[0].0, pts[1].0, pts[0].1))
            })
            .collect();
        assert_eq!(zero.len(), 1, "one zero line: {zero:?}");
        let (x0, x1, z) = zero[0];
        assert!(
            x1 - x0 > 0.8 * f64::from(c.width),
            "across the plot: {zero:?}"
        );
        // Every bar of the throughput series stands on it: positive ones
        // (1 to 25 users) rise from it, negative ones (75 users on) hang from it.
        let ChartKind::Bars(b) = &c.kind else {
            panic!("bars")
        };
        let colour = &b.series[0].colour;
        let bars: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(colour.as_str()))
            .map(|n| (attr(n, "y"), attr(n, "y") + attr(n, "height")))
            // The legend's swatch is far from the zero line; every bar touches it.
            .filter(|(top, bottom)| *top <= z + 1.0 && *bottom >= z - 1.0)
            .collect();
        assert_eq!(bars.len(), b.categories.len(), "{bars:?}");
        for ((top, bottom), v) in bars.iter().zip(&b.series[0].values) {
            let v = v.unwrap();
            if v > 0.0 {
                assert!(
                    (bottom - z).abs() <= 1.0 && *top < z,
                    "{v}: {top}..{bottom}, zero {z}"
                );
            } else if v < 0.0 {
                assert!(
                    (top - z).abs() <= 1.0 && *bottom > z,
                    "{v}: {top}..{bottom}, zero {z}"
                );
            }
        }
        assert!(b.series[0].values.iter().any(|v| v.unwrap() > 1.0));
        assert!(b.series[0].values.iter().any(|v| v.unwrap() < -1.0));
    }
}
