//! `LINKPERF_RUN_LOG=FILE`: every run this process judges is appended to
//! FILE as one JSON line: its test, its status and the checks that failed,
//! with their figures. What a CI job or the operator of a shared host
//! counts over many invocations (how many runs came out `suspect`, and for
//! what): `scripts/test.sh` counts the test command's `host_noise` verdicts
//! with it. A log that cannot be written is said once on stderr and never
//! fails a run.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use linkperf_results::{Check, CheckStatus, Run, RunStatus};
use linkperf_workload::TestSpec;
use serde::Serialize;

/// The environment variable naming the log.
pub const RUN_LOG: &str = "LINKPERF_RUN_LOG";

/// One run's line, its fields in this order.
#[derive(Serialize)]
struct Line<'a> {
    test: String,
    run: u32,
    status: RunStatus,
    checks: Vec<&'a Check>,
}

/// Whether a failed write was said already.
static SAID: AtomicBool = AtomicBool::new(false);

/// Appends `run` of `spec`'s test, just judged, to the log if one is named.
pub fn note(spec: &TestSpec, run: &Run) {
    let Some(path) = std::env::var_os(RUN_LOG) else {
        return;
    };
    let not_passed: Vec<_> = run
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .collect();
    let line = Line {
        test: spec.name(),
        run: run.run,
        status: run.status,
        checks: not_passed,
    };
    let Ok(line) = serde_json::to_string(&line) else {
        return;
    };
    // One write of a whole line to a file opened for appending: lines of
    // processes writing at once do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        if !SAID.swap(true, Ordering::Relaxed) {
            eprintln!(
                "linkperf: warning: cannot append to {RUN_LOG} {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
}
