//! Samples a side's process and system-wide CPU at the edges of the window.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Instant;

use linkperf_engine::Schedule;
use linkperf_metrics::{
    process_cpu_now, system_cpu_between, system_cpu_now, ProcessCpu, SystemCpuDelta,
    SystemCpuSample,
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
}

/// A sampling thread; dropping the stop sender (or sending) ends the window early.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Option<WindowCpu>>,
}

impl Sampler {
    /// Starts sampling at `schedule`'s window edges.
    pub fn spawn(schedule: Schedule) -> Sampler {
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let wait = |until: Instant| -> bool {
                // true if stopped early
                let left = until.saturating_duration_since(Instant::now());
                !matches!(rx.recv_timeout(left), Err(RecvTimeoutError::Timeout))
            };
            if wait(schedule.measure_from) {
                return None;
            }
            let t0 = Instant::now();
            let (p0, s0): (ProcessCpu, SystemCpuSample) = (process_cpu_now(), system_cpu_now());
            let _ = wait(schedule.measure_until);
            let (p1, s1) = (process_cpu_now(), system_cpu_now());
            Some(WindowCpu {
                process: p1.since(&p0),
                system: system_cpu_between(&s0, &s1),
                window_s: t0.elapsed().as_secs_f64(),
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
