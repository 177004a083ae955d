//! Text files of `/proc`, `/sys` and the cgroup filesystems: pure parsers over
//! `&str`, and thin readers that hand a file's text to them.

use std::fs;
use std::path::Path;

/// `/proc/stat`.
pub(crate) const PROC_STAT: &str = "/proc/stat";
/// `/proc/cpuinfo`.
pub(crate) const PROC_CPUINFO: &str = "/proc/cpuinfo";
/// This process's status (`VmHWM`, ...).
pub(crate) const PROC_SELF_STATUS: &str = "/proc/self/status";
/// The online CPUs as a list (`0-3,6`).
pub(crate) const SYS_CPU_ONLINE: &str = "/sys/devices/system/cpu/online";
/// The TCP congestion controls the kernel has loaded, space-separated.
pub(crate) const TCP_AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// The ones a process without CAP_NET_ADMIN may set.
pub(crate) const TCP_ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A file's whole text, or `None` if it cannot be read (missing, no permission,
/// not UTF-8).
pub(crate) fn read_text(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok()
}

/// Whether a path exists (a cgroup control file, say). Errors count as absent.
pub(crate) fn exists(path: impl AsRef<Path>) -> bool {
    fs::metadata(path).is_ok()
}

/// The aggregate `cpu` line of `/proc/stat`, in USER_HZ ticks summed over CPUs.
///
/// `guest` and `guest_nice` are left out: the kernel already counts them in
/// `user` and `nice`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcStatTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl ProcStatTicks {
    /// Field-by-field `self - earlier`, 0 where a counter went backwards.
    pub(crate) fn saturating_sub(&self, earlier: &ProcStatTicks) -> ProcStatTicks {
        ProcStatTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The aggregate `cpu` line of a whole `/proc/stat` text.
pub(crate) fn parse_proc_stat(text: &str) -> Option<ProcStatTicks> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .and_then(parse_proc_stat_cpu_line)
}

/// One `cpu` line of `/proc/stat`: `cpu user nice system idle [iowait irq softirq
/// steal guest guest_nice]`. Kernels older than the optional fields give fewer
/// columns; those read as 0. At least the first four must be present.
pub(crate) fn parse_proc_stat_cpu_line(line: &str) -> Option<ProcStatTicks> {
    let mut words = line.split_whitespace();
    if !words.next()?.starts_with("cpu") {
        return None;
    }
    let mut v = [0u64; 8];
    let mut n = 0;
    for (slot, word) in v.iter_mut().zip(words) {
        *slot = word.parse().ok()?;
        n += 1;
    }
    if n < 4 {
        return None;
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
    Some(ProcStatTicks {
        user,
        nice,
        system,
        idle,
        iowait,
        irq,
        softirq,
        steal,
    })
}

/// The per-CPU lines of a whole `/proc/stat` text (`cpu0 …`, `cpu1 …`), by CPU
/// number; lines that do not parse are left out.
pub(crate) fn parse_proc_stat_cpus(text: &str) -> Vec<(usize, ProcStatTicks)> {
    text.lines()
        .filter_map(|l| {
            let n: usize = l
                .split_whitespace()
                .next()?
                .strip_prefix("cpu")?
                .parse()
                .ok()?;
            Some((n, parse_proc_stat_cpu_line(l)?))
        })
        .collect()
}

/// Reads `/proc/stat` once: its aggregate line and its per-CPU lines.
pub(crate) fn read_proc_stat_all() -> (Option<ProcStatTicks>, Vec<(usize, ProcStatTicks)>) {
    match read_text(PROC_STAT) {
        Some(text) => (parse_proc_stat(&text), parse_proc_stat_cpus(&text)),
        None => (None, Vec::new()),
    }
}

/// `usage_usec` from a cgroup v2 `cpu.stat` text.
pub(crate) fn parse_cgroup_v2_usage_usec(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("usage_usec"), Some(v)) => v.parse().ok(),
            _ => None,
        }
    })
}

/// A file holding one unsigned number (`cpuacct.usage`, an interface's `mtu`).
pub(crate) fn parse_single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A `Key:   1234 kB` line of a `/proc/PID/status` text, in kilobytes.
pub(crate) fn parse_status_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut words = v.split_whitespace();
        let n = words.next()?.parse().ok()?;
        matches!(words.next(), Some("kB") | None).then_some(n)
    })
}

/// The CPU model from a `/proc/cpuinfo` text: the first `model name` (x86,
/// modern arm64 kernels), else `Processor` (older ARM), `cpu model` (MIPS), `cpu`
/// (POWER) or `uarch` (RISC-V). Keys match exactly, so x86's `cpu MHz` or the
/// lowercase `processor : 0` index lines are never taken for a model.
pub(crate) fn parse_cpuinfo_model(text: &str) -> Option<String> {
    const KEYS: [&str; 5] = ["model name", "Processor", "cpu model", "cpu", "uarch"];
    let pairs: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    KEYS.iter()
        .find_map(|key| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| normalise_whitespace(v))
        })
        .flatten()
}

/// Collapses runs of whitespace (tabs, newlines) to single spaces and trims;
/// `None` if nothing is left. `"4096\t131072\t6291456\n"` → `"4096 131072 6291456"`.
pub(crate) fn normalise_whitespace(text: &str) -> Option<String> {
    let s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!s.is_empty()).then_some(s)
}

/// Largest CPU number a list may name: far above any kernel's NR_CPUS, low enough
/// that a mask for it is small.
pub(crate) const MAX_CPU_INDEX: usize = 1 << 20;

/// A kernel CPU list such as `/sys/devices/system/cpu/online`: `0-3,6\n`.
/// Sorted, without duplicates; `None` if malformed or empty.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().ok()?,
                b.trim().parse::<usize>().ok()?,
            ),
            None => {
                let n = part.parse::<usize>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi > MAX_CPU_INDEX {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// The compact form of a CPU list, for messages: `[0, 1, 2, 5]` → `0-2,5`.
pub(crate) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The online CPUs, from `/sys/devices/system/cpu/online`.
pub(crate) fn read_online_cpu_list() -> Option<Vec<usize>> {
    read_text(SYS_CPU_ONLINE)
        .as_deref()
        .and_then(parse_cpu_list)
}

/// The MTU of a network interface, from `/sys/class/net/IFACE/mtu`.
pub(crate) fn read_interface_mtu(iface: &str) -> Option<u32> {
    if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
        return None;
    }
    let text = read_text(Path::new("/sys/class/net").join(iface).join("mtu"))?;
    parse_single_u64(&text).and_then(|m| u32::try_from(m).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROC_STAT_TEXT: &str = "\
cpu  3785 12 2257 65229 284 3 30 680 0 0
cpu0 1750 0 1061 32961 34 0 7 342 0 0
cpu1 2035 12 1195 32267 250 3 23 338 0 0
intr 1234567 0 9 0
ctxt 987654
btime 1700000000
processes 4321
";

    #[test]
    fn parses_the_aggregate_proc_stat_line() {
        let t = parse_proc_stat(PROC_STAT_TEXT).unwrap();
        assert_eq!(
            t,
            ProcStatTicks {
                user: 3785,
                nice: 12,
                system: 2257,
                idle: 65229,
                iowait: 284,
                irq: 3,
                softirq: 30,
                steal: 680
            }
        );
    }

    #[test]
    fn parses_the_per_cpu_lines() {
        let text = "cpu  10 0 5 100 0 0 2 0 0 0\ncpu0 6 0 3 50 0 0 2 0 0 0\ncpu1 4 0 2 50 0 0 0 0 0 0\nintr 5\n";
        let cpus = parse_proc_stat_cpus(text);
        assert_eq!(cpus.len(), 2);
        assert_eq!((cpus[0].0, cpus[0].1.user, cpus[0].1.softirq), (0, 6, 2));
        assert_eq!((cpus[1].0, cpus[1].1.system), (1, 2));
    }

    #[test]
    fn short_proc_stat_lines_default_missing_fields() {
        let t = parse_proc_stat_cpu_line("cpu 1 2 3 4").unwrap();
        assert_eq!(
            (t.user, t.nice, t.system, t.idle, t.iowait, t.steal),
            (1, 2, 3, 4, 0, 0)
        );
        assert_eq!(parse_proc_stat_cpu_line("cpu 1 2 3"), None);
        assert_eq!(parse_proc_stat_cpu_line("cpu 1 2 x 4"), None);
        assert_eq!(parse_proc_stat_cpu_line("intr 1 2 3 4"), None);
        assert_eq!(
            parse_proc_stat("cpu0 1 2 3 4\n"),
            None,
            "only the aggregate line counts"
        );
    }

    #[test]
    fn subtracts_ticks_without_underflow() {
        let a = ProcStatTicks {
            user: 10,
            softirq: 5,
            ..Default::default()
        };
        let b = ProcStatTicks {
            user: 15,
            softirq: 4,
            ..Default::default()
        };
        let d = b.saturating_sub(&a);
        assert_eq!((d.user, d.softirq), (5, 0));
    }

    #[test]
    fn parses_cgroup_v2_cpu_stat() {
        let text = "usage_usec 8123456789\nuser_usec 5000000000\nsystem_usec 3123456789\n\
                    nr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnice_usec 0\n";
        assert_eq!(parse_cgroup_v2_usage_usec(text), Some(8_123_456_789));
        assert_eq!(parse_cgroup_v2_usage_usec("user_usec 5\n"), None);
        assert_eq!(parse_cgroup_v2_usage_usec("usage_usec x\n"), None);
        assert_eq!(parse_cgroup_v2_usage_usec(""), None);
    }

    #[test]
    fn parses_single_numbers() {
        assert_eq!(parse_single_u64("63005354930\n"), Some(63_005_354_930));
        assert_eq!(parse_single_u64("1500"), Some(1500));
        assert_eq!(parse_single_u64(""), None);
        assert_eq!(parse_single_u64("-1"), None);
    }

    #[test]
    fn parses_status_kilobytes() {
        let text = "Name:\tlinkperf\nVmPeak:\t   10000 kB\nVmHWM:\t    1932 kB\nVmRSS:\t    1900 kB\nThreads:\t1\n";
        assert_eq!(parse_status_kb(text, "VmHWM"), Some(1932));
        assert_eq!(parse_status_kb(text, "VmRSS"), Some(1900));
        assert_eq!(parse_status_kb(text, "VmSwap"), None);
        assert_eq!(parse_status_kb("VmHWM:\t12 MB\n", "VmHWM"), None);
    }

    #[test]
    fn finds_the_x86_model_name() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n\
                    model name\t: AMD EPYC 7713 64-Core Processor\ncpu MHz\t\t: 2000.000\n\n\
                    processor\t: 1\nmodel name\t: AMD EPYC 7713 64-Core Processor\n";
        assert_eq!(
            parse_cpuinfo_model(text).as_deref(),
            Some("AMD EPYC 7713 64-Core Processor")
        );
    }

    #[test]
    fn falls_back_to_other_architectures_model_keys() {
        let arm = "Processor\t: ARMv7 Processor rev 4 (v7l)\nprocessor\t: 0\nBogoMIPS\t: 38.40\n";
        assert_eq!(
            parse_cpuinfo_model(arm).as_deref(),
            Some("ARMv7 Processor rev 4 (v7l)")
        );
        let mips = "system type\t\t: MT7621\nprocessor\t\t: 0\ncpu model\t\t: MIPS 1004Kc V2.15\n";
        assert_eq!(
            parse_cpuinfo_model(mips).as_deref(),
            Some("MIPS 1004Kc V2.15")
        );
        let power = "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\n";
        assert_eq!(
            parse_cpuinfo_model(power).as_deref(),
            Some("POWER9 (architected), altivec supported")
        );
        let arm64 =
            "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n";
        assert_eq!(parse_cpuinfo_model(arm64), None);
        assert_eq!(parse_cpuinfo_model("model name\t:\n"), None);
    }

    #[test]
    fn normalises_tcp_mem_whitespace() {
        assert_eq!(
            normalise_whitespace("4096\t131072\t6291456\n").as_deref(),
            Some("4096 131072 6291456")
        );
        assert_eq!(
            normalise_whitespace("  4096   87380 \t 33554432 ").as_deref(),
            Some("4096 87380 33554432")
        );
        assert_eq!(normalise_whitespace(" \n"), None);
    }

    #[test]
    fn parses_and_formats_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6\n"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(format_cpu_list(&[5, 0, 1, 2, 2]), "0-2,5");
        assert_eq!(format_cpu_list(&[100000]), "100000");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn refuses_odd_interface_names() {
        assert_eq!(read_interface_mtu(""), None);
        assert_eq!(read_interface_mtu("../../etc"), None);
    }
}
