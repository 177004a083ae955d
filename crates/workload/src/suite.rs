//! Suites: a named list of tests run as one study, the order repeated runs
//! happen in, and the fingerprint that lets `--resume` refuse a changed suite.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::{CpuList, TestSpec, WorkloadError};

/// Time one run costs beyond its warmup and measurement window: the control
/// handshake, connecting every user, the drain after the window and the
/// exchange of results. Used only to estimate a suite's wall time.
pub const RUN_OVERHEAD: Duration = Duration::from_millis(1500);

/// Per-test settings beyond the spec: how each side places its workers.
/// `None` leaves the choice to the command line (or its default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TestOverrides {
    /// Client event-loop workers.
    pub threads: Option<u32>,
    /// Server event-loop workers.
    pub server_threads: Option<u32>,
    /// CPUs the client's workers are pinned to.
    pub affinity: Option<CpuList>,
    /// CPUs the server's workers are pinned to.
    pub server_affinity: Option<CpuList>,
    /// Workers on both sides poll without sleeping.
    pub busy_poll: Option<bool>,
}

/// One test of a suite: what both ends agree on, and how each side runs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SuiteTest {
    /// The test as both ends agree on it.
    pub spec: TestSpec,
    /// Worker placement for this test.
    pub overrides: TestOverrides,
}

impl SuiteTest {
    /// A test with no overrides.
    pub fn new(spec: TestSpec) -> Self {
        SuiteTest {
            spec,
            overrides: TestOverrides::default(),
        }
    }

    /// The test's name in the study's form (`rr1c-200x1000--50`), unique within a suite.
    pub fn name(&self) -> String {
        self.spec.name()
    }
}

/// A named list of tests, run as one study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    /// Short name (`uperf45`, or the `name` of a suite file).
    pub name: String,
    /// One line saying what the suite is for.
    pub description: String,
    /// How many times each test runs unless the command line says otherwise.
    pub repeat: u32,
    /// The tests, in the order a single pass runs them.
    pub tests: Vec<SuiteTest>,
    /// How many times a suspect run is run again at once, unless the
    /// command line says otherwise (`retry_suspect` in a suite file).
    pub retry_suspect: Option<u32>,
    /// The largest share of lost UDP transactions a run may have and pass
    /// its check, 0 to 1 (`max_loss` in a suite file); `None`: not judged.
    pub max_loss: Option<f64>,
}

/// What the fingerprint covers: the name and the tests, not the description
/// or the default repeat (a resumed suite may be asked for more runs).
#[derive(Serialize)]
struct Fingerprinted<'a> {
    name: &'a str,
    tests: &'a [SuiteTest],
}

impl Suite {
    /// A stable fingerprint: the SHA-256, in lowercase hex, of the canonical JSON of
    /// the suite's name and tests. `--resume` refuses a results file whose suite
    /// has another fingerprint.
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_vec(&Fingerprinted {
            name: &self.name,
            tests: &self.tests,
        })
        .expect("suite tests serialize to JSON");
        Sha256::digest(&canonical)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Applies command-line timing to every test: the measurement window and the
    /// warmup are replaced when given.
    pub fn with_timing(mut self, duration: Option<Duration>, warmup: Option<Duration>) -> Suite {
        for t in &mut self.tests {
            if let Some(d) = duration {
                t.spec.duration = d;
            }
            if let Some(w) = warmup {
                t.spec.warmup = w;
            }
        }
        self
    }

    /// Applies command-line user counts: every test runs at each of `users`
    /// instead of its own count (a test the suite had at several counts
    /// becomes one per count given), in the suite's order; `None` leaves the
    /// suite as it is.
    pub fn with_users(mut self, users: Option<&[u32]>) -> Suite {
        let Some(users) = users.filter(|u| !u.is_empty()) else {
            return self;
        };
        let mut tests: Vec<SuiteTest> = Vec::new();
        for t in &self.tests {
            for &u in users {
                let mut one = t.clone();
                one.spec.users = u;
                if !tests.iter().any(|x| x.name() == one.name()) {
                    tests.push(one);
                }
            }
        }
        self.tests = tests;
        self
    }

    /// Estimated wall time of `repeat` passes: for every run, its warmup, its
    /// window and [`RUN_OVERHEAD`].
    pub fn estimated_time(&self, repeat: u32) -> Duration {
        // Saturating: a suite built in code is not bounded like a file's.
        let pass = self.tests.iter().fold(Duration::ZERO, |sum, t| {
            sum.saturating_add(t.spec.warmup)
                .saturating_add(t.spec.duration)
                .saturating_add(RUN_OVERHEAD)
        });
        pass.saturating_mul(repeat)
    }

    /// Checks that the suite can run: at least one test, every test valid, no two
    /// tests with the same name. Suite files are checked when parsed; this is for
    /// suites built or changed in code (after [`Suite::with_timing`], say).
    pub fn validate(&self) -> Result<(), SuiteError> {
        if self.tests.is_empty() {
            return Err(SuiteError::NoTests {
                origin: self.name.clone(),
            });
        }
        let mut seen = HashMap::new();
        for (i, t) in self.tests.iter().enumerate() {
            let name = t.name();
            t.spec.validate().map_err(|source| SuiteError::Test {
                at: Location::unplaced(&self.name),
                test: name.clone(),
                source,
            })?;
            if let Some(first) = seen.insert(name.clone(), i) {
                return Err(SuiteError::DuplicateTest {
                    origin: self.name.clone(),
                    name,
                    first: format!("test {}", first + 1),
                    second: format!("test {}", i + 1),
                });
            }
        }
        Ok(())
    }
}

/// The order runs happen in, as (test index, run number from 1).
///
/// Interleaved: the whole matrix once, then again (run 1 of every test, then
/// run 2 ...), so that drift over time spreads over every test instead of
/// hiding in one. Otherwise back to back: test 1 runs 1..N, then test 2 ...
pub fn run_order(tests: usize, repeat: u32, interleave: bool) -> Vec<(usize, u32)> {
    if interleave {
        (1..=repeat)
            .flat_map(|run| (0..tests).map(move |t| (t, run)))
            .collect()
    } else {
        (0..tests)
            .flat_map(|t| (1..=repeat).map(move |run| (t, run)))
            .collect()
    }
}

/// Where a problem is: the suite file (or suite) and, when known, the line and
/// column (both from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file the suite came from, as the caller named it.
    pub origin: String,
    /// Line and column, when the problem has a place in the file.
    pub position: Option<(usize, usize)>,
}

impl Location {
    /// A location at byte `offset` of `text`.
    pub(crate) fn at(origin: &str, text: &str, offset: usize) -> Self {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location {
            origin: origin.to_string(),
            position: Some((line, column)),
        }
    }

    /// A location without a place in a file.
    pub(crate) fn unplaced(origin: &str) -> Self {
        Location {
            origin: origin.to_string(),
            position: None,
        }
    }

    /// The line, if known.
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(l, _)| l)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}, line {line}, column {column}", self.origin),
            None => f.write_str(&self.origin),
        }
    }
}

/// Why a suite was refused. Every message names the file and, where the
/// problem has one, its line and column.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SuiteError {
    /// The text is not TOML, a key is unknown, or a value has the wrong type.
    #[error("{at}: {message}")]
    Toml {
        /// Where.
        at: Location,
        /// What toml said.
        message: String,
    },
    /// A value was read but is not acceptable (an unknown workload, a bad size,
    /// zero users, an empty list).
    #[error("{at}: {message}")]
    Value {
        /// Where.
        at: Location,
        /// What is wrong with it.
        message: String,
    },
    /// A test's combination of settings cannot run (a stream over UDP, say).
    #[error("{at}: test {test} cannot run: {source}")]
    Test {
        /// Where the test was defined.
        at: Location,
        /// The test's name.
        test: String,
        /// Why it cannot run.
        #[source]
        source: WorkloadError,
    },
    /// Two tests have the same name.
    #[error("{origin}: test {name} is defined twice, at {first} and at {second}: test names must be unique within a suite")]
    DuplicateTest {
        /// The suite file.
        origin: String,
        /// The name both tests have.
        name: String,
        /// Where the first is defined (`line 4, column 1`).
        first: String,
        /// Where the second is defined.
        second: String,
    },
    /// The suite has no tests.
    #[error("{origin}: the suite has no tests: add a [[matrix]] or a [[test]] table")]
    NoTests {
        /// The suite file.
        origin: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Protocol;

    fn test(w: &str, users: u32) -> SuiteTest {
        SuiteTest::new(TestSpec::new(
            w.parse().unwrap(),
            Protocol::Tcp,
            users,
            Duration::from_secs(10),
        ))
    }

    fn suite() -> Suite {
        Suite {
            retry_suspect: None,
            max_loss: None,
            name: "s".into(),
            description: "d".into(),
            repeat: 1,
            tests: vec![
                test("rr1c-1x1", 1),
                test("rr1c-1x1", 10),
                test("str-readx30k", 1),
            ],
        }
    }

    #[test]
    fn interleaved_order_runs_the_matrix_then_again() {
        assert_eq!(
            run_order(3, 2, true),
            vec![(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]
        );
    }

    #[test]
    fn back_to_back_order_finishes_each_test_first() {
        assert_eq!(
            run_order(3, 2, false),
            vec![(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]
        );
    }

    #[test]
    fn run_order_edges() {
        assert!(run_order(0, 3, true).is_empty());
        assert!(run_order(3, 0, false).is_empty());
        assert_eq!(run_order(1, 1, true), vec![(0, 1)]);
    }

    #[test]
    fn fingerprint_is_stable_and_follows_the_tests() {
        let s = suite();
        let f = s.fingerprint();
        assert_eq!(f.len(), 64);
        assert!(f
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(f, s.fingerprint());
        assert_eq!(f, suite().fingerprint());

        let mut more_users = suite();
        more_users.tests[1].spec.users = 11;
        assert_ne!(f, more_users.fingerprint());

        let mut pinned = suite();
        pinned.tests[0].overrides.threads = Some(2);
        assert_ne!(f, pinned.fingerprint());

        let mut renamed = suite();
        renamed.name = "t".into();
        assert_ne!(f, renamed.fingerprint());

        let mut reworded = suite();
        reworded.description = "other".into();
        reworded.repeat = 5;
        assert_eq!(
            f,
            reworded.fingerprint(),
            "description and repeat are not covered"
        );
    }

    #[test]
    fn with_users_runs_every_workload_at_each_count_given() {
        let quick = crate::builtin_suite("quick").unwrap();
        let names = |s: &Suite| s.tests.iter().map(SuiteTest::name).collect::<Vec<_>>();
        let one = quick.clone().with_users(Some(&[4]));
        assert_eq!(
            names(&one),
            [
                "rr1c-1x1--4",
                "rr1c-200x1000--4",
                "str-readx30k--4",
                "str-writex30k--4"
            ]
        );
        let two = quick.clone().with_users(Some(&[1, 50]));
        assert_eq!(two.tests.len(), 8);
        assert_eq!(names(&two)[..2], ["rr1c-1x1--1", "rr1c-1x1--50"]);
        two.validate().unwrap();
        assert_ne!(one.fingerprint(), quick.fingerprint());
        assert_eq!(quick.clone().with_users(None), quick);
    }

    #[test]
    fn with_timing_replaces_only_what_is_given() {
        let s = suite().with_timing(Some(Duration::from_secs(3)), None);
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.duration == Duration::from_secs(3)));
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.warmup == Duration::from_secs(1)));

        let s = suite().with_timing(None, Some(Duration::from_millis(200)));
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.duration == Duration::from_secs(10)));
        assert!(s
            .tests
            .iter()
            .all(|t| t.spec.warmup == Duration::from_millis(200)));

        assert_eq!(suite().with_timing(None, None), suite());
        assert_ne!(
            suite()
                .with_timing(Some(Duration::from_secs(3)), None)
                .fingerprint(),
            suite().fingerprint()
        );
    }

    #[test]
    fn estimated_time_counts_warmup_window_and_overhead_per_run() {
        // 3 tests × (1 s warmup + 10 s + 1.5 s) = 37.5 s per pass.
        assert_eq!(suite().estimated_time(1), Duration::from_millis(37_500));
        assert_eq!(suite().estimated_time(3), Duration::from_millis(112_500));
        assert_eq!(suite().estimated_time(0), Duration::ZERO);
    }

    #[test]
    fn validate_refuses_duplicates_invalid_tests_and_empty_suites() {
        assert!(suite().validate().is_ok());

        let mut dup = suite();
        dup.tests.push(test("rr1c-1x1", 10));
        let e = dup.validate().unwrap_err().to_string();
        assert!(
            e.contains("rr1c-1x1--10") && e.contains("test 2") && e.contains("test 4"),
            "{e}"
        );

        let zero = suite().with_timing(Some(Duration::ZERO), None);
        assert!(matches!(zero.validate(), Err(SuiteError::Test { .. })));

        let mut empty = suite();
        empty.tests.clear();
        assert!(matches!(empty.validate(), Err(SuiteError::NoTests { .. })));
    }

    #[test]
    fn locations_count_lines_and_columns_from_one() {
        let text = "a = 1\nbb = 2\n";
        let l = Location::at("f.toml", text, 9);
        assert_eq!(l.position, Some((2, 4)));
        assert_eq!(l.to_string(), "f.toml, line 2, column 4");
        assert_eq!(Location::at("f", text, 0).position, Some((1, 1)));
    }
}
