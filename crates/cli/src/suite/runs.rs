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
                let line = progress_line(&name, run_no, self.repeat, &run);
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

/// What the suite says at its end, and its exit code.
pub(super) fn closing(
    a: &SuiteArgs,
    t: &Tally,
    saver: Option<&crate::save::Saver>,
    command_line: &[String],
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
    if t.suspects > 0 {
        eprintln!(
            "linkperf: {} suspect run{} ({} retried at once); they are kept in the results and left out of the statistics: see each run's status_reasons",
            t.suspects,
            if t.suspects == 1 { "" } else { "s" },
            t.retries
        );
    }
    if t.failures > 0 {
        eprintln!(
            "linkperf: {} failed; see the table and the results document",
            crate::table::count(t.failures as u64, "run")
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

pub(super) type Environments = (
    linkperf_records::Environment,
    Option<linkperf_records::Environment>,
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

pub(super) fn progress_line(
    name: &str,
    run_no: u32,
    repeat: u32,
    run: &linkperf_results::Run,
) -> String {
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
        (Some(t), Some(l)) => format!(
            "{name} run {run_no}/{repeat}{retry}: {:.3} Gbit/s, {:.0} transactions/s, mean {:.1} µs, {} errors{why} [{status}]",
            t.bytes_per_s * 8.0 / 1e9,
            t.transactions_per_s,
            l.mean,
            run.errors
        ),
        _ => format!("{name} run {run_no}/{repeat}{retry}: [{status}] {}", run.error.clone().unwrap_or_default()),
    }
}
