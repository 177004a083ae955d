//! `lab run`: suites through configurations, pairs, interleaved rounds,
//! kills and interrupts, and `--resume`.

use super::*;

// ---------------------------------------------------------------------------
// lab run: suites through configurations, pairs, interruptions.
// ---------------------------------------------------------------------------

/// A suite of a request/response test and a stream, 300 ms each.
fn mini_suite(dir: &Path) -> PathBuf {
    let f = dir.join("mini.toml");
    std::fs::write(
        &f,
        "name = \"lab-mini\"\nduration = \"300ms\"\nwarmup = \"200ms\"\n\
         [[test]]\nworkload = \"rr1c-200x1000\"\nusers = 1\n\
         [[test]]\nworkload = \"str-writex30k\"\nusers = 1\n",
    )
    .unwrap();
    f
}

/// Mean throughput (bytes/s) of test `name` in a results document.
fn test_rate(doc: &Value, name: &str, field: &str) -> f64 {
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test {name}"));
    util::assert_measured(&t["runs"][0], name);
    num(t, &format!("/runs/0/throughput/{field}"))
}

#[test]
fn lab_run_records_the_link_in_each_results_file_and_compares() {
    let Some(_g) = lab_lock("lab run") else {
        return;
    };
    let _c = (Cleanup("t-run-a".into()), Cleanup("t-run-b".into()));
    let dir = tempfile::tempdir().unwrap();
    let suite = mini_suite(dir.path());
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth,name=t-run-a,veth-1g,name=t-run-b",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let a = util::read_doc(&out.join("t-run-a.json"));
    let b = util::read_doc(&out.join("t-run-b.json"));
    assert_eq!(a["label"], "t-run-a");
    assert_eq!(a["link"]["configuration"], "t-run-a");
    assert_eq!(a["link"]["capacity_bits_per_s"], Value::Null);
    assert_eq!(a["link"]["commands"][0], "ip netns add lp-t-run-a-s1");
    assert_eq!(b["link"]["capacity_bits_per_s"], 1e9);
    let cmds: Vec<&str> = b["link"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        cmds.contains(
            &"tc -n lp-t-run-b-c1 qdisc add dev lp-c1 root tbf rate 1gbit burst 131072 latency 5ms"
        ),
        "{cmds:?}"
    );
    // A reproducible record: the lab command line, and each namespace as it
    // was while the tests ran (the shaping queue with its counters, the
    // offloads of the test devices, the sysctls that shape TCP).
    let cl: Vec<&str> = b["link"]["lab_command_line"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        cl.contains(&"lab") && cl.contains(&"run") && cl.contains(&"--configs"),
        "{cl:?}"
    );
    let client_ns = b["link"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "lp-t-run-b-c1")
        .unwrap_or_else(|| panic!("no client namespace in {}", b["link"]));
    assert!(
        client_ns["qdiscs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q.as_str().unwrap().contains("tbf")),
        "{client_ns}"
    );
    assert!(
        client_ns["sysctls"]["net.ipv4.tcp_rmem"].is_string(),
        "{client_ns}"
    );
    assert!(
        client_ns["sysctls"]["net.core.rmem_max"].is_string(),
        "{client_ns}"
    );
    assert!(
        client_ns["offloads"]["lp-c1"]["generic-segmentation-offload"].is_string(),
        "{client_ns}"
    );
    assert!(!client_ns["links"].as_array().unwrap().is_empty());
    // The typed reader keeps the link block as written.
    let typed = linkperf_results::ResultsDocument::load(&out.join("t-run-b.json")).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap()["link"], b["link"]);
    // The suite ran through each: 1 Gbit/s caps the stream of the second.
    // (Whether the uncapped veth beat it depends on the CPU the host spared
    // the test: on a busy host it may not, so only the cap is held.)
    let sa = test_rate(&a, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9;
    let sb = test_rate(&b, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9;
    assert!(
        sa > 0.0 && sb > 0.0 && sb <= CAP_SLACK,
        "veth {sa:.3}, veth-1g {sb:.3} Gbit/s"
    );
    assert!(test_rate(&a, "rr1c-200x1000--1", "transactions_per_s") > 100.0);
    // Placed alike in every configuration: split by default, each side's CPU
    // time read from its own half of the host.
    for d in [&a, &b] {
        for t in d["tests"].as_array().unwrap() {
            for side in ["client", "server"] {
                assert_eq!(t["config"][format!("{side}_placement")]["policy"], "split");
            }
            let cpus = |side: &str| -> Vec<u64> {
                t["runs"][0][side]["pinned_cpus"]
                    .as_array()
                    .unwrap_or_else(|| panic!("no pinned CPUs: {}", t["runs"][0][side]))
                    .iter()
                    .map(|c| c["cpu"].as_u64().unwrap())
                    .collect()
            };
            let (c, s) = (cpus("client"), cpus("server"));
            if linkperf_metrics::current_thread_allowed_cpus().len() > 1 {
                assert!(
                    c.iter().all(|x| !s.contains(x)),
                    "client {c:?}, server {s:?}"
                );
            }
        }
    }
    // The comparison: linkperf compare's report, with the first configuration as its base.
    let report = out.join("report");
    assert!(
        report.join("index.html").is_file(),
        "no report/index.html: {stdout}\n{err}"
    );
    assert!(
        err.contains("linkperf lab: comparison (base t-run-a) in "),
        "{err}"
    );
    let comparison = util::read_doc(&report.join("comparison.json"));
    assert_eq!(comparison["files"][0]["label"], "t-run-a", "{comparison}");
    assert_eq!(comparison["files"][1]["label"], "t-run-b", "{comparison}");
    let vs = comparison["comparisons"].as_array().unwrap();
    assert_eq!(vs.len(), 1, "{comparison}");
    assert_eq!(vs[0]["base"], "t-run-a");
    assert_eq!(vs[0]["candidate"], "t-run-b");
    assert!(out.join("logs/t-run-a-serve1.log").exists());
    assert!(
        err.contains("t-run-a: taken down") && err.contains("t-run-b: taken down"),
        "{err}"
    );
    assert_gone("t-run-a");
    assert_gone("t-run-b");
}

#[test]
fn lab_run_with_history_records_each_configuration_once_its_file_is_complete() {
    let Some(_g) = lab_lock("lab run --history") else {
        return;
    };
    let _c = (Cleanup("t-hist-a".into()), Cleanup("t-hist-b".into()));
    let dir = tempfile::tempdir().unwrap();
    let suite = mini_suite(dir.path());
    let out = dir.path().join("out");
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth,name=t-hist-a,veth-1g,name=t-hist-b",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--history",
        db,
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    assert!(!err.contains("could not record"), "{err}");
    for name in ["t-hist-a", "t-hist-b"] {
        // Each configuration's file is in the history already: importing it adds nothing.
        let file = out.join(format!("{name}.json"));
        let doc = util::read_doc(&file);
        let runs_of = |test: &str| -> u64 {
            doc["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == test)
                .map_or(0, |t| t["runs"].as_array().unwrap().len() as u64)
        };
        let runs = runs_of("rr1c-200x1000--1") + runs_of("str-writex30k--1");
        assert!(runs >= 2, "{doc}");
        let (code, o, e) = util::run(&["history", "import", file.to_str().unwrap(), "--db", db]);
        assert_eq!(code, 0, "{o}{e}");
        assert!(
            o.starts_with(&format!("imported 0 runs of {runs} ")),
            "{name}: {o}"
        );
        // Its series carry its name: both tests of the suite, every run.
        let (code, shown, e) = util::run(&[
            "history",
            "show",
            "--db",
            db,
            "--include-suspect",
            "--label",
            name,
            "--metric",
            "throughput.bytes_per_s",
        ]);
        assert_eq!(code, 0, "{e}");
        let rows: Vec<&str> = shown.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "{shown}");
        for test in ["rr1c-200x1000--1", "str-writex30k--1"] {
            let row = rows
                .iter()
                .find(|r| r.starts_with(&format!("{name} {test} ")))
                .unwrap_or_else(|| panic!("no {name} {test}: {shown}"));
            let cols: Vec<&str> = row.split_whitespace().collect();
            let n: u64 = cols[4].parse::<u64>().unwrap() + cols[5].parse::<u64>().unwrap();
            assert_eq!(n, runs_of(test), "{row}");
        }
    }
    // The two configurations are two environments (their links differ), so a
    // change of link is a new series, not a regression of the old one.
    let (_, all, _) = util::run(&["history", "show", "--db", db, "--include-suspect"]);
    let envs: std::collections::BTreeSet<&str> = all
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(envs.len(), 2, "{all}");
}

#[test]
fn pairs_share_the_shaped_link_with_per_pair_and_aggregate_results() {
    let Some(_g) = lab_lock("pairs") else { return };
    let _c = Cleanup("t-pairs".into());
    let dir = tempfile::tempdir().unwrap();
    let suite = mini_suite(dir.path());
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth-1g,name=t-pairs",
        "--pairs",
        "2",
        "--suite",
        suite.to_str().unwrap(),
        "--duration",
        "500ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let p1 = util::read_doc(&out.join("t-pairs-pair1.json"));
    let p2 = util::read_doc(&out.join("t-pairs-pair2.json"));
    let all = util::read_doc(&out.join("t-pairs.json"));
    assert_eq!(p1["label"], "t-pairs-pair1");
    assert_eq!(p2["label"], "t-pairs-pair2");
    assert_eq!(all["label"], "t-pairs");
    for d in [&p1, &p2, &all] {
        assert_eq!(d["link"]["capacity_bits_per_s"], 1e9);
        assert_eq!(d["link"]["commands"][0], "ip netns add lp-t-pairs-sedge");
    }
    // The aggregate's tests carry both pairs' users: 1 + 1.
    for (test, whole) in [
        ("rr1c-200x1000--1", "rr1c-200x1000--2"),
        ("str-writex30k--1", "str-writex30k--2"),
    ] {
        let t = all["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == whole)
            .unwrap_or_else(|| panic!("no test {whole} in the aggregate"));
        assert_eq!(t["workload"]["users"], 2);
        let parts = t["runs"][0]["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 2, "{t}");
        assert_eq!(
            (&parts[0]["label"], &parts[0]["users"]),
            (&"pair1".into(), &1.into())
        );
        assert_eq!(parts[1]["label"], "pair2");
        for field in ["bytes_per_s", "transactions_per_s"] {
            let (a, b, sum) = (
                test_rate(&p1, test, field),
                test_rate(&p2, test, field),
                test_rate(&all, whole, field),
            );
            assert!(a > 0.0 && b > 0.0, "{test} {field}: {a} {b}");
            assert!(
                (sum - (a + b)).abs() <= 1e-6 * sum,
                "{test} {field}: {sum} != {a} + {b}"
            );
        }
    }
    // Both pairs' streams crossed one 1 Gbit/s wire: together they stay under it.
    let s = test_rate(&all, "str-writex30k--2", "bytes_per_s") * 8.0 / 1e9;
    let (s1, s2) = (
        test_rate(&p1, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9,
        test_rate(&p2, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9,
    );
    eprintln!("veth-1g × 2 pairs: stream {s1:.3} + {s2:.3} = {s:.3} Gbit/s");
    assert!(
        s <= CAP_SLACK,
        "2 pairs carried {s:.3} Gbit/s over one 1 Gbit/s link"
    );
    // The terminal shows every pair's figures and their sum, as the files have them.
    assert!(
        stdout.contains("linkperf lab: t-pairs, 2 pairs through one link"),
        "{stdout}"
    );
    for (each, whole) in [
        ("rr1c-200x1000--1", "rr1c-200x1000--2"),
        ("str-writex30k--1", "str-writex30k--2"),
    ] {
        for (who, d) in [("pair 1", &p1), ("pair 2", &p2), ("together", &all)] {
            let test = if who == "together" { whole } else { each };
            let line = stdout
                .lines()
                .find(|l| l.starts_with(test) && l.contains(&format!("  {who}  ")))
                .unwrap_or_else(|| panic!("no line for {test} of {who}: {stdout}"));
            let gbit = format!("{:.3}", mean_ok_rate(d, test, "bytes_per_s") * 8.0 / 1e9);
            let tps = format!("{:.0}", mean_ok_rate(d, test, "transactions_per_s"));
            let cells: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(cells[cells.len() - 2..], [gbit, tps], "{line}");
        }
    }
    let server = text(&all, "/tests/0/config/server");
    assert_eq!(server, "2 pairs: 198.18.1.1, 198.18.2.1");
    assert!(out.join("logs/t-pairs-pair2.log").exists());
    assert_gone("t-pairs");
}

/// Spawns `lab run` of configuration `name` with a suite of a short test
/// then a long one, and waits until its client namespace exists and the
/// suite is past its first test, into the long one: the suite (its output
/// is the lab's) has printed the first test's run.
fn long_lab_run(dir: &Path, name: &str) -> Proc {
    let suite = dir.join("long.toml");
    std::fs::write(
        &suite,
        "name = \"lab-long\"\nwarmup = \"200ms\"\n\
         [[test]]\nworkload = \"rr1c-200x1000\"\nusers = 1\nduration = \"300ms\"\n\
         [[test]]\nworkload = \"str-writex30k\"\nusers = 1\nduration = \"30s\"\n",
    )
    .unwrap();
    let child = util::spawn(&[
        "lab",
        "run",
        "--configs",
        &format!("veth,name={name}"),
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    child.wait_for_stdout_line("the first test's run", Duration::from_secs(60), |l| {
        l.starts_with("rr1c-200x1000--1 run 1/")
    });
    assert_eq!(namespaces(&format!("lp-{name}-")).len(), 2);
    child
}

#[test]
fn a_killed_lab_run_is_reported_and_cleaned_by_the_next_lab_command() {
    let Some(_g) = lab_lock("killed") else { return };
    let _c = Cleanup("t-killed".into());
    let dir = tempfile::tempdir().unwrap();
    let mut child = long_lab_run(dir.path(), "t-killed");
    let pid = child.pid();
    child.kill(); // SIGKILL: no chance to clean up
                  // Still there: nobody took it down.
    assert_eq!(namespaces("lp-t-killed-").len(), 2);
    let (code, out, err) = lab(&["list"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("removing what an earlier lab command left behind"),
        "{err}"
    );
    for ns in ["lp-t-killed-s1", "lp-t-killed-c1"] {
        assert!(
            err.contains(&format!(
                "namespace {ns} (left by linkperf lab (pid {pid}), which is no longer running)"
            )),
            "{err}"
        );
    }
    assert!(!out.contains("t-killed"), "{out}");
    assert_gone("t-killed");
    // The servers and clients it started died with it.
    let leftover = sh("ps", &["-eo", "args"])
        .lines()
        .filter(|l| l.contains(BIN) && l.contains("--label t-killed"))
        .count();
    assert_eq!(leftover, 0, "a suite of the killed lab run still runs");
    // And the next command finds nothing more. (Not `lab down --all`: other
    // tests of this workspace may have a configuration up.)
    let (code, _, err) = lab(&["list"]);
    assert_eq!(code, 0);
    assert!(!err.contains("t-killed"), "{err}");
    // Taking down what is not up is an input error.
    let (code, _, err) = lab(&["down", "t-killed"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the lab has nothing of that name up (`linkperf lab list` shows what is)"),
        "{err}"
    );
}

#[test]
fn ctrl_c_during_lab_run_takes_everything_down() {
    let Some(_g) = lab_lock("ctrl-c") else { return };
    let _c = Cleanup("t-ctrlc".into());
    let dir = tempfile::tempdir().unwrap();
    let child = long_lab_run(dir.path(), "t-ctrlc");
    child.signal("-INT");
    let started = Instant::now();
    let (status, _, err) = child.finish(util::RUN_DEADLINE);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        err.contains("interrupted; everything the lab brought up is down"),
        "{err}"
    );
    assert_gone("t-ctrlc");
    // What was measured is kept.
    let doc = util::read_doc(&dir.path().join("out/t-ctrlc.json"));
    assert_eq!(doc["link"]["configuration"], "t-ctrlc");
}

/// Every configuration up at once, and each run of the suite on every
/// configuration in turn, the order rotating each round (ABC, BCA, CAB,
/// ABC): the host's drift over the suite lands on all alike.
#[test]
fn configurations_run_interleaved_each_round_in_a_rotated_order() {
    let Some(_g) = lab_lock("interleaved") else {
        return;
    };
    let names = ["t-il-a", "t-il-b", "t-il-c"];
    let _c: Vec<Cleanup> = names.iter().map(|n| Cleanup((*n).into())).collect();
    let dir = tempfile::tempdir().unwrap();
    let suite = mini_suite(dir.path());
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth,name=t-il-a,veth,name=t-il-b,veth,name=t-il-c",
        "--suite",
        suite.to_str().unwrap(),
        "--repeat",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    assert!(err.contains("interleaved"), "{err}");
    // (started, configuration, test, run) of every run that is not a retry.
    let mut runs: Vec<(String, &str, String, u64)> = Vec::new();
    for name in names {
        let doc = util::read_doc(&out.join(format!("{name}.json")));
        for t in doc["tests"].as_array().unwrap() {
            for r in t["runs"].as_array().unwrap() {
                if r.get("retry_of").is_some() {
                    continue;
                }
                runs.push((
                    text(r, "/started").to_string(),
                    name,
                    text(t, "/name").to_string(),
                    int(r, "/run"),
                ));
            }
        }
    }
    runs.sort();
    // 2 tests × 2 repeats = 4 rounds of 3 configurations.
    assert_eq!(runs.len(), 12, "{runs:?}");
    for (k, round) in runs.chunks(3).enumerate() {
        let order: Vec<&str> = round.iter().map(|r| r.1).collect();
        let expected: Vec<&str> = (0..3).map(|j| names[(k + j) % 3]).collect();
        assert_eq!(order, expected, "round {k}: {runs:?}");
        assert!(
            round
                .iter()
                .all(|r| (&r.2, r.3) == (&round[0].2, round[0].3)),
            "round {k} is one run of one test on each: {round:?}"
        );
    }
    for name in names {
        assert_gone(name);
    }
}

/// Ctrl-C in a lab run keeps what was measured and says how to go on; the
/// same command with `--resume` finishes every file where it stopped (and
/// without it, the files are not overwritten).
#[test]
fn an_interrupted_lab_run_continues_with_resume() {
    let Some(_g) = lab_lock("resume") else { return };
    let _c = Cleanup("t-resume".into());
    let dir = tempfile::tempdir().unwrap();
    let suite = mini_suite(dir.path());
    let out = dir.path().join("out");
    let args = [
        "lab",
        "run",
        "--configs",
        "veth,name=t-resume",
        "--suite",
        suite.to_str().unwrap(),
        "--repeat",
        "3",
        "--out",
        out.to_str().unwrap(),
    ];
    let child = util::spawn(&args);
    // Interrupted once the first run is in the file: its line is printed (by
    // the suite, on the lab's stdout) just before it is saved, and an
    // interrupt stops the suite before its next run, not before that save.
    let file = out.join("t-resume.json");
    child.wait_for_stdout_line("a completed run", Duration::from_secs(120), |l| {
        l.contains(" run ")
            && !l.contains("(retry of run")
            && (l.ends_with("[ok]") || l.ends_with("[SUSPECT]"))
    });
    let completed = |doc: &Value| -> usize {
        doc["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["runs"].as_array().unwrap())
            .filter(|r| {
                r["retry_of"].is_null() && (r["status"] == "ok" || r["status"] == "suspect")
            })
            .count()
    };
    child.signal("-INT");
    let (status, _, err) = child.finish(util::RUN_DEADLINE);
    let before = completed(&util::read_doc(&file));
    assert_gone("t-resume");
    if status.code() == Some(0) {
        // The suite was quicker than the signal: nothing left to resume.
        assert_eq!(before, 6, "{err}");
        return;
    }
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("continue with: linkperf lab run --configs veth,name=t-resume")
            && err.contains("--resume"),
        "{err}"
    );
    assert!(!err.contains("resume with: linkperf suite"), "{err}");
    // Without --resume the file is not overwritten.
    let (code, _, refused) = util::run(&args);
    assert_eq!(code, 2, "{refused}");
    assert!(
        refused.contains("exists: continue the lab run"),
        "{refused}"
    );
    // With it, every test gets its 3 runs, the earlier ones kept.
    let mut again = args.to_vec();
    again.push("--resume");
    let (code, stdout, err) = util::run(&again);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let doc = util::read_doc(&file);
    assert_eq!(completed(&doc), 6, "{doc}");
    assert!((1..=6).contains(&before));
    assert_gone("t-resume");
}
