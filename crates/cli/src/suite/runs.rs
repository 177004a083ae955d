//! A suite's runs: each pending run executed (a workload or a profile) and
//! judged, retried at once while suspect, recorded and saved; the closing
//! words and exit code.

use super::*;

/// What the runs of a suite share.
pub(super) struct Runs<'a> {
    pub(super) suite: &'a Suite,
    pub(super) requests: &'a [RunRequest],
    pub(super) configs: &'a [(String, TestConfig)],
    pub(super) record: &'a SuiteRecord,
    pub(super) target: &'a Target,
    pub(super) judging: Judging,
    pub(super) retry_suspect: u32,
    pub(super) repeat: u32,
    pub(super) adaptive: Option<Adaptive>,
    pub(super) cancel: &'a Arc<AtomicBool>,
}

/// How the runs went.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) failures: usize,
    pub(super) suspects: usize,
    pub(super) retries: usize,
    pub(super) interrupted: bool,
    /// Runs started (a retry counts with its run).
    pub(super) ran: usize,
}

impl Runs<'_> {
    /// Runs `pending` (at most `steps` of them), each retried at once while
    /// suspect, saving after every run; stops at an interruption.
    pub(super) fn run(
        &self,
        pending: &[(usize, u32)],
        steps: usize,
        doc: &mut ResultsDocument,
        saver: &mut Option<crate::save::Saver>,
        progress: &mut Progress,
    ) -> anyhow::Result<Tally> {
        let mut t = Tally::default();
        'runs: for (k, &(ti, run_no)) in pending.iter().enumerate() {
            if t.ran >= steps {
                break;
            }
            let test = &self.suite.tests[ti];
            let name = test.name();
            // Past the fewest runs, a test runs again only while its interval
            // is wider than the target.
            if self
                .adaptive
                .is_some_and(|ad| !ad.needs(doc, &name, run_no))
            {
                continue;
            }
            t.ran += 1;
            // A suspect run is run again at once, before the next test.
            let mut retry_of: Option<u32> = None;
            for attempt in 0..=self.retry_suspect {
                if self.cancel.load(Ordering::Acquire) {
                    t.interrupted = true;
                    break 'runs;
                }
                let mut req = self.requests[ti].clone();
                req.cancel = Some(self.cancel.clone());
                let live = Arc::new(LiveStats::new(
                    req.client.threads.count().unwrap_or(1) as usize
                ));
                req.live = Some(live.clone());
                let traffic = test.spec.warmup + test.spec.duration;
                let head = if attempt > 0 {
                    format!("{name} run {run_no}/{} retry {attempt}", self.repeat)
                } else {
                    format!("{name} run {run_no}/{}", self.repeat)
                };
                progress.start_run(
                    k,
                    &head,
                    traffic,
                    live,
                    crate::watch::Columns::of(&test.spec),
                );
                let run_index = doc.find_test(&name).map_or(0, |t| t.runs.len()) as u32 + 1;
                let (mut run, outcome_env) = execute(self.target, &req, run_index, self.judging);
                run.retry_of = retry_of;
                if let Some((client_env, server_env)) = outcome_env {
                    doc.environment.client.get_or_insert(client_env);
                    if let Some(s) = server_env {
                        doc.environment.server.get_or_insert(s);
                    }
                }
                let status = run.status;
                let transactional = !matches!(test.spec.workload, Workload::Stream { .. });
                let line = progress_line(&name, run_no, self.repeat, &run, transactional);
                doc.push_run(&test.spec, self.configs[ti].1.clone(), run);
                doc.refresh_summaries();
                doc.suite = Some(self.record.clone());
                // Shown before it is saved: a save that fails cannot hide it.
                progress.finish_run(&line)?;
                if let Some(saver) = saver {
                    saver.save(doc)?;
                }
                match status {
                    RunStatus::Ok => break,
                    RunStatus::Suspect => {
                        t.suspects += 1;
                        if attempt < self.retry_suspect {
                            t.retries += 1;
                            retry_of = retry_of.or(Some(run_index));
                            continue;
                        }
                        break;
                    }
                    RunStatus::Failed => {
                        t.failures += 1;
                        break;
                    }
                    RunStatus::Aborted => {
                        t.interrupted = true;
                        break 'runs;
                    }
                }
            }
        }
        Ok(t)
    }
}

/// What the suite says at its end (after its table): why runs were
/// suspect or failed, where the results went, and the verdict on the path;
/// and its exit code.
pub(super) fn closing(
    a: &SuiteArgs,
    t: &Tally,
    saver: Option<&crate::save::Saver>,
    command_line: &[String],
    doc: &ResultsDocument,
) -> ExitCode {
    if let Some(s) = saver.filter(|s| s.fell_back()) {
        eprintln!(
            "linkperf: the results are in {} (the save to --out failed); continue with: {}",
            s.path().display(),
            crate::save::resume_command(command_line, s.path())
        );
    }
    if t.interrupted {
        let resume = match saver {
            Some(s) => format!(
                "resume with: {}",
                crate::save::resume_command(command_line, s.path())
            ),
            None => "nothing was saved: run with --out FILE to be able to resume".into(),
        };
        if a.by_lab {
            eprintln!("linkperf: suite interrupted; completed runs are kept");
            return ExitCode::from(1);
        }
        eprintln!("linkperf: suite interrupted; completed runs are kept. {resume}");
        return ExitCode::from(1);
    }
    // Where the results went: a file, or nowhere.
    let saved = saver
        .filter(|s| !s.fell_back())
        .map(|s| s.path().display().to_string());
    let details = match &saved {
        Some(path) => format!("each run's line above, and its status_reasons in {path}"),
        None => "each run's line above".to_string(),
    };
    if t.suspects > 0 {
        eprintln!(
            "linkperf: {} suspect run{} ({} retried at once), kept apart and left out of the statistics: {}; why: {details}",
            t.suspects,
            if t.suspects == 1 { "" } else { "s" },
            t.retries,
            suspect_checks(doc)
        );
    }
    if t.failures > 0 {
        eprintln!(
            "linkperf: {} failed; why: {details}",
            crate::table::count(t.failures as u64, "run")
        );
    }
    // One step of the lab's interleaving: the lab has the last word.
    if a.step.is_some() || a.by_lab {
        return if t.failures > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        };
    }
    match (&saved, saver) {
        (Some(path), _) => eprintln!(
            "linkperf: results saved to {path} (every run, its figures, checks and status_reasons)"
        ),
        // The fallback file was named above.
        (None, Some(_)) => {}
        (None, None) => {
            let example = format!(
                "{}.json",
                doc.suite.as_ref().map_or("results", |s| s.name.as_str())
            );
            eprintln!(
                "linkperf: results not saved (no --out): to keep them, run with --out FILE: {}",
                crate::save::save_command(command_line, Path::new(&example))
            );
        }
    }
    let _ = crate::emit(&format!("{}\n", linkperf_report::health(doc).sentence()));
    if t.failures > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// The checks the suspect runs failed, each with its count of runs, most
/// first: `host_noise in 24 runs, cpu_window in 1 run`.
fn suspect_checks(doc: &ResultsDocument) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for r in doc.tests.iter().flat_map(|t| &t.runs) {
        if r.status != RunStatus::Suspect {
            continue;
        }
        for why in &r.status_reasons {
            let check = why.split(':').next().unwrap_or(why);
            match counts.iter_mut().find(|(c, _)| c == check) {
                Some((_, n)) => *n += 1,
                None => counts.push((check.to_string(), 1)),
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
        .iter()
        .map(|(c, n)| format!("{c} in {}", crate::table::count(*n as u64, "run")))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) type Environments = (
    linkperf_measured::Environment,
    Option<linkperf_measured::Environment>,
);

/// How the runs of a test are judged beyond their own figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Judging {
    /// `--max-loss` as a fraction.
    pub max_loss: Option<f64>,
    /// Other tests share this host at the same time by design: its CPU noise
    /// is judged on their aggregate, not here.
    pub shared_host: bool,
}

/// One run: the measured run (aborted or failed when it did not finish whole,
/// keeping what the client measured), or the failure recorded as such, each
/// direction counted at its receiver and every check made; and the two hosts'
/// environments when the test started.
pub fn execute(
    target: &Target,
    req: &RunRequest,
    index: u32,
    judging: Judging,
) -> (linkperf_results::Run, Option<Environments>) {
    let started = SystemTime::now();
    let outcome = match &req.spec.workload {
        Workload::Profile { profile } => run_profile(
            target,
            &ProfileRequest {
                profile: (**profile).clone(),
                client: req.client.clone(),
                server: req.server.clone(),
                process_method: req.process_method,
                cancel: req.cancel.clone(),
                command_line: req.command_line.clone(),
                live: req.live.clone(),
            },
        ),
        _ => run_test(target, req),
    };
    // Ctrl-C seen anywhere in the run, even after its window: it is not a
    // run to believe as complete.
    let cancelled = req
        .cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Acquire));
    match outcome {
        Ok(o) => {
            let envs = (o.client_environment.clone(), o.server_environment.clone());
            let mut r = derive_run(
                index,
                rfc3339_millis(o.started),
                &req.spec,
                o.client,
                o.server,
            );
            let interrupted = o.aborted || cancelled;
            if interrupted {
                r.status = RunStatus::Aborted;
                r.error = Some(o.server_error.unwrap_or_else(|| "interrupted".into()));
            // The server's reason comes first: when it stopped the test (a
            // limit) or went away, a user's failure is what followed from it.
            } else if let Some(e) = o.server_error.or(o.failure) {
                r.status = RunStatus::Failed;
                r.error = Some(e);
            }
            let hosts =
                (!judging.shared_host).then(|| hosts_of_run(&r, Some(&envs.0), envs.1.as_ref()));
            judge_run(
                &mut r,
                &Judge {
                    spec: &req.spec,
                    interrupted,
                    hosts,
                    max_loss: judging.max_loss,
                },
            );
            crate::run_log::note(&req.spec, &r);
            (r, Some(envs))
        }
        Err(e) => {
            let status = if cancelled {
                RunStatus::Aborted
            } else {
                RunStatus::Failed
            };
            (
                failed_run(
                    index,
                    rfc3339_millis(started),
                    status,
                    crate::words::session_error(&e),
                ),
                None,
            )
        }
    }
}

/// A finished run's line: request/response (`transactional`) leads with
/// its transactions per second, a stream with its bits per second.
pub(super) fn progress_line(
    name: &str,
    run_no: u32,
    repeat: u32,
    run: &linkperf_results::Run,
    transactional: bool,
) -> String {
    use linkperf_report::units::{rate, time_us};
    let status = match run.status {
        RunStatus::Ok => "ok",
        RunStatus::Suspect => "SUSPECT",
        RunStatus::Failed => "FAILED",
        RunStatus::Aborted => "aborted",
    };
    let retry = run
        .retry_of
        .map(|n| format!(" (retry of run {n})"))
        .unwrap_or_default();
    // A run that is not ok says why, even when it measured something.
    let why = if run.status == RunStatus::Ok || run.status_reasons.is_empty() {
        String::new()
    } else {
        format!("; {}", run.status_reasons.join("; "))
    };
    match (&run.throughput, &run.transaction_time_us) {
        // Request/response leads with its transactions, a stream with its bits.
        (Some(t), Some(l)) if transactional => format!(
            "{name} run {run_no}/{repeat}{retry}: {:.0} transactions/s, {}, mean {}, {} errors{why} [{status}]",
            t.transactions_per_s,
            rate(t.bytes_per_s),
            time_us(l.mean),
            run.errors
        ),
        (Some(t), Some(l)) => format!(
            "{name} run {run_no}/{repeat}{retry}: {}, {:.0} messages/s, mean {}, {} errors{why} [{status}]",
            rate(t.bytes_per_s),
            t.transactions_per_s,
            time_us(l.mean),
            run.errors
        ),
        _ => format!("{name} run {run_no}/{repeat}{retry}: [{status}] {}", run.error.clone().unwrap_or_default()),
    }
}
