//! `linkperf run`: one test, against a server or the embedded one.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use linkperf_engine::LiveStats;
use linkperf_results::{
    derive_run, failed_run, hosts_of_run, judge_run, rfc3339, rfc3339_millis, Judge,
    ResultsDocument, RunStatus, StreamStart, TestConfig,
};
use linkperf_session::{Daemon, DaemonConfig, DaemonHandle, RunRequest, Target};
use linkperf_workload::TestSpec;

use crate::args::RunArgs;
use crate::plan::{plan_run, RunPlan};
use crate::suite::Judging;
use crate::table::render_run;
use crate::watch::LiveOutput;
use crate::UsageError;

/// Runs one test and reports it.
pub fn run(a: RunArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let mut plan = plan_run(&a, command_line.clone())
        .map_err(|e| UsageError(crate::words::error_chain(&e)))?;
    if let Some(w) = plan.request.spec.workload.small_stream_warning() {
        eprintln!("linkperf: warning: {w}");
    }
    if let Some(p) = &a.json {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(UsageError(format!(
                    "cannot write {}: directory {} does not exist",
                    p.display(),
                    dir.display()
                ))
                .into());
            }
        }
    }
    // Room for the results, kept before anything runs (every client group's
    // document and their aggregate, with --server h1,h2).
    let groups = plan
        .target
        .as_ref()
        .map_or(1, |t| t.address.split(',').count() as u64);
    let saver = match &a.json {
        Some(p) => Some(
            crate::save::Saver::new(
                p,
                linkperf_results::run_bytes(
                    2 * groups + 1,
                    u64::from(plan.request.spec.users),
                    plan.request.spec.duration.as_secs_f64(),
                ),
            )?
            .with_history(crate::history::Recorder::maybe(a.history.as_deref())?),
        ),
        None => None,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let _ = ctrlc::set_handler(move || {
            if cancel.swap(true, Ordering::AcqRel) {
                std::process::exit(130);
            }
        });
    }
    plan.request.cancel = Some(cancel.clone());
    let mut out = LiveOutput::new(
        a.interval,
        a.json_stream.as_deref(),
        a.quiet,
        &plan.request.spec,
    )?;
    if let Some(server) = &a.iperf3_server {
        return run_iperf3(&a, server, &plan.request, command_line, saver, out);
    }

    if !plan.profile_parts.is_empty() {
        return run_profile_plan(&a, plan, command_line, saver, out);
    }
    // Several servers: one client group per server, all at once, aggregated.
    if let Some(t) = &plan.target {
        let servers: Vec<String> = t.address.split(',').map(|s| s.trim().to_string()).collect();
        if servers.len() > 1 {
            if servers.iter().any(String::is_empty) {
                return Err(UsageError(format!(
                    "--server {}: an empty server name in the list",
                    t.address
                ))
                .into());
            }
            return run_many(&a, &plan.request, t, &servers, command_line, saver, out);
        }
    }
    // Without --server: a daemon on loopback in this process.
    let (embedded, target) = match &plan.target {
        Some(t) => (None, t.clone()),
        None => {
            let (d, t) = embedded_server(&command_line, connections_of(&plan.request.spec))?;
            (Some(d), t)
        }
    };
    let server_label = if embedded.is_some() {
        "embedded".to_string()
    } else {
        target.address.clone()
    };
    let spec = plan.request.spec.clone();
    if !a.quiet {
        eprintln!(
            "linkperf: running {} against {} for {}",
            spec.name(),
            server_label,
            crate::table::window_words(spec.duration, spec.warmup)
        );
    }
    let judging = judging(&a, false);
    let config = config_of(&plan.request, server_label.clone(), judging);
    out.start(stream_start(&a, &command_line, &spec, config));
    let live = Arc::new(LiveStats::new(
        plan.request.client.threads.count().unwrap_or(1) as usize,
    ));
    let watch = out.watch(vec![live.clone()]);
    let (doc, code, err) = one_run(
        &target,
        &plan.request,
        &a.label,
        server_label,
        &command_line,
        judging,
        Some(live),
    );
    let out = watch.finish()?;
    drop(embedded);
    report_one(&a, &doc, code, err, saver, out)
}

/// How `request`'s test is set up, against `server_label`, as its results
/// record it.
fn config_of(request: &RunRequest, server_label: String, judging: Judging) -> TestConfig {
    let spec = &request.spec;
    let mut config = TestConfig::from_spec(
        spec,
        server_label,
        request.client.clone(),
        request.server.clone(),
    );
    config.max_loss = judging
        .max_loss
        .filter(|_| spec.protocol == linkperf_workload::Protocol::Udp);
    config
}

/// The stream's start event for `spec`, set up as `config`.
fn stream_start(
    a: &RunArgs,
    command_line: &[String],
    spec: &TestSpec,
    config: TestConfig,
) -> StreamStart {
    StreamStart::new(
        a.label.clone(),
        command_line.to_vec(),
        rfc3339(SystemTime::now()),
        spec,
        config,
    )
}

/// How `run`'s runs are judged: `shared` when other client groups share
/// this host at the same time.
fn judging(a: &RunArgs, shared: bool) -> Judging {
    Judging {
        max_loss: a.max_loss,
        shared_host: shared,
    }
}

/// Prints the one run of `doc` and ends the stream with it, saves it with
/// `--json`, and turns a run that never started into the error.
fn report_one(
    a: &RunArgs,
    doc: &ResultsDocument,
    code: ExitCode,
    err: Option<String>,
    saver: Option<crate::save::Saver>,
    mut out: LiveOutput,
) -> anyhow::Result<ExitCode> {
    let test = &doc.tests[0];
    let streamed = out.end(&test.runs[0]);
    // Shown before it is saved: a save that fails cannot hide it.
    out.human(&render_run(test, &test.runs[0]))?;
    if let Some(mut saver) = saver {
        saver.save(doc)?;
        if !a.quiet {
            eprintln!("linkperf: results written to {}", saver.path().display());
        }
    }
    streamed.context("failed to write the JSON stream")?;
    if let Some(e) = err {
        anyhow::bail!("the test did not run: {e}");
    }
    Ok(code)
}

/// One test against one server, as a results document of one run; the exit
/// code it calls for, and the error if it did not run at all. The client's
/// workers publish into `live`, if given.
fn one_run(
    target: &Target,
    request: &RunRequest,
    label: &str,
    server_label: String,
    command_line: &[String],
    judging: Judging,
    live: Option<Arc<LiveStats>>,
) -> (ResultsDocument, ExitCode, Option<String>) {
    let spec = request.spec.clone();
    let config = config_of(request, server_label, judging);
    let mut doc = ResultsDocument::new(label.to_string(), command_line.to_vec());
    let mut request = request.clone();
    request.live = live;
    let (run, envs) = crate::suite::execute(target, &request, 1, judging);
    // A run that never started has no environments; its error says why.
    let err = envs
        .is_none()
        .then(|| run.error.clone().unwrap_or_default());
    if let Some((client, server)) = envs {
        doc.environment.client = Some(client);
        doc.environment.server = server;
    }
    // A suspect run ran: it says why it is not to be believed, and exits 0.
    let code = if run.status.completed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    doc.push_run(&spec, config, run);
    (doc, code, err)
}

/// `--profile`: on the server of `--server`, else on the host the profile
/// names, else on the embedded one; a profile naming several hosts runs one
/// client group per host at once, aggregated like `--server h1,h2`.
fn run_profile_plan(
    a: &RunArgs,
    plan: RunPlan,
    command_line: Vec<String>,
    saver: Option<crate::save::Saver>,
    mut out: LiveOutput,
) -> anyhow::Result<ExitCode> {
    let hosts: Vec<&str> = plan
        .profile_parts
        .iter()
        .filter_map(|(h, _)| h.as_deref())
        .collect();
    let key = a
        .target
        .auth_key
        .as_deref()
        .map(linkperf_session::AuthKey::from_file)
        .transpose()?;
    let named = |h: &str| Target {
        address: h.to_string(),
        default_port: a.target.port,
        auth_key: key.clone(),
    };
    if plan.profile_parts.len() > 1 {
        if plan.target.is_some() {
            return Err(UsageError(format!(
                "the profile names {} remote hosts ({}): each runs on its own server, so --server cannot say which; drop --server",
                hosts.len(),
                hosts.join(", ")
            ))
            .into());
        }
        let groups: Vec<(String, Target, RunRequest)> = plan
            .profile_parts
            .iter()
            .map(|(h, spec)| {
                let host = h.clone().unwrap_or_default();
                let mut request = plan.request.clone();
                request.spec = spec.clone();
                (host.clone(), named(&host), request)
            })
            .collect();
        return run_groups(a, &plan.request, groups, command_line, saver, out);
    }
    let host = plan.profile_parts[0].0.clone();
    let (embedded, target, label) = match (&plan.target, host) {
        (Some(t), _) => (None, t.clone(), t.address.clone()),
        (None, Some(h)) => (None, named(&h), h),
        (None, None) => {
            let (d, t) = embedded_server(&command_line, connections_of(&plan.request.spec))?;
            (Some(d), t, "embedded".to_string())
        }
    };
    let mut request = plan.request.clone();
    if embedded.is_some() {
        request.process_method = linkperf_measured::ProcessMethod::RusageThreadSum;
    } else {
        request.process_method = linkperf_measured::ProcessMethod::RusageSelf;
    }
    if !a.quiet {
        eprintln!(
            "linkperf: running {} ({}) against {label}",
            request.spec.name(),
            crate::table::count(u64::from(request.spec.users), "user")
        );
    }
    // A profile's workers publish no seconds: the stream has its start and end.
    let judging = judging(a, false);
    out.start(stream_start(
        a,
        &command_line,
        &request.spec,
        config_of(&request, label.clone(), judging),
    ));
    let (doc, code, err) = one_run(
        &target,
        &request,
        &a.label,
        label,
        &command_line,
        judging,
        None,
    );
    drop(embedded);
    report_one(a, &doc, code, err, saver, out)
}

/// `--server h1,h2,h3`: one client group per server, started together, each
/// recorded on its own and aggregated (throughput summed, CPU per side summed,
/// transaction time merged as the lab's `--pairs` does).
fn run_many(
    a: &RunArgs,
    request: &RunRequest,
    first: &Target,
    servers: &[String],
    command_line: Vec<String>,
    saver: Option<crate::save::Saver>,
    out: LiveOutput,
) -> anyhow::Result<ExitCode> {
    let groups = servers
        .iter()
        .map(|s| {
            let mut target = first.clone();
            target.address = s.clone();
            (s.clone(), target, request.clone())
        })
        .collect();
    run_groups(a, request, groups, command_line, saver, out)
}

/// Client groups (server label, target, request) started together, each
/// recorded on its own and aggregated as the test of `whole`; their seconds
/// are shown added up.
fn run_groups(
    a: &RunArgs,
    whole: &RunRequest,
    groups: Vec<(String, Target, RunRequest)>,
    command_line: Vec<String>,
    saver: Option<crate::save::Saver>,
    mut out: LiveOutput,
) -> anyhow::Result<ExitCode> {
    let servers: Vec<String> = groups.iter().map(|(s, _, _)| s.clone()).collect();
    if !a.quiet {
        eprintln!(
            "linkperf: running {} against {} servers at once: {}",
            whole.spec.name(),
            servers.len(),
            servers.join(", ")
        );
    }
    out.start(stream_start(
        a,
        &command_line,
        &whole.spec,
        config_of(whole, servers.join(","), judging(a, true)),
    ));
    let sides: Vec<Arc<LiveStats>> = groups
        .iter()
        .map(|(_, _, r)| {
            Arc::new(LiveStats::new(
                r.client.threads.count().unwrap_or(1) as usize
            ))
        })
        .collect();
    let watch = out.watch(sides.clone());
    let handles: Vec<_> = groups
        .into_iter()
        .zip(sides)
        .map(|((server, target, mut request), live)| {
            // The groups share this process: each counts its own workers' CPU.
            request.process_method = linkperf_measured::ProcessMethod::RusageThreadSum;
            let label = a.label.clone();
            let command_line = command_line.clone();
            // The groups share this host: its noise is judged on their aggregate.
            let judging = judging(a, true);
            std::thread::spawn(move || {
                one_run(
                    &target,
                    &request,
                    &label,
                    server,
                    &command_line,
                    judging,
                    Some(live),
                )
            })
        })
        .collect();
    let mut done = Vec::new();
    for (k, h) in handles.into_iter().enumerate() {
        done.push(
            h.join().map_err(|_| {
                anyhow::anyhow!("the client group for server {} panicked", servers[k])
            })?,
        );
    }
    let mut out = watch.finish()?;
    let mut docs = Vec::new();
    let mut code = ExitCode::SUCCESS;
    for (k, (doc, c, err)) in done.into_iter().enumerate() {
        if c != ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
        if let Some(e) = err {
            eprintln!("linkperf: server {}: the test did not run: {e}", servers[k]);
        }
        let test = &doc.tests[0];
        out.human(&format!(
            "server {} ({}):\n{}",
            k + 1,
            servers[k],
            render_run(test, &test.runs[0])
        ))?;
        docs.push(doc);
    }
    // A profile's parts are different tests of one profile: aggregate them
    // as the whole.
    let name = whole.spec.name();
    let mut parts = docs.clone();
    for d in &mut parts {
        for t in &mut d.tests {
            t.name = name.clone();
        }
    }
    let agg = linkperf_lab::aggregate(&a.label, &command_line, &parts, &servers)
        .map_err(|e| anyhow::anyhow!("failed to aggregate: {e}"))?;
    let test = &agg.tests[0];
    let streamed = out.end(&test.runs[0]);
    out.human(&format!(
        "all {} servers together:\n{}",
        servers.len(),
        render_run(test, &test.runs[0])
    ))?;
    if let (Some(p), Some(mut saver)) = (&a.json, saver) {
        saver.save(&agg)?;
        for (k, doc) in docs.iter().enumerate() {
            let mut each = crate::save::Saver::unreserved(&per_server_path(p, k + 1));
            each.save(doc)?;
        }
        if !a.quiet {
            eprintln!(
                "linkperf: aggregate written to {}, each server's to {}",
                p.display(),
                per_server_path(p, 1)
                    .display()
                    .to_string()
                    .replace("-server1", "-serverK")
            );
        }
    }
    streamed.context("failed to write the JSON stream")?;
    Ok(code)
}

/// `out.json` → `out-server2.json`.
fn per_server_path(p: &std::path::Path, k: usize) -> std::path::PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "results".into());
    let ext = p
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    p.with_file_name(format!("{stem}-server{k}{ext}"))
}

/// Data connections one side of `spec` opens: one per user, or for a
/// profile, its users times the most sockets each holds open at once.
pub fn connections_of(spec: &linkperf_workload::TestSpec) -> u64 {
    match &spec.workload {
        linkperf_workload::Workload::Profile { profile } => {
            linkperf_engine::program::compile(profile)
                .map_or(u64::from(spec.users), |c| c.connections())
        }
        _ => u64::from(spec.users),
    }
}

/// A daemon on 127.0.0.1 in this process, and how to reach it. Both sides'
/// descriptors are this process's then: the limit is raised for
/// `connections` data connections on each side at once.
pub fn embedded_server(
    command_line: &[String],
    connections: u64,
) -> anyhow::Result<(DaemonHandle, Target)> {
    linkperf_metrics::raise_fd_limit(2 * connections + 512)
        .context("too few file descriptors for both sides in this process")?;
    let mut cfg = DaemonConfig::new(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    cfg.process_method = linkperf_measured::ProcessMethod::RusageThreadSum;
    cfg.command_line = command_line.to_vec();
    cfg.max_users = linkperf_workload::MAX_USERS;
    // In-process, for this user alone: no limits beyond the test's own.
    cfg.max_connections = u64::MAX;
    cfg.budget = linkperf_session::Budget::unlimited();
    cfg.max_bytes_per_session = None;
    let d = Daemon::bind(cfg)
        .context("failed to start the embedded server")?
        .spawn();
    let t = Target {
        address: d.addr().to_string(),
        default_port: d.addr().port(),
        auth_key: None,
    };
    Ok((d, t))
}

/// `--iperf3-server`: the test against a stock `iperf3 -s`, reported like any
/// other. The client's side is measured as usual; iperf3 reports no
/// linkperf record, so the run has no `server` side and what iperf3 said of
/// its own bytes and CPU is kept as a note in the client's `error_samples`
/// (docs/iperf3.md).
fn run_iperf3(
    a: &RunArgs,
    server: &str,
    req: &linkperf_session::RunRequest,
    command_line: Vec<String>,
    saver: Option<crate::save::Saver>,
    mut out: LiveOutput,
) -> anyhow::Result<ExitCode> {
    let spec = req.spec.clone();
    linkperf_iperf3::check_spec(&spec).map_err(|e| UsageError(format!("cannot {e}")))?;
    if !a.quiet {
        eprintln!(
            "linkperf: running {} against the iperf3 server at {server} for {}",
            spec.name(),
            crate::table::window_words(spec.duration, spec.warmup)
        );
    }
    // iperf3 3.12 runs a test on one thread; linkperf cannot see another's.
    let iperf3_placement = linkperf_workload::Placement::with_threads(1);
    let config = TestConfig::from_spec(
        &spec,
        format!("iperf3 {server}"),
        req.client.clone(),
        iperf3_placement,
    );
    let mut doc = ResultsDocument::new(a.label.clone(), command_line.clone());
    // iperf3's side publishes no seconds: the stream has its start and end.
    out.start(stream_start(a, &command_line, &spec, config.clone()));
    let started = SystemTime::now();
    let target = linkperf_iperf3::Iperf3Target {
        address: server.to_string(),
        default_port: linkperf_iperf3::DEFAULT_PORT,
    };
    let request = linkperf_iperf3::ClientRequest {
        spec: spec.clone(),
        placement: req.client.clone(),
        cancel: req.cancel.clone(),
        command_line,
    };
    let (run, code, err) = match linkperf_iperf3::run_client(&target, &request) {
        Ok(o) => {
            doc.environment.client = Some(o.client_environment.clone());
            let mut client = o.client;
            if let Some(s) = &o.server {
                // First, so it is read before any error the client saw.
                client.error_samples.insert(0, s.to_string());
            }
            let mut r = derive_run(1, rfc3339_millis(o.started), &spec, client, None);
            if o.aborted {
                r.status = RunStatus::Aborted;
                r.error = Some("interrupted".into());
            }
            // A stock server on this host is CPU nobody here accounts for:
            // its host's noise cannot be judged.
            let this_host = Target {
                address: server.to_string(),
                default_port: linkperf_iperf3::DEFAULT_PORT,
                auth_key: None,
            }
            .is_this_host()
            .unwrap_or(true);
            let hosts = (!this_host).then(|| hosts_of_run(&r, Some(&o.client_environment), None));
            judge_run(
                &mut r,
                &Judge {
                    spec: &spec,
                    interrupted: o.aborted,
                    hosts,
                    max_loss: a.max_loss,
                },
            );
            crate::run_log::note(&spec, &r);
            let code = if r.status.completed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            };
            (r, code, None)
        }
        Err(e) => {
            let msg = e.to_string();
            (
                failed_run(1, rfc3339_millis(started), RunStatus::Failed, msg.clone()),
                ExitCode::from(1),
                Some(msg),
            )
        }
    };
    doc.push_run(&spec, config, run);
    let test = &doc.tests[0];
    let streamed = out.end(&test.runs[0]);
    out.human(&render_run(test, &test.runs[0]))?;
    if let Some(mut saver) = saver {
        saver.save(&doc)?;
        if !a.quiet {
            eprintln!("linkperf: results written to {}", saver.path().display());
        }
    }
    streamed.context("failed to write the JSON stream")?;
    if let Some(e) = err {
        anyhow::bail!("the test did not run: failed to {e}");
    }
    Ok(code)
}
