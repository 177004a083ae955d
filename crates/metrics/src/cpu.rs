//! CPU accounting: the process's (or a thread's) own CPU time from getrusage, and
//! the host's busy time from the most precise counter the kernel offers.
//!
//! # What each system-wide method counts
//!
//! - [`BusyMethod::CgroupV1Cpuacct`]: the root cgroup's `cpuacct.usage`, in
//!   nanoseconds: the scheduler's run time of every task on the host (all tasks
//!   are in the root cgroup's subtree), kernel threads such as `ksoftirqd`
//!   included. The idle task is not a cgroup task, so interrupts and softirqs
//!   handled while a CPU idles are not counted. Interrupt and softirq work done in
//!   a task's context is counted as that task's time on kernels without
//!   `CONFIG_IRQ_TIME_ACCOUNTING`; with it, the kernel takes that time out of the
//!   task's run time (and `ksoftirqd`'s softirq work stays in). Not tick-sampled:
//!   short wake-ups are counted exactly.
//! - [`BusyMethod::CgroupV2CpuStat`]: the root cgroup's `cpu.stat` `usage_usec`.
//!   For the root the kernel sums its per-CPU `cpustat` (user + nice + system +
//!   irq + softirq; kernels before the fix in 6.12 and 6.1.y stable also add
//!   steal): the same source as `/proc/stat` in microseconds, so it is exactly as
//!   tick-sampled as `/proc/stat` unless the kernel has
//!   `CONFIG_VIRT_CPU_ACCOUNTING_GEN` or `CONFIG_IRQ_TIME_ACCOUNTING`.
//! - [`BusyMethod::ProcStat`]: `/proc/stat` user + nice + system + irq + softirq,
//!   in USER_HZ ticks (`sysconf(_SC_CLK_TCK)`, usually 10 ms). With tick-based
//!   accounting each tick is charged whole to whatever ran when it fired, so work
//!   in short wake-ups between ticks can be missed or over-counted.
//!
//! The method is chosen once per process, in that order, and a counter is used
//! only if it belongs to the real root cgroup (checked by a file only the root
//! has), so a container's own cgroup is never taken for the host.

use std::ops::{Add, AddAssign};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::sys::procfs::{self, ProcStatTicks};
use crate::sys::rusage::{self, Who};
use linkperf_measured::{BusyMethod, CpuShare, ProcStatBreakdown, ProcessMethod, SideCpu};

/// CPU time of a process or thread, in seconds: a snapshot, or the difference
/// of two.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessCpu {
    /// User time in seconds.
    pub user_s: f64,
    /// System (kernel) time in seconds.
    pub system_s: f64,
}

impl ProcessCpu {
    /// `self - earlier`, each part at least 0.
    pub fn since(&self, earlier: &ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
        }
    }

    /// User + system seconds.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

impl Add for ProcessCpu {
    type Output = ProcessCpu;

    fn add(self, rhs: ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            user_s: self.user_s + rhs.user_s,
            system_s: self.system_s + rhs.system_s,
        }
    }
}

impl AddAssign for ProcessCpu {
    fn add_assign(&mut self, rhs: ProcessCpu) {
        *self = *self + rhs;
    }
}

fn usage(who: Who) -> ProcessCpu {
    rusage::getrusage(who)
        .map(|u| ProcessCpu {
            user_s: u.user_s,
            system_s: u.system_s,
        })
        .unwrap_or_default()
}

/// CPU time of the whole process so far (`getrusage(RUSAGE_SELF)`); zero if the
/// call fails, which it does not on Linux.
pub fn process_cpu_now() -> ProcessCpu {
    usage(Who::Process)
}

/// CPU time of the calling thread so far (`getrusage(RUSAGE_THREAD)`); zero if
/// the call fails.
pub fn thread_cpu_now() -> ProcessCpu {
    usage(Who::Thread)
}

/// Online CPUs of the host: `sysconf(_SC_NPROCESSORS_ONLN)`, else
/// `/sys/devices/system/cpu/online`, else 1.
pub fn online_cpus() -> u32 {
    rusage::online_processors()
        .or_else(|| procfs::read_online_cpu_list().and_then(|l| u32::try_from(l.len()).ok()))
        .unwrap_or(1)
}

/// Root cgroup v1 `cpuacct.usage` files, where cpuacct may be mounted.
const V1_USAGE_FILES: [&str; 2] = [
    "/sys/fs/cgroup/cpuacct/cpuacct.usage",
    "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage",
];
/// Where a pure cgroup v2 host mounts the hierarchy.
const V2_DIR: &str = "/sys/fs/cgroup";

/// A precise busy counter: which, and the file it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BusySource {
    method: BusyMethod,
    path: PathBuf,
}

/// Reads a source's counter in nanoseconds.
fn read_busy_ns(source: &BusySource, read: &dyn Fn(&Path) -> Option<String>) -> Option<u64> {
    let text = read(&source.path)?;
    match source.method {
        BusyMethod::CgroupV1Cpuacct => procfs::parse_single_u64(&text),
        BusyMethod::CgroupV2CpuStat => {
            procfs::parse_cgroup_v2_usage_usec(&text).map(|us| us.saturating_mul(1000))
        }
        BusyMethod::ProcStat => None,
    }
}

/// Chooses the precise counter: cgroup v1 root `cpuacct.usage`, then cgroup v2
/// root `cpu.stat`, else none (/proc/stat). A v1 directory is the hierarchy's root
/// only if it has `cgroup.sane_behavior` (a root-only file); a v2 directory is the
/// root only if it is a v2 hierarchy (`cgroup.controllers`) without
/// `cgroup.type` (which every non-root cgroup has, a namespace's root included).
/// The counter must also read and parse.
fn detect_busy_source(
    exists: &dyn Fn(&Path) -> bool,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Option<BusySource> {
    for file in V1_USAGE_FILES {
        let path = PathBuf::from(file);
        let is_root = path
            .parent()
            .is_some_and(|dir| exists(&dir.join("cgroup.sane_behavior")));
        let source = BusySource {
            method: BusyMethod::CgroupV1Cpuacct,
            path,
        };
        if is_root && read_busy_ns(&source, read).is_some() {
            return Some(source);
        }
    }
    let dir = Path::new(V2_DIR);
    if exists(&dir.join("cgroup.controllers")) && !exists(&dir.join("cgroup.type")) {
        let source = BusySource {
            method: BusyMethod::CgroupV2CpuStat,
            path: dir.join("cpu.stat"),
        };
        if read_busy_ns(&source, read).is_some() {
            return Some(source);
        }
    }
    None
}

fn real_exists(p: &Path) -> bool {
    procfs::exists(p)
}

fn real_read(p: &Path) -> Option<String> {
    procfs::read_text(p)
}

fn busy_source() -> Option<&'static BusySource> {
    static SOURCE: OnceLock<Option<BusySource>> = OnceLock::new();
    SOURCE
        .get_or_init(|| detect_busy_source(&real_exists, &real_read))
        .as_ref()
}

/// The method [`system_cpu_now`] uses on this host for the busy figure.
pub fn system_busy_method() -> BusyMethod {
    busy_source().map_or(BusyMethod::ProcStat, |s| s.method)
}

/// A snapshot of the host's CPU counters: `/proc/stat`'s aggregate line and,
/// where the kernel has one, a precise busy counter (see the module notes on
/// what each counts). Compare two with [`system_cpu_between`].
#[derive(Debug, Clone, PartialEq)]
pub struct SystemCpuSample {
    proc_stat: Option<ProcStatTicks>,
    per_cpu: Vec<(usize, ProcStatTicks)>,
    precise: Option<(BusyMethod, u64)>,
    ticks_per_s: u64,
}

impl SystemCpuSample {
    /// The busy method this sample can support: its precise counter's, else
    /// `ProcStat`.
    pub fn method(&self) -> BusyMethod {
        self.precise.map_or(BusyMethod::ProcStat, |(m, _)| m)
    }
}

/// Reads the host's CPU counters now. Never fails: unreadable counters are
/// left out, and the delta falls back accordingly.
pub fn system_cpu_now() -> SystemCpuSample {
    let precise = busy_source().and_then(|s| read_busy_ns(s, &real_read).map(|ns| (s.method, ns)));
    let (proc_stat, per_cpu) = procfs::read_proc_stat_all();
    SystemCpuSample {
        proc_stat,
        per_cpu,
        precise,
        ticks_per_s: rusage::clock_ticks_per_second(),
    }
}

/// The host's CPU time between two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SystemCpuDelta {
    /// Busy CPU seconds summed over CPUs, from the precise counter where both
    /// samples have it, else from `/proc/stat` (`proc_stat.busy_s()`).
    pub busy_s: f64,
    /// Where `busy_s` came from.
    pub method: BusyMethod,
    /// The `/proc/stat` breakdown, always (zero if `/proc/stat` was unreadable).
    pub proc_stat: ProcStatBreakdown,
}

fn breakdown(ticks: &ProcStatTicks, ticks_per_s: u64) -> ProcStatBreakdown {
    let hz = ticks_per_s.max(1) as f64;
    let s = |t: u64| t as f64 / hz;
    ProcStatBreakdown {
        user_s: s(ticks.user.saturating_add(ticks.nice)),
        system_s: s(ticks.system),
        irq_s: s(ticks.irq),
        softirq_s: s(ticks.softirq),
        steal_s: s(ticks.steal),
        idle_s: s(ticks.idle.saturating_add(ticks.iowait)),
    }
}

/// The host's CPU time from `start` to `end`. The precise counter is used only if
/// both samples have it from the same method and it did not go backwards
/// (`cpuacct.usage` can be reset by writing to it); otherwise `/proc/stat`.
pub fn system_cpu_between(start: &SystemCpuSample, end: &SystemCpuSample) -> SystemCpuDelta {
    let proc_stat = match (&start.proc_stat, &end.proc_stat) {
        (Some(a), Some(b)) => breakdown(&b.saturating_sub(a), end.ticks_per_s),
        _ => ProcStatBreakdown::default(),
    };
    match (start.precise, end.precise) {
        (Some((m0, a)), Some((m1, b))) if m0 == m1 && b >= a => SystemCpuDelta {
            busy_s: (b - a) as f64 / 1e9,
            method: m1,
            proc_stat,
        },
        _ => SystemCpuDelta {
            busy_s: proc_stat.busy_s(),
            method: BusyMethod::ProcStat,
            proc_stat,
        },
    }
}

/// Each CPU's time from `start` to `end`, by CPU number, from `/proc/stat`'s
/// per-CPU lines (USER_HZ ticks: 10 ms each on most kernels). A CPU missing
/// from either sample is left out.
pub fn per_cpu_between(start: &SystemCpuSample, end: &SystemCpuSample) -> Vec<CpuShare> {
    end.per_cpu
        .iter()
        .filter_map(|(cpu, b)| {
            let (_, a) = start.per_cpu.iter().find(|(c, _)| c == cpu)?;
            Some(CpuShare {
                cpu: *cpu,
                time: breakdown(&b.saturating_sub(a), end.ticks_per_s),
            })
        })
        .collect()
}

/// Fills a side's CPU record from its process CPU over the window, how that was
/// taken, and the host's CPU over the same window.
pub fn side_cpu(
    process: ProcessCpu,
    process_method: ProcessMethod,
    system: &SystemCpuDelta,
    window_s: f64,
) -> SideCpu {
    SideCpu {
        process_s: process.total_s(),
        process_user_s: process.user_s,
        process_system_s: process.system_s,
        process_method,
        system_busy_s: system.busy_s,
        system_busy_method: system.method,
        softirq_s: system.proc_stat.softirq_s,
        proc_stat: system.proc_stat,
        cpus: online_cpus(),
        window_s,
        opened_late_s: None,
        closed_late_s: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use super::*;

    fn busy_loop(d: Duration) -> u64 {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < d {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
        }
        x
    }

    #[test]
    fn process_cpu_arithmetic() {
        let a = ProcessCpu {
            user_s: 1.0,
            system_s: 0.5,
        };
        let b = ProcessCpu {
            user_s: 1.25,
            system_s: 0.25,
        };
        assert_eq!(
            b.since(&a),
            ProcessCpu {
                user_s: 0.25,
                system_s: 0.0
            }
        );
        let mut sum = a + b;
        sum += a;
        assert_eq!(
            sum,
            ProcessCpu {
                user_s: 3.25,
                system_s: 1.25
            }
        );
        assert_eq!(sum.total_s(), 4.5);
    }

    #[test]
    fn process_and_thread_cpu_grow_after_work() {
        let (p0, t0) = (process_cpu_now(), thread_cpu_now());
        busy_loop(Duration::from_millis(50));
        let (p1, t1) = (process_cpu_now(), thread_cpu_now());
        assert!(p1.since(&p0).total_s() > 0.0, "{p0:?} -> {p1:?}");
        assert!(t1.since(&t0).total_s() > 0.0, "{t0:?} -> {t1:?}");
        assert!(t1.total_s() <= p1.total_s() + 1e-6);
    }

    #[test]
    fn system_cpu_sees_a_busy_loop() {
        let start = system_cpu_now();
        busy_loop(Duration::from_millis(50));
        let end = system_cpu_now();
        let d = system_cpu_between(&start, &end);
        assert!(d.busy_s > 0.0, "{d:?}");
        assert_eq!(d.method, system_busy_method());
        assert!(d.proc_stat.busy_s() + d.proc_stat.idle_s > 0.0, "{d:?}");
    }

    fn sample(ticks: ProcStatTicks, precise: Option<(BusyMethod, u64)>) -> SystemCpuSample {
        SystemCpuSample {
            proc_stat: Some(ticks),
            per_cpu: vec![(0, ticks), (3, ticks)],
            precise,
            ticks_per_s: 100,
        }
    }

    #[test]
    fn per_cpu_time_is_each_cpus_own_difference() {
        let a = ProcStatTicks {
            user: 100,
            softirq: 10,
            idle: 50,
            ..ProcStatTicks::default()
        };
        let b = ProcStatTicks {
            user: 150,
            softirq: 40,
            idle: 70,
            ..ProcStatTicks::default()
        };
        let mut end = sample(b, None);
        // CPU 3 went offline: left out; CPU 7 came online: no start.
        end.per_cpu = vec![(0, b), (7, b)];
        let shares = per_cpu_between(&sample(a, None), &end);
        assert_eq!(shares.len(), 1);
        assert_eq!(shares[0].cpu, 0);
        // 50 user and 30 softirq ticks at 100 per second.
        assert!((shares[0].time.user_s - 0.5).abs() < 1e-12);
        assert!((shares[0].time.softirq_s - 0.3).abs() < 1e-12);
        assert!((shares[0].time.busy_s() - 0.8).abs() < 1e-12);
    }

    #[test]
    fn delta_prefers_the_precise_counter() {
        let a = ProcStatTicks {
            user: 100,
            nice: 10,
            system: 50,
            idle: 1000,
            iowait: 5,
            irq: 1,
            softirq: 7,
            steal: 3,
        };
        let b = ProcStatTicks {
            user: 200,
            nice: 10,
            system: 80,
            idle: 1100,
            iowait: 5,
            irq: 2,
            softirq: 27,
            steal: 4,
        };
        let m = BusyMethod::CgroupV1Cpuacct;
        let d = system_cpu_between(
            &sample(a, Some((m, 1_000_000_000))),
            &sample(b, Some((m, 2_500_000_000))),
        );
        assert_eq!(d.method, m);
        assert_eq!(d.busy_s, 1.5);
        assert_eq!(
            d.proc_stat,
            ProcStatBreakdown {
                user_s: 1.0,
                system_s: 0.3,
                irq_s: 0.01,
                softirq_s: 0.2,
                steal_s: 0.01,
                idle_s: 1.0
            }
        );
        // Missing, mismatched or reset counters fall back to /proc/stat.
        for (p0, p1) in [
            (None, Some((m, 5))),
            (Some((m, 10)), Some((BusyMethod::CgroupV2CpuStat, 20))),
            (Some((m, 10)), Some((m, 5))),
        ] {
            let d = system_cpu_between(&sample(a, p0), &sample(b, p1));
            assert_eq!(d.method, BusyMethod::ProcStat);
            assert!((d.busy_s - 1.51).abs() < 1e-9, "{d:?}");
        }
    }

    #[test]
    fn side_cpu_fills_every_field() {
        let sys = SystemCpuDelta {
            busy_s: 2.0,
            method: BusyMethod::CgroupV2CpuStat,
            proc_stat: ProcStatBreakdown {
                softirq_s: 0.5,
                ..Default::default()
            },
        };
        let s = side_cpu(
            ProcessCpu {
                user_s: 0.75,
                system_s: 0.5,
            },
            ProcessMethod::RusageThreadSum,
            &sys,
            10.0,
        );
        assert_eq!(s.process_s, 1.25);
        assert_eq!((s.process_user_s, s.process_system_s), (0.75, 0.5));
        assert_eq!(s.process_method, ProcessMethod::RusageThreadSum);
        assert_eq!(
            (s.system_busy_s, s.system_busy_method),
            (2.0, BusyMethod::CgroupV2CpuStat)
        );
        assert_eq!(s.softirq_s, 0.5);
        assert_eq!(s.proc_stat, sys.proc_stat);
        assert_eq!(s.cpus, online_cpus());
        assert_eq!(s.window_s, 10.0);
    }

    /// A fake filesystem: path → contents.
    fn detect(files: &[(&str, &str)]) -> Option<BusySource> {
        let map: HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        detect_busy_source(&|p| map.contains_key(p), &|p| map.get(p).cloned())
    }

    #[test]
    fn detects_cgroup_v1_root_first() {
        let src = detect(&[
            ("/sys/fs/cgroup/cpu,cpuacct/cgroup.sane_behavior", "0"),
            ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", "123\n"),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu io"),
            ("/sys/fs/cgroup/cpu.stat", "usage_usec 5\n"),
        ]);
        assert_eq!(src.map(|s| s.method), Some(BusyMethod::CgroupV1Cpuacct));
    }

    #[test]
    fn detects_cgroup_v2_root_but_not_a_namespaced_cgroup() {
        let v2 = [
            ("/sys/fs/cgroup/cgroup.controllers", "cpu io"),
            ("/sys/fs/cgroup/cpu.stat", "usage_usec 5\n"),
        ];
        let src = detect(&v2).unwrap();
        assert_eq!(src.method, BusyMethod::CgroupV2CpuStat);
        assert_eq!(
            read_busy_ns(&src, &|_| Some("usage_usec 5\n".into())),
            Some(5000)
        );
        let mut in_container = v2.to_vec();
        in_container.push(("/sys/fs/cgroup/cgroup.type", "domain"));
        assert_eq!(detect(&in_container), None);
    }

    #[test]
    fn ignores_non_root_or_unreadable_v1_counters() {
        assert_eq!(
            detect(&[("/sys/fs/cgroup/cpuacct/cpuacct.usage", "123")]),
            None
        );
        assert_eq!(
            detect(&[
                ("/sys/fs/cgroup/cpuacct/cgroup.sane_behavior", "0"),
                ("/sys/fs/cgroup/cpuacct/cpuacct.usage", "garbage")
            ]),
            None
        );
    }
}
