//! An open-loop run: what was offered, what the generator sent and when,
//! and what became of the arrivals (derived from the client's record of its
//! schedule), and the checks that the schedule was kept. A run's
//! `transaction_time_us` is timed from when each transaction was due; its
//! service time, from when it was sent, stands beside it here.

use serde::{Deserialize, Serialize};

use linkperf_metrics::{LatencySummary, OpenLoopRecord, SideReport};
use linkperf_workload::{Arrival, TestSpec};

use crate::checks::{Check, CheckName};
use crate::Run;

/// How far the achieved rate may stray from the offered one: 1 %.
pub const RATE_TOLERANCE: f64 = 0.01;
/// The share of arrivals the generator may send late with room on their
/// connection (more than a millisecond after they were due) before the run
/// is called client-saturated: 1 %.
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
    })
}

/// The checks of an open-loop run's schedule.
pub(crate) fn checks(run: &Run) -> Vec<Check> {
    vec![arrival_fidelity(run), client_saturated(run)]
}

fn arrival_fidelity(run: &Run) -> Check {
    let name = CheckName::ArrivalFidelity;
    let Some(o) = &run.open_loop else {
        return Check::na(name, "nothing was measured");
    };
    if o.offered_per_s <= 0.0 {
        return Check::na(name, "nothing was offered");
    }
    let off = o.achieved_per_s / o.offered_per_s - 1.0;
    Check::judged(
        name,
        off.abs() <= RATE_TOLERANCE,
        off * 100.0,
        RATE_TOLERANCE * 100.0,
        format!(
            "{:.0} transactions/s sent of {:.0} offered: {:+.2} % (at most ±{:.0} %)",
            o.achieved_per_s,
            o.offered_per_s,
            off * 100.0,
            RATE_TOLERANCE * 100.0
        ),
    )
}

fn client_saturated(run: &Run) -> Check {
    let name = CheckName::ClientSaturated;
    let Some(o) = &run.open_loop else {
        return Check::na(name, "nothing was measured");
    };
    if o.sent == 0 {
        return Check::na(name, "nothing was sent");
    }
    let share = o.behind as f64 / o.sent as f64;
    let p99 = o.pacing_error_us.map_or(String::new(), |p| {
        format!("; pacing error p99 {:.1} µs", p.p99)
    });
    Check::judged(
        name,
        share <= BEHIND_BOUND,
        share * 100.0,
        BEHIND_BOUND * 100.0,
        format!(
            "{} of {} sends went more than 1 ms after they were due with room on their connection ({:.2} %, at most {:.0} %){p99}",
            o.behind,
            o.sent,
            share * 100.0,
            BEHIND_BOUND * 100.0
        ),
    )
}
