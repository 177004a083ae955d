//! The charts of relative differences: per candidate an overview of every
//! test and, per workload, the three headline differences against users
//! (the study's figure); per workload with several candidates, each
//! candidate's throughput difference side by side (seed 002's figure).

use super::spec::{file_colour, BarChart, BarSeries, Chart, ChartKind, Purpose};
use super::spec::{CHART_HEIGHT, CHART_WIDTH, OVERVIEW_HEIGHT};
use crate::compare::CandidateComparison;
use crate::significance::Outcome;
use crate::units::file_safe;
use crate::{CpuSide, Metric, Report, WorkloadReport};

/// Bars are drawn to scale up to ±200%: three times the base's throughput,
/// or a third of its transaction time, either way. A bar beyond is cut at
/// it and its true value is written beside it: one −7070% bar would
/// otherwise flatten every other to a line.
pub const CLIP_PCT: f64 = 200.0;

/// Colours of the three headline metrics (Okabe–Ito, safe for colour-blind readers).
const METRIC_COLOURS: [&str; 3] = ["#0072B2", "#E69F00", "#009E73"];

/// The Y axis of relative differences.
const Y_RELATIVE: &str = "relative difference (%)";

/// A bar cut at the chart's clip: its series, its category and its true value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClippedBar {
    /// Index of its series.
    pub series: usize,
    /// Index of its category.
    pub category: usize,
    /// Its value, percent.
    pub value: f64,
}

impl BarChart {
    /// The span of the Y axis, percent, before room is made for the clipped
    /// bars' values: the values' (zero included), but no further than ±
    /// [`clip_pct`](Self::clip_pct).
    pub fn span(&self) -> (f64, f64) {
        let (lo, hi) = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        (lo.max(-self.clip_pct), hi.min(self.clip_pct))
    }

    /// The bars beyond ±[`clip_pct`](Self::clip_pct), cut at it.
    pub fn clipped(&self) -> Vec<ClippedBar> {
        let mut out = Vec::new();
        for (si, s) in self.series.iter().enumerate() {
            for (ci, v) in s.values.iter().enumerate() {
                if let Some(v) = *v {
                    if v.abs() > self.clip_pct {
                        out.push(ClippedBar {
                            series: si,
                            category: ci,
                            value: v,
                        });
                    }
                }
            }
        }
        out
    }
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
                    .map(|j| {
                        j.is_some_and(|j| {
                            matches!(j.judgement.outcome, Outcome::Better | Outcome::Worse)
                        })
                    })
                    .collect(),
            }
        })
        .collect()
}

fn sign_note(candidate: &str) -> Option<String> {
    Some(format!("positive = {candidate} better"))
}

/// The study's MTU-comparison form: every compared test on the X axis.
pub(super) fn overview(report: &Report, c: &CandidateComparison) -> Chart {
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
        purpose: Purpose::Overview,
        workload: None,
        candidate: Some(c.candidate.clone()),
        kind: ChartKind::Bars(BarChart {
            categories: tests.iter().map(|t| t.name.clone()).collect(),
            x_label: "test (workload--users)".into(),
            y_label: Y_RELATIVE.into(),
            series: headline_series(report.options.cpu_side, &tests),
            vertical_labels: true,
            note: sign_note(&c.candidate),
            clip_pct: CLIP_PCT,
        }),
    }
}

/// The study's figure for one workload: grouped bars of the three relative
/// differences at each user count.
pub(super) fn relative(
    report: &Report,
    w: &WorkloadReport,
    c: &CandidateComparison,
) -> Option<Chart> {
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
        purpose: Purpose::Relative,
        workload: Some(w.key.clone()),
        candidate: Some(c.candidate.clone()),
        kind: ChartKind::Bars(BarChart {
            categories: tests.iter().map(|t| t.users.to_string()).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: Y_RELATIVE.into(),
            series: headline_series(report.options.cpu_side, &tests),
            vertical_labels: false,
            note: sign_note(&c.candidate),
            clip_pct: CLIP_PCT,
        }),
    })
}

/// Seed 002's figure: with more than one candidate, each candidate's
/// throughput difference against the base at every user count, side by
/// side, in the candidate's own colour (the one its line has in the
/// absolute charts).
pub(super) fn candidates(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    if report.comparisons.len() < 2 {
        return None;
    }
    let per_candidate: Vec<Vec<&crate::TestComparison>> = report
        .comparisons
        .iter()
        .map(|c| c.workload(&w.key))
        .collect();
    if per_candidate.iter().all(Vec::is_empty) {
        return None;
    }
    let users: Vec<u32> = w
        .users
        .iter()
        .copied()
        .filter(|u| per_candidate.iter().flatten().any(|t| t.users == *u))
        .collect();
    let series = report
        .comparisons
        .iter()
        .zip(&per_candidate)
        .enumerate()
        .map(|(i, (c, tests))| {
            let judged: Vec<_> = users
                .iter()
                .map(|u| {
                    tests
                        .iter()
                        .find(|t| t.users == *u)
                        .and_then(|t| t.metric(Metric::Throughput))
                })
                .collect();
            BarSeries {
                label: c.candidate.clone(),
                colour: file_colour(i + 1).to_string(),
                values: judged
                    .iter()
                    .map(|j| j.map(|j| j.judgement.relative_pct))
                    .collect(),
                counts: judged
                    .iter()
                    .map(|j| {
                        j.is_some_and(|j| {
                            matches!(j.judgement.outcome, Outcome::Better | Outcome::Worse)
                        })
                    })
                    .collect(),
            }
        })
        .collect();
    let names: Vec<&str> = report
        .comparisons
        .iter()
        .map(|c| c.candidate.as_str())
        .collect();
    Some(Chart {
        name: format!("candidates-{}", file_safe(&w.title)),
        title: format!(
            "{}: throughput of {} against {}",
            w.title,
            crate::report::join_and(&names),
            report.base()
        ),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        purpose: Purpose::Candidates,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Bars(BarChart {
            categories: users.iter().map(u32::to_string).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: format!("throughput, {Y_RELATIVE}"),
            series,
            vertical_labels: false,
            note: Some("positive = the candidate better".into()),
            clip_pct: CLIP_PCT,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::super::spec::{charts, file_colour};
    use super::super::test_support::{attr, chart, texts};
    use super::*;
    use crate::testdata::{add, document, fig};
    use crate::tests::small_report;
    use crate::{Options, Source};

    fn bars_of(c: &Chart) -> &BarChart {
        match &c.kind {
            ChartKind::Bars(b) => b,
            other => panic!("{}: not bars: {other:?}", c.name),
        }
    }

    #[test]
    fn relative_charts_show_the_three_headline_differences() {
        let charts = charts(&small_report());
        let b = bars_of(chart(&charts, "relative-hs-rr1c-1x1"));
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
        assert!(b.clipped().is_empty());
        assert_eq!(b.span(), (0.0, 50.0));
    }

    /// base and slow: rr1c-1x1 at 1, 10 and 50 users; at 50 users slow's
    /// transactions take 71.7 times as long (−7070%), elsewhere 10% longer.
    fn one_huge_difference() -> Report {
        let (mut base, mut slow) = (document("base"), document("slow"));
        for (u, k) in [(1, 1.1), (10, 1.1), (50, 71.704)] {
            add(&mut base, "rr1c-1x1", u, &[fig(1e6, 100.0, 1e8)]);
            add(
                &mut slow,
                "rr1c-1x1",
                u,
                &[fig(1e6 / k, 100.0 * k, 1e8 / k)],
            );
        }
        Report::comparison(
            Source::new("base.json", &base),
            &[Source::new("slow.json", &slow)],
            Options::default(),
        )
    }

    #[test]
    fn bars_beyond_the_clip_are_cut_with_their_value_written() {
        let charts = charts(&one_huge_difference());
        let b = bars_of(chart(&charts, "relative-slow-rr1c-1x1"));
        let clipped = b.clipped();
        // Transaction time at 50 users: (100 − 7170.4) / 100 = −7070.4%.
        assert_eq!(clipped.len(), 1, "{clipped:?}");
        assert_eq!((clipped[0].series, clipped[0].category), (1, 2));
        assert!((clipped[0].value + 7070.4).abs() < 1e-6, "{clipped:?}");
        // Throughput and efficiency lose at most 100%: drawn to scale.
        let (lo, hi) = b.span();
        assert_eq!((lo, hi), (-CLIP_PCT, 0.0));

        crate::font_status().expect("the embedded font");
        let c = chart(&charts, "relative-slow-rr1c-1x1");
        let svg = c.svg().unwrap();
        let t = texts(&svg);
        assert!(t.iter().any(|x| x == "-7070%"), "the true value: {t:?}");
        assert!(
            t.iter().any(|x| x.starts_with("bars beyond ±200% cut")),
            "{t:?}"
        );
        // The −10% bars stay readable: the cut bar is at most about 20 times
        // as long (200 / 9.1), not 700 times.
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let height = |colour: &str| -> Vec<f64> {
            doc.descendants()
                .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(colour))
                .map(|n| attr(n, "height"))
                .collect()
        };
        let time = height(&b.series[1].colour);
        // The legend's swatch, then the bars at 1, 10 and 50 users.
        let bars: Vec<f64> = time.iter().copied().filter(|h| *h != 16.0).collect();
        assert_eq!(bars.len(), 3, "{time:?}");
        assert!(bars[0] > 5.0, "a −9% bar is visible: {bars:?}");
        assert!(bars[2] / bars[0] < 25.0, "{bars:?}");
        // Every bar inside the plot: none taller than the chart.
        assert!(
            bars.iter().all(|h| *h < f64::from(c.height) / 2.0),
            "{bars:?}"
        );
    }

    #[test]
    fn several_candidates_share_one_chart_per_workload() {
        let (osa, hs) = crate::tests::study();
        let mut slow = hs.clone();
        slow.label = "slow".into();
        for t in &mut slow.tests {
            for r in &mut t.runs {
                let th = r.throughput.as_mut().unwrap();
                th.bytes_per_s *= 0.25;
            }
        }
        let r = Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs), Source::new("slow.json", &slow)],
            Options::default(),
        );
        let charts = charts(&r);
        let names: Vec<&str> = charts
            .iter()
            .filter(|c| c.purpose == Purpose::Candidates)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            vec![
                "candidates-rr1c-1x1",
                "candidates-rr1c-200x1000",
                "candidates-rr1c-200x30k",
                "candidates-str-readx30k",
                "candidates-str-writex30k"
            ]
        );
        let c = chart(&charts, "candidates-rr1c-200x30k");
        assert_eq!(
            c.title,
            "rr1c-200x30k: throughput of hs and slow against osa"
        );
        let b = bars_of(c);
        assert_eq!(b.categories.len(), 9);
        let series: Vec<(&str, &str)> = b
            .series
            .iter()
            .map(|s| (s.label.as_str(), s.colour.as_str()))
            .collect();
        // Each candidate in the colour of its line in the absolute charts.
        assert_eq!(
            series,
            vec![("hs", file_colour(1)), ("slow", file_colour(2))]
        );
        // hs twice the base's throughput, slow half of it.
        for (s, want) in b.series.iter().zip([100.0, -50.0]) {
            for v in &s.values {
                assert!((v.unwrap() - want).abs() < 1e-9, "{}: {v:?}", s.label);
            }
        }
        // The per-candidate charts are still there, one per candidate.
        assert!(charts
            .iter()
            .any(|c| c.name == "relative-slow-rr1c-200x30k"));
        assert!(charts.iter().any(|c| c.name == "relative-hs-rr1c-200x30k"));
        // One candidate: no such chart.
        assert!(super::super::charts(&small_report())
            .iter()
            .all(|c| c.purpose != Purpose::Candidates));
    }

    #[test]
    fn the_drawn_relative_chart_has_the_zero_line_and_the_percent_axis() {
        crate::font_status().expect("the embedded font");
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
