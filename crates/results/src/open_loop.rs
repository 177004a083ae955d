//! An open-loop run: what was offered, what the generator sent and when,
//! and what became of the arrivals (derived from the client's record of its
//! schedule), and the checks that the schedule was kept. A run's
//! `transaction_time_us` is timed from when each transaction was due; its
//! service time, from when it was sent, stands beside it here.

use serde::{Deserialize, Serialize};

use linkperf_measured::{LatencySummary, OpenLoopRecord, SideReport};
use linkperf_metrics::{
    arrival_fidelity as fidelity, quantile_interval, stationarity, ArrivalProcess, ArrivalShape,
    LatencyRecorder, MIN_TREND_POINTS, RATE_NOISE_Z,
};
use linkperf_workload::{Arrival, TestSpec};

use crate::checks::{Check, CheckName};
use crate::Run;

/// How far the achieved rate may stray from the offered one: 1 %.
pub const RATE_TOLERANCE: f64 = 0.01;
/// The share of arrivals the generator may send late with room on their
/// connection (more than a millisecond after they were due), or drop,
/// before the run is called client-saturated: 1 %.
pub const BEHIND_BOUND: f64 = 0.01;

/// An open-loop run's schedule and what it came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Transactions offered per second, over all users.
    pub offered_per_s: f64,
    /// How their arrivals were spaced.
    pub arrival: Arrival,
    /// Transactions each connection could have outstanding.
    pub max_outstanding: u32,
    /// Transactions sent per second over the window.
    pub achieved_per_s: f64,
    /// Arrivals due in the window.
    pub arrivals: u64,
    /// Of them, sent.
    pub sent: u64,
    /// Arrivals that waited for an answer on their connection (its
    /// outstanding transactions at their bound): the server or the path slow.
    pub late: u64,
    /// Arrivals dropped: more than 2 s of arrivals were waiting on their
    /// connection.
    pub dropped: u64,
    /// Arrivals the generator sent more than 1 ms after they were due with
    /// room on their connection: it fell behind.
    pub behind: u64,
    /// Transaction time from the send, µs (the run's transaction time runs
    /// from when each was due).
    pub service_time_us: Option<LatencySummary>,
    /// How long after it was due each arrival with room went, µs.
    pub pacing_error_us: Option<LatencySummary>,
    /// 95 % confidence intervals of the transaction time's percentiles, by
    /// order statistics (distribution-free; they take the transactions as
    /// independent, so they understate the uncertainty of correlated
    /// times), µs; a percentile is absent when too few transactions were
    /// timed for a two-sided interval.
    #[serde(default)]
    pub transaction_time_ci_us: PercentileIntervals,
}

/// Confidence intervals of percentiles, `[low, high]`, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PercentileIntervals {
    /// The median's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<[f64; 2]>,
    /// The 99th percentile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<[f64; 2]>,
    /// The 99.9th percentile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999: Option<[f64; 2]>,
}

/// The confidence of the percentiles' intervals.
pub const CI_CONFIDENCE: f64 = 0.95;

fn intervals(client: &SideReport) -> PercentileIntervals {
    let recorder = match (&client.latency, &client.latency_histogram) {
        (Some(s), Some(h)) => LatencyRecorder::from_report(s, h).ok(),
        _ => None,
    };
    let Some(r) = recorder else {
        return PercentileIntervals::default();
    };
    let ci = |p: f64| quantile_interval(&r, p, CI_CONFIDENCE).map(|(lo, hi)| [lo, hi]);
    PercentileIntervals {
        p50: ci(0.50),
        p99: ci(0.99),
        p999: ci(0.999),
    }
}

/// The open-loop block of a run of `spec`, from the client's record.
pub fn open_loop(spec: &TestSpec, client: &SideReport) -> Option<OpenLoop> {
    let load = spec.offered.as_ref()?;
    let r: &OpenLoopRecord = client.open_loop.as_ref()?;
    let window = client.window_s;
    Some(OpenLoop {
        offered_per_s: load.rate.0 as f64,
        arrival: load.arrival,
        max_outstanding: load.max_outstanding,
        achieved_per_s: if window > 0.0 {
            r.sent as f64 / window
        } else {
            0.0
        },
        arrivals: r.arrivals,
        sent: r.sent,
        late: r.late,
        dropped: r.dropped,
        behind: r.behind,
        service_time_us: r.service,
        pacing_error_us: r.pacing,
        transaction_time_ci_us: intervals(client),
    })
}

/// The checks of an open-loop run's schedule.
pub(crate) fn checks(run: &Run, spec: &TestSpec) -> Vec<Check> {
    vec![
        arrival_fidelity(run, spec),
        client_saturated(run),
        stationary(run),
    ]
}

/// The seed of the fidelity test's subsample: fixed, so that a run is
/// judged the same whenever it is judged.
const FIDELITY_SEED: u64 = 0x6c69_6e6b_7065_7266;

/// The achieved rate within [`RATE_TOLERANCE`] of the offered, and the gaps
/// between each user's sends shaped as asked: exponential (Anderson–Darling
/// at the 1 % level, on a seeded subsample of 3000) or evenly spaced (see
/// `linkperf_metrics::arrival_fidelity`), on the grid of the generator's
/// resolution: its median pacing error (the latency of its wake-ups).
fn arrival_fidelity(run: &Run, spec: &TestSpec) -> Check {
    let name = CheckName::ArrivalFidelity;
    let (Some(o), Some(client)) = (&run.open_loop, &run.client) else {
        return Check::na(name, "nothing was measured");
    };
    if o.offered_per_s <= 0.0 {
        return Check::na(name, "nothing was offered");
    }
    let off = o.achieved_per_s / o.offered_per_s - 1.0;
    // A Poisson process's count over the window is itself random (its
    // standard deviation the square root of its mean): below ~108,000
    // arrivals 1 % is within its noise, and the bound widens to it.
    let expected = o.offered_per_s * client.window_s;
    let allowed = match o.arrival {
        Arrival::Poisson if expected > 0.0 => RATE_TOLERANCE.max(RATE_NOISE_Z / expected.sqrt()),
        _ => RATE_TOLERANCE,
    };
    let rate_ok = off.abs() <= allowed;
    let rate = format!(
        "{:.0} transactions/s sent of {:.0} offered: {:+.2} % (at most ±{:.2} %)",
        o.achieved_per_s,
        o.offered_per_s,
        off * 100.0,
        allowed * 100.0
    );
    let gaps = client
        .open_loop
        .as_ref()
        .map_or(&[][..], |r| r.gaps_ns.as_slice());
    let process = match o.arrival {
        Arrival::Poisson => ArrivalProcess::Poisson,
        Arrival::Fixed => ArrivalProcess::Fixed,
    };
    let per_user = o.offered_per_s / f64::from(spec.users.max(1));
    // The generator's resolution: arrivals due closer together than it
    // wakes go out in one wake-up, a gap of about nothing. Its median
    // pacing error is that wake-up's latency; a microsecond at least.
    let tick_ns = o
        .pacing_error_us
        .map_or(1_000.0, |p| (p.p50 * 1e3).max(1_000.0))
        .round() as u64;
    let shape = match fidelity(gaps, process, per_user, tick_ns, FIDELITY_SEED) {
        None => (true, format!("; too few gaps between sends to judge their shape ({})", gaps.len())),
        Some(f) => match f.shape {
            ArrivalShape::Poisson(fit) => (
                fit.passed,
                format!(
                    "; gaps between a user's sends against exponential at {per_user:.1}/s on a \
                     {:.1} µs grid: Anderson–Darling A² {:.3}, p {:.4} (Kolmogorov–Smirnov p {:.4}) over {}",
                    tick_ns as f64 / 1e3,
                    fit.anderson_darling,
                    fit.anderson_darling_p,
                    fit.kolmogorov_smirnov_p,
                    fit.tested
                ),
            ),
            ArrivalShape::Fixed(reg) => (
                reg.passed,
                format!(
                    "; gaps between a user's sends against its period of {:.1} µs: {:.2} % more than \
                     {:.1} µs off, spread {:.3} (at most {:.3})",
                    reg.period_ns / 1e3,
                    reg.off_share * 100.0,
                    reg.tolerance_ns / 1e3,
                    reg.spread,
                    reg.allowed_spread
                ),
            ),
        },
    };
    Check::judged(
        name,
        rate_ok && shape.0,
        off * 100.0,
        allowed * 100.0,
        format!("{rate}{}", shape.1),
    )
}

/// The per-second rate and p99 (from the due time) without a significant
/// and large trend, nor a change of spread (Mann–Kendall and Brown–Forsythe,
/// `linkperf_metrics::stationarity`).
fn stationary(run: &Run) -> Check {
    let name = CheckName::Stationarity;
    let rates: Vec<f64> = run
        .intervals
        .iter()
        .filter(|i| i.second.length_s >= 0.5)
        .map(|i| i.transactions_per_s())
        .collect();
    if rates.len() < MIN_TREND_POINTS {
        return Check::na(
            name,
            format!(
                "{} whole seconds: a trend needs {MIN_TREND_POINTS} at least",
                rates.len()
            ),
        );
    }
    let p99: Vec<f64> = run
        .client
        .as_ref()
        .and_then(|c| c.open_loop.as_ref())
        .map(|r| r.seconds_p99_us.iter().flatten().copied().collect())
        .unwrap_or_default();
    let judged = |what: &str, series: &[f64]| {
        stationarity(series).map(|s| {
            let drift = s
                .relative_drift
                .map_or(String::new(), |d| format!(", drift {:+.1} %", d * 100.0));
            (
                s.passed,
                format!(
                    "{what}: trend p {:.4}{drift}, spread of the halves ×{:.2}",
                    s.trend.p_value,
                    s.spread.ratio.unwrap_or(1.0)
                ),
            )
        })
    };
    let mut parts = Vec::new();
    let mut pass = true;
    for (what, series) in [("rate", &rates), ("p99", &p99)] {
        if let Some((ok, words)) = judged(what, series) {
            pass &= ok;
            parts.push(words);
        }
    }
    let status = if pass {
        crate::CheckStatus::Pass
    } else {
        crate::CheckStatus::Fail
    };
    Check::new(
        name,
        status,
        None,
        None,
        format!("per second over {} s, {}", rates.len(), parts.join("; ")),
    )
}

/// The generator sent what was asked on time: at most [`BEHIND_BOUND`] of
/// the arrivals sent late with room on their connection, or dropped (never
/// sent: too many waited on their connection, its answers too slow for the
/// rate offered).
fn client_saturated(run: &Run) -> Check {
    let name = CheckName::ClientSaturated;
    let Some(o) = &run.open_loop else {
        return Check::na(name, "nothing was measured");
    };
    if o.arrivals == 0 {
        return Check::na(name, "nothing came due");
    }
    let missed = o.behind + o.dropped;
    let share = missed as f64 / o.arrivals as f64;
    let p99 = o.pacing_error_us.map_or(String::new(), |p| {
        format!("; pacing error p99 {:.1} µs", p.p99)
    });
    Check::judged(
        name,
        share <= BEHIND_BOUND,
        share * 100.0,
        BEHIND_BOUND * 100.0,
        format!(
            "of {} arrivals, {} sent more than 1 ms after they were due with room on their connection and {} dropped ({:.2} %, at most {:.0} %){p99}",
            o.arrivals,
            o.behind,
            o.dropped,
            share * 100.0,
            BEHIND_BOUND * 100.0
        ),
    )
}
