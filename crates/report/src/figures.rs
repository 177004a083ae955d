//! The absolute figures of one results file: per test, the statistics of every
//! metric over its ok runs, and the workload it belongs to.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use linkperf_metrics::{describe, Stats};
use linkperf_results::{
    CheckName, IntervalRate, ResultsDocument, RunStatus, TestResult, RATE_TOLERANCE,
};
use linkperf_workload::{offered_label, Arrival, Placement, Protocol, TransactionsPerSecond};

use crate::Metric;

/// A workload over a protocol, closed or open loop: the closed-loop tests
/// of a workload key differ only in their user count, its open-loop tests
/// in their user count and offered rate. Displayed as the workload's name,
/// with the protocol appended when it is not TCP (`rr1c-1x1`,
/// `rr1c-1x1--unix`), and "(open loop)" for open-loop tests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkloadKey {
    /// The workload's name, e.g. `rr1c-200x1000`.
    pub workload: String,
    /// The transport.
    pub protocol: Protocol,
    /// Whether its tests are open loop (offered at a rate): they are never
    /// grouped, charted or compared with the closed-loop tests of the same
    /// workload. Absent from the JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_loop: bool,
}

impl WorkloadKey {
    /// The key of `test`.
    pub fn of(test: &TestResult) -> Self {
        WorkloadKey {
            workload: test.workload.name.clone(),
            protocol: test.workload.protocol,
            open_loop: test.spec.offered.is_some(),
        }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            Protocol::Tcp => f.write_str(&self.workload)?,
            p => write!(f, "{}--{p}", self.workload)?,
        }
        if self.open_loop {
            f.write_str(" (open loop)")?;
        }
        Ok(())
    }
}

/// An open-loop test's load, from its spec.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OfferedFigures {
    /// Transactions offered per second, over all users.
    pub rate_per_s: u64,
    /// How their arrivals were spaced.
    pub arrival: Arrival,
    /// Transactions each connection could have outstanding.
    pub max_outstanding: u32,
    /// How far the achieved rate may stray from the offered, a fraction:
    /// the largest bound of the ok runs' `arrival_fidelity` checks (1 %,
    /// or wider for a Poisson count's own noise), 1 %
    /// ([`RATE_TOLERANCE`]) without one.
    pub rate_tolerance: f64,
}

impl OfferedFigures {
    /// The load of `test`, an open-loop test (`None` for a closed-loop one).
    fn of(test: &TestResult) -> Option<Self> {
        let load = test.spec.offered?;
        let bound = test
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok)
            .flat_map(|r| &r.checks)
            .filter(|c| c.name == CheckName::ArrivalFidelity)
            .filter_map(|c| c.bound)
            .filter(|b| b.is_finite() && *b > 0.0)
            .map(|b| b / 100.0)
            .reduce(f64::max);
        Some(OfferedFigures {
            rate_per_s: load.rate.0,
            arrival: load.arrival,
            max_outstanding: load.max_outstanding,
            rate_tolerance: bound.unwrap_or(RATE_TOLERANCE),
        })
    }
}

/// An offered rate as test names write it: `10k/s`, `1500k/s`, `750/s`.
pub(crate) fn rate_label(rate_per_s: u64) -> String {
    format!("{}/s", offered_label(TransactionsPerSecond(rate_per_s)))
}

/// A mean's 95 % interval, when its runs give one.
fn interval(s: Stats) -> Option<(f64, f64)> {
    Some((s.ci95_low?, s.ci95_high?))
}

/// The link's use in one test, over its ok runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkFigures {
    /// The interface of the busier direction (of the first run).
    pub interface: String,
    /// Mean over the runs of the busier direction's bits per second.
    pub bits_per_s: f64,
    /// The 95 % interval of that mean over the runs (Student t), low and
    /// high; `None` for a single run.
    pub bits_per_s_interval: Option<(f64, f64)>,
    /// Packets dropped on the way out, both directions, all runs.
    pub drops: u64,
    /// Mean over the runs of the larger direction's share of packets dropped.
    pub drop_ratio: f64,
    /// The most bytes left queued at a window's end.
    pub backlog_bytes: u64,
    /// Runs it is over.
    pub runs: u32,
}

impl LinkFigures {
    /// The link use of `runs` (those that recorded it); `None` when none did.
    /// Each run's figures are its [`LinkUse`](linkperf_results::LinkUse)'s
    /// own (its drops, worst drop ratio and backlog): this only takes them
    /// over the runs.
    fn of(runs: &[&linkperf_results::Run]) -> Option<Self> {
        let wires: Vec<&linkperf_results::LinkUse> =
            runs.iter().filter_map(|r| r.wire.as_ref()).collect();
        let busier: Vec<_> = wires.iter().filter_map(|w| w.busier()).collect();
        let first = busier.first()?;
        let n = busier.len() as f64;
        let rates: Vec<f64> = busier.iter().map(|d| d.bits_per_s).collect();
        Some(LinkFigures {
            interface: first.interface.clone(),
            bits_per_s: rates.iter().sum::<f64>() / n,
            bits_per_s_interval: describe(&rates).and_then(interval),
            drops: wires.iter().map(|w| w.drops()).sum(),
            drop_ratio: wires.iter().map(|w| w.worst_drop_ratio()).sum::<f64>()
                / wires.len() as f64,
            backlog_bytes: wires.iter().map(|w| w.backlog_bytes()).max().unwrap_or(0),
            runs: u32::try_from(busier.len()).unwrap_or(u32::MAX),
        })
    }
}

/// One test of one results file, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestFigures {
    /// The test's name, e.g. `rr1c-200x1000--50`.
    pub name: String,
    /// Its workload and protocol.
    pub workload: WorkloadKey,
    /// The workload's kind, as the results document names it: `rr`, `crr`,
    /// `mix`, `stream` or `profile`.
    pub kind: String,
    /// For request/response workloads of fixed sizes, the larger of the
    /// request and the response, bytes: what one transaction puts on the
    /// busier direction.
    pub transaction_bytes: Option<u64>,
    /// Concurrent users.
    pub users: u32,
    /// An open-loop test's load; absent (and absent from the JSON) for a
    /// closed-loop test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered: Option<OfferedFigures>,
    /// How the client's event-loop workers ran (threads, pinning, busy-poll).
    pub client_placement: Placement,
    /// How the server's event-loop workers ran.
    pub server_placement: Placement,
    /// Segments retransmitted in each ok run's window that read TCP_INFO
    /// (`tcp_info.retransmits`), in run order; empty for UDP.
    pub retransmits: Vec<u64>,
    /// Runs recorded.
    pub runs: u32,
    /// Runs the statistics are over: those that completed `ok`, and with
    /// [`Options::include_suspect`](crate::Options::include_suspect) the
    /// suspect ones too ([`suspect_included`](Self::suspect_included) of them).
    pub ok_runs: u32,
    /// Suspect runs counted in the statistics (`--include-suspect`); 0 unless
    /// asked for.
    pub suspect_included: u32,
    /// Suspect runs (a validity check failed), left out of the statistics.
    pub suspect_runs: u32,
    /// The distinct reasons of the suspect runs (checks that failed).
    pub suspect_reasons: Vec<String>,
    /// Whether the throughput of the ok runs varied by more than the results
    /// document's instability threshold (coefficient of variation over 5%).
    pub unstable: bool,
    /// Coefficient of variation of the throughput, when there are repeats.
    pub throughput_cv: Option<f64>,
    /// Statistics of each metric over the ok runs (a metric some ok run lacks
    /// is left out: see [`missing_runs`](Self::missing_runs)).
    pub metrics: BTreeMap<Metric, Stats>,
    /// Per metric that some ok run lacks, how many ok runs lack it (as many
    /// as [`ok_runs`](Self::ok_runs): not measured at all).
    pub missing_runs: BTreeMap<Metric, u32>,
    /// Mean over the ok runs of the busier direction's payload rate
    /// (`max(tx, rx)`), bytes/s: what a full-duplex link's capacity limits.
    pub busiest_direction_bytes_per_s: Option<f64>,
    /// The 95 % interval of that mean over the ok runs (Student t), low and
    /// high, bytes/s; `None` with fewer than two.
    pub busiest_direction_interval: Option<(f64, f64)>,
    /// What the wire carried in the busier direction (from the sender's own
    /// interface, headers included), over the ok runs that recorded it.
    pub wire: Option<LinkFigures>,
    /// UDP transactions lost over the ok runs (unanswered within the
    /// timeout); `None` where the test does not count them.
    pub lost_transactions: Option<u64>,
    /// Each metric's value in every ok run, in run order (for significance
    /// tests; not exported, the results document has them).
    #[serde(skip)]
    pub values: BTreeMap<Metric, Vec<f64>>,
    /// Each ok run's number and per-second samples (receiver-side), in run
    /// order (for the time-series charts; not exported, the results
    /// document has them).
    #[serde(skip)]
    pub intervals: Vec<(u32, Vec<IntervalRate>)>,
}

impl TestFigures {
    /// The figures of `test`, over its ok runs.
    pub fn of(test: &TestResult) -> Self {
        Self::over(test, false)
    }

    /// The figures of `test`, over its ok runs and, when `include_suspect`,
    /// its suspect runs too (runs that completed but failed a check).
    pub fn over(test: &TestResult, include_suspect: bool) -> Self {
        let ok: Vec<_> = test
            .runs
            .iter()
            .filter(|r| {
                r.status == RunStatus::Ok || (include_suspect && r.status == RunStatus::Suspect)
            })
            .collect();
        let suspect_included = ok.iter().filter(|r| r.status == RunStatus::Suspect).count();
        let values: BTreeMap<Metric, Vec<f64>> = Metric::ALL
            .iter()
            .filter_map(|&m| {
                let v: Option<Vec<f64>> = ok.iter().map(|r| m.value(r)).collect();
                v.filter(|v| !v.is_empty()).map(|v| (m, v))
            })
            .collect();
        let metrics: BTreeMap<Metric, Stats> = values
            .iter()
            .filter_map(|(&m, v)| Some((m, describe(v)?)))
            .collect();
        let open_loop = test.spec.offered.is_some();
        let missing_runs: BTreeMap<Metric, u32> = Metric::ALL
            .iter()
            .filter(|m| open_loop || !m.open_loop_only())
            .map(|&m| {
                let lacking = ok.iter().filter(|r| m.value(r).is_none()).count();
                (m, u32::try_from(lacking).unwrap_or(u32::MAX))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let busiest: Option<Vec<f64>> = ok
            .iter()
            .map(|r| r.throughput.map(|t| t.tx_bytes_per_s.max(t.rx_bytes_per_s)))
            .collect();
        let throughput_cv = metrics.get(&Metric::Throughput).and_then(|s| s.cv);
        let w = &test.workload;
        TestFigures {
            name: test.name.clone(),
            workload: WorkloadKey::of(test),
            kind: w.kind.clone(),
            transaction_bytes: w.request_bytes.zip(w.response_bytes).map(|(q, r)| q.max(r)),
            users: test.workload.users,
            offered: OfferedFigures::of(test),
            client_placement: test.config.client_placement.clone(),
            server_placement: test.config.server_placement.clone(),
            retransmits: ok
                .iter()
                .filter_map(|r| r.tcp_info.as_ref().map(|t| t.retransmits))
                .collect(),
            runs: u32::try_from(test.runs.len()).unwrap_or(u32::MAX),
            ok_runs: u32::try_from(ok.len()).unwrap_or(u32::MAX),
            suspect_included: u32::try_from(suspect_included).unwrap_or(u32::MAX),
            suspect_runs: u32::try_from(
                test.runs
                    .iter()
                    .filter(|r| r.status == RunStatus::Suspect)
                    .count(),
            )
            .unwrap_or(u32::MAX),
            suspect_reasons: {
                let mut reasons: Vec<String> = Vec::new();
                for r in test.runs.iter().filter(|r| r.status == RunStatus::Suspect) {
                    for why in &r.status_reasons {
                        // The check's name says enough: its figures differ per run.
                        let name = why.split(':').next().unwrap_or(why).to_string();
                        if !reasons.contains(&name) {
                            reasons.push(name);
                        }
                    }
                }
                reasons
            },
            unstable: test.is_unstable(),
            throughput_cv,
            metrics,
            missing_runs,
            busiest_direction_bytes_per_s: busiest
                .as_ref()
                .and_then(|v| describe(v))
                .map(|s| s.mean),
            busiest_direction_interval: busiest
                .as_ref()
                .and_then(|v| describe(v))
                .and_then(interval),
            wire: LinkFigures::of(&ok),
            lost_transactions: {
                let lost: Vec<u64> = ok.iter().filter_map(|r| r.loss.map(|l| l.lost)).collect();
                (!lost.is_empty()).then(|| lost.iter().sum())
            },
            values,
            intervals: ok.iter().map(|r| (r.run, r.intervals.clone())).collect(),
        }
    }

    /// Why `metric` is not in [`metrics`](Self::metrics), naming the file
    /// `label`: "missing in 1 of 3 ok runs of hs", "not measured in hs";
    /// `None` when it is there (or there is no ok run).
    pub fn missing(&self, metric: Metric, label: &str) -> Option<String> {
        let n = *self.missing_runs.get(&metric)?;
        Some(if n >= self.ok_runs {
            format!("not measured in {label}")
        } else {
            format!("missing in {n} of {} ok runs of {label}", self.ok_runs)
        })
    }

    /// Whether the workload is request/response (rr, crr, mix): its
    /// throughput is counted in transactions per second, a stream's in bits.
    pub fn is_transactional(&self) -> bool {
        transactional(&self.kind)
    }

    /// The mean of `metric` over the ok runs.
    pub fn mean(&self, metric: Metric) -> Option<f64> {
        self.metrics.get(&metric).map(|s| s.mean)
    }

    /// The offered rate of an open-loop test, transactions per second;
    /// `None` for a closed-loop test.
    pub fn offered_rate(&self) -> Option<u64> {
        self.offered.map(|o| o.rate_per_s)
    }
}

/// Whether a workload of `kind` (as the results document names it) is
/// request/response: `rr`, `crr` and `mix` are; `stream` and `profile` are not.
pub(crate) fn transactional(kind: &str) -> bool {
    matches!(kind, "rr" | "crr" | "mix")
}

/// Every test of one results file, summarised, in the file's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileFigures {
    /// The file's label in the report.
    pub label: String,
    /// Its tests.
    pub tests: Vec<TestFigures>,
}

impl FileFigures {
    /// The figures of every test of `doc`, under `label`, over their ok runs.
    pub fn of(doc: &ResultsDocument, label: &str) -> Self {
        Self::over(doc, label, false)
    }

    /// The figures of every test of `doc`, under `label`, over their ok runs
    /// and, when `include_suspect`, their suspect runs too.
    pub fn over(doc: &ResultsDocument, label: &str, include_suspect: bool) -> Self {
        FileFigures {
            label: label.to_string(),
            tests: doc
                .tests
                .iter()
                .map(|t| TestFigures::over(t, include_suspect))
                .collect(),
        }
    }

    /// Suspect runs counted in the statistics, over every test.
    pub fn suspect_included(&self) -> u32 {
        self.tests.iter().map(|t| t.suspect_included).sum()
    }

    /// The test named `name`.
    pub fn test(&self, name: &str) -> Option<&TestFigures> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The tests of `workload`, by increasing user count (and offered
    /// rate, for open-loop tests).
    pub fn workload(&self, workload: &WorkloadKey) -> Vec<&TestFigures> {
        let mut tests: Vec<&TestFigures> = self
            .tests
            .iter()
            .filter(|t| &t.workload == workload)
            .collect();
        tests.sort_by_key(|t| (t.users, t.offered_rate()));
        tests
    }
}
