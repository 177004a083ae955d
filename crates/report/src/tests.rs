//! Reports of synthetic results documents whose right answers are known by
//! construction: verdict counts, break-even, saturation with and without a
//! capacity, significance with and without repeats, the sign of every metric,
//! consistency notes.

use linkperf_results::{failed_run, LinkInfo, ResultsDocument, RunStatus};
use linkperf_workload::{BitsPerSecond, Protocol};

use crate::testdata::{add, add_on, document, environment, fig, run, Fig};
use crate::{
    BreakEven, CapacityOrigin, CpuSide, Exporter, Method, Metric, MissingMetric, Options, Outcome,
    Report, SaturationCause, Source, Verdict,
};

const USERS: [u32; 9] = [1, 10, 25, 50, 75, 100, 150, 200, 250];

/// The candidate's figure: throughput and efficiency `factor` times the
/// base's, transaction time divided by it.
fn scaled(base: Fig, factor: f64) -> Fig {
    fig(
        base.bytes * factor,
        base.mean_us / factor,
        base.eff * factor,
    )
}

/// The study in miniature: 5 workloads × 9 user counts, one run each.
/// rr1c-1x1 and rr1c-200x1000: better at 1, 10, 25 users, about the same at
/// 50, worse from 75 on (3 + 1 + 5 each); the three others better everywhere
/// (27). Together 33 better, 2 the same, 10 worse.
pub(crate) fn study() -> (ResultsDocument, ResultsDocument) {
    let (mut osa, mut hs) = (document("osa"), document("hs"));
    let rr_factors = [3.5, 2.0, 1.10, 1.0, 0.90, 0.80, 0.70, 0.60, 0.50];
    // rr1c-1x1 at 50 users: +1%, within the 2% threshold.
    let rr1_factors = [3.5, 2.0, 1.10, 1.01, 0.90, 0.80, 0.70, 0.60, 0.50];
    // str-readx30k grows to 100 users, then throughput stalls while time climbs.
    let read_bytes = [1e7, 1e8, 2.5e8, 5e8, 7e8, 8e8, 8.1e8, 8.15e8, 8.2e8];
    let read_time = [10.0, 10.0, 10.0, 10.0, 10.0, 12.0, 18.0, 24.0, 30.0];
    for (i, u) in USERS.into_iter().enumerate() {
        let base = fig(1e8, 100.0, 1e8);
        for (w, factor) in [
            ("rr1c-1x1", rr1_factors[i]),
            ("rr1c-200x1000", rr_factors[i]),
            ("rr1c-200x30k", 2.0),
        ] {
            add(&mut osa, w, u, &[base]);
            add(&mut hs, w, u, &[scaled(base, factor)]);
        }
        let read = fig(read_bytes[i], read_time[i], 1e8);
        add(&mut osa, "str-readx30k", u, &[read]);
        add(&mut hs, "str-readx30k", u, &[scaled(read, 2.6)]);
        add(&mut osa, "str-writex30k", u, &[base]);
        add(&mut hs, "str-writex30k", u, &[scaled(base, 1.8)]);
    }
    (osa, hs)
}

fn compare(base: &ResultsDocument, cands: &[&ResultsDocument], options: Options) -> Report {
    let sources: Vec<Source<'_>> = cands.iter().map(|d| Source::new("cand.json", d)).collect();
    Report::comparison(Source::new("base.json", base), &sources, options)
}

fn workload<'a>(r: &'a Report, title: &str) -> &'a crate::WorkloadReport {
    r.workloads
        .iter()
        .find(|w| w.title == title)
        .unwrap_or_else(|| panic!("no workload {title}"))
}

#[test]
fn verdict_counts_and_the_summary_sentence() {
    let (osa, hs) = study();
    let r = compare(&osa, &[&hs], Options::default());
    let c = &r.comparisons[0];
    assert_eq!(c.tests.len(), 45);
    assert_eq!(
        (
            c.counts.better,
            c.counts.same,
            c.counts.worse,
            c.counts.mixed
        ),
        (33, 2, 10, 0)
    );
    assert_eq!(
        c.summary,
        "hs is better in 33 of 45 tests, about the same in 2, worse in 10."
    );
    assert_eq!(c.test("rr1c-200x1000--50").unwrap().verdict, Verdict::Same);
    assert_eq!(c.test("rr1c-1x1--50").unwrap().verdict, Verdict::Same);
    assert_eq!(c.test("rr1c-1x1--75").unwrap().verdict, Verdict::Worse);
    assert_eq!(
        c.test("str-writex30k--250").unwrap().verdict,
        Verdict::Better
    );
    assert!(c.only_in_base.is_empty() && c.only_in_candidate.is_empty());
    assert_eq!(r.title(), "hs against osa");
}

#[test]
fn no_repeats_means_the_threshold_alone_and_the_report_says_so() {
    let (osa, hs) = study();
    let r = compare(&osa, &[&hs], Options::default());
    let c = &r.comparisons[0];
    assert!(
        c.method_note
            .starts_with("No repeated runs: a difference counts when it is larger than 2%"),
        "{}",
        c.method_note
    );
    assert!(c
        .tests
        .iter()
        .all(|t| t.method() == Some(Method::ThresholdOnly)));
    // A wider threshold turns the +10% tests at 25 users into "same".
    let wide = compare(
        &osa,
        &[&hs],
        Options {
            threshold_pct: 15.0,
            ..Options::default()
        },
    );
    let w = &wide.comparisons[0];
    assert_eq!(w.test("rr1c-200x1000--25").unwrap().verdict, Verdict::Same);
    assert_eq!(w.test("rr1c-200x1000--75").unwrap().verdict, Verdict::Same);
    assert_eq!(w.counts.same, 2 + 4);
}

/// The crossings of a break-even note that crosses with the candidate
/// better below.
fn at(b: &crate::report::BreakEvenNote) -> Vec<f64> {
    match &b.finding {
        BreakEven::Crossing {
            at_users,
            better_below: true,
        } => at_users.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn break_even_is_interpolated_per_workload() {
    let (osa, hs) = study();
    let r = compare(&osa, &[&hs], Options::default());
    // rr1c-200x1000: +10% at 25, exactly 0 at 50 (no difference: about the
    // same), −10% at 75: interpolated between 25 and 75, at 50.
    let b = &workload(&r, "rr1c-200x1000").break_even[0];
    assert_eq!(at(b).len(), 1);
    assert!((at(b)[0] - 50.0).abs() < 1e-9, "{:?}", b.finding);
    assert_eq!(
        b.text,
        "break-even at ~50 users (hs better below, worse above)"
    );
    // rr1c-1x1: +10% at 25, +1% at 50 (within the 2% threshold: about the
    // same), −10% at 75. The +1% does not count, so the crossing lies between
    // 25 and 75: 25 + 10 / 20 × 50 = 50 (not 50 + 1 / 11 × 25 from the raw +1%).
    let b = &workload(&r, "rr1c-1x1").break_even[0];
    assert_eq!(at(b).len(), 1);
    assert!((at(b)[0] - 50.0).abs() < 1e-9, "{:?}", b.finding);
    assert_eq!(
        b.text,
        "break-even at ~50 users (hs better below, worse above)"
    );
    // Better everywhere: no crossing, and the range measured.
    let b = &workload(&r, "str-readx30k").break_even[0];
    assert_eq!(b.text, "no crossing in 1–250 users (hs better throughout)");
}

/// Three runs of throughput `mean` − `spread`, `mean`, `mean` + `spread`
/// (transaction time and efficiency constant).
fn spread(mean: f64, spread: f64) -> [Fig; 3] {
    [-1.0, 0.0, 1.0].map(|k| fig(mean + k * spread, 100.0, 1e8))
}

#[test]
fn break_even_ignores_differences_within_the_noise() {
    // Single runs, threshold 2%: +1.5% at 1 user and −1.5% at 3 users. The
    // raw differences change sign, but neither counts, and the verdicts say
    // "same" for both: so must the break-even.
    let (mut base, mut cand) = (document("a"), document("b"));
    add(&mut base, "rr1c-1x1", 1, &[fig(100.0, 100.0, 1e8)]);
    add(&mut cand, "rr1c-1x1", 1, &[fig(101.5, 100.0, 1e8)]);
    add(&mut base, "rr1c-1x1", 3, &[fig(100.0, 100.0, 1e8)]);
    add(&mut cand, "rr1c-1x1", 3, &[fig(98.5, 100.0, 1e8)]);
    let r = compare(&base, &[&cand], Options::default());
    assert!(r.comparisons[0]
        .tests
        .iter()
        .all(|t| t.verdict == Verdict::Same));
    let b = &workload(&r, "rr1c-1x1").break_even[0];
    assert_eq!(
        b.finding,
        BreakEven::NoDifference {
            min_users: 1,
            max_users: 3
        }
    );
    assert_eq!(b.text, "no difference beyond the noise in 1–3 users");
    // With a threshold of 1% both count, and the crossing is midway.
    let r = compare(
        &base,
        &[&cand],
        Options {
            threshold_pct: 1.0,
            ..Options::default()
        },
    );
    let b = &workload(&r, "rr1c-1x1").break_even[0];
    assert_eq!(
        b.text,
        "break-even at ~2 users (b better below, worse above)"
    );
    assert_eq!(at(b).len(), 1);
    assert!((at(b)[0] - 2.0).abs() < 1e-9, "{:?}", b.finding);
}

#[test]
fn break_even_with_repeats_needs_significant_differences() {
    // Three runs each side. At 1 user +10% with a ±1 spread (Welch p ≈ 0.0003:
    // counts); at 10 users +10% and at 25 users −10%, both with a ±30 spread
    // (p > 0.5: inconclusive, although far beyond the threshold); at 50 users −20%
    // with a ±1 spread (counts). The crossing lies between 1 and 50 users,
    // interpolated from the raw +10 and −20: 1 + 10 / 30 × 49 = 17.33.
    let (mut base, mut cand) = (document("a"), document("b"));
    for (u, b, c, s) in [
        (1, 100.0, 110.0, 1.0),
        (10, 100.0, 110.0, 30.0),
        (25, 100.0, 90.0, 30.0),
        (50, 100.0, 80.0, 1.0),
    ] {
        add(&mut base, "rr1c-1x1", u, &spread(b, s));
        add(&mut cand, "rr1c-1x1", u, &spread(c, s));
    }
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    let outcome = |name: &str| {
        let m = c.test(name).unwrap().metric(Metric::Throughput).unwrap();
        (m.judgement.method, m.judgement.outcome)
    };
    assert_eq!(outcome("rr1c-1x1--1"), (Method::Welch, Outcome::Better));
    assert_eq!(
        outcome("rr1c-1x1--10"),
        (Method::Welch, Outcome::Inconclusive)
    );
    assert_eq!(
        outcome("rr1c-1x1--25"),
        (Method::Welch, Outcome::Inconclusive)
    );
    assert_eq!(outcome("rr1c-1x1--50"), (Method::Welch, Outcome::Worse));
    let b = &workload(&r, "rr1c-1x1").break_even[0];
    let at = at(b);
    assert_eq!(at.len(), 1, "the noisy +10/−10 pair is not a crossing");
    assert!((at[0] - (1.0 + 10.0 / 30.0 * 49.0)).abs() < 1e-9, "{at:?}");
    assert_eq!(
        b.text,
        "break-even at ~17 users (b better below, worse above)"
    );

    // Only the two noisy tests: however large, no difference beyond the noise.
    let (mut base, mut cand) = (document("a"), document("b"));
    for (u, b, c) in [(10, 100.0, 110.0), (25, 100.0, 90.0)] {
        add(&mut base, "rr1c-1x1", u, &spread(b, 30.0));
        add(&mut cand, "rr1c-1x1", u, &spread(c, 30.0));
    }
    let r = compare(&base, &[&cand], Options::default());
    assert_eq!(
        workload(&r, "rr1c-1x1").break_even[0].text,
        "no difference beyond the noise in 10–25 users"
    );
    // Significant differences of one sign and noise of the other: no crossing.
    let (mut base, mut cand) = (document("a"), document("b"));
    for (u, b, c, s) in [(1, 100.0, 110.0, 1.0), (10, 100.0, 90.0, 30.0)] {
        add(&mut base, "rr1c-1x1", u, &spread(b, s));
        add(&mut cand, "rr1c-1x1", u, &spread(c, s));
    }
    let r = compare(&base, &[&cand], Options::default());
    assert_eq!(
        workload(&r, "rr1c-1x1").break_even[0].text,
        "no crossing in 1–10 users (b better throughout)"
    );
}

#[test]
fn saturation_by_the_knee_without_a_capacity() {
    let (osa, hs) = study();
    let r = compare(&osa, &[&hs], Options::default());
    let w = workload(&r, "str-readx30k");
    // 100 → 150 users: throughput +1.25%, mean time +50%: both files, from 100.
    assert_eq!(w.saturation.len(), 2);
    for (n, label) in w.saturation.iter().zip(["osa", "hs"]) {
        assert_eq!((n.label.as_str(), n.finding.from_users), (label, 100));
        assert!(
            n.text.starts_with(&format!(
                "{label} saturates from 100 users: from 100 to 150 users throughput grows only 1.2% while mean transaction time grows 50.0%"
            )),
            "{}",
            n.text
        );
    }
    // Workloads whose throughput does not stall are not saturated.
    assert!(workload(&r, "rr1c-200x30k").saturation.is_empty());
}

#[test]
fn saturation_from_unstable_runs_says_so() {
    // 10 users: three steady runs of 1e8 B/s at 10 µs. 20 users: 0.9e8, 1e8
    // and 1.1e8 B/s (mean 1e8: no growth; CV 10%, unstable) at 20 µs (+100%).
    // The knee fires, on a test whose runs disagree by more than 5%.
    let mut doc = document("a");
    add(&mut doc, "rr1c-200x30k", 10, &[fig(1e8, 10.0, 1e8); 3]);
    add(
        &mut doc,
        "rr1c-200x30k",
        20,
        &[0.9e8, 1e8, 1.1e8].map(|b| fig(b, 20.0, 1e8)),
    );
    let r = Report::single(Source::new("a.json", &doc), Options::default());
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert_eq!(n.len(), 1);
    assert!(n[0].finding.from_unstable_runs);
    assert!((n[0].finding.unstable_cv.unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(
        n[0].text,
        "a saturates from 10 users: from 10 to 20 users throughput grows only 0.0% while mean transaction time grows 100.0% (from unstable runs: throughput CV 10.0%)"
    );
    assert_eq!(r.consistency.unstable.len(), 1);
    // The same figures from steady runs: the plain sentence.
    let mut steady = document("a");
    add(&mut steady, "rr1c-200x30k", 10, &[fig(1e8, 10.0, 1e8); 3]);
    add(&mut steady, "rr1c-200x30k", 20, &[fig(1e8, 20.0, 1e8); 3]);
    let r = Report::single(Source::new("a.json", &steady), Options::default());
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert!(!n[0].finding.from_unstable_runs);
    assert!(!n[0].text.contains("unstable"), "{}", n[0].text);
}

/// The Oracle RAC interconnect: 40, 60, 80 users on a 1 Gbit/s link; the
/// busier direction (three quarters of the payload) carries 720, 960, 972
/// Mbit/s, and the transaction time grows only 10% and 7%: no knee.
fn interconnect(label: &str, capacity: Option<f64>) -> ResultsDocument {
    let mut doc = document(label);
    for (u, mbit, us) in [(40, 720.0, 100.0), (60, 960.0, 110.0), (80, 972.0, 118.0)] {
        let bytes = mbit * 1e6 / 8.0 / 0.75;
        add(&mut doc, "rr1c-200x30k", u, &[fig(bytes, us, 1e8)]);
    }
    doc.link = capacity.map(|c| LinkInfo {
        configuration: label.to_string(),
        capacity_bits_per_s: Some(c),
        commands: vec![
            "tc qdisc add dev veth0 root tbf rate 1gbit burst 128kb latency 10ms".into(),
        ],
        lab_command_line: Vec::new(),
        namespaces: Vec::new(),
    });
    doc
}

#[test]
fn saturation_by_a_capacity_recorded_in_the_file() {
    let doc = interconnect("1gbit", Some(1e9));
    let r = Report::single(Source::new("1gbit.json", &doc), Options::default());
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].finding.from_users, 60);
    assert!(matches!(
        n[0].finding.cause,
        SaturationCause::Capacity { .. }
    ));
    assert_eq!(
        n[0].text,
        "1gbit saturates from 60 users: the link is not sufficient for this load (960.0 Mbit/s in the busier direction, 96% of its 1 Gbit/s capacity)"
    );
    assert!(!r.is_comparison());
}

/// Sets each run's wire: the busier direction at `gbit`, from `lp-s1`'s tbf
/// queue, with `drops` of 100,000 packets dropped.
fn with_wire(doc: &mut ResultsDocument, users: u32, gbit: f64, drops: u64) {
    let t = doc
        .tests
        .iter_mut()
        .find(|t| t.workload.users == users)
        .unwrap();
    for r in &mut t.runs {
        r.wire = Some(linkperf_results::LinkUse {
            client_to_server: None,
            server_to_client: Some(linkperf_results::LinkDirection {
                interface: "lp-s1".into(),
                queue: Some("tbf".into()),
                bits_per_s: gbit * 1e9,
                packets_per_s: 100_000.0,
                drops,
                drop_ratio: drops as f64 / (100_000 + drops) as f64,
                backlog_bytes: 65_536,
            }),
        });
    }
}

#[test]
fn a_link_is_not_sufficient_from_the_user_count_where_its_wire_fills() {
    // The payload reaches 96% at 60 users, but the wire, headers included,
    // is full at 60 already; the base ran in memory with a quarter of the p99.
    let base = interconnect("hs", None);
    let mut cand = interconnect("1gbit", Some(1e9));
    with_wire(&mut cand, 40, 0.78, 0);
    with_wire(&mut cand, 60, 0.99, 0);
    with_wire(&mut cand, 80, 0.99, 900);
    for t in &mut cand.tests {
        for r in &mut t.runs {
            if let Some(l) = r.transaction_time_us.as_mut() {
                l.p99 *= 4.0;
            }
        }
    }
    let r = compare(&base, &[&cand], Options::default());
    let n = &workload(&r, "rr1c-200x30k").sufficiency;
    assert_eq!(n.len(), 1, "the base has no capacity: {n:?}");
    assert_eq!(
        n[0].text,
        "1gbit is not sufficient for rr1c-200x30k from 60 users: 99% of the wire, p99 transaction time 4.0× hs's (its capacity 1 Gbit/s)"
    );
    assert_eq!(r.insufficient(), vec![n[0].text.as_str()]);
    // The summary states it first, in every format.
    let md = crate::MarkdownExporter.render(&r).unwrap();
    let summary_end = md.find("| candidate |").unwrap();
    assert!(md[..summary_end].contains(&n[0].text), "{md}");
    let html = crate::HtmlExporter.render(&r).unwrap();
    assert!(
        html.contains("<p class=\"insufficient\">1gbit is not sufficient"),
        "{html}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&crate::JsonExporter.render(&r).unwrap()).unwrap();
    let j = &json["workloads"][0]["sufficiency"][0];
    assert_eq!(j["finding"]["answer"], "not_sufficient");
    assert_eq!(j["finding"]["from_users"], 60);
    // Below the wire rule, a link that keeps up is sufficient, and says how full it ran.
    let mut light = interconnect("1gbit", Some(1e9));
    for u in [40, 60, 80] {
        with_wire(&mut light, u, 0.5, 0);
    }
    let r = compare(&base, &[&light], Options::default());
    let n = &workload(&r, "rr1c-200x30k").sufficiency;
    assert!(!n[0].finding.is_insufficient());
    assert!(
        n[0].text
            .contains("up to 80 users: at most 50% of the wire"),
        "{}",
        n[0].text
    );
    assert!(r.insufficient().is_empty());
}

#[test]
fn saturation_by_a_capacity_given_on_the_command_line() {
    let doc = interconnect("1gbit", None);
    let single = |options| Report::single(Source::new("1gbit.json", &doc), options);
    // Without a capacity nothing is saturated: the knee rule sees growth.
    assert!(workload(&single(Options::default()), "rr1c-200x30k")
        .saturation
        .is_empty());
    let r = single(Options {
        capacity_bits_per_s: Some("1gbit".parse().unwrap()),
        ..Options::default()
    });
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert_eq!(n[0].finding.from_users, 60);
    // A 10 Gbit/s link is far from full.
    let r = single(Options {
        capacity_bits_per_s: Some(BitsPerSecond(10_000_000_000)),
        ..Options::default()
    });
    assert!(workload(&r, "rr1c-200x30k").saturation.is_empty());
    // A capacity below what the path carried does not describe it: said, not used.
    let r = single(Options {
        capacity_bits_per_s: Some(BitsPerSecond(500_000_000)),
        ..Options::default()
    });
    assert!(workload(&r, "rr1c-200x30k").saturation.is_empty());
    assert_eq!(
        r.consistency.capacity.len(),
        1,
        "{:?}",
        r.consistency.capacity
    );
    assert!(r.consistency.capacity[0].contains("the capacity does not describe this path"));
}

#[test]
fn a_capacity_given_for_one_file_applies_to_that_file_only() {
    // Both files carried 720, 960 and 972 Mbit/s and recorded a 10 Gbit/s
    // link; the candidate's was in truth shaped to 1 Gbit/s.
    let veth = interconnect("veth", Some(1e10));
    let one_g = interconnect("1g", Some(1e10));
    let report = |veth_cap: Option<BitsPerSecond>, one_g_cap, options| {
        Report::comparison(
            Source::new("veth.json", &veth).with_capacity(veth_cap),
            &[Source::new("1g.json", &one_g).with_capacity(one_g_cap)],
            options,
        )
    };
    let gbit = Some(BitsPerSecond(1_000_000_000));
    // The recorded capacities alone: nothing saturates.
    let r = report(None, None, Options::default());
    assert!(workload(&r, "rr1c-200x30k").saturation.is_empty());
    // 1g.json=1gbit: the candidate saturates from 60 users, the base is still
    // judged against its recorded 10 Gbit/s.
    let r = report(None, gbit, Options::default());
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!((n[0].label.as_str(), n[0].finding.from_users), ("1g", 60));
    assert!(
        n[0].text.contains("96% of its 1 Gbit/s capacity"),
        "{}",
        n[0].text
    );
    let caps: Vec<_> = r
        .files
        .iter()
        .map(|f| (f.capacity_bits_per_s, f.capacity_origin))
        .collect();
    assert_eq!(
        caps,
        vec![
            (
                Some(BitsPerSecond(10_000_000_000)),
                Some(CapacityOrigin::Recorded)
            ),
            (gbit, Some(CapacityOrigin::File)),
        ]
    );
    // A capacity for every file, and one for the candidate: the candidate's
    // own wins for it, the base takes the one for every file.
    let r = report(
        None,
        gbit,
        Options {
            capacity_bits_per_s: Some(BitsPerSecond(100_000_000_000)),
            ..Options::default()
        },
    );
    let origins: Vec<_> = r.files.iter().map(|f| f.capacity_origin).collect();
    assert_eq!(
        origins,
        vec![Some(CapacityOrigin::AllFiles), Some(CapacityOrigin::File)]
    );
    assert_eq!(
        r.files[0].capacity_bits_per_s,
        Some(BitsPerSecond(100_000_000_000))
    );
    let n = &workload(&r, "rr1c-200x30k").saturation;
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].label, "1g");
    // The plain form applies to every file, the base included.
    let r = report(
        None,
        None,
        Options {
            capacity_bits_per_s: gbit,
            ..Options::default()
        },
    );
    let labels: Vec<&str> = workload(&r, "rr1c-200x30k")
        .saturation
        .iter()
        .map(|n| n.label.as_str())
        .collect();
    assert_eq!(labels, vec!["veth", "1g"]);
}

#[test]
fn with_repeats_differences_must_be_significant() {
    let (mut base, mut cand) = (document("a"), document("b"));
    // Test 1: +10% with a ±1% spread: significant, better.
    add(
        &mut base,
        "rr1c-1x1",
        1,
        &[
            fig(99.0, 100.0, 1e8),
            fig(100.0, 100.0, 1e8),
            fig(101.0, 100.0, 1e8),
        ],
    );
    add(
        &mut cand,
        "rr1c-1x1",
        1,
        &[
            fig(109.0, 100.0, 1e8),
            fig(110.0, 100.0, 1e8),
            fig(111.0, 100.0, 1e8),
        ],
    );
    // Test 2: +10% with a ±30% spread: not significant, and not shown the
    // same either: inconclusive.
    add(
        &mut base,
        "rr1c-1x1",
        10,
        &[
            fig(70.0, 100.0, 1e8),
            fig(100.0, 100.0, 1e8),
            fig(130.0, 100.0, 1e8),
        ],
    );
    add(
        &mut cand,
        "rr1c-1x1",
        10,
        &[
            fig(80.0, 100.0, 1e8),
            fig(110.0, 100.0, 1e8),
            fig(140.0, 100.0, 1e8),
        ],
    );
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    let t1 = c.test("rr1c-1x1--1").unwrap();
    let tp = t1.metric(Metric::Throughput).unwrap().judgement;
    assert_eq!((tp.method, tp.outcome), (Method::Welch, Outcome::Better));
    assert!(tp.p_value.unwrap() < 0.05);
    assert_eq!(t1.verdict, Verdict::Better);
    // Constant transaction times: no test applies, and no difference.
    let time = t1.metric(Metric::TimeMean).unwrap().judgement;
    assert_eq!(
        (time.method, time.outcome),
        (Method::ConstantRuns, Outcome::Same)
    );
    let t2 = c.test("rr1c-1x1--10").unwrap();
    let tp = t2.metric(Metric::Throughput).unwrap().judgement;
    assert_eq!(
        (tp.method, tp.outcome),
        (Method::Welch, Outcome::Inconclusive)
    );
    assert!((tp.relative_pct - 10.0).abs() < 1e-9);
    assert_eq!(t2.verdict, Verdict::Inconclusive);
    assert_eq!((c.counts.better, c.counts.inconclusive), (1, 1));
    assert!(
        c.summary
            .contains("inconclusive in 1 (the runs show neither"),
        "{}",
        c.summary
    );
    // The power each throughput comparison had, and their median, said.
    let (p1, p2) = (
        t1.metric(Metric::Throughput)
            .unwrap()
            .judgement
            .power
            .unwrap(),
        tp.power.unwrap(),
    );
    assert!(p1 > 0.5 && p2 < 0.1, "{p1} {p2}");
    assert!((c.median_power.unwrap() - (p1 + p2) / 2.0).abs() < 1e-12);
    assert!(
        c.method_note.contains(&format!(
            "median power of {:.0}% to find a 2% difference (80% is the usual aim",
            (p1 + p2) / 2.0 * 100.0
        )),
        "{}",
        c.method_note
    );
    // Marked in the tables: parentheses are within the threshold, ? is
    // inconclusive, and the HTML gives the interval and power on hover.
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(md.contains("| +10.0%? |"), "{md}");
    assert!(md.contains("| inconclusive |"), "{md}");
    let html = crate::HtmlExporter.render(&r).unwrap();
    assert!(html.contains("<span class=\"chip inconclusive\">inconclusive 1</span>"));
    assert!(html.contains("; 95% interval "), "{html}");
    assert!(t2.unstable, "a 30% spread is unstable");
    assert!(c.method_note.starts_with("Repeated runs on both sides: a difference counts when Welch's t-test finds it significant (p < 0.05) and it is larger than 2%"), "{}", c.method_note);
    // The unstable tests are pointed out, per file.
    let unstable: Vec<(&str, &str)> = r
        .consistency
        .unstable
        .iter()
        .map(|f| (f.label.as_str(), f.test.as_str()))
        .collect();
    assert_eq!(unstable, vec![("a", "rr1c-1x1--10"), ("b", "rr1c-1x1--10")]);

    // One test repeated, one not: the note says which is which.
    add(&mut base, "rr1c-1x1", 25, &[fig(100.0, 100.0, 1e8)]);
    add(&mut cand, "rr1c-1x1", 25, &[fig(110.0, 100.0, 1e8)]);
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    assert!(
        c.method_note
            .starts_with("2 of 3 tests have repeated runs on both sides"),
        "{}",
        c.method_note
    );
    assert_eq!(
        c.test("rr1c-1x1--25").unwrap().method(),
        Some(Method::ThresholdOnly)
    );
}

#[test]
fn a_headline_metric_one_ok_run_lacks_is_said_beside_the_verdict() {
    // Throughput and time equal; the candidate's server system-wide CPU
    // efficiency is +50% in two runs and missing in the third (a CPU sample
    // that failed). The metric is left out of the test, so the verdict is
    // "same" from two headline metrics: the report must say so.
    let (mut base, mut cand) = (document("a"), document("b"));
    add(&mut base, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1e8); 3]);
    add(&mut cand, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.5e8); 3]);
    add(&mut base, "rr1c-1x1", 10, &[fig(100.0, 10.0, 1e8); 3]);
    add(&mut cand, "rr1c-1x1", 10, &[fig(100.0, 10.0, 1.5e8); 3]);
    cand.tests[0].runs[2]
        .efficiency
        .as_mut()
        .unwrap()
        .server_bytes_per_system_cpu_s = None;
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    let t = c.test("rr1c-1x1--1").unwrap();
    assert!(t.metric(Metric::ServerSystemEfficiency).is_none());
    assert_eq!(t.verdict, Verdict::Same);
    assert_eq!(
        t.missing_headline,
        vec![MissingMetric {
            metric: Metric::ServerSystemEfficiency,
            reason: "missing in 1 of 3 ok runs of b".into()
        }]
    );
    let note = "verdict from 2 of 3 headline metrics: server CPU efficiency (system-wide) missing in 1 of 3 ok runs of b";
    assert_eq!(t.verdict_note().as_deref(), Some(note));
    // The other test had all three: better, and nothing to note.
    let full = c.test("rr1c-1x1--10").unwrap();
    assert_eq!(full.verdict, Verdict::Better);
    assert!(full.missing_headline.is_empty() && full.verdict_note().is_none());
    // Said in the tables of both formats, and in the JSON.
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(md.contains(&format!("| same ({note}) |")), "{md}");
    assert!(md.contains("| better |"), "{md}");
    let html = crate::HtmlExporter.render(&r).unwrap();
    assert!(html.contains(&format!("same ({note})</td>")));
    let csv = crate::CsvExporter.render(&r).unwrap();
    let rows: Vec<&str> = csv
        .lines()
        .filter(|l| l.contains(",rr1c-1x1--1,"))
        .collect();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|l| l.ends_with(&format!(",{note},0,0,,,"))),
        "{csv}"
    );
    assert!(
        csv.lines()
            .filter(|l| l.contains(",rr1c-1x1--10,"))
            .all(|l| l.ends_with(",false,,0,0,,,")),
        "{csv}"
    );
    // The one-file CSV counts the runs each metric is missing from.
    let single = crate::Report::single(crate::Source::new("b.json", &cand), Options::default());
    let csv = crate::CsvExporter.render(&single).unwrap();
    let row = csv
        .lines()
        .find(|l| {
            l.contains(",rr1c-1x1--1,") && l.contains(",efficiency.server_bytes_per_system_cpu_s,")
        })
        .unwrap_or_else(|| panic!("{csv}"));
    assert!(
        row.ends_with(",bytes/CPU-s,2,,,,,,,false,1"),
        "two ok runs have it, one lacks it, so no statistics: {row}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&crate::JsonExporter.render(&r).unwrap()).unwrap();
    let m = &json["comparisons"][0]["tests"][0]["missing_headline"][0];
    assert_eq!(m["metric"], "efficiency.server_bytes_per_system_cpu_s");
    assert_eq!(m["reason"], "missing in 1 of 3 ok runs of b");
    // And pointed out as incomplete runs, with the other metrics that run lacked.
    let incomplete: Vec<(&str, &str, &str)> = r
        .consistency
        .incomplete
        .iter()
        .map(|f| (f.label.as_str(), f.test.as_str(), f.reason.as_str()))
        .collect();
    assert_eq!(
        incomplete,
        vec![(
            "b",
            "rr1c-1x1--1",
            "server CPU efficiency (system-wide) missing in 1 of 3 ok runs: left out of this test"
        )]
    );
    assert!(md.contains("- Incomplete runs: b rr1c-1x1--1: server CPU efficiency (system-wide) missing in 1 of 3 ok runs"));

    // A metric a side never measured: "not measured", and not incomplete.
    for run in &mut base.tests[1].runs {
        run.efficiency
            .as_mut()
            .unwrap()
            .server_bytes_per_system_cpu_s = None;
    }
    let r = compare(&base, &[&cand], Options::default());
    let t = r.comparisons[0].test("rr1c-1x1--10").unwrap();
    assert_eq!(
        t.verdict_note().as_deref(),
        Some("verdict from 2 of 3 headline metrics: server CPU efficiency (system-wide) not measured in a")
    );
    assert_eq!(t.verdict, Verdict::Same);
    assert_eq!(
        r.consistency.incomplete.len(),
        1,
        "{:?}",
        r.consistency.incomplete
    );
    // With --cpu-side client the server's figure is no headline metric.
    let r = compare(
        &base,
        &[&cand],
        Options {
            cpu_side: CpuSide::Client,
            ..Options::default()
        },
    );
    assert!(r.comparisons[0]
        .tests
        .iter()
        .all(|t| t.missing_headline.is_empty()));
}

#[test]
fn every_metric_follows_the_sign_convention() {
    let (mut base, mut cand) = (document("a"), document("b"));
    add(&mut base, "rr1c-1x1", 1, &[fig(1.0, 1.0, 1.0)]);
    add(&mut cand, "rr1c-1x1", 1, &[fig(1.0, 1.0, 1.0)]);
    // Give every metric its own base and candidate value.
    let set = |doc: &mut ResultsDocument, v: [f64; 12]| {
        let r = &mut doc.tests[0].runs[0];
        let t = r.throughput.as_mut().unwrap();
        t.bytes_per_s = v[0];
        t.transactions_per_s = v[1];
        let l = r.transaction_time_us.as_mut().unwrap();
        l.mean = v[2];
        l.p99 = v[3];
        let e = r.efficiency.as_mut().unwrap();
        e.client_bytes_per_cpu_s = Some(v[4]);
        e.server_bytes_per_cpu_s = Some(v[5]);
        e.client_bytes_per_system_cpu_s = Some(v[6]);
        e.server_bytes_per_system_cpu_s = Some(v[7]);
        e.client_cpu_us_per_txn = Some(v[8]);
        e.server_cpu_us_per_txn = Some(v[9]);
        e.client_system_cpu_us_per_txn = Some(v[10]);
        e.server_system_cpu_us_per_txn = Some(v[11]);
    };
    set(
        &mut base,
        [
            200.0, 10.0, 50.0, 80.0, 4.0, 5.0, 8.0, 10.0, 20.0, 30.0, 40.0, 50.0,
        ],
    );
    set(
        &mut cand,
        [
            300.0, 5.0, 25.0, 100.0, 5.0, 4.0, 10.0, 30.0, 10.0, 45.0, 30.0, 100.0,
        ],
    );
    let expected = [
        (Metric::Throughput, 50.0),              // (300 / 200 − 1) × 100
        (Metric::TransactionRate, -50.0),        // (5 / 10 − 1) × 100
        (Metric::TimeMean, 50.0),                // (50 − 25) / 50 × 100
        (Metric::TimeP99, -25.0),                // (80 − 100) / 80 × 100
        (Metric::ClientEfficiency, 25.0),        // (5 / 4 − 1) × 100
        (Metric::ServerEfficiency, -20.0),       // (4 / 5 − 1) × 100
        (Metric::ClientSystemEfficiency, 25.0),  // (10 / 8 − 1) × 100
        (Metric::ServerSystemEfficiency, 200.0), // (30 / 10 − 1) × 100
        (Metric::ClientCpuPerTxn, 50.0),         // (20 − 10) / 20 × 100
        (Metric::ServerCpuPerTxn, -50.0),        // (30 − 45) / 30 × 100
        (Metric::ClientSystemCpuPerTxn, 25.0),   // (40 − 30) / 40 × 100
        (Metric::ServerSystemCpuPerTxn, -100.0), // (50 − 100) / 50 × 100
    ];
    let r = compare(&base, &[&cand], Options::default());
    let t = &r.comparisons[0].tests[0];
    assert_eq!(t.metrics.len(), 12);
    for (m, pct) in expected {
        let j = t.metric(m).unwrap().judgement;
        assert!(
            (j.relative_pct - pct).abs() < 1e-9,
            "{m}: {} != {pct}",
            j.relative_pct
        );
        let outcome = if pct > 0.0 {
            Outcome::Better
        } else {
            Outcome::Worse
        };
        assert_eq!(j.outcome, outcome, "{m}");
    }
    // Headline (server side): throughput +50, mean time +50, server system-wide
    // efficiency +200: better. On the client side the same: +25.
    assert_eq!(t.verdict, Verdict::Better);
    let client = compare(
        &base,
        &[&cand],
        Options {
            cpu_side: CpuSide::Client,
            ..Options::default()
        },
    );
    let t = &client.comparisons[0].tests[0];
    assert!(t.metric(Metric::ClientSystemEfficiency).unwrap().headline);
    assert!(!t.metric(Metric::ServerSystemEfficiency).unwrap().headline);
}

#[test]
fn mixed_verdicts_are_counted_and_said() {
    let (mut base, mut cand) = (document("a"), document("b"));
    add(&mut base, "rr1c-1x1", 1, &[fig(100.0, 100.0, 100.0)]);
    // More throughput, longer transactions: mixed.
    add(&mut cand, "rr1c-1x1", 1, &[fig(120.0, 130.0, 100.0)]);
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    assert_eq!(c.tests[0].verdict, Verdict::Mixed);
    assert_eq!(c.counts.mixed, 1);
    assert_eq!(
        c.summary,
        "b is better in 0 of 1 test, about the same in 0, worse in 0, mixed in 1 (some headline metrics better, others worse)."
    );
}

#[test]
fn unmatched_and_uncomparable_tests_are_listed() {
    let (mut base, mut cand) = (document("a"), document("b"));
    add(&mut base, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    add(&mut cand, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    add(&mut base, "rr1c-1x1", 500, &[fig(100.0, 10.0, 1.0)]);
    add(&mut cand, "str-readx30k", 1, &[fig(100.0, 10.0, 1.0)]);
    add_on(
        &mut base,
        "rr1c-1x1",
        Protocol::Udp,
        1,
        &[fig(100.0, 10.0, 1.0)],
    );
    add_on(
        &mut cand,
        "rr1c-1x1",
        Protocol::Udp,
        1,
        &[fig(100.0, 10.0, 1.0)],
    );
    // The candidate's UDP test has only a failed run.
    cand.tests.last_mut().unwrap().runs = vec![failed_run(
        1,
        String::new(),
        RunStatus::Failed,
        "refused".into(),
    )];
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    assert_eq!(c.only_in_base, vec!["rr1c-1x1--500"]);
    assert_eq!(c.only_in_candidate, vec!["str-readx30k--1"]);
    assert_eq!(c.not_compared.len(), 1);
    assert_eq!(c.not_compared[0].name, "rr1c-1x1--1--udp");
    assert_eq!(c.not_compared[0].reason, "no clean run in b");
    assert_eq!(c.not_compared[0].verdict, crate::Verdict::NoData);
    assert_eq!(c.counts.no_data, 1);
    assert_eq!(c.counts.total(), 1);
    assert_eq!(r.consistency.failed.len(), 1);
    // The UDP workload is its own workload, named with its protocol.
    assert!(r.workloads.iter().any(|w| w.title == "rr1c-1x1--udp"));
}

#[test]
fn suspect_runs_are_left_out_and_a_test_without_a_clean_run_has_no_data() {
    let (mut base, mut cand) = (document("a"), document("b"));
    add(
        &mut base,
        "rr1c-1x1",
        1,
        &[fig(100.0, 10.0, 1.0), fig(100.0, 10.0, 1.0)],
    );
    add(
        &mut cand,
        "rr1c-1x1",
        1,
        &[fig(900.0, 10.0, 1.0), fig(150.0, 10.0, 1.0)],
    );
    add(&mut base, "rr1c-1x1", 10, &[fig(100.0, 10.0, 1.0)]);
    add(&mut cand, "rr1c-1x1", 10, &[fig(100.0, 10.0, 1.0)]);
    // The candidate's 900 at 1 user was a stall's artefact: suspect.
    let r0 = &mut cand.tests[0].runs[0];
    r0.status = RunStatus::Suspect;
    r0.status_reasons = vec!["littles_law: 0.089".into()];
    // At 10 users every candidate run is suspect.
    cand.tests[1].runs[0].status = RunStatus::Suspect;
    cand.tests[1].runs[0].status_reasons = vec!["stalled_interval: 0 %".into()];
    let r = compare(&base, &[&cand], Options::default());
    let c = &r.comparisons[0];
    let t = c.test("rr1c-1x1--1").unwrap();
    assert_eq!(t.candidate_runs, 1, "the suspect run is left out");
    let th = t.metric(crate::Metric::Throughput).unwrap();
    assert!((th.judgement.relative_pct - 50.0).abs() < 1e-9, "{th:?}");
    assert_eq!(c.not_compared.len(), 1);
    assert_eq!(c.not_compared[0].verdict, crate::Verdict::NoData);
    assert_eq!(
        c.not_compared[0].reason,
        "no clean run in b (1 suspect run excluded)"
    );
    assert_eq!(c.suspect_excluded, 2);
    assert!(
        c.summary.ends_with(" 2 suspect runs were excluded."),
        "{}",
        c.summary
    );
    assert!(c.summary.contains("more with no data"), "{}", c.summary);
    assert_eq!(r.consistency.suspect.len(), 2);
    assert!(r.consistency.suspect[0].reason.contains("littles_law"));
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(md.contains("Suspect runs: b rr1c-1x1--1"), "{md}");
    assert!(md.contains("No data: rr1c-1x1--10"), "{md}");
    let csv = crate::CsvExporter.render(&r).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.contains(",rr1c-1x1--10,") && l.contains(",no_data,")),
        "{csv}"
    );
}

#[test]
fn uploads_counted_at_the_sender_are_said_so() {
    let (mut base, mut cand) = (document("old"), document("new"));
    add(&mut base, "str-readx30k", 1, &[fig(100.0, 10.0, 1.0)]);
    add(&mut cand, "str-readx30k", 1, &[fig(100.0, 10.0, 1.0)]);
    base.schema = linkperf_results::SCHEMA_V1.into();
    base.tests[0].runs[0]
        .throughput
        .as_mut()
        .unwrap()
        .counted_at = linkperf_results::CountedAt::v1();
    let r = compare(&base, &[&cand], Options::default());
    assert_eq!(
        r.consistency.counting.len(),
        1,
        "{:?}",
        r.consistency.counting
    );
    let note = &r.consistency.counting[0];
    assert!(
        note.starts_with("Counted at the sender: the client-to-server throughput of str-readx30k--1 in old (the file is linkperf/results/v1)"),
        "{note}"
    );
}

#[test]
fn environments_that_differ_are_pointed_out() {
    let (mut base, mut cand) = (document("osa"), document("hs"));
    add(&mut base, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    add(&mut cand, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    cand.environment.client = Some(environment("6.8.0", 9000));
    let mut server = environment("6.1.0", 65536);
    server.cpu_count = 8;
    server.linkperf_version = "0.2.0".into();
    cand.environment.server = Some(server);
    let r = compare(&base, &[&cand], Options::default());
    let d: Vec<String> = r
        .consistency
        .environment
        .iter()
        .map(|d| d.describe())
        .collect();
    assert_eq!(
        d,
        vec![
            "kernel (client): 6.1.0 in osa, 6.8.0 in hs",
            "MTU (client): 65536 in osa, 9000 in hs",
            "CPU count (server): 4 in osa, 8 in hs",
            "linkperf version (server): 0.1.0 in osa, 0.2.0 in hs",
        ]
    );
    // Equal environments: nothing to say about them (the study's single runs
    // are the only note).
    let (osa, hs) = study();
    let c = compare(&osa, &[&hs], Options::default()).consistency;
    assert!(c.environment.is_empty());
    assert!(c.stability_unjudged.is_some());
}

#[test]
fn tests_placed_differently_are_pointed_out_per_test() {
    use linkperf_workload::{CpuList, PlacementPolicy};
    let (mut base, mut cand) = (document("veth"), document("veth-1g"));
    for d in [&mut base, &mut cand] {
        add(d, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
        add(d, "rr1c-1x1", 50, &[fig(100.0, 10.0, 1.0)]);
        add(d, "str-readx30k", 1, &[fig(100.0, 10.0, 1.0)]);
    }
    // The base split its sides; the candidate left two tests to the scheduler.
    for t in &mut base.tests {
        for (p, cpu) in [
            (&mut t.config.client_placement, 0),
            (&mut t.config.server_placement, 1),
        ] {
            p.policy = PlacementPolicy::Split;
            p.affinity = Some(CpuList(vec![cpu]));
        }
    }
    cand.tests[2].config = base.tests[2].config.clone();
    let r = compare(&base, &[&cand], Options::default());
    let p = &r.consistency.placement;
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].side, "rr1c-1x1--1, rr1c-1x1--50");
    assert!(p[0].base.contains("pinned to 0 (split)"), "{}", p[0].base);
    assert!(p[0].candidate.contains("free"), "{}", p[0].candidate);
    assert!(!r.consistency.is_empty());
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(
        md.contains("Placement differs in rr1c-1x1--1, rr1c-1x1--50:"),
        "{md}"
    );
    // Placed alike: nothing to say.
    let r = compare(&base, &[&base.clone()], Options::default());
    assert!(r.consistency.placement.is_empty());
}

#[test]
fn single_runs_say_that_instability_cannot_be_judged() {
    // One run per test: the report must not say "nothing to point out", as
    // if the runs had been seen to agree.
    let (osa, hs) = study();
    let r = compare(&osa, &[&hs], Options::default());
    assert_eq!(
        r.consistency.stability_unjudged.as_deref(),
        Some("Instability cannot be judged: every test has a single run (repeat each test's runs, three times or more, to see how much they vary).")
    );
    assert!(!r.consistency.is_empty());
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(!md.contains("Nothing to point out"), "{md}");
    assert!(md.contains("- Instability cannot be judged: every test has a single run"));
    let html = crate::HtmlExporter.render(&r).unwrap();
    assert!(!html.contains("Nothing to point out"));
    assert!(html.contains("<li>Instability cannot be judged: every test has a single run"));

    // Three steady runs of every test: now there is nothing to point out.
    let (mut base, mut cand) = (document("a"), document("b"));
    for u in [1, 10] {
        add(&mut base, "rr1c-1x1", u, &spread(100.0, 1.0));
        add(&mut cand, "rr1c-1x1", u, &spread(110.0, 1.0));
    }
    let r = compare(&base, &[&cand], Options::default());
    assert!(r.consistency.is_empty(), "{:?}", r.consistency);
    let md = crate::MarkdownExporter.render(&r).unwrap();
    assert!(
        md.contains("## Consistency\n\nNothing to point out."),
        "{md}"
    );

    // Some tests repeated, some not: how many cannot be judged, per file.
    add(&mut cand, "rr1c-1x1", 25, &[fig(100.0, 100.0, 1e8)]);
    add(&mut base, "rr1c-1x1", 25, &spread(100.0, 1.0));
    let r = compare(&base, &[&cand], Options::default());
    assert_eq!(
        r.consistency.stability_unjudged.as_deref(),
        Some("Instability cannot be judged for the tests with a single run: 1 of 3 in b (repeat each test's runs, three times or more, to see how much they vary).")
    );
    // A one-file report of a single run says it too.
    let mut one = document("a");
    add(&mut one, "rr1c-1x1", 1, &[fig(100.0, 100.0, 1e8)]);
    let r = Report::single(Source::new("a.json", &one), Options::default());
    assert_eq!(
        r.consistency.stability_unjudged.as_deref(),
        Some("Instability cannot be judged: the test has a single run (repeat each test's runs, three times or more, to see how much they vary).")
    );
}

#[test]
fn labels_are_made_unique_and_several_candidates_compared() {
    let (mut a, mut b, mut c) = (document("linkperf"), document("linkperf"), document("x"));
    for d in [&mut a, &mut b, &mut c] {
        add(d, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    }
    let r = Report::comparison(
        Source::new("dir/one.json", &a),
        &[Source::new("two.json", &b), Source::new("x.json", &c)],
        Options::default(),
    );
    let labels: Vec<&str> = r.files.iter().map(|f| f.label.as_str()).collect();
    assert_eq!(labels, vec!["linkperf (one)", "linkperf (two)", "x"]);
    assert_eq!(r.comparisons.len(), 2);
    assert_eq!(r.comparisons[1].candidate, "x");
    assert_eq!(r.title(), "linkperf (two) and x against linkperf (one)");
}

#[test]
fn a_tests_settings_are_summarised_per_file() {
    let mut doc = document("a");
    add(&mut doc, "rr1c-1x1", 1, &[fig(100.0, 10.0, 1.0)]);
    let r = Report::single(Source::new("a.json", &doc), Options::default());
    let settings = &r.files[0].settings;
    assert!(settings.contains(&("client workers".to_string(), "1 thread".to_string())));
    assert!(settings.contains(&("server".to_string(), "embedded".to_string())));
    // Runs keep their order: a run added later is the second.
    assert_eq!(doc.tests[0].runs[0], run(1, fig(100.0, 10.0, 1.0)));
}

/// The small comparison the exporters' snapshots are of: rr1c-1x1 at 1 user
/// (hs better by 50% in throughput) and 10 users (within 1%: the same).
pub(crate) fn small() -> (ResultsDocument, ResultsDocument) {
    let (mut osa, mut hs) = (document("osa"), document("hs"));
    add(&mut osa, "rr1c-1x1", 1, &[fig(1e6, 20.0, 5e7)]);
    add(&mut hs, "rr1c-1x1", 1, &[fig(1.5e6, 15.0, 6e7)]);
    add(&mut osa, "rr1c-1x1", 10, &[fig(4e6, 50.0, 5e7)]);
    add(&mut hs, "rr1c-1x1", 10, &[fig(4.04e6, 49.5, 5e7)]);
    (osa, hs)
}

/// The report of [`small`].
pub(crate) fn small_report() -> Report {
    let (osa, hs) = small();
    Report::comparison(
        Source::new("osa.json", &osa),
        &[Source::new("hs.json", &hs)],
        Options::default(),
    )
}

#[test]
fn swapping_base_and_candidate_swaps_every_sign_and_verdict() {
    // Positive = the candidate better, whichever file is the base: each
    // difference from the other side is its mirror image, so
    // (1 + r₁)(1 + r₂) = 1 for higher-is-better metrics and
    // (1 − r₁)(1 − r₂) = 1 for lower-is-better ones.
    let (osa, hs) = study();
    let forward = compare(&osa, &[&hs], Options::default());
    let backward = compare(&hs, &[&osa], Options::default());
    let (f, b) = (&forward.comparisons[0], &backward.comparisons[0]);
    assert_eq!((f.base.as_str(), f.candidate.as_str()), ("osa", "hs"));
    assert_eq!((b.base.as_str(), b.candidate.as_str()), ("hs", "osa"));
    assert_eq!(f.tests.len(), b.tests.len());
    for t in &f.tests {
        let u = b.test(&t.name).expect("the same tests");
        for m in &t.metrics {
            let r1 = m.judgement.relative_pct / 100.0;
            let r2 = u.metric(m.metric).unwrap().judgement.relative_pct / 100.0;
            let product = match m.better {
                crate::Better::Higher => (1.0 + r1) * (1.0 + r2),
                crate::Better::Lower => (1.0 - r1) * (1.0 - r2),
            };
            assert!(
                (product - 1.0).abs() < 1e-9,
                "{} {:?}: {r1} {r2}",
                t.name,
                m.metric
            );
            if r1.abs() > 1e-12 {
                assert!(r1.signum() != r2.signum(), "{} {:?}", t.name, m.metric);
            }
        }
        let mirrored = match t.verdict {
            Verdict::Better => Verdict::Worse,
            Verdict::Worse => Verdict::Better,
            v => v,
        };
        assert_eq!(u.verdict, mirrored, "{}", t.name);
    }
    assert_eq!(
        (b.counts.better, b.counts.same, b.counts.worse),
        (f.counts.worse, f.counts.same, f.counts.better)
    );
    assert_eq!(
        b.summary,
        "osa is better in 10 of 45 tests, about the same in 2, worse in 33."
    );
    // The charts follow: hs's +250% throughput at 1 user is osa's −71.4%.
    let charts = crate::charts(&backward);
    let c = charts
        .iter()
        .find(|c| c.name == "relative-osa-rr1c-200x1000")
        .expect("the relative chart of the new candidate");
    let crate::ChartKind::Bars(bars) = &c.kind else {
        panic!("bars")
    };
    let v = bars.series[0].values[0].unwrap();
    assert!((v - (1.0 / 3.5 - 1.0) * 100.0).abs() < 1e-9, "{v}");
    assert_eq!(bars.note.as_deref(), Some("positive = osa better"));
}
