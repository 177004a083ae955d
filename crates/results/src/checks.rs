//! Every run is checked before it is believed. Pure functions over a run's
//! figures and the two sides' reports: no clock, no I/O.
//!
//! The checks tell a measurement fault (the number is not to be believed: a
//! stall, CPU sampled over another window than the traffic, a noisy host, an
//! interrupted run) from a finding about the path (loss, retransmits, a
//! saturated link), which is reported as a figure and never makes a run
//! suspect unless the user set a bound (`--max-loss`). Each bound and its
//! reasoning is in `docs/results-schema.md`; `host_noise` has a module of
//! its own (host_noise.rs).

use serde::{Deserialize, Serialize};

use linkperf_measured::{CpuShare, Environment, SideCpu, SideReport};
use linkperf_workload::{Protocol, TestSpec, Workload};

use crate::{Run, RunStatus};

/// Little's law for a closed loop without think time: every user always has
/// one transaction in flight, so throughput × mean transaction time equals the
/// users. A measurement that departs from it by more than this share counted
/// transactions that did not happen or missed ones that did (a stall whose
/// transactions ended after the window).
pub const LITTLE_TOLERANCE: f64 = 0.05;

/// A whole second whose received payload is below this share of the run's
/// median second is a stall (and one at 0 always is).
pub const STALL_SHARE: f64 = 0.20;

/// The CPU must be sampled within this share of the window of the traffic
/// window's edges...
pub const CPU_WINDOW_SHARE: f64 = 0.01;
/// ... or within this many seconds, whichever is larger (a sample takes a few
/// hundred microseconds; a scheduler's tick is up to 10 ms).
pub const CPU_WINDOW_FLOOR_S: f64 = 0.010;

/// The checks, in the order a run lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckName {
    /// Throughput × mean transaction time = users (closed-loop request/response).
    LittlesLaw,
    /// No whole second far below the run's median second.
    StalledInterval,
    /// CPU sampled at the traffic window's edges, on both sides.
    CpuWindow,
    /// Every flow made progress.
    FlowProgress,
    /// The host was quiet enough.
    HostNoise,
    /// The run completed and moved something.
    Interrupted,
    /// UDP loss within the user's bound.
    UdpLoss,
    /// An open loop's generator sent what was asked: the offered rate, and
    /// arrivals spaced as asked.
    ArrivalFidelity,
    /// An open loop's generator kept its schedule (it did not fall behind).
    ClientSaturated,
    /// An open loop's per-second rate and p99 hold without a trend.
    Stationarity,
}

impl CheckName {
    /// The name as written in the results.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::LittlesLaw => "littles_law",
            CheckName::StalledInterval => "stalled_interval",
            CheckName::CpuWindow => "cpu_window",
            CheckName::FlowProgress => "flow_progress",
            CheckName::HostNoise => "host_noise",
            CheckName::Interrupted => "interrupted",
            CheckName::UdpLoss => "udp_loss",
            CheckName::ArrivalFidelity => "arrival_fidelity",
            CheckName::ClientSaturated => "client_saturated",
            CheckName::Stationarity => "stationarity",
        }
    }
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Within its bound.
    Pass,
    /// Outside its bound.
    Fail,
    /// Does not apply to this run (`detail` says why).
    NotApplicable,
}

/// One validity check of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Which check.
    pub name: CheckName,
    /// Its outcome.
    pub status: CheckStatus,
    /// What was measured (its unit is in `detail`), when there is a figure.
    #[serde(default)]
    pub value: Option<f64>,
    /// The bound the value is held to, when there is one.
    #[serde(default)]
    pub bound: Option<f64>,
    /// In words: what was found, or why the check does not apply.
    pub detail: String,
}

impl Check {
    pub(crate) fn new(
        name: CheckName,
        status: CheckStatus,
        value: Option<f64>,
        bound: Option<f64>,
        detail: String,
    ) -> Self {
        Check {
            name,
            status,
            value,
            bound,
            detail,
        }
    }

    pub(crate) fn na(name: CheckName, why: impl Into<String>) -> Self {
        Check::new(name, CheckStatus::NotApplicable, None, None, why.into())
    }

    pub(crate) fn judged(
        name: CheckName,
        pass: bool,
        value: f64,
        bound: f64,
        detail: String,
    ) -> Self {
        let status = if pass {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        };
        Check::new(name, status, finite(value), finite(bound), detail)
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// What the checks need beyond the run itself.
#[derive(Debug, Clone)]
pub struct Judge<'a> {
    /// The test.
    pub spec: &'a TestSpec,
    /// The run was interrupted (Ctrl-C, the server stopping it, a deadline).
    pub interrupted: bool,
    /// The hosts the test ran on, with the CPU its processes used on each
    /// ([`host_cpus`]); `None` when the test's own CPU cannot be told from
    /// other work on them: other tests share the hosts by design at the same
    /// time (one pair of the lab's `--pairs`, one client group of several:
    /// their noise is judged on the aggregate instead), or a foreign server
    /// (a stock iperf3) runs on the client's host.
    pub hosts: Option<Vec<HostCpu>>,
    /// The largest loss rate (0 to 1) a UDP run may have, if the user set one.
    pub max_loss: Option<f64>,
}

/// One host of a test: its CPU counters over the window (from any side that
/// ran there) and the process CPU of every side of the test that ran there.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCpu {
    /// How to name it: `this host`, `the client's host`, `the server's host`.
    pub label: String,
    /// One side's CPU record taken on it (its /proc/stat breakdown is the host's).
    pub cpu: SideCpu,
    /// The sides' process CPU on it, summed, seconds.
    pub processes_s: f64,
    /// Of it, user time, seconds.
    pub processes_user_s: f64,
    /// The window its counters cover, seconds.
    pub window_s: f64,
    /// The time of each CPU the test's workers on it were pinned to (both
    /// sides' together); empty when a side on it ran free: the test's CPUs
    /// are then the whole host.
    pub pinned: Vec<CpuShare>,
}

/// The hosts of one run's two sides.
pub fn hosts_of_run(
    run: &Run,
    client_env: Option<&Environment>,
    server_env: Option<&Environment>,
) -> Vec<HostCpu> {
    let mut sides = Vec::new();
    if let Some(c) = &run.client {
        sides.push(("client", c, client_env));
    }
    if let Some(s) = &run.server {
        sides.push(("server", s, server_env));
    }
    host_cpus(&sides)
}

/// Whether every worker of a side was pinned, and its CPUs' time recorded.
fn pinned_all(report: &SideReport) -> bool {
    !report.pinned_cpus.is_empty()
        && !report.workers.is_empty()
        && report.workers.iter().all(|w| w.pinned.is_some())
}

/// The hosts of a test's sides (`(role, report, environment)`, role `client`
/// or `server`), those with the same boot id taken as one host. A side whose
/// host does not say its boot id is a host of its own.
pub fn host_cpus(sides: &[(&str, &SideReport, Option<&Environment>)]) -> Vec<HostCpu> {
    // Per host: its boot id, the roles on it, its CPU, and whether every
    // side on it was pinned.
    let mut hosts: Vec<(Option<String>, Vec<&str>, HostCpu, bool)> = Vec::new();
    for (role, report, env) in sides {
        let boot = env.and_then(|e| e.boot_id.clone());
        match hosts.iter_mut().find(|h| boot.is_some() && h.0 == boot) {
            Some(h) => {
                h.2.processes_s += report.cpu.process_s;
                h.2.processes_user_s += report.cpu.process_user_s;
                if !h.1.contains(role) {
                    h.1.push(role);
                }
                h.3 &= pinned_all(report);
                for c in &report.pinned_cpus {
                    if !h.2.pinned.iter().any(|p| p.cpu == c.cpu) {
                        h.2.pinned.push(*c);
                    }
                }
            }
            None => hosts.push((
                boot,
                vec![role],
                HostCpu {
                    label: String::new(),
                    cpu: report.cpu,
                    processes_s: report.cpu.process_s,
                    processes_user_s: report.cpu.process_user_s,
                    window_s: report.window_s,
                    pinned: report.pinned_cpus.clone(),
                },
                pinned_all(report),
            )),
        }
    }
    let single = hosts.len() == 1;
    hosts
        .into_iter()
        .map(|(_, roles, mut h, pinned)| {
            if !pinned {
                h.pinned.clear();
            }
            h.pinned.sort_by_key(|c| c.cpu);
            h.label = if single || roles.len() > 1 {
                "this host".to_string()
            } else {
                format!("the {}'s host", roles[0])
            };
            h
        })
        .collect()
}

/// Checks `run` and sets its status: an `ok` run with a failed check becomes
/// `suspect`; `failed` and `aborted` runs keep their status. A run some of
/// whose users the server never carried ([`unserved_users`]) is `failed`:
/// its figures are those of fewer users than asked. The reasons of every
/// failed check go in `status_reasons`, after the error if there is one.
pub fn judge_run(run: &mut Run, j: &Judge<'_>) {
    run.checks = checks(run, j);
    if let Some(u) = unserved_users(run, j.spec) {
        run.status = RunStatus::Failed;
        let said = u.to_string();
        run.error = Some(match run.error.take() {
            Some(e) => format!("{said}; {e}"),
            None => said,
        });
    }
    let failed: Vec<(CheckName, String)> = run
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .map(|c| (c.name, format!("{}: {}", c.name.as_str(), c.detail)))
        .collect();
    if run.status == RunStatus::Ok && !failed.is_empty() {
        run.status = RunStatus::Suspect;
    }
    if j.interrupted && run.status.severity() < RunStatus::Aborted.severity() {
        run.status = RunStatus::Aborted;
        if run.error.is_none() {
            run.error = Some("interrupted".into());
        }
    }
    let aborted = run.status == RunStatus::Aborted;
    let mut reasons: Vec<String> = Vec::new();
    if run.status != RunStatus::Ok {
        if let Some(e) = &run.error {
            // An interrupted run says so once: its error is why it was cut
            // (the `interrupted` check says the same in other words).
            if aborted && !e.contains("interrupted") {
                reasons.push(format!("interrupted: {e}"));
            } else {
                reasons.push(e.clone());
            }
        }
    }
    let said = aborted && run.error.is_some();
    reasons.extend(
        failed
            .into_iter()
            .filter(|(name, _)| !(said && *name == CheckName::Interrupted))
            .map(|(_, why)| why),
    );
    run.status_reasons = reasons;
}

/// Every check of `run`, in [`CheckName`] order.
pub fn checks(run: &Run, j: &Judge<'_>) -> Vec<Check> {
    let mut checks = vec![
        littles_law(run, j),
        stalled_interval(run),
        cpu_window(run, j),
        flow_progress(run, j),
        crate::host_noise::host_noise(run, j),
        interrupted(run, j),
        udp_loss(run, j),
    ];
    // An open loop's schedule is checked too (a closed loop's list is as it was).
    if j.spec.offered.is_some() {
        checks.extend(crate::open_loop::checks(run, j.spec));
    }
    checks
}

/// Users of a run that the server never carried: it accepted no connection
/// of theirs (a server out of descriptors, say, that left them waiting in
/// its backlog), so the run measured fewer users than it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unserved {
    /// Users the server carried no flow of.
    pub unserved: u32,
    /// Users asked for.
    pub users: u32,
}

impl std::fmt::Display for Unserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} users were never served: the server carried no connection of theirs, so \
             the figures are not those of {} users",
            self.unserved, self.users, self.users
        )
    }
}

/// How many of the run's users its server never carried, where it can be
/// told: a TCP or Unix workload (not a profile, not UDP, whose flows the
/// server knows only by their datagrams) whose server reported its flows.
/// `None` when every user was carried or it cannot be told.
pub fn unserved_users(run: &Run, spec: &TestSpec) -> Option<Unserved> {
    if spec.protocol == Protocol::Udp || is_profile(spec) || spec.users == 0 {
        return None;
    }
    let server = run.server.as_ref()?;
    // No per-flow counts at all: a side that does not report them (as for
    // flow_progress), not one that carried no one.
    if server.flows.as_slice().is_empty() {
        return None;
    }
    let carried = server
        .flows
        .as_slice()
        .iter()
        .filter(|f| f.flow < spec.users)
        .count();
    let unserved = spec
        .users
        .saturating_sub(u32::try_from(carried).unwrap_or(u32::MAX));
    (unserved > 0).then_some(Unserved {
        unserved,
        users: spec.users,
    })
}

fn is_profile(spec: &TestSpec) -> bool {
    matches!(spec.workload, Workload::Profile { .. })
}

fn littles_law(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::LittlesLaw;
    if j.spec.offered.is_some() {
        return Check::na(
            name,
            "an open loop's users send on schedule, not when their answers come: it is not a closed loop",
        );
    }
    match &j.spec.workload {
        Workload::Rr { .. } | Workload::Mix { .. } => {}
        Workload::Crr { .. } => {
            return Check::na(
                name,
                "connect-per-transaction flows spend time connecting and closing outside their transactions",
            )
        }
        Workload::Stream { .. } => return Check::na(name, "streams are not a closed loop"),
        Workload::Profile { .. } => {
            return Check::na(name, "a profile's users may think and wait between transactions")
        }
    }
    let Some(client) = &run.client else {
        return Check::na(name, "nothing was measured");
    };
    let window = client.window_s;
    let users = f64::from(j.spec.users.max(1));
    if window <= 0.0 {
        return Check::na(name, "the window has no length");
    }
    let (txns, mean_s) = match &client.latency {
        Some(l) => (l.count as f64, l.mean / 1e6),
        None => (0.0, 0.0),
    };
    // A lost UDP transaction occupied its user for the timeout.
    let lost = if j.spec.protocol == Protocol::Udp {
        client.errors as f64
    } else {
        0.0
    };
    let timeout_s = j.spec.udp_timeout.as_secs_f64();
    let in_flight = (txns * mean_s + lost * timeout_s) / window;
    let ratio = in_flight / users;
    // A transaction straddling either edge of the window is counted whole or
    // not at all: up to about one transaction time per window either way.
    let longest_s = mean_s.max(if lost > 0.0 { timeout_s } else { 0.0 });
    let bound = LITTLE_TOLERANCE + longest_s / window;
    let pass = (ratio - 1.0).abs() <= bound;
    Check::judged(
        name,
        pass,
        ratio,
        bound,
        format!(
            "throughput × mean transaction time / users = {ratio:.3} ({:.0} transactions/s × {:.1} µs{} over {} user{}); a closed loop keeps it within ±{:.1} % of 1",
            txns / window,
            mean_s * 1e6,
            if lost > 0.0 {
                format!(", {lost:.0} lost at {:.0} ms", timeout_s * 1e3)
            } else {
                String::new()
            },
            j.spec.users,
            if j.spec.users == 1 { "" } else { "s" },
            bound * 100.0
        ),
    )
}

fn stalled_interval(run: &Run) -> Check {
    let name = CheckName::StalledInterval;
    // Whole seconds only: the last may be a fraction of one.
    let seconds: Vec<(f64, u64)> = run
        .intervals
        .iter()
        .map(|i| &i.second)
        .filter(|i| i.length_s >= 0.999)
        .map(|i| (i.start_s, i.tx_bytes + i.rx_bytes))
        .collect();
    if seconds.len() < 2 {
        return Check::na(name, "fewer than two whole seconds in the window");
    }
    let mut sorted: Vec<u64> = seconds.iter().map(|s| s.1).collect();
    sorted.sort_unstable();
    let median = sorted[(sorted.len() - 1) / 2] as f64;
    let (worst_at, worst) = seconds
        .iter()
        .copied()
        .min_by_key(|s| s.1)
        .unwrap_or((0.0, 0));
    let share = if median > 0.0 {
        worst as f64 / median
    } else {
        0.0
    };
    let pass = worst > 0 && share >= STALL_SHARE;
    let detail = if median > 0.0 {
        format!(
            "the slowest second (from {worst_at:.0} s) moved {worst} payload bytes, {:.0} % of the median second's {median:.0}; each must reach {:.0} % and none may be empty",
            share * 100.0,
            STALL_SHARE * 100.0
        )
    } else {
        // At least half of the seconds moved nothing: there is no median
        // second to compare with, only how much of the window stalled.
        let empty = seconds.iter().filter(|s| s.1 == 0).count();
        let first = seconds.iter().find(|s| s.1 == 0).map_or(0.0, |s| s.0);
        format!(
            "{empty} of the window's {} whole seconds moved no payload (the first from {first:.0} s): most of the window stalled; none may be empty",
            seconds.len()
        )
    };
    Check::judged(name, pass, share, STALL_SHARE, detail)
}

/// How far a side's CPU samples were from the traffic window's edges,
/// seconds (the worse edge), if it says.
fn cpu_offset(cpu: &SideCpu, window: f64) -> f64 {
    match (cpu.opened_late_s, cpu.closed_late_s) {
        (Some(a), Some(b)) => a.abs().max(b.abs()),
        _ => (cpu.window_s - window).abs(),
    }
}

/// Whether the run was cut before its window closed.
fn cut(run: &Run, j: &Judge<'_>) -> bool {
    j.interrupted || run.status == RunStatus::Aborted
}

fn cpu_window(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::CpuWindow;
    let (Some(cpu), Some(client)) = (&run.cpu, &run.client) else {
        return Check::na(name, "no CPU was measured");
    };
    if cut(run, j) {
        // Each side took its CPU when it stopped, not at the window's
        // planned close: the edge the check measures from never came.
        return Check::na(
            name,
            "the run was interrupted: each side sampled its CPU when it stopped, not at the window's close",
        );
    }
    let window = client.window_s;
    let bound = (CPU_WINDOW_SHARE * window).max(CPU_WINDOW_FLOOR_S);
    let mut sides = vec![("client", cpu_offset(&cpu.client, window))];
    if let (Some(s), Some(server)) = (&cpu.server, &run.server) {
        sides.push(("server", cpu_offset(s, server.window_s)));
    }
    let (side, worst) =
        sides
            .iter()
            .copied()
            .fold(("client", 0.0f64), |a, b| if b.1 > a.1 { b } else { a });
    Check::judged(
        name,
        worst <= bound,
        worst,
        bound,
        format!(
            "the {side}'s CPU was sampled {:.1} ms from the traffic window's edge (at most {:.1} ms: 1 % of the window or 10 ms)",
            worst * 1e3,
            bound * 1e3
        ),
    )
}

/// The shortest part of a cut window in which a flow without progress is
/// a finding rather than a flow that had not started its first transaction.
pub const CUT_WINDOW_FLOOR_S: f64 = 1.0;

fn flow_progress(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::FlowProgress;
    let Some(f) = &run.flows else {
        return Check::na(
            name,
            "no per-flow counts (a profile, or a side that does not report them)",
        );
    };
    let ran = run.client.as_ref().map_or(0.0, |c| c.window_s);
    if cut(run, j) && ran < CUT_WINDOW_FLOOR_S {
        return Check::na(
            name,
            format!(
                "the run was interrupted {:.0} ms into its window: too short to tell a flow without progress",
                ran * 1e3
            ),
        );
    }
    let stuck = f64::from(f.no_progress);
    Check::judged(
        name,
        f.no_progress == 0,
        stuck,
        0.0,
        format!(
            "{} of {} flows moved nothing in the window ({})",
            f.no_progress, f.flows, f.measure
        ),
    )
}

fn interrupted(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::Interrupted;
    if j.interrupted || run.status == RunStatus::Aborted {
        return Check::new(
            name,
            CheckStatus::Fail,
            None,
            None,
            "the run was interrupted before its window completed".into(),
        );
    }
    if run.status == RunStatus::Failed && run.client.is_none() {
        return Check::na(name, "the run did not take place");
    }
    let moved = run.payload.map_or(0, |p| {
        p.client_to_server
            .received
            .unwrap_or(p.client_to_server.sent)
            .saturating_add(
                p.server_to_client
                    .received
                    .unwrap_or(p.server_to_client.sent),
            )
    });
    let txns = run.client.as_ref().map_or(0, |c| c.transactions)
        + run.server.as_ref().map_or(0, |s| s.transactions);
    let pass = moved > 0 || txns > 0;
    Check::new(
        name,
        if pass {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        },
        Some(moved as f64),
        None,
        if pass {
            format!("the window completed; {moved} payload bytes received")
        } else {
            "the window completed with no transaction and no byte received".into()
        },
    )
}

fn udp_loss(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::UdpLoss;
    if j.spec.protocol != Protocol::Udp || is_profile(j.spec) {
        return Check::na(name, "not a UDP workload");
    }
    // Request/response: transactions unanswered; streams: datagrams missing
    // at their receivers.
    let (rate, what) = if j.spec.is_udp_stream() {
        let Some(u) = &run.udp else {
            return Check::na(name, "nothing was measured");
        };
        let (lost, expected) = u.lost_of_expected();
        (
            u.loss_rate,
            format!(
                "{lost} of {expected} datagrams lost at their receivers ({:.2} %",
                u.loss_rate * 100.0
            ),
        )
    } else {
        let Some(loss) = &run.loss else {
            return Check::na(name, "nothing was measured");
        };
        (
            loss.rate,
            format!(
                "{} of {} transactions lost ({:.2} %",
                loss.lost,
                loss.lost + loss.answered,
                loss.rate * 100.0
            ),
        )
    };
    match j.max_loss {
        None => Check::new(
            name,
            CheckStatus::Pass,
            Some(rate),
            None,
            format!("{what}); no loss bound set: reported, not judged"),
        ),
        Some(max) => Check::judged(
            name,
            rate <= max,
            rate,
            max,
            format!("{what}; at most {:.2} % allowed)", max * 100.0),
        ),
    }
}

/// The loss of a UDP run from its client's report: each error of a UDP
/// client is a transaction that went unanswered.
pub(crate) fn udp_loss_of(client: &SideReport) -> crate::Loss {
    crate::Loss::of(client.errors, client.transactions)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_measured::{
        BusyMethod, FlowCount, FlowCounts, Interval, LatencySummary, ProcStatBreakdown,
        ProcessMethod, Totals,
    };
    use linkperf_workload::{Protocol, TestSpec};

    use super::*;
    use crate::derive_run;

    fn spec(w: &str, p: Protocol, users: u32) -> TestSpec {
        TestSpec::new(w.parse().unwrap(), p, users, Duration::from_secs(3))
    }

    fn cpu(process_s: f64, busy_s: f64) -> SideCpu {
        SideCpu {
            process_s,
            process_user_s: process_s / 2.0,
            process_system_s: process_s / 2.0,
            process_method: ProcessMethod::RusageThreadSum,
            system_busy_s: busy_s,
            system_busy_method: BusyMethod::ProcStat,
            softirq_s: 0.0,
            proc_stat: ProcStatBreakdown {
                user_s: busy_s / 2.0,
                system_s: busy_s / 2.0,
                ..Default::default()
            },
            cpus: 2,
            window_s: 3.0,
            opened_late_s: Some(0.001),
            closed_late_s: Some(0.002),
        }
    }

    /// A side of a 3 s window with `per_second` transactions (2 payload bytes
    /// each) in each second, `users` flows sharing them, a mean transaction
    /// time of `mean_us`.
    fn side(per_second: [u64; 3], users: u32, mean_us: f64, cpu: SideCpu) -> SideReport {
        let txns: u64 = per_second.iter().sum();
        SideReport {
            window_s: 3.0,
            tx_bytes: txns,
            rx_bytes: txns,
            transactions: txns,
            errors: 0,
            totals: Totals {
                tx_bytes: txns,
                rx_bytes: txns,
                transactions: txns,
            },
            latency: (txns > 0).then_some(LatencySummary {
                count: txns,
                mean: mean_us,
                p50: mean_us,
                p90: mean_us,
                p99: mean_us,
                p999: mean_us,
                min: mean_us,
                max: mean_us,
            }),
            intervals: per_second
                .iter()
                .enumerate()
                .map(|(i, &n)| Interval {
                    start_s: i as f64,
                    length_s: 1.0,
                    tx_bytes: n,
                    rx_bytes: n,
                    transactions: n,
                    ..Default::default()
                })
                .collect(),
            cpu,
            tcp_info: None,
            workers: Vec::new(),
            busy_poll: false,
            connections: u64::from(users),
            error_samples: Vec::new(),
            profile: None,
            latency_histogram: None,
            flows: FlowCounts::from_counts(
                (0..users)
                    .map(|f| FlowCount {
                        flow: f,
                        transactions: txns / u64::from(users),
                        tx_bytes: txns / u64::from(users),
                        rx_bytes: txns / u64::from(users),
                    })
                    .collect(),
            ),
            udp: None,
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
        }
    }

    fn one_host_env() -> Environment {
        Environment {
            boot_id: Some("b00t".into()),
            ..Environment::default()
        }
    }

    fn judged(spec: &TestSpec, client: SideReport, server: SideReport, interrupted: bool) -> Run {
        let mut run = derive_run(1, String::new(), spec, client, Some(server));
        let env = one_host_env();
        let hosts = hosts_of_run(&run, Some(&env), Some(&env));
        judge_run(
            &mut run,
            &Judge {
                spec,
                interrupted,
                hosts: Some(hosts),
                max_loss: None,
            },
        );
        run
    }

    fn check(run: &Run, name: CheckName) -> &Check {
        run.checks.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn a_clean_closed_loop_passes_every_check() {
        // 25 users, 40 µs each: 625,000 transactions/s keep 25 in flight.
        let s = spec("rr1c-1x1", Protocol::Tcp, 25);
        let per = [625_000, 625_000, 625_000];
        let run = judged(
            &s,
            side(per, 25, 40.0, cpu(1.0, 2.2)),
            side(per, 25, 0.0, cpu(1.0, 2.2)),
            false,
        );
        assert_eq!(run.status, RunStatus::Ok, "{:#?}", run.checks);
        assert!(run.status_reasons.is_empty());
        assert_eq!(run.checks.len(), 7);
        let l = check(&run, CheckName::LittlesLaw);
        assert!((l.value.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(
            check(&run, CheckName::UdpLoss).status,
            CheckStatus::NotApplicable
        );
    }

    #[test]
    fn the_studys_stalled_run_is_suspect_by_littles_law_and_its_stall() {
        // veth rr1c-1x1 at 25 users: 32,189 transactions in the first second,
        // none after, a mean of 207 µs: 10,730/s × 207 µs is 2.2 users of 25.
        let s = spec("rr1c-1x1", Protocol::Tcp, 25);
        let per = [32_189, 0, 0];
        let run = judged(
            &s,
            side(per, 25, 207.0, cpu(0.3, 0.7)),
            side(per, 25, 0.0, cpu(0.3, 0.7)),
            false,
        );
        assert_eq!(run.status, RunStatus::Suspect);
        let l = check(&run, CheckName::LittlesLaw);
        assert_eq!(l.status, CheckStatus::Fail);
        assert!((l.value.unwrap() - 32_189.0 / 3.0 * 207e-6 / 25.0).abs() < 1e-6);
        assert_eq!(
            check(&run, CheckName::StalledInterval).status,
            CheckStatus::Fail
        );
        assert!(run
            .status_reasons
            .iter()
            .any(|r| r.starts_with("littles_law: ")));
        assert!(run
            .status_reasons
            .iter()
            .any(|r| r.starts_with("stalled_interval: ")));
    }

    #[test]
    fn a_slow_second_is_a_stall_a_busy_one_is_not() {
        let s = spec("rr1c-1x1", Protocol::Tcp, 1);
        // 1 user at 100 µs: 10,000/s. A second at 19 % of the median stalls.
        let run = judged(
            &s,
            side(
                [10_000, 1_900, 10_000],
                1,
                100.0 * 3.0 * 10_000.0 / 21_900.0,
                cpu(0.5, 1.1),
            ),
            side([10_000, 1_900, 10_000], 1, 0.0, cpu(0.5, 1.1)),
            false,
        );
        let c = check(&run, CheckName::StalledInterval);
        assert_eq!(c.status, CheckStatus::Fail, "{c:?}");
        assert!((c.value.unwrap() - 0.19).abs() < 1e-9);
        let run = judged(
            &s,
            side(
                [10_000, 2_100, 10_000],
                1,
                100.0 * 3.0 * 10_000.0 / 22_100.0,
                cpu(0.5, 1.1),
            ),
            side([10_000, 2_100, 10_000], 1, 0.0, cpu(0.5, 1.1)),
            false,
        );
        assert_eq!(
            check(&run, CheckName::StalledInterval).status,
            CheckStatus::Pass
        );
    }

    #[test]
    fn cpu_sampled_late_breaks_the_window() {
        let s = spec("stream-up:30k", Protocol::Tcp, 1);
        let mut late = cpu(0.5, 1.1);
        // 5.04 s of CPU for a 3 s test: the close sampled 2 s late.
        late.closed_late_s = Some(2.04);
        let run = judged(
            &s,
            side([100, 100, 100], 1, 10.0, cpu(0.5, 1.1)),
            side([100, 100, 100], 1, 0.0, late),
            false,
        );
        let c = check(&run, CheckName::CpuWindow);
        assert_eq!(c.status, CheckStatus::Fail);
        assert!(c.detail.contains("server"), "{}", c.detail);
        assert_eq!(c.bound, Some(0.03));
        // Files without the sample instants: the window lengths are compared.
        let mut old = cpu(0.5, 1.1);
        old.opened_late_s = None;
        old.closed_late_s = None;
        old.window_s = 3.005;
        let run = judged(
            &s,
            side([100, 100, 100], 1, 10.0, old),
            side([100, 100, 100], 1, 0.0, cpu(0.5, 1.1)),
            false,
        );
        assert_eq!(check(&run, CheckName::CpuWindow).status, CheckStatus::Pass);
    }

    #[test]
    fn other_work_on_the_host_is_noise_the_tests_own_is_not() {
        let s = spec("rr1c-1x1", Protocol::Tcp, 1);
        let per = [10_000, 10_000, 10_000];
        // One host: 2 CPUs × 3 s; the sides' processes 1.0 + 1.0 s, busy 2.4 s.
        let quiet = judged(
            &s,
            side(per, 1, 100.0, cpu(1.0, 2.4)),
            side(per, 1, 0.0, cpu(1.0, 2.4)),
            false,
        );
        let c = check(&quiet, CheckName::HostNoise);
        assert_eq!(c.status, CheckStatus::Pass, "{c:?}");
        // 0.4 s unaccounted, less 2 ticks × 2 CPUs the counters cannot tell.
        assert!((c.value.unwrap() - 0.36 / 6.0).abs() < 1e-9, "{c:?}");
        // A hog on the host: busy 5.5 s of which the test's 2.
        let busy = judged(
            &s,
            side(per, 1, 100.0, cpu(1.0, 5.5)),
            side(per, 1, 0.0, cpu(1.0, 5.5)),
            false,
        );
        let c = check(&busy, CheckName::HostNoise);
        assert_eq!(c.status, CheckStatus::Fail);
        assert!(c.detail.contains("this host"), "{}", c.detail);
        assert_eq!(busy.status, RunStatus::Suspect);
        // Two hosts: each side's own process against its own host.
        let mut run = derive_run(
            1,
            String::new(),
            &s,
            side(per, 1, 100.0, cpu(1.0, 2.4)),
            Some(side(per, 1, 0.0, cpu(1.0, 2.4))),
        );
        let hosts = hosts_of_run(&run, None, None);
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[1].label, "the server's host");
        judge_run(
            &mut run,
            &Judge {
                spec: &s,
                interrupted: false,
                hosts: Some(hosts),
                max_loss: None,
            },
        );
        let c = check(&run, CheckName::HostNoise);
        assert_eq!(
            c.status,
            CheckStatus::Fail,
            "1.4 s of 6 on each host: {c:?}"
        );
        // Shared by design: not judged.
        let mut run = derive_run(
            1,
            String::new(),
            &s,
            side(per, 1, 100.0, cpu(1.0, 5.5)),
            None,
        );
        judge_run(
            &mut run,
            &Judge {
                spec: &s,
                interrupted: false,
                hosts: None,
                max_loss: None,
            },
        );
        assert_eq!(
            check(&run, CheckName::HostNoise).status,
            CheckStatus::NotApplicable
        );
    }

    #[test]
    fn nothing_moved_or_interrupted_is_never_ok() {
        let s = spec("rr1c-200x1000", Protocol::Tcp, 4);
        let run = judged(
            &s,
            side([0, 0, 0], 4, 0.0, cpu(0.0, 0.1)),
            side([0, 0, 0], 4, 0.0, cpu(0.0, 0.1)),
            false,
        );
        assert_ne!(run.status, RunStatus::Ok);
        assert_eq!(
            check(&run, CheckName::Interrupted).status,
            CheckStatus::Fail
        );
        assert_eq!(
            check(&run, CheckName::FlowProgress).status,
            CheckStatus::Fail
        );
        let per = [1000, 1000, 1000];
        let run = judged(
            &s,
            side(per, 4, 4.0 * 3.0 / 3000.0 * 1e6, cpu(0.5, 1.2)),
            side(per, 4, 0.0, cpu(0.5, 1.2)),
            true,
        );
        assert_eq!(run.status, RunStatus::Aborted);
        assert_eq!(run.error.as_deref(), Some("interrupted"));
        assert_eq!(run.status_reasons[0], "interrupted");
        assert_eq!(
            check(&run, CheckName::Interrupted).status,
            CheckStatus::Fail
        );
        // Said once: the check that fails with it adds nothing.
        let said = |run: &Run| {
            run.status_reasons
                .iter()
                .filter(|r| r.contains("interrupted"))
                .count()
        };
        assert_eq!(said(&run), 1, "{:?}", run.status_reasons);
    }

    /// Issue 35: an interrupted run is judged on the part that ran, and
    /// fails nothing its cut window alone would fail.
    #[test]
    fn an_interrupted_run_fails_no_check_its_cut_window_alone_would_fail() {
        let s = spec("rr1c-200x1000", Protocol::Tcp, 4);
        let per = [1000, 1000, 1000];
        let mean = 4.0 * 3.0 / 3000.0 * 1e6;
        // The CPU taken at the stop, 6.5 s before the window's planned close.
        let mut c = cpu(0.5, 1.2);
        c.closed_late_s = Some(-6.5);
        let run = judged(&s, side(per, 4, mean, c), side(per, 4, 0.0, c), true);
        assert_eq!(run.status, RunStatus::Aborted);
        assert_eq!(
            check(&run, CheckName::CpuWindow).status,
            CheckStatus::NotApplicable
        );
        assert_eq!(
            check(&run, CheckName::LittlesLaw).status,
            CheckStatus::Pass,
            "judged on the part that ran"
        );
        assert_eq!(run.status_reasons, ["interrupted"]);

        // Stopped by the server: its reason, marked as the interruption.
        let mut run = derive_run(1, String::new(), &s, side(per, 4, mean, c), None);
        run.error = Some("the server stopped the test: the server is shutting down".into());
        run.status = RunStatus::Aborted;
        judge_run(
            &mut run,
            &Judge {
                spec: &s,
                interrupted: true,
                hosts: None,
                max_loss: None,
            },
        );
        assert_eq!(
            run.status_reasons,
            ["interrupted: the server stopped the test: the server is shutting down"]
        );

        // A cut shorter than a second cannot tell a flow that never moved.
        let mut short = side(per, 4, mean, c);
        short.window_s = 0.2;
        short.flows = FlowCounts::from_counts(
            (0..4)
                .map(|f| FlowCount {
                    flow: f,
                    transactions: if f < 2 { 1500 } else { 0 },
                    tx_bytes: 0,
                    rx_bytes: 0,
                })
                .collect(),
        );
        let run = judged(&s, short, side(per, 4, 0.0, c), true);
        assert_eq!(
            check(&run, CheckName::FlowProgress).status,
            CheckStatus::NotApplicable
        );
    }

    #[test]
    fn users_the_server_never_carried_fail_the_run_whatever_the_checks_say() {
        // 300 users asked for; the server carried 101 of them (the others
        // waited in its backlog while it was out of descriptors).
        let s = spec("rr1c-1x1", Protocol::Tcp, 300);
        let per = [300_000, 300_000, 300_000];
        let client = side(per, 300, 3.0 / 300_000.0 * 1e6, cpu(0.5, 1.2));
        let mut server = side(per, 300, 0.0, cpu(0.5, 1.2));
        let carried: Vec<FlowCount> = server.flows.as_slice()[..101].to_vec();
        server.flows = FlowCounts::from_counts(carried);
        let run = judged(&s, client, server, false);
        assert_eq!(run.status, RunStatus::Failed, "{:?}", run.status_reasons);
        let e = run.error.as_deref().unwrap();
        assert!(e.starts_with("199 of 300 users were never served"), "{e}");
        assert_eq!(run.status_reasons[0], e);
        // All carried: nothing to say.
        let all = side(per, 300, 0.0, cpu(0.5, 1.2));
        let ok = judged(&s, side(per, 300, 10.0, cpu(0.5, 1.2)), all, false);
        assert_ne!(ok.status, RunStatus::Failed);
        assert_eq!(unserved_users(&ok, &s), None);
        // UDP's flows are known by their datagrams only: not told.
        let u = spec("rr1c-1x1", Protocol::Udp, 300);
        let mut none = side(per, 300, 0.0, cpu(0.5, 1.2));
        none.flows = FlowCounts::default();
        let r = judged(&u, side(per, 300, 10.0, cpu(0.5, 1.2)), none.clone(), false);
        assert_eq!(unserved_users(&r, &u), None);
        // A server that reports no per-flow counts says nothing of its users.
        let r = judged(&s, side(per, 300, 10.0, cpu(0.5, 1.2)), none, false);
        assert_eq!(unserved_users(&r, &s), None);
    }

    #[test]
    fn a_window_that_mostly_stalled_says_so_not_a_share_of_nothing() {
        let s = spec("rr1c-1x1", Protocol::Tcp, 1);
        let per = [0, 0, 30_000];
        let run = judged(
            &s,
            side(per, 1, 100.0, cpu(0.5, 1.2)),
            side(per, 1, 0.0, cpu(0.5, 1.2)),
            false,
        );
        let c = check(&run, CheckName::StalledInterval);
        assert_eq!(c.status, CheckStatus::Fail);
        assert!(
            c.detail.starts_with(
                "2 of the window's 3 whole seconds moved no payload (the first from 0 s)"
            ),
            "{}",
            c.detail
        );
        assert!(!c.detail.contains("median second's 0"), "{}", c.detail);
    }

    #[test]
    fn a_flow_without_progress_fails_its_check() {
        let s = spec("rr1c-1x1", Protocol::Tcp, 3);
        let per = [30_000, 30_000, 30_000];
        let mut client = side(per, 3, 3.0 / 30_000.0 * 1e6, cpu(0.5, 1.2));
        // Flow 2 never reported: it counts as 0.
        client.flows = FlowCounts::from_counts(vec![
            FlowCount {
                flow: 0,
                transactions: 45_000,
                tx_bytes: 1,
                rx_bytes: 1,
            },
            FlowCount {
                flow: 1,
                transactions: 45_000,
                tx_bytes: 1,
                rx_bytes: 1,
            },
        ]);
        let run = judged(&s, client, side(per, 3, 0.0, cpu(0.5, 1.2)), false);
        let f = run.flows.unwrap();
        assert_eq!(
            (f.flows, f.no_progress, f.min, f.max),
            (3, 1, 0.0, 45_000.0)
        );
        assert_eq!(
            check(&run, CheckName::FlowProgress).status,
            CheckStatus::Fail
        );
    }

    #[test]
    fn udp_loss_is_reported_and_judged_only_against_a_bound() {
        let s = spec("rr1c-1x1", Protocol::Udp, 1);
        let per = [1000, 1000, 1000];
        let mut client = side(per, 1, 900.0, cpu(0.5, 1.2));
        client.errors = 100; // 100 lost at 250 ms: 25 s of a user's time... over 3 s
        let mut run = derive_run(
            1,
            String::new(),
            &s,
            client,
            Some(side(per, 1, 0.0, cpu(0.5, 1.2))),
        );
        let loss = run.loss.unwrap();
        assert_eq!((loss.lost, loss.answered), (100, 3000));
        for (max, status) in [
            (None, CheckStatus::Pass),
            (Some(0.05), CheckStatus::Pass),
            (Some(0.01), CheckStatus::Fail),
        ] {
            judge_run(
                &mut run,
                &Judge {
                    spec: &s,
                    interrupted: false,
                    hosts: None,
                    max_loss: max,
                },
            );
            let c = check(&run, CheckName::UdpLoss);
            assert_eq!(c.status, status, "{max:?}: {c:?}");
            assert!((c.value.unwrap() - 100.0 / 3100.0).abs() < 1e-12);
        }
        // A lost transaction's timeout is its time in Little's law.
        let l = check(&run, CheckName::LittlesLaw);
        let expected = (3000.0 * 900e-6 + 100.0 * 0.25) / 3.0;
        assert!((l.value.unwrap() - expected).abs() < 1e-9, "{l:?}");
    }

    #[test]
    fn streams_and_connect_per_transaction_skip_littles_law() {
        for w in ["str-readx30k", "crr:64x64"] {
            let s = spec(w, Protocol::Tcp, 2);
            let per = [100, 100, 100];
            let run = judged(
                &s,
                side(per, 2, 10.0, cpu(0.5, 1.2)),
                side(per, 2, 0.0, cpu(0.5, 1.2)),
                false,
            );
            assert_eq!(
                check(&run, CheckName::LittlesLaw).status,
                CheckStatus::NotApplicable,
                "{w}"
            );
        }
    }

    #[test]
    fn a_window_too_short_for_the_ticks_is_not_judged_for_noise() {
        let s = spec("rr1c-1x1", Protocol::Tcp, 1);
        let per = [10_000, 10_000, 10_000];
        let mut c = side(per, 1, 100.0, cpu(0.001, 0.01));
        let mut v = side(per, 1, 0.0, cpu(0.001, 0.01));
        // 5 ms of window: one tick of /proc/stat is twice the host's time.
        for r in [&mut c, &mut v] {
            r.window_s = 0.005;
            r.cpu.window_s = 0.005;
        }
        let run = judged(&s, c, v, false);
        let n = check(&run, CheckName::HostNoise);
        assert_eq!(n.status, CheckStatus::NotApplicable, "{n:?}");
        assert!(n.detail.contains("too short"), "{}", n.detail);
    }
}
