//! Where threads run: pinning the calling thread, reading its affinity mask and
//! the CPU it is on.

use crate::sys::{affinity, procfs};
use crate::MetricsError;

/// Pins the calling thread to `cpus` (sched_setaffinity on the thread itself).
/// Other threads, including ones spawned earlier, are unaffected; threads the
/// caller spawns afterwards inherit the mask.
///
/// Fails if the list is empty, or if the kernel refuses (no CPU of the list
/// online or present, or forbidden by the thread's cpuset); the error names the
/// CPUs asked for and the host's online CPUs.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), MetricsError> {
    if cpus.is_empty() {
        return Err(MetricsError::EmptyCpuList);
    }
    affinity::set_current_thread(cpus).map_err(|source| MetricsError::Affinity {
        cpus: procfs::format_cpu_list(cpus),
        online: procfs::read_online_cpu_list()
            .map_or_else(|| "unknown".to_string(), |l| procfs::format_cpu_list(&l)),
        source,
    })
}

/// The CPUs the calling thread may run on (sched_getaffinity), ascending; empty
/// if the call fails.
pub fn current_thread_allowed_cpus() -> Vec<usize> {
    affinity::get_current_thread().unwrap_or_default()
}

/// Asks for real-time (FIFO, lowest) priority for the calling thread, where
/// the process may have it, so that it runs as soon as it wakes even when
/// every CPU is busy. For threads that sleep but for brief moments that must
/// be on time (sampling CPU at a window's edges); a thread that computes must
/// never ask for it. Returns whether it was granted; without the privilege
/// the thread simply keeps its ordinary priority.
pub fn prefer_realtime_current_thread() -> bool {
    affinity::set_current_thread_fifo(1).is_ok()
}

/// The CPU the calling thread is running on now (sched_getcpu), `None` if unknown.
pub fn current_cpu() -> Option<usize> {
    affinity::current_cpu()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_a_thread_to_cpu_0() {
        if !current_thread_allowed_cpus().contains(&0) {
            eprintln!("skipped: CPU 0 is outside this test's affinity mask");
            return;
        }
        let (allowed, cpu, before) = std::thread::spawn(|| {
            let before = current_thread_allowed_cpus();
            pin_current_thread(&[0]).unwrap();
            std::thread::yield_now();
            (current_thread_allowed_cpus(), current_cpu(), before)
        })
        .join()
        .unwrap();
        assert!(before.contains(&0), "{before:?}");
        assert_eq!(allowed, vec![0]);
        assert_eq!(cpu, Some(0));
        // The test thread itself is untouched.
        assert_eq!(current_thread_allowed_cpus(), before);
    }

    #[test]
    fn refuses_a_cpu_that_does_not_exist() {
        let err = std::thread::spawn(|| pin_current_thread(&[100_000]))
            .join()
            .unwrap()
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, MetricsError::Affinity { .. }), "{err:?}");
        assert!(msg.contains("100000"), "{msg}");
        assert!(msg.contains("online CPUs: "), "{msg}");
        let err = pin_current_thread(&[]).unwrap_err();
        assert!(matches!(err, MetricsError::EmptyCpuList));
        let err = std::thread::spawn(|| pin_current_thread(&[usize::MAX]))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains(&usize::MAX.to_string()), "{err}");
    }

    #[test]
    fn reports_a_current_cpu_within_the_mask() {
        let allowed = current_thread_allowed_cpus();
        assert!(!allowed.is_empty());
        let cpu = current_cpu().unwrap();
        assert!(cpu < 1 << 20);
    }
}
