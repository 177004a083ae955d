//! The results document: its names, where the workers ran, and the socket
//! options both sides applied.

use super::*;

// ---------------------------------------------------------------------------
// 10. The results document's names.
// ---------------------------------------------------------------------------

fn has_keys(v: &Value, ptr: &str, keys: &[&str]) {
    let o = at(v, ptr);
    assert!(o.is_object(), "{ptr} is not an object: {o}");
    for k in keys {
        assert!(o.get(k).is_some(), "{ptr} has no {k}: {o}");
    }
}

#[test]
fn results_document_uses_the_issue_names() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-200x1000",
        "tcp",
        2,
        &["--label", "e2e-names"],
    );
    has_keys(&doc, "", &["schema", "label", "environment", "tests"]);
    assert_eq!(text(&doc, "/label"), "e2e-names");
    let t = at(&doc, "/tests/0");
    assert_eq!(text(t, "/name"), "rr1c-200x1000--2");
    has_keys(
        t,
        "/workload",
        &[
            "kind",
            "request_bytes",
            "response_bytes",
            "message_bytes",
            "direction",
            "protocol",
            "users",
            "duration_s",
            "warmup_s",
        ],
    );
    assert_eq!(text(t, "/workload/kind"), "rr");
    assert_eq!(int(t, "/workload/request_bytes"), 200);
    assert_eq!(int(t, "/workload/response_bytes"), 1000);
    assert!(at(t, "/workload/message_bytes").is_null());
    assert_eq!(num(t, "/workload/duration_s"), 0.5);
    assert_eq!(num(t, "/workload/warmup_s"), 0.2);
    let r = at(t, "/runs/0");
    has_keys(
        r,
        "/throughput",
        &[
            "bytes_per_s",
            "tx_bytes_per_s",
            "rx_bytes_per_s",
            "transactions_per_s",
        ],
    );
    has_keys(
        r,
        "/transaction_time_us",
        &["mean", "p50", "p90", "p99", "p999", "max"],
    );
    for side in ["client", "server"] {
        has_keys(
            r,
            &format!("/cpu/{side}"),
            &["process_s", "system_busy_s", "softirq_s"],
        );
    }
    has_keys(
        r,
        "/efficiency",
        &[
            "client_bytes_per_cpu_s",
            "server_bytes_per_cpu_s",
            "client_cpu_us_per_txn",
            "server_cpu_us_per_txn",
        ],
    );
    assert!(at(r, "/intervals").is_array());
    assert!(at(r, "/errors").is_u64());
    // The process figures derive from the payload as received.
    let payload = (int(r, "/payload/client_to_server/received")
        + int(r, "/payload/server_to_client/received")) as f64;
    let cpu = num(r, "/cpu/client/process_s");
    let txn = int(r, "/client/transactions") as f64;
    if cpu > 0.0 {
        let rel = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
        assert!(rel(
            num(r, "/efficiency/client_bytes_per_cpu_s"),
            payload / cpu
        ));
        assert!(rel(
            num(r, "/efficiency/client_cpu_us_per_txn"),
            cpu * 1e6 / txn
        ));
    }

    // Both hosts, each as it described itself.
    for side in ["client", "server"] {
        let e = at(&doc, &format!("/environment/{side}"));
        for f in ["/hostname", "/kernel", "/cpu_model"] {
            assert!(!text(e, f).is_empty(), "environment.{side}{f} is empty");
        }
        assert!(int(e, "/cpu_count") >= 1);
        assert_eq!(text(e, "/interface"), "lo");
        assert!(int(e, "/mtu") > 0);
        assert_eq!(text(e, "/linkperf_version"), env!("CARGO_PKG_VERSION"));
    }
    let env = at(&doc, "/environment/client");
    let senv = at(&doc, "/environment/server");
    let cmd: Vec<&str> = at(env, "/command_line")
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        cmd.contains(&"run") && cmd.contains(&"e2e-names"),
        "{cmd:?}"
    );
    for e in [env, senv] {
        assert!(!text(e, "/socket_congestion_control").is_empty());
        assert!(int(e, "/socket_sndbuf") > 0 && int(e, "/socket_rcvbuf") > 0);
        assert_eq!(at(e, "/socket_nodelay"), true, "rr turns TCP_NODELAY on");
    }
    assert!(
        at(&doc, "/environment/server/command_line")
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "serve"),
        "the server describes itself"
    );

    // Placement: every worker described, every user carried, nothing pinned.
    for side in ["client", "server"] {
        let workers = at(r, &format!("/{side}/workers")).as_array().unwrap();
        assert!(!workers.is_empty(), "{side} has no workers");
        let mut flows = 0;
        for (i, w) in workers.iter().enumerate() {
            has_keys(
                w,
                "",
                &["worker", "pinned", "allowed_cpus", "last_cpu", "flows"],
            );
            assert_eq!(int(w, "/worker"), i as u64);
            assert!(at(w, "/pinned").is_null(), "{w}");
            assert!(!at(w, "/allowed_cpus").as_array().unwrap().is_empty());
            flows += int(w, "/flows");
        }
        assert_eq!(flows, 2, "{side} workers carry both users");
        assert_eq!(at(r, &format!("/{side}/busy_poll")), false);
    }
}

/// TCP_NODELAY as each side reads it back from its data sockets: on by
/// default for request/response, off for streams, and as `--nodelay` says.
#[test]
fn nodelay_is_applied_on_both_sides_as_asked() {
    let _g = shared();
    let server = Server::start(&[]);
    for (workload, extra, want) in [
        ("rr1c-1x1", &[][..], true),
        ("rr1c-1x1", &["--nodelay=false"][..], false),
        ("str-readx30k", &[][..], false),
        ("str-readx30k", &["--nodelay"][..], true),
    ] {
        let doc = load(&server, workload, "tcp", 1, extra);
        assert_eq!(
            at(&doc, "/tests/0/config/nodelay"),
            want,
            "{workload} {extra:?}"
        );
        for side in ["client", "server"] {
            assert_eq!(
                at(&doc, &format!("/environment/{side}/socket_nodelay")),
                want,
                "{workload} {extra:?}: the {side}'s sockets"
            );
        }
    }
}

#[test]
fn a_server_elsewhere_runs_one_worker_per_cpu_of_its_own_host() {
    let _g = shared();
    // The server's process may use CPU 0 only; the client, every CPU here.
    let server = Server::start_under(&["taskset", "-c", "0"], &[]);
    let doc = load(&server, "rr1c-1x1", "tcp", 4, &[]);
    check_run(&doc, "rr1c-1x1--4", "tcp", "round_trip", 4);
    let r = at(&doc, "/tests/0/runs/0");
    let workers = |side: &str| at(r, &format!("/{side}/workers")).as_array().unwrap().len();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        workers("server"),
        1,
        "the server counts the CPUs it may use itself"
    );
    assert_eq!(workers("client"), cpus.min(4), "the client counts its own");
    // What was asked for: the server's default.
    assert_eq!(int(&doc, "/tests/0/config/server_placement/threads"), 0);
    assert_eq!(
        int(&doc, "/tests/0/config/client_placement/threads"),
        cpus as u64
    );
}

#[test]
fn affinity_pins_every_worker_on_both_sides() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        3,
        &[
            "--threads",
            "2",
            "--server-threads",
            "2",
            "--affinity",
            "0",
            "--server-affinity",
            "0",
        ],
    );
    check_run(&doc, "rr1c-1x1--3", "tcp", "round_trip", 3);
    let r = at(&doc, "/tests/0/runs/0");
    for side in ["client", "server"] {
        let workers = at(r, &format!("/{side}/workers")).as_array().unwrap();
        assert_eq!(workers.len(), 2, "{side}: {workers:?}");
        for w in workers {
            assert_eq!(at(w, "/pinned"), &serde_json::json!([0]), "{side}: {w}");
            assert_eq!(
                at(w, "/allowed_cpus"),
                &serde_json::json!([0]),
                "{side}: {w}"
            );
        }
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/affinity")),
            &serde_json::json!([0])
        );
    }
}

/// `--placement split`: the client's workers on the first half of the
/// host's CPUs, the server's on the second half, each side settling it on
/// its own host (here a separate server process on the same one); `same`:
/// both sides' worker i on the i-th CPU.
#[test]
fn placement_split_halves_the_host_and_same_shares_it() {
    let _g = shared();
    let allowed = linkperf_metrics::current_thread_allowed_cpus();
    let half = (allowed.len() / 2).max(1);
    let (first, second) = (&allowed[..half], &allowed[allowed.len() - half..]);
    let server = Server::start(&[]);
    let pinned = |doc: &Value, side: &str| -> Vec<u64> {
        at(doc, &format!("/tests/0/runs/0/{side}/workers"))
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| at(w, "/pinned").as_array().unwrap().clone())
            .map(|c| c.as_u64().unwrap())
            .collect()
    };
    let as_u64 = |cpus: &[usize]| cpus.iter().map(|&c| c as u64).collect::<Vec<_>>();
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        2,
        &[
            "--placement",
            "split",
            "--threads",
            "2",
            "--server-threads",
            "2",
        ],
    );
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
    // Worker i on the i-th CPU of its side's half, round-robin.
    let expect = |cpus: &[usize]| vec![cpus[0] as u64, cpus[1 % cpus.len()] as u64];
    assert_eq!(pinned(&doc, "client"), expect(first));
    assert_eq!(pinned(&doc, "server"), expect(second));
    // The client settled its own; the server, elsewhere, its own.
    assert_eq!(
        at(&doc, "/tests/0/config/client_placement/affinity"),
        &serde_json::json!(as_u64(first))
    );
    assert_eq!(
        at(&doc, "/tests/0/config/server_placement/affinity"),
        &Value::Null
    );
    for side in ["client", "server"] {
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/policy")),
            "split"
        );
    }
    // Each side's CPU time is read from the CPUs it was pinned to.
    let cpus_of = |side: &str| -> Vec<u64> {
        at(&doc, &format!("/tests/0/runs/0/{side}/pinned_cpus"))
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["cpu"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(cpus_of("client"), {
        let mut v = expect(first);
        v.dedup();
        v
    });
    assert_eq!(cpus_of("server"), {
        let mut v = expect(second);
        v.dedup();
        v
    });
    // Pinned apart, each side is given its CPUs' time, softirq included.
    if allowed.len() > 1 {
        let pinned = at(&doc, "/tests/0/runs/0/pinned");
        assert_eq!(pinned["client"]["cpus"][0], first[0] as u64, "{pinned}");
        assert_eq!(pinned["server"]["cpus"][0], second[0] as u64, "{pinned}");
        for side in ["client", "server"] {
            let busy = pinned[side]["busy_s"].as_f64().unwrap();
            assert!(busy > 0.0 && busy >= pinned[side]["softirq_s"].as_f64().unwrap());
            let per_txn = num(
                &doc,
                &format!("/tests/0/runs/0/efficiency/{side}_pinned_cpu_us_per_txn"),
            );
            assert!(per_txn > 0.0, "{side}: {per_txn}");
        }
    }
    // An explicit list wins over the policy.
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        1,
        &[
            "--placement",
            "split",
            "--threads",
            "1",
            "--server-threads",
            "1",
            "--server-affinity",
            &allowed[0].to_string(),
        ],
    );
    assert_eq!(pinned(&doc, "server"), vec![allowed[0] as u64]);
    assert_eq!(pinned(&doc, "client"), vec![first[0] as u64]);
    // `same`: worker i of both sides on the i-th CPU of the host.
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        1,
        &[
            "--placement",
            "same",
            "--threads",
            "1",
            "--server-threads",
            "1",
        ],
    );
    assert_eq!(pinned(&doc, "client"), vec![allowed[0] as u64]);
    assert_eq!(pinned(&doc, "server"), vec![allowed[0] as u64]);
}

#[test]
fn busy_poll_is_recorded_on_both_sides() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        2,
        &["--busy-poll", "--threads", "1", "--server-threads", "1"],
    );
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
    for side in ["client", "server"] {
        assert_eq!(at(&doc, &format!("/tests/0/runs/0/{side}/busy_poll")), true);
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/busy_poll")),
            true
        );
    }
}

// ---------------------------------------------------------------------------
// 11. Socket options.
// ---------------------------------------------------------------------------

#[test]
fn socket_buffers_are_applied() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-200x1000",
        "tcp",
        2,
        &["--sndbuf", "256k", "--rcvbuf", "256k"],
    );
    check_run(&doc, "rr1c-200x1000--2", "tcp", "round_trip", 2);
    assert_eq!(int(&doc, "/tests/0/config/sndbuf"), 256 * 1024);
    assert_eq!(int(&doc, "/tests/0/config/rcvbuf"), 256 * 1024);
    // The kernel doubles what is asked for.
    for side in ["client", "server"] {
        for f in ["socket_sndbuf", "socket_rcvbuf"] {
            let got = int(&doc, &format!("/environment/{side}/{f}"));
            assert!(got >= 256 * 1024, "environment.{side}.{f} = {got}");
        }
    }
}

#[test]
fn congestion_control_is_applied() {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "reno") {
        eprintln!("skipped: reno is not available ({available:?})");
        return;
    }
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "stream-up:16k", "tcp", 2, &["--cc", "reno"]);
    check_run(&doc, "str-readx16k--2", "tcp", "client_to_server", 2);
    assert_eq!(text(&doc, "/tests/0/config/cc"), "reno");
    for side in ["client", "server"] {
        assert_eq!(
            text(
                &doc,
                &format!("/environment/{side}/socket_congestion_control")
            ),
            "reno"
        );
    }
}

#[test]
fn mss_is_applied() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "stream-up:16k", "tcp", 2, &["--mss", "1000"]);
    check_run(&doc, "str-readx16k--2", "tcp", "client_to_server", 2);
    check_accounting(&doc);
    assert_eq!(int(&doc, "/tests/0/config/mss"), 1000);
    let mss = num(&doc, "/tests/0/runs/0/tcp_info/snd_mss_mean");
    assert!(mss > 0.0 && mss <= 1000.0, "send MSS {mss} with --mss 1000");
}

/// Regression (issue 32): a 2-user download showed "0 retransmits over 1
/// flow". The run's TCP_INFO was the client's alone (a download's
/// retransmits are the server's, its sender's), and a client flow that
/// closed before its window did (the server's sender stops on its own
/// clock) was read by no one. Every flow's socket is read on both ends.
#[test]
fn tcp_info_is_read_from_every_flows_sockets_on_both_ends() {
    let _g = shared();
    let server = Server::start(&[]);
    for _ in 0..3 {
        let doc = load(&server, "stream-down:30k", "tcp", 2, &[]);
        let r = util::first_run(&doc);
        assert_eq!(int(r, "/client/tcp_info/flows"), 2, "client: {r}");
        assert_eq!(int(r, "/server/tcp_info/flows"), 2, "server: {r}");
        assert_eq!(int(r, "/tcp_info/flows"), 2, "run: {r}");
        assert_eq!(
            int(r, "/tcp_info/retransmits"),
            int(r, "/client/tcp_info/retransmits") + int(r, "/server/tcp_info/retransmits"),
            "the run's retransmits are both ends': {r}"
        );
    }
}
