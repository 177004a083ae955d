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

mod runs;

use runs::{closing, Runs};
pub use runs::{execute, Judging};

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
    let suite = load_suite(&name)?
        .with_timing(a.duration, a.warmup)
        .with_users(a.users.as_deref());
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
    for t in suite.tests.iter().filter(|_| !a.by_lab) {
        if let Some(w) = t.spec.workload.small_stream_warning() {
            eprintln!("linkperf: warning: test {}: {w}", t.name());
        }
    }
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
    Ok(closing(&a, &tally, saver.as_ref(), &command_line, &doc))
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
    Ok(Some(
        crate::save::Saver::new(out, existing + pending_bytes)?
            .with_history(crate::history::Recorder::maybe(a.history.as_deref())?),
    ))
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
        // --min-repeat alone is a floor (the lab passes 3): a suite file that
        // asks more runs gets them.
        None => match a.min_repeat {
            Some(min) => (min.max(suite.repeat), None),
            None => (a.repeat.unwrap_or(suite.repeat), None),
        },
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
                "{} × {} to {repeat} runs (each until the 95% interval of its mean throughput is within ±{:.1} %) = {} runs at most, {ordered}",
                crate::table::count(suite.tests.len() as u64, "test"),
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
