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

// ---------------------------------------------------------------------------
// Every built-in configuration comes up, carries traffic and goes away.
// ---------------------------------------------------------------------------

#[test]
fn loopback_carries_rr_and_stream_and_goes_away() {
    let Some(_g) = lab_lock("loopback") else {
        return;
    };
    carry("loopback", "t-loopback");
}

#[test]
fn bridge_carries_rr_and_stream_and_goes_away() {
    let Some(_g) = lab_lock("bridge") else { return };
    carry("bridge", "t-bridge");
}

#[test]
fn macvlan_carries_rr_and_stream_and_goes_away() {
    let Some(_g) = lab_lock("macvlan") else {
        return;
    };
    carry("macvlan", "t-macvlan");
}

/// veth, veth-10g and veth-1g: the shaped ones stay under their cap and
/// clearly below the unshaped veth.
#[test]
fn shaped_veths_stay_under_their_cap_and_below_the_unshaped_veth() {
    let Some(_g) = lab_lock("shaping") else {
        return;
    };
    let veth = carry("veth", "t-veth");
    let g10 = carry("veth-10g", "t-veth10g");
    let g1 = carry("veth-1g", "t-veth1g");
    eprintln!("stream throughput: veth {veth:.3}, veth-10g {g10:.3}, veth-1g {g1:.3} Gbit/s");
    assert!(
        g1 <= 1.0 * CAP_SLACK,
        "veth-1g carried {g1:.3} Gbit/s, over its cap"
    );
    assert!(g1 > 0.5, "veth-1g carried only {g1:.3} Gbit/s");
    assert!(
        g1 < veth * 0.5,
        "veth-1g ({g1:.3}) is not clearly below veth ({veth:.3})"
    );
    assert!(
        g10 <= 10.0 * CAP_SLACK,
        "veth-10g carried {g10:.3} Gbit/s, over its cap"
    );
    // Clearly below the unshaped veth, where the unshaped veth is fast enough
    // to tell: over 10 Gbit/s by more than the slack.
    if veth > CLEARLY_OVER_10G {
        assert!(
            g10 < veth * CLEARLY_BELOW,
            "veth-10g ({g10:.3}) is not clearly below veth ({veth:.3}): \
             not under {CLEARLY_BELOW} × veth"
        );
    } else {
        eprintln!(
            "shaping: the 10g cap could not be exercised: the unshaped veth reaches only \
             {veth:.3} Gbit/s on this host (not over {CLEARLY_OVER_10G}), so veth-10g was \
             checked against its cap alone, not against veth"
        );
    }
}

/// Link rate of the slow-link test: payload crosses at about 480 kB/s.
const SLOW: &str = "veth,rate=4mbit";
const SLOW_BYTES_PER_S: f64 = 4e6 / 8.0;

/// One user of rr 1 MiB x 1, then of rr 1 x 1 MiB, over a 4 Mbit/s link: each
/// large message takes about 2 s to cross. Each side's worker carries that one
/// flow on a blocking socket, and still comes back to its loop between the
/// parts of a message (a write waits at most 50 ms for room and returns with
/// what went, a read returns with what came). So every whole per-second
/// interval of both sides holds what the link carried in that second, within
/// what the 64 KiB send buffer holds: not a whole 1 MiB write in the second it
/// began and nothing in the next.
#[test]
fn over_a_slow_link_one_users_large_messages_fill_every_interval() {
    let Some(_g) = lab_lock("slow") else { return };
    let up = Up::new(SLOW, "t-slow", 1);
    let p = up.pair(0).clone();
    let serve = Server::start_in(text(&p, "/server_ns"), text(&p, "/server_addr"));
    let options = ["--duration", "4s", "--warmup", "1s", "--sndbuf", "64k"];
    for (workload, writer, reader) in [
        ("rr:1mx1", "client", "server"),
        ("rr:1x1m", "server", "client"),
    ] {
        let doc = run_with(&p, &serve, workload, &options);
        let run = at(&doc, "/tests/0/runs/0");
        for (side, field) in [(writer, "tx_bytes"), (reader, "rx_bytes")] {
            let intervals = run[side]["intervals"].as_array().expect("intervals");
            let whole: Vec<f64> = intervals
                .iter()
                .filter(|i| i["length_s"].as_f64().unwrap_or(0.0) > 0.99)
                .map(|i| i[field].as_f64().unwrap() / i["length_s"].as_f64().unwrap())
                .collect();
            eprintln!("{workload}: {side} {field} per whole second: {whole:?}");
            assert!(
                whole.len() >= 3,
                "{workload}: {side} has {} whole intervals: {intervals:?}",
                whole.len()
            );
            for b in &whole {
                assert!(
                    (0.5 * SLOW_BYTES_PER_S..=1.5 * SLOW_BYTES_PER_S).contains(b),
                    "{workload}: {side}'s {field} per second {whole:?} do not follow the \
                     link's {SLOW_BYTES_PER_S} bytes/s: {intervals:?}"
                );
            }
        }
        // The one user's transactions: about one every 2 s, all counted.
        let tps = num(&doc, "/tests/0/runs/0/throughput/transactions_per_s");
        assert!(
            (0.2..=0.7).contains(&tps),
            "{workload}: {tps} transactions/s"
        );
        assert_eq!(int(&doc, "/tests/0/runs/0/errors"), 0);
    }
    drop(serve);
    up.down();
}

/// The namespace's count of retransmitted TCP segments (its own SNMP counters).
fn retrans_segs(ns: &str) -> u64 {
    let out = sh("ip", &["netns", "exec", ns, "cat", "/proc/net/snmp"]);
    let mut tcp = out.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|n| n == "RetransSegs")
        .expect("RetransSegs in /proc/net/snmp");
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// Requests lost in the warm-up, none in the window: 8 users of rr 1000 x 1
/// through a 1 Gbit/s wire between two hosts' edges (two pairs, so that the
/// shaping sits on a hop of its own: a drop in the sender's own qdisc is no
/// loss to its TCP, which sends the segment again as new). For half a second
/// of the warm-up the wire takes 1 Mbit/s with a queue of one packet, and
/// drops requests; then it is put back, and the retransmits get through
/// seconds before the window opens. The window's TCP_INFO counts only the
/// window's retransmits, so none, while the client namespace's own counter
/// shows the warm-up's (nothing else in an rr test of small messages
/// retransmits).
/// How long the wire stays narrowed in the warm-up: the fault, and its length.
const NARROWED: Duration = Duration::from_millis(500);

#[test]
fn retransmits_of_the_warm_up_are_not_in_the_window() {
    let Some(_g) = lab_lock("retrans") else {
        return;
    };
    let up = Up::new("veth-1g", "t-retrans", 2);
    let p = up.pair(0).clone();
    let (cns, sns) = (text(&p, "/client_ns"), text(&p, "/server_ns"));
    let serve = Server::start_in(sns, text(&p, "/server_addr"));
    let before = retrans_segs(cns);
    let run = Client::spawn_under(
        &["ip", "netns", "exec", cns],
        &[
            "run",
            "--quiet",
            "--server",
            text(&p, "/server_addr"),
            "--workload",
            "rr:1000x1",
            "--users",
            "8",
            "--threads",
            "1",
            "--warmup",
            "4s",
            "--duration",
            "1s",
        ],
    );
    // The wire's client-side end, toward the server.
    let wire = |rate: &str, burst: &str, latency: &str| {
        sh(
            "tc",
            &[
                "-n",
                "lp-t-retrans-cedge",
                "qdisc",
                "change",
                "dev",
                "lp-wc",
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                burst,
                "latency",
                latency,
            ],
        );
    };
    // A second into the 4 s warm-up (its first interval reported), the wire
    // narrows to 1 Mbit/s for half a second: the fault, and its length.
    run.wait_for_interval(Duration::from_secs(30), true);
    wire("1mbit", "1600", "1ms");
    std::thread::sleep(NARROWED);
    wire("1gbit", "131072", "5ms");
    let (status, out, err, doc) = run.finish(util::RUN_DEADLINE);
    let code = status.code().unwrap_or(-1);
    let doc = ok_results(
        (code, out, err, doc),
        "rr 1000x1 with a lossy warm-up",
        &serve,
    );
    let all = retrans_segs(cns) - before;
    let window = int(&doc, "/tests/0/runs/0/client/tcp_info/retransmits");
    eprintln!("retransmits: {all} over the run (the namespace's count), {window} in the window");
    assert!(
        all > 0,
        "the warm-up's drops made no retransmits: the test shows nothing"
    );
    assert_eq!(
        window, 0,
        "the window's TCP_INFO counted the warm-up's retransmits"
    );
    assert_eq!(int(&doc, "/tests/0/runs/0/errors"), 0);
    drop(serve);
    up.down();
}

#[test]
fn the_mtu_option_is_applied_inside_the_namespaces() {
    let Some(_g) = lab_lock("mtu") else { return };
    let up = Up::new("veth,mtu=9000", "t-jumbo", 1);
    for (ns, dev) in [("lp-t-jumbo-s1", "lp-s1"), ("lp-t-jumbo-c1", "lp-c1")] {
        let shown = sh("ip", &["netns", "exec", ns, "ip", "link", "show", dev]);
        assert!(shown.contains(" mtu 9000 "), "{ns}: {shown}");
    }
    let p = up.pair(0).clone();
    let serve = Server::start_in(text(&p, "/server_ns"), text(&p, "/server_addr"));
    let doc = run_through(&p, &serve, "str-writex30k");
    // The client's environment records the route's interface and its MTU.
    let env = at(&doc, "/environment/client");
    assert_eq!(env.get("mtu").and_then(Value::as_u64), Some(9000), "{env}");
    drop(serve);
    up.down();
}

/// Bytes counted on a device inside a namespace.
fn counter(ns: &str, dev: &str, which: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/{which}");
    sh("ip", &["netns", "exec", ns, "cat", &path])
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn vxlan_traffic_crosses_the_tunnel() {
    let Some(_g) = lab_lock("vxlan") else { return };
    let up = Up::new("vxlan", "t-vxlan", 1);
    let p = up.pair(0).clone();
    assert_eq!(text(&p, "/server_addr"), "198.19.1.1");
    assert_eq!(text(&p, "/client_device"), "lp-vx1");
    let (sns, cns) = (text(&p, "/server_ns"), text(&p, "/client_ns"));
    let serve = Server::start_in(sns, "198.19.1.1");
    let before = (
        counter(sns, "lp-vx1", "tx_bytes"),
        counter(cns, "lp-vx1", "rx_bytes"),
    );
    let under = counter(cns, "lp-c1", "rx_bytes");
    let doc = run_through(&p, &serve, "str-writex30k");
    let moved = int(&doc, "/tests/0/runs/0/client/totals/rx_bytes");
    let tx = counter(sns, "lp-vx1", "tx_bytes") - before.0;
    let rx = counter(cns, "lp-vx1", "rx_bytes") - before.1;
    let under = counter(cns, "lp-c1", "rx_bytes") - under;
    eprintln!(
        "vxlan: {moved} payload bytes; lp-vx1 sent {tx}, received {rx}; underlay received {under}"
    );
    assert!(moved > 1_000_000, "{moved}");
    assert!(
        tx >= moved,
        "the server's tunnel device sent {tx} < {moved}"
    );
    assert!(
        rx >= moved,
        "the client's tunnel device received {rx} < {moved}"
    );
    // The underlay carried the tunnel, encapsulation included.
    assert!(under > rx, "underlay {under} <= tunnel {rx}");
    drop(serve);
    up.down();
    // Also carries a request/response test, like every configuration.
    carry("vxlan", "t-vxlan2");
}

/// A custom configuration from a TOML file (`--file`): it comes up with its
/// rate and MTU applied inside the namespaces, carries traffic within its cap,
/// and goes away leaving nothing.
#[test]
fn a_custom_configuration_from_a_file_comes_up_carries_traffic_and_goes_away() {
    let Some(_g) = lab_lock("--file") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab.toml");
    std::fs::write(
        &file,
        "[[config]]\nname = \"t-file\"\nbase = \"veth\"\n\
         description = \"a 2 Gb link with a 4000-byte MTU\"\n\
         mtu = 4000\nrate = \"2gbit\"\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let (code, out, err) = lab(&["list", "--available", "--file", file]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("a 2 Gb link with a 4000-byte MTU"), "{out}");
    let up = Up::with("t-file", &["t-file", "--file", file]);
    assert_eq!(up.record["capacity_bits_per_s"], 2e9);
    for (ns, dev) in [("lp-t-file-s1", "lp-s1"), ("lp-t-file-c1", "lp-c1")] {
        let shown = sh("ip", &["-n", ns, "link", "show", dev]);
        assert!(shown.contains(" mtu 4000 "), "{ns}: {shown}");
        let qdisc = sh("tc", &["-n", ns, "qdisc", "show", "dev", dev]);
        assert!(
            qdisc.contains("qdisc tbf ") && qdisc.contains("rate 2Gbit"),
            "{ns}: {qdisc}"
        );
    }
    let g = carry_through(up, "t-file from lab.toml");
    assert!(
        g <= 2.0 * CAP_SLACK,
        "t-file carried {g:.3} Gbit/s, over its 2 Gbit/s cap"
    );
    assert!(g > 1.0, "t-file carried only {g:.3} Gbit/s");
}

/// Regression: two `lab up` of one name at once could both pass the "already
/// up" check; the loser's clean-up then deleted the winner's namespaces.
#[test]
fn two_lab_ups_of_one_configuration_at_once_one_wins_and_the_other_touches_nothing() {
    let Some(_g) = lab_lock("concurrent up") else {
        return;
    };
    let _c = Cleanup("t-race".into());
    for round in 1..=8 {
        let ups: Vec<Proc> = (0..2)
            .map(|_| util::spawn(&["lab", "up", "veth,name=t-race"]))
            .collect();
        let outs: Vec<_> = ups
            .into_iter()
            .map(|c| c.finish(util::RUN_DEADLINE))
            .collect();
        let all: Vec<String> = outs
            .iter()
            .map(|(status, out, err)| format!("{status}: stdout {out} stderr {err}"))
            .collect();
        let won = outs.iter().filter(|o| o.0.success()).count();
        assert_eq!(won, 1, "round {round}: {all:#?}");
        let (status, _, err) = outs.iter().find(|o| !o.0.success()).unwrap();
        assert_eq!(status.code(), Some(2), "round {round}: {all:#?}");
        assert!(
            err.contains("bring up t-race: it is already up (")
                && err.contains("take it down first with `linkperf lab down t-race`"),
            "round {round}: {err}"
        );
        // The winner's configuration is whole and carries traffic.
        assert_eq!(
            namespaces("lp-t-race-"),
            ["lp-t-race-c1", "lp-t-race-s1"],
            "round {round}: {all:#?}"
        );
        let record = util::read_doc(Path::new("/run/linkperf-lab/t-race.json"));
        assert_eq!(record["owner"]["by"], "up", "{record}");
        let p = record["pairs"][0].clone();
        let serve = Server::start_in(text(&p, "/server_ns"), text(&p, "/server_addr"));
        run_through(&p, &serve, "rr1c-1x1");
        drop(serve);
        let (code, _, err) = lab(&["down", "t-race"]);
        assert_eq!(code, 0, "{err}");
        assert_gone("t-race");
    }
}

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
    let sa = test_rate(&a, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9;
    let sb = test_rate(&b, "str-writex30k--1", "bytes_per_s") * 8.0 / 1e9;
    assert!(
        sb <= CAP_SLACK && sb < sa,
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

// ---------------------------------------------------------------------------
// Preflight: what is missing is said before anything is created.
// ---------------------------------------------------------------------------

#[test]
fn without_iproute2_the_lab_names_what_is_missing_and_creates_nothing() {
    let Some(_g) = lab_lock("no iproute2") else {
        return;
    };
    let _c = Cleanup("t-noip".into());
    let out = Command::new(BIN)
        .args(["lab", "up", "veth,name=t-noip"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("missing the `ip` program") && err.contains("missing the `tc` program"),
        "{err}"
    );
    assert!(err.contains("install iproute2"), "{err}");
    assert!(namespaces("lp-t-noip-").is_empty());
}

#[test]
fn without_privileges_the_lab_names_the_capabilities_and_creates_nothing() {
    let Some(_g) = lab_lock("unprivileged") else {
        return;
    };
    let _c = Cleanup("t-nopriv".into());
    if !has_setpriv() {
        skip("unprivileged", "setpriv (util-linux)");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args(["lab", "up", "veth,name=t-nopriv"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing CAP_NET_ADMIN: run as root"), "{err}");
    assert!(err.contains("missing CAP_SYS_ADMIN"), "{err}");
    assert!(namespaces("lp-t-nopriv-").is_empty());
    // Dry runs need nothing: they only print the commands.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args(["lab", "up", "veth-1g", "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("tbf rate 1gbit"));
}

fn has_setpriv() -> bool {
    Command::new("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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

/// Seeds 000 and 002 (docs/studies.md): the in-memory path against a 1 Gbit/s
/// link, for the large transactions at 50 users and the interconnect mix at 40.
/// The wire, read from the shaped interface (headers included), never carries
/// more than the link and never less than the payload; and a run the host let
/// run cleanly fills it, so the report answers "not sufficient".
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
        "--repeat",
        "1",
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
            assert_eq!(
                notes[0]["finding"]["answer"], "not_sufficient",
                "{}",
                notes[0]
            );
            let text = notes[0]["text"].as_str().unwrap();
            assert!(
                text.starts_with("t-st-1g is not sufficient for ") && text.contains("of the wire"),
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
            // Each side's CPU from its own CPU, softirq included.
            let pinned = &r["pinned"];
            if linkperf_metrics::current_thread_allowed_cpus().len() > 1 {
                for side in ["client", "server"] {
                    assert!(pinned[side]["busy_s"].as_f64().unwrap() > 0.0, "{r}");
                    assert!(pinned[side]["per_user"].as_f64().is_some(), "{pinned}");
                }
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
