//! The aggregate of `--pairs N` (and of `run --server h1,h2`): N parts ran
//! the same test at the same time, each into its own results document; the
//! aggregate is one document, test by test and run by run, for the whole.
//!
//! How run *r* of a test is aggregated (only when run *r* completed in every
//! part; otherwise the aggregate run is `failed` (or `aborted`) and says which
//! part and why):
//!
//! - **users**: summed; the aggregate test is named after the sum
//!   (`rr1c-1x1--4` for two parts of 2 users), and each run lists its
//!   `parts` with what each carried.
//! - **throughput**: derived as for any run from the merged sides, so each
//!   direction counted at its receivers and summed over the parts.
//! - **transaction time**: the parts' histograms merged, so every percentile
//!   is the percentile of all transactions; mean weighted by each part's
//!   count, min the least, max the largest. Files from before histograms
//!   were kept (`linkperf/results/v1`) give the highest part's percentiles
//!   instead, an upper bound.
//! - **per-flow counts**: each part's flows renumbered after the previous
//!   parts' users, then the distribution over all of them.
//! - **CPU**: each part's client and server are processes of their own, so
//!   process CPU is summed per side; system-wide busy time and its breakdown
//!   are one host's CPUs measured by every part over the same seconds, so
//!   they are averaged, not summed. Efficiency is then derived from the
//!   merged payload and these CPU figures, as for any run.
//! - **intervals**: the parts' per-second samples, summed second by second.
//! - **TCP_INFO**: flows and retransmits summed, RTT and window means
//!   weighted by flows, the largest RTT the largest.
//! - **checks**: made again on the whole (Little's law over all users, stalls
//!   of the summed seconds, every flow, and the noise of each host with every
//!   part's processes accounted for); a part that was suspect makes the
//!   aggregate suspect too, its reasons named by part.
//! - Each part's full document stays beside the aggregate (`CONFIG-pairK.json`).
//!
//! The parts start together and run the same tests in the same order; they
//! are not synchronised test by test, so over a long suite they can drift
//! apart by the differences in per-test setup time (milliseconds per test).

use linkperf_measured::{
    Environment, FlowCounts, Interval, LatencySummary, ProcStatBreakdown, SideCpu, SideReport,
    TcpInfoSummary, Totals,
};
use linkperf_metrics::LatencyRecorder;
use linkperf_results::{
    derive_run, failed_run, host_cpus, judge_run, Judge, Part, ResultsDocument, Run, RunStatus,
    TestResult,
};
use linkperf_workload::TestSpec;

use crate::LabError;

/// Most error samples kept in a merged side report.
const MAX_ERROR_SAMPLES: usize = 8;

/// The aggregate of the parts' documents (`parts[k]` is part k+1's, named
/// `labels[k]`: `pair2`, or a server's address), labelled `label` and recorded
/// as made by `command_line`. Every other field (suite, environment, tests'
/// specifications but their users) is part 1's.
pub fn aggregate(
    label: &str,
    command_line: &[String],
    parts: &[ResultsDocument],
    labels: &[String],
) -> Result<ResultsDocument, LabError> {
    let first = parts
        .first()
        .ok_or_else(|| LabError::Aggregate("no pair produced results".into()))?;
    let mut doc = first.clone();
    doc.label = label.to_string();
    doc.command_line = command_line.to_vec();
    let label_of = |k: usize| {
        labels
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("pair{}", k + 1))
    };
    let mut renamed = Vec::new();
    for test in &mut doc.tests {
        let of_parts: Vec<Option<&TestResult>> =
            parts.iter().map(|p| p.find_test(&test.name)).collect();
        let users: u32 = of_parts
            .iter()
            .map(|t| t.map_or(0, |t| t.spec.users))
            .fold(0u32, u32::saturating_add);
        let mut spec = test.spec.clone();
        spec.users = users.max(1);
        let runs = of_parts
            .iter()
            .map(|t| t.map_or(0, |t| t.runs.len()))
            .max()
            .unwrap_or(0);
        let ctx = Context {
            spec: &spec,
            parts: &of_parts,
            docs: parts,
            label_of: &label_of,
        };
        test.runs = (0..runs).map(|i| ctx.merge_run(i)).collect();
        let noun = if (0..parts.len()).all(|k| label_of(k).starts_with("pair")) {
            "pairs"
        } else {
            "servers"
        };
        test.config.server = format!(
            "{} {noun}: {}",
            parts.len(),
            of_parts
                .iter()
                .map(|t| t.map_or("?", |t| t.config.server.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let old = std::mem::replace(&mut test.name, spec.name());
        renamed.push((old, test.name.clone()));
        test.workload = linkperf_results::WorkloadInfo::from_spec(&spec);
        test.spec = spec;
        test.summary = None;
    }
    if let Some(suite) = &mut doc.suite {
        for t in &mut suite.tests {
            if let Some((_, new)) = renamed.iter().find(|(old, _)| old == t) {
                *t = new.clone();
            }
        }
    }
    doc.refresh_summaries();
    Ok(doc)
}

/// One test across the parts.
struct Context<'a> {
    /// The whole test: users summed.
    spec: &'a TestSpec,
    /// Each part's test, if it has it.
    parts: &'a [Option<&'a TestResult>],
    /// Each part's document (for its environments).
    docs: &'a [ResultsDocument],
    label_of: &'a dyn Fn(usize) -> String,
}

impl Context<'_> {
    /// Run `i` (0-based) of the test over all parts.
    fn merge_run(&self, i: usize) -> Run {
        let index = i as u32 + 1;
        let runs: Vec<Option<&Run>> = self
            .parts
            .iter()
            .map(|t| t.and_then(|t| t.runs.get(i)))
            .collect();
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
                None => problems.push(format!("{}: no such run", (self.label_of)(k))),
                Some(r) if !r.status.completed() || r.client.is_none() => {
                    aborted |= r.status == RunStatus::Aborted;
                    problems.push(format!(
                        "{}: {}",
                        (self.label_of)(k),
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
            let mut run = failed_run(index, started, status, problems.join("; "));
            run.parts = self.part_shares(&runs);
            return run;
        }
        let runs: Vec<&Run> = runs.iter().flatten().copied().collect();
        // Each part's flows come after the previous parts' users.
        let mut offset = 0u32;
        let mut offsets = Vec::new();
        for t in self.parts.iter() {
            offsets.push(offset);
            offset = offset.saturating_add(t.map_or(0, |t| t.spec.users));
        }
        let clients: Vec<(&SideReport, u32)> = runs
            .iter()
            .zip(&offsets)
            .filter_map(|(r, o)| r.client.as_ref().map(|c| (c, *o)))
            .collect();
        let servers: Option<Vec<(&SideReport, u32)>> = runs
            .iter()
            .zip(&offsets)
            .map(|(r, o)| r.server.as_ref().map(|s| (s, *o)))
            .collect();
        let mut run = derive_run(
            index,
            started,
            self.spec,
            merge_sides(&clients),
            servers.map(|s| merge_sides(&s)),
        );
        // Every part's processes on their hosts.
        let mut sides: Vec<(&str, &SideReport, Option<&Environment>)> = Vec::new();
        for (r, d) in runs.iter().zip(self.docs) {
            if let Some(c) = &r.client {
                sides.push(("client", c, d.environment.client.as_ref()));
            }
            if let Some(s) = &r.server {
                sides.push(("server", s, d.environment.server.as_ref()));
            }
        }
        let max_loss = self.parts.iter().flatten().find_map(|t| t.config.max_loss);
        judge_run(
            &mut run,
            &Judge {
                spec: self.spec,
                interrupted: false,
                hosts: Some(host_cpus(&sides)),
                max_loss,
            },
        );
        // A part that was suspect on its own makes the whole suspect.
        for (k, r) in runs.iter().enumerate() {
            if r.status == RunStatus::Suspect {
                run.status = RunStatus::Suspect;
                for reason in &r.status_reasons {
                    run.status_reasons
                        .push(format!("{}: {reason}", (self.label_of)(k)));
                }
            }
        }
        run.parts = self.part_shares(&runs.iter().map(|r| Some(*r)).collect::<Vec<_>>());
        run
    }

    fn part_shares(&self, runs: &[Option<&Run>]) -> Vec<Part> {
        runs.iter()
            .enumerate()
            .map(|(k, r)| Part {
                label: (self.label_of)(k),
                users: self
                    .parts
                    .get(k)
                    .copied()
                    .flatten()
                    .map_or(0, |t| t.spec.users),
                status: r.map_or(RunStatus::Failed, |r| r.status),
                bytes_per_s: r.and_then(|r| r.throughput).map(|t| t.bytes_per_s),
                transactions_per_s: r.and_then(|r| r.throughput).map(|t| t.transactions_per_s),
            })
            .collect()
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / f64::from(n)
    }
}

/// One side's reports of every part as one report (see the module's rules);
/// each report's flows are renumbered from its offset.
fn merge_sides(sides: &[(&SideReport, u32)]) -> SideReport {
    let reports: Vec<&SideReport> = sides.iter().map(|(s, _)| *s).collect();
    let sum = |f: fn(&SideReport) -> u64| reports.iter().map(|s| f(s)).sum::<u64>();
    let latency = reports
        .iter()
        .map(|s| s.latency)
        .collect::<Option<Vec<_>>>();
    let (latency, latency_histogram) = match latency {
        Some(l) => merge_latency(&l, &reports),
        None => (None, None),
    };
    let shifted: Vec<FlowCounts> = sides.iter().map(|(s, o)| s.flows.shifted(*o)).collect();
    SideReport {
        window_s: mean(reports.iter().map(|s| s.window_s)),
        tx_bytes: sum(|s| s.tx_bytes),
        rx_bytes: sum(|s| s.rx_bytes),
        transactions: sum(|s| s.transactions),
        errors: sum(|s| s.errors),
        totals: Totals {
            tx_bytes: sum(|s| s.totals.tx_bytes),
            rx_bytes: sum(|s| s.totals.rx_bytes),
            transactions: sum(|s| s.totals.transactions),
        },
        latency,
        intervals: merge_intervals(&reports),
        cpu: merge_cpu(&reports.iter().map(|s| s.cpu).collect::<Vec<_>>()),
        tcp_info: {
            let infos: Vec<TcpInfoSummary> = reports.iter().filter_map(|s| s.tcp_info).collect();
            (!infos.is_empty()).then(|| merge_tcp_info(&infos))
        },
        workers: reports.iter().flat_map(|s| s.workers.clone()).collect(),
        busy_poll: reports.iter().any(|s| s.busy_poll),
        connections: sum(|s| s.connections),
        error_samples: {
            let mut e: Vec<String> = Vec::new();
            for s in reports.iter().flat_map(|s| &s.error_samples) {
                if !e.contains(s) && e.len() < MAX_ERROR_SAMPLES {
                    e.push(s.clone());
                }
            }
            e
        },
        // Profile runs are not aggregated over parts, nor open-loop tests
        // (refused up front: their schedules' checks are each part's own).
        profile: None,
        open_loop: None,
        latency_histogram,
        flows: FlowCounts::merged(&shifted.iter().collect::<Vec<_>>()),
        udp: reports.iter().filter_map(|s| s.udp).reduce(|mut a, b| {
            a.merge(&b);
            a
        }),
        // Each part's interfaces are its own (a pair's devices have their own
        // names); a CPU several parts pinned to is one CPU, counted once.
        links: reports.iter().flat_map(|s| s.links.clone()).collect(),
        pinned_cpus: {
            let mut cpus: Vec<linkperf_measured::CpuShare> = Vec::new();
            for c in reports.iter().flat_map(|s| &s.pinned_cpus) {
                if !cpus.iter().any(|k| k.cpu == c.cpu) {
                    cpus.push(*c);
                }
            }
            cpus
        },
    }
}

/// The parts' transaction times as one: from their merged histograms when
/// every part has one (exact percentiles), else the highest part's
/// percentiles (an upper bound). With the merged histogram's encoding.
fn merge_latency(
    ls: &[LatencySummary],
    reports: &[&SideReport],
) -> (Option<LatencySummary>, Option<String>) {
    let recorders: Option<Vec<LatencyRecorder>> = ls
        .iter()
        .zip(reports)
        .map(|(l, r)| {
            r.latency_histogram
                .as_deref()
                .and_then(|h| LatencyRecorder::from_report(l, h).ok())
        })
        .collect();
    if let Some(recorders) = recorders {
        let mut all = LatencyRecorder::new();
        for r in &recorders {
            all.merge(r);
        }
        return (all.summary(), all.encode_histogram());
    }
    (Some(bounding_latency(ls)), None)
}

/// Count summed, mean weighted, min the least, every percentile and max the
/// highest part's: the merged distribution's percentiles lie between the
/// parts' own, so this bounds them from above.
fn bounding_latency(ls: &[LatencySummary]) -> LatencySummary {
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
                datagrams: sum_some(sides.iter().map(|s| at(s).datagrams)),
                expected: sum_some(sides.iter().map(|s| at(s).expected)),
                jitter_us: {
                    let js: Vec<f64> = sides.iter().filter_map(|s| at(s).jitter_us).collect();
                    (!js.is_empty()).then(|| mean(js.into_iter()))
                },
                ..Interval::default()
            }
        })
        .collect()
}

/// The sum of the parts that have a figure; `None` when none has.
fn sum_some(xs: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    xs.flatten().reduce(|a, b| a + b)
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
