//! The per-second throughput of every test, as small multiples: one panel
//! per test (user count) of a workload, a line per ok run of each file,
//! from the runs' receiver-side `intervals`. A stall, a slow start or a
//! run that drifts shows here before it shows in a mean.

use super::absolute::throughput_unit;
use super::axis::{wants_log, ValueUnit};
use super::spec::CHART_WIDTH;
use super::spec::{file_colour, Chart, ChartKind, Panel, PanelChart, Purpose, RunLine};
use crate::units::file_safe;
use crate::{Report, WorkloadReport};

/// Panels per row: three fit a laptop's page at a readable size.
pub const PANEL_COLUMNS: u32 = 3;
/// Height of one row of panels, pixels.
pub const PANEL_HEIGHT: u32 = 250;
/// Height of the title and legend above the panels, pixels.
pub const PANELS_HEADER: u32 = 100;

/// The per-second throughput of each test of `w`, a panel per user count;
/// `None` when no ok run of any file has per-second samples.
pub(super) fn per_second(report: &Report, w: &WorkloadReport) -> Option<Chart> {
    let (unit, _, _) = throughput_unit(w);
    let value = |i: &linkperf_results::IntervalRate| match unit {
        ValueUnit::TransactionsPerSecond => i.transactions_per_s(),
        _ => i.bytes_per_s() * 8.0,
    };
    let mut panels = Vec::new();
    for u in &w.users {
        let mut lines = Vec::new();
        let mut test = String::new();
        for (fi, f) in report.figures.iter().enumerate() {
            let Some(t) = f.workload(&w.key).into_iter().find(|t| t.users == *u) else {
                continue;
            };
            test.clone_from(&t.name);
            for (run, intervals) in &t.intervals {
                let points: Vec<(f64, f64)> = intervals
                    .iter()
                    .filter(|i| i.second.length_s > 0.0)
                    .map(|i| (i.second.start_s + i.second.length_s / 2.0, value(i)))
                    .collect();
                if !points.is_empty() {
                    lines.push(RunLine {
                        file: f.label.clone(),
                        run: *run,
                        colour: file_colour(fi).to_string(),
                        points,
                    });
                }
            }
        }
        if lines.is_empty() {
            continue;
        }
        let log_y = wants_log(
            lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.1))
                .filter(|v| *v > 0.0),
        );
        panels.push(Panel {
            title: format!("{u} user{}", if *u == 1 { "" } else { "s" }),
            test,
            log_y,
            lines,
        });
    }
    if panels.is_empty() {
        return None;
    }
    let columns = PANEL_COLUMNS.min(panels.len() as u32);
    let rows = (panels.len() as u32).div_ceil(columns);
    let files = report
        .figures
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            panels
                .iter()
                .any(|p| p.lines.iter().any(|l| l.file == f.label))
        })
        .map(|(i, f)| (f.label.clone(), file_colour(i).to_string()))
        .collect();
    let y_label = match unit {
        ValueUnit::TransactionsPerSecond => "transactions/s",
        _ => "throughput",
    };
    Some(Chart {
        name: format!("timeseries-{}", file_safe(&w.title)),
        title: format!(
            "{}: {} per second of every ok run",
            w.title,
            if unit == ValueUnit::TransactionsPerSecond {
                "transactions"
            } else {
                "throughput"
            }
        ),
        width: CHART_WIDTH,
        height: PANELS_HEADER + rows * PANEL_HEIGHT,
        purpose: Purpose::TimeSeries,
        workload: Some(w.key.clone()),
        candidate: None,
        kind: ChartKind::Panels(PanelChart {
            x_label: "seconds into the window".into(),
            y_label: y_label.into(),
            unit,
            files,
            columns,
            panels,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::super::spec::charts;
    use super::super::test_support::{chart, texts};
    use super::*;
    use crate::testdata::{add, document, fig, with_intervals};
    use crate::{Options, Source};
    use linkperf_results::RunStatus;

    fn panels_of(c: &Chart) -> &PanelChart {
        match &c.kind {
            ChartKind::Panels(p) => p,
            other => panic!("{}: not panels: {other:?}", c.name),
        }
    }

    #[test]
    fn every_test_has_a_panel_with_a_line_per_ok_run() {
        let (mut a, mut b) = (document("a"), document("b"));
        for u in [1, 10, 50, 100] {
            add(
                &mut a,
                "str-readx30k",
                u,
                &[fig(1e8, 10.0, 1e8), fig(1.1e8, 10.0, 1e8)],
            );
            add(&mut b, "str-readx30k", u, &[fig(2e8, 10.0, 1e8)]);
            add(&mut a, "rr1c-1x1", u, &[fig(1e6, 10.0, 1e8)]);
            add(&mut b, "rr1c-1x1", u, &[fig(2e6, 10.0, 1e8)]);
        }
        // A suspect run stays out, as it does of every statistic.
        let t = a
            .tests
            .iter_mut()
            .find(|t| t.name == "str-readx30k--1")
            .unwrap();
        t.runs[1].status = RunStatus::Suspect;
        let r = Report::comparison(
            Source::new("a.json", &a),
            &[Source::new("b.json", &b)],
            Options::default(),
        );
        let charts = charts(&r);
        let c = chart(&charts, "timeseries-str-readx30k");
        let p = panels_of(c);
        assert_eq!(p.unit, ValueUnit::BitsPerSecond);
        assert_eq!(p.columns, 3);
        assert_eq!(
            c.height,
            PANELS_HEADER + 2 * PANEL_HEIGHT,
            "4 panels, 2 rows"
        );
        let titles: Vec<&str> = p.panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, vec!["1 user", "10 users", "50 users", "100 users"]);
        let runs = |i: usize| -> Vec<(&str, u32)> {
            p.panels[i]
                .lines
                .iter()
                .map(|l| (l.file.as_str(), l.run))
                .collect()
        };
        assert_eq!(
            runs(0),
            vec![("a", 1), ("b", 1)],
            "the suspect run left out"
        );
        assert_eq!(runs(1), vec![("a", 1), ("a", 2), ("b", 1)]);
        // testdata: 10 one-second samples at the run's rate, in bits.
        let l = &p.panels[1].lines[0];
        assert_eq!(l.points.len(), 10);
        assert_eq!(l.points[0], (0.5, 8e8));
        assert_eq!(
            p.files,
            vec![
                ("a".into(), file_colour(0).into()),
                ("b".into(), file_colour(1).into())
            ]
        );
        // Request/response: transactions per second.
        let p = panels_of(chart(&charts, "timeseries-rr1c-1x1"));
        assert_eq!(p.unit, ValueUnit::TransactionsPerSecond);
        assert_eq!(p.panels[0].lines[0].points[0].1, 1e3);

        crate::font_status().expect("the embedded font");
        let svg = c.svg().unwrap();
        let t = texts(&svg);
        for label in ["1 user", "100 users", "seconds into the window", "a", "b"] {
            assert!(t.iter().any(|x| x == label), "{label} not in {t:?}");
        }
    }

    #[test]
    fn runs_without_samples_have_no_panel() {
        let mut a = document("a");
        add(&mut a, "str-readx30k", 1, &[fig(1e8, 10.0, 1e8)]);
        add(&mut a, "str-readx30k", 10, &[fig(1e8, 10.0, 1e8)]);
        a.tests[0].runs[0].intervals.clear();
        let r = Report::single(Source::new("a.json", &a), Options::default());
        let p = panels_of(chart(&charts(&r), "timeseries-str-readx30k")).clone();
        assert_eq!(p.panels.len(), 1);
        assert_eq!(p.columns, 1);
        for t in &mut a.tests {
            t.runs[0].intervals.clear();
        }
        let r = Report::single(Source::new("a.json", &a), Options::default());
        assert!(charts(&r).iter().all(|c| c.purpose != Purpose::TimeSeries));
        // The helper makes what the tests above read.
        let mut run = crate::testdata::run(1, fig(1e6, 1.0, 1.0));
        with_intervals(&mut run, 3);
        assert_eq!(run.intervals.len(), 3);
    }
}
