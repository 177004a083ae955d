//! End-to-end tests of `linkperf compare` and `linkperf report`: two real
//! suites on loopback with different worker settings, compared, either way
//! round (`--base`) and with a third file; the report directory checked file
//! by file; the HTML page opened in headless Chromium (it must load without
//! a console error, its screenshot must not be blank, and at a laptop's
//! width nothing may stick out sideways); bad input refused with exit code 2
//! and a message naming the file.

// The helpers are shared with e2e.rs; this file does not use all of them.
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::{run, Proc};
use serde_json::Value;

/// A short study: two workloads at 1 and 4 users, sub-second windows.
const SUITE: &str = r#"
name = "report-e2e"
description = "two workloads at 1 and 4 users, for linkperf compare"
duration = "300ms"
warmup = "100ms"

[[matrix]]
workloads = ["rr1c-1x1", "str-readx30k"]
users = [1, 4]
"#;

/// Longest headless Chromium may take to load the page.
const BROWSER_DEADLINE: Duration = Duration::from_secs(60);

/// `linkperf ARGS`, asserting exit code 0; stdout and stderr.
fn ok(args: &[&str]) -> (String, String) {
    let (code, out, err) = run(args);
    assert_eq!(
        code, 0,
        "linkperf {args:?} failed\nstdout: {out}\nstderr: {err}"
    );
    (out, err)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Runs the suite twice, labelled `a` (one worker per side) and `b` (two
/// workers per side), each test twice; returns the two results files.
fn two_suites(dir: &Path) -> (PathBuf, PathBuf) {
    let suite = dir.join("study.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let common = ["suite", path(&suite), "--quiet", "--repeat", "2"];
    let mut args = common.to_vec();
    args.extend([
        "--label",
        "a",
        "--out",
        path(&a),
        "--threads",
        "1",
        "--server-threads",
        "1",
    ]);
    ok(&args);
    let mut args = common.to_vec();
    args.extend([
        "--label",
        "b",
        "--out",
        path(&b),
        "--threads",
        "2",
        "--server-threads",
        "2",
    ]);
    ok(&args);
    (a, b)
}

/// The relative difference the brief defines, positive = candidate better.
fn relative(base: f64, cand: f64, better: &str) -> f64 {
    match better {
        "higher" => (cand / base - 1.0) * 100.0,
        _ => (base - cand) / base * 100.0,
    }
}

fn assert_svg(file: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not valid XML: {e}", file.display()));
    assert_eq!(
        doc.root_element().tag_name().name(),
        "svg",
        "{}",
        file.display()
    );
}

/// Decodes a PNG; returns its width and how many colours it has (up to 1000).
fn png_colours(file: &Path) -> (u32, usize) {
    let bytes = std::fs::read(file).unwrap();
    let decoder = png::Decoder::new(bytes.as_slice());
    let mut reader = decoder
        .read_info()
        .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", file.display()));
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader
        .next_frame(&mut buf)
        .unwrap_or_else(|e| panic!("{} does not decode: {e}", file.display()));
    let channels = info.color_type.samples();
    let mut colours = HashSet::new();
    for px in buf[..info.buffer_size()].chunks(channels) {
        colours.insert(px.to_vec());
        if colours.len() >= 1000 {
            break;
        }
    }
    (info.width, colours.len())
}

#[test]
fn two_real_suites_compared_end_to_end() {
    let _g = crate::util::shared();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_suites(dir.path());
    let out = dir.path().join("report");
    let (stdout, _) = ok(&["compare", path(&a), path(&b), "--out", path(&out)]);

    // The summary sentence, with counts that add up to the 4 tests.
    let sentence = stdout.lines().next().unwrap_or_default();
    let words: Vec<&str> = sentence.split(' ').collect();
    assert!(
        sentence.starts_with("b is better in ")
            && sentence.contains(" of 4 tests, about the same in "),
        "{stdout}"
    );
    // "b is better in N of 4 tests, about the same in N, worse in N[,
    // inconclusive in N (…)][, mixed in N (…)]." (then, on a busy host, "N
    // suspect runs were excluded."): every count, by its word.
    let count = |word: &str| -> usize {
        words
            .windows(3)
            .find(|w| w[0] == word && w[1] == "in")
            .map_or(0, |w| w[2].trim_end_matches([',', '.']).parse().unwrap())
    };
    let (better, same, worse) = (count("better"), count("same"), count("worse"));
    assert_eq!(
        better + same + worse + count("inconclusive") + count("mixed"),
        4,
        "{sentence}"
    );
    assert!(stdout.contains("index.html"), "{stdout}");

    // Every file the issue promises.
    for name in [
        "index.html",
        "comparison.csv",
        "comparison.md",
        "comparison.json",
    ] {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    let mut charts = Vec::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "svg") {
            assert_svg(&p);
            let png = p.with_extension("png");
            let (width, colours) = png_colours(&png);
            assert_eq!(width, 1200, "{}", png.display());
            assert!(colours > 2, "{} has {colours} colours", png.display());
            charts.push(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    charts.sort();
    assert_eq!(
        charts,
        vec![
            "overview-b",
            "relative-b-rr1c-1x1",
            "relative-b-str-readx30k",
            "throughput-rr1c-1x1",
            "throughput-str-readx30k",
            "timeseries-rr1c-1x1",
            "timeseries-str-readx30k",
            "transaction-time-rr1c-1x1",
            "transaction-time-str-readx30k",
        ]
    );

    // The JSON: every matched test, every metric with the brief's sign
    // convention, Welch's test where both sides were repeated.
    let json: Value = crate::util::read_doc(&out.join("comparison.json"));
    assert_eq!(json["schema"], "linkperf/report/v1");
    let c = &json["comparisons"][0];
    assert_eq!(
        (c["base"].as_str(), c["candidate"].as_str()),
        (Some("a"), Some("b"))
    );
    let tests = c["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        vec![
            "rr1c-1x1--1",
            "rr1c-1x1--4",
            "str-readx30k--1",
            "str-readx30k--4"
        ]
    );
    let mut rows = 0;
    for t in tests {
        let metrics = t["metrics"].as_array().unwrap();
        assert!(metrics.len() >= 4, "{t}");
        for m in metrics {
            let (base, cand) = (
                m["base_mean"].as_f64().unwrap(),
                m["candidate_mean"].as_f64().unwrap(),
            );
            let better = m["better"].as_str().unwrap();
            let pct = m["relative_pct"].as_f64().unwrap();
            assert!(
                (pct - relative(base, cand, better)).abs() < 1e-6 * pct.abs().max(1.0),
                "{m}"
            );
            // Two ok runs on each side: Welch (or constant runs), never threshold-only.
            assert_ne!(m["method"], "threshold_only", "{m}");
            rows += 1;
        }
        assert!(["better", "worse", "same", "inconclusive", "mixed"]
            .contains(&t["verdict"].as_str().unwrap()));
    }
    assert_eq!(c["counts"]["better"], better);
    // Two runs a side: the power the comparisons had is said.
    let power = c["median_power"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&power), "{c}");
    assert!(c["method_note"]
        .as_str()
        .unwrap()
        .contains("median power of"));
    assert!(c["method_note"]
        .as_str()
        .unwrap()
        .starts_with("Repeated runs on both sides"));
    assert_eq!(json["workloads"].as_array().unwrap().len(), 2);
    for w in json["workloads"].as_array().unwrap() {
        let text = w["break_even"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("break-even at ~")
                || text.starts_with("no crossing in 1–4 users")
                || text == "no difference beyond the noise in 1–4 users",
            "{text}"
        );
    }

    // The CSV: a header and one row per test and metric.
    let csv = std::fs::read_to_string(out.join("comparison.csv")).unwrap();
    assert!(csv.starts_with("base,candidate,test,workload,protocol,users,metric,"));
    assert_eq!(csv.lines().count(), 1 + rows);

    // The page: summary first, the commands that made each file, the
    // environments with the differing worker setting highlighted, nothing external.
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains(sentence), "the page leads with the sentence");
    assert!(html.contains("--server-threads 2"), "the command of b.json");
    assert!(html.contains("<tr class=\"diff\"><td class=\"text\">client workers</td>"));
    // Per test: retransmits and where the workers ran.
    assert!(html.contains("<h3>Runs, retransmits and worker placement</h3>"));
    assert!(html.contains("<td class=\"text wrap\">2 threads, free</td>"));
    // Request/response in transactions per second, streams in bits.
    assert!(html.contains("rr1c-1x1: throughput in transactions/s"));
    assert!(html.contains("str-readx30k: throughput in bit/s"));
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    for forbidden in ["http://", "https://", "<script", "<link", "src="] {
        assert!(!without_ns.contains(forbidden), "{forbidden} in index.html");
    }

    browser_check(&out.join("index.html"), dir.path(), sentence);

    // --format md to stdout; the same sentence.
    let (md, _) = ok(&["compare", path(&a), path(&b), "--format", "md"]);
    assert!(md.starts_with("# linkperf comparison: b against a"), "{md}");
    assert!(md.contains(sentence));
    assert!(md.contains("## rr1c-1x1") && md.contains("## str-readx30k"));
    let (csv_out, _) = ok(&[
        "compare",
        path(&a),
        path(&b),
        "--format",
        "csv",
        "--threshold",
        "5",
        "--cpu-side",
        "client",
    ]);
    assert_eq!(csv_out.lines().count(), 1 + rows);
    assert!(csv_out.contains("efficiency.client_bytes_per_system_cpu_s,bytes/CPU-s,higher,true,"));

    // One file: absolute charts and tables, no relative ones.
    let single = dir.path().join("single");
    ok(&[
        "report",
        path(&a),
        "--out",
        path(&single),
        "--capacity",
        "100gbit",
    ]);
    for name in [
        "index.html",
        "report.csv",
        "report.md",
        "report.json",
        "throughput-rr1c-1x1.svg",
        "transaction-time-str-readx30k.png",
    ] {
        assert!(
            single.join(name).is_file(),
            "{name} missing from the one-file report"
        );
    }
    assert!(!single.join("overview-b.svg").exists());
    let page = std::fs::read_to_string(single.join("index.html")).unwrap();
    assert!(page.contains("linkperf report: a"));

    capacity_end_to_end(&a, &single.join("report.json"), dir.path());
    base_end_to_end(&a, &b, dir.path(), sentence);
}

/// The numbers of "X is better in N of M tests, about the same in N, worse
/// in N": (better, same, worse).
fn counts(sentence: &str) -> (usize, usize, usize) {
    let words: Vec<&str> = sentence.split(' ').collect();
    let number = |i: usize| {
        words[i]
            .trim_end_matches([',', '.'])
            .parse::<usize>()
            .unwrap_or_else(|_| panic!("{sentence}"))
    };
    (number(4), number(12), number(15))
}

/// `--base`: the base named by path, by bare file name or by label, in any
/// position; either way round the verdicts mirror each other; a third file
/// puts both candidates side by side in one chart per workload.
fn base_end_to_end(a: &Path, b: &Path, dir: &Path, sentence: &str) {
    // a first or b first, --base a: the same comparison.
    let json = |args: &[&str]| -> Value {
        let mut all = vec!["compare"];
        all.extend_from_slice(args);
        all.extend(["--format", "json"]);
        serde_json::from_str(&ok(&all).0).unwrap()
    };
    let forward = json(&[path(a), path(b)]);
    for named in [path(a), "a.json", "a"] {
        let again = json(&[path(b), path(a), "--base", named]);
        assert_eq!(
            again["comparisons"], forward["comparisons"],
            "--base {named} with the base given second"
        );
        assert_eq!(again["files"][0]["label"], "a", "--base {named}");
    }
    // The other way round: every sign and verdict mirrored.
    let backward = json(&[path(a), path(b), "--base", "b"]);
    let (f, r) = (&forward["comparisons"][0], &backward["comparisons"][0]);
    assert_eq!(
        (r["base"].as_str(), r["candidate"].as_str()),
        (Some("b"), Some("a"))
    );
    let mirrored = |v: &str| {
        match v {
            "better" => "worse",
            "worse" => "better",
            v => v,
        }
        .to_string()
    };
    for (t, u) in f["tests"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r["tests"].as_array().unwrap())
    {
        assert_eq!(t["name"], u["name"]);
        assert_eq!(
            mirrored(t["verdict"].as_str().unwrap()),
            u["verdict"].as_str().unwrap(),
            "{}",
            t["name"]
        );
        for (m, n) in t["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .zip(u["metrics"].as_array().unwrap())
        {
            let (r1, r2) = (
                m["relative_pct"].as_f64().unwrap() / 100.0,
                n["relative_pct"].as_f64().unwrap() / 100.0,
            );
            let product = if m["better"] == "higher" {
                (1.0 + r1) * (1.0 + r2)
            } else {
                (1.0 - r1) * (1.0 - r2)
            };
            assert!(
                (product - 1.0).abs() < 1e-6,
                "{} {}: {r1} {r2}",
                t["name"],
                m["metric"]
            );
        }
    }
    let (better, same, worse) = counts(sentence);
    let back = r["summary"].as_str().unwrap();
    assert!(back.starts_with("a is better in "), "{back}");
    assert_eq!(counts(back), (worse, same, better), "{sentence} / {back}");

    // Three files, the middle one the base: both candidates in one chart per
    // workload, each in its own colour, beside their own relative charts.
    let mut third = crate::util::read_doc(b);
    third["label"] = Value::from("c");
    // Long values, as real hosts have: they wrap in the environment table.
    for side in ["client", "server"] {
        let env = &mut third["environment"][side];
        env["cpu_model"] =
            Value::from("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz with a long stepping name");
        env["kernel"] =
            Value::from("6.1.0-18-cloud-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)");
    }
    let c = dir.join("c.json");
    std::fs::write(&c, serde_json::to_string(&third).unwrap()).unwrap();
    let out = dir.join("three");
    let (stdout, _) = ok(&[
        "compare",
        path(a),
        path(b),
        path(&c),
        "--base",
        "b.json",
        "--out",
        path(&out),
    ]);
    assert!(stdout.starts_with("a is better in "), "{stdout}");
    assert!(stdout.contains("\nc is better in "), "{stdout}");
    for w in ["rr1c-1x1", "str-readx30k"] {
        let svg = std::fs::read_to_string(out.join(format!("candidates-{w}.svg"))).unwrap();
        assert!(
            svg.contains(&format!("{w}: throughput of a and c against b")),
            "{w}"
        );
        for name in [format!("relative-a-{w}.svg"), format!("relative-c-{w}.svg")] {
            assert!(out.join(&name).is_file(), "{name}");
        }
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("linkperf comparison: a and c against b"));
    // Six hosts side by side, with long values, still fit a laptop.
    no_overflow_at_laptop_width(&out.join("index.html"), dir);
}

/// A link capacity, given on the command line or recorded in the results
/// file, at the rate the loopback path actually carried: the report says
/// the link is not sufficient; a capacity far below it is said not to
/// describe the path.
fn capacity_end_to_end(a: &Path, report_json: &Path, dir: &Path) {
    let report: Value = crate::util::read_doc(report_json);
    // The busiest direction of rr1c-1x1's busiest test, in bits per second.
    let bits = report["figures"][0]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["workload"]["workload"] == "rr1c-1x1")
        .map(|t| t["busiest_direction_bytes_per_s"].as_f64().unwrap() * 8.0)
        .fold(0.0, f64::max);
    assert!(bits > 0.0);
    let capacity = format!("{bits:.0}");
    let (md, _) = ok(&["report", path(a), "--capacity", &capacity, "--format", "md"]);
    assert!(
        md.contains("the link is not sufficient for this load"),
        "{md}"
    );

    let (md, _) = ok(&["report", path(a), "--capacity", "1kbit", "--format", "md"]);
    assert!(
        md.contains("the capacity does not describe this path"),
        "{md}"
    );

    // Recorded by the lab in the document instead.
    let mut doc = crate::util::read_doc(a);
    doc["link"] = serde_json::json!({
        "configuration": "shaped",
        "capacity_bits_per_s": bits,
        "commands": ["tc qdisc add dev veth0 root tbf rate 1gbit burst 128kb latency 10ms"],
    });
    let recorded = dir.join("recorded.json");
    std::fs::write(&recorded, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = dir.join("recorded");
    ok(&["report", path(&recorded), "--out", path(&out)]);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("the link is not sufficient for this load"));
    assert!(
        html.contains("tc qdisc add dev veth0 root tbf rate 1gbit"),
        "the link's commands"
    );

    // A capacity for one file only (--capacity FILE=RATE), against the base
    // without a recorded capacity and the copy with one.
    let capacity_saturated = |extra: &[&str]| {
        let mut args = vec!["compare", path(a), path(&recorded), "--format", "json"];
        args.extend_from_slice(extra);
        let (json, _) = ok(&args);
        let v: Value = serde_json::from_str(&json).unwrap();
        let origins: Vec<Value> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["capacity_origin"].clone())
            .collect();
        let w = v["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["title"] == "rr1c-1x1")
            .unwrap();
        let mut by_capacity: Vec<String> = w["saturation"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["finding"]["cause"]["kind"] == "capacity")
            .map(|n| n["label"].as_str().unwrap().to_string())
            .collect();
        by_capacity.sort();
        (origins, by_capacity)
    };
    // Both files are labelled a: the report tells them apart by file name.
    let (origins, sat) = capacity_saturated(&[]);
    assert_eq!(origins, vec![Value::Null, Value::from("recorded")]);
    assert_eq!(sat, vec!["a (recorded)"]);
    // The recorded file's capacity overridden for it alone, named by its
    // bare file name (the tests run elsewhere): no longer full.
    let (origins, sat) = capacity_saturated(&["--capacity", "recorded.json=100gbit"]);
    assert_eq!(origins, vec![Value::Null, Value::from("file")]);
    assert!(sat.is_empty(), "{sat:?}");
    // The base given the rate it carried (named by its path); the copy keeps
    // its recorded one.
    let base = format!("{}={capacity}", path(a));
    let (origins, sat) = capacity_saturated(&["--capacity", &base]);
    assert_eq!(origins, vec![Value::from("file"), Value::from("recorded")]);
    assert_eq!(sat, vec!["a (a)", "a (recorded)"]);
    // Both forms: the file's own for it, the plain one for the rest.
    let (origins, sat) = capacity_saturated(&["--capacity", "100gbit", "--capacity", &base]);
    assert_eq!(origins, vec![Value::from("file"), Value::from("all_files")]);
    assert_eq!(sat, vec!["a (a)"]);
}

/// Where Debian's chromium package puts the browser, or another on PATH.
fn chromium() -> PathBuf {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    found.unwrap_or_else(|| {
        panic!("headless Chromium is needed to check the HTML report and was not found at /usr/bin/chromium: run scripts/setup.sh (it installs Debian's chromium package; CI does)")
    })
}

/// Headless Chromium on `page` with `extra` arguments; its stdout and stderr.
fn browser(page: &Path, profile: &Path, extra: &[&str]) -> (String, String) {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", page.display()));
    // It ends once its output has, its helper processes' too.
    let (_, out, err) = Proc::spawn(&mut cmd, "chromium").finish(BROWSER_DEADLINE);
    (out, err)
}

/// The page loads in Chromium without a console message (the page has no
/// script: any console line is an error, such as a resource that failed),
/// its DOM has the summary, and a screenshot at 1200 px is not blank.
fn browser_check(page: &Path, dir: &Path, sentence: &str) {
    let profile = dir.join("chromium-profile");
    let (dom, log) = browser(page, &profile, &["--dump-dom"]);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(
        console.is_empty(),
        "console messages while loading the report:\n{}",
        console.join("\n")
    );
    assert!(
        dom.contains(sentence),
        "the loaded page lacks the summary: {} bytes of DOM",
        dom.len()
    );
    assert!(dom.contains("<svg"), "the loaded page has no inline chart");

    let shot = dir.join("report.png");
    let (_, log) = browser(
        page,
        &profile,
        &[
            "--window-size=1200,2400",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    assert!(shot.is_file(), "no screenshot; chromium said:\n{log}");
    let (width, colours) = png_colours(&shot);
    assert_eq!(width, 1200);
    assert!(colours > 20, "the screenshot is blank ({colours} colours)");

    no_overflow_at_laptop_width(page, dir);
}

/// A laptop's screen, CSS pixels.
const LAPTOP: (u32, u32) = (1366, 768);

/// Laid out at a laptop's width, the page is no wider than the window and
/// no table needs scrolling sideways: long values (command lines, CPU
/// models) wrap. Measured by a copy of the page with a script that writes
/// the document's width, every box that scrolls sideways and every element
/// reaching past the window's right edge into the DOM that `--dump-dom`
/// prints (the report itself has no script).
fn no_overflow_at_laptop_width(page: &Path, dir: &Path) {
    const MEASURE: &str = r##"<script>
(function () {
  var view = document.documentElement.clientWidth;
  var out = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (getComputedStyle(e).overflowX === "auto" && e.scrollWidth > e.clientWidth) {
      var inner = e.firstElementChild;
      out.push("scrolls: " + (inner ? inner.tagName + "." + inner.className : "") + " " + e.scrollWidth + " in " + e.clientWidth);
    }
    for (var p = e.parentElement; p; p = p.parentElement) {
      if (getComputedStyle(p).overflowX === "auto") return;
    }
    var r = e.getBoundingClientRect();
    if (r.right > view + 0.5) out.push(e.tagName + "#" + e.id + "." + e.className + " right=" + r.right);
  });
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = "scroll=" + document.documentElement.scrollWidth + " view=" + view + "\n" + out.slice(0, 20).join("\n");
  document.body.appendChild(pre);
})();
</script>"##;
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        !html.contains("<script"),
        "the report has no script of its own"
    );
    let measured = dir.join("measure.html");
    std::fs::write(
        &measured,
        html.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .unwrap();
    let (dom, log) = browser(
        &measured,
        &dir.join("chromium-measure"),
        &[
            &format!("--window-size={},{}", LAPTOP.0, LAPTOP.1),
            "--dump-dom",
        ],
    );
    let start = dom
        .find("<pre id=\"measured\">")
        .unwrap_or_else(|| panic!("the measuring script did not run; chromium said:\n{log}"));
    let text = &dom[start + "<pre id=\"measured\">".len()..];
    let text = &text[..text.find("</pre>").unwrap()];
    let first = text.lines().next().unwrap();
    let number = |key: &str| -> u32 {
        let v = first.split(' ').find_map(|w| w.strip_prefix(key)).unwrap();
        v.parse().unwrap()
    };
    let (scroll, view) = (number("scroll="), number("view="));
    assert!(
        view > LAPTOP.0 - 40 && view <= LAPTOP.0,
        "the window's width: {text}"
    );
    assert!(
        scroll <= view,
        "the page is {scroll} px wide in a {view} px window; sticking out:\n{text}"
    );
    assert_eq!(
        text.lines().count(),
        1,
        "boxes that scroll sideways, elements past the right edge:\n{text}"
    );
}

/// A minimal valid results document with no tests.
const EMPTY: &str = r#"{"schema":"linkperf/results/v2","label":"empty","created":"2024-05-01T10:00:00Z","linkperf_version":"0.1.0","command_line":["linkperf"],"environment":{},"tests":[]}"#;

#[test]
fn bad_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write("good.json", EMPTY);
    // Another file labelled as good.json is.
    let same_label = write("also-empty.json", EMPTY);
    let cases = [
        (
            write("truncated.json", &EMPTY[..EMPTY.len() / 2]),
            "the file is truncated",
        ),
        (
            write(
                "iperf3.json",
                r#"{"start": {"version": "iperf 3.12"}, "end": {}}"#,
            ),
            "it is not a linkperf results file",
        ),
        (
            write("newer.json", &EMPTY.replace("results/v2", "results/v3")),
            "it was written by a newer linkperf (schema linkperf/results/v3)",
        ),
        (
            write("text.json", "throughput: 9.4 Gbit/s\n"),
            "the file is not JSON",
        ),
        (
            dir.path()
                .join("missing.json")
                .to_str()
                .unwrap()
                .to_string(),
            "the file does not exist",
        ),
    ];
    for (bad, problem) in &cases {
        for args in [
            vec!["compare", bad.as_str(), good.as_str()],
            vec!["compare", good.as_str(), bad.as_str()],
            vec!["report", bad.as_str()],
        ] {
            let (code, out, err) = run(&args);
            assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
            assert!(
                err.contains(bad.as_str()) && err.contains(problem),
                "{args:?}: {err}"
            );
            assert!(out.is_empty(), "{args:?}: {out}");
        }
    }
    // Files without a common test: nothing to compare.
    let (code, _, err) = run(&["compare", &good, &good]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing to compare"), "{err}");
    // A capacity in bytes is refused, not guessed.
    let (code, _, err) = run(&["compare", &good, &good, "--capacity", "1gbps"]);
    assert_eq!(code, 2);
    assert!(err.contains("1gbit"), "{err}");
    // A capacity for a file that is not compared, or for no file.
    for (arg, says) in [
        (
            "other.json=1gbit",
            "other.json is not one of the compared files",
        ),
        ("=1gbit", "names no file"),
        ("good.json=1gbps", "1gbit"),
    ] {
        let (code, out, err) = run(&["compare", &good, &good, "--capacity", arg]);
        assert_eq!(code, 2, "--capacity {arg}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains(says), "--capacity {arg}: {err}");
        let (code, _, err) = run(&["report", &good, "--capacity", arg]);
        assert_eq!(code, 2, "report --capacity {arg}: {err}");
        assert!(err.contains(says), "report --capacity {arg}: {err}");
    }
    // The plain form twice is ambiguous.
    let (code, _, err) = run(&[
        "compare",
        &good,
        &good,
        "--capacity",
        "1gbit",
        "--capacity",
        "10gbit",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("more than once"), "{err}");
    // One file is not a comparison.
    let (code, _, _) = run(&["compare", &good]);
    assert_eq!(code, 2);

    // A --base that names no compared file or label, or a label two files
    // share: exit 2, a message saying why, nothing written.
    let other = write("other.json", &EMPTY.replace("\"empty\"", "\"other\""));
    let out = dir.path().join("not-written");
    for (base, says) in [
        (
            "missing.json",
            "--base missing.json: not one of the compared files",
        ),
        ("nobody", "nor the label of one (empty, other)"),
        ("empty", "several compared files are labelled empty"),
    ] {
        let mut args = vec!["compare", good.as_str(), other.as_str()];
        if base == "empty" {
            args.push(same_label.as_str());
        }
        args.extend(["--base", base, "--out", out.to_str().unwrap()]);
        let (code, stdout, err) = run(&args);
        assert_eq!(code, 2, "--base {base}\nstdout: {stdout}\nstderr: {err}");
        assert!(err.contains(says), "--base {base}: {err}");
        assert!(stdout.is_empty(), "--base {base}: {stdout}");
        assert!(!out.exists(), "--base {base}: nothing may be written");
    }
}

/// A UDP stream blasted at a 2 KiB receive buffer on loopback, held to no
/// loss: it loses almost every datagram, so its runs are suspect whatever
/// the host's load (`udp_loss`), and not retried.
const SUSPECT_SUITE: &str = r#"
name = "suspect-e2e"
duration = "500ms"
warmup = "0"
retry_suspect = 0
max_loss = 0
rate = 0

[[test]]
workload = "stream-up:1400"
protocol = "udp"
users = 1
rcvbuf = 2048
"#;

/// Issue 35: `compare` on runs that were all excluded as suspect says so,
/// with the checks they failed and how to go on, instead of "nothing to
/// compare"; `--include-suspect` compares them, and says so in the table,
/// the JSON and the page.
#[test]
fn compare_says_why_nothing_was_compared_and_includes_suspect_runs_when_asked() {
    let _g = crate::util::shared();
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suspect.toml");
    std::fs::write(&suite, SUSPECT_SUITE).unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (label, out) in [("a", &a), ("b", &b)] {
        ok(&[
            "suite",
            path(&suite),
            "-q",
            "--label",
            label,
            "--out",
            path(out),
        ]);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
        let run = &doc["tests"][0]["runs"][0];
        assert_eq!(run["status"], "suspect", "{run}");
    }
    let (code, out, err) = run(&["compare", path(&a), path(&b)]);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    for says in [
        "nothing to compare: 1 test is in both",
        "str-readx1400@max--1--udp: no clean run in a (1 suspect run excluded) and b (1 suspect run excluded)",
        "2 runs were excluded as suspect (checks failed: udp_loss",
        "--include-suspect",
    ] {
        assert!(err.contains(says), "{says:?} in {err}");
    }

    let report = dir.path().join("report");
    let (code, out, err) = run(&[
        "compare",
        path(&a),
        path(&b),
        "--include-suspect",
        "--out",
        path(&report),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("warning: SUSPECT RUNS INCLUDED"), "{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["options"]["include_suspect"], true);
    let summary = json["comparisons"][0]["summary"].as_str().unwrap();
    assert!(
        summary.ends_with("Suspect runs included (--include-suspect): 2."),
        "{summary}"
    );
    assert_eq!(json["comparisons"][0]["tests"].as_array().unwrap().len(), 1);
    assert_eq!(json["figures"][0]["tests"][0]["suspect_included"], 1);
    let md = std::fs::read_to_string(report.join("comparison.md")).unwrap();
    assert!(
        md.lines()
            .nth(2)
            .is_some_and(|l| l.starts_with("**SUSPECT RUNS INCLUDED (--include-suspect): 2 runs")),
        "{md}"
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        html.contains(
            "<p class=\"suspect-included\" id=\"suspect-included\">SUSPECT RUNS INCLUDED"
        ),
        "the page says so"
    );
}
