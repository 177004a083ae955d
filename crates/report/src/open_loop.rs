//! Open-loop sweeps: the open-loop tests of one workload, protocol and user
//! count at their offered rates, per results file, with their transaction
//! time percentiles and achieved rates (means over each test's ok runs) and
//! the knee ([`knee`]). Closed-loop tests are never part of one.

use serde::Serialize;

use crate::figures::rate_label;
use crate::knee::{knee, Knee, LoadPoint};
use crate::units::file_safe;
use crate::{FileFigures, Metric, TestFigures, WorkloadKey};

/// One file's sweep of a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadCurve {
    /// The file's label.
    pub label: String,
    /// Its tests of the group, by increasing offered rate.
    pub points: Vec<LoadPoint>,
    /// Where its p99 leaves [`KNEE_P99_FACTOR`](crate::KNEE_P99_FACTOR)
    /// times its value at the lowest rate.
    pub knee: Knee,
    /// The knee in words, naming the file.
    pub text: String,
}

/// The open-loop tests of one workload, protocol and user count, across
/// the files: the latency-against-load curve of each file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenLoopGroup {
    /// The workload and protocol (its `open_loop` is true).
    pub key: WorkloadKey,
    /// Concurrent users (connections).
    pub users: u32,
    /// The tests' name without their rate: `rr1c-1x1--4`,
    /// `rr1c-1x1--4--unix`.
    pub title: String,
    /// Every offered rate any file measured, increasing.
    pub rates_per_s: Vec<u64>,
    /// Per file with tests in the group, in the report's file order.
    pub curves: Vec<LoadCurve>,
}

impl OpenLoopGroup {
    /// The group's name in file names and anchors: `rr1c-1x1--4`.
    pub fn slug(&self) -> String {
        file_safe(&self.title)
    }

    /// Whether the open-loop tests of `key` at `users` belong to the group.
    pub(crate) fn holds(&self, key: &WorkloadKey, users: u32) -> bool {
        &self.key == key && self.users == users
    }
}

/// A test's name without its offered rate: `rr1c-1x1--4--10k/s` →
/// `rr1c-1x1--4` (the rate comes last in an open-loop test's name).
fn without_rate(t: &TestFigures) -> String {
    let Some(rate) = t.offered_rate() else {
        return t.name.clone();
    };
    t.name
        .strip_suffix(&format!("--{}", rate_label(rate)))
        .unwrap_or(&t.name)
        .to_string()
}

/// The point of one open-loop test.
fn point(t: &TestFigures, rate: u64) -> LoadPoint {
    let tolerance = t
        .offered
        .map_or(linkperf_results::RATE_TOLERANCE, |o| o.rate_tolerance);
    LoadPoint {
        test: t.name.clone(),
        offered_per_s: rate,
        ok_runs: t.ok_runs,
        suspect_runs: t.suspect_runs,
        suspect_reasons: t.suspect_reasons.clone(),
        achieved_per_s: t.mean(Metric::TransactionRate),
        rate_tolerance: tolerance,
        p50_us: t.mean(Metric::TimeP50),
        p99_us: t.mean(Metric::TimeP99),
        p999_us: t.mean(Metric::TimeP999),
    }
}

/// The open-loop groups of `figures`, in the order their first tests
/// appear (the base's first).
pub(crate) fn open_loop_groups(figures: &[FileFigures]) -> Vec<OpenLoopGroup> {
    let mut groups: Vec<OpenLoopGroup> = Vec::new();
    for f in figures {
        for t in f.tests.iter().filter(|t| t.offered.is_some()) {
            if !groups.iter().any(|g| g.holds(&t.workload, t.users)) {
                groups.push(OpenLoopGroup {
                    key: t.workload.clone(),
                    users: t.users,
                    title: without_rate(t),
                    rates_per_s: Vec::new(),
                    curves: Vec::new(),
                });
            }
        }
    }
    for g in &mut groups {
        for f in figures {
            let mut points: Vec<LoadPoint> = f
                .tests
                .iter()
                .filter(|t| t.workload == g.key && t.users == g.users)
                .filter_map(|t| Some(point(t, t.offered_rate()?)))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by_key(|p| p.offered_per_s);
            let knee = knee(&points);
            g.rates_per_s.extend(points.iter().map(|p| p.offered_per_s));
            g.curves.push(LoadCurve {
                label: f.label.clone(),
                text: knee.describe(&f.label),
                knee,
                points,
            });
        }
        g.rates_per_s.sort_unstable();
        g.rates_per_s.dedup();
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{add, add_offered, document, fig};
    use crate::{
        Better, CsvExporter, Exporter, HtmlExporter, JsonExporter, MarkdownExporter, Options,
        Outcome, Report, Source, Verdict,
    };
    use linkperf_results::ResultsDocument;

    /// rr1c-1x1 at 4 users, closed loop (1 and 4 users) and open loop at
    /// 1k, 10k, 40k and 50k/s: p99 35, 38, 66 and 185.5 µs, the last
    /// answering 43.1k/s only.
    fn osa() -> ResultsDocument {
        let mut d = document("osa");
        add(&mut d, "rr1c-1x1", 1, &[fig(1e6, 20.0, 5e7)]);
        add(&mut d, "rr1c-1x1", 4, &[fig(2e6, 25.0, 5e7)]);
        for (rate, p99, achieved) in [
            (1_000, 35.0, 1_000.0),
            (10_000, 38.0, 10_000.0),
            (40_000, 66.0, 40_000.0),
            (50_000, 185.5, 43_100.0),
        ] {
            add_offered(&mut d, "rr1c-1x1", 4, rate, &[(p99, achieved)]);
        }
        d
    }

    /// The same closed-loop tests; open loop at 10k, 40k, 50k and 100k/s,
    /// p99 20 µs up to 50k/s and 60 µs at 100k/s, all achieved.
    fn hs() -> ResultsDocument {
        let mut d = document("hs");
        add(&mut d, "rr1c-1x1", 1, &[fig(1.5e6, 15.0, 6e7)]);
        add(&mut d, "rr1c-1x1", 4, &[fig(2e6, 25.0, 5e7)]);
        for (rate, p99) in [
            (10_000, 20.0),
            (40_000, 20.0),
            (50_000, 20.0),
            (100_000, 60.0),
        ] {
            add_offered(&mut d, "rr1c-1x1", 4, rate, &[(p99, rate as f64)]);
        }
        d
    }

    fn compared(base: &ResultsDocument, cand: &ResultsDocument) -> Report {
        Report::comparison(
            Source::new("osa.json", base),
            &[Source::new("hs.json", cand)],
            Options::default(),
        )
    }

    #[test]
    fn open_loop_tests_form_a_group_of_their_own_with_each_files_knee() {
        let r = compared(&osa(), &hs());
        assert_eq!(r.open_loop.len(), 1);
        let g = &r.open_loop[0];
        assert_eq!(g.title, "rr1c-1x1--4");
        assert_eq!(g.users, 4);
        assert!(g.key.open_loop);
        assert_eq!(g.key.to_string(), "rr1c-1x1 (open loop)");
        assert_eq!(g.rates_per_s, vec![1_000, 10_000, 40_000, 50_000, 100_000]);
        let texts: Vec<&str> = g.curves.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "osa: p99 stays within 2× of its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s it is 5.3× (185.5 µs, achieved 43.1k/s of 50k/s)",
                "hs: p99 stays within 2× of its value at 10k/s (20.0 µs) up to 50k/s; at 100k/s it is 3.0× (60.0 µs)",
            ]
        );
        let p = &g.curves[0].points[3];
        assert_eq!(
            (
                p.offered_per_s,
                p.achieved_per_s,
                p.p50_us,
                p.p99_us,
                p.p999_us
            ),
            (
                50_000,
                Some(43_100.0),
                Some(92.75),
                Some(185.5),
                Some(371.0)
            )
        );
        assert!(p.falls_short());
        // The closed-loop workload keeps its two user counts, untouched by
        // the open-loop tests at 4 users.
        assert_eq!(r.workloads.len(), 1);
        assert_eq!(r.workloads[0].title, "rr1c-1x1");
        assert_eq!(r.workloads[0].users, vec![1, 4]);
        let closed = r.figures[0].workload(&r.workloads[0].key);
        assert_eq!(closed.len(), 2);
        assert!(closed.iter().all(|t| t.offered.is_none()));
    }

    #[test]
    fn open_loop_tests_pair_at_equal_offered_load_only() {
        let r = compared(&osa(), &hs());
        let c = &r.comparisons[0];
        let names: Vec<&str> = c.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "rr1c-1x1--1",
                "rr1c-1x1--4",
                "rr1c-1x1--4--10k/s",
                "rr1c-1x1--4--40k/s",
                "rr1c-1x1--4--50k/s",
            ]
        );
        assert_eq!(c.only_in_base, vec!["rr1c-1x1--4--1k/s"]);
        assert_eq!(c.only_in_candidate, vec!["rr1c-1x1--4--100k/s"]);
        // The closed-loop test at 4 users is paired with the closed-loop one.
        let closed = c.test("rr1c-1x1--4").unwrap();
        assert_eq!(closed.offered_per_s, None);
        assert_eq!(closed.verdict, Verdict::Same);
        assert!(closed.metric(Metric::TimeP50).is_none());
        // At 50k/s: p50 92.75 against 10 µs, p99 185.5 against 20 µs:
        // lower is better, (base − cand) / base.
        let t = c.test("rr1c-1x1--4--50k/s").unwrap();
        assert_eq!(t.offered_per_s, Some(50_000));
        let pct = |m: Metric| {
            let mc = t.metric(m).unwrap_or_else(|| panic!("{m} not compared"));
            (mc.better, mc.judgement.relative_pct, mc.judgement.outcome)
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let (better, p50, outcome) = pct(Metric::TimeP50);
        assert_eq!((better, outcome), (Better::Lower, Outcome::Better));
        assert!(close(p50, (92.75 - 10.0) / 92.75 * 100.0), "{p50}");
        let (_, p99, _) = pct(Metric::TimeP99);
        assert!(close(p99, (185.5 - 20.0) / 185.5 * 100.0), "{p99}");
        let (_, p999, _) = pct(Metric::TimeP999);
        assert!(close(p999, (371.0 - 40.0) / 371.0 * 100.0), "{p999}");
        // Throughput as the achieved rate: 50k/s answered against 43.1k/s.
        let (better, rate, outcome) = pct(Metric::TransactionRate);
        assert_eq!((better, outcome), (Better::Higher, Outcome::Better));
        assert!(close(rate, (50_000.0 / 43_100.0 - 1.0) * 100.0), "{rate}");
        // At 10k/s both achieved it: the rate is the same, p99 better.
        let t = c.test("rr1c-1x1--4--10k/s").unwrap();
        assert_eq!(
            t.metric(Metric::TransactionRate).unwrap().judgement.outcome,
            Outcome::Same
        );
        // Listed by offered rate within the workload.
        let key = &r.open_loop[0].key;
        let rates: Vec<Option<u64>> = c.workload(key).iter().map(|t| t.offered_per_s).collect();
        assert_eq!(rates, vec![Some(10_000), Some(40_000), Some(50_000)]);
    }

    #[test]
    fn an_open_loop_test_is_never_paired_with_a_closed_loop_one() {
        // A closed-loop test in the candidate under the open-loop test's
        // name (as a hand-edited file could have it): not paired either way.
        let base = osa();
        let mut cand = document("hs");
        add(&mut cand, "rr1c-1x1", 4, &[fig(2e6, 25.0, 5e7)]);
        cand.tests[0].name = "rr1c-1x1--4--10k/s".into();
        let r = compared(&base, &cand);
        let c = &r.comparisons[0];
        assert!(c.test("rr1c-1x1--4--10k/s").is_none(), "{:?}", c.tests);
        assert!(c.only_in_base.contains(&"rr1c-1x1--4--10k/s".to_string()));
        assert_eq!(c.only_in_candidate, vec!["rr1c-1x1--4--10k/s"]);
        // Nor the other way round, nor at another rate under the same name.
        let r = compared(&cand, &base);
        assert!(r.comparisons[0].tests.is_empty());
        let mut other_rate = hs();
        let t = other_rate
            .tests
            .iter_mut()
            .find(|t| t.name == "rr1c-1x1--4--40k/s")
            .unwrap();
        t.name = "rr1c-1x1--4--10k/s".into();
        let mut only_40k = document("hs");
        only_40k.tests.push(t.clone());
        let r = compared(&base, &only_40k);
        assert!(r.comparisons[0].tests.is_empty());
        // The closed-loop workload of the base has no open-loop test in it.
        assert!(r.workloads.iter().all(|w| !w.key.open_loop));
    }

    #[test]
    fn the_exports_carry_the_knee_and_the_differences_at_equal_load() {
        let r = compared(&osa(), &hs());
        let md = MarkdownExporter.render(&r).unwrap();
        assert!(md.contains("\n## rr1c-1x1--4, open loop\n"), "{md}");
        assert!(md.contains("- osa: p99 stays within 2× of its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s it is 5.3×"), "{md}");
        assert!(
            md.contains("| 50k/s | osa | 1 | 43100/s | 92.8 µs | 185.5 µs | 371.0 µs | achieved short of offered |"),
            "{md}"
        );
        assert!(
            md.contains("### hs against osa, at equal offered load"),
            "{md}"
        );
        assert!(
            md.contains("| 50k/s | 43100/s | 50000/s | +16.0% | 92.8 µs | 10.0 µs | +89.2% | 185.5 µs | 20.0 µs | +89.2% | 371.0 µs | 40.0 µs | +89.2% | better |"),
            "{md}"
        );
        let v: serde_json::Value = serde_json::from_str(&JsonExporter.render(&r).unwrap()).unwrap();
        let g = &v["open_loop"][0];
        assert_eq!(g["title"], "rr1c-1x1--4");
        assert_eq!(g["key"]["open_loop"], true);
        let knee = &g["curves"][0]["knee"];
        assert_eq!(knee["kind"], "found");
        assert_eq!(knee["factor"], 2.0);
        assert_eq!(knee["knee_per_s"], 40_000);
        assert_eq!(knee["beyond_per_s"], 50_000);
        assert_eq!(knee["beyond_achieved_per_s"], 43_100.0);
        assert_eq!(g["curves"][1]["knee"]["knee_per_s"], 50_000);
        let t = &v["figures"][0]["tests"][2];
        assert_eq!(t["name"], "rr1c-1x1--4--1k/s");
        assert_eq!(t["offered"]["rate_per_s"], 1_000);
        assert_eq!(t["offered"]["arrival"], "poisson");
        assert!(t["metrics"]["transaction_time_us.p50"].is_object());
        // Closed-loop tests carry no load, no open-loop metric, no flag.
        let closed = &v["figures"][0]["tests"][0];
        assert!(closed.get("offered").is_none());
        assert!(closed["metrics"].get("transaction_time_us.p50").is_none());
        assert!(closed["missing_runs"]
            .get("transaction_time_us.p50")
            .is_none());
        assert!(closed["workload"].get("open_loop").is_none());
        let paired = &v["comparisons"][0]["tests"][4];
        assert_eq!(paired["offered_per_s"], 50_000);
        assert!(v["comparisons"][0]["tests"][0]
            .get("offered_per_s")
            .is_none());
        // CSV: the open-loop percentiles are rows of the tests that have them.
        let csv = CsvExporter.render(&r).unwrap();
        assert!(csv.contains("osa,hs,rr1c-1x1--4--50k/s,rr1c-1x1,tcp,4,transaction_time_us.p50,µs,lower,false,92.75,10,"));
        assert!(!csv.contains("rr1c-1x1--4,rr1c-1x1,tcp,4,transaction_time_us.p50"));
        // HTML: a section with its chart, the knees and the table at equal load.
        let html = HtmlExporter.render(&r).unwrap();
        let section = html
            .find("<section class=\"workload open-loop\" id=\"o-rr1c-1x1--4\">")
            .expect("open-loop section");
        assert!(html.contains("<a href=\"#o-rr1c-1x1--4\">rr1c-1x1--4 (open loop)</a>"));
        assert!(html[section..].contains("<figure id=\"chart-latency-load-rr1c-1x1--4\"><svg"));
        assert!(html[section..].contains("<li class=\"knee\">osa: p99 stays within 2×"));
        assert!(html[section..].contains("<h3>hs against osa, at equal offered load</h3>"));
        // The base alone: its knee and its figures, no comparison.
        let single = Report::single(Source::new("osa.json", &osa()), Options::default());
        let md = MarkdownExporter.render(&single).unwrap();
        assert!(md.contains("- osa: p99 stays within 2×"), "{md}");
        assert!(!md.contains("at equal offered load"), "{md}");
        assert_eq!(single.open_loop[0].curves.len(), 1);
    }

    #[test]
    fn closed_loop_reports_have_no_open_loop_part() {
        let (osa, hs) = crate::tests::small();
        let r = compared(&osa, &hs);
        assert!(r.open_loop.is_empty());
        assert!(r.consistency.offered.is_empty());
        let v: serde_json::Value = serde_json::from_str(&JsonExporter.render(&r).unwrap()).unwrap();
        assert!(v.get("open_loop").is_none());
        assert!(v["consistency"].get("offered").is_none());
        let json = JsonExporter.render(&r).unwrap();
        for word in ["offered", "open_loop", "p50", "p999"] {
            assert!(!json.contains(word), "{word} in a closed-loop report");
        }
    }

    #[test]
    fn short_means_short_of_what_the_runs_own_check_allowed() {
        use linkperf_results::{Check, CheckName, CheckStatus};
        // 1k/s over 3 s, Poisson: the arrival_fidelity check allowed
        // ±6.01 % (3.29 / √3000); 981/s answered is 1.9 % short: noise.
        let mut d = document("a");
        add_offered(&mut d, "rr1c-1x1", 4, 1_000, &[(600.0, 981.0)]);
        add_offered(&mut d, "rr1c-1x1", 4, 10_000, &[(400.0, 9_700.0)]);
        let fidelity = |bound: f64| Check {
            name: CheckName::ArrivalFidelity,
            status: CheckStatus::Pass,
            value: Some(-1.9),
            bound: Some(bound),
            detail: String::new(),
        };
        d.tests[0].runs[0].checks.push(fidelity(6.01));
        d.tests[1].runs[0].checks.push(fidelity(1.0));
        let r = Report::single(Source::new("a.json", &d), Options::default());
        let pts = &r.open_loop[0].curves[0].points;
        assert!((pts[0].rate_tolerance - 0.0601).abs() < 1e-12);
        assert!(!pts[0].falls_short());
        // 10k/s: 3 % short of a 1 % bound.
        assert_eq!(pts[1].rate_tolerance, 0.01);
        assert!(pts[1].falls_short());
        // Without the check, 1 %.
        let f = crate::FileFigures::of(&osa(), "osa");
        let load = f.tests[2].offered.expect("an open-loop test");
        assert_eq!(load.rate_tolerance, linkperf_results::RATE_TOLERANCE);
    }

    #[test]
    fn a_different_arrival_process_at_equal_load_is_pointed_out() {
        let base = osa();
        let mut cand = hs();
        for t in cand.tests.iter_mut().filter(|t| t.spec.offered.is_some()) {
            let load = t.spec.offered.as_mut().unwrap();
            load.arrival = linkperf_workload::Arrival::Fixed;
            load.max_outstanding = 4;
        }
        let r = compared(&base, &cand);
        assert_eq!(
            r.consistency.offered,
            vec!["Offered load differs in rr1c-1x1--4--10k/s, rr1c-1x1--4--40k/s, rr1c-1x1--4--50k/s: poisson arrivals, at most 1 outstanding per connection in osa; fixed arrivals, at most 4 outstanding per connection in hs. The generators' difference is part of every difference of these tests: rerun both alike (--arrival, --max-outstanding)."]
        );
        // Still compared: the note says what the difference may hold.
        assert_eq!(r.comparisons[0].tests.len(), 5);
        let md = MarkdownExporter.render(&r).unwrap();
        assert!(
            md.contains("- Offered load differs in rr1c-1x1--4--10k/s"),
            "{md}"
        );
    }
}
