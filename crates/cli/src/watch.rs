//! The test as it runs: a line per interval for people (`run --interval`,
//! the line under a suite's progress bar), JSON lines for programs
//! (`run --json-stream`). Both read the client's seconds from
//! [`LiveStats`]: what the client sent and received, not each direction at
//! its receiver as the final table counts it.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use linkperf_engine::live::LiveInterval;
use linkperf_engine::LiveStats;
use linkperf_results::{Run, RunStatus, StreamError, StreamEvent, StreamInterval, StreamStart};
use linkperf_workload::{Protocol, StreamDirection, TestSpec, Workload};

use linkperf_report::units::Scale;

use crate::UsageError;

/// How often `run` looks for seconds that are over (workers publish theirs
/// every 100 ms).
const TICK: Duration = Duration::from_millis(100);

/// Which figures a test's lines show.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    /// Request/response: transactions/s and transaction times.
    round_trip: bool,
    /// TCP: retransmits.
    tcp: bool,
    /// UDP request/response: lost transactions.
    udp_rr: bool,
    /// A UDP stream the client receives (stream-down, stream-bidir): the
    /// datagrams lost on their way to it, and their jitter. An upload's
    /// datagrams are counted by the server, in the run's figures.
    udp_stream_in: bool,
    /// The warm-up's length, seconds: its lines count from the traffic's start.
    warmup_s: f64,
}

impl Columns {
    /// The columns of `spec`'s lines.
    pub fn of(spec: &TestSpec) -> Self {
        let round_trip = spec.workload.is_request_response();
        Columns {
            round_trip,
            tcp: spec.protocol == Protocol::Tcp,
            udp_rr: round_trip && spec.protocol == Protocol::Udp,
            udp_stream_in: spec.is_udp_stream()
                && matches!(
                    spec.workload,
                    Workload::Stream { direction, .. } if direction != StreamDirection::Up
                ),
            warmup_s: spec.warmup.as_secs_f64(),
        }
    }
}

/// `bytes` over `seconds` in bits per second.
fn bits_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// The line of `iv` (one second or several): its time (the window's
/// seconds from the window's opening, the warm-up's from the traffic's start,
/// marked), what the client sent and received, and the test's other figures.
pub fn line(iv: &LiveInterval, c: &Columns) -> String {
    let (from, mark) = if iv.warmup {
        (iv.start_s + c.warmup_s, "warmup")
    } else {
        (iv.start_s, "")
    };
    let to = from + iv.length_s;
    let mut s = format!("{mark:<6} {:>13}", format!("{from:.1}-{to:.1} s"));
    // Sent and received in one unit, as the line's times are.
    let bits = Scale::BITS.all(&[
        bits_per_s(iv.tx_bytes, iv.length_s),
        bits_per_s(iv.rx_bytes, iv.length_s),
    ]);
    let _ = write!(s, "  sent {:>13}  received {:>13}", bits[0], bits[1]);
    if c.round_trip {
        let per_s = if iv.length_s > 0.0 {
            iv.transactions as f64 / iv.length_s
        } else {
            0.0
        };
        let _ = write!(s, "  {per_s:>9.0} txn/s");
        match iv.latency.as_ref().and_then(|l| l.summary()) {
            Some(l) => {
                let t = Scale::TIME_US.all(&[l.mean, l.p99]);
                let _ = write!(s, "  mean {:>9}  p99 {:>9}", t[0], t[1]);
            }
            None => {
                let _ = write!(s, "  mean {:>9}  p99 {:>9}", "-", "-");
            }
        }
    }
    if c.tcp {
        match iv.retransmits {
            Some(r) => {
                let _ = write!(s, "  retr {r}");
            }
            None => s.push_str("  retr -"),
        }
    }
    if c.udp_rr {
        let all = iv.errors + iv.transactions;
        let pct = if all > 0 {
            iv.errors as f64 * 100.0 / all as f64
        } else {
            0.0
        };
        let _ = write!(s, "  lost {} ({pct:.2} %)", iv.errors);
    }
    if c.udp_stream_in {
        match (iv.expected, iv.lost()) {
            (Some(expected), Some(lost)) => {
                let pct = if expected > 0 {
                    lost as f64 * 100.0 / expected as f64
                } else {
                    0.0
                };
                let jitter = iv
                    .jitter_us
                    .map_or_else(|| "-".to_string(), |j| Scale::TIME_US.one(j));
                let _ = write!(s, "  lost {lost} ({pct:.2} %)  jitter {jitter:>9}");
            }
            _ => s.push_str("  lost -  jitter -"),
        }
    }
    s
}

/// Seconds added up into the lines of `every` seconds, the warm-up's apart
/// from the window's.
#[derive(Debug)]
struct Grouper {
    every: u32,
    open: Option<(LiveInterval, u32)>,
}

impl Grouper {
    /// Takes a second; returns a group it completes, or one it ends.
    fn push(&mut self, iv: LiveInterval) -> Vec<LiveInterval> {
        let mut out = Vec::new();
        if self
            .open
            .as_ref()
            .is_some_and(|(g, _)| g.warmup != iv.warmup)
        {
            out.extend(self.flush());
        }
        match &mut self.open {
            Some((g, n)) => {
                g.length_s += iv.length_s;
                g.add(&iv);
                *n += 1;
            }
            None => self.open = Some((iv, 1)),
        }
        if self.open.as_ref().is_some_and(|(_, n)| *n >= self.every) {
            out.extend(self.flush());
        }
        out
    }

    fn flush(&mut self) -> Option<LiveInterval> {
        self.open.take().map(|(g, _)| g)
    }
}

/// `run`'s live output: the lines, the stream, or neither.
pub struct LiveOutput {
    lines: Option<(Grouper, Columns)>,
    /// The stream, and whether it is standard output.
    stream: Option<Box<dyn Write + Send>>,
    /// Text for people goes to standard error: standard output is the stream's.
    to_stderr: bool,
    columns: Columns,
    /// The first write that failed; nothing is written after it.
    failed: Option<io::Error>,
}

impl LiveOutput {
    /// The output `--interval` and `--json-stream` ask for. Lines every
    /// `interval` seconds (0: none), else every second when `quiet` is not
    /// set and they would go to a terminal. `--json-stream -` writes the
    /// stream to standard output, and sends text for people to standard
    /// error.
    pub fn new(
        interval: Option<u32>,
        json_stream: Option<&Path>,
        quiet: bool,
        spec: &TestSpec,
    ) -> anyhow::Result<Self> {
        let to_stdout = json_stream.is_some_and(|p| p == Path::new("-"));
        let stream: Option<Box<dyn Write + Send>> = match json_stream {
            None => None,
            Some(_) if to_stdout => Some(Box::new(io::stdout())),
            Some(p) => {
                let f = File::create(p)
                    .map_err(|e| UsageError(format!("cannot write {}: {e}", p.display())))?;
                Some(Box::new(io::LineWriter::new(f)))
            }
        };
        let to_stderr = to_stdout;
        let terminal = if to_stderr {
            io::stderr().is_terminal()
        } else {
            io::stdout().is_terminal()
        };
        let every = interval.unwrap_or(u32::from(terminal && !quiet));
        let columns = Columns::of(spec);
        Ok(LiveOutput {
            lines: (every > 0).then_some((Grouper { every, open: None }, columns)),
            stream,
            to_stderr,
            columns,
            failed: None,
        })
    }

    /// Text for people: on standard output, or on standard error when the
    /// stream has standard output.
    pub fn human(&mut self, text: &str) -> io::Result<()> {
        if self.to_stderr {
            let mut e = io::stderr().lock();
            e.write_all(text.as_bytes())?;
            e.flush()
        } else {
            crate::emit(text)
        }
    }

    fn event(&mut self, e: &StreamEvent) {
        if self.failed.is_some() {
            return;
        }
        let Some(out) = &mut self.stream else { return };
        let written = serde_json::to_writer(&mut *out, e)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            self.failed = Some(e);
        }
    }

    /// The stream's start event.
    pub fn start(&mut self, start: StreamStart) {
        self.event(&StreamEvent::Start(Box::new(start)));
    }

    /// One second of the client's traffic: its event, and its line when a
    /// line is complete.
    fn interval(&mut self, iv: LiveInterval) {
        if self.stream.is_some() {
            let latency = iv.latency.as_ref().and_then(|l| l.summary());
            let e = StreamInterval::of(iv.clone().with_latency(latency), self.columns.udp_rr);
            self.event(&StreamEvent::Interval(Box::new(e)));
        }
        let groups = match &mut self.lines {
            Some((g, _)) => g.push(iv),
            None => return,
        };
        self.print_lines(groups);
    }

    fn print_lines(&mut self, groups: Vec<LiveInterval>) {
        let Some((_, c)) = &self.lines else { return };
        let text: String = groups.iter().map(|g| line(g, c) + "\n").collect();
        if !text.is_empty() && self.failed.is_none() {
            if let Err(e) = self.human(&text) {
                self.failed = Some(e);
            }
        }
    }

    /// The lines' last group, shorter than the others.
    fn flush_lines(&mut self) {
        let rest = match &mut self.lines {
            Some((g, _)) => g.flush(),
            None => None,
        };
        self.print_lines(rest.into_iter().collect());
    }

    /// The stream's last events: the error of a run that failed or was
    /// aborted, then the run. The first write that failed, if one did.
    pub fn end(&mut self, run: &Run) -> io::Result<()> {
        if matches!(run.status, RunStatus::Failed | RunStatus::Aborted) {
            self.event(&StreamEvent::Error(StreamError {
                status: run.status,
                error: run.error.clone().unwrap_or_default(),
            }));
        }
        self.event(&StreamEvent::End(Box::new(run.clone())));
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether anything reads the seconds.
    fn watches(&self) -> bool {
        self.lines.is_some() || self.stream.is_some()
    }

    /// Writes the seconds of `sides` (client groups run at once, each
    /// second added up over them) as they are over, until
    /// [`Watch::finish`].
    pub fn watch(self, sides: Vec<Arc<LiveStats>>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        if !self.watches() {
            return Watch {
                stop,
                thread: None,
                output: Some(self),
            };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = self;
            let mut pending: Vec<Vec<LiveInterval>> = vec![Vec::new(); sides.len()];
            loop {
                let last = flag.load(Ordering::Acquire);
                for (p, side) in pending.iter_mut().zip(&sides) {
                    p.extend(if last { side.drain() } else { side.intervals() });
                }
                for iv in merge_sides(&mut pending, last) {
                    out.interval(iv);
                }
                if last {
                    out.flush_lines();
                    return out;
                }
                std::thread::park_timeout(TICK);
            }
        });
        Watch {
            stop,
            thread: Some(thread),
            output: None,
        }
    }
}

/// The seconds every side has (all of them when `all`), each added up over
/// the sides, taken from `pending`.
fn merge_sides(pending: &mut [Vec<LiveInterval>], all: bool) -> Vec<LiveInterval> {
    let ready = if all {
        pending.iter().map(Vec::len).max().unwrap_or(0)
    } else {
        pending.iter().map(Vec::len).min().unwrap_or(0)
    };
    let mut out: Vec<LiveInterval> = Vec::with_capacity(ready);
    for p in pending.iter_mut() {
        for (k, iv) in p.drain(..ready.min(p.len())).enumerate() {
            match out.get_mut(k) {
                Some(m) => {
                    m.length_s = m.length_s.max(iv.length_s);
                    m.add(&iv);
                }
                None => out.push(iv),
            }
        }
    }
    out
}

/// The live output of a running test.
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<LiveOutput>>,
    output: Option<LiveOutput>,
}

impl Watch {
    /// The test is over: its last seconds are written; the output, for its end.
    pub fn finish(mut self) -> anyhow::Result<LiveOutput> {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            return t
                .join()
                .map_err(|_| anyhow::anyhow!("the live output's thread panicked"));
        }
        self.output
            .take()
            .ok_or_else(|| anyhow::anyhow!("the live output is gone"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_measured::JitterSum;
    use linkperf_metrics::LatencyRecorder;

    fn second(start_s: f64, warmup: bool, tx: u64) -> LiveInterval {
        let mut l = LatencyRecorder::new();
        l.record_ns(20_000);
        LiveInterval {
            start_s,
            length_s: 1.0,
            warmup,
            tx_bytes: tx,
            rx_bytes: tx,
            transactions: 10,
            retransmits: Some(1),
            latency: Some(l),
            ..LiveInterval::default()
        }
    }

    fn spec(workload: &str, protocol: Protocol) -> TestSpec {
        TestSpec::new(
            workload.parse().unwrap(),
            protocol,
            1,
            Duration::from_secs(3),
        )
    }

    #[test]
    fn a_line_says_what_the_client_sent_and_received() {
        let c = Columns::of(&spec("rr1c-1x1", Protocol::Tcp));
        let l = line(&second(2.0, false, 125_000), &c);
        assert_eq!(
            l,
            "           2.0-3.0 s  sent    1.0 Mbit/s  received    1.0 Mbit/s         10 txn/s  mean   20.0 µs  p99   20.0 µs  retr 1"
        );
        let w = line(&second(-1.0, true, 0), &c);
        assert!(
            w.starts_with("warmup     0.0-1.0 s  sent       0 bit/s  received       0 bit/s"),
            "{w}"
        );
        // Issue 35: one unit a line, from its largest figure; a zero is 0.
        let mut upload = second(0.0, false, 125_000_000);
        upload.rx_bytes = 0;
        let l = line(&upload, &c);
        assert!(
            l.contains("sent   1.00 Gbit/s  received      0 Gbit/s"),
            "{l}"
        );

        let stream = Columns::of(&spec("str-readx30k", Protocol::Unix));
        let l = line(&second(0.0, false, 125_000_000), &stream);
        assert_eq!(
            l,
            "           0.0-1.0 s  sent   1.00 Gbit/s  received   1.00 Gbit/s"
        );
        let udp = Columns::of(&spec("rr1c-1x1", Protocol::Udp));
        let mut iv = second(0.0, false, 1);
        iv.errors = 10;
        assert!(line(&iv, &udp).ends_with("  lost 10 (50.00 %)"));

        // A UDP stream the client receives: the datagrams lost on their way
        // to it, and their jitter.
        let down = Columns::of(&spec("stream-down:1400", Protocol::Udp));
        let mut iv = second(0.0, false, 1);
        iv.set_datagrams(
            990,
            1000,
            JitterSum {
                ns: 30_000.0,
                flows: 2,
            },
        );
        assert!(
            line(&iv, &down).ends_with("  lost 10 (1.00 %)  jitter   15.0 µs"),
            "{}",
            line(&iv, &down)
        );
        let iv = second(0.0, false, 1);
        assert!(line(&iv, &down).ends_with("  lost -  jitter -"));
        // An upload's datagrams are counted by the server: no column.
        let up = Columns::of(&spec("stream-up:1400", Protocol::Udp));
        assert!(!line(&iv, &up).contains("lost"));
        assert!(!Columns::of(&spec("stream-down:1400", Protocol::Tcp)).udp_stream_in);
    }

    #[test]
    fn lines_group_seconds_and_keep_the_warmup_apart() {
        let mut g = Grouper {
            every: 2,
            open: None,
        };
        let mut lines = Vec::new();
        for iv in [
            second(-1.5, true, 1),
            second(-0.5, true, 1),
            second(0.0, false, 1),
            second(1.0, false, 2),
            second(2.0, false, 4),
        ] {
            lines.extend(g.push(iv));
        }
        lines.extend(g.flush());
        let got: Vec<(bool, f64, f64, u64)> = lines
            .iter()
            .map(|l| (l.warmup, l.start_s, l.length_s, l.tx_bytes))
            .collect();
        assert_eq!(
            got,
            [
                (true, -1.5, 2.0, 2),
                (false, 0.0, 2.0, 3),
                (false, 2.0, 1.0, 4)
            ]
        );
        assert_eq!(lines[1].latency.as_ref().unwrap().count(), 2);
        assert_eq!(lines[1].retransmits, Some(2));
    }

    #[test]
    fn sides_are_added_up_second_by_second() {
        let mut pending = vec![
            vec![second(0.0, false, 1), second(1.0, false, 2)],
            vec![second(0.0, false, 10)],
        ];
        let got = merge_sides(&mut pending, false);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].tx_bytes, 11);
        let rest = merge_sides(&mut pending, true);
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].tx_bytes, 2);
        assert!(pending.iter().all(Vec::is_empty));
    }
}
