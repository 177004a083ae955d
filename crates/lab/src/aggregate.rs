//! The aggregate of `--pairs N`: N pairs ran the same suite at the same time
//! through one link, each into its own results document; the aggregate is one
//! document, test by test and run by run, for the link as a whole.
//!
//! How run *r* of a test is aggregated (only when run *r* is `ok` in every
//! pair; otherwise the aggregate run is `failed` (or `aborted`) and says which
//! pair and why):
//!
//! - **throughput**: the sum over the pairs of each rate (bytes per second
//!   each way and together, transactions per second).
//! - **transaction time**: count summed, mean weighted by each pair's count,
//!   min the least, and every percentile and max the *highest* among the
//!   pairs. The percentiles of the merged distribution lie between the pairs'
//!   own, so the highest is an upper bound; the pairs' histograms are not kept
//!   in results, so the exact merged value cannot be computed.
//! - **CPU**: each pair's client and server are processes of their own, so
//!   process CPU is summed per side; system-wide busy time and its breakdown
//!   are the same host's CPUs measured by every pair over the same seconds,
//!   so they are averaged, not summed. Efficiency is then derived from the
//!   summed payload and these CPU figures, as for any run.
//! - **intervals**: the pairs' per-second samples, summed second by second.
//! - **TCP_INFO**: flows and retransmits summed, RTT and window means
//!   weighted by flows, the largest RTT the largest.
//! - Each pair's full document stays beside the aggregate (`CONFIG-pairK.json`).
//!
//! The pairs start together and run the same tests in the same order; they
//! are not synchronised test by test, so over a long suite they can drift
//! apart by the differences in per-test setup time (milliseconds per test).

use linkperf_metrics::{
    Interval, LatencySummary, ProcStatBreakdown, SideCpu, SideReport, TcpInfoSummary, Totals,
};
use linkperf_results::{derive_run, failed_run, ResultsDocument, Run, RunStatus, Throughput};

use crate::LabError;

/// Most error samples kept in a merged side report.
const MAX_ERROR_SAMPLES: usize = 8;

/// The aggregate of the pairs' documents (`pairs[k]` is pair k+1's), labelled
/// `label` and recorded as made by `command_line`. Every other field (suite,
/// environment, tests' specifications) is pair 1's.
pub fn aggregate(
    label: &str,
    command_line: &[String],
    pairs: &[ResultsDocument],
) -> Result<ResultsDocument, LabError> {
    let first = pairs
        .first()
        .ok_or_else(|| LabError::Aggregate("no pair produced results".into()))?;
    let mut doc = first.clone();
    doc.label = label.to_string();
    doc.command_line = command_line.to_vec();
    for test in &mut doc.tests {
        let of_pairs: Vec<Option<&linkperf_results::TestResult>> =
            pairs.iter().map(|p| p.find_test(&test.name)).collect();
        let runs = of_pairs
            .iter()
            .map(|t| t.map_or(0, |t| t.runs.len()))
            .max()
            .unwrap_or(0);
        test.runs = (0..runs)
            .map(|i| {
                let runs: Vec<Option<&Run>> = of_pairs
                    .iter()
                    .map(|t| t.and_then(|t| t.runs.get(i)))
                    .collect();
                merge_run(i as u32 + 1, &runs)
            })
            .collect();
        test.config.server = format!(
            "{} pairs: {}",
            pairs.len(),
            of_pairs
                .iter()
                .map(|t| t.map_or("?", |t| t.config.server.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        test.summary = None;
    }
    doc.refresh_summaries();
    Ok(doc)
}

/// Run `index` of one test over all pairs (`runs[k]` is pair k+1's, if it has one).
fn merge_run(index: u32, runs: &[Option<&Run>]) -> Run {
    let started = runs
        .iter()
        .flatten()
        .map(|r| r.started.clone())
        .min()
        .unwrap_or_default();
    let mut problems = Vec::new();
    let mut aborted = false;
    for (k, r) in runs.iter().enumerate() {
        match r {
            None => problems.push(format!("pair {}: no such run", k + 1)),
            Some(r) if r.status != RunStatus::Ok || r.client.is_none() => {
                aborted |= r.status == RunStatus::Aborted;
                problems.push(format!(
                    "pair {}: {}",
                    k + 1,
                    r.error.clone().unwrap_or_else(|| "no measurements".into())
                ));
            }
            Some(_) => {}
        }
    }
    if !problems.is_empty() {
        let status = if aborted {
            RunStatus::Aborted
        } else {
            RunStatus::Failed
        };
        return failed_run(index, started, status, problems.join("; "));
    }
    let runs: Vec<&Run> = runs.iter().flatten().copied().collect();
    let clients: Vec<&SideReport> = runs.iter().filter_map(|r| r.client.as_ref()).collect();
    let servers: Option<Vec<&SideReport>> = runs.iter().map(|r| r.server.as_ref()).collect();
    let mut run = derive_run(
        index,
        started,
        merge_sides(&clients),
        servers.map(|s| merge_sides(&s)),
    );
    run.throughput = runs
        .iter()
        .map(|r| r.throughput)
        .collect::<Option<Vec<Throughput>>>()
        .map(|ts| Throughput {
            bytes_per_s: ts.iter().map(|t| t.bytes_per_s).sum(),
            tx_bytes_per_s: ts.iter().map(|t| t.tx_bytes_per_s).sum(),
            rx_bytes_per_s: ts.iter().map(|t| t.rx_bytes_per_s).sum(),
            transactions_per_s: ts.iter().map(|t| t.transactions_per_s).sum(),
        });
    run
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / f64::from(n)
    }
}

/// One side's reports of every pair as one report (see the module's rules).
fn merge_sides(sides: &[&SideReport]) -> SideReport {
    let sum = |f: fn(&SideReport) -> u64| sides.iter().map(|s| f(s)).sum::<u64>();
    SideReport {
        window_s: mean(sides.iter().map(|s| s.window_s)),
        tx_bytes: sum(|s| s.tx_bytes),
        rx_bytes: sum(|s| s.rx_bytes),
        transactions: sum(|s| s.transactions),
        errors: sum(|s| s.errors),
        totals: Totals {
            tx_bytes: sum(|s| s.totals.tx_bytes),
            rx_bytes: sum(|s| s.totals.rx_bytes),
            transactions: sum(|s| s.totals.transactions),
        },
        latency: sides
            .iter()
            .map(|s| s.latency)
            .collect::<Option<Vec<_>>>()
            .map(|l| merge_latency(&l)),
        intervals: merge_intervals(sides),
        cpu: merge_cpu(&sides.iter().map(|s| s.cpu).collect::<Vec<_>>()),
        tcp_info: {
            let infos: Vec<TcpInfoSummary> = sides.iter().filter_map(|s| s.tcp_info).collect();
            (!infos.is_empty()).then(|| merge_tcp_info(&infos))
        },
        workers: sides.iter().flat_map(|s| s.workers.clone()).collect(),
        busy_poll: sides.iter().any(|s| s.busy_poll),
        connections: sum(|s| s.connections),
        error_samples: {
            let mut e: Vec<String> = Vec::new();
            for s in sides.iter().flat_map(|s| &s.error_samples) {
                if !e.contains(s) && e.len() < MAX_ERROR_SAMPLES {
                    e.push(s.clone());
                }
            }
            e
        },
        // Profile runs are not aggregated over pairs.
        profile: None,
    }
}

fn merge_latency(ls: &[LatencySummary]) -> LatencySummary {
    let count: u64 = ls.iter().map(|l| l.count).sum();
    let max_of = |f: fn(&LatencySummary) -> f64| ls.iter().map(f).fold(f64::MIN, f64::max);
    LatencySummary {
        count,
        mean: if count == 0 {
            mean(ls.iter().map(|l| l.mean))
        } else {
            ls.iter().map(|l| l.mean * l.count as f64).sum::<f64>() / count as f64
        },
        p50: max_of(|l| l.p50),
        p90: max_of(|l| l.p90),
        p99: max_of(|l| l.p99),
        p999: max_of(|l| l.p999),
        min: ls.iter().map(|l| l.min).fold(f64::MAX, f64::min),
        max: max_of(|l| l.max),
    }
}

fn merge_intervals(sides: &[&SideReport]) -> Vec<Interval> {
    let n = sides.iter().map(|s| s.intervals.len()).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let at = |s: &&SideReport| s.intervals[i];
            Interval {
                start_s: at(&sides[0]).start_s,
                length_s: mean(sides.iter().map(|s| at(s).length_s)),
                tx_bytes: sides.iter().map(|s| at(s).tx_bytes).sum(),
                rx_bytes: sides.iter().map(|s| at(s).rx_bytes).sum(),
                transactions: sides.iter().map(|s| at(s).transactions).sum(),
            }
        })
        .collect()
}

fn merge_cpu(cs: &[SideCpu]) -> SideCpu {
    let m = |f: fn(&SideCpu) -> f64| mean(cs.iter().map(f));
    let s = |f: fn(&SideCpu) -> f64| cs.iter().map(f).sum::<f64>();
    SideCpu {
        process_s: s(|c| c.process_s),
        process_user_s: s(|c| c.process_user_s),
        process_system_s: s(|c| c.process_system_s),
        system_busy_s: m(|c| c.system_busy_s),
        softirq_s: m(|c| c.softirq_s),
        proc_stat: ProcStatBreakdown {
            user_s: m(|c| c.proc_stat.user_s),
            system_s: m(|c| c.proc_stat.system_s),
            irq_s: m(|c| c.proc_stat.irq_s),
            softirq_s: m(|c| c.proc_stat.softirq_s),
            steal_s: m(|c| c.proc_stat.steal_s),
            idle_s: m(|c| c.proc_stat.idle_s),
        },
        window_s: m(|c| c.window_s),
        ..cs[0]
    }
}

fn merge_tcp_info(ts: &[TcpInfoSummary]) -> TcpInfoSummary {
    let flows: u32 = ts.iter().map(|t| t.flows).sum();
    let weighted = |f: fn(&TcpInfoSummary) -> f64| {
        if flows == 0 {
            mean(ts.iter().map(f))
        } else {
            ts.iter().map(|t| f(t) * f64::from(t.flows)).sum::<f64>() / f64::from(flows)
        }
    };
    TcpInfoSummary {
        flows,
        retransmits: ts.iter().map(|t| t.retransmits).sum(),
        rtt_us_mean: weighted(|t| t.rtt_us_mean),
        rtt_us_max: ts.iter().map(|t| t.rtt_us_max).fold(0.0, f64::max),
        rttvar_us_mean: weighted(|t| t.rttvar_us_mean),
        snd_cwnd_mean: weighted(|t| t.snd_cwnd_mean),
        snd_mss_mean: weighted(|t| t.snd_mss_mean),
    }
}

#[cfg(test)]
mod tests;
