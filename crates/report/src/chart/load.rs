//! The latency-against-load chart of an open-loop group: per file, its
//! transaction time's p50, p99 and p99.9 (means over each test's ok runs,
//! timed from the transactions' due times) against the offered rate, both
//! axes logarithmic; where a file's achieved rate fell short of the offered,
//! a hollow marker at the achieved rate on its p99; each file's knee as a
//! vertical line.

use serde::Serialize;

use super::spec::{file_colour, Chart, ChartKind, Purpose, CHART_HEIGHT, CHART_WIDTH};
use crate::figures::rate_label;
use crate::{Knee, LoadPoint, OpenLoopGroup, Report};

/// A percentile of the transaction time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Percentile {
    /// The median: a thin line.
    P50,
    /// The 99th percentile: a thick line.
    P99,
    /// The 99.9th percentile: a dashed line.
    P999,
}

impl Percentile {
    /// All three, in the legend's order.
    pub const ALL: [Percentile; 3] = [Percentile::P50, Percentile::P99, Percentile::P999];

    /// `p50`, `p99`, `p99.9`.
    pub fn label(self) -> &'static str {
        match self {
            Percentile::P50 => "p50",
            Percentile::P99 => "p99",
            Percentile::P999 => "p99.9",
        }
    }

    fn of(self, p: &LoadPoint) -> Option<f64> {
        match self {
            Percentile::P50 => p.p50_us,
            Percentile::P99 => p.p99_us,
            Percentile::P999 => p.p999_us,
        }
    }
}

/// Transaction time against offered load: a line per file and percentile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadChart {
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// One line per file and percentile.
    pub series: Vec<LoadSeries>,
    /// The rates that fell short of their offered rate.
    pub shortfalls: Vec<Shortfall>,
    /// The files' knees.
    pub knees: Vec<KneeMark>,
}

/// One percentile of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSeries {
    /// The file's label.
    pub file: String,
    /// Which percentile.
    pub percentile: Percentile,
    /// Colour, `#rrggbb` (its file's).
    pub colour: String,
    /// (offered transactions/s, µs), by increasing rate: the rates with a
    /// clean run.
    pub points: Vec<(f64, f64)>,
}

/// A rate whose achieved rate fell short of the offered by more than 1 %.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shortfall {
    /// The file's label.
    pub file: String,
    /// Colour, `#rrggbb` (its file's).
    pub colour: String,
    /// Transactions offered per second.
    pub offered_per_s: f64,
    /// Transactions answered per second.
    pub achieved_per_s: f64,
    /// The p99 there, µs (the marker's height).
    pub p99_us: f64,
}

/// A file's knee, drawn as a vertical line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KneeMark {
    /// What it says: "knee of hs: 40k/s", "knee of hs: ≥ 40k/s".
    pub label: String,
    /// Colour, `#rrggbb` (its file's).
    pub colour: String,
    /// The knee's offered rate.
    pub offered_per_s: f64,
}

/// The chart of `g`; `None` when no file has a clean run in it.
pub(super) fn latency_load(report: &Report, g: &OpenLoopGroup) -> Option<Chart> {
    let colour = |label: &str| {
        let i = report
            .figures
            .iter()
            .position(|f| f.label == label)
            .unwrap_or(0);
        file_colour(i).to_string()
    };
    let mut series = Vec::new();
    let mut shortfalls = Vec::new();
    let mut knees = Vec::new();
    for c in &g.curves {
        for p in Percentile::ALL {
            let points: Vec<(f64, f64)> = c
                .points
                .iter()
                .filter_map(|pt| {
                    let v = p.of(pt).filter(|v| v.is_finite() && *v > 0.0)?;
                    Some((pt.offered_per_s as f64, v))
                })
                .collect();
            if !points.is_empty() {
                series.push(LoadSeries {
                    file: c.label.clone(),
                    percentile: p,
                    colour: colour(&c.label),
                    points,
                });
            }
        }
        for pt in c.points.iter().filter(|p| p.falls_short()) {
            let (Some(achieved), Some(p99)) = (pt.achieved_per_s, pt.p99_us) else {
                continue;
            };
            if achieved > 0.0 && p99 > 0.0 {
                shortfalls.push(Shortfall {
                    file: c.label.clone(),
                    colour: colour(&c.label),
                    offered_per_s: pt.offered_per_s as f64,
                    achieved_per_s: achieved,
                    p99_us: p99,
                });
            }
        }
        let at_least = if matches!(c.knee, Knee::Unmeasured { .. }) {
            "≥ "
        } else {
            ""
        };
        if let Some(k) = c.knee.knee_per_s() {
            knees.push(KneeMark {
                label: format!("knee of {}: {at_least}{}", c.label, rate_label(k)),
                colour: colour(&c.label),
                offered_per_s: k as f64,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(Chart {
        name: format!("latency-load-{}", g.slug()),
        title: format!("{}: transaction time against offered load", g.title),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        purpose: Purpose::LatencyLoad,
        workload: Some(g.key.clone()),
        candidate: None,
        kind: ChartKind::Load(LoadChart {
            x_label: "offered load (transactions/s over all users)".into(),
            y_label: "transaction time from the due time".into(),
            series,
            shortfalls,
            knees,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::super::spec::charts;
    use super::super::test_support::{attr, chart, texts};
    use super::*;
    use crate::testdata::{add_offered, document};
    use crate::{Options, Source};

    fn load_of(c: &Chart) -> &LoadChart {
        match &c.kind {
            ChartKind::Load(l) => l,
            other => panic!("{}: not a load chart: {other:?}", c.name),
        }
    }

    /// osa's p99 doubles by 40k/s and is 5.3 times at 50k/s, where it
    /// answers 43.1k/s only; hs stays flat.
    fn sweep() -> Report {
        let (mut osa, mut hs) = (document("osa"), document("hs"));
        for (rate, p99, achieved) in [
            (1_000, 35.0, 1_000.0),
            (10_000, 38.0, 10_000.0),
            (40_000, 66.0, 40_000.0),
            (50_000, 185.5, 43_100.0),
        ] {
            add_offered(&mut osa, "rr1c-1x1", 4, rate, &[(p99, achieved)]);
            add_offered(&mut hs, "rr1c-1x1", 4, rate, &[(30.0, rate as f64)]);
        }
        Report::comparison(
            Source::new("osa.json", &osa),
            &[Source::new("hs.json", &hs)],
            Options::default(),
        )
    }

    #[test]
    fn the_chart_has_three_percentiles_per_file_the_shortfall_and_the_knee() {
        let r = sweep();
        let charts = charts(&r);
        let c = chart(&charts, "latency-load-rr1c-1x1--4");
        assert_eq!(c.purpose, Purpose::LatencyLoad);
        assert_eq!(
            c.title,
            "rr1c-1x1--4: transaction time against offered load"
        );
        let l = load_of(c);
        let lines: Vec<(&str, Percentile, usize)> = l
            .series
            .iter()
            .map(|s| (s.file.as_str(), s.percentile, s.points.len()))
            .collect();
        assert_eq!(
            lines,
            vec![
                ("osa", Percentile::P50, 4),
                ("osa", Percentile::P99, 4),
                ("osa", Percentile::P999, 4),
                ("hs", Percentile::P50, 4),
                ("hs", Percentile::P99, 4),
                ("hs", Percentile::P999, 4),
            ]
        );
        // testdata: p50 half the p99, p99.9 twice it.
        assert_eq!(l.series[1].points[3], (50_000.0, 185.5));
        assert_eq!(l.series[0].points[3], (50_000.0, 185.5 / 2.0));
        assert_eq!(l.series[2].points[0], (1_000.0, 70.0));
        assert_eq!(
            l.shortfalls,
            vec![Shortfall {
                file: "osa".into(),
                colour: file_colour(0).into(),
                offered_per_s: 50_000.0,
                achieved_per_s: 43_100.0,
                p99_us: 185.5,
            }]
        );
        assert_eq!(
            l.knees,
            vec![KneeMark {
                label: "knee of osa: 40k/s".into(),
                colour: file_colour(0).into(),
                offered_per_s: 40_000.0,
            }]
        );
        // Closed-loop charts are not made of open-loop tests.
        assert!(charts
            .iter()
            .all(|c| c.purpose == Purpose::LatencyLoad || c.purpose == Purpose::Overview));
    }

    #[test]
    fn the_drawn_chart_has_log_axes_its_lines_and_markers() {
        crate::font_status().expect("the embedded font");
        let r = sweep();
        let charts = charts(&r);
        let c = chart(&charts, "latency-load-rr1c-1x1--4");
        let svg = c.svg().unwrap();
        let t = texts(&svg);
        for label in [
            "offered load (transactions/s over all users)",
            "transaction time from the due time",
            "osa",
            "hs",
            "p50: thin",
            "p99: thick",
            "p99.9: dashed",
            "knee of osa: 40k/s",
            "1k/s",
            "10k/s",
            "100 µs",
        ] {
            assert!(t.iter().any(|x| x == label), "{label} not in {t:?}");
        }
        assert!(
            t.iter()
                .any(|x| x.contains("transaction time against offered load, log scales")),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|x| x.contains("achieved where short of offered")),
            "{t:?}"
        );
        let doc = roxmltree::Document::parse(&svg).unwrap();
        // Each file's p99 points: filled circles of its colour, equal
        // ratios of rate equally far apart (1k → 10k as 4k → 40k).
        let circles = |colour: &str, r: f64| -> Vec<(f64, f64)> {
            doc.descendants()
                .filter(|n| {
                    n.has_tag_name("circle")
                        && n.attribute("fill") == Some(colour)
                        && (attr(*n, "r") - r).abs() < 0.1
                })
                .map(|n| (attr(n, "cx"), attr(n, "cy")))
                .collect()
        };
        let osa = circles(file_colour(0), 6.0);
        assert_eq!(osa.len(), 4, "{osa:?}");
        let xs: Vec<f64> = osa.iter().map(|p| p.0).collect();
        let decade = xs[1] - xs[0];
        assert!(decade > 100.0, "{xs:?}");
        assert!(
            ((xs[2] - xs[1]) - decade * (4f64).log10()).abs() < 2.0,
            "{xs:?}"
        );
        // The p99 rises: y falls (SVG's y runs down).
        assert!(osa.windows(2).all(|w| w[1].1 < w[0].1), "{osa:?}");
        // The shortfall: a hollow circle left of the 50k/s point, at its height.
        let hollow: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| {
                n.has_tag_name("circle")
                    && n.attribute("stroke") == Some(file_colour(0))
                    && n.attribute("fill") == Some("none")
            })
            .map(|n| (attr(n, "cx"), attr(n, "cy")))
            .collect();
        assert_eq!(hollow.len(), 1, "{hollow:?}");
        assert!(hollow[0].0 < xs[3] && hollow[0].0 > xs[2], "{hollow:?}");
        assert!((hollow[0].1 - osa[3].1).abs() < 1.0);
        // A PNG of the chart's size.
        let png = c.png().unwrap();
        let mut reader = png::Decoder::new(png.as_slice()).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (c.width, c.height));
    }
}
