//! Samples a side's process and system-wide CPU, each CPU's time, and its
//! namespace's interface and queue counters at the edges of the window.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::Schedule;
use linkperf_measured::{CpuShare, LinkCounters, SideReport};
use linkperf_metrics::{
    interfaces_now, links_between, per_cpu_between, process_cpu_now, system_cpu_between,
    system_cpu_now, ProcessCpu, SystemCpuDelta, SystemCpuSample,
};

/// CPU over the window, as sampled.
#[derive(Debug)]
pub struct WindowCpu {
    /// Whole-process CPU over the window.
    pub process: ProcessCpu,
    /// System-wide CPU over the window.
    pub system: SystemCpuDelta,
    /// Seconds between the two samples.
    pub window_s: f64,
    /// Seconds from the window's opening to the first sample.
    pub opened_late_s: f64,
    /// Seconds from the window's close to the second sample (negative when
    /// the run was cut short).
    pub closed_late_s: f64,
    /// Each CPU's time over the window.
    pub per_cpu: Vec<CpuShare>,
    /// What the namespace's interfaces carried over the window (empty when
    /// they could not be read).
    pub links: Vec<LinkCounters>,
}

impl WindowCpu {
    /// Records where the samples fell in `cpu`.
    pub fn mark(&self, cpu: &mut linkperf_measured::SideCpu) {
        cpu.opened_late_s = Some(self.opened_late_s);
        cpu.closed_late_s = Some(self.closed_late_s);
    }

    /// Gives `report` the window's interface counters and the time of each
    /// CPU its workers were pinned to (none when they ran free).
    pub fn fill(&self, report: &mut SideReport) {
        report.links = self.links.clone();
        let mut pinned: Vec<usize> = report
            .workers
            .iter()
            .filter_map(|w| w.pinned.as_ref())
            .flatten()
            .copied()
            .collect();
        pinned.sort_unstable();
        pinned.dedup();
        report.pinned_cpus = self
            .per_cpu
            .iter()
            .filter(|c| pinned.binary_search(&c.cpu).is_ok())
            .copied()
            .collect();
    }
}

/// Seconds from `edge` to `at`, negative when `at` is earlier.
fn late(at: Instant, edge: Instant) -> f64 {
    match at.checked_duration_since(edge) {
        Some(d) => d.as_secs_f64(),
        None => -(edge - at).as_secs_f64(),
    }
}

/// A sampling thread; dropping the stop sender (or sending) ends the window early.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Option<WindowCpu>>,
}

impl Sampler {
    /// Starts sampling at `schedule`'s window edges. The sampling thread asks
    /// for real-time priority where the process may have it (it sleeps but
    /// for the two samples), so that on a busy host it still samples at the
    /// edges rather than when the scheduler next gets round to it.
    pub fn spawn(schedule: Schedule) -> Sampler {
        Self::between(schedule.measure_from, Some(schedule.measure_until))
    }

    /// Starts sampling now, until [`finish`](Self::finish): a profile's
    /// window, which ends when its script does.
    pub fn until_finished() -> Sampler {
        Self::between(Instant::now(), None)
    }

    fn between(from: Instant, until: Option<Instant>) -> Sampler {
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            linkperf_metrics::prefer_realtime_current_thread();
            let wait = |until: Option<Instant>| -> bool {
                // true if stopped early
                match until {
                    Some(until) => {
                        let left = until.saturating_duration_since(Instant::now());
                        !matches!(rx.recv_timeout(left), Err(RecvTimeoutError::Timeout))
                    }
                    None => {
                        let _ = rx.recv();
                        true
                    }
                }
            };
            if wait(Some(from)) {
                return None;
            }
            let t0 = Instant::now();
            let (p0, s0): (ProcessCpu, SystemCpuSample) = (process_cpu_now(), system_cpu_now());
            let l0 = interfaces_now();
            let _ = wait(until);
            let t1 = Instant::now();
            let (p1, s1) = (process_cpu_now(), system_cpu_now());
            let l1 = interfaces_now();
            Some(WindowCpu {
                process: p1.since(&p0),
                system: system_cpu_between(&s0, &s1),
                window_s: t1.saturating_duration_since(t0).as_secs_f64(),
                opened_late_s: late(t0, from),
                closed_late_s: until.map_or(0.0, |until| late(t1, until)),
                per_cpu: per_cpu_between(&s0, &s1),
                links: match (l0, l1) {
                    (Some(a), Some(b)) => links_between(&a, &b),
                    _ => Vec::new(),
                },
            })
        });
        Sampler { stop, handle }
    }

    /// Ends the window now if it has not ended, and returns the samples (None if
    /// the window never opened).
    pub fn finish(self) -> Option<WindowCpu> {
        let _ = self.stop.send(());
        self.handle.join().ok().flatten()
    }
}
