//! The absolute charts of a workload: throughput and mean transaction time
//! against users, a line per results file. Request/response workloads (rr,
//! crr, mix) count their throughput in transactions per second, streams in
//! bits per second; a file's link capacity is a horizontal line; the Y axis
//! is logarithmic when the values span more than [`LOG_RATIO`](super::LOG_RATIO)
//! times.

use super::axis::{wants_log, ValueUnit};
use super::spec::{file_colour, CapacityLine, Chart, ChartKind, LineChart, LinePoint, LineSeries};
use super::spec::{Purpose, CHART_HEIGHT, CHART_WIDTH};
use crate::units::{capacity, file_safe};
use crate::{Metric, Report, WorkloadReport};

/// One absolute figure of `w` against users, a line per file that measured
/// it, scaled by `factor` into the chart's unit.
fn lines(report: &Report, w: &WorkloadReport, metric: Metric, factor: f64) -> Vec<LineSeries> {
    report
        .figures
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let tests = f.workload(&w.key);
            LineSeries {
                label: f.label.clone(),
                colour: file_colour(i).to_string(),
                points: w
                    .users
                    .iter()
                    .map(|u| {
                        let s = tests.iter().find(|t| t.users == *u)?.metrics.get(&metric)?;
                        Some(LinePoint {
                            mean: s.mean * factor,
                            ci95: s
                                .ci95_low
                                .zip(s.ci95_high)
                                .map(|(l, h)| (l * factor, h * factor)),
                        })
                    })
                    .collect(),
            }
        })
        .filter(|s| s.points.iter().any(Option::is_some))
        .collect()
}

/// Every mean of `series`.
fn means(series: &[LineSeries]) -> impl Iterator<Item = f64> + '_ {
    series
        .iter()
        .flat_map(|s| s.points.iter().flatten().map(|p| p.mean))
}

/// The throughput chart's unit, metric and factor from the results' units:
/// transactions per second for request/response workloads, bits per second
/// (from payload bytes) for the others.
pub(super) fn throughput_unit(w: &WorkloadReport) -> (ValueUnit, Metric, f64) {
    if w.is_transactional() {
        (
            ValueUnit::TransactionsPerSecond,
            Metric::TransactionRate,
            1.0,
        )
    } else {
        (ValueUnit::BitsPerSecond, Metric::Throughput, 8.0)
    }
}

/// The capacity lines of the files that measured `w`, in `unit`: a link's
/// rate for streams; for request/response workloads of fixed sizes the
/// transactions per second it can carry, its rate over the larger of
/// request and response (a mix has no one size: no line). Files sharing a
/// capacity share a line.
fn capacity_lines(report: &Report, w: &WorkloadReport, unit: ValueUnit) -> Vec<CapacityLine> {
    let mut out: Vec<(f64, Vec<usize>, String)> = Vec::new();
    for (i, (info, f)) in report.files.iter().zip(&report.figures).enumerate() {
        let Some(cap) = info.capacity_bits_per_s else {
            continue;
        };
        if f.workload(&w.key).is_empty() {
            continue;
        }
        let (value, text) = match unit {
            ValueUnit::BitsPerSecond => (cap.as_f64(), capacity(cap.as_f64())),
            ValueUnit::TransactionsPerSecond => {
                let Some(bytes) = w.transaction_bytes.filter(|b| *b > 0) else {
                    continue;
                };
                let tps = cap.as_f64() / 8.0 / bytes as f64;
                (
                    tps,
                    format!(
                        "{}, {} of {bytes} B",
                        capacity(cap.as_f64()),
                        unit.format(tps)
                    ),
                )
            }
            _ => continue,
        };
        match out.iter_mut().find(|(v, _, _)| *v == value) {
            Some((_, files, _)) => files.push(i),
            None => out.push((value, vec![i], text)),
        }
    }
    out.into_iter()
        .map(|(value, files, text)| {
            let names: Vec<&str> = files
                .iter()
                .map(|&i| report.files[i].label.as_str())
                .collect();
            CapacityLine {
                label: format!("capacity of {}: {text}", crate::report::join_and(&names)),
                value,
                colour: if files.len() == 1 {
                    file_colour(files[0]).to_string()
                } else {
                    "#777777".to_string()
                },
            }
        })
        .collect()
}

/// Throughput against users, a line per file, with the capacity lines.
pub(super) fn throughput(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    let (unit, metric, factor) = throughput_unit(w);
    let series = lines(report, w, metric, factor);
    if series.is_empty() {
        return None;
    }
    let capacity = capacity_lines(report, w, unit);
    let log_y = wants_log(means(&series).chain(capacity.iter().map(|c| c.value)));
    let (title, y_label) = match unit {
        ValueUnit::TransactionsPerSecond => (
            format!("{}: throughput in transactions/s", w.title),
            "throughput (transactions/s)".to_string(),
        ),
        _ => (
            format!("{}: throughput in bit/s", w.title),
            "throughput (payload, both directions)".to_string(),
        ),
    };
    Some(Chart {
        name: format!("throughput-{}", file_safe(&w.title)),
        title,
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        purpose: Purpose::Throughput,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Lines(LineChart {
            categories: w.users.iter().map(u32::to_string).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label,
            unit,
            log_y,
            series,
            capacity,
        }),
    })
}

/// Mean transaction time against users, a line per file.
pub(super) fn transaction_time(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    let series = lines(report, w, Metric::TimeMean, 1.0);
    if series.is_empty() {
        return None;
    }
    Some(Chart {
        name: format!("transaction-time-{}", file_safe(&w.title)),
        title: format!("{}: mean transaction time", w.title),
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        purpose: Purpose::TransactionTime,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Lines(LineChart {
            categories: w.users.iter().map(u32::to_string).collect(),
            x_label: "users (concurrent connections)".into(),
            y_label: "mean transaction time".into(),
            unit: ValueUnit::Microseconds,
            log_y: wants_log(means(&series)),
            series,
            capacity: Vec::new(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::super::spec::charts;
    use super::super::test_support::{attr, chart, texts};
    use super::*;
    use crate::testdata::{add, document, fig};
    use crate::tests::small_report;
    use crate::{Options, Source};
    use linkperf_workload::BitsPerSecond;

    fn lines_of(c: &Chart) -> &LineChart {
        match &c.kind {
            ChartKind::Lines(l) => l,
            other => panic!("{}: not lines: {other:?}", c.name),
        }
    }

    #[test]
    fn request_response_is_charted_in_transactions_and_streams_in_bits() {
        let (mut a, mut b) = (document("a"), document("b"));
        for (doc, k) in [(&mut a, 1.0), (&mut b, 2.0)] {
            for w in [
                "rr1c-1x1",
                "crr-200x1000",
                "mix:200x200*1,200x8k*3",
                "str-readx30k",
            ] {
                add(doc, w, 1, &[fig(1e6 * k, 20.0, 5e7)]);
            }
        }
        let r = Report::comparison(
            Source::new("a.json", &a),
            &[Source::new("b.json", &b)],
            Options::default(),
        );
        let charts = charts(&r);
        for (name, unit, first) in [
            ("throughput-rr1c-1x1", ValueUnit::TransactionsPerSecond, 1e3),
            (
                "throughput-crr-200x1000",
                ValueUnit::TransactionsPerSecond,
                1e3,
            ),
            (
                "throughput-mix-200x200_1_200x8k_3",
                ValueUnit::TransactionsPerSecond,
                1e3,
            ),
            ("throughput-str-readx30k", ValueUnit::BitsPerSecond, 8e6),
        ] {
            let l = lines_of(chart(&charts, name));
            assert_eq!(l.unit, unit, "{name}");
            // testdata: transactions/s = bytes/s / 1000; bits = 8 × bytes.
            assert_eq!(l.series[0].points[0].unwrap().mean, first, "{name}");
            let expected = if unit == ValueUnit::TransactionsPerSecond {
                "throughput (transactions/s)"
            } else {
                "throughput (payload, both directions)"
            };
            assert_eq!(l.y_label, expected, "{name}");
        }
        let svg = chart(&charts, "throughput-rr1c-1x1").svg().unwrap();
        assert!(texts(&svg).iter().any(|t| t == "1k/s"), "{svg}");
        let svg = chart(&charts, "throughput-str-readx30k").svg().unwrap();
        assert!(texts(&svg).iter().any(|t| t == "8 Mbit/s"), "{svg}");
        let l = lines_of(chart(&charts, "transaction-time-rr1c-1x1"));
        assert_eq!(l.unit, ValueUnit::Microseconds);
    }

    /// veth, 10g and 1g streaming: 30, 9.4 and 0.96 Gbit/s at 1 user.
    fn three_links() -> (Vec<linkperf_results::ResultsDocument>, Vec<f64>) {
        let gbit = [30.0, 9.4, 0.96];
        let docs = ["veth", "10g", "1g"]
            .iter()
            .zip(gbit)
            .map(|(label, g)| {
                let mut d = document(label);
                for u in [1, 10] {
                    add(&mut d, "str-readx30k", u, &[fig(g * 1e9 / 8.0, 100.0, 1e9)]);
                    add(&mut d, "rr1c-200x30k", u, &[fig(g * 1e9 / 8.0, 100.0, 1e9)]);
                }
                d
            })
            .collect();
        (docs, gbit.to_vec())
    }

    #[test]
    fn the_axis_is_logarithmic_above_thirty_times_and_linear_below() {
        let (docs, _) = three_links();
        let all = Report::comparison(
            Source::new("veth.json", &docs[0]),
            &[
                Source::new("10g.json", &docs[1]),
                Source::new("1g.json", &docs[2]),
            ],
            Options::default(),
        );
        // 30 / 0.96 = 31 times.
        let charts = charts(&all);
        let l = lines_of(chart(&charts, "throughput-str-readx30k"));
        assert!(l.log_y, "{l:?}");
        // Transaction times all 100 µs: linear.
        assert!(!lines_of(chart(&charts, "transaction-time-str-readx30k")).log_y);
        // 10g against veth: about 3 times, linear.
        let two = Report::comparison(
            Source::new("veth.json", &docs[0]),
            &[Source::new("10g.json", &docs[1])],
            Options::default(),
        );
        assert!(
            !lines_of(chart(
                &super::super::charts(&two),
                "throughput-str-readx30k"
            ))
            .log_y
        );

        // Drawn: ticks at 1, 2, 5 × powers of ten, equal ratios equally far apart.
        crate::font_status().expect("the embedded font");
        let svg = chart(&charts, "throughput-str-readx30k").svg().unwrap();
        let t = texts(&svg);
        for tick in ["1 Gbit/s", "10 Gbit/s", "2 Gbit/s", "20 Gbit/s"] {
            assert!(t.iter().any(|x| x == tick), "{tick} not in {t:?}");
        }
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let y_of = |label: &str| {
            let n = doc
                .descendants()
                .find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(label))
                .unwrap();
            attr(n, "y")
        };
        let (y1, y2, y10, y20) = (
            y_of("1 Gbit/s"),
            y_of("2 Gbit/s"),
            y_of("10 Gbit/s"),
            y_of("20 Gbit/s"),
        );
        assert!(
            ((y1 - y2) - (y10 - y20)).abs() <= 1.5,
            "{y1} {y2} {y10} {y20}"
        );
        assert!(
            ((y1 - y10) - 3.32 * (y1 - y2)).abs() <= 3.0,
            "a decade is log2(10) doublings"
        );
    }

    #[test]
    fn capacity_lines_are_drawn_where_a_file_has_a_capacity() {
        let (docs, _) = three_links();
        let r = Report::comparison(
            Source::new("veth.json", &docs[0]),
            &[
                Source::new("10g.json", &docs[1])
                    .with_capacity(Some(BitsPerSecond(10_000_000_000))),
                Source::new("1g.json", &docs[2]).with_capacity(Some(BitsPerSecond(1_000_000_000))),
            ],
            Options::default(),
        );
        let charts = charts(&r);
        let l = lines_of(chart(&charts, "throughput-str-readx30k"));
        let caps: Vec<(&str, f64, &str)> = l
            .capacity
            .iter()
            .map(|c| (c.label.as_str(), c.value, c.colour.as_str()))
            .collect();
        assert_eq!(
            caps,
            vec![
                ("capacity of 10g: 10 Gbit/s", 1e10, file_colour(1)),
                ("capacity of 1g: 1 Gbit/s", 1e9, file_colour(2)),
            ]
        );
        // Request/response: the transactions/s the link carries of the
        // larger message, 30720 bytes: 1e9 / 8 / 30720 = 4069/s.
        let l = lines_of(chart(&charts, "throughput-rr1c-200x30k"));
        assert_eq!(l.capacity.len(), 2);
        assert!((l.capacity[1].value - 1e9 / 8.0 / 30720.0).abs() < 1e-6);
        assert_eq!(
            l.capacity[1].label,
            "capacity of 1g: 1 Gbit/s, 4.07k/s of 30720 B"
        );
        // No transaction-time capacity, and none without a capacity.
        assert!(lines_of(chart(&charts, "transaction-time-str-readx30k"))
            .capacity
            .is_empty());
        assert!(lines_of(chart(
            &super::super::charts(&small_report()),
            "throughput-rr1c-1x1"
        ))
        .capacity
        .is_empty());
        // Every file given one capacity: one grey line naming them all.
        let same = Report::comparison(
            Source::new("veth.json", &docs[0]),
            &[Source::new("10g.json", &docs[1])],
            Options {
                capacity_bits_per_s: Some(BitsPerSecond(40_000_000_000)),
                ..Options::default()
            },
        );
        let same_charts = super::super::charts(&same);
        let l = lines_of(chart(&same_charts, "throughput-str-readx30k"));
        assert_eq!(l.capacity.len(), 1);
        assert_eq!(l.capacity[0].label, "capacity of veth and 10g: 40 Gbit/s");
        assert_eq!(l.capacity[0].colour, "#777777");

        // Drawn: a dashed horizontal line across the plot, labelled.
        crate::font_status().expect("the embedded font");
        let svg = chart(&charts, "throughput-str-readx30k").svg().unwrap();
        assert!(
            texts(&svg).iter().any(|t| t == "capacity of 1g: 1 Gbit/s"),
            "{svg}"
        );
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let dashes: Vec<f64> = doc
            .descendants()
            .filter(|n| {
                (n.has_tag_name("polyline") || n.has_tag_name("line"))
                    && n.attribute("stroke") == Some(file_colour(2))
            })
            .filter_map(|n| {
                if n.has_tag_name("line") {
                    (attr(n, "y1") == attr(n, "y2")).then(|| attr(n, "x2") - attr(n, "x1"))
                } else {
                    let pts: Vec<(f64, f64)> = n
                        .attribute("points")?
                        .split_whitespace()
                        .map(|p| {
                            let (x, y) = p.split_once(',').unwrap();
                            (x.parse().unwrap(), y.parse().unwrap())
                        })
                        .collect();
                    (pts.len() == 2 && pts[0].1 == pts[1].1).then(|| pts[1].0 - pts[0].0)
                }
            })
            .collect();
        // Many short horizontal dashes of the 1g file's colour.
        assert!(dashes.len() > 20, "{dashes:?}");
    }

    /// osa and hs, rr1c-1x1 at 1 and 10 users, three runs each: throughput
    /// 1.0, 1.2 and 1.1 MB/s (osa) or twice that (hs), so 1000, 1200 and
    /// 1100 transactions/s; transaction times 20, 24 and 22 µs.
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

    #[test]
    fn absolute_charts_carry_the_confidence_intervals_of_repeats() {
        let charts = charts(&repeated());
        // Throughput, osa at 1 user: mean 1100 transactions/s; standard
        // deviation 100/s over 3 runs, half width t(0.975, 2) × s / √3 =
        // 4.302653 × 100 / 1.732051 = 248.414/s.
        let l = lines_of(chart(&charts, "throughput-rr1c-1x1"));
        assert_eq!(l.unit, ValueUnit::TransactionsPerSecond);
        let p = l.series[0].points[0].unwrap();
        assert!((p.mean - 1100.0).abs() < 1e-9, "{p:?}");
        let (lo, hi) = p.ci95.expect("repeats have a confidence interval");
        assert!((lo - (1100.0 - 248.414)).abs() < 1e-3, "{p:?}");
        assert!((hi - (1100.0 + 248.414)).abs() < 1e-3, "{p:?}");
        // Every point of both files has one.
        for s in &l.series {
            assert!(s.points.iter().all(|p| p.unwrap().ci95.is_some()), "{s:?}");
        }
        // Transaction time: 20, 24 and 22 µs, mean 22, s = 2: ± 4.968275 µs.
        let l = lines_of(chart(&charts, "transaction-time-rr1c-1x1"));
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
        crate::font_status().expect("the embedded font");
        let charts = charts(&repeated());
        for name in ["throughput-rr1c-1x1", "transaction-time-rr1c-1x1"] {
            let c = chart(&charts, name);
            let svg = c.svg().unwrap();
            assert!(
                svg.contains("(whiskers: 95% confidence interval)"),
                "{name}"
            );
            let l = lines_of(c);
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
                    // The interval is ±18% of the mean, so the whisker is a
                    // visible stretch, not a dot.
                    assert!(w.2 - w.1 > 10.0, "{name}: {w:?}");
                }
            }
        }
        // Single runs: points, but no whisker and no note of one.
        let charts = super::super::charts(&small_report());
        let c = chart(&charts, "throughput-rr1c-1x1");
        let svg = c.svg().unwrap();
        assert!(!svg.contains("whiskers"));
        let l = lines_of(c);
        let (whiskers, points) = whiskers_and_points(&svg, &l.series[0].colour);
        assert_eq!(points.len(), 2);
        assert!(whiskers.is_empty(), "{whiskers:?}");
    }
}
