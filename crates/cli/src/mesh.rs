//! `linkperf mesh`: a controller over many agents. It finds the agents
//! (a list, or every address a DNS name resolves to), asks each who it is,
//! plans the pairs, has each pair's source agent run the suite's tests
//! against its target (delegated tests), saves every run as it ends into
//! `DIR/mesh.json`, and writes the mesh report into `DIR/report/`.

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use linkperf_mesh::{name_agents, plan_pairs, Agent, Concurrency, Pair, Plan, PlanCost};
use linkperf_results::{MeshRecord, ResultsDocument, SuiteRecord};
use linkperf_session::{identify, AuthKey, Target};
use linkperf_workload::{run_order, Placement, PlacementPolicy, Suite, SuiteTest, Threads};

use crate::args::{parse_duration, DEFAULT_PORT};
use crate::UsageError;

mod execute;

/// `linkperf mesh`.
// clap prints the fields' comments as the options' help, brackets and all:
// they are not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The agents: HOST[:PORT],... (each a `linkperf serve --auth-key` on its node).
    #[arg(long, value_name = "HOST[:PORT],...", conflicts_with = "agents_dns")]
    pub agents: Option<String>,
    /// Every address these names resolve to is an agent (headless Services: one per
    /// network when the pod and host agents listen on different ports).
    #[arg(long, value_name = "NAME[:PORT],...", required_unless_present_any = ["agents", "resume"])]
    pub agents_dns: Option<String>,
    /// The agents' control port where an address has none.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The agents' pre-shared key: the agents prove it to this controller and to each other.
    #[arg(long, env = "LINKPERF_AUTH_KEY_FILE", value_name = "FILE")]
    pub auth_key: Option<PathBuf>,
    /// Which pairs: all-pairs, ring, one-to-all:AGENT, path-classes[:N], random:K.
    #[arg(long, default_value = "all-pairs")]
    pub plan: String,
    /// Seed of the plans that draw pairs (path-classes, random).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs at once: a number (no node in two at once; 1 = each pair alone) or
    /// all (every pair at once, test by test).
    #[arg(long, default_value = "1")]
    pub concurrency: String,
    /// A built-in suite or a suite file (TOML): the tests every pair runs.
    #[arg(long, default_value = "quick")]
    pub suite: String,
    /// Runs of every test of every pair (default: the suite's own).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Run each test's repeats back to back instead of the whole mesh once, then again.
    #[arg(long)]
    pub no_interleave: bool,
    /// Measurement window of every test, overriding the suite's.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warmup of every test, overriding the suite's.
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Client workers of each delegated test (default: the source agent's CPUs).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Server workers of each delegated test (default: the target agent's CPUs).
    #[arg(long)]
    pub server_threads: Option<u32>,
    /// Run a suspect run again at once, up to N times (default: the suite file's
    /// `retry_suspect`, else 2). Retries do not count toward --repeat.
    #[arg(long, value_name = "N")]
    pub retry_suspect: Option<u32>,
    /// The directory of mesh.json and report/.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also record every run into this history (an SQLite file or a postgres:// URL) as
    /// mesh.json is saved.
    #[arg(long, value_name = "DB")]
    pub history: Option<String>,
    /// Continue the mesh recorded in DIR/mesh.json: its agents and pairs, the runs
    /// that did not complete.
    #[arg(long)]
    pub resume: bool,
    /// With --agents-dns: look the names up until their addresses have not
    /// changed for 3 looks 2 s apart (agents still starting join them), at most D.
    #[arg(long, value_name = "D", value_parser = parse_duration, requires = "agents_dns")]
    pub wait_agents: Option<Duration>,
    /// Continue DIR/mesh.json if it exists, else start it (for a Job that may be
    /// run again).
    #[arg(long, conflicts_with = "resume")]
    pub resume_if_present: bool,
    /// Find the agents and print the plan and what it will take; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One line per finished run only.
    #[arg(long, short)]
    pub quiet: bool,
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// The mesh's file in `dir`.
pub fn mesh_file(dir: &Path) -> PathBuf {
    dir.join("mesh.json")
}

/// Everything a mesh runs, resolved before anything runs.
pub(crate) struct MeshPlan {
    pub key: AuthKey,
    pub suite: Suite,
    pub repeat: u32,
    pub interleave: bool,
    pub concurrency: Concurrency,
    pub agents: Vec<Agent>,
    pub pairs: Vec<Pair>,
    pub plan: Plan,
    pub seed: u64,
    /// Each test's (source agent's, target agent's) placement.
    pub placements: Vec<(Placement, Placement)>,
    /// Times a suspect run is run again.
    pub retry_suspect: u32,
}

/// Default of `--retry-suspect`, as `suite`'s.
const DEFAULT_RETRY_SUSPECT: u32 = 2;
/// Most of `--retry-suspect`.
const MAX_RETRY_SUSPECT: u32 = 100;

/// A delegated test's placements: the suite test's own settings, then the
/// command line's, then each agent's own (one worker per CPU of its host,
/// settled by the agent; one worker under `--concurrency all`, where an
/// agent carries many tests at once); nothing pinned unless a CPU list says
/// (the two agents are usually on two hosts).
fn placements(a: &MeshArgs, t: &SuiteTest, concurrency: Concurrency) -> (Placement, Placement) {
    let o = &t.overrides;
    let default = match concurrency {
        Concurrency::All => Threads::Count(1),
        Concurrency::Count(_) => Threads::ServerDefault,
    };
    let side = |threads: Option<u32>, affinity: Option<linkperf_workload::CpuList>| Placement {
        threads: threads.map_or(default, Threads::Count),
        affinity,
        busy_poll: o.busy_poll.unwrap_or(false),
        policy: PlacementPolicy::Free,
    };
    (
        side(o.threads.or(a.threads), o.affinity.clone()),
        side(
            o.server_threads.or(a.server_threads),
            o.server_affinity.clone(),
        ),
    )
}

/// The suite's tests and the mesh's flags checked before anything runs;
/// the repeats.
fn checked(a: &MeshArgs, suite: &Suite) -> anyhow::Result<u32> {
    for t in &suite.tests {
        if matches!(t.spec.workload, linkperf_workload::Workload::Profile { .. }) {
            return Err(usage(format!(
                "test {}: a mesh runs workloads, not uperf profiles",
                t.name()
            )));
        }
        t.spec
            .validate()
            .map_err(|e| usage(format!("test {}: {e}", t.name())))?;
    }
    let repeat = a.repeat.unwrap_or(suite.repeat);
    if repeat == 0 || repeat > 1000 {
        return Err(usage(format!(
            "--repeat must be between 1 and 1000, got {repeat}"
        )));
    }
    for (what, n) in [
        ("--threads", a.threads),
        ("--server-threads", a.server_threads),
    ] {
        if let Some(n) = n.filter(|&n| n == 0 || n > 1024) {
            return Err(usage(format!("{what} must be between 1 and 1024, got {n}")));
        }
    }
    Ok(repeat)
}

/// Runs a mesh.
pub fn mesh(a: MeshArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let key_path = a.auth_key.clone().ok_or_else(|| {
        usage("a mesh needs the agents' key: --auth-key FILE (or LINKPERF_AUTH_KEY_FILE)")
    })?;
    let key = AuthKey::from_file(&key_path).map_err(|e| usage(format!("failed to {e}")))?;
    let plan: Plan = a
        .plan
        .parse()
        .map_err(|e| usage(format!("failed to {e}")))?;
    let concurrency: Concurrency = a
        .concurrency
        .parse()
        .map_err(|e| usage(format!("failed to {e}")))?;
    let suite = crate::suite::load_suite(&a.suite)?.with_timing(a.duration, a.warmup);
    let repeat = checked(&a, &suite)?;
    let out_file = mesh_file(&a.out);
    if !a.dry_run {
        std::fs::create_dir_all(&a.out)
            .map_err(|e| usage(format!("cannot create {}: {e}", a.out.display())))?;
    }
    let resume = a.resume || (a.resume_if_present && out_file.exists());
    let resumed = if resume {
        Some(ResultsDocument::load(&out_file).map_err(|e| usage(format!("cannot resume: {e}")))?)
    } else {
        if out_file.exists() && !a.dry_run {
            return Err(usage(format!(
                "{} exists: add --resume to continue the mesh recorded in it, or choose another --out",
                out_file.display()
            )));
        }
        None
    };
    let (agents, pairs, plan, seed) = match resumed.as_ref().map(|d| d.mesh.as_ref()) {
        Some(None) => {
            return Err(usage(format!(
                "cannot resume: {} was not written by linkperf mesh",
                out_file.display()
            )))
        }
        Some(Some(m)) => {
            let plan: Plan = m
                .plan
                .parse()
                .map_err(|e| usage(format!("cannot resume: {e}")))?;
            (m.agents.clone(), m.pairs.clone(), plan, m.seed)
        }
        None => {
            let agents = discover(&a, &key)?;
            let pairs =
                plan_pairs(&plan, &agents, a.seed).map_err(|e| usage(format!("failed to {e}")))?;
            (agents, pairs, plan, a.seed)
        }
    };
    let placements = suite
        .tests
        .iter()
        .map(|t| placements(&a, t, concurrency))
        .collect();
    let retry_suspect = a
        .retry_suspect
        .or(suite.retry_suspect)
        .unwrap_or(DEFAULT_RETRY_SUSPECT);
    if retry_suspect > MAX_RETRY_SUSPECT {
        return Err(usage(format!(
            "--retry-suspect must be at most {MAX_RETRY_SUSPECT}, got {retry_suspect}"
        )));
    }
    let p = MeshPlan {
        placements,
        retry_suspect,
        key,
        suite,
        repeat,
        interleave: !a.no_interleave,
        concurrency,
        agents,
        pairs,
        plan,
        seed,
    };
    let record = SuiteRecord {
        name: p.suite.name.clone(),
        fingerprint: p.suite.fingerprint(),
        repeat: p.repeat,
        interleave: p.interleave,
        tests: p.suite.tests.iter().map(SuiteTest::name).collect(),
        target_ci: None,
        min_repeat: None,
    };
    if let Some(old) = resumed.as_ref().and_then(|d| d.suite.as_ref()) {
        if old.fingerprint != record.fingerprint || old.name != record.name {
            return Err(usage(format!(
                "cannot resume: {} ran suite {} and its tests; --suite {} (or its --duration, --warmup) differs",
                out_file.display(),
                old.name,
                a.suite
            )));
        }
    }
    if a.dry_run {
        crate::emit(&plan_text(&p))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut doc = match resumed {
        Some(d) => d,
        None => {
            let mut d = ResultsDocument::new(format!("mesh-{}", p.plan), command_line.clone());
            d.suite = Some(record);
            d.mesh = Some(MeshRecord {
                plan: p.plan.to_string(),
                seed: p.seed,
                concurrency: p.concurrency.to_string(),
                agents: p.agents.clone(),
                pairs: p.pairs.clone(),
            });
            d
        }
    };
    doc.command_line = command_line.clone();
    if !a.quiet {
        eprint!("{}", plan_text(&p));
    }
    let outcome = execute::run_mesh(
        &p,
        &mut doc,
        &out_file,
        &command_line,
        a.quiet,
        crate::history::Recorder::maybe(a.history.as_deref())?,
    )?;
    let report_dir = a.out.join("report");
    let summary = linkperf_report::write_mesh_report(&doc, &report_dir)
        .map_err(|e| anyhow::anyhow!("failed to {e}"))?;
    crate::emit(&summary.text)?;
    for w in &summary.warnings {
        eprintln!("linkperf: {w}");
    }
    eprintln!(
        "linkperf: mesh results in {}, report in {}",
        out_file.display(),
        report_dir.join("index.html").display()
    );
    Ok(outcome)
}

/// The agents of `--agents` or `--agents-dns`, each asked who it is (it
/// proves the key first), and named.
fn discover(a: &MeshArgs, key: &AuthKey) -> anyhow::Result<Vec<Agent>> {
    let addresses: Vec<String> = match (&a.agents, &a.agents_dns) {
        (Some(list), _) => {
            let v: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            if v.iter().any(String::is_empty) {
                return Err(usage(format!(
                    "--agents {list}: an empty agent in the list"
                )));
            }
            v.into_iter()
                .map(|s| {
                    let (host, port) = linkperf_session::parse_address(&s, a.port)
                        .map_err(|e| usage(format!("--agents: {e}")))?;
                    Ok(join(&host, port))
                })
                .collect::<anyhow::Result<_>>()?
        }
        (None, Some(names)) => {
            let mut names_of: Vec<(String, u16)> = Vec::new();
            for item in names.split(',').map(str::trim) {
                if item.is_empty() {
                    return Err(usage(format!(
                        "--agents-dns {names}: an empty name in the list"
                    )));
                }
                names_of.push(
                    linkperf_session::parse_address(item, a.port)
                        .map_err(|e| usage(format!("--agents-dns: {e}")))?,
                );
            }
            let mut found = resolve_all(&names_of, a.wait_agents.is_some())?;
            if let Some(wait) = a.wait_agents {
                found = settle(&names_of, found, wait);
            }
            found.into_iter().map(|s| s.to_string()).collect()
        }
        (None, None) => return Err(usage("give --agents or --agents-dns")),
    };
    if addresses.len() < 2 {
        return Err(usage(format!(
            "a mesh needs at least 2 agents, found {}: {}",
            addresses.len(),
            addresses.join(", ")
        )));
    }
    let mut agents = Vec::with_capacity(addresses.len());
    let mut unreachable = Vec::new();
    // Asked a few at a time: each answers in a round trip.
    for chunk in addresses.chunks(32) {
        let asked: Vec<_> = chunk
            .iter()
            .map(|addr| {
                let target = Target {
                    address: addr.clone(),
                    default_port: a.port,
                    auth_key: Some(key.clone()),
                };
                let addr = addr.clone();
                std::thread::spawn(move || (addr, identify(&target)))
            })
            .collect();
        for h in asked {
            let (addr, id) = h
                .join()
                .map_err(|_| anyhow::anyhow!("asking an agent who it is panicked"))?;
            match id {
                Ok(identity) => agents.push(Agent {
                    name: String::new(),
                    address: addr,
                    identity: identity.unwrap_or_default(),
                }),
                Err(e) => unreachable.push(format!("{addr}: {}", crate::words::session_error(&e))),
            }
        }
    }
    if !unreachable.is_empty() {
        eprintln!(
            "linkperf: {} of {} agents left out of the mesh:\n  {}",
            unreachable.len(),
            addresses.len(),
            unreachable.join("\n  ")
        );
    }
    name_agents(&mut agents);
    Ok(agents)
}

/// Every address of every name, in order, each once. A name that does not
/// resolve is an error, unless `lenient` (while waiting for agents to come).
fn resolve_all(names: &[(String, u16)], lenient: bool) -> anyhow::Result<Vec<SocketAddr>> {
    let mut all = Vec::new();
    for (host, port) in names {
        match (host.as_str(), *port).to_socket_addrs() {
            Ok(v) => {
                let mut v: Vec<SocketAddr> = v.collect();
                v.sort();
                all.extend(v);
            }
            Err(_) if lenient => {}
            Err(e) => {
                return Err(usage(format!(
                    "--agents-dns {host}:{port}: it does not resolve: {e}"
                )))
            }
        }
    }
    let mut seen = HashSet::new();
    all.retain(|addr| seen.insert(*addr));
    Ok(all)
}

/// How often `--wait-agents` looks the names up again, and how many looks in
/// a row must find the same addresses.
const SETTLE_EVERY: Duration = Duration::from_secs(2);
const SETTLE_LOOKS: u32 = 3;

/// The names' addresses once they have settled: looked up every
/// [`SETTLE_EVERY`] until [`SETTLE_LOOKS`] looks in a row find the same (at
/// least 2) addresses, or `wait` has passed. Agents that start at once (a
/// DaemonSet's pods becoming ready) join a headless Service's name over a few
/// seconds; a mesh started with them should not leave the late ones out.
fn settle(names: &[(String, u16)], mut found: Vec<SocketAddr>, wait: Duration) -> Vec<SocketAddr> {
    let deadline = std::time::Instant::now() + wait;
    let mut same = 1;
    while (same < SETTLE_LOOKS || found.len() < 2) && std::time::Instant::now() < deadline {
        std::thread::sleep(
            SETTLE_EVERY.min(deadline.saturating_duration_since(std::time::Instant::now())),
        );
        let now = resolve_all(names, true).unwrap_or_default();
        if now == found {
            same += 1;
        } else {
            eprintln!("linkperf: waiting for the agents: {} found", now.len());
            found = now;
            same = 1;
        }
    }
    found
}

/// `host:port`, with brackets around an IPv6 host.
fn join(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The plan in words: agents, classes, pairs, runs and time.
fn plan_text(p: &MeshPlan) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "mesh: {}, plan {}, {}, suite {} ({} × {}), concurrency {}",
        crate::table::count(p.agents.len() as u64, "agent"),
        p.plan,
        crate::table::count(p.pairs.len() as u64, "pair"),
        p.suite.name,
        crate::table::count(p.suite.tests.len() as u64, "test"),
        crate::table::count(u64::from(p.repeat), "run"),
        p.concurrency
    );
    for ag in &p.agents {
        let id = &ag.identity;
        let _ = writeln!(
            s,
            "  {:<20} {:<24} node {:<12} network {:<6} zone {}",
            ag.name,
            ag.address,
            id.node.as_deref().unwrap_or("-"),
            id.network.as_deref().unwrap_or("-"),
            id.zone.as_deref().unwrap_or("-")
        );
    }
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for pair in &p.pairs {
        let c = linkperf_mesh::classify(
            &p.agents[pair.source as usize].identity,
            &p.agents[pair.target as usize].identity,
        );
        *classes.entry(c.to_string()).or_default() += 1;
    }
    for (c, n) in &classes {
        let _ = writeln!(s, "  {n:>6} pairs {c}");
    }
    let at_once = match p.concurrency {
        Concurrency::All => None,
        Concurrency::Count(n) => Some(u64::from(n)),
    };
    let nodes = linkperf_mesh::nodes_of(&p.agents)
        .into_iter()
        .max()
        .map_or(0, |n| n as usize + 1);
    let cost = PlanCost::of(
        &p.pairs,
        nodes,
        p.suite.tests.len() as u64,
        u64::from(p.repeat),
        at_once,
    );
    let per_run: Duration = p
        .suite
        .tests
        .iter()
        .map(|t| t.spec.warmup + t.spec.duration + linkperf_workload::RUN_OVERHEAD)
        .max()
        .unwrap_or_default();
    let order = run_order(p.suite.tests.len(), p.repeat, p.interleave).len() as u64;
    let time = per_run.saturating_mul(u32::try_from(cost.rounds()).unwrap_or(u32::MAX));
    let _ = writeln!(
        s,
        "{} runs ({} per pair), up to {} at once, plan held in {} bytes; estimated time: {}",
        cost.runs,
        order,
        cost.at_once,
        cost.plan_bytes,
        humantime::format_duration(Duration::from_secs(time.as_secs()))
    );
    s
}
