//! Running a planned mesh: the scheduler's runs handed to threads, each a
//! delegated test, each recorded and saved as it ends.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linkperf_mesh::{classify, nodes_of, Concurrency, Item, Scheduler};
use linkperf_results::{
    derive_run, failed_run, hosts_of_run, judge_run, rfc3339_millis, Judge, ResultsDocument, Run,
    RunAgent, RunAgents, RunStatus, TestConfig, TestResult,
};
use linkperf_session::{delegate, DelegateRequest, Delegated, SessionError, Target};
use linkperf_workload::{run_order, TestSpec};

use super::MeshPlan;

/// The name of test `test` of the pair from `source` to `target`:
/// `rr1c-1x1--1@n1->n2`.
pub fn pair_test_name(test: &str, source: &str, target: &str) -> String {
    format!("{test}@{source}->{target}")
}

/// Runs that count as done of a test: its completed runs, retries aside.
fn completed(t: &TestResult) -> usize {
    t.runs
        .iter()
        .filter(|r| r.status.completed() && r.retry_of.is_none())
        .count()
}

/// Runs the mesh's pending runs into `doc`, saving to `out` after each.
/// Exit code 1 when a run failed or the mesh was interrupted.
pub(crate) fn run_mesh(
    p: &MeshPlan,
    doc: &mut ResultsDocument,
    out: &Path,
    command_line: &[String],
    quiet: bool,
    history: Option<crate::history::Recorder>,
) -> anyhow::Result<ExitCode> {
    // A resumed mesh runs again what did not complete.
    doc.keep_completed_runs();
    doc.tests.retain(|t| !t.runs.is_empty());
    let names: Vec<Vec<String>> = p
        .pairs
        .iter()
        .map(|pair| {
            let (s, t) = (
                &p.agents[pair.source as usize].name,
                &p.agents[pair.target as usize].name,
            );
            p.suite
                .tests
                .iter()
                .map(|test| pair_test_name(&test.name(), s, t))
                .collect()
        })
        .collect();
    let items = pending_items(p, doc, &names);
    let total = items.len();
    let done_before = p.pairs.len() * p.suite.tests.len() * p.repeat as usize - total;
    if done_before > 0 {
        eprintln!("linkperf: resuming: {done_before} runs already done, {total} to run");
    }
    let bytes: u64 = items
        .iter()
        .map(|i| {
            let spec = &p.suite.tests[i.test as usize].spec;
            linkperf_results::run_bytes(1, u64::from(spec.users), spec.duration.as_secs_f64())
        })
        .sum();
    let existing = std::fs::metadata(out).map_or(0, |m| m.len());
    let mut saver = crate::save::Saver::new(out, existing + bytes)?.with_history(history);
    saver.save(doc)?;
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let _ = ctrlc::set_handler(move || {
            if cancel.swap(true, Ordering::AcqRel) {
                std::process::exit(130);
            }
        });
    }
    let mut pacer = SavePacer::default();
    let mut sched = Scheduler::new(p.pairs.clone(), nodes_of(&p.agents), items, p.concurrency);
    let (tx, rx) = mpsc::channel::<(Item, Result<Delegated, SessionError>)>();
    let mut failed = 0usize;
    let mut finished = 0usize;
    let mut total = total;
    let mut interrupted = false;
    // A suspect run's retries so far, and the run it retries.
    let mut retries: HashMap<Item, (u32, u32)> = HashMap::new();
    while !sched.is_done() {
        if !cancel.load(Ordering::Acquire) {
            while let Some(item) = sched.next_run() {
                spawn_run(p, item, &cancel, &tx)?;
            }
        } else if !interrupted {
            interrupted = true;
            eprintln!("linkperf: interrupted; waiting for the runs under way to end");
        }
        if sched.running() == 0 {
            // Interrupted with nothing under way: what waits stays for --resume.
            break;
        }
        let Ok((item, result)) = rx.recv() else {
            break;
        };
        finished += 1;
        let name = names[item.pair as usize][item.test as usize].clone();
        let spec = &p.suite.tests[item.test as usize].spec;
        let index = doc.find_test(&name).map_or(0, |t| t.runs.len()) as u32 + 1;
        let mut run = record(p, item, spec, index, result);
        run.retry_of = retries.get(&item).map(|(_, first)| *first);
        match run.status {
            RunStatus::Failed | RunStatus::Aborted => failed += 1,
            RunStatus::Suspect if !cancel.load(Ordering::Acquire) => {
                let (n, _) = retries.entry(item).or_insert((0, index));
                if *n < p.retry_suspect {
                    *n += 1;
                    total += 1;
                    // Before finished: a round under `all` waits for it.
                    sched.retry(item);
                }
            }
            _ => {}
        }
        sched.finished(item);
        let line = line(&name, &run, finished, total);
        let config = TestConfig::from_spec(
            spec,
            p.agents[p.pairs[item.pair as usize].target as usize]
                .address
                .clone(),
            p.placements[item.test as usize].0.clone(),
            p.placements[item.test as usize].1.clone(),
        );
        doc.push_named_run(name, spec, config, run);
        doc.refresh_summaries();
        // Shown before it is saved: a save that fails cannot hide it.
        if !quiet || !line.contains("[ok]") {
            crate::emit(&format!("{line}\n"))?;
        }
        pacer.save(&mut saver, doc, sched.is_done())?;
    }
    // Whatever ended the loop, the last runs are saved.
    pacer.save(&mut saver, doc, true)?;
    if interrupted || cancel.load(Ordering::Acquire) {
        eprintln!(
            "linkperf: mesh interrupted; finished runs are kept. resume with: {}",
            crate::save::resume_command(command_line, out.parent().unwrap_or(out))
        );
        return Ok(ExitCode::from(1));
    }
    if failed > 0 {
        eprintln!(
            "linkperf: {} failed (each says why in mesh.json and the report); \
             rerun {} with --resume",
            crate::table::count(failed as u64, "run"),
            if failed == 1 { "it" } else { "them" }
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The runs the mesh still owes: each test's runs in the suite's order,
/// over every pair, but those completed already (a resumed mesh).
fn pending_items(p: &MeshPlan, doc: &ResultsDocument, names: &[Vec<String>]) -> Vec<Item> {
    // Completed runs by test name, counted once (a mesh has many tests).
    let done: HashMap<&str, usize> = doc
        .tests
        .iter()
        .map(|t| (t.name.as_str(), completed(t)))
        .collect();
    let mut items = Vec::new();
    for (test, run) in run_order(p.suite.tests.len(), p.repeat, p.interleave) {
        for (pair, of_pair) in names.iter().enumerate() {
            if done.get(of_pair[test].as_str()).copied().unwrap_or(0) < run as usize {
                items.push(Item {
                    pair: pair as u32,
                    test: test as u32,
                    run,
                });
            }
        }
    }
    items
}

/// Starts `item` on a thread of its own: its source agent runs it
/// toward its target; the result comes back on `tx`.
fn spawn_run(
    p: &MeshPlan,
    item: Item,
    cancel: &Arc<AtomicBool>,
    tx: &mpsc::Sender<(Item, Result<Delegated, SessionError>)>,
) -> std::io::Result<()> {
    let pair = p.pairs[item.pair as usize];
    let source = &p.agents[pair.source as usize];
    let target = &p.agents[pair.target as usize];
    let agent = Target {
        address: source.address.clone(),
        default_port: 0,
        auth_key: Some(p.key.clone()),
    };
    let req = DelegateRequest {
        target: target.address.clone(),
        spec: p.suite.tests[item.test as usize].spec.clone(),
        client: p.placements[item.test as usize].0.clone(),
        server: p.placements[item.test as usize].1.clone(),
        cancel: Some(cancel.clone()),
    };
    let tx = tx.clone();
    std::thread::Builder::new()
        .name(format!("lp-mesh-{}", item.pair))
        .spawn(move || {
            let r = delegate(&agent, &req);
            let _ = tx.send((item, r));
        })?;
    Ok(())
}

/// Saves after every run while saving is cheap; once the document is large
/// (a mesh of thousands of pairs), no more often than keeps saving under a
/// tenth of the time: each save rewrites the whole file, so saving after
/// every run would make the time spent saving grow with the square of the
/// runs. A crash then loses at most the runs of the last interval, which
/// `--resume` runs again.
#[derive(Default)]
struct SavePacer {
    last: Option<(Instant, Duration)>,
}

/// How much longer than a save takes must pass before the next one.
const SAVE_SHARE: u32 = 10;

impl SavePacer {
    /// Saves `doc` now if `must`, or if enough time has passed since the last save.
    fn save(
        &mut self,
        saver: &mut crate::save::Saver,
        doc: &ResultsDocument,
        must: bool,
    ) -> anyhow::Result<()> {
        if let Some((at, took)) = self.last {
            if !must && at.elapsed() < took * SAVE_SHARE {
                return Ok(());
            }
        }
        let start = Instant::now();
        saver.save(doc)?;
        self.last = Some((Instant::now(), start.elapsed()));
        Ok(())
    }
}

/// One delegated run as the results document records it: measured and
/// checked, or failed with the reason, with both agents.
fn record(
    p: &MeshPlan,
    item: Item,
    spec: &TestSpec,
    index: u32,
    result: Result<Delegated, SessionError>,
) -> Run {
    let pair = p.pairs[item.pair as usize];
    let (source, target) = (
        &p.agents[pair.source as usize],
        &p.agents[pair.target as usize],
    );
    let now = rfc3339_millis(SystemTime::now());
    let mut agents = RunAgents {
        source: RunAgent {
            name: source.name.clone(),
            address: source.address.clone(),
            identity: source.identity.clone(),
            environment: None,
        },
        target: RunAgent {
            name: target.name.clone(),
            address: target.address.clone(),
            identity: target.identity.clone(),
            environment: None,
        },
        path_class: classify(&source.identity, &target.identity).to_string(),
    };
    let mut run = match result {
        Err(e) => failed_run(
            index,
            now,
            RunStatus::Failed,
            format!(
                "agent {} ({}): {}",
                source.name,
                source.address,
                crate::words::session_error(&e)
            ),
        ),
        Ok(d) => {
            let o = d.outcome;
            if let Some(id) = d.source_agent {
                agents.source.identity = id;
            }
            if let Some(id) = o.target_agent.clone() {
                agents.target.identity = id;
            }
            agents.source.environment = o.client_environment.clone();
            agents.target.environment = o.server_environment.clone();
            match (o.error, o.client) {
                (Some(e), _) => failed_run(
                    index,
                    o.started,
                    RunStatus::Failed,
                    format!("agent {} toward {}: {e}", source.name, target.name),
                ),
                (None, None) => failed_run(
                    index,
                    o.started,
                    RunStatus::Failed,
                    format!(
                        "agent {} toward {}: the agent sent no measurements",
                        source.name, target.name
                    ),
                ),
                (None, Some(client)) => {
                    let mut r = derive_run(index, o.started, spec, client, o.server);
                    if o.aborted {
                        r.status = RunStatus::Aborted;
                        r.error = Some(o.server_error.unwrap_or_else(|| "interrupted".into()));
                    } else if let Some(e) = o.server_error.or(o.failure) {
                        r.status = RunStatus::Failed;
                        r.error = Some(e);
                    }
                    // Pairs running at once share hosts by design: their
                    // noise is not judged; one pair alone is judged whole.
                    let alone = p.concurrency == Concurrency::Count(1);
                    let hosts = alone.then(|| {
                        hosts_of_run(
                            &r,
                            o.client_environment.as_ref(),
                            o.server_environment.as_ref(),
                        )
                    });
                    judge_run(
                        &mut r,
                        &Judge {
                            spec,
                            interrupted: o.aborted,
                            hosts,
                            max_loss: None,
                        },
                    );
                    crate::run_log::note(spec, &r);
                    r
                }
            }
        }
    };
    run.agents = Some(agents);
    run
}

/// One finished run in a line.
fn line(name: &str, run: &Run, k: usize, total: usize) -> String {
    let why = run
        .error
        .clone()
        .or_else(|| (!run.status_reasons.is_empty()).then(|| run.status_reasons.join("; ")))
        .map(|w| format!(": {w}"))
        .unwrap_or_default();
    let name = match run.retry_of {
        Some(n) => format!("{name} (retry of run {n})"),
        None => name.to_string(),
    };
    match (&run.throughput, &run.transaction_time_us, run.status) {
        (Some(t), Some(l), RunStatus::Ok | RunStatus::Suspect) => format!(
            "[{k}/{total}] {name}: {:.3} Gbit/s, {:.0} transactions/s, p99 {:.1} µs [{}]{why}",
            t.bytes_per_s * 8.0 / 1e9,
            t.transactions_per_s,
            l.p99,
            run.status.word()
        ),
        _ => format!("[{k}/{total}] {name}: [{}]{why}", run.status.word()),
    }
}
