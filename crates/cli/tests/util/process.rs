//! Child processes the tests start, watched: what a child prints is read as
//! it comes, and a test waits for what it waits for (a line, the end of the
//! output, the exit) on a condition variable, with a deadline, never by
//! sleeping. Time is an input: a busy host makes a child slower, not a test
//! wrong.
//!
//! [`poll_until`] is the one exception, for what gives no event to wait for
//! (a process's descriptors and threads, a kernel counter); every call of it
//! is a poll, and is counted as such.

use std::io::{BufRead, BufReader, PipeWriter, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A child process with its stdout and stderr piped and read as they come;
/// killed when dropped.
pub struct Proc {
    child: Child,
    what: String,
    seen: Arc<Seen>,
}

/// What a child printed so far, shared with the threads that read it.
struct Seen {
    printed: Mutex<Printed>,
    changed: Condvar,
    /// The test's own end of the child's stderr pipe, while the child runs
    /// ([`Proc::spawn_synced`]): what [`Proc::stderr_now`] writes its marks
    /// with.
    marker: Mutex<Option<PipeWriter>>,
}

#[derive(Default)]
struct Printed {
    out: String,
    err: String,
    /// Pipes not at their end yet: none once the child has exited (a child
    /// closes its pipes as it exits; none of the tests' children leaves a
    /// process behind that holds them).
    open: u8,
    /// The last mark read back from the stderr pipe.
    marks_read: u64,
    /// The last mark written into it.
    marks_written: u64,
}

/// Starts a mark the test writes into a child's stderr pipe: a byte no
/// child prints, then the mark's number and a newline.
const MARK: &str = "\u{0}mark ";

/// Why [`Proc::wait_until`] returned without its condition.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The deadline passed.
    Late,
    /// The output ended (the child exited) first.
    Ended,
}

impl Proc {
    /// Spawns `cmd` (`what` names it in messages) with stdin from /dev/null
    /// and its output watched.
    pub fn spawn(cmd: &mut Command, what: impl Into<String>) -> Proc {
        Proc::start(cmd, what.into(), false)
    }

    /// [`Proc::spawn`] for a child asked what it has logged while it runs
    /// (a server): the test keeps a writing end of its stderr pipe, so that
    /// [`Proc::stderr_now`] can tell when everything the child wrote before
    /// has been read. Its end is known by its stdout's.
    pub fn spawn_synced(cmd: &mut Command, what: impl Into<String>) -> Proc {
        Proc::start(cmd, what.into(), true)
    }

    fn start(cmd: &mut Command, what: String, synced: bool) -> Proc {
        let (stderr, marker) = if synced {
            let (r, w) = std::io::pipe().expect("a pipe");
            let ours = w.try_clone().expect("a pipe's writing end");
            (Some(r), Some((Stdio::from(w), ours)))
        } else {
            (None, None)
        };
        let (child_err, marker) = match marker {
            Some((theirs, ours)) => (theirs, Some(ours)),
            None => (Stdio::piped(), None),
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(child_err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        // The child has its own copy of the pipe's writing end now: the
        // command's goes.
        cmd.stderr(Stdio::null());
        let seen = Arc::new(Seen {
            printed: Mutex::new(Printed {
                open: 2,
                ..Printed::default()
            }),
            changed: Condvar::new(),
            marker: Mutex::new(marker),
        });
        let out = child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>);
        let err = match stderr {
            Some(r) => Some(Box::new(r) as Box<dyn Read + Send>),
            None => child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        };
        for (pipe, is_err) in [(out, false), (err, true)] {
            let seen = seen.clone();
            std::thread::spawn(move || read_lines(pipe, is_err, &seen));
        }
        Proc { child, what, seen }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.seen.lock().out.clone()
    }

    /// What it printed on stderr so far (as read: a line it wrote a moment
    /// ago may not be; see [`Proc::stderr_now`]).
    pub fn stderr(&self) -> String {
        self.seen.lock().err.clone()
    }

    /// Everything it wrote on stderr until now, as a file it wrote to would
    /// hold it (a child started with [`Proc::spawn_synced`]): the test
    /// writes a mark into the pipe behind what the child wrote, and waits
    /// for the mark to be read back.
    pub fn stderr_now(&self) -> String {
        let mark = {
            let mut w = self.seen.marker.lock().unwrap_or_else(|e| e.into_inner());
            let Some(pipe) = w.as_mut() else {
                // Ended: its output is read to the end.
                let _ = self.wait_until(Duration::from_secs(30), |_, _| false);
                return self.stderr();
            };
            let mark = {
                let mut p = self.seen.lock();
                p.marks_written += 1;
                p.marks_written
            };
            // One write, far below PIPE_BUF: it reaches the pipe whole.
            pipe.write_all(format!("{MARK}{mark}\n").as_bytes())
                .expect("write a mark into the child's stderr pipe");
            mark
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut p = self.seen.lock();
        while p.marks_read < mark && p.open > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{}: its stderr pipe was not read",
                self.what
            );
            p = self
                .seen
                .changed
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        p.err.clone()
    }

    /// Waits until `until` holds for what it printed so far (stdout, stderr),
    /// at most `within`: woken by every line it prints.
    pub fn wait_until(
        &self,
        within: Duration,
        mut until: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), Stopped> {
        let deadline = Instant::now() + within;
        let mut p = self.seen.lock();
        loop {
            if until(&p.out, &p.err) {
                return Ok(());
            }
            if p.open == 0 {
                return Err(Stopped::Ended);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Stopped::Late);
            }
            p = self
                .seen
                .changed
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// [`Proc::wait_until`], failing the test (with what it printed) when the
    /// condition, `what`, did not come.
    pub fn wait_for(&self, what: &str, within: Duration, until: impl FnMut(&str, &str) -> bool) {
        if let Err(why) = self.wait_until(within, until) {
            let when = match why {
                Stopped::Late => format!("within {within:?}"),
                Stopped::Ended => "before it ended".to_string(),
            };
            panic!(
                "{} did not show {what} {when}\nstdout: {}\nstderr: {}",
                self.what,
                self.stdout(),
                self.stderr()
            );
        }
    }

    /// Waits until a line of its stdout satisfies `line`.
    pub fn wait_for_stdout_line(&self, what: &str, within: Duration, line: impl Fn(&str) -> bool) {
        self.wait_for(what, within, |out, _| out.lines().any(&line));
    }

    /// Waits until its stderr contains `text`.
    pub fn wait_for_stderr(&self, text: &str, within: Duration) {
        self.wait_for(&format!("{text:?} on stderr"), within, |_, err| {
            err.contains(text)
        });
    }

    /// Waits for it to exit, at most `within`: its status, or `None` while it
    /// still runs. Its output is read to the end first.
    pub fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        match self.wait_until(within, |_, _| false) {
            Err(Stopped::Ended) => Some(self.child.wait().expect("wait for a child process")),
            _ => None,
        }
    }

    /// Waits for it to exit, at most `within`, and returns its status, stdout
    /// and stderr. Killed, and the test failed with what it printed, when it
    /// runs longer.
    pub fn finish(mut self, within: Duration) -> (ExitStatus, String, String) {
        match self.exit_within(within) {
            Some(status) => (status, self.stdout(), self.stderr()),
            None => {
                self.kill();
                panic!(
                    "{} still running after {within:?}\nstdout: {}\nstderr: {}",
                    self.what,
                    self.stdout(),
                    self.stderr()
                );
            }
        }
    }

    /// True while it has not exited (a look, not a wait).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends it signal `sig` (`-INT`, `-STOP`, ...).
    pub fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Seen {
    fn lock(&self) -> MutexGuard<'_, Printed> {
        self.printed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads `pipe` line by line into `seen` until its end, waking the waiters
/// at every line and at the end. On stderr, a mark of the test's is taken
/// out (it may have come between two writes of one line of the child's);
/// the end of stdout is the child's, and the test's writing end of stderr
/// goes with it.
fn read_lines(pipe: Option<Box<dyn Read + Send>>, is_err: bool, seen: &Seen) {
    if let Some(pipe) = pipe {
        let mut r = BufReader::new(pipe);
        let mut line = Vec::new();
        while matches!(r.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let mut text = String::from_utf8_lossy(&line).into_owned();
            let mut p = seen.lock();
            if is_err {
                if let Some(at) = text.find(MARK) {
                    let number = text[at + MARK.len()..].trim_end();
                    p.marks_read = number.parse().expect("a mark's number");
                    text.truncate(at);
                }
                p.err.push_str(&text);
            } else {
                p.out.push_str(&text);
            }
            drop(p);
            seen.changed.notify_all();
            line.clear();
        }
    }
    if !is_err {
        // The child has exited: stderr ends once the test's end is closed.
        let ours = seen.marker.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(ours);
    }
    seen.lock().open -= 1;
    seen.changed.notify_all();
}

/// Sends signal `sig` (`-TERM`, `-STOP`, ...) to process `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

/// How often [`poll_until`] looks.
const POLL: Duration = Duration::from_millis(20);

/// Looks at `ready` every 20 ms until it gives a value, and returns it; the
/// test fails after `within` with the last reason it gave (`Err`) for not
/// being ready.
///
/// This polls: it is for what no event announces, such as the descriptors
/// and threads a process holds (/proc has no notification of a thread's
/// exit), a kernel counter (datagrams dropped at a socket) or a third-party
/// program that says nothing when it is ready. Where a process prints what
/// it did, or a socket or an exit can be waited for, wait for that instead
/// ([`Proc::wait_for`], a blocking read with a timeout). Every call of this
/// counts as a sleep of the tests.
pub fn poll_until<T>(within: Duration, mut ready: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match ready() {
            Ok(v) => return v,
            Err(why) => assert!(Instant::now() < deadline, "{why} (after {within:?})"),
        }
        std::thread::sleep(POLL);
    }
}

/// Threads, resident memory and its peak (kB) of process `pid`, from
/// /proc/PID/status.
pub fn proc_status(pid: u32) -> (usize, u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("Threads:") as usize, field("VmRSS:"), field("VmHWM:"))
}
