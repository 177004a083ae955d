//! Every built-in configuration comes up, carries traffic and goes away;
//! shaping, a slow link, retransmits, the MTU, VXLAN, a custom configuration
//! from a file, and two bring-ups of one configuration at once.

use super::*;

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
