//! `host_noise`: whether other work on the host disturbed the run, judged by
//! its effect rather than by the host's idleness (issue 32). Most hosts are
//! shared; what matters is not whether anything else ran, but whether it ran
//! where the test did and whether the run's own figures show it.
//!
//! For each host of the test:
//!
//! * **The test's CPUs**: the CPUs its workers were pinned to (both sides'
//!   on that host together), or the whole host when a side ran free. Other
//!   work there is their user time beyond the test's processes' user time,
//!   and their system and irq time beyond the processes' system time
//!   (softirq is the network stack's, whoever's packets, and never counted),
//!   less what /proc/stat's ticks cannot tell apart (two ticks a CPU), plus
//!   the time the hypervisor stole from them. Above [`HOST_NOISE_MAX`] of their
//!   time, others took the test's CPUs: the run fails.
//! * **The rest of the host** (pinned runs only): busy with others' work
//!   beyond [`HOST_NOISE_MAX`] of the host's time, it may still have
//!   disturbed the test through what is shared (caches, memory, the unpinned
//!   threads, the softirq of its packets). Whether it did is asked of the
//!   run's per-second rate: a trend or a change of spread between its halves
//!   (Mann–Kendall and Brown–Forsythe, `linkperf_metrics::stationarity`)
//!   fails the run; a stationary rate is `ok` however busy the rest was. A
//!   window too short for the trend test (under 10 whole seconds) is judged
//!   on its CPUs alone.
//!
//! On an idle host neither applies: the run's stationarity is asked only when
//! the rest of the host was busy, so a steady-state test on a quiet host is
//! never failed by the trend test's own false alarms.

use linkperf_measured::{CpuShare, ProcStatBreakdown};
use linkperf_metrics::{stationarity, Stationarity, MIN_TREND_POINTS};

use crate::checks::{Check, CheckName, HostCpu, Judge};
use crate::Run;

/// Others' work (busy time outside the test's processes and softirq) and
/// stolen time, as a share of the test's CPUs' time over the window; above
/// it, other work took the CPUs the test ran on. The same share of the whole
/// host, with the test pinned, makes the host "busy", and the run's
/// per-second rate must then show no effect.
pub const HOST_NOISE_MAX: f64 = 0.10;

/// `/proc/stat` counts in ticks of 1/100 s (USER_HZ, 100 on every Linux ABI):
/// each of a window's two samples may be off by up to a tick per CPU.
const PROC_STAT_TICK_S: f64 = 0.01;

/// Shortest window whose host noise is judged: below it the ticks' own
/// uncertainty is a tenth of the host's time on two CPUs.
pub const HOST_NOISE_MIN_WINDOW_S: f64 = 1.0;

/// Others' work on a set of CPUs over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Taken {
    /// Busy time not the test's (nor softirq), CPU-seconds.
    other_s: f64,
    /// Stolen time, seconds.
    steal_s: f64,
    /// Idle time, seconds.
    idle_s: f64,
    /// The set's time, CPU-seconds.
    capacity_s: f64,
}

impl Taken {
    /// Others' work on CPUs of `time` (`cpus` of them) over `window_s`,
    /// where the test's processes ran `processes_s`, `user_s` of it in user
    /// mode. User and kernel time are taken apart: whether a task's system
    /// time includes the softirq work done in its context depends on the
    /// kernel (CONFIG_IRQ_TIME_ACCOUNTING), so the kernel's side can only
    /// say others ran where it exceeds the test's system time, while user
    /// time is never softirq and a hog's (a loop, a compiler) is in it.
    fn of(
        time: &ProcStatBreakdown,
        cpus: f64,
        window_s: f64,
        processes_s: f64,
        user_s: f64,
    ) -> Option<Taken> {
        let capacity_s = cpus * window_s;
        if capacity_s <= 0.0 || !capacity_s.is_finite() {
            return None;
        }
        // What the ticks cannot tell apart is not counted against the host.
        let uncertainty = 2.0 * PROC_STAT_TICK_S * cpus;
        let system_s = (processes_s - user_s).max(0.0);
        let other_user = (time.user_s - user_s).max(0.0);
        let other_kernel = (time.system_s + time.irq_s - system_s).max(0.0);
        let other_s = (other_user + other_kernel - uncertainty).max(0.0);
        Some(Taken {
            other_s,
            steal_s: time.steal_s,
            idle_s: time.idle_s,
            capacity_s,
        })
    }

    /// Others' work and steal as a share of the set's time.
    fn share(&self) -> f64 {
        (self.other_s + self.steal_s) / self.capacity_s
    }
}

/// The sum of some CPUs' time.
fn sum(shares: &[CpuShare]) -> ProcStatBreakdown {
    shares.iter().fold(ProcStatBreakdown::default(), |a, c| {
        let t = &c.time;
        ProcStatBreakdown {
            user_s: a.user_s + t.user_s,
            system_s: a.system_s + t.system_s,
            irq_s: a.irq_s + t.irq_s,
            softirq_s: a.softirq_s + t.softirq_s,
            steal_s: a.steal_s + t.steal_s,
            idle_s: a.idle_s + t.idle_s,
        }
    })
}

/// One host judged.
#[derive(Debug, Clone)]
struct HostVerdict {
    pass: bool,
    /// Others' share of the test's CPUs.
    share: f64,
    detail: String,
}

fn cpu_list(shares: &[CpuShare]) -> String {
    let cpus: Vec<String> = shares.iter().map(|c| c.cpu.to_string()).collect();
    format!(
        "CPU{} {}",
        if cpus.len() == 1 { "" } else { "s" },
        cpus.join(",")
    )
}

fn judge_host(h: &HostCpu, rate: Option<&Stationarity>, seconds: usize) -> Option<HostVerdict> {
    let whole = Taken::of(
        &h.cpu.proc_stat,
        f64::from(h.cpu.cpus.max(1)),
        h.window_s,
        h.processes_s,
        h.processes_user_s,
    )?;
    let pinned_apart = !h.pinned.is_empty() && (h.pinned.len() as u32) < h.cpu.cpus;
    if !pinned_apart {
        // The test's CPUs are the whole host (it ran free, or on all of them).
        let share = whole.share();
        let pass = share <= HOST_NOISE_MAX;
        let on = if h.pinned.is_empty() {
            "its CPUs (the test ran free: all of them)".to_string()
        } else {
            format!("its {} (all of them)", cpu_list(&h.pinned))
        };
        return Some(HostVerdict {
            pass,
            share,
            detail: format!(
                "on {}, {on}: {:.2} CPU-s of others' work and {:.2} s stolen, {:.1} % of their time (at most {:.0} %)",
                h.label,
                whole.other_s,
                whole.steal_s,
                share * 100.0,
                HOST_NOISE_MAX * 100.0
            ),
        });
    }
    let mine = Taken::of(
        &sum(&h.pinned),
        h.pinned.len() as f64,
        h.window_s,
        h.processes_s,
        h.processes_user_s,
    )?;
    let share = mine.share();
    let taken = share > HOST_NOISE_MAX;
    let rest_busy = whole.share() > HOST_NOISE_MAX;
    let mut detail = format!(
        "on {}, the test's {}: {:.2} CPU-s of others' work and {:.2} s stolen, {:.1} % of their time (at most {:.0} %; {:.0} % idle)",
        h.label,
        cpu_list(&h.pinned),
        mine.other_s,
        mine.steal_s,
        share * 100.0,
        HOST_NOISE_MAX * 100.0,
        mine.idle_s / mine.capacity_s * 100.0
    );
    let mut pass = !taken;
    if rest_busy {
        detail.push_str(&format!(
            "; the host as a whole {:.1} % busy with others' work",
            whole.share() * 100.0
        ));
        match rate {
            Some(s) => {
                detail.push_str(&format!(
                    ", and the per-second rate over {seconds} s {} (trend p {:.4}{}, spread of the halves ×{:.2})",
                    if s.passed { "stationary" } else { "not stationary: the busy host shows in it" },
                    s.trend.p_value,
                    s.relative_drift
                        .map_or(String::new(), |d| format!(", drift {:+.1} %", d * 100.0)),
                    s.spread.ratio.unwrap_or(1.0)
                ));
                pass &= s.passed;
            }
            None => detail.push_str(&format!(
                ", its effect on the rate not judged ({seconds} whole seconds; a trend needs {MIN_TREND_POINTS})"
            )),
        }
    }
    Some(HostVerdict {
        pass,
        share,
        detail,
    })
}

/// The run's per-second rate (transactions, or messages for streams, per
/// second) over its whole seconds.
fn rate_series(run: &Run) -> Vec<f64> {
    run.intervals
        .iter()
        .filter(|i| i.second.length_s >= 0.999)
        .map(|i| {
            if i.transactions_per_s() > 0.0 {
                i.transactions_per_s()
            } else {
                i.bytes_per_s()
            }
        })
        .collect()
}

pub(crate) fn host_noise(run: &Run, j: &Judge<'_>) -> Check {
    let name = CheckName::HostNoise;
    let Some(hosts) = &j.hosts else {
        return Check::na(
            name,
            "the host's other work cannot be told from the test's (other tests share it by design and are judged on their aggregate, or a foreign server runs on it)",
        );
    };
    if run.cpu.is_none() {
        return Check::na(name, "no CPU was measured");
    }
    let window = run.client.as_ref().map_or(0.0, |c| c.window_s);
    if window < HOST_NOISE_MIN_WINDOW_S {
        return Check::na(
            name,
            format!(
                "a window of {window:.3} s is too short for /proc/stat's 10 ms ticks (at least {HOST_NOISE_MIN_WINDOW_S} s)"
            ),
        );
    }
    let series = rate_series(run);
    let rate = stationarity(&series);
    let verdicts: Vec<HostVerdict> = hosts
        .iter()
        .filter_map(|h| judge_host(h, rate.as_ref(), series.len()))
        .collect();
    // The failing host, else the one whose CPUs others took most.
    let worst = verdicts
        .iter()
        .filter(|v| !v.pass)
        .max_by(|a, b| a.share.total_cmp(&b.share))
        .or_else(|| verdicts.iter().max_by(|a, b| a.share.total_cmp(&b.share)));
    let Some(v) = worst else {
        return Check::na(name, "no host's CPU could be judged");
    };
    Check::judged(name, v.pass, v.share, HOST_NOISE_MAX, v.detail.clone())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_measured::{
        BusyMethod, Environment, Interval, LatencySummary, ProcessMethod, SideCpu, SideReport,
        Totals, WorkerPlacement,
    };
    use linkperf_workload::{Protocol, TestSpec};

    use super::*;
    use crate::{derive_run, hosts_of_run, judge_run, CheckStatus};

    const SECONDS: usize = 12;

    fn time(busy_s: f64, idle_s: f64) -> ProcStatBreakdown {
        ProcStatBreakdown {
            user_s: busy_s / 2.0,
            system_s: busy_s / 2.0,
            idle_s,
            ..Default::default()
        }
    }

    /// A side of a 12 s window on a 2-CPU host busy `host_busy_s` in all,
    /// its process `process_s`, pinned to CPU `pinned` (busy `cpu_busy_s`)
    /// or free; `per_second` its seconds' transactions.
    fn side(
        per_second: &[u64],
        process_s: f64,
        host_busy_s: f64,
        pinned: Option<(usize, f64)>,
    ) -> SideReport {
        let window = SECONDS as f64;
        let txns: u64 = per_second.iter().sum();
        SideReport {
            window_s: window,
            tx_bytes: txns,
            rx_bytes: txns,
            transactions: txns,
            errors: 0,
            totals: Totals {
                tx_bytes: txns,
                rx_bytes: txns,
                transactions: txns,
            },
            latency: Some(LatencySummary {
                count: txns,
                mean: 100.0,
                ..Default::default()
            }),
            intervals: per_second
                .iter()
                .enumerate()
                .map(|(i, &n)| Interval {
                    start_s: i as f64,
                    length_s: 1.0,
                    tx_bytes: n,
                    rx_bytes: n,
                    transactions: n,
                    ..Default::default()
                })
                .collect(),
            cpu: SideCpu {
                process_s,
                process_user_s: process_s / 2.0,
                process_system_s: process_s / 2.0,
                process_method: ProcessMethod::RusageSelf,
                system_busy_s: host_busy_s,
                system_busy_method: BusyMethod::ProcStat,
                softirq_s: 0.0,
                proc_stat: time(host_busy_s, 2.0 * window - host_busy_s),
                cpus: 2,
                window_s: window,
                opened_late_s: Some(0.001),
                closed_late_s: Some(0.001),
            },
            tcp_info: None,
            workers: vec![WorkerPlacement {
                worker: 0,
                pinned: pinned.map(|(c, _)| vec![c]),
                allowed_cpus: vec![0, 1],
                last_cpu: None,
                flows: 1,
            }],
            busy_poll: false,
            connections: 1,
            error_samples: Vec::new(),
            profile: None,
            latency_histogram: None,
            flows: Default::default(),
            udp: None,
            links: Vec::new(),
            pinned_cpus: pinned
                .map(|(cpu, busy)| {
                    vec![CpuShare {
                        cpu,
                        time: time(busy, window - busy),
                    }]
                })
                .unwrap_or_default(),
            open_loop: None,
        }
    }

    /// Both sides on one host, each with half the given process time.
    fn noise(
        seconds: &[u64],
        test_s: f64,
        host_busy_s: f64,
        pinned: Option<(usize, f64)>,
    ) -> Check {
        let spec = TestSpec::new(
            "str-readx30k".parse().unwrap(),
            Protocol::Tcp,
            1,
            Duration::from_secs(SECONDS as u64),
        );
        let half = test_s / 2.0;
        let mut run = derive_run(
            1,
            String::new(),
            &spec,
            side(seconds, half, host_busy_s, pinned),
            Some(side(seconds, half, host_busy_s, pinned)),
        );
        let env = Environment {
            boot_id: Some("b00t".into()),
            ..Environment::default()
        };
        let hosts = hosts_of_run(&run, Some(&env), Some(&env));
        judge_run(
            &mut run,
            &Judge {
                spec: &spec,
                interrupted: false,
                hosts: Some(hosts),
                max_loss: None,
            },
        );
        run.checks
            .iter()
            .find(|c| c.name == CheckName::HostNoise)
            .unwrap()
            .clone()
    }

    fn steady() -> Vec<u64> {
        [
            1000, 1010, 990, 1005, 995, 1000, 1002, 998, 1007, 993, 1001, 999,
        ]
        .to_vec()
    }

    fn drifting() -> Vec<u64> {
        (0..SECONDS as u64).map(|i| 1000 - 40 * i).collect()
    }

    #[test]
    fn a_busy_host_beside_the_tests_cpu_leaves_a_steady_run_ok() {
        // The test on CPU 0: 11.5 of its 12 s the test's own. The host: the
        // test's 11.5 s and a hog's 6 s on CPU 1 (25 % of the host).
        let c = noise(&steady(), 11.5, 17.5, Some((0, 11.5)));
        assert_eq!(c.status, CheckStatus::Pass, "{c:?}");
        assert_eq!(c.value, Some(0.0), "nothing of others' on CPU 0: {c:?}");
        assert_eq!(c.bound, Some(HOST_NOISE_MAX));
        assert!(c.detail.contains("CPU 0"), "{}", c.detail);
        assert!(c.detail.contains("stationary"), "{}", c.detail);
        // The same host quiet: the same figures, the rest not mentioned.
        let c = noise(&steady(), 11.5, 11.6, Some((0, 11.5)));
        assert_eq!(c.status, CheckStatus::Pass, "{c:?}");
        assert!(!c.detail.contains("as a whole"), "{}", c.detail);
    }

    #[test]
    fn a_hog_on_the_tests_own_cpu_makes_the_run_suspect() {
        // The test took 6 s of CPU 0's 12; 6 s more of it were busy: others'.
        let c = noise(&steady(), 6.0, 12.0, Some((0, 12.0)));
        assert_eq!(c.status, CheckStatus::Fail, "{c:?}");
        let share = c.value.unwrap();
        assert!((share - (6.0 - 0.02) / 12.0).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn a_busy_host_that_shows_in_the_runs_seconds_makes_it_suspect() {
        let c = noise(&drifting(), 11.5, 17.5, Some((0, 11.5)));
        assert_eq!(c.status, CheckStatus::Fail, "{c:?}");
        assert!(c.detail.contains("not stationary"), "{}", c.detail);
        // A quiet host is never failed by its run's drift (the trend test's
        // false alarms are not the host's doing).
        let c = noise(&drifting(), 11.5, 11.6, Some((0, 11.5)));
        assert_eq!(c.status, CheckStatus::Pass, "{c:?}");
    }

    #[test]
    fn a_free_run_is_judged_on_the_whole_host() {
        // Free: its CPUs are the host's two. A hog's 6 s of 24: 25 %.
        let c = noise(&steady(), 11.5, 17.5, None);
        assert_eq!(c.status, CheckStatus::Fail, "{c:?}");
        assert!(c.detail.contains("ran free"), "{}", c.detail);
        let c = noise(&steady(), 11.5, 12.0, None);
        assert_eq!(c.status, CheckStatus::Pass, "{c:?}");
    }
}
