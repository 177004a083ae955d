//! UDP end to end: request/response, paced streams, and the mixed sizes of
//! the interconnect workload.

use super::*;

// ---------------------------------------------------------------------------
// 12. UDP.
// ---------------------------------------------------------------------------

#[test]
fn udp_with_several_users_loses_nothing_on_loopback() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "rr1c-1x1", "udp", 8, &["--udp-timeout", "1s"]);
    check_run(&doc, "rr1c-1x1--8--udp", "udp", "round_trip", 8);
    check_accounting(&doc);
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(int(r, "/errors"), 0, "{r}");
    for side in ["client", "server"] {
        assert_eq!(int(r, &format!("/{side}/errors")), 0);
        assert!(at(r, &format!("/{side}/error_samples"))
            .as_array()
            .unwrap()
            .is_empty());
    }
    assert_eq!(num(&doc, "/tests/0/config/udp_timeout_s"), 1.0);
}

// ---------------------------------------------------------------------------
// UDP streams.
// ---------------------------------------------------------------------------

/// A stream at a pace the path carries loses nothing, whichever way it runs:
/// every datagram the receivers expected arrived, in order, once, and the
/// throughput is the pace asked.
#[test]
fn a_udp_stream_at_a_pace_the_path_carries_loses_nothing() {
    let _g = shared();
    let server = Server::start(&[]);
    for (workload, name, direction, dirs) in [
        (
            "stream-up:1400",
            "str-readx1400@5m--2--udp",
            "client_to_server",
            &["client_to_server"][..],
        ),
        (
            "stream-down:1k",
            "str-writex1k@5m--2--udp",
            "server_to_client",
            &["server_to_client"][..],
        ),
        (
            "stream-bidir:200",
            "str-bidirx200@5m--2--udp",
            "bidirectional",
            &["client_to_server", "server_to_client"][..],
        ),
    ] {
        let doc = load(
            &server,
            workload,
            "udp",
            2,
            &["--rate", "5m", "--duration", "2s"],
        );
        check_run(&doc, name, "udp", direction, 2);
        assert_eq!(num(&doc, "/tests/0/config/rate_bits_per_s"), 5e6);
        assert_eq!(int(&doc, "/tests/0/spec/rate"), 5_000_000);
        assert_eq!(
            text(&doc, "/tests/0/workload/name"),
            name.split("--").next().unwrap()
        );
        let r = at(&doc, "/tests/0/runs/0");
        assert_eq!(num(r, "/udp/rate_bits_per_s"), 5e6);
        assert_eq!(num(r, "/udp/loss_rate"), 0.0, "{name}: {}", r["udp"]);
        for dir in dirs {
            let d = udp_direction(r, dir);
            assert_eq!(int(d, "/lost"), 0, "{name} {dir}: {d}");
            assert_eq!(int(d, "/duplicates"), 0);
            assert_eq!(int(d, "/out_of_order"), 0, "loopback keeps the order");
            let jitter = num(d, "/jitter_us");
            assert!(
                (0.0..1e5).contains(&jitter),
                "{name} {dir}: jitter {jitter} µs"
            );
            // Never faster than asked; a busy host may hold a sender back,
            // and then the run says so.
            let sent = num(d, "/sent_bits_per_s");
            assert!(
                sent <= 5e6 * 1.02,
                "{name} {dir}: sent {sent} bit/s per user"
            );
            if sent < 5e6 * 0.98 {
                assert_eq!(at(d, "/kept_pace"), false, "{name} {dir}: {d}");
            }
            // What arrived is the throughput: nothing lost, about 2 × 5 Mbit/s
            // each way (what the senders sent).
            let key = if *dir == "client_to_server" {
                "tx"
            } else {
                "rx"
            };
            let received = num(r, &format!("/throughput/{key}_bytes_per_s")) * 8.0;
            assert!(
                (received - 2.0 * sent).abs() <= 0.02 * 2.0 * sent,
                "{name} {dir}: received {received} bit/s, sent 2 × {sent}"
            );
        }
        // Every second's loss and jitter, from the receivers' seconds.
        for i in at(r, "/intervals").as_array().unwrap() {
            assert_eq!(num(i, "/loss_rate"), 0.0, "{i}");
            assert!(i.get("jitter_us").is_some(), "{i}");
        }
        // Each datagram is a message.
        assert!(num(r, "/throughput/transactions_per_s") > 0.0);
        assert_eq!(text(r, "/flows/measure"), "received_bytes");
        assert_eq!(int(r, "/flows/no_progress"), 0);
    }
}

/// Many users at once: every flow registers, sends at its pace and is
/// counted by the server, each in its own slot.
#[test]
fn many_udp_stream_users_at_once() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "stream-up:200",
        "udp",
        200,
        &[
            "--rate",
            "100k",
            "--duration",
            "2s",
            "--server-threads",
            "2",
        ],
    );
    check_run(
        &doc,
        "str-readx200@100k--200--udp",
        "udp",
        "client_to_server",
        200,
    );
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(int(r, "/server/connections"), 200, "one per flow");
    assert_eq!(int(r, "/flows/flows"), 200);
    assert_eq!(int(r, "/flows/no_progress"), 0, "{}", r["flows"]);
    let d = udp_direction(r, "client_to_server");
    // 200 × 100 kbit/s = 20 Mbit/s in all, over one loopback host.
    let lost = num(d, "/loss_rate");
    assert!(lost < 0.01, "{lost} of the datagrams lost: {d}");
    let total = num(r, "/throughput/tx_bytes_per_s") * 8.0;
    let sent = num(d, "/sent_bits_per_s") * 200.0;
    assert!(
        total <= sent * 1.02 && total >= sent * 0.98 * (1.0 - lost),
        "{total} bit/s arrived of {sent} sent"
    );
}

/// `--rate` says what it paces: refused for anything but a UDP stream, and
/// a rate that is no rate is a usage error.
#[test]
fn a_rate_is_for_udp_streams_and_says_how_to_write_it() {
    for (args, says) in [
        (
            &["--protocol", "tcp", "-w", "stream-up:1k", "--rate", "10m"][..],
            "--rate paces UDP streams",
        ),
        (
            &["--protocol", "udp", "-w", "rr1c-1x1", "--rate", "10m"][..],
            "--rate paces UDP streams",
        ),
        (
            &["--protocol", "udp", "-w", "stream-up:1k", "--rate", "fast"][..],
            "100m is 100,000,000 bit/s",
        ),
        (
            &["--protocol", "udp", "-w", "stream-up:64k", "--rate", "1m"][..],
            "UDP message must be between 1 and 65483",
        ),
    ] {
        let mut all = vec!["run", "--duration", "1"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&all);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------------------
// Mixed request/response sizes (the interconnect workload).
// ---------------------------------------------------------------------------

fn mix_end_to_end(protocol: &str) {
    let _g = shared();
    let server = Server::start(&[]);
    let extra: &[&str] = if protocol == "udp" {
        &["--udp-timeout", "1s"]
    } else {
        &[]
    };
    let doc = load(&server, "mix:200x200*1,200x8k*3", protocol, 8, extra);
    assert_eq!(text(&doc, "/tests/0/workload/kind"), "mix");
    let r = at(&doc, "/tests/0/runs/0");
    assert_measured(r, "mix");
    let (c, s) = (at(r, "/client/totals"), at(r, "/server/totals"));
    // Both ends draw the same sizes for every transaction: what one sent, the other received.
    assert_close(
        "mix request bytes",
        int(c, "/tx_bytes"),
        int(s, "/rx_bytes"),
        8 * 200,
    );
    assert_close(
        "mix response bytes",
        int(s, "/tx_bytes"),
        int(c, "/rx_bytes"),
        8 * 8192,
    );
    // One lock message (200 B) for three block transfers (8 KiB): 6,194 B per response on average.
    let txn = int(c, "/transactions") as f64;
    let mean_response = int(c, "/rx_bytes") as f64 / txn;
    assert!(
        (mean_response - 6194.0).abs() / 6194.0 < 0.05,
        "mean response {mean_response} bytes over {txn} transactions"
    );
    assert_eq!(int(c, "/tx_bytes"), 200 * int(c, "/transactions"));
}

#[test]
fn mix_over_tcp() {
    mix_end_to_end("tcp");
}

#[test]
fn mix_over_udp() {
    mix_end_to_end("udp");
}
