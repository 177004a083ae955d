//! Progress of a suite: a bar with the current test, its live throughput and
//! the suite's ETA on a terminal, and under it the test's last second as
//! `run --interval` shows it; one plain line per finished run otherwise.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use linkperf_engine::LiveStats;

use crate::watch::Columns;

/// How often the live throughput is refreshed.
const TICK: Duration = Duration::from_millis(500);

/// The progress display of one suite.
pub struct Progress {
    bar: Option<ProgressBar>,
    estimates: Vec<Duration>,
    total: usize,
    ticker: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

fn fmt_eta(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

impl Progress {
    /// A display for runs expected to take `estimates`; `plain` for one line per run.
    pub fn new(estimates: Vec<Duration>, plain: bool) -> Self {
        let total = estimates.len();
        let bar = (!plain).then(|| {
            let b = ProgressBar::new(total as u64);
            // The running test on the bar's line, its last second under it,
            // cut to the terminal's width.
            b.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {prefix}\n{wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        Progress {
            bar,
            estimates,
            total,
            ticker: None,
        }
    }

    /// A line above the bar (or on stderr).
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("linkperf: {line}"),
        }
    }

    /// Run `k` (0-based among the pending), shown as `head` (`NAME run 2/3`,
    /// `… retry 1`), starts; its warmup and window together last `traffic`;
    /// its seconds are shown with `columns`.
    pub fn start_run(
        &mut self,
        k: usize,
        head: &str,
        traffic: Duration,
        live: Arc<LiveStats>,
        columns: Columns,
    ) {
        self.stop_ticker();
        let Some(bar) = self.bar.clone() else { return };
        let eta: Duration = self.estimates.iter().skip(k).sum();
        let head = head.to_string();
        // The last test's second goes first: no frame shows it with this test.
        bar.set_message("");
        bar.set_prefix(format!("{head}  ETA {}", fmt_eta(eta)));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let started = Instant::now();
        let handle = std::thread::spawn(move || {
            let mut last = (Instant::now(), live.totals());
            while !flag.load(Ordering::Acquire) {
                std::thread::sleep(TICK);
                let now = (Instant::now(), live.totals());
                let dt = now.0.duration_since(last.0).as_secs_f64().max(1e-6);
                let bytes = (now.1.tx_bytes + now.1.rx_bytes)
                    .saturating_sub(last.1.tx_bytes + last.1.rx_bytes);
                let txns = now.1.transactions.saturating_sub(last.1.transactions);
                let left = eta.saturating_sub(started.elapsed());
                let moved = now.1.tx_bytes + now.1.rx_bytes > 0;
                let seconds = live.intervals();
                let state = if !moved && seconds.is_empty() {
                    "connecting".to_string()
                } else if !moved {
                    // The warm-up's seconds come before the running totals.
                    "warming up".to_string()
                } else if bytes == 0 && txns == 0 && started.elapsed() >= traffic {
                    // The window is over: the drain, then the server's results.
                    "finishing".to_string()
                } else {
                    format!(
                        "{:.3} Gbit/s  {:.0} txn/s",
                        bytes as f64 * 8.0 / dt / 1e9,
                        txns as f64 / dt
                    )
                };
                bar.set_prefix(format!("{head}  {state}  ETA {}", fmt_eta(left)));
                if let Some(second) = seconds.last() {
                    // One space between figures: the line is cut at the
                    // terminal's width.
                    let line = crate::watch::line(second, &columns);
                    bar.set_message(line.split_whitespace().collect::<Vec<_>>().join(" "));
                }
                last = now;
            }
        });
        self.ticker = Some((stop, handle));
    }

    /// The run just finished, described by `line`.
    ///
    /// The line goes to standard output in both modes, so `> log` keeps it;
    /// the bar (on standard error) steps aside while it is written.
    pub fn finish_run(&mut self, line: &str) -> std::io::Result<()> {
        self.stop_ticker();
        let text = format!("{line}\n");
        match &self.bar {
            Some(b) => {
                b.suspend(|| crate::emit(&text))?;
                b.inc(1);
                Ok(())
            }
            None => crate::emit(&text),
        }
    }

    fn stop_ticker(&mut self) {
        if let Some((stop, h)) = self.ticker.take() {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
    }

    /// The suite is over.
    pub fn done(&mut self) {
        self.stop_ticker();
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        let _ = self.total;
    }
}
