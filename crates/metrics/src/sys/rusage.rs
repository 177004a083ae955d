//! getrusage, RLIMIT_NOFILE and sysconf.

use std::io;
use std::mem::MaybeUninit;

/// Whose resource usage to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    /// The whole process (`RUSAGE_SELF`).
    Process,
    /// The calling thread (`RUSAGE_THREAD`).
    Thread,
}

/// What getrusage reported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    /// User CPU time in seconds.
    pub user_s: f64,
    /// System CPU time in seconds.
    pub system_s: f64,
    /// Peak resident set size in kilobytes (for `Who::Thread`, the process's).
    pub maxrss_kb: u64,
}

fn timeval_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// getrusage for the process or the calling thread; `None` if the call fails.
pub(crate) fn getrusage(who: Who) -> Option<Usage> {
    let who = match who {
        Who::Process => libc::RUSAGE_SELF,
        Who::Thread => libc::RUSAGE_THREAD,
    };
    let mut ru = MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `ru` is a valid out-pointer to a rusage the kernel fills on success.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it wrote the whole struct.
    let ru = unsafe { ru.assume_init() };
    Some(Usage {
        user_s: timeval_s(ru.ru_utime),
        system_s: timeval_s(ru.ru_stime),
        maxrss_kb: u64::try_from(ru.ru_maxrss).unwrap_or(0),
    })
}

/// `RLIMIT_NOFILE` as (soft, hard). `RLIM_INFINITY` reads as `u64::MAX`.
pub(crate) fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for the kernel to fill.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // rlim_t is u64 on 64-bit targets but may be narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    Ok((u64::from(rl.rlim_cur), u64::from(rl.rlim_max)))
}

/// Sets `RLIMIT_NOFILE` to (soft, hard).
pub(crate) fn set_nofile_limit(soft: u64, hard: u64) -> io::Result<()> {
    let to_rlim = |v: u64| libc::rlim_t::try_from(v).unwrap_or(libc::RLIM_INFINITY);
    let rl = libc::rlimit {
        rlim_cur: to_rlim(soft),
        rlim_max: to_rlim(hard),
    };
    // SAFETY: `rl` is a valid, initialised rlimit.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// USER_HZ, the unit of `/proc/stat`: `sysconf(_SC_CLK_TCK)`, 100 if unknown.
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0).unwrap_or(100)
}

/// `sysconf(_SC_NPROCESSORS_ONLN)`, `None` if it fails.
pub(crate) fn online_processors() -> Option<u32> {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(v).ok().filter(|&v| v > 0)
}

/// Gives the memory the allocator holds free back to the system (glibc's
/// `malloc_trim(0)`, over every arena: worker threads allocate in arenas of
/// their own, whose freed pages glibc otherwise keeps). Other allocators
/// (musl's) return what they free by themselves: nothing to do there.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain size and only walks the allocator's
    // own free lists, under its locks; it is safe from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
