//! sched_setaffinity, sched_getaffinity and sched_getcpu for the calling thread.
//!
//! Masks are built at whatever size the CPU numbers need (not glibc's fixed
//! 1024-CPU `cpu_set_t`), so a CPU beyond 1023 is the kernel's to refuse, not a
//! panic here.

use std::io;
use std::mem::size_of;

use super::procfs::MAX_CPU_INDEX;

type Word = libc::c_ulong;
const WORD_BITS: usize = Word::BITS as usize;

/// A CPU mask holding `cpus`. The caller has checked every CPU is at most
/// `MAX_CPU_INDEX`.
fn mask_of(cpus: &[usize]) -> Vec<Word> {
    let highest = cpus.iter().copied().max().unwrap_or(0);
    // At least a cpu_set_t's worth, so the kernel never sees a tiny mask.
    let words = (highest / WORD_BITS + 1).max(size_of::<libc::cpu_set_t>() / size_of::<Word>());
    let mut mask = vec![0 as Word; words];
    for &cpu in cpus {
        mask[cpu / WORD_BITS] |= 1 << (cpu % WORD_BITS);
    }
    mask
}

fn cpus_of(mask: &[Word]) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (i, &word) in mask.iter().enumerate() {
        for bit in 0..WORD_BITS {
            if word & (1 << bit) != 0 {
                cpus.push(i * WORD_BITS + bit);
            }
        }
    }
    cpus
}

/// Restricts the calling thread to `cpus`. Errors are the kernel's: `EINVAL` when
/// none of the CPUs is online, `EPERM` when not allowed.
pub(crate) fn set_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.iter().any(|&c| c > MAX_CPU_INDEX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU numbers above {MAX_CPU_INDEX} exist on no kernel"),
        ));
    }
    let mask = mask_of(cpus);
    let bytes = mask.len() * size_of::<Word>();
    // SAFETY: `mask` is `bytes` long and laid out as the kernel's cpumask
    // (an array of unsigned longs); pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast::<libc::cpu_set_t>()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's affinity mask as CPU numbers.
pub(crate) fn get_current_thread() -> io::Result<Vec<usize>> {
    let mut words = size_of::<libc::cpu_set_t>() / size_of::<Word>();
    loop {
        let mut mask = vec![0 as Word; words];
        let bytes = mask.len() * size_of::<Word>();
        // SAFETY: `mask` is `bytes` long and writable; pid 0 is the calling thread.
        let rc = unsafe {
            libc::sched_getaffinity(0, bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            return Ok(cpus_of(&mask));
        }
        let err = io::Error::last_os_error();
        // EINVAL: the kernel's mask is larger than ours; try a bigger one.
        if err.raw_os_error() == Some(libc::EINVAL) && words * WORD_BITS <= MAX_CPU_INDEX {
            words *= 2;
            continue;
        }
        return Err(err);
    }
}

/// The CPU the calling thread is running on, `None` if sched_getcpu fails.
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no memory effects.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Puts the calling thread in the real-time FIFO class at priority `priority`
/// (`sched_setscheduler` with pid 0 acts on the calling thread). Fails with
/// `EPERM` where the process may not (no CAP_SYS_NICE, no RLIMIT_RTPRIO).
pub(crate) fn set_current_thread_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param for the call's duration.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip() {
        let cpus = vec![0, 3, 64, 1500];
        let mask = mask_of(&cpus);
        assert!(mask.len() * WORD_BITS > 1500);
        assert_eq!(cpus_of(&mask), cpus);
        assert_eq!(
            mask_of(&[1]).len() * size_of::<Word>(),
            size_of::<libc::cpu_set_t>()
        );
    }
}
