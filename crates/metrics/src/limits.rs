//! Process limits: the open-file limit a server or client carrying thousands of
//! connections needs, and peak memory for benchmark reports.

use crate::sys::{procfs, rusage};
use crate::MetricsError;

/// Where the kernel's ceiling on any process's open-file limit is.
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

/// What to do to reach a wanted open-file limit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FdPlan {
    /// The soft limit already reaches it.
    Enough(u64),
    /// Set (soft, hard): the soft limit up to `wanted`, the hard limit too if it is short.
    Set { soft: u64, hard: u64 },
    /// The kernel's `fs.nr_open` is below `wanted`: no process may go that high.
    AboveNrOpen(u64),
}

fn plan(wanted: u64, soft: u64, hard: u64, nr_open: Option<u64>) -> FdPlan {
    if soft >= wanted {
        FdPlan::Enough(soft)
    } else if hard >= wanted {
        FdPlan::Set { soft: wanted, hard }
    } else {
        match nr_open {
            Some(max) if max < wanted => FdPlan::AboveNrOpen(max),
            _ => FdPlan::Set {
                soft: wanted,
                hard: wanted,
            },
        }
    }
}

fn ulimit_hint(wanted: u64) -> String {
    format!(
        "run `ulimit -n {wanted}` in the shell that starts linkperf; raising the hard limit \
         (`ulimit -Hn {wanted}`) needs root (CAP_SYS_RESOURCE), a `nofile` entry in /etc/security/limits.conf, \
         or LimitNOFILE={wanted} for a systemd service"
    )
}

/// The soft RLIMIT_NOFILE in force: the descriptors this process may hold.
pub fn fd_limit() -> Option<u64> {
    rusage::nofile_limit().ok().map(|(soft, _)| soft)
}

/// The host's `MemAvailable` (`/proc/meminfo`), bytes: memory that new work
/// can take without swapping.
pub fn memory_available_bytes() -> Option<u64> {
    procfs::read_text("/proc/meminfo").and_then(|t| parse_mem_available(&t))
}

/// `MemAvailable:   123456 kB` of `/proc/meminfo`, in bytes.
fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut parts = line.split_whitespace().skip(1);
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// Raises the soft RLIMIT_NOFILE to at least `wanted`, and the hard limit too when
/// it is lower and the process may (root, or CAP_SYS_RESOURCE), up to the kernel's
/// `fs.nr_open`. Never lowers a limit. Returns the soft limit now in force.
///
/// Fails, naming `wanted`, the current limits and how to raise them, when the hard
/// limit is short and cannot be raised, or `wanted` exceeds `fs.nr_open`.
pub fn raise_fd_limit(wanted: u64) -> Result<u64, MetricsError> {
    let read = || {
        rusage::nofile_limit().map_err(|source| MetricsError::Rlimit {
            action: "read",
            source,
        })
    };
    let (soft, hard) = read()?;
    let nr_open = procfs::read_text(NR_OPEN).and_then(|t| procfs::parse_single_u64(&t));
    match plan(wanted, soft, hard, nr_open) {
        FdPlan::Enough(soft) => Ok(soft),
        FdPlan::AboveNrOpen(max) => Err(MetricsError::FdLimit {
            wanted,
            soft,
            hard,
            hint: format!(
                "the kernel allows at most {max} per process: raise that as root with \
                 `sysctl -w fs.nr_open={wanted}`, then {}",
                ulimit_hint(wanted)
            ),
        }),
        FdPlan::Set {
            soft: new_soft,
            hard: new_hard,
        } => match rusage::set_nofile_limit(new_soft, new_hard) {
            Ok(()) => Ok(read()?.0),
            Err(e) if new_hard > hard => Err(MetricsError::FdLimit {
                wanted,
                soft,
                hard,
                hint: format!(
                    "raising the hard limit failed ({e}); {}",
                    ulimit_hint(wanted)
                ),
            }),
            Err(source) => Err(MetricsError::Rlimit {
                action: "set",
                source,
            }),
        },
    }
}

/// Peak resident set size of the process in bytes, `None` if unknown.
///
/// Read from `/proc/self/status` `VmHWM` where available, else getrusage
/// `ru_maxrss`: Linux carries `ru_maxrss` across exec, so a process started by a
/// large parent (`cargo run`, a shell script under a big runner) reports the
/// parent's peak at fork time rather than its own; `VmHWM` belongs to this
/// process's address space alone.
pub fn peak_rss_bytes() -> Option<u64> {
    procfs::read_text(procfs::PROC_SELF_STATUS)
        .and_then(|t| procfs::parse_status_kb(&t, "VmHWM"))
        .or_else(|| rusage::getrusage(rusage::Who::Process).map(|u| u.maxrss_kb))
        .map(|kb| kb.saturating_mul(1024))
        .filter(|&b| b > 0)
}

/// Gives memory freed by a test that has ended back to the system: without
/// it, the per-thread arenas of its workers would keep the pages of their
/// statistics resident after the test (a profile's hundreds of MiB).
pub fn return_freed_memory() {
    rusage::trim_heap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24684136 kB\nMemFree:        21822400 kB\nMemAvailable:   23355804 kB\n";
        assert_eq!(parse_mem_available(text), Some(23_355_804 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: x kB\n"), None);
        assert!(memory_available_bytes().is_some_and(|b| b > 0));
        assert!(fd_limit().is_some_and(|n| n > 0));
    }

    #[test]
    fn plans_limit_changes() {
        assert_eq!(plan(1000, 1024, 4096, Some(1 << 20)), FdPlan::Enough(1024));
        assert_eq!(
            plan(2000, 1024, 4096, Some(1 << 20)),
            FdPlan::Set {
                soft: 2000,
                hard: 4096
            }
        );
        assert_eq!(
            plan(20_000, 1024, 4096, Some(1 << 20)),
            FdPlan::Set {
                soft: 20_000,
                hard: 20_000
            }
        );
        assert_eq!(
            plan(20_000, 1024, 4096, None),
            FdPlan::Set {
                soft: 20_000,
                hard: 20_000
            }
        );
        assert_eq!(
            plan(2 << 20, 1024, 4096, Some(1 << 20)),
            FdPlan::AboveNrOpen(1 << 20)
        );
        // A hard limit above nr_open (set before nr_open was lowered) still counts.
        assert_eq!(
            plan(3 << 20, 1024, u64::MAX, Some(1 << 20)),
            FdPlan::Set {
                soft: 3 << 20,
                hard: u64::MAX
            }
        );
    }

    #[test]
    fn reaching_the_current_soft_limit_changes_nothing() {
        let (soft, hard) = rusage::nofile_limit().unwrap();
        assert_eq!(raise_fd_limit(soft.min(64)).unwrap(), soft);
        assert_eq!(raise_fd_limit(soft).unwrap(), soft);
        assert_eq!(rusage::nofile_limit().unwrap(), (soft, hard));
    }

    #[test]
    fn an_impossible_limit_is_explained() {
        let err = raise_fd_limit(u64::MAX / 2).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, MetricsError::FdLimit { .. }), "{err:?}");
        assert!(msg.contains(&(u64::MAX / 2).to_string()), "{msg}");
        assert!(msg.contains("ulimit -n"), "{msg}");
    }

    #[test]
    fn reports_peak_memory() {
        let rss = peak_rss_bytes().unwrap();
        assert!(rss > 100 * 1024, "{rss}");
    }
}
