//! The human-readable summary of a run, for the terminal.

use std::fmt::Write as _;

use linkperf_results::{Run, TestResult};

use linkperf_report::units::{rate, Scale, Unit};

/// `v` in `unit`, or `n/a`.
fn opt(unit: Unit, v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| unit.format(v))
}

/// The unit of the figures of `values` that were measured.
fn unit_of(scale: Scale, values: &[Option<f64>]) -> Unit {
    scale.unit_for(values.iter().flatten().copied())
}

/// `1 user`, `2 users`: a count and its noun.
pub fn count(n: u64, noun: &str) -> String {
    linkperf_report::units::count(n, noun)
}

/// A test's window and warm-up for people: `10 s + 1 s warm-up`, `1 s, no warm-up`.
pub fn window_words(window: std::time::Duration, warmup: std::time::Duration) -> String {
    if warmup.is_zero() {
        format!("{}, no warm-up", seconds(window.as_secs_f64()))
    } else {
        format!(
            "{} + {} warm-up",
            seconds(window.as_secs_f64()),
            seconds(warmup.as_secs_f64())
        )
    }
}

/// A duration in seconds for people: `500 ms`, `1 s`, `2.5 s`, `1 min 30 s`.
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 60.0 {
        let t = format!("{s:.1}");
        format!("{} s", t.trim_end_matches(".0"))
    } else {
        let m = (s / 60.0).floor();
        let rest = s - m * 60.0;
        if rest < 0.05 {
            format!("{m:.0} min")
        } else {
            format!("{m:.0} min {:.0} s", rest)
        }
    }
}

/// `part` as a percentage of `whole`.
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole * 100.0
    } else {
        0.0
    }
}

/// The name a value has in the results document.
fn wire_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(String::from))
        .unwrap_or_default()
}

/// Renders one test's run.
pub fn render_run(test: &TestResult, run: &Run) -> String {
    let mut s = String::new();
    let w = &test.workload;
    let warmup = if w.warmup_s > 0.0 {
        format!(" after {} warm-up", seconds(w.warmup_s))
    } else {
        ", no warm-up".to_string()
    };
    // An interrupted run measured less than it was to.
    let window = run
        .client
        .as_ref()
        .map_or(w.duration_s, |c| c.window_s.min(w.duration_s));
    let _ = writeln!(
        s,
        "{}  ({}, {}, {}, {} window{warmup})  [{}]",
        test.name,
        w.protocol,
        w.direction,
        count(u64::from(w.users), "user"),
        seconds(window),
        wire_name(&run.status)
    );
    if let Some(e) = &run.error {
        let _ = writeln!(s, "  error          {e}");
    }
    // Why a run that measured is not to be believed, one check a line.
    if run.status == linkperf_results::RunStatus::Suspect {
        for r in &run.status_reasons {
            let _ = writeln!(s, "  SUSPECT        {r}");
        }
    }
    throughput_lines(&mut s, w, run);
    in_flight_lines(&mut s, run);
    flow_and_loss_lines(&mut s, run);
    udp_lines(&mut s, run);
    parts_line(&mut s, run);
    if let Some(l) = &run.transaction_time_us {
        let t = Scale::TIME_US.all(&[l.mean, l.p50, l.p90, l.p99, l.p999, l.max]);
        let _ = writeln!(
            s,
            "  transaction    mean {}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {}  ({})",
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[5],
            count(l.count, "transaction")
        );
    }
    open_loop_lines(&mut s, run);
    cpu_lines(&mut s, run);
    efficiency_lines(&mut s, run);
    tcp_and_wire_lines(&mut s, run);
    let _ = writeln!(s, "  errors         {}", run.errors);
    if let Some(c) = &run.client {
        for e in &c.error_samples {
            let _ = writeln!(s, "                 {e}");
        }
        if let Some(p) = &c.profile {
            render_profile(&mut s, p);
        }
    }
    s
}

/// The run's throughput: transactions first for request/response, bits for streams.
fn throughput_lines(s: &mut String, w: &linkperf_results::WorkloadInfo, run: &Run) {
    if let Some(t) = &run.throughput {
        let sender = |c: linkperf_results::Counter| match c {
            linkperf_results::Counter::Receiver => "",
            linkperf_results::Counter::Sender => " as sent",
        };
        // The total and both directions in one unit.
        let bits = Scale::BITS.all(&[
            t.bytes_per_s * 8.0,
            t.tx_bytes_per_s * 8.0,
            t.rx_bytes_per_s * 8.0,
        ]);
        let directions = format!(
            "client→server {}{}, server→client {}{}",
            bits[1],
            sender(t.counted_at.client_to_server),
            bits[2],
            sender(t.counted_at.server_to_client),
        );
        // Request/response leads with its transactions, a stream with its bits.
        if matches!(w.kind.as_str(), "rr" | "crr" | "mix" | "profile") {
            let _ = writeln!(
                s,
                "  throughput     {:.0} transactions/s, {} ({directions})",
                t.transactions_per_s, bits[0],
            );
        } else {
            let _ = writeln!(
                s,
                "  throughput     {} ({directions}), {:.0} messages/s",
                bits[0], t.transactions_per_s
            );
        }
    }
}

/// Bytes written but not yet read when the window closed.
fn in_flight_lines(s: &mut String, run: &Run) {
    if let Some(p) = &run.payload {
        // Bytes written but not yet read when the window closed: the sender's
        // count would have claimed them as carried.
        for (dir, d) in [
            ("client→server", &p.client_to_server),
            ("server→client", &p.server_to_client),
        ] {
            if let (Some(received), Some(in_flight)) = (d.received, d.in_flight) {
                // A few bytes either way are the two windows' offset (each
                // side opens its own when it starts); what matters is what
                // the sender claimed beyond that.
                if in_flight > 0 && in_flight as f64 > d.sent as f64 / 1000.0 {
                    let _ = writeln!(
                        s,
                        "  in flight      {dir}: {} B written, {received} B read in the window ({in_flight} B not yet read at its close)",
                        d.sent
                    );
                }
            }
        }
    }
}

/// Flows served unevenly, and UDP request/response transactions lost.
fn flow_and_loss_lines(s: &mut String, run: &Run) {
    if let Some(f) = run.flows.filter(|f| f.unfair()) {
        let _ = writeln!(
            s,
            "  flows          {} flows unevenly served ({}): min {:.0}, p10 {:.0}, median {:.0}, max {:.0}; {} with no progress; Jain's index {}",
            f.flows,
            f.measure,
            f.min,
            f.p10,
            f.median,
            f.max,
            f.no_progress,
            f.jain.map_or("n/a".to_string(), |j| format!("{j:.3}"))
        );
    }
    if let Some(l) = &run.loss {
        let _ = writeln!(
            s,
            "  loss           {} of {} transactions unanswered ({:.2} %)",
            l.lost,
            l.lost + l.answered,
            l.rate * 100.0
        );
    }
}

/// An open loop: what was offered and sent, what became of the arrivals,
/// the service time from the send beside the transaction time from the due
/// time, the pacing error, and the percentiles' confidence intervals.
fn open_loop_lines(s: &mut String, run: &Run) {
    let Some(o) = &run.open_loop else {
        return;
    };
    let _ = writeln!(
        s,
        "  open loop      {:.0} transactions/s sent of {:.0} offered ({} arrivals, at most {} outstanding per connection): {} late, {} dropped, {} behind schedule",
        o.achieved_per_s,
        o.offered_per_s,
        o.arrival,
        o.max_outstanding,
        o.late,
        o.dropped,
        o.behind
    );
    if let Some(l) = &o.service_time_us {
        let t = Scale::TIME_US.all(&[l.mean, l.p50, l.p99, l.p999, l.max]);
        let _ = writeln!(
            s,
            "  service        mean {}, p50 {}, p99 {}, p99.9 {}, max {}  (from the send; the transaction time runs from when it was due)",
            t[0], t[1], t[2], t[3], t[4]
        );
    }
    if let Some(p) = &o.pacing_error_us {
        let t = Scale::TIME_US.all(&[p.p50, p.p99, p.max]);
        let _ = writeln!(
            s,
            "  pacing error   p50 {}, p99 {}, max {}  (send after due, with room on the connection)",
            t[0], t[1], t[2]
        );
    }
    let ci = &o.transaction_time_ci_us;
    let intervals = [("p50", ci.p50), ("p99", ci.p99), ("p99.9", ci.p999)];
    let unit = Scale::TIME_US.unit_for(intervals.iter().filter_map(|(_, v)| v.map(|[_, hi]| hi)));
    let shown: Vec<String> = intervals
        .into_iter()
        .filter_map(|(n, v)| {
            v.map(|[lo, hi]| format!("{n} {}–{}", unit.format(lo), unit.format(hi)))
        })
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(s, "  95% intervals  {}", shown.join(", "));
    }
}

/// A UDP stream's datagrams and pace, per direction.
fn udp_lines(s: &mut String, run: &Run) {
    if let Some(u) = &run.udp {
        for (dir, d) in u.directions() {
            // What was sent and what was asked, in one unit.
            let pace_unit = Scale::BITS.unit_for([d.sent_bits_per_s, u.rate_bits_per_s]);
            let _ = writeln!(
                s,
                "  udp            {dir}: {} of {} datagrams received, {} lost ({:.2} %), {} out of order, {} duplicated{}; jitter {}",
                d.received,
                d.expected,
                d.lost,
                d.loss_rate * 100.0,
                d.out_of_order,
                d.duplicates,
                if d.late > 0 {
                    format!(", {} too late to tell", d.late)
                } else {
                    String::new()
                },
                d.jitter_us.map_or("n/a".to_string(), |j| Scale::TIME_US.one(j))
            );
            let pace = match d.kept_pace {
                None => " (no pace asked: as fast as the socket takes)".to_string(),
                Some(kept) => format!(
                    " of {} asked{}",
                    pace_unit.format(u.rate_bits_per_s),
                    if kept {
                        ""
                    } else {
                        ": the sender could not keep the pace"
                    }
                ),
            };
            let _ = writeln!(
                s,
                "  pace           {dir}: {} datagrams sent, {} per user{pace}",
                d.sent,
                pace_unit.format(d.sent_bits_per_s)
            );
        }
    }
}

/// A many-server aggregate's parts, and how many users ran in all.
fn parts_line(s: &mut String, run: &Run) {
    if run.parts.len() > 1 {
        let users: u32 = run.parts.iter().map(|p| p.users).sum();
        let unit = Scale::BITS.unit_for(
            run.parts
                .iter()
                .filter_map(|p| p.bytes_per_s.map(|b| b * 8.0)),
        );
        let each: Vec<String> = run
            .parts
            .iter()
            .map(|p| {
                format!(
                    "{} {} user{} {}{}",
                    p.label,
                    p.users,
                    if p.users == 1 { "" } else { "s" },
                    p.bytes_per_s
                        .map_or("-".to_string(), |b| unit.format(b * 8.0)),
                    if p.status == linkperf_results::RunStatus::Ok {
                        String::new()
                    } else {
                        format!(" [{}]", p.status.word())
                    }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  parts          {users} users in all: {}",
            each.join("; ")
        );
    }
}

/// Each side's CPU.
fn cpu_lines(s: &mut String, run: &Run) {
    if let Some(cpu) = &run.cpu {
        let side = |name: &str, c: &linkperf_measured::SideCpu| {
            format!(
                "  cpu {name:<10} process {:.3} s ({}), system-wide busy {:.3} s ({}), softirq {:.3} s",
                c.process_s,
                wire_name(&c.process_method),
                c.system_busy_s,
                wire_name(&c.system_busy_method),
                c.softirq_s
            )
        };
        let _ = writeln!(s, "{}", side("client", &cpu.client));
        match &cpu.server {
            Some(c) => {
                let _ = writeln!(s, "{}", side("server", c));
            }
            None => {
                let _ = writeln!(s, "  cpu server     not reported");
            }
        }
    }
}

/// CPU efficiency: process, system-wide, and each side's pinned CPUs.
fn efficiency_lines(s: &mut String, run: &Run) {
    if let Some(e) = &run.efficiency {
        // Each line's two sides in one unit of payload per CPU-second and
        // one of CPU time per transaction.
        let sides = |client_bytes, client_us, server_bytes, server_us| {
            let bytes = unit_of(Scale::PER_CPU_S, &[client_bytes, server_bytes]);
            let us = unit_of(Scale::CPU_US, &[client_us, server_us]);
            format!(
                "client {} / {} per txn, server {} / {} per txn",
                opt(bytes, client_bytes),
                opt(us, client_us),
                opt(bytes, server_bytes),
                opt(us, server_us)
            )
        };
        let _ = writeln!(
            s,
            "  efficiency     {} (process CPU)",
            sides(
                e.client_bytes_per_cpu_s,
                e.client_cpu_us_per_txn,
                e.server_bytes_per_cpu_s,
                e.server_cpu_us_per_txn
            )
        );
        let _ = writeln!(
            s,
            "                 {} (system-wide CPU)",
            sides(
                e.client_bytes_per_system_cpu_s,
                e.client_system_cpu_us_per_txn,
                e.server_bytes_per_system_cpu_s,
                e.server_system_cpu_us_per_txn
            )
        );
        if let Some(p) = &run.pinned {
            let _ = writeln!(
                s,
                "                 {} (each side's pinned CPUs: client {:.2} CPUs busy, {:.0}% softirq; server {:.2}, {:.0}%)",
                sides(
                    e.client_bytes_per_pinned_cpu_s,
                    e.client_pinned_cpu_us_per_txn,
                    e.server_bytes_per_pinned_cpu_s,
                    e.server_pinned_cpu_us_per_txn
                ),
                p.client.utilisation,
                share(p.client.softirq_s, p.client.busy_s),
                p.server.utilisation,
                share(p.server.softirq_s, p.server.busy_s),
            );
        }
    }
}

/// TCP_INFO and the wire.
fn tcp_and_wire_lines(s: &mut String, run: &Run) {
    if let Some(t) = &run.tcp_info {
        let rtt = Scale::TIME_US.all(&[t.rtt_us_mean, t.rtt_us_max]);
        let _ = writeln!(
            s,
            "  tcp            {} over {}, rtt mean {} (max {}), cwnd {:.0} segments",
            count(t.retransmits, "retransmit"),
            count(u64::from(t.flows), "flow"),
            rtt[0],
            rtt[1],
            t.snd_cwnd_mean
        );
    }
    if let Some(w) = run.wire.as_ref().and_then(|w| w.busier()) {
        let _ = writeln!(
            s,
            "  wire           {} on {} ({}, headers included){}",
            rate(w.bits_per_s / 8.0),
            w.interface,
            w.queue.as_deref().unwrap_or("no queue"),
            if w.drops > 0 {
                format!(
                    ", {} dropped ({:.2} %)",
                    count(w.drops, "packet"),
                    w.drop_ratio * 100.0
                )
            } else {
                String::new()
            }
        );
    }
}

/// A profile run's transaction elements and flowop types.
fn render_profile(s: &mut String, p: &linkperf_measured::ProfileReport) {
    let us = |l: &Option<linkperf_measured::LatencySummary>| {
        l.as_ref().map_or_else(
            || format!("{:>10} {:>10}", "-", "-"),
            |l| format!("{:>10.1} {:>10.1}", l.mean, l.p99),
        )
    };
    let _ = writeln!(
        s,
        "  {:<22} {:>5} {:>11} {:>8} {:>12} {:>12} {:>10} {:>10} {:>6}",
        "transaction",
        "users",
        "iterations",
        "seconds",
        "sent B",
        "received B",
        "mean µs",
        "p99 µs",
        "errors"
    );
    for t in &p.transactions {
        let _ = writeln!(
            s,
            "  {:<22} {:>5} {:>11} {:>8.3} {:>12} {:>12} {} {:>6}",
            format!("g{} t{} (line {})", t.group, t.index, t.line),
            t.users,
            t.iterations,
            t.seconds,
            t.tx_bytes,
            t.rx_bytes,
            us(&t.latency),
            t.errors
        );
        let _ = writeln!(s, "    {}", t.limit);
    }
    let _ = writeln!(
        s,
        "  {:<22} {:>5} {:>11} {:>8} {:>12} {:>12} {:>10} {:>10} {:>6}",
        "flowop", "", "operations", "", "sent B", "received B", "mean µs", "p99 µs", "errors"
    );
    for f in &p.flowops {
        let _ = writeln!(
            s,
            "  {:<22} {:>5} {:>11} {:>8} {:>12} {:>12} {} {:>6}",
            f.kind,
            "",
            f.operations,
            "",
            f.tx_bytes,
            f.rx_bytes,
            us(&f.latency),
            f.errors
        );
    }
}

/// Whether `t` is request/response: it is told in transactions per second.
fn is_request_response(t: &TestResult) -> bool {
    matches!(t.workload.kind.as_str(), "rr" | "crr" | "mix" | "profile")
}

/// One line per test of a results document: the mean over its ok runs, the
/// spread, and whether it reproduced.
pub fn render_summary(doc: &linkperf_results::ResultsDocument) -> String {
    let mean_of = |t: &TestResult, k: &str| {
        t.summary
            .as_ref()
            .and_then(|s| s.metrics.get(k))
            .map(|m| m.mean)
    };
    // Each column's figures in one unit, chosen from its largest: times in
    // the heading, the streams' rates beside each (request/response rows
    // are in transactions per second).
    let column = |scale: Scale, key: &str, rr: Option<bool>| {
        scale.unit_for(
            doc.tests
                .iter()
                .filter(|t| rr.is_none_or(|rr| is_request_response(t) == rr))
                .filter_map(|t| mean_of(t, key))
                .map(|v| if rr.is_some() { v * 8.0 } else { v }),
        )
    };
    let bits = column(Scale::BITS, "throughput.bytes_per_s", Some(false));
    let mean_unit = column(Scale::TIME_US, "transaction_time_us.mean", None);
    let p99_unit = column(Scale::TIME_US, "transaction_time_us.p99", None);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<34} {:>5} {:>16} {:>11} {:>11} {:>7} {:>7} {:>7}  note",
        "test",
        "runs",
        "throughput",
        format!("mean {}", mean_unit.symbol()),
        format!("p99 {}", p99_unit.symbol()),
        "cv",
        "±95%",
        "errors"
    );
    for t in &doc.tests {
        let ok = t
            .runs
            .iter()
            .filter(|r| r.status == linkperf_results::RunStatus::Ok)
            .count();
        let suspect = t
            .runs
            .iter()
            .filter(|r| r.status == linkperf_results::RunStatus::Suspect)
            .count();
        let failed = t.runs.len() - ok - suspect;
        let summary = t.summary.as_ref();
        let metric = |k: &str| summary.and_then(|s| s.metrics.get(k)).map(|m| m.mean);
        // Request/response in transactions per second (a 1-byte exchange
        // moves next to no bits), streams in bits per second.
        let throughput = if is_request_response(t) {
            metric("throughput.transactions_per_s").map(|v| format!("{v:.0} txn/s"))
        } else {
            metric("throughput.bytes_per_s").map(|v| bits.format(v * 8.0))
        };
        let mean = metric("transaction_time_us.mean").map(|v| mean_unit.number(v));
        let p99 = metric("transaction_time_us.p99").map(|v| p99_unit.number(v));
        let cv = summary
            .and_then(|s| s.throughput_cv)
            .map(|c| format!("{:.1}%", c * 100.0));
        // The 95% confidence interval of the mean throughput, as a share of
        // the mean (half its width): how far the mean may be off.
        let ci = summary
            .and_then(|s| s.metrics.get("throughput.bytes_per_s"))
            .and_then(|m| match (m.ci95_low, m.ci95_high) {
                (Some(lo), Some(hi)) if m.mean > 0.0 => {
                    Some(format!("{:.1}%", (hi - lo) / 2.0 / m.mean * 100.0))
                }
                _ => None,
            });
        // Failed or lost transactions of the ok runs.
        let errors: u64 = t
            .runs
            .iter()
            .filter(|r| r.status == linkperf_results::RunStatus::Ok)
            .map(|r| r.errors)
            .sum();
        let mut notes = Vec::new();
        if summary.is_some_and(|s| s.unstable) {
            notes.push("UNSTABLE".to_string());
        }
        if suspect > 0 {
            notes.push(format!("{suspect} suspect excluded"));
        }
        if failed > 0 {
            notes.push(format!("{failed} not ok"));
        }
        let na = || "-".to_string();
        let _ = writeln!(
            s,
            "{:<34} {:>5} {:>16} {:>11} {:>11} {:>7} {:>7} {:>7}  {}",
            t.name,
            ok,
            throughput.unwrap_or_else(na),
            mean.unwrap_or_else(na),
            p99.unwrap_or_else(na),
            cv.unwrap_or_else(na),
            ci.unwrap_or_else(na),
            errors,
            notes.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn counts_durations_and_windows_read_as_words() {
        assert_eq!(count(1, "user"), "1 user");
        assert_eq!(count(0, "flow"), "0 flows");
        assert_eq!(count(250, "user"), "250 users");
        assert_eq!(seconds(0.5), "500 ms");
        assert_eq!(seconds(1.0), "1 s");
        assert_eq!(seconds(2.5), "2.5 s");
        assert_eq!(seconds(90.0), "1 min 30 s");
        assert_eq!(seconds(120.0), "2 min");
        assert_eq!(
            window_words(Duration::from_secs(10), Duration::from_secs(1)),
            "10 s + 1 s warm-up"
        );
        assert_eq!(
            window_words(Duration::from_secs(1), Duration::ZERO),
            "1 s, no warm-up"
        );
    }
}
