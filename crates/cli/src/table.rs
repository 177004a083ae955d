//! The human-readable summary of a run, for the terminal.

use std::fmt::Write as _;

use linkperf_results::{Run, TestResult};

fn rate(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    if bits >= 1e9 {
        format!("{:.2} Gbit/s", bits / 1e9)
    } else if bits >= 1e6 {
        format!("{:.2} Mbit/s", bits / 1e6)
    } else {
        format!("{:.2} kbit/s", bits / 1e3)
    }
}

fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(x) if x >= 1e6 => format!("{:.3e} {unit}", x),
        Some(x) => format!("{x:.2} {unit}"),
        None => "n/a".into(),
    }
}

fn per_cpu(v: Option<f64>) -> String {
    match v {
        Some(b) => format!("{:.1} MB/cpu-s", b / 1e6),
        None => "n/a".into(),
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
    let _ = writeln!(
        s,
        "{}  ({}, {}, {} users, {:.1} s window after {:.1} s warmup)  [{}]",
        test.name,
        w.protocol,
        w.direction,
        w.users,
        w.duration_s,
        w.warmup_s,
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
    if let Some(t) = &run.throughput {
        let sender = |c: linkperf_results::Counter| match c {
            linkperf_results::Counter::Receiver => "",
            linkperf_results::Counter::Sender => " as sent",
        };
        let _ = writeln!(
            s,
            "  throughput     {} (client→server {}{}, server→client {}{}), {:.0} transactions/s",
            rate(t.bytes_per_s),
            rate(t.tx_bytes_per_s),
            sender(t.counted_at.client_to_server),
            rate(t.rx_bytes_per_s),
            sender(t.counted_at.server_to_client),
            t.transactions_per_s
        );
    }
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
    if let Some(u) = &run.udp {
        for (dir, d) in u.directions() {
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
                d.jitter_us.map_or("n/a".to_string(), |j| format!("{j:.1} µs"))
            );
            let pace = match d.kept_pace {
                None => " (no pace asked: as fast as the socket takes)".to_string(),
                Some(kept) => format!(
                    " of {} asked{}",
                    rate(u.rate_bits_per_s / 8.0),
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
                rate(d.sent_bits_per_s / 8.0)
            );
        }
    }
    if run.parts.len() > 1 {
        let users: u32 = run.parts.iter().map(|p| p.users).sum();
        let each: Vec<String> = run
            .parts
            .iter()
            .map(|p| {
                format!(
                    "{} {} user{} {}{}",
                    p.label,
                    p.users,
                    if p.users == 1 { "" } else { "s" },
                    p.bytes_per_s.map_or("-".to_string(), rate),
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
    if let Some(l) = &run.transaction_time_us {
        let _ = writeln!(
            s,
            "  transaction    mean {:.1} µs  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} µs  ({} transactions)",
            l.mean, l.p50, l.p90, l.p99, l.p999, l.max, l.count
        );
    }
    if let Some(cpu) = &run.cpu {
        let side = |name: &str, c: &linkperf_metrics::SideCpu| {
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
    if let Some(e) = &run.efficiency {
        let _ = writeln!(
            s,
            "  efficiency     client {} / {} per txn, server {} / {} per txn (process CPU)",
            per_cpu(e.client_bytes_per_cpu_s),
            opt(e.client_cpu_us_per_txn, "cpu-µs"),
            per_cpu(e.server_bytes_per_cpu_s),
            opt(e.server_cpu_us_per_txn, "cpu-µs"),
        );
        let _ = writeln!(
            s,
            "                 client {} / {} per txn, server {} / {} per txn (system-wide CPU)",
            per_cpu(e.client_bytes_per_system_cpu_s),
            opt(e.client_system_cpu_us_per_txn, "cpu-µs"),
            per_cpu(e.server_bytes_per_system_cpu_s),
            opt(e.server_system_cpu_us_per_txn, "cpu-µs"),
        );
    }
    if let Some(t) = &run.tcp_info {
        let _ = writeln!(
            s,
            "  tcp            {} retransmits over {} flows, rtt mean {:.0} µs (max {:.0} µs), cwnd {:.0}",
            t.retransmits, t.flows, t.rtt_us_mean, t.rtt_us_max, t.snd_cwnd_mean
        );
    }
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

/// A profile run's transaction elements and flowop types.
fn render_profile(s: &mut String, p: &linkperf_metrics::ProfileReport) {
    let us = |l: &Option<linkperf_metrics::LatencySummary>| {
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

/// One line per test of a results document: the mean over its ok runs, the
/// spread, and whether it reproduced.
pub fn render_summary(doc: &linkperf_results::ResultsDocument) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<34} {:>5} {:>12} {:>12} {:>11} {:>11} {:>7} {:>7} {:>7}  note",
        "test", "runs", "Gbit/s", "txn/s", "mean µs", "p99 µs", "cv", "±95%", "errors"
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
        let gbit = metric("throughput.bytes_per_s").map(|b| format!("{:.3}", b * 8.0 / 1e9));
        let tps = metric("throughput.transactions_per_s").map(|v| format!("{v:.0}"));
        let mean = metric("transaction_time_us.mean").map(|v| format!("{v:.1}"));
        let p99 = metric("transaction_time_us.p99").map(|v| format!("{v:.1}"));
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
            "{:<34} {:>5} {:>12} {:>12} {:>11} {:>11} {:>7} {:>7} {:>7}  {}",
            t.name,
            ok,
            gbit.unwrap_or_else(na),
            tps.unwrap_or_else(na),
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
