//! The lab on this host: real network namespaces, veth pairs, tbf shaping,
//! VXLAN, a bridge and macvlan, with real `linkperf serve` and `linkperf run`
//! processes inside them.
//!
//! These tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; CI
//! runs them as root. Without the privileges each test prints why and passes
//! without doing anything, unless LINKPERF_LAB_REQUIRED=1 (scripts/test.sh
//! sets it when it runs as root): then that is a failure saying what is
//! missing. Tests that create namespaces run one at a time
//! (one lock), each under configuration names of its own (`t-…`), and each
//! removes what it created when it ends, failed or not.

// The helpers are shared with e2e.rs; this file does not use all of them.
use crate::util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::util::lab::{namespaces, sh, skip};
use crate::util::{at, int, num, text, Client, Proc, Server, BIN, TIMING};
use serde_json::Value;

/// Allowance over a shaped rate (tbf counts whole packets, so payload stays under it).
const CAP_SLACK: f64 = 1.05;

/// A shaped stream is "clearly below" the unshaped veth under this fraction of it.
const CLEARLY_BELOW: f64 = 0.9;

/// Gbit/s the unshaped veth must exceed for veth-10g's cap to show against it.
const CLEARLY_OVER_10G: f64 = 11.0;

/// The lock, or `None` (with the reason printed) when the lab cannot run here.
fn lab_lock(test: &str) -> Option<MutexGuard<'static, ()>> {
    util::lab::ready(test, &["ip", "tc"]).then(util::one_lab_at_a_time)
}

/// `linkperf lab ARGS`: exit code, stdout, stderr.
fn lab(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["lab"];
    all.extend(args);
    util::run(&all)
}

/// Links named `lp-…` in the root namespace.
fn root_lab_links() -> Vec<String> {
    sh("ip", &["-o", "link"])
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with("lp-"))
        .collect()
}

/// Nothing of configuration `name` is left: no namespace, no root link.
fn assert_gone(name: &str) {
    let left = namespaces(&format!("lp-{name}-"));
    assert!(left.is_empty(), "{name} left namespaces behind: {left:?}");
    let links = root_lab_links();
    assert!(
        links.is_empty(),
        "lp- links in the root namespace: {links:?}"
    );
    assert!(
        !Path::new(&format!("/run/linkperf-lab/{name}.json")).exists(),
        "{name}'s record is still there"
    );
}

/// Removes whatever configuration `name` left, whatever happened.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for ns in namespaces(&format!("lp-{}-", self.0)) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        let _ = std::fs::remove_file(format!("/run/linkperf-lab/{}.json", self.0));
    }
}

/// A configuration brought up with `lab up`, taken down when dropped.
struct Up {
    name: String,
    /// The lab's record of it (`/run/linkperf-lab/NAME.json`).
    record: Value,
    _cleanup: Cleanup,
}

impl Up {
    /// `linkperf lab up SPEC,name=NAME [--pairs N]`, checked.
    fn new(spec: &str, name: &str, pairs: u32) -> Up {
        let pairs = pairs.to_string();
        Up::with(name, &[&format!("{spec},name={name}"), "--pairs", &pairs])
    }

    /// `linkperf lab up ARGS` of configuration `name`, checked.
    fn with(name: &str, args: &[&str]) -> Up {
        let cleanup = Cleanup(name.to_string());
        let mut all = vec!["up"];
        all.extend(args);
        let (code, out, err) = lab(&all);
        assert_eq!(code, 0, "lab up {args:?}\nstdout: {out}\nstderr: {err}");
        // It says how to use it by hand.
        assert!(
            out.contains(&format!("linkperf lab: {name} is up")),
            "{out}"
        );
        assert!(
            out.contains("ip netns exec lp-") && out.contains(" serve --listen 198.1"),
            "{out}"
        );
        assert!(out.contains(&format!("linkperf lab down {name}")), "{out}");
        let record: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("/run/linkperf-lab/{name}.json"))
                .expect("the lab's record"),
        )
        .expect("the record is JSON");
        // Its namespaces exist, and `lab list` shows it.
        for ns in record["namespaces"].as_array().unwrap() {
            let ns = ns.as_str().unwrap();
            assert_eq!(namespaces(ns), [ns], "namespace {ns}");
        }
        let (code, out, err) = lab(&["list"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("{name}  [lab up]")), "{out}");
        Up {
            name: name.to_string(),
            record,
            _cleanup: cleanup,
        }
    }

    fn pair(&self, k: usize) -> &Value {
        &self.record["pairs"][k]
    }

    /// `linkperf lab down NAME`, checked, and nothing left.
    fn down(self) {
        let (code, _, err) = lab(&["down", &self.name]);
        assert_eq!(code, 0, "lab down {}: {err}", self.name);
        assert!(err.contains(&format!("{} is down", self.name)), "{err}");
        assert_gone(&self.name);
    }
}

/// `linkperf run` inside pair `p`'s client namespace against its server:
/// the results document, checked for an ok run.
fn run_through(p: &Value, serve: &Server, workload: &str) -> Value {
    run_with(p, serve, workload, &TIMING)
}

/// [`run_through`] with these timing and socket options.
fn run_with(p: &Value, serve: &Server, workload: &str, options: &[&str]) -> Value {
    let ns = text(p, "/client_ns");
    let addr = text(p, "/server_addr");
    let mut args = vec!["run", "--quiet", "--server", addr, "--workload", workload];
    args.extend(options);
    let ran = util::run_json_under(&["ip", "netns", "exec", ns], &args);
    ok_results(ran, &format!("{workload} through {ns}"), serve)
}

/// The results document of a `linkperf run` that ended as `ran` (exit code,
/// stdout, stderr, document), checked for a successful exit and an ok run
/// (`what`: the run, for the log).
fn ok_results(ran: (i32, String, String, Value), what: &str, serve: &Server) -> Value {
    let (code, out, err, doc) = ran;
    // Measured whole: ok, or suspect for nothing but a busy host (the lab's
    // tests run beside others).
    let run = doc.pointer("/tests/0/runs/0").unwrap_or(&Value::Null);
    let status = run["status"].as_str();
    let failed = util::failed_checks(run);
    let measured = status == Some("ok")
        || (status == Some("suspect") && failed.iter().all(|c| util::BUSY_HOST_CHECKS.contains(c)));
    assert!(
        code == 0 && measured,
        "{what}: exit {code}\nstdout: {out}\nstderr: {err}\nserver: {}",
        serve.log()
    );
    doc
}

/// Payload Gbit/s of a run's window.
fn gbit(doc: &Value) -> f64 {
    num(doc, "/tests/0/runs/0/throughput/bytes_per_s") * 8.0 / 1e9
}

/// Brings `spec` up as `name`, carries a request/response test and a stream
/// (server to client) through pair 1, takes it down and checks that nothing
/// is left. Returns the stream's Gbit/s.
fn carry(spec: &str, name: &str) -> f64 {
    carry_through(Up::new(spec, name, 1), spec)
}

/// [`carry`] through a configuration that is up (`spec`: what it is, for the log).
fn carry_through(up: Up, spec: &str) -> f64 {
    let name = up.name.clone();
    let p = up.pair(0).clone();
    let serve = Server::start_in(text(&p, "/server_ns"), text(&p, "/server_addr"));
    let rr = run_through(&p, &serve, "rr1c-200x1000");
    assert!(num(&rr, "/tests/0/runs/0/throughput/transactions_per_s") > 100.0);
    assert_eq!(int(&rr, "/tests/0/runs/0/errors"), 0);
    let stream = run_through(&p, &serve, "str-writex30k");
    let g = gbit(&stream);
    assert!(g > 0.01, "{name}: {g} Gbit/s");
    eprintln!(
        "{name} ({spec}): stream {g:.3} Gbit/s, rr {:.0} transactions/s",
        num(&rr, "/tests/0/runs/0/throughput/transactions_per_s")
    );
    drop(serve);
    up.down();
    g
}

/// The study's uploads at 250 users over a link shaped to 1 Gbit/s: counted
/// where they arrive, they never read more than the link carries (counted at
/// the sender they read 1.18 Gbit/s: bytes still in socket buffers when the
/// window closed). The difference is kept, as what was in flight.
#[test]
fn uploads_of_250_users_over_a_1_gbit_link_read_at_most_the_link() {
    let Some(_g) = lab_lock("250 uploads") else {
        return;
    };
    let _c = Cleanup("t-up250".into());
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("up250.toml");
    std::fs::write(
        &suite,
        "name = \"up250\"\nduration = \"3s\"\nwarmup = \"1s\"\nretry_suspect = 0\n\
         [[test]]\nworkload = \"str-readx30k\"\nusers = 250\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth-1g,name=t-up250",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let doc = util::read_doc(&out.join("t-up250.json"));
    let r = &doc["tests"][0]["runs"][0];
    // Every flow moves in the window of a run the host left alone; where
    // other work took most of the CPUs, a flow may sit out the 3 s window in
    // TCP's retransmission back-off, and the run is suspect for it, as it
    // should be: the link's bound below holds either way.
    let noisy = util::assert_measured_on_a_noisy_host(r, "250 uploads", &["flow_progress"]);
    let up = num(r, "/throughput/tx_bytes_per_s") * 8.0;
    eprintln!(
        "250 uploads over veth-1g: {:.3} Gbit/s received; {} B sent, {} B received, {} B in flight",
        up / 1e9,
        r["payload"]["client_to_server"]["sent"],
        r["payload"]["client_to_server"]["received"],
        r["payload"]["client_to_server"]["in_flight"]
    );
    assert!(up <= 1e9, "{:.3} Gbit/s over a 1 Gbit/s link", up / 1e9);
    let floor = if noisy { 0.1e9 } else { 0.5e9 };
    assert!(up > floor, "only {:.3} Gbit/s", up / 1e9);
    assert_eq!(
        text(r, "/throughput/counted_at/client_to_server"),
        "receiver"
    );
    let sent = int(r, "/payload/client_to_server/sent");
    let received = int(r, "/payload/client_to_server/received");
    assert_eq!(received, int(r, "/server/rx_bytes"));
    assert_eq!(
        r["payload"]["client_to_server"]["in_flight"]
            .as_i64()
            .unwrap(),
        sent as i64 - received as i64
    );
    assert_eq!(int(r, "/flows/flows"), 250);
    let stalled = int(r, "/flows/no_progress");
    if noisy {
        assert!(stalled < 125, "most flows moved: {}", r["flows"]);
    } else {
        assert_eq!(stalled, 0, "{}", r["flows"]);
    }
    assert_gone("t-up250");
}

/// A UDP stream at twice what a link shaped to 100 Mbit/s carries: about
/// half its datagrams are lost, and what arrives is about the link's rate;
/// at half the link's rate nothing is lost. Run by `lab run` from a suite
/// file with a `rate` key, as a user would.
#[test]
fn a_udp_stream_at_twice_a_100_mbit_link_loses_about_half() {
    let Some(_g) = lab_lock("udp at 200m over 100mbit") else {
        return;
    };
    let _c = Cleanup("t-udp100".into());
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("udp100.toml");
    std::fs::write(
        &suite,
        "name = \"udp100\"\nduration = \"3s\"\nwarmup = \"1s\"\nretry_suspect = 0\n\
         [[matrix]]\nworkloads = [\"stream-up:1400\"]\nusers = [1]\nprotocols = [\"udp\"]\nrate = \"200m\"\n\
         [[test]]\nworkload = \"stream-up:1400\"\nusers = 1\nprotocol = \"udp\"\nrate = \"50m\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth,rate=100mbit,name=t-udp100",
        "--suite",
        suite.to_str().unwrap(),
        // One run of each: the run is what is checked.
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let doc = util::read_doc(&out.join("t-udp100.json"));
    assert_eq!(doc["link"]["capacity_bits_per_s"], 1e8);
    let run = |name: &str| -> Value {
        let t = doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no test {name}: {doc}"));
        assert_eq!(
            t["config"]["rate_bits_per_s"].as_f64(),
            t["spec"]["rate"].as_f64()
        );
        let r = t["runs"][0].clone();
        util::assert_measured(&r, name);
        r
    };
    // 200 Mbit/s offered: the link carries its 100 (less the headers of each
    // 1400-byte payload: 24 of linkperf's, 8 UDP, 20 IP, 14 Ethernet, so
    // 95.5 Mbit/s of payload), the rest is lost.
    let r = run("str-readx1400@200m--1--udp");
    let d = &r["udp"]["client_to_server"];
    let (loss, received) = (
        num(d, "/loss_rate"),
        num(&r, "/throughput/tx_bytes_per_s") * 8.0,
    );
    eprintln!(
        "200 Mbit/s over 100mbit: {:.1} % lost ({} of {} datagrams), {:.1} Mbit/s received, sent {:.1} Mbit/s, jitter {:.1} µs",
        loss * 100.0,
        d["lost"],
        d["expected"],
        received / 1e6,
        num(d, "/sent_bits_per_s") / 1e6,
        num(d, "/jitter_us")
    );
    // Whatever the host's load: no more received than the link carries, so
    // at least what the sender offered beyond it is lost.
    let sent = num(d, "/sent_bits_per_s");
    assert!(
        received <= 101e6,
        "{:.1} Mbit/s received over a 100 Mbit/s link",
        received / 1e6
    );
    assert!(
        loss >= 1.0 - 101e6 / sent,
        "{loss} lost of {sent} bit/s sent: {d}"
    );
    // A clean run (the host let both sides keep up): the sender kept its
    // pace, the link carried its rate and the rest, about half, was lost.
    if r["status"] == "ok" {
        assert_eq!(d["kept_pace"], true, "the sender kept its 200 Mbit/s: {d}");
        assert!((0.40..=0.60).contains(&loss), "{loss} lost: {d}");
        assert!(
            received >= 85e6,
            "{:.1} Mbit/s received over a 100 Mbit/s link",
            received / 1e6
        );
        // Each second lost about as much: the link's queue, not a stall.
        for i in r["intervals"].as_array().unwrap() {
            if i["length_s"].as_f64().unwrap_or(0.0) > 0.99 {
                let l = num(i, "/loss_rate");
                assert!((0.3..=0.7).contains(&l), "a second lost {l}: {i}");
            }
        }
    }
    // Half the link's rate: nothing lost.
    let r = run("str-readx1400@50m--1--udp");
    let d = &r["udp"]["client_to_server"];
    let received = num(&r, "/throughput/tx_bytes_per_s") * 8.0;
    assert!(
        received <= 52.5e6,
        "{:.1} Mbit/s received at 50",
        received / 1e6
    );
    // Cleanly run, nothing is lost and the pace is what was asked.
    if r["status"] == "ok" {
        assert_eq!(int(d, "/lost"), 0, "{d}");
        assert!(
            (received - 50e6).abs() < 2.5e6,
            "{:.1} Mbit/s received at 50",
            received / 1e6
        );
    }
    assert_gone("t-udp100");
}

/// The runs of `test` in a results document that measured something (ok, or
/// suspect for a busy host), and whether any is ok.
fn measured_runs<'a>(doc: &'a Value, test: &str) -> (Vec<&'a Value>, bool) {
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == test)
        .unwrap_or_else(|| panic!("no test {test}"));
    let runs: Vec<&Value> = t["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok" || r["status"] == "suspect")
        .collect();
    assert!(!runs.is_empty(), "{test}: nothing measured: {t}");
    let ok = runs.iter().any(|r| r["status"] == "ok");
    (runs, ok)
}

/// The least share of a 1 Gbit/s link a clean run of the study's loads
/// fills: 50 users of 30 KiB responses, 40 of the interconnect mix, with
/// the host's CPU to spare (the run is `ok`), leave the link the limit
/// (measured on a loaded 2-CPU host: 0.97–1.00 and 0.84–0.97 of the wire,
/// suspect runs included).
const CLEAN_FILL: f64 = 0.70;

/// Seeds 000 and 002 (docs/studies.md): the in-memory path against a 1 Gbit/s
/// link, for the large transactions at 50 users and the interconnect mix at 40.
/// The wire, read from the shaped interface (headers included), never carries
/// more than the link and never less than the payload, and clean runs fill
/// most of it. The verdict is held to where the runs' spread puts the link
/// against the 95 % rule, as the report reads it: "not sufficient" where
/// the runs are at or above it, "inconclusive" where their interval
/// straddles it, and, on a host too busy for the link to fill (a clean run
/// at 94.6 % of the wire), "sufficient" only below it (issue 35).
#[test]
fn study_one_gigabit_is_not_sufficient_for_large_transactions_and_the_mix() {
    let Some(_g) = lab_lock("study 000/002") else {
        return;
    };
    let _c = (Cleanup("t-st-mem".into()), Cleanup("t-st-1g".into()));
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("study.toml");
    std::fs::write(
        &suite,
        "name = \"study-1g\"\nduration = \"1s\"\nwarmup = \"300ms\"\n\
         [[test]]\nworkload = \"rr1c-200x30k\"\nusers = 50\n\
         [[test]]\nworkload = \"mix:200x200*1,200x8k*3\"\nusers = 40\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "veth,name=t-st-mem,veth-1g,name=t-st-1g",
        "--suite",
        suite.to_str().unwrap(),
        // Three runs: a spread to hold the 95 % rule against.
        "--repeat",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let shaped = util::read_doc(&out.join("t-st-1g.json"));
    let report = out.join("report/comparison.json");
    let comparison = report.exists().then(|| util::read_doc(&report));
    for test in ["rr1c-200x30k--50", "mix--40"] {
        let name = shaped["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .find(|n| n.starts_with(test.split("--").next().unwrap()))
            .unwrap_or_else(|| panic!("no {test} in {shaped}"))
            .to_string();
        let (runs, ok) = measured_runs(&shaped, &name);
        for r in &runs {
            // Responses are the heavier direction: the server's interface.
            let w = &r["wire"]["server_to_client"];
            let wire = w["bits_per_s"].as_f64().unwrap_or_else(|| panic!("{r}"));
            let payload = r["throughput"]["rx_bytes_per_s"].as_f64().unwrap() * 8.0;
            assert_eq!(w["queue"], "tbf", "{w}");
            assert!(
                wire <= 1e9 * CAP_SLACK,
                "{name}: {wire} bit/s on a 1 Gbit/s link"
            );
            // Counted over one clean window at both ends: no frame larger
            // than the MTU's, and the headers on top of the payload (a busy
            // host skews the two sides' windows and the counters' edges).
            if r["status"] == "ok" {
                let frame = wire / 8.0 / w["packets_per_s"].as_f64().unwrap();
                assert!(frame <= 1514.0 * 1.001, "{name}: {frame}-byte frames");
                assert!(
                    wire > payload,
                    "{name}: wire {wire} below its payload {payload}"
                );
                assert!(
                    wire >= 1e9 * CLEAN_FILL,
                    "{name}: a clean run filled {wire} bit/s of a 1 Gbit/s link"
                );
            }
        }
        eprintln!(
            "veth-1g {name}: wire {:.3} Gbit/s, payload {:.3} Gbit/s ({})",
            runs[0]["wire"]["server_to_client"]["bits_per_s"]
                .as_f64()
                .unwrap()
                / 1e9,
            runs[0]["throughput"]["rx_bytes_per_s"].as_f64().unwrap() * 8.0 / 1e9,
            runs[0]["status"]
        );
        // A clean run: the host gave it the CPU, the link is the limit.
        if ok {
            let c = comparison
                .as_ref()
                .unwrap_or_else(|| panic!("an ok run but no report: {err}"));
            let workload = name.split("--").next().unwrap();
            let notes: Vec<&Value> = c["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| w["title"].as_str().unwrap().starts_with(workload))
                .flat_map(|w| w["sufficiency"].as_array().unwrap())
                .filter(|n| n["label"] == "t-st-1g")
                .collect();
            assert_eq!(notes.len(), 1, "{c}");
            let finding = &notes[0]["finding"];
            let text = notes[0]["text"].as_str().unwrap();
            let limit = 1e9 * 0.95;
            eprintln!("veth-1g {name}: {text}");
            match finding["answer"].as_str().unwrap() {
                "not_sufficient" => {
                    let at = &finding["at"];
                    let bits = at["bits_per_s"].as_f64().unwrap();
                    let low = at["bits_per_s_interval"][0].as_f64().unwrap_or(bits);
                    assert!(
                        low >= limit || int(at, "/lost") > 0 || int(at, "/drops") > 0,
                        "not sufficient at {bits} bit/s (interval from {low}): {finding}"
                    );
                    assert!(
                        text.starts_with("t-st-1g is not sufficient for ")
                            && text.contains("of the wire"),
                        "{text}"
                    );
                    // The price against the in-memory path, where it ran cleanly too.
                    let memory = util::read_doc(&out.join("t-st-mem.json"));
                    if measured_runs(&memory, &name).1 {
                        assert!(text.contains("× t-st-mem's"), "{text}");
                    }
                    assert!(
                        stdout.contains(text) || err.contains(text),
                        "{stdout}\n{err}"
                    );
                }
                "inconclusive" => {
                    let (low, high) = (
                        num(&finding["at"], "/bits_per_s_interval/0"),
                        num(&finding["at"], "/bits_per_s_interval/1"),
                    );
                    assert!(low < limit && high >= limit, "{finding}");
                }
                "sufficient" => {
                    // The host kept the link from filling: every user count
                    // below the rule, but the link still the limit.
                    let share = num(finding, "/max_share");
                    assert!(
                        (CLEAN_FILL..0.95).contains(&share),
                        "sufficient at {share} of the wire: {finding}"
                    );
                }
                other => panic!("{other}: {finding}"),
            }
        }
    }
    assert_gone("t-st-mem");
    assert_gone("t-st-1g");
}

/// Seed 004 (docs/studies.md): a TCP stream inside VXLAN over a 1 Gbit/s
/// underlay carries at most 1398 payload bytes per 1514-byte frame at MTU
/// 1500, and 8898 per 9014 with an underlay of MTU 9000: over a clean window
/// the frames are full-size and the payload is that share of the wire (the
/// wire never above the link, whatever the load); each side's CPU, softirq
/// included, is read from its own pinned CPU (the lab splits them).
#[test]
fn study_vxlan_goodput_is_1398_of_1514_of_the_wire_and_mtu_9000_lifts_it() {
    let Some(_g) = lab_lock("study 004") else {
        return;
    };
    let _c = (Cleanup("t-st-vx".into()), Cleanup("t-st-vx9k".into()));
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("tunnel.toml");
    std::fs::write(
        &suite,
        "name = \"study-tunnel\"\nduration = \"1s\"\nwarmup = \"300ms\"\n\
         [[test]]\nworkload = \"str-writex30k\"\nusers = 5\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (code, stdout, err) = lab(&[
        "run",
        "--configs",
        "vxlan,rate=1gbit,name=t-st-vx,vxlan,rate=1gbit,mtu=8950,name=t-st-vx9k",
        "--suite",
        suite.to_str().unwrap(),
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    for (name, payload_bytes, frame_bytes) in
        [("t-st-vx", 1398.0, 1514.0), ("t-st-vx9k", 8898.0, 9014.0)]
    {
        let doc = util::read_doc(&out.join(format!("{name}.json")));
        let (runs, ok) = measured_runs(&doc, "str-writex30k--5");
        let ideal = payload_bytes / frame_bytes;
        for r in &runs {
            let w = &r["wire"]["server_to_client"];
            let wire = w["bits_per_s"].as_f64().unwrap_or_else(|| panic!("{r}"));
            let payload = r["throughput"]["rx_bytes_per_s"].as_f64().unwrap() * 8.0;
            let share = payload / wire;
            eprintln!(
                "{name}: payload {:.3} of wire {:.3} Gbit/s = {share:.4} (ideal {ideal:.4}, {})",
                payload / 1e9,
                wire / 1e9,
                r["status"]
            );
            assert!(wire <= 1e9 * CAP_SLACK, "{name}: {wire}");
            // Over one clean window: full-size frames on the underlay (the
            // queue counts every GSO segment), and the payload the protocol's
            // share of them (a busy host skews the sender's window against
            // the receiver's, and a stalled window's counters say little).
            if r["status"] == "ok" {
                let frame = wire / 8.0 / w["packets_per_s"].as_f64().unwrap();
                assert!(
                    (frame / frame_bytes - 1.0).abs() < 0.01,
                    "{name}: {frame}-byte frames, not {frame_bytes}"
                );
                assert!(
                    (share / ideal - 1.0).abs() < 0.015,
                    "{name}: {share} against {ideal}"
                );
            }
            // Each side's CPU from its own CPU, softirq included. The
            // kernel counts a CPU's time in ticks (10 ms): a receiver that
            // copied 1 Gbit/s for a second may have been caught by none, so
            // each side's figure is there and the two are not both nothing.
            let pinned = &r["pinned"];
            if linkperf_metrics::current_thread_allowed_cpus().len() > 1 {
                let mut busy = 0.0;
                for side in ["client", "server"] {
                    let b = pinned[side]["busy_s"].as_f64().unwrap();
                    assert!(b >= 0.0, "{r}");
                    busy += b;
                    assert!(pinned[side]["per_user"].as_f64().is_some(), "{pinned}");
                }
                assert!(busy > 0.0, "{pinned}");
            }
        }
        // A clean run fills the link up to that ceiling.
        if ok {
            let payload = mean_ok_rate(&doc, "str-writex30k--5", "rx_bytes_per_s") * 8.0;
            assert!(
                payload > 0.9 * ideal * 1e9,
                "{name}: {payload} bit/s of payload on a full 1 Gbit/s link"
            );
        }
    }
    assert_gone("t-st-vx");
    assert_gone("t-st-vx9k");
}

/// The mean of `field` over test `name`'s ok runs: what the lab's tables show.
fn mean_ok_rate(doc: &Value, name: &str, field: &str) -> f64 {
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test {name}"));
    let ok: Vec<f64> = t["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok")
        .map(|r| r["throughput"][field].as_f64().unwrap())
        .collect();
    assert!(!ok.is_empty(), "{name}: no ok run");
    ok.iter().sum::<f64>() / ok.len() as f64
}

mod configs;
mod preflight;
mod run;
