//! `linkperf suite`: a whole study — a matrix of tests, repeated, saved after
//! every run, resumable.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use linkperf_engine::LiveStats;
use linkperf_results::{
    derive_run, failed_run, hosts_of_run, judge_run, rfc3339_millis, Judge, ResultsDocument,
    RunStatus, SuiteRecord, TestConfig,
};
use linkperf_session::{run_profile, run_test, ProfileRequest, RunRequest, Target};
use linkperf_workload::{
    builtin_suite, builtin_suites, parse_suite, run_order, Protocol, Suite, SuiteTest, Workload,
};

use crate::args::SuiteArgs;
use crate::plan::{
    placements, process_method, target, unix_reaches, usable_here, PlacementOverrides,
};
use crate::progress::Progress;
use crate::run::embedded_server;
use crate::table::render_summary;
use crate::UsageError;

/// Most repeats of one test.
const MAX_REPEAT: u32 = 1000;
/// What `suite --step` exits with when it had nothing left to run.
pub const STEP_NOTHING_LEFT: u8 = 3;

/// Fewest runs of a test with `--target-ci`, unless told otherwise.
const DEFAULT_MIN_REPEAT: u32 = 3;
/// Most runs of a test with `--target-ci`, unless told otherwise.
const DEFAULT_MAX_REPEAT: u32 = 10;

/// `--target-ci`: repeat a test until its throughput's interval is narrow enough.
#[derive(Debug, Clone, Copy)]
struct Adaptive {
    /// Half the interval's width, as a share of the mean.
    target: f64,
    /// Runs every test gets first.
    min: u32,
}

impl Adaptive {
    /// Whether run `run` of test `name` is still needed: always up to the
    /// minimum; past it, only while the 95% interval of the test's mean
    /// throughput (over its ok runs) is wider than ± the target.
    fn needs(&self, doc: &ResultsDocument, name: &str, run: u32) -> bool {
        if run <= self.min {
            return true;
        }
        let Some(t) = doc.find_test(name) else {
            return true;
        };
        let within = linkperf_results::summarize(t)
            .and_then(|s| s.metrics.get("throughput.bytes_per_s").copied())
            .and_then(|m| {
                let (lo, hi) = (m.ci95_low?, m.ci95_high?);
                (m.mean > 0.0).then(|| (hi - lo) / 2.0 / m.mean)
            })
            .is_some_and(|half| half <= self.target);
        !within
    }
}

/// Times a suspect run is run again at once, unless told otherwise.
const DEFAULT_RETRY_SUSPECT: u32 = 2;
/// Most retries of one suspect run.
const MAX_RETRY_SUSPECT: u32 = 100;

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// A built-in suite by name, or a suite file.
pub(crate) fn load_suite(name: &str) -> anyhow::Result<Suite> {
    if let Some(s) = builtin_suite(name) {
        return Ok(s);
    }
    let path = Path::new(name);
    if !path.exists() {
        let names: Vec<&str> = builtin_suites().iter().map(|(n, _)| *n).collect();
        return Err(usage(format!(
            "no built-in suite or suite file named '{name}' (built-in suites: {})",
            names.join(", ")
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read suite file {name}: {e}")))?;
    parse_suite(&text, name).map_err(|e| usage(e.to_string()))
}

fn overrides(t: &SuiteTest) -> PlacementOverrides {
    let o = &t.overrides;
    PlacementOverrides {
        threads: o.threads,
        server_threads: o.server_threads,
        affinity: o.affinity.clone(),
        server_affinity: o.server_affinity.clone(),
        busy_poll: o.busy_poll,
    }
}

/// Runs a suite.
pub fn suite(a: SuiteArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    if a.list {
        for (name, description) in builtin_suites() {
            crate::emit(&format!("{name:<14} {description}\n"))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = a
        .suite
        .clone()
        .ok_or_else(|| usage("name a suite (see --list) or a suite file"))?;
    let suite = load_suite(&name)?.with_timing(a.duration, a.warmup);
    let (repeat, adaptive) = repeats(&a, &suite)?;
    let interleave = !a.no_interleave;
    // Siblings running at once must stay in step: a retry would put this
    // one out of it.
    let retry_suspect = if a.shared_host {
        0
    } else {
        a.retry_suspect
            .or(suite.retry_suspect)
            .unwrap_or(DEFAULT_RETRY_SUSPECT)
    };
    if retry_suspect > MAX_RETRY_SUSPECT {
        return Err(usage(format!(
            "--retry-suspect must be at most {MAX_RETRY_SUSPECT}, got {retry_suspect}"
        )));
    }
    let judging = Judging {
        max_loss: a.max_loss.or(suite.max_loss),
        shared_host: a.shared_host,
    };
    let target_addr = target(&a.target).map_err(|e| usage(format!("{e:#}")))?;
    let requests = checked_requests(&a, &suite, target_addr.as_ref(), &command_line)?;
    let order = run_order(suite.tests.len(), repeat, interleave);
    if a.dry_run && !a.resume {
        crate::emit(&plan_text(&suite, repeat, interleave, &order, adaptive))?;
        return Ok(ExitCode::SUCCESS);
    }
    let record = SuiteRecord {
        name: suite.name.clone(),
        fingerprint: suite.fingerprint(),
        repeat,
        interleave,
        tests: suite.tests.iter().map(SuiteTest::name).collect(),
        target_ci: adaptive.map(|a| a.target),
        min_repeat: adaptive.map(|a| a.min),
    };
    let label = a.label.clone().unwrap_or_else(|| suite.name.clone());
    let server_label = target_addr
        .as_ref()
        .map_or_else(|| "embedded".to_string(), |t| t.address.clone());
    // How each test will run beyond its workload: a resumed file's runs must
    // have run the same way.
    let configs = configs(&suite, &requests, &server_label, judging);
    let mut doc = open_document(&a, &record, &configs, &label, &command_line)?;
    if a.dry_run {
        // With --resume: what is left of the file's suite, checked as a real
        // resume checks it, and nothing written or removed.
        let mut text = plan_text(&suite, repeat, interleave, &order, adaptive);
        text.push_str(&resume_plan(&a, &suite, &order, &doc));
        crate::emit(&text)?;
        return Ok(ExitCode::SUCCESS);
    }

    let mut saver = saver(&a, &suite, &order, &doc, retry_suspect)?;
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let _ = ctrlc::set_handler(move || {
            if cancel.swap(true, Ordering::AcqRel) {
                std::process::exit(130);
            }
        });
    }
    let (daemon, target_addr) = match target_addr {
        Some(t) => (None, t),
        None => {
            let most = suite
                .tests
                .iter()
                .map(|t| crate::run::connections_of(&t.spec))
                .max()
                .unwrap_or(0);
            let (d, t) = embedded_server(&command_line, most)?;
            (Some(d), t)
        }
    };

    let pending: Vec<(usize, u32)> = order
        .iter()
        .copied()
        .filter(|&(ti, run)| completed(&doc, &suite.tests[ti].name()) < run as usize)
        .collect();
    let skipped = order.len() - pending.len();
    let mut progress = Progress::new(
        pending
            .iter()
            .map(|&(ti, _)| run_estimate(&suite.tests[ti]))
            .collect(),
        a.quiet || !std::io::stderr().is_terminal(),
    );
    if skipped > 0 {
        progress.note(&format!(
            "resuming: {skipped} of {} runs already done",
            order.len()
        ));
    }
    let runs = Runs {
        suite: &suite,
        requests: &requests,
        configs: &configs,
        record: &record,
        target: &target_addr,
        judging,
        retry_suspect,
        repeat,
        adaptive,
        cancel: &cancel,
    };
    let tally = runs.run(
        &pending,
        a.step.unwrap_or(usize::MAX),
        &mut doc,
        &mut saver,
        &mut progress,
    )?;
    progress.done();
    drop(daemon);
    if a.step.is_some() && tally.ran == 0 && !tally.interrupted {
        // The lab's interleaving: this configuration has nothing left.
        return Ok(ExitCode::from(STEP_NOTHING_LEFT));
    }
    if a.step.is_none() {
        crate::emit(&render_summary(&doc))?;
    }
    Ok(closing(&a, &tally, saver.as_ref(), &command_line))
}

/// The saver of `--out`, with room for every run this suite will add kept
/// before anything runs.
fn saver(
    a: &SuiteArgs,
    suite: &Suite,
    order: &[(usize, u32)],
    doc: &ResultsDocument,
    retry_suspect: u32,
) -> anyhow::Result<Option<crate::save::Saver>> {
    let Some(out) = &a.out else {
        return Ok(None);
    };
    let pending_bytes: u64 = order
        .iter()
        .filter(|&&(ti, run)| completed(doc, &suite.tests[ti].name()) < run as usize)
        .map(|&(ti, _)| {
            let spec = &suite.tests[ti].spec;
            // Each run and its retries.
            linkperf_results::run_bytes(
                1 + u64::from(retry_suspect),
                u64::from(spec.users),
                spec.duration.as_secs_f64(),
            )
        })
        .sum();
    let existing = std::fs::metadata(out).map_or(0, |m| m.len());
    Ok(Some(crate::save::Saver::new(
        out,
        existing + pending_bytes,
    )?))
}

/// Each test's name and how it runs beyond its workload.
fn configs(
    suite: &Suite,
    requests: &[RunRequest],
    server_label: &str,
    judging: Judging,
) -> Vec<(String, TestConfig)> {
    suite
        .tests
        .iter()
        .zip(requests)
        .map(|(t, r)| {
            let mut c = TestConfig::from_spec(
                &t.spec,
                server_label.to_string(),
                r.client.clone(),
                r.server.clone(),
            );
            c.max_loss = judging
                .max_loss
                .filter(|_| t.spec.protocol == Protocol::Udp);
            (t.name(), c)
        })
        .collect()
}

/// Fixed repeats, or as many as the target interval needs within bounds.
fn repeats(a: &SuiteArgs, suite: &Suite) -> anyhow::Result<(u32, Option<Adaptive>)> {
    let (repeat, adaptive) = match a.target_ci {
        Some(target) => {
            let min = a.min_repeat.unwrap_or(DEFAULT_MIN_REPEAT);
            let max = a.max_repeat.unwrap_or(DEFAULT_MAX_REPEAT);
            if min < 2 || min > max {
                return Err(usage(format!(
                    "--min-repeat must be at least 2 (an interval needs two runs) and at most --max-repeat ({max}), got {min}"
                )));
            }
            (max, Some(Adaptive { target, min }))
        }
        None => (a.min_repeat.or(a.repeat).unwrap_or(suite.repeat), None),
    };
    if repeat == 0 || repeat > MAX_REPEAT {
        return Err(usage(format!(
            "--repeat must be between 1 and {MAX_REPEAT}, got {repeat}"
        )));
    }
    Ok((repeat, adaptive))
}

/// Every test's request, each checked before anything runs.
fn checked_requests(
    a: &SuiteArgs,
    suite: &Suite,
    target_addr: Option<&Target>,
    command_line: &[String],
) -> anyhow::Result<Vec<RunRequest>> {
    let embedded = target_addr.is_none();
    let mut requests = Vec::new();
    for t in &suite.tests {
        t.spec
            .validate()
            .map_err(|e| usage(format!("test {}: {e}", t.name())))?;
        unix_reaches(&t.spec, target_addr)
            .map_err(|e| usage(format!("test {}: {e:#}", t.name())))?;
        usable_here(&t.spec).map_err(|e| usage(format!("test {}: {e:#}", t.name())))?;
        let (client, server) = placements(&a.placement, &overrides(t), embedded)
            .map_err(|e| usage(format!("test {}: {e:#}", t.name())))?;
        requests.push(RunRequest {
            spec: t.spec.clone(),
            client,
            server,
            process_method: process_method(embedded),
            cancel: None,
            command_line: command_line.to_vec(),
            live: None,
        });
    }
    Ok(requests)
}

/// `--dry-run --resume`: what is left of the file's suite.
fn resume_plan(
    a: &SuiteArgs,
    suite: &Suite,
    order: &[(usize, u32)],
    doc: &ResultsDocument,
) -> String {
    let left: Vec<(usize, u32)> = order
        .iter()
        .copied()
        .filter(|&(ti, run)| completed(doc, &suite.tests[ti].name()) < run as usize)
        .collect();
    let time: Duration = left
        .iter()
        .map(|&(ti, _)| run_estimate(&suite.tests[ti]))
        .sum();
    format!(
        "resuming {}: {} of {} runs done, {} to run, estimated time: {}\n",
        a.out
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        order.len() - left.len(),
        order.len(),
        left.len(),
        humantime::format_duration(Duration::from_secs(time.as_secs()))
    )
}

/// What the runs of a suite share.
struct Runs<'a> {
    suite: &'a Suite,
    requests: &'a [RunRequest],
    configs: &'a [(String, TestConfig)],
    record: &'a SuiteRecord,
    target: &'a Target,
    judging: Judging,
    retry_suspect: u32,
    repeat: u32,
    adaptive: Option<Adaptive>,
    cancel: &'a Arc<AtomicBool>,
}

/// How the runs went.
#[derive(Debug, Default)]
struct Tally {
    failures: usize,
    suspects: usize,
    retries: usize,
    interrupted: bool,
    /// Runs started (a retry counts with its run).
    ran: usize,
}

impl Runs<'_> {
    /// Runs `pending` (at most `steps` of them), each retried at once while
    /// suspect, saving after every run; stops at an interruption.
    fn run(
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
                    crate::live::Columns::of(&test.spec),
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
fn closing(
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

/// Runs that count as done for `name`: its completed runs (ok or suspect)
/// that are not retries of another.
fn completed(doc: &ResultsDocument, name: &str) -> usize {
    doc.find_test(name).map_or(0, |t| {
        t.runs
            .iter()
            .filter(|r| r.status.completed() && r.retry_of.is_none())
            .count()
    })
}

fn run_estimate(t: &SuiteTest) -> Duration {
    t.spec.warmup + t.spec.duration + linkperf_workload::RUN_OVERHEAD
}

type Environments = (
    linkperf_metrics::Environment,
    Option<linkperf_metrics::Environment>,
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
                failed_run(index, rfc3339_millis(started), status, describe(&e)),
                None,
            )
        }
    }
}

/// A session's error in words; a limit of the server's is named by the
/// `serve` setting that sets it.
fn describe(e: &linkperf_session::SessionError) -> String {
    match e {
        linkperf_session::SessionError::Refused { limit: Some(l), .. } => {
            format!("{e} (the server's {})", crate::serve::limit_flag(l.kind))
        }
        _ => e.to_string(),
    }
}

/// Opens the results document: new, or the one to resume (checked against the suite).
fn open_document(
    a: &SuiteArgs,
    record: &SuiteRecord,
    configs: &[(String, TestConfig)],
    label: &str,
    command_line: &[String],
) -> anyhow::Result<ResultsDocument> {
    let Some(out) = &a.out else {
        return Ok(ResultsDocument::new(
            label.to_string(),
            command_line.to_vec(),
        ));
    };
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(usage(format!(
                "cannot write {}: directory {} does not exist",
                out.display(),
                dir.display()
            )));
        }
    }
    // The lab's first step of a configuration starts its file.
    let starting = a.step.is_some() && !out.exists();
    if !a.resume || starting {
        if out.exists() {
            return Err(usage(format!(
                "{} exists: add --resume to continue the suite recorded in it, or choose another --out",
                out.display()
            )));
        }
        let mut doc = ResultsDocument::new(label.to_string(), command_line.to_vec());
        doc.suite = Some(record.clone());
        return Ok(doc);
    }
    let mut doc = ResultsDocument::load(out).map_err(|e| usage(format!("cannot resume: {e}")))?;
    if doc.schema == linkperf_results::SCHEMA_V1 {
        return Err(usage(format!(
            "cannot resume: {} was written by an earlier linkperf ({}), whose upload throughput was counted at the sender and whose runs were not checked; its runs would not compare with new ones: start a new file",
            out.display(),
            linkperf_results::SCHEMA_V1
        )));
    }
    let Some(old) = &doc.suite else {
        return Err(usage(format!(
            "cannot resume: {} was not written by linkperf suite",
            out.display()
        )));
    };
    if old.fingerprint != record.fingerprint || old.name != record.name {
        return Err(usage(format!(
            "cannot resume: the suite definition changed since {} was written (suite {} then, {} now; its tests, sizes, durations or options differ)",
            out.display(),
            old.name,
            record.name
        )));
    }
    // The same tests must also run the same way: the same server, the same
    // workers and placement on each side, the same socket options.
    for (name, now) in configs {
        let Some(t) = doc.find_test(name) else {
            continue;
        };
        if t.runs.iter().any(|r| r.status.completed()) && &t.config != now {
            return Err(usage(format!(
                "cannot resume: test {name} in {} ran {}; run with the options it was run with, or choose another --out",
                out.display(),
                config_change(&t.config, now)
            )));
        }
    }
    // A different --repeat is fine: the runs still missing are added.
    // Runs that did not complete are run again; renumber what stays (a
    // suspect run is complete: kept, not run again). A test left without
    // runs is recorded as it runs now.
    doc.keep_completed_runs();
    for t in &mut doc.tests {
        if t.runs.is_empty() {
            if let Some((_, now)) = configs.iter().find(|(n, _)| *n == t.name) {
                t.config = now.clone();
            }
        }
    }
    doc.command_line = command_line.to_vec();
    if let Some(l) = &a.label {
        doc.label = l.clone();
    }
    if !a.dry_run {
        linkperf_results::remove_stale_temp_files(out);
    }
    Ok(doc)
}

/// What differs between how a test ran (`then`) and how it would run now,
/// field by field: `with client_placement {..} (now {..}), server "a" (now "b")`.
fn config_change(then: &TestConfig, now: &TestConfig) -> String {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(then), serde_json::to_value(now))
    else {
        return "with other settings".into();
    };
    let diffs: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, v)| {
            let now = b.get(k).map_or("none".to_string(), |n| n.to_string());
            format!("{k} {v} (now {now})")
        })
        .collect();
    format!("with {}", diffs.join(", "))
}

fn progress_line(name: &str, run_no: u32, repeat: u32, run: &linkperf_results::Run) -> String {
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

fn plan_text(
    suite: &Suite,
    repeat: u32,
    interleave: bool,
    order: &[(usize, u32)],
    adaptive: Option<Adaptive>,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "suite {}: {}", suite.name, suite.description);
    let ordered = if interleave {
        "interleaved (the whole matrix once, then again)"
    } else {
        "back to back"
    };
    match adaptive {
        None => {
            let _ = writeln!(
                s,
                "{} × {} = {} runs, {ordered}",
                crate::table::count(suite.tests.len() as u64, "test"),
                crate::table::count(u64::from(repeat), "run"),
                order.len(),
            );
        }
        Some(ad) => {
            let _ = writeln!(
                s,
                "{} tests × {} to {repeat} runs (each until the 95% interval of its mean throughput is within ±{:.1} %) = {} runs at most, {ordered}",
                suite.tests.len(),
                ad.min,
                ad.target * 100.0,
                order.len(),
            );
        }
    }
    for t in &suite.tests {
        let spec = &t.spec;
        let _ = writeln!(
            s,
            "  {:<32} {:<6} {:>10}  {}",
            t.name(),
            spec.protocol.to_string(),
            crate::table::count(u64::from(spec.users), "user"),
            crate::table::window_words(spec.duration, spec.warmup)
        );
    }
    let total = suite.estimated_time(repeat);
    let _ = writeln!(
        s,
        "estimated time: {}",
        humantime::format_duration(Duration::from_secs(total.as_secs()))
    );
    s
}
