//! The lab's host, for the tests that build network namespaces (the lab's,
//! the mesh's across namespaces, a few faults): what this host lacks to
//! build them, the skip (or, under LINKPERF_LAB_REQUIRED=1, the failure)
//! when it lacks something, and the commands that look at what is there.

use std::process::{Command, Stdio};

/// With this set to 1, a lab test that cannot run on this host fails instead
/// of skipping.
const REQUIRED: &str = "LINKPERF_LAB_REQUIRED";

/// What this process lacks to build namespaces with `programs` (iproute2's
/// `ip`, `tc`, `bridge`): CAP_NET_ADMIN and CAP_SYS_ADMIN, and the programs;
/// empty when it lacks nothing.
pub fn missing(programs: &[&'static str]) -> Vec<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    let mut m = Vec::new();
    if caps & (1 << 12) == 0 {
        m.push("CAP_NET_ADMIN (run as root)".to_string());
    }
    if caps & (1 << 21) == 0 {
        m.push("CAP_SYS_ADMIN (run as root)".to_string());
    }
    for program in programs {
        if !has(program) {
            m.push(format!("iproute2's `{program}`"));
        }
    }
    m
}

/// Whether `program -V` runs.
fn has(program: &str) -> bool {
    Command::new(program)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Test `test` cannot run on this host for want of `what`: it says so and
/// skips, or, with LINKPERF_LAB_REQUIRED=1, fails.
pub fn skip(test: &str, what: &str) {
    assert!(
        std::env::var(REQUIRED).as_deref() != Ok("1"),
        "{test}: {REQUIRED}=1, but this host cannot run the lab tests: missing {what}"
    );
    eprintln!("{test}: SKIPPED: missing {what}");
}

/// Whether this process can build namespaces with `programs`; if not, says
/// so and the test skips, or fails under LINKPERF_LAB_REQUIRED=1.
pub fn ready(test: &str, programs: &[&'static str]) -> bool {
    let missing = missing(programs);
    if !missing.is_empty() {
        skip(test, &missing.join(", "));
    }
    missing.is_empty()
}

/// `program ARGS` (`ip`, `tc`, `bridge`, ...) to the end; its stdout,
/// asserting success.
pub fn sh(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Network namespaces whose name starts with `prefix`.
pub fn namespaces(prefix: &str) -> Vec<String> {
    sh("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(String::from)
        .collect()
}
