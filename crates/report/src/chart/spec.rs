//! What each chart shows, as data: built from the report (and so from the
//! results documents), never from engine state; drawn by `draw.rs` and
//! `draw_panels.rs` and `draw_load.rs`. The builders are in `relative.rs`
//! (relative differences), `absolute.rs` (values against users),
//! `timeseries.rs` (per-second samples) and `load.rs` (open-loop
//! transaction time against offered load).

use serde::Serialize;

use super::axis::ValueUnit;
use super::load::LoadChart;
use super::{absolute, load, relative, timeseries};
use crate::{Report, WorkloadKey};

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
    /// What the chart is for.
    pub purpose: Purpose,
    /// The workload it shows (`None` for an overview).
    pub workload: Option<WorkloadKey>,
    /// The candidate whose relative differences it shows (`None` for the
    /// other charts).
    pub candidate: Option<String>,
    /// What it shows.
    pub kind: ChartKind,
}

/// What a chart is for, and so where the report shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// Every test of one candidate: the three headline relative differences.
    Overview,
    /// One workload, one candidate: the three headline relative
    /// differences against users (the study's figure).
    Relative,
    /// One workload, every candidate: the throughput relative difference of
    /// each against the base, side by side (seed 002's figure).
    Candidates,
    /// One workload: throughput against users, a line per file.
    Throughput,
    /// One workload: mean transaction time against users, a line per file.
    TransactionTime,
    /// One workload: per test, the per-second throughput of every ok run.
    TimeSeries,
    /// One open-loop group (workload, protocol, users): transaction time
    /// p50, p99 and p99.9 against the offered rate, a line per file.
    LatencyLoad,
}

/// The forms of chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    /// Grouped bars of relative differences (%), one group per category.
    Bars(BarChart),
    /// Lines of absolute values, one per results file.
    Lines(LineChart),
    /// Small multiples: a panel per test, lines over time.
    Panels(PanelChart),
    /// Transaction time percentiles against offered load, both axes
    /// logarithmic.
    Load(LoadChart),
}

/// Grouped bars: at each category (a user count, or a test), one bar per
/// series; positive up, with the zero line marked. Bars beyond ±
/// [`clip_pct`](Self::clip_pct) are cut there, with their value written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarChart {
    /// The categories on the X axis, left to right.
    pub categories: Vec<String>,
    /// X axis description.
    pub x_label: String,
    /// Y axis description, with its unit.
    pub y_label: String,
    /// One series per metric (or per candidate).
    pub series: Vec<BarSeries>,
    /// Whether the category names stand on end (many categories).
    pub vertical_labels: bool,
    /// A note shown with the legend, e.g. "positive = hs better".
    pub note: Option<String>,
    /// The largest relative difference drawn to scale, percent: a bar
    /// beyond it is cut at it and its true value written beside it, so
    /// that one huge difference does not flatten every other bar.
    pub clip_pct: f64,
}

/// One metric's (or candidate's) bars.
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
    /// The values' unit (the tick labels carry it, scaled).
    pub unit: ValueUnit,
    /// Whether the Y axis is logarithmic: the values (and capacity lines)
    /// span more than [`LOG_RATIO`](super::LOG_RATIO) times.
    pub log_y: bool,
    /// One series per results file.
    pub series: Vec<LineSeries>,
    /// Horizontal lines at the link capacities the files were judged
    /// against, in the chart's unit.
    pub capacity: Vec<CapacityLine>,
}

/// One results file's line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineSeries {
    /// Legend text (the file's label).
    pub label: String,
    /// Colour, `#rrggbb`.
    pub colour: String,
    /// Per category: the mean, and the 95% confidence interval when the test
    /// was repeated, in the chart's unit; `None` where not measured.
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

/// A horizontal line at a link's capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityLine {
    /// What it is: "capacity of 1g: 1 Gbit/s".
    pub label: String,
    /// Where, in the chart's unit.
    pub value: f64,
    /// Colour, `#rrggbb` (the file's, or grey when several files share it).
    pub colour: String,
}

/// Small multiples: one panel per test, each with its own Y axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PanelChart {
    /// X axis description (every panel's).
    pub x_label: String,
    /// Y axis description (every panel's).
    pub y_label: String,
    /// The values' unit.
    pub unit: ValueUnit,
    /// The legend: each file's label and colour.
    pub files: Vec<(String, String)>,
    /// Panels per row.
    pub columns: u32,
    /// The panels, left to right, then top to bottom.
    pub panels: Vec<Panel>,
}

/// One test's panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Panel {
    /// Its title, e.g. "50 users".
    pub title: String,
    /// The test's name.
    pub test: String,
    /// Whether its Y axis is logarithmic (its values span more than
    /// [`LOG_RATIO`](super::LOG_RATIO) times).
    pub log_y: bool,
    /// One line per ok run of each file.
    pub lines: Vec<RunLine>,
}

/// One run's per-second samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLine {
    /// The file's label.
    pub file: String,
    /// The run's number in its test.
    pub run: u32,
    /// Colour, `#rrggbb` (its file's).
    pub colour: String,
    /// (seconds since the window opened, at the middle of the interval;
    /// value in the chart's unit).
    pub points: Vec<(f64, f64)>,
}

/// Colours of the results files' lines: the base dark grey, then Okabe–Ito
/// (safe for colour-blind readers).
pub(super) const FILE_COLOURS: [&str; 6] = [
    "#444444", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9",
];

/// The colour of the file at `index` in the report (the base is 0).
pub(super) fn file_colour(index: usize) -> &'static str {
    FILE_COLOURS[index % FILE_COLOURS.len()]
}

/// Every chart of the report, in the order the HTML shows them: per
/// candidate its overview; per workload the candidates side by side (with
/// more than one), its relative charts (one per candidate), then
/// throughput and transaction time against users, and the per-second
/// samples of every test; then per open-loop group its transaction time
/// against the offered load.
pub fn charts(report: &Report) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in &report.comparisons {
        out.push(relative::overview(report, c));
    }
    for w in &report.workloads {
        out.extend(relative::candidates(report, w));
        for c in &report.comparisons {
            out.extend(relative::relative(report, w, c));
        }
        out.extend(absolute::throughput(report, w));
        out.extend(absolute::transaction_time(report, w));
        out.extend(timeseries::per_second(report, w));
    }
    for g in &report.open_loop {
        out.extend(load::latency_load(report, g));
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
                "transaction-time-rr1c-1x1",
                "timeseries-rr1c-1x1",
            ]
        );
        let purposes: Vec<Purpose> = charts.iter().map(|c| c.purpose).collect();
        assert_eq!(
            purposes,
            vec![
                Purpose::Overview,
                Purpose::Relative,
                Purpose::Throughput,
                Purpose::TransactionTime,
                Purpose::TimeSeries
            ]
        );
    }

    #[test]
    fn charts_are_valid_svg_and_png() {
        crate::font_status().expect("the embedded font");
        let (osa, hs) = crate::tests::study();
        let study = Report::comparison(
            crate::Source::new("osa.json", &osa),
            &[crate::Source::new("hs.json", &hs)],
            crate::Options::default(),
        );
        for chart in charts(&small_report()).into_iter().chain(charts(&study)) {
            let svg = chart.svg().unwrap();
            let doc = roxmltree::Document::parse(&svg)
                .unwrap_or_else(|e| panic!("{}: not XML: {e}", chart.name));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            assert!(
                svg.contains("users (concurrent connections)")
                    || svg.contains("test (workload--users)")
                    || svg.contains("seconds into the window"),
                "{}",
                chart.name
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
}
