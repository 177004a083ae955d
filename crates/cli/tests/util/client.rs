//! `linkperf run` children that a test acts on while they run: their live
//! stream (`--json-stream -`) read from their stdout as it comes, so that a
//! test waits for the second it needs (the warm-up's, the window's), and
//! their results document (`--json`) in a directory of their own.

use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use super::process::Proc;
use super::BIN;

/// A `linkperf run` child, killed when dropped.
pub struct Client {
    proc: Proc,
    json: PathBuf,
    _dir: tempfile::TempDir,
}

impl Client {
    /// `linkperf ARGS --json FILE --json-stream -` (ARGS from `run` on).
    pub fn spawn(args: &[&str]) -> Client {
        Client::spawn_under(&[], args)
    }

    /// [`Client::spawn`] run by the program and arguments of `under` (e.g.
    /// `ip netns exec NS`), when not empty.
    pub fn spawn_under(under: &[&str], args: &[&str]) -> Client {
        let dir = tempfile::tempdir().expect("temp dir");
        let json = dir.path().join("results.json");
        let mut all = under.iter().chain(std::iter::once(&BIN));
        let mut c = Command::new(all.next().expect("a program"));
        c.args(all)
            .args(args)
            .arg("--json")
            .arg(&json)
            .args(["--json-stream", "-"]);
        Client {
            proc: Proc::spawn(&mut c, format!("linkperf {args:?}")),
            json,
            _dir: dir,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Waits until it has measured part of its window: it reported a second
    /// outside the warm-up. Fails after `within`, or if it ended first.
    pub fn wait_for_window(&self, within: Duration) {
        self.wait_for_interval(within, false);
    }

    /// Waits until it has reported a second of its warm-up (`warmup`) or of
    /// its window; fails after `within`, or if it ended first.
    pub fn wait_for_interval(&self, within: Duration, warmup: bool) {
        self.proc.wait_for_stdout_line(
            &format!("an interval (warm-up: {warmup}) in its live stream"),
            within,
            |l| {
                serde_json::from_str::<Value>(l)
                    .is_ok_and(|e| e["event"] == "interval" && e["data"]["warmup"] == warmup)
            },
        );
    }

    /// Waits until `until` holds for its stdout so far (`what`, for the
    /// failure); fails after `within`, or if it ended first.
    pub fn wait_until_stdout(&self, what: &str, within: Duration, until: impl Fn(&str) -> bool) {
        self.proc.wait_for(what, within, |out, _| until(out));
    }

    /// Sends it signal `sig` (`-INT`, ...).
    pub fn signal(&self, sig: &str) {
        self.proc.signal(sig);
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Waits for it to exit, at most `within`; `None` while it still runs.
    pub fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        self.proc.exit_within(within)
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.proc.stderr()
    }

    /// Its results document; the test fails if there is none.
    pub fn doc(&self) -> Value {
        super::read_doc(&self.json)
    }

    /// Waits for it to exit (the test fails, after killing it, past
    /// `within`): its status, stdout, stderr and its results document
    /// (`Value::Null` if none was written).
    pub fn finish(self, within: Duration) -> (ExitStatus, String, String, Value) {
        let json = self.json.clone();
        let Client { proc, _dir, .. } = self;
        let (status, out, err) = proc.finish(within);
        (status, out, err, super::read_doc_or_null(&json))
    }
}
