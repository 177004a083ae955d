//! The built-in suites: the studies in `shared/seeds` as linkperf runs them.
//! `docs/suites.md` says what each reproduces and why it is shaped so.

use std::time::Duration;

use crate::{Protocol, Suite, SuiteTest, TestSpec, Workload};

/// The five workloads of the HiperSockets/OSA study, in the study's order.
pub const STUDY_WORKLOADS: [&str; 5] = [
    "rr1c-1x1",
    "rr1c-200x1000",
    "rr1c-200x30k",
    "str-readx30k",
    "str-writex30k",
];

/// The nine user counts of the HiperSockets/OSA study.
pub const STUDY_USERS: [u32; 9] = [1, 10, 25, 50, 75, 100, 150, 200, 250];

/// The STT/VXLAN thread's bulk test: one direction, client to server, 64 KiB
/// writes (the largest TSO/GSO segment; see `docs/suites.md`).
const TUNNEL_STREAM: &str = "stream-up:64k";

/// The cluster-interconnect mix: lock messages (200 B / 200 B) and block
/// transfers (200 B / 8 KiB), one to three.
const INTERCONNECT_MIX: &str = "mix:200x200*1,200x8k*3";

/// One built-in suite: what `--list` shows and how to build its tests.
struct Builtin {
    name: &'static str,
    description: &'static str,
    repeat: u32,
    tests: fn() -> Vec<SuiteTest>,
}

/// Every built-in suite, in the order `--list` shows them.
const BUILTINS: [Builtin; 4] = [
    Builtin {
        name: "quick",
        description: "a half-minute health check: rr1c-1x1, rr1c-200x1000, str-readx30k, str-writex30k at 1 and 10 users, 2 s each",
        repeat: 1,
        tests: quick,
    },
    Builtin {
        name: "uperf45",
        description: "the HiperSockets/OSA study: 5 workloads x 9 user counts (1-250) over tcp, 45 tests of 50 s",
        repeat: 1,
        tests: uperf45,
    },
    Builtin {
        name: "tunnel",
        description: "the STT/VXLAN thread: tcp stream client to server with 5 users, plus small-packet rr at 1 and 5 users, 3 runs of 50 s",
        repeat: 3,
        tests: tunnel,
    },
    Builtin {
        name: "interconnect",
        description: "the Oracle RAC interconnect: a mix of 200x200 lock messages and 200x8k block transfers (1:3) at 40, 60 and 80 users, over udp and tcp",
        repeat: 1,
        tests: interconnect,
    },
];

/// The built-in suite called `name`, if there is one.
pub fn builtin_suite(name: &str) -> Option<Suite> {
    BUILTINS.iter().find(|b| b.name == name).map(|b| Suite {
        retry_suspect: None,
        max_loss: None,
        name: b.name.to_string(),
        description: b.description.to_string(),
        repeat: b.repeat,
        tests: (b.tests)(),
    })
}

/// Every built-in suite's name and one-line description, in the order `--list` shows them.
pub fn builtin_suites() -> Vec<(&'static str, &'static str)> {
    BUILTINS.iter().map(|b| (b.name, b.description)).collect()
}

/// Workload-major expansion: every user count and protocol of the first
/// workload, then the next workload.
fn matrix(
    workloads: &[&str],
    users: &[u32],
    protocols: &[Protocol],
    duration: Duration,
    warmup: Duration,
) -> Vec<SuiteTest> {
    let mut tests = Vec::new();
    for w in workloads {
        let workload: Workload = w.parse().expect("built-in workloads parse");
        for p in protocols {
            for u in users {
                let mut spec = TestSpec::new(workload.clone(), *p, *u, duration);
                spec.warmup = warmup;
                tests.push(SuiteTest::new(spec));
            }
        }
    }
    tests
}

fn quick() -> Vec<SuiteTest> {
    matrix(
        &["rr1c-1x1", "rr1c-200x1000", "str-readx30k", "str-writex30k"],
        &[1, 10],
        &[Protocol::Tcp],
        Duration::from_secs(2),
        Duration::from_millis(500),
    )
}

fn uperf45() -> Vec<SuiteTest> {
    matrix(
        &STUDY_WORKLOADS,
        &STUDY_USERS,
        &[Protocol::Tcp],
        Duration::from_secs(50),
        Duration::from_secs(1),
    )
}

fn tunnel() -> Vec<SuiteTest> {
    let window = Duration::from_secs(50);
    let warmup = Duration::from_secs(1);
    let mut tests = matrix(&[TUNNEL_STREAM], &[5], &[Protocol::Tcp], window, warmup);
    tests.extend(matrix(
        &["rr1c-1x1", "rr1c-200x1000"],
        &[1, 5],
        &[Protocol::Tcp],
        window,
        warmup,
    ));
    tests
}

fn interconnect() -> Vec<SuiteTest> {
    matrix(
        &[INTERCONNECT_MIX],
        &[40, 60, 80],
        &[Protocol::Udp, Protocol::Tcp],
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bytes, MixEntry, StreamDirection};

    fn names(s: &Suite) -> Vec<String> {
        s.tests.iter().map(SuiteTest::name).collect()
    }

    #[test]
    fn every_builtin_builds_and_validates() {
        let listed = builtin_suites();
        assert_eq!(
            listed.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["quick", "uperf45", "tunnel", "interconnect"]
        );
        for (name, desc) in listed {
            let s = builtin_suite(name).unwrap();
            assert_eq!(s.name, name);
            assert_eq!(s.description, desc);
            assert!(!desc.is_empty());
            s.validate().unwrap();
        }
        assert!(builtin_suite("uperf46").is_none());
    }

    #[test]
    fn uperf45_is_the_study_matrix_in_order() {
        let s = builtin_suite("uperf45").unwrap();
        let mut expected = Vec::new();
        for w in [
            "rr1c-1x1",
            "rr1c-200x1000",
            "rr1c-200x30k",
            "str-readx30k",
            "str-writex30k",
        ] {
            for u in [1, 10, 25, 50, 75, 100, 150, 200, 250] {
                expected.push(format!("{w}--{u}"));
            }
        }
        assert_eq!(names(&s), expected);
        assert_eq!(s.tests.len(), 45);
        assert_eq!(names(&s)[12], "rr1c-200x1000--50");
        assert_eq!(s.repeat, 1);
        for t in &s.tests {
            assert_eq!(t.spec.protocol, Protocol::Tcp);
            assert_eq!(t.spec.duration, Duration::from_secs(50));
            assert_eq!(t.spec.warmup, Duration::from_secs(1));
            assert_eq!(t.overrides, Default::default());
        }
    }

    #[test]
    fn quick_is_eight_short_tests() {
        let s = builtin_suite("quick").unwrap();
        assert_eq!(
            names(&s),
            [
                "rr1c-1x1--1",
                "rr1c-1x1--10",
                "rr1c-200x1000--1",
                "rr1c-200x1000--10",
                "str-readx30k--1",
                "str-readx30k--10",
                "str-writex30k--1",
                "str-writex30k--10",
            ]
        );
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.duration == Duration::from_secs(2)
                && t.spec.warmup == Duration::from_millis(500)));
        assert_eq!(s.repeat, 1);
        assert!(s.estimated_time(1) <= Duration::from_secs(60));
    }

    #[test]
    fn interconnect_runs_the_mix_over_udp_and_tcp() {
        let s = builtin_suite("interconnect").unwrap();
        assert_eq!(
            names(&s),
            [
                "mix-200x200*1,200x8k*3--40--udp",
                "mix-200x200*1,200x8k*3--60--udp",
                "mix-200x200*1,200x8k*3--80--udp",
                "mix-200x200*1,200x8k*3--40",
                "mix-200x200*1,200x8k*3--60",
                "mix-200x200*1,200x8k*3--80",
            ]
        );
        let mix = Workload::Mix {
            entries: vec![
                MixEntry {
                    request: Bytes(200),
                    response: Bytes(200),
                    weight: 1,
                },
                MixEntry {
                    request: Bytes(200),
                    response: Bytes(8192),
                    weight: 3,
                },
            ],
        };
        assert!(s.tests.iter().all(|t| t.spec.workload == mix));
        let udp = s
            .tests
            .iter()
            .filter(|t| t.spec.protocol == Protocol::Udp)
            .count();
        assert_eq!(udp, 3);
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.duration == Duration::from_secs(30)));
        assert_eq!(s.repeat, 1);
    }

    #[test]
    fn tunnel_is_the_threads_stream_and_the_reviewers_small_packets() {
        let s = builtin_suite("tunnel").unwrap();
        assert_eq!(
            names(&s),
            [
                "str-readx64k--5",
                "rr1c-1x1--1",
                "rr1c-1x1--5",
                "rr1c-200x1000--1",
                "rr1c-200x1000--5",
            ]
        );
        assert_eq!(
            s.tests[0].spec.workload,
            Workload::Stream {
                message: Bytes(65536),
                direction: StreamDirection::Up
            }
        );
        assert!(s.tests.iter().all(
            |t| t.spec.protocol == Protocol::Tcp && t.spec.duration == Duration::from_secs(50)
        ));
        assert_eq!(s.repeat, 3);
    }
}
