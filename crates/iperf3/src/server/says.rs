//! What the server says about a test: its results message, the text a
//! `--get-server-output` client prints, and its log lines.

use std::fmt::Write as _;
use std::net::SocketAddr;

use serde_json::Map;

use crate::codec::{StreamResults, TestMode, TestResults, Transport};
use crate::server::data::DataOutcome;
use crate::server::plan::TestPlan;

/// The server's results message.
pub(crate) fn results(plan: &TestPlan, out: &DataOutcome, output: Option<String>) -> TestResults {
    let wall = out.wall_s.max(1e-9);
    let pct = |s: f64| 100.0 * s / wall;
    let tcp = plan.transport == Transport::Tcp;
    let sender_has_retransmits = match (plan.mode, tcp) {
        (TestMode::Normal, _) => -1,
        (_, true) => 1,
        (_, false) => 0,
    };
    TestResults {
        cpu_util_total: pct(out.cpu.total_s()),
        cpu_util_user: pct(out.cpu.user_s),
        cpu_util_system: pct(out.cpu.system_s),
        sender_has_retransmits,
        congestion_used: out.congestion.clone(),
        server_output_text: output,
        server_output_json: None,
        streams: out
            .records
            .iter()
            .map(|r| StreamResults {
                id: i64::from(r.id),
                bytes: r.tally.counted(),
                retransmits: r.retransmits.map_or(-1, i64::from),
                jitter: if r.sends { 0.0 } else { r.tally.jitter_s() },
                errors: if r.sends { 0 } else { r.tally.lost() },
                // iperf3 3.14 and later subtract these from the two above;
                // a server that leaves them out has a 3.14+ client read its
                // loss as 0. iperf3's server sends them for every stream.
                omitted_errors: Some(if r.sends { 0 } else { r.tally.omitted().lost }),
                packets: r.tally.packets() as i64,
                omitted_packets: Some(r.tally.omitted().packets as i64),
                start_time: Some(0.0),
                end_time: Some(out.seconds),
                extra: Map::new(),
            })
            .collect(),
        extra: Map::new(),
    }
}

/// Bytes as iperf3 prints them ('A' format: powers of 1024).
fn bytes(n: u64) -> String {
    let n = n as f64;
    let k = 1024.0;
    if n >= k * k * k {
        format!("{:.2} GBytes", n / (k * k * k))
    } else if n >= k * k {
        format!("{:.1} MBytes", n / (k * k))
    } else if n >= k {
        format!("{:.1} KBytes", n / k)
    } else {
        format!("{n:.0} Bytes")
    }
}

/// A rate as iperf3 prints it (powers of 1000).
fn rate(bytes: u64, secs: f64) -> String {
    let bits = if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    };
    if bits >= 1e9 {
        format!("{:.2} Gbits/sec", bits / 1e9)
    } else if bits >= 1e6 {
        format!("{:.1} Mbits/sec", bits / 1e6)
    } else {
        format!("{:.1} Kbits/sec", bits / 1e3)
    }
}

/// The text a `--get-server-output` client prints, in iperf3's layout.
pub(crate) fn server_output(
    plan: &TestPlan,
    out: &DataOutcome,
    control_peer: SocketAddr,
    streams: &[(u32, SocketAddr, SocketAddr)],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Accepted connection from {}, port {}",
        control_peer.ip(),
        control_peer.port()
    );
    for (id, local, peer) in streams {
        let _ = writeln!(
            s,
            "[{id:>3}] local {} port {} connected to {} port {}",
            local.ip(),
            local.port(),
            peer.ip(),
            peer.port()
        );
    }
    let _ = writeln!(s, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    let udp = plan.transport == Transport::Udp;
    if udp {
        let _ = writeln!(
            s,
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
        );
    } else {
        let _ = writeln!(s, "[ ID] Interval           Transfer     Bitrate");
    }
    let secs = out.seconds;
    let (mut sent, mut received) = (0u64, 0u64);
    for r in &out.records {
        let role = if r.sends { "sender" } else { "receiver" };
        if r.sends {
            sent += r.tally.counted();
        } else {
            received += r.tally.counted();
        }
        if udp && !r.sends {
            // After the omitted seconds, as iperf3's server prints it.
            let (lost, packets) = (r.tally.lost_counted(), r.tally.packets_counted());
            let pct = if packets > 0 {
                100.0 * lost as f64 / packets as f64
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "[{:>3}]   0.00-{secs:<5.2}  sec  {}  {}  {:.3} ms  {lost}/{packets} ({pct:.2}%)  {role}",
                r.id,
                bytes(r.tally.counted()),
                rate(r.tally.counted(), secs),
                r.tally.jitter_s() * 1000.0,
            );
        } else {
            let _ = writeln!(
                s,
                "[{:>3}]   0.00-{secs:<5.2}  sec  {}  {}                  {role}",
                r.id,
                bytes(r.tally.counted()),
                rate(r.tally.counted(), secs)
            );
        }
    }
    if out.records.len() > 1 {
        for (total, role) in [(sent, "sender"), (received, "receiver")] {
            if total > 0 || (role == "receiver") == (plan.mode != TestMode::Reverse) {
                let _ = writeln!(
                    s,
                    "[SUM]   0.00-{secs:<5.2}  sec  {}  {}                  {role}",
                    bytes(total),
                    rate(total, secs)
                );
            }
        }
    }
    let _ = writeln!(s, "(linkperf's iperf3-compatible server)");
    s
}

/// One line of the test's shape, for the log.
pub(crate) fn describe(plan: &TestPlan, client_version: Option<&str>) -> String {
    let mut s = format!(
        "{}, {} stream{}",
        match plan.transport {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Sctp => "sctp",
        },
        plan.parallel,
        if plan.parallel == 1 { "" } else { "s" }
    );
    match plan.mode {
        TestMode::Normal => {}
        TestMode::Reverse => s.push_str(", reverse"),
        TestMode::Bidirectional => s.push_str(", bidirectional"),
    }
    match (plan.time, plan.bytes, plan.blocks) {
        (Some(t), _, _) => {
            let _ = write!(s, ", {} s", t.as_secs());
        }
        (None, Some(b), _) => {
            let _ = write!(s, ", {b} bytes");
        }
        (None, None, Some(k)) => {
            let _ = write!(s, ", {k} blocks");
        }
        _ => {}
    }
    let _ = write!(s, ", {} byte blocks", plan.blksize);
    if let Some(r) = plan.rate {
        let _ = write!(s, ", {r} bit/s per stream");
    }
    if !plan.omit.is_zero() {
        let _ = write!(s, ", omit {} s", plan.omit.as_secs());
    }
    if let Some(w) = plan.window {
        let _ = write!(s, ", window {w}");
    }
    if let Some(m) = plan.mss {
        let _ = write!(s, ", mss {m}");
    }
    if plan.nodelay {
        s.push_str(", nodelay");
    }
    if let Some(c) = &plan.congestion {
        let _ = write!(s, ", congestion {c}");
    }
    if let Some(v) = client_version {
        let _ = write!(s, " (iperf3 {v})");
    }
    for i in &plan.ignored {
        let _ = write!(s, "; ignored: {i}");
    }
    s
}

/// The closing log line: what the server counted over its whole test, and
/// what the client reported.
pub(crate) fn summary(out: &DataOutcome, theirs: Option<&TestResults>) -> String {
    // Every stream's, over its whole life.
    let (received, sent) = (out.counters.totals.rx_bytes, out.counters.totals.tx_bytes);
    let bits = (received + sent) as f64 * 8.0 / out.wall_s.max(1e-9);
    let mut s = format!(
        "done in {:.3} s: received {received} bytes, sent {sent} bytes ({:.3} Gbit/s)",
        out.wall_s,
        bits / 1e9
    );
    if let Some(t) = theirs {
        let _ = write!(s, "; the client reported {} bytes", t.total_bytes());
    }
    for e in &out.errors {
        let _ = write!(s, "; {e}");
    }
    s
}
