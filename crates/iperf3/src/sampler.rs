//! Samples this process's and the host's CPU at the edges of the measurement
//! window, the way linkperf's own client does (`linkperf-session`).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Instant;

use linkperf_engine::Schedule;
use linkperf_metrics::{
    process_cpu_now, system_cpu_between, system_cpu_now, ProcessCpu, SystemCpuDelta,
};

/// CPU over the window, as sampled.
pub(crate) struct WindowCpu {
    pub process: ProcessCpu,
    pub system: SystemCpuDelta,
    pub window_s: f64,
}

/// A sampling thread; [`Sampler::finish`] ends the window early if it has not ended.
pub(crate) struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Option<WindowCpu>>,
}

impl Sampler {
    pub(crate) fn spawn(schedule: Schedule) -> Sampler {
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let wait = |until: Instant| -> bool {
                let left = until.saturating_duration_since(Instant::now());
                !matches!(rx.recv_timeout(left), Err(RecvTimeoutError::Timeout))
            };
            if wait(schedule.measure_from) {
                return None;
            }
            let t0 = Instant::now();
            let (p0, s0) = (process_cpu_now(), system_cpu_now());
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

    pub(crate) fn finish(self) -> Option<WindowCpu> {
        let _ = self.stop.send(());
        self.handle.join().ok().flatten()
    }
}
