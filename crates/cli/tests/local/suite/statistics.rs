//! The statistics over a test's runs, unstable tests flagged, and `--target-ci`
//! repeating a test until its interval is narrow enough.

use super::*;

// ---------------------------------------------------------------------------
// 4 and 5. Statistics and unstable flagging.
// ---------------------------------------------------------------------------

/// Checks one metric's statistics against the values computed here.
/// Three runs, or fewer when a busy host made some suspect: statistics are
/// over the ok runs only.
fn check_stats(name: &str, key: &str, stats: &Value, values: &[f64]) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() < 2 {
        0.0
    } else {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let scale = mean.abs().max(max.abs());
    let what = format!("{name} {key} over {values:?}: {stats}");
    assert_eq!(int(stats, "/n"), values.len() as u64, "{what}");
    assert!(close(num(stats, "/mean"), mean, scale), "mean: {what}");
    assert!(close(num(stats, "/stddev"), sd, scale), "stddev: {what}");
    assert_eq!(num(stats, "/min"), min, "min: {what}");
    assert_eq!(num(stats, "/max"), max, "max: {what}");
    match stats.get("cv").and_then(Value::as_f64) {
        Some(cv) => {
            assert!(mean != 0.0, "cv without a mean: {what}");
            assert!(close(cv, sd / mean.abs(), 1.0), "cv: {what}");
        }
        None => assert!(mean == 0.0 || values.len() < 2, "cv missing: {what}"),
    }
    // The interval is mean ± t(0.975, n − 1) × sd / √n; none for one run.
    let t = match values.len() {
        1 => {
            assert!(stats["ci95_low"].is_null(), "{what}");
            assert!(stats["ci95_high"].is_null(), "{what}");
            return;
        }
        2 => T_975_1DF,
        3 => T_975_2DF,
        more => panic!("{more} runs of 3: {what}"),
    };
    let half = t * sd / n.sqrt();
    assert!(
        close(num(stats, "/ci95_low"), mean - half, scale),
        "ci95_low {}: {what}",
        mean - half
    );
    assert!(
        close(num(stats, "/ci95_high"), mean + half, scale),
        "ci95_high {}: {what}",
        mean + half
    );
}

#[test]
fn statistics_match_values_computed_by_hand() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "stats"
[[matrix]]
workloads = ["rr1c-1x1", "rr1c-200x1000"]
users = [2]
"#,
    );
    let mut args = vec![
        s.file(),
        "--server",
        &addr,
        "--repeat",
        "3",
        "--out",
        s.out(),
    ];
    args.extend(TIMING);
    let out = suite_ok(&args);
    let doc = s.doc();
    assert_eq!(names(&doc), ["rr1c-1x1--2", "rr1c-200x1000--2"]);
    for t in tests(&doc) {
        let name = text(t, "/name");
        // The statistics are over the ok runs (a busy host may make one suspect).
        let raw: Vec<&Value> = at(t, "/runs")
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .collect();
        assert_eq!(runs(t).len(), 3, "{name}");
        assert!(runs(t).iter().all(|(_, s)| s == "ok"), "{name}");
        let Some(summary) = t.get("summary") else {
            assert!(raw.is_empty(), "{name}: ok runs and no summary");
            continue;
        };
        assert_eq!(int(summary, "/runs"), raw.len() as u64, "{name}");
        assert_eq!(
            int(summary, "/suspect_runs"),
            3 - raw.len() as u64,
            "{name}"
        );
        let metrics = at(summary, "/metrics").as_object().unwrap();
        for key in [
            "throughput.bytes_per_s",
            "throughput.tx_bytes_per_s",
            "throughput.rx_bytes_per_s",
            "throughput.transactions_per_s",
            "transaction_time_us.mean",
            "transaction_time_us.p99",
            "cpu.client.process_s",
            "cpu.server.process_s",
            "errors",
        ] {
            assert!(metrics.contains_key(key), "{name}: no {key} in the summary");
        }
        // Every figure all three runs carry is summarised, and only those.
        for key in FIGURES {
            let values: Option<Vec<f64>> = raw.iter().map(|r| figure(r, key)).collect();
            match (values, metrics.get(key)) {
                (Some(v), Some(stats)) => check_stats(name, key, stats, &v),
                (None, None) => {}
                (v, m) => panic!("{name} {key}: runs {v:?}, summary {m:?}"),
            }
        }
        assert!(
            metrics.keys().all(|k| FIGURES.contains(&k.as_str())),
            "{name}: unexpected figures {:?}",
            metrics.keys()
        );
        if raw.len() < 2 {
            continue;
        }
        let cv = num(summary, "/metrics/throughput.bytes_per_s/cv");
        assert_eq!(num(summary, "/throughput_cv"), cv, "{name}");
        assert_eq!(
            at(summary, "/unstable").as_bool().unwrap(),
            cv > UNSTABLE_CV,
            "{name}: cv {cv}"
        );
    }
    check_table_against_json(&out, &doc);
}

#[test]
fn unstable_is_flagged_exactly_above_five_percent() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "unstable"
[[matrix]]
workloads = ["rr1c-1x1"]
users = [1, 2, 3]
"#,
    );
    let mut args = vec![
        s.file(),
        "--server",
        &addr,
        "--repeat",
        "2",
        "--out",
        s.out(),
    ];
    args.extend(TIMING);
    let out = suite_ok(&args);
    check_table_against_json(&out, &s.doc());

    // The machine decides nothing: give two tests' runs throughputs on either
    // side of the threshold, take a run of the third away, and resume. The
    // resumed run makes the suite recompute every summary and print the table.
    let (above, below) = ([1.0e9, 1.075e9], [1.0e9, 1.07e9]);
    let cv = |v: [f64; 2]| ((v[1] - v[0]) / 2f64.sqrt()) / ((v[0] + v[1]) / 2.0);
    assert!(cv(above) > UNSTABLE_CV && cv(above) < 0.052);
    assert!(cv(below) < UNSTABLE_CV && cv(below) > 0.047);
    let mut doc = s.doc();
    for (name, values) in [("rr1c-1x1--1", above), ("rr1c-1x1--2", below)] {
        let t = doc["tests"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|t| t["name"] == name)
            .unwrap();
        for (r, v) in t["runs"].as_array_mut().unwrap().iter_mut().zip(values) {
            r["throughput"]["bytes_per_s"] = v.into();
            // Made up, and counted: as an ok run.
            r["status"] = "ok".into();
        }
    }
    let t3 = doc["tests"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["name"] == "rr1c-1x1--3")
        .unwrap();
    t3["runs"].as_array_mut().unwrap().pop();
    std::fs::write(&s.out, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    args.push("--resume");
    let out = suite_ok(&args);
    assert_eq!(order(&out), [("rr1c-1x1--3".to_string(), 2)], "{out}");
    let doc = s.doc();
    let summary = |n: &str| at(test(&doc, n), "/summary").clone();
    let a = summary("rr1c-1x1--1");
    assert_eq!(a["unstable"], true, "cv {} > 5%: {a}", cv(above));
    assert!(close(num(&a, "/throughput_cv"), cv(above), 1.0), "{a}");
    let b = summary("rr1c-1x1--2");
    assert_eq!(b["unstable"], false, "cv {} ≤ 5%: {b}", cv(below));
    assert!(close(num(&b, "/throughput_cv"), cv(below), 1.0), "{b}");
    let c = summary("rr1c-1x1--3");
    assert_eq!(int(&c, "/runs") + int(&c, "/suspect_runs"), 2, "{c}");

    let rows = table_rows(&out);
    assert_eq!(rows[0][5], "5.1%", "{out}");
    assert!(rows[0].contains(&"UNSTABLE".to_string()), "{out}");
    assert_eq!(rows[1][5], "4.8%", "{out}");
    assert!(!rows[1].contains(&"UNSTABLE".to_string()), "{out}");
    check_table_against_json(&out, &doc);
}

/// `--target-ci`: each test repeated until the 95% interval of its mean
/// throughput is within ± the target, between --min-repeat and --max-repeat
/// runs; a target no run can meet takes the most runs; bad values are
/// refused before anything runs.
#[test]
fn target_ci_repeats_a_test_until_its_interval_is_narrow_enough() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        "name = \"ci\"\nduration = \"300ms\"\nwarmup = \"100ms\"\nretry_suspect = 0\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
    );
    // A target no throughput meets: every test takes the most runs.
    let (code, out, err) = suite(&[
        s.file(),
        "--server",
        &addr,
        "--out",
        s.out(),
        "--target-ci",
        "0.0001",
        "--min-repeat",
        "2",
        "--max-repeat",
        "4",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc = s.doc();
    assert_eq!(runs(test(&doc, "rr1c-1x1--1")).len(), 4, "{out}");
    assert_eq!(doc["suite"]["target_ci"], 0.000001);
    assert_eq!(doc["suite"]["min_repeat"], 2);
    assert_eq!(doc["suite"]["repeat"], 4);
    // A target any two runs meet: the fewest runs.
    let s2 = Study::new(&std::fs::read_to_string(&s.file).unwrap());
    let (code, out, err) = suite(&[
        s2.file(),
        "--server",
        &addr,
        "--out",
        s2.out(),
        "--target-ci",
        "99",
        "--min-repeat",
        "2",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    // Two steady runs meet it; on a busy host the first two may differ by
    // more than that (with 1 degree of freedom t is 12.7), so the count is
    // checked against the rule applied to the runs' own figures.
    let doc2 = s2.doc();
    let t = test(&doc2, "rr1c-1x1--1");
    let all = at(t, "/runs").as_array().unwrap();
    let ok: Vec<f64> = all
        .iter()
        .filter(|r| r["status"] == "ok")
        .map(|r| num(r, "/throughput/bytes_per_s"))
        .collect();
    let half = |xs: &[f64]| {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        linkperf_metrics::student_t_quantile(0.975, n - 1.0) * (var / n).sqrt() / mean
    };
    // Every run past the second was needed: the ok runs before it were too wide.
    for k in 2..all.len() {
        let before: Vec<f64> = all[..k]
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| num(r, "/throughput/bytes_per_s"))
            .collect();
        assert!(
            before.len() < 2 || half(&before) > 0.99,
            "run {} was not needed: {before:?}",
            k + 1
        );
    }
    // And the last one either met the target or was the tenth.
    assert!(
        all.len() == 10 || (ok.len() >= 2 && half(&ok) <= 0.99),
        "{} runs: {ok:?}",
        all.len()
    );
    // The plan says so.
    let (code, plan, _) = suite(&[s.file(), "--dry-run", "--target-ci", "5"]);
    assert_eq!(code, 0);
    assert!(
        plan.contains("3 to 10 runs (each until the 95% interval of its mean throughput is within ±5.0 %) = 10 runs at most"),
        "{plan}"
    );
    // Bad values: exit 2, nothing run.
    for bad in [
        vec!["--target-ci", "0"],
        vec!["--target-ci", "100"],
        vec!["--target-ci", "5", "--repeat", "3"],
        vec!["--target-ci", "5", "--min-repeat", "1"],
        vec!["--target-ci", "5", "--min-repeat", "6", "--max-repeat", "4"],
    ] {
        let mut args = vec![s.file(), "--dry-run"];
        args.extend(bad.iter().copied());
        let (code, _, err) = suite(&args);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    // --min-repeat alone is a floor (the lab passes 3): a suite file that
    // asks more runs gets them, one that asks fewer gets the floor.
    for (file_repeat, min, runs) in [(5, 3, 5), (2, 3, 3)] {
        let s3 = Study::new(&format!(
            "name = \"floor\"\nrepeat = {file_repeat}\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n"
        ));
        let min = min.to_string();
        let (code, plan, err) = suite(&[s3.file(), "--dry-run", "--min-repeat", &min]);
        assert_eq!(code, 0, "{err}");
        assert!(
            plan.contains(&format!("1 test × {runs} runs = {runs} runs")),
            "repeat {file_repeat}, --min-repeat {min}: {plan}"
        );
    }
}
