//! `linkperf lab`: emulated network configurations in network namespaces.
//!
//! `lab run` brings each configuration up in turn, starts `linkperf serve`
//! inside its server namespace(s), runs `linkperf suite` from its client
//! namespace(s), records the link in the results, tears it down, and finally
//! compares the configurations. `lab up`, `lab list` and `lab down` manage
//! configurations by hand. Every lab command first removes (and reports) what
//! a killed lab command left behind. See docs/lab.md.

use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkperf_lab::sys::{interrupt, netns_command, Host};
use linkperf_lab::{aggregate, Catalog, Lab, LabError, LinkRecord, Pair, Record, Topology};
use linkperf_results::ResultsDocument;
use linkperf_workload::PlacementPolicy;

use crate::args::{parse_duration, parse_policy};
use crate::UsageError;

/// How long `linkperf serve` may take to listen.
const SERVE_READY: Duration = Duration::from_secs(10);
/// How often running children are checked.
const POLL: Duration = Duration::from_millis(50);
/// Fewest runs of every test the lab asks for, unless told otherwise.
const LAB_MIN_REPEAT: u32 = 3;

/// What one interleaved step of a configuration did.
enum Step {
    /// It ran a run (or its pairs did), all without failure.
    Ran,
    /// A pair's run failed.
    Failed,
    /// Its suite had nothing left to run.
    Done,
}

/// `linkperf lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: LabCommand,
}

/// The lab's subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// Bring each configuration up in turn, run a suite through it, take it down; then compare them.
    Run(LabRunArgs),
    /// Bring one configuration up and leave it up; prints how to run tests through it by hand.
    Up(LabUpArgs),
    /// Show what the lab has up (after removing what a killed lab command left behind).
    List(LabListArgs),
    /// Take a configuration down, or everything the lab has up.
    Down(LabDownArgs),
}

/// `linkperf lab run`.
#[derive(Debug, clap::Args)]
pub struct LabRunArgs {
    /// Configurations, in order; the first is the comparison's base unless --base names
    /// another. Built in: loopback, veth, veth-10g, veth-1g, vxlan, bridge, macvlan; each may
    /// take options: veth,mtu=9000,rate=10gbit,name=jumbo.
    #[arg(long, required = true, value_name = "LIST")]
    pub configs: Vec<String>,
    /// The comparison's base: one of --configs, by its name (veth-1g, or the name= it was
    /// given); the others are candidates against it. Default: the first.
    #[arg(long, value_name = "CONFIG")]
    pub base: Option<String>,
    /// The suite to run through each configuration (a built-in one or a suite file).
    #[arg(long)]
    pub suite: String,
    /// Measurement window of every test, overriding the suite's: 30s, 500ms, 2m, or a bare
    /// number of seconds.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warmup of every test, overriding the suite's (2s, or a bare number of seconds; 0 for none).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Runs of every test (overrides the suite's; default: --min-repeat 3).
    #[arg(long, conflicts_with_all = ["target_ci", "min_repeat"])]
    pub repeat: Option<u32>,
    /// Repeat each test until the 95% interval of its mean throughput is within
    /// ± PCT % of the mean, between --min-repeat and --max-repeat runs (as `suite`).
    #[arg(long, value_name = "PCT")]
    pub target_ci: Option<String>,
    /// Fewest runs of every test (default 3, so that every comparison can be judged
    /// for significance).
    #[arg(long, value_name = "N")]
    pub min_repeat: Option<u32>,
    /// Most runs of every test with --target-ci (default 10).
    #[arg(long, value_name = "N", requires = "target_ci")]
    pub max_repeat: Option<u32>,
    /// Run a suspect run again at once, up to N times (as `suite --retry-suspect`;
    /// with --pairs above 1 suspect runs are not retried, so that the pairs stay in step).
    #[arg(long, value_name = "N")]
    pub retry_suspect: Option<u32>,
    /// UDP: a run is suspect when more than PCT % of its transactions are lost.
    #[arg(long, value_name = "PCT")]
    pub max_loss: Option<String>,
    /// Client/server pairs through the same link at once; results per pair and aggregated.
    #[arg(long, default_value_t = 1)]
    pub pairs: u32,
    /// Where each side's workers run (same|split|free): split, the default,
    /// pins every client to the first half of the host's CPUs and every
    /// server to the second half (on 2 CPUs client CPU 0, server CPU 1), so
    /// no configuration wins by where the scheduler happened to put it.
    /// Recorded in every results file; a suite file's CPU lists win.
    #[arg(long, value_name = "same|split|free", default_value = "split", value_parser = parse_policy)]
    pub placement: PlacementPolicy,
    /// Continue an interrupted lab run: the same command with --resume. Each
    /// configuration's results file goes on where it stopped (checked against
    /// the suite and its options, as `suite --resume` does); the comparison
    /// is made when every file is complete.
    #[arg(long)]
    pub resume: bool,
    /// Directory for the results (CONFIG.json per configuration), logs and the report.
    #[arg(long)]
    pub out: PathBuf,
    /// Custom configurations (TOML, see docs/lab.md).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// `interleaved` (default): every configuration up at once, each run of the suite
    /// run on every configuration in turn, the order rotating each round (ABC, BCA, CAB),
    /// so that the host's drift hits all alike; `sequential`: the whole suite on one
    /// configuration, then on the next.
    #[arg(long, value_enum, default_value_t = Order::Interleaved)]
    pub order: Order,
}

/// How `lab run` orders its runs across configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Each run on every configuration in turn, rotating.
    Interleaved,
    /// One configuration's whole suite after another's.
    Sequential,
}

/// `linkperf lab up`.
#[derive(Debug, clap::Args)]
pub struct LabUpArgs {
    /// The configuration, with options (e.g. vxlan or veth,mtu=9000).
    pub config: String,
    /// Client/server pairs through the same link.
    #[arg(long, default_value_t = 1)]
    pub pairs: u32,
    /// Custom configurations (TOML, see docs/lab.md).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Print the commands that would build it; build nothing (needs no privileges).
    #[arg(long)]
    pub dry_run: bool,
}

/// `linkperf lab list`.
#[derive(Debug, clap::Args)]
pub struct LabListArgs {
    /// List the configurations that can be brought up instead (built-in, and --file's).
    #[arg(long)]
    pub available: bool,
    /// Custom configurations (TOML, see docs/lab.md), for --available.
    #[arg(long, value_name = "FILE", requires = "available")]
    pub file: Option<PathBuf>,
}

/// `linkperf lab down`.
#[derive(Debug, clap::Args)]
pub struct LabDownArgs {
    /// The configuration to take down (its name, as `lab list` shows it).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub config: Option<String>,
    /// Take down everything the lab has up, including a running `lab run`'s configuration.
    #[arg(long)]
    pub all: bool,
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Errors of the user's input or of the host's set-up exit 2; the rest 1.
fn lab_error(e: LabError) -> anyhow::Error {
    match e {
        LabError::Option(_)
        | LabError::ConfigFile { .. }
        | LabError::Preflight(_)
        | LabError::AlreadyUp { .. }
        | LabError::NotUp(_) => usage(format!("failed to use the lab: {e}")),
        other => anyhow::Error::new(other),
    }
}

/// Runs a lab subcommand.
pub fn lab(a: LabArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    match a.command {
        LabCommand::Run(r) => run(r, command_line),
        LabCommand::Up(u) => up(u),
        LabCommand::List(l) => list(l),
        LabCommand::Down(d) => down(d),
    }
}

fn catalog(file: Option<&Path>) -> anyhow::Result<Catalog> {
    let Some(path) = file else {
        return Ok(Catalog::builtin());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("failed to read {}: {e}", path.display())))?;
    Catalog::with_file(&text, &path.display().to_string()).map_err(lab_error)
}

/// What is up, after the stale objects were reported and removed; and those.
struct Opened {
    lab: Lab<Host>,
    up: Vec<Record>,
    stale: Vec<linkperf_lab::Stale>,
}

/// Preflight: fails, naming what is missing, before anything is touched.
fn preflight() -> anyhow::Result<Lab<Host>> {
    let lab = Lab::new(Host);
    lab.preflight().map_err(lab_error)?;
    Ok(lab)
}

/// Preflight, then the stale objects reported and removed.
fn open_lab() -> anyhow::Result<Opened> {
    clean_stale(preflight()?)
}

fn clean_stale(lab: Lab<Host>) -> anyhow::Result<Opened> {
    let survey = lab
        .remove_stale(|stale| {
            eprintln!("linkperf lab: removing what an earlier lab command left behind:");
            for s in stale {
                eprintln!("  {s}");
            }
        })
        .map_err(|e| match e {
            LabError::Teardown(_) => {
                anyhow::Error::new(e).context("failed to remove the stale lab objects")
            }
            e => lab_error(e),
        })?;
    Ok(Opened {
        lab,
        up: survey.up,
        stale: survey.stale,
    })
}

// ---------------------------------------------------------------------------
// lab up, list, down
// ---------------------------------------------------------------------------

fn up(a: LabUpArgs) -> anyhow::Result<ExitCode> {
    let config = catalog(a.file.as_deref())?
        .resolve(&a.config)
        .map_err(lab_error)?;
    let topo = Topology::build(&config, a.pairs).map_err(lab_error)?;
    if a.dry_run {
        let mut out = format!("# {}\n", topo.describe());
        for c in topo.command_lines() {
            let _ = writeln!(out, "{c}");
        }
        crate::emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let lab = open_lab()?.lab;
    let record = lab
        .up(&topo, lab.this_process())
        .map_err(lab_error)?
        .keep()
        .map_err(lab_error)?;
    let exe = std::env::current_exe().context("failed to find the linkperf executable")?;
    crate::emit(&by_hand(&record, &exe))?;
    Ok(ExitCode::SUCCESS)
}

/// What `lab up` prints: where everything is and the commands to use it.
fn by_hand(r: &Record, exe: &Path) -> String {
    let exe = exe.display();
    let mut s = format!("linkperf lab: {} is up: {}\n", r.name, r.configuration);
    for p in &r.pairs {
        let _ = writeln!(
            s,
            "  pair {}: server {} in namespace {} ({}), client {} in {} ({})",
            p.index,
            p.server_addr,
            p.server_ns,
            p.server_device,
            p.client_addr,
            p.client_ns,
            p.client_device
        );
    }
    s.push_str("\nRun tests through it by hand (as root):\n");
    for p in &r.pairs {
        let _ = writeln!(
            s,
            "  ip netns exec {} {exe} serve --listen {} &",
            p.server_ns, p.server_addr
        );
    }
    for p in &r.pairs {
        let _ = writeln!(
            s,
            "  ip netns exec {} {exe} run --server {} --workload rr1c-200x1000 --users 10 --duration 10s",
            p.client_ns, p.server_addr
        );
    }
    if let Some(p) = r.pairs.first() {
        let _ = writeln!(
            s,
            "  ip netns exec {} {exe} suite quick --server {} --out {}.json",
            p.client_ns, p.server_addr, r.name
        );
    }
    let _ = writeln!(
        s,
        "\nThe commands that built it are in `linkperf lab list`. Take it down with: linkperf lab down {}",
        r.name
    );
    s
}

fn list(a: LabListArgs) -> anyhow::Result<ExitCode> {
    if a.available {
        let mut out = String::new();
        for c in catalog(a.file.as_deref())?.configs() {
            let _ = writeln!(
                out,
                "{:<12} {}\n             {}",
                c.name,
                c.summary(),
                c.description
            );
        }
        crate::emit(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let up = open_lab()?.up;
    crate::emit(&render_up(&up))?;
    Ok(ExitCode::SUCCESS)
}

fn render_up(up: &[Record]) -> String {
    if up.is_empty() {
        return "linkperf lab: nothing is up\n".into();
    }
    let mut s = String::new();
    for r in up {
        let owner = match r.owner {
            linkperf_lab::Owner::Up => "lab up".to_string(),
            linkperf_lab::Owner::Process { pid, .. } => format!("linkperf lab (pid {pid})"),
        };
        let _ = writeln!(s, "{}  [{owner}]  {}", r.name, r.configuration);
        let _ = writeln!(s, "  namespaces: {}", r.namespaces.join(" "));
        for p in &r.pairs {
            let _ = writeln!(
                s,
                "  pair {}: server {} in {}, client {} in {}",
                p.index, p.server_addr, p.server_ns, p.client_addr, p.client_ns
            );
        }
        let _ = writeln!(s, "  built with:");
        for c in &r.commands {
            let _ = writeln!(s, "    {c}");
        }
    }
    s
}

fn down(a: LabDownArgs) -> anyhow::Result<ExitCode> {
    let Opened { lab, up, stale } = open_lab()?;
    let chosen: Vec<&Record> = up
        .iter()
        .filter(|r| a.all || a.config.as_deref() == Some(r.name.as_str()))
        .collect();
    if let (Some(name), true) = (&a.config, chosen.is_empty()) {
        // Left behind by a killed command: removed above already.
        let own = format!("{}{name}-", linkperf_lab::addresses::PREFIX);
        if stale
            .iter()
            .any(|s| &s.name == name || s.name.starts_with(&own))
        {
            eprintln!("linkperf lab: {name} is down");
            return Ok(ExitCode::SUCCESS);
        }
        return Err(lab_error(LabError::NotUp(name.clone())));
    }
    let mut failed = false;
    for r in chosen {
        match lab.down(r) {
            Ok(()) => eprintln!("linkperf lab: {} is down", r.name),
            Err(e) => {
                failed = true;
                eprintln!("linkperf lab: error: failed to take {} down: {e}", r.name);
            }
        }
    }
    if a.all {
        // Anything with the lab's prefix that appeared meanwhile.
        let rest: Vec<String> = lab
            .namespaces()
            .map_err(lab_error)?
            .into_iter()
            .filter(|n| n.starts_with(linkperf_lab::addresses::PREFIX))
            .collect();
        if let Err(e) = lab.remove_namespaces(&rest) {
            failed = true;
            eprintln!("linkperf lab: error: failed to {e}");
        }
        eprintln!("linkperf lab: nothing is up");
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

// ---------------------------------------------------------------------------
// lab run
// ---------------------------------------------------------------------------

/// The result files of one configuration.
fn result_files(dir: &Path, name: &str, pairs: u32) -> (PathBuf, Vec<PathBuf>) {
    let all = dir.join(format!("{name}.json"));
    let per_pair = if pairs > 1 {
        (1..=pairs)
            .map(|k| dir.join(format!("{name}-pair{k}.json")))
            .collect()
    } else {
        vec![all.clone()]
    };
    (all, per_pair)
}

/// The suite options the user gave, for `linkperf suite`.
fn suite_options(a: &LabRunArgs) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(d) = a.duration {
        v.extend([
            "--duration".into(),
            humantime::format_duration(d).to_string(),
        ]);
    }
    if let Some(d) = a.warmup {
        v.extend(["--warmup".into(), humantime::format_duration(d).to_string()]);
    }
    if let Some(r) = a.repeat {
        v.extend(["--repeat".into(), r.to_string()]);
    } else {
        // Enough runs to judge a difference: 3 at least, unless told.
        v.extend([
            "--min-repeat".into(),
            a.min_repeat.unwrap_or(LAB_MIN_REPEAT).to_string(),
        ]);
    }
    if let Some(t) = &a.target_ci {
        v.extend(["--target-ci".into(), t.clone()]);
    }
    if let Some(m) = a.max_repeat {
        v.extend(["--max-repeat".into(), m.to_string()]);
    }
    if let Some(r) = a.retry_suspect {
        v.extend(["--retry-suspect".into(), r.to_string()]);
    }
    if let Some(m) = &a.max_loss {
        v.extend(["--max-loss".into(), m.clone()]);
    }
    v.extend(["--placement".into(), a.placement.to_string()]);
    v
}

fn run(a: LabRunArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    // Everything is checked before anything is created.
    let configs = catalog(a.file.as_deref())?
        .resolve_list(&a.configs.join(","))
        .map_err(lab_error)?;
    let base = base_config(a.base.as_deref(), configs.iter().map(|c| c.name.as_str()))?;
    let topologies = configs
        .iter()
        .map(|c| Topology::build(c, a.pairs))
        .collect::<Result<Vec<_>, _>>()
        .map_err(lab_error)?;
    let exe = std::env::current_exe().context("failed to find the linkperf executable")?;
    let planned_runs = check_suite(&exe, &a)?;
    let lab = preflight()?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| usage(format!("failed to create {}: {e}", a.out.display())))?;
    let dir = a
        .out
        .canonicalize()
        .with_context(|| format!("failed to resolve {}", a.out.display()))?;
    for t in &topologies {
        let (all, pairs) = result_files(&dir, &t.config.name, a.pairs);
        if a.resume {
            continue;
        }
        if let Some(f) = std::iter::once(&all).chain(&pairs).find(|f| f.exists()) {
            return Err(usage(format!(
                "{} exists: continue the lab run that wrote it with --resume, or choose another --out",
                f.display()
            )));
        }
    }
    let Opened { lab, up, .. } = clean_stale(lab)?;
    if let Some(r) = up.iter().find(|r| configs.iter().any(|c| c.name == r.name)) {
        return Err(lab_error(LabError::AlreadyUp {
            name: r.name.clone(),
            detail: "brought up earlier".into(),
        }));
    }
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)
        .with_context(|| format!("failed to create {}", logs.display()))?;

    // Ctrl-C (or SIGTERM): the suites are interrupted, then the configuration
    // is taken down; a second one kills the suites at once.
    let interrupts = Arc::new(AtomicUsize::new(0));
    {
        let i = interrupts.clone();
        ctrlc::set_handler(move || {
            i.fetch_add(1, Ordering::AcqRel);
        })
        .context("failed to install the Ctrl-C handler")?;
    }

    let ctx = RunContext {
        exe: &exe,
        args: &a,
        dir: &dir,
        logs: &logs,
        interrupts: &interrupts,
        command_line: &command_line,
    };
    let (done, mut failures) = match a.order {
        Order::Interleaved if topologies.len() > 1 => {
            ctx.interleaved(&lab, &topologies, planned_runs)
        }
        _ => ctx.sequential(&lab, &topologies),
    };
    if interrupts.load(Ordering::Acquire) > 0 {
        eprintln!(
            "linkperf lab: interrupted; everything the lab brought up is down. Results so far are in {}; continue with: {}",
            dir.display(),
            crate::save::resume_command(&command_line, &a.out)
        );
        return Ok(ExitCode::from(1));
    }
    if let Err(e) = report(&exe, &dir, &done, base.as_deref()) {
        failures += 1;
        eprintln!("linkperf lab: error: {e:#}");
    }
    if failures > 0 {
        eprintln!(
            "linkperf lab: {} did not run cleanly; see above and {}",
            crate::table::count(failures as u64, "configuration"),
            logs.display()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

impl RunContext<'_> {
    /// One configuration after another: each brought up, run through with the
    /// whole suite, taken down. The configurations run and the failures.
    fn sequential(
        &self,
        lab: &Lab<Host>,
        topologies: &[Topology],
    ) -> (Vec<(String, PathBuf)>, usize) {
        let mut done: Vec<(String, PathBuf)> = Vec::new();
        let mut failures = 0usize;
        for t in topologies {
            if self.interrupts.load(Ordering::Acquire) > 0 {
                break;
            }
            let name = &t.config.name;
            eprintln!("linkperf lab: {}: bringing it up", t.describe());
            let guard = match lab.up(t, lab.this_process()) {
                Ok(g) => g,
                Err(e) => {
                    failures += 1;
                    eprintln!("linkperf lab: error: failed to bring {name} up: {e}");
                    continue;
                }
            };
            let outcome = self.through(t);
            if let Err(e) = guard.down() {
                eprintln!("linkperf lab: error: failed to take {name} down: {e}");
                failures += 1;
            } else {
                eprintln!("linkperf lab: {name}: taken down");
            }
            match outcome {
                Ok(ok) => {
                    if !ok {
                        failures += 1;
                    }
                    done.push((name.clone(), self.dir.join(format!("{name}.json"))));
                }
                Err(e) => {
                    failures += 1;
                    eprintln!("linkperf lab: error: {name}: {e:#}");
                }
            }
        }
        (done, failures)
    }

    /// Every configuration up at once; run `k` of the suite's order on each
    /// configuration in turn, starting with configuration `k mod n` (ABC,
    /// BCA, CAB, ...), so that drift over the suite's minutes lands on every
    /// configuration alike.
    fn interleaved(
        &self,
        lab: &Lab<Host>,
        topologies: &[Topology],
        planned_runs: usize,
    ) -> (Vec<(String, PathBuf)>, usize) {
        let mut failures = 0usize;
        let mut guards = Vec::new();
        for t in topologies {
            eprintln!("linkperf lab: {}: bringing it up", t.describe());
            match lab.up(t, lab.this_process()) {
                Ok(g) => guards.push(g),
                Err(e) => {
                    eprintln!(
                        "linkperf lab: error: failed to bring {} up: {e}",
                        t.config.name
                    );
                    for g in guards {
                        let _ = g.down();
                    }
                    return (Vec::new(), 1);
                }
            }
        }
        let mut running = Vec::new();
        let started = (|| -> anyhow::Result<()> {
            for t in topologies {
                let servers = Children(
                    t.pairs
                        .iter()
                        .map(|p| self.serve(&t.config.name, p))
                        .collect::<anyhow::Result<_>>()?,
                );
                running.push(servers);
            }
            Ok(())
        })();
        let n = topologies.len();
        if let Err(e) = started {
            eprintln!("linkperf lab: error: {e:#}");
            failures += 1;
        } else {
            eprintln!(
                "linkperf lab: running suite {} through {n} configurations at once, interleaved: {} each, every run on each configuration in turn",
                self.args.suite,
                crate::table::count(planned_runs as u64, "run")
            );
            // With --target-ci a configuration may need fewer runs than
            // planned: it says so, and the rounds end when all have.
            let mut finished = vec![false; n];
            'rounds: for k in 0..planned_runs {
                for j in 0..n {
                    if self.interrupts.load(Ordering::Acquire) > 0 {
                        break 'rounds;
                    }
                    let c = (k + j) % n;
                    if finished[c] {
                        continue;
                    }
                    let t = &topologies[c];
                    match self.step(t) {
                        Ok(Step::Ran) => {}
                        Ok(Step::Done) => finished[c] = true,
                        Ok(Step::Failed) => failures += 1,
                        Err(e) => {
                            failures += 1;
                            eprintln!("linkperf lab: error: {}: {e:#}", t.config.name);
                        }
                    }
                }
                if finished.iter().all(|f| *f) {
                    break;
                }
            }
        }
        drop(running);
        let mut done = Vec::new();
        if self.interrupts.load(Ordering::Acquire) == 0 {
            for t in topologies {
                match self.finish(t) {
                    Ok(()) => done.push((
                        t.config.name.clone(),
                        self.dir.join(format!("{}.json", t.config.name)),
                    )),
                    Err(e) => {
                        failures += 1;
                        eprintln!("linkperf lab: error: {}: {e:#}", t.config.name);
                    }
                }
            }
        }
        for (t, g) in topologies.iter().zip(guards) {
            if let Err(e) = g.down() {
                eprintln!(
                    "linkperf lab: error: failed to take {} down: {e}",
                    t.config.name
                );
                failures += 1;
            } else {
                eprintln!("linkperf lab: {}: taken down", t.config.name);
            }
        }
        (done, failures)
    }

    /// The next run of the suite through configuration `t` (its servers
    /// running): one `linkperf suite --step 1` per pair, at once. True when
    /// every pair's run went without failure.
    fn step(&self, t: &Topology) -> anyhow::Result<Step> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let (_, files) = result_files(self.dir, name, n);
        let mut suites = Children(Vec::new());
        for (p, file) in t.pairs.iter().zip(&files) {
            suites
                .0
                .push(self.suite_with(name, p, file, n, &["--resume", "--step", "1"])?);
        }
        let codes = self.wait_codes(&mut suites.0)?;
        let done = i32::from(crate::suite::STEP_NOTHING_LEFT);
        Ok(if codes.iter().all(|c| *c == Some(done)) {
            Step::Done
        } else if codes.iter().all(|c| *c == Some(0) || *c == Some(done)) {
            Step::Ran
        } else {
            Step::Failed
        })
    }

    /// After the last run: the pairs' aggregate and the link records.
    fn finish(&self, t: &Topology) -> anyhow::Result<()> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let (all, files) = result_files(self.dir, name, n);
        if let Some(missing) = files.iter().find(|f| !f.exists()) {
            anyhow::bail!(
                "no results were written ({}); see {}",
                missing.display(),
                self.logs.display()
            );
        }
        self.record(t, &all, &files)
    }
}

/// `linkperf suite SUITE --dry-run` with the user's options: a wrong suite or
/// option is a usage error before anything is brought up.
/// Returns how many runs the suite's order has.
fn check_suite(exe: &Path, a: &LabRunArgs) -> anyhow::Result<usize> {
    let out = Command::new(exe)
        .args(["suite", &a.suite, "--dry-run"])
        .args(suite_options(a))
        .stdin(Stdio::null())
        .output()
        .context("failed to run linkperf suite --dry-run")?;
    if out.status.success() {
        // "N tests × R runs = T runs, ..."
        let text = String::from_utf8_lossy(&out.stdout);
        return text
            .lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(" = ")?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .ok_or_else(|| {
                anyhow::anyhow!("linkperf suite --dry-run did not say how many runs: {text}")
            });
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(usage(format!(
        "suite {} cannot run: {}",
        a.suite,
        err.trim().trim_start_matches("linkperf: error: ")
    )))
}

struct RunContext<'a> {
    exe: &'a Path,
    args: &'a LabRunArgs,
    dir: &'a Path,
    logs: &'a Path,
    interrupts: &'a AtomicUsize,
    command_line: &'a [String],
}

/// Children killed when dropped (servers, or suites on an error path).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl RunContext<'_> {
    /// Runs the suite through the configuration that is up; records the link.
    /// `Ok(false)`: it ran, but some suite reported failures.
    fn through(&self, t: &Topology) -> anyhow::Result<bool> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let servers = Children(
            t.pairs
                .iter()
                .map(|p| self.serve(name, p))
                .collect::<anyhow::Result<_>>()?,
        );
        let (_, files) = result_files(self.dir, name, n);
        let mut suites = Children(Vec::new());
        for (p, file) in t.pairs.iter().zip(&files) {
            // Resuming, a file that was started goes on where it stopped.
            let resume: &[&str] = if self.args.resume && file.exists() {
                &["--resume"]
            } else {
                &[]
            };
            suites.0.push(self.suite_with(name, p, file, n, resume)?);
        }
        eprintln!(
            "linkperf lab: {name}: running suite {} over {}",
            self.args.suite,
            crate::table::count(n as u64, "pair")
        );
        let ok = self.wait(&mut suites.0)?;
        drop(servers);
        self.finish(t)?;
        Ok(ok)
    }

    /// The results of configuration `t`'s pairs (`files`) aggregated into
    /// `all` when there are several, and the link recorded in each.
    fn record(&self, t: &Topology, all: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
        let name = &t.config.name;
        // How the configuration is, while it is still up: its links, queues
        // (their counters after the tests), offloads and sysctls.
        let namespaces = linkperf_lab::snapshot(&Host, t);
        if files.len() > 1 {
            let docs = files
                .iter()
                .map(|f| ResultsDocument::load(f))
                .collect::<Result<Vec<_>, _>>()
                .context("failed to read a pair's results")?;
            let labels: Vec<String> = (1..=docs.len()).map(|k| format!("pair{k}")).collect();
            let agg = aggregate(name, self.command_line, &docs, &labels)?;
            agg.save(all)
                .with_context(|| format!("failed to write {}", all.display()))?;
            for f in files {
                LinkRecord::for_pair(t)
                    .with_context(self.command_line, namespaces.clone())
                    .add_to_file(f)?;
            }
            // Their suites ran quietly into logs: each pair's figures and the sum here.
            crate::emit(&linkperf_lab::pairs_table(name, &agg, &docs))?;
        }
        LinkRecord::for_all(t)
            .with_context(self.command_line, namespaces)
            .add_to_file(all)?;
        eprintln!("linkperf lab: {name}: results in {}", all.display());
        Ok(())
    }

    /// `linkperf serve` inside pair `p`'s server namespace, once it listens.
    fn serve(&self, name: &str, p: &Pair) -> anyhow::Result<Child> {
        let log = self.logs.join(format!("{name}-serve{}.log", p.index));
        let mut cmd = netns_command(
            &p.server_ns,
            self.exe,
            &["serve".into(), "--listen".into(), p.server_addr.to_string()],
        );
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                File::create(&log)
                    .with_context(|| format!("failed to create {}", log.display()))?,
            )
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("failed to start linkperf serve in {}", p.server_ns))?;
        let deadline = Instant::now() + SERVE_READY;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("listening on") {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                anyhow::bail!(
                    "linkperf serve in {} exited ({status}): {}",
                    p.server_ns,
                    text.trim()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!(
                    "linkperf serve in {} did not listen within {SERVE_READY:?}: {}",
                    p.server_ns,
                    text.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `linkperf suite` inside pair `p`'s client namespace, writing `file`,
    /// with `extra` arguments.
    fn suite_with(
        &self,
        name: &str,
        p: &Pair,
        file: &Path,
        pairs: u32,
        extra: &[&str],
    ) -> anyhow::Result<Child> {
        let label = if pairs > 1 {
            format!("{name}-pair{}", p.index)
        } else {
            name.to_string()
        };
        let mut args: Vec<String> = vec![
            "suite".into(),
            self.args.suite.clone(),
            "--server".into(),
            p.server_addr.to_string(),
            "--out".into(),
            file.display().to_string(),
            "--label".into(),
            label.clone(),
            // The lab says how to continue, not each suite.
            "--by-lab".into(),
        ];
        args.extend(suite_options(self.args));
        args.extend(extra.iter().map(|a| a.to_string()));
        if pairs > 1 {
            args.push("--quiet".into());
            // The pairs load one host together: each pair's host noise is the
            // others' traffic, judged on the aggregate; and a retry would put
            // one pair out of step with the others.
            args.push("--shared-host".into());
        }
        let mut cmd = netns_command(&p.client_ns, self.exe, &args);
        cmd.stdin(Stdio::null()).process_group(0);
        if pairs > 1 {
            // One log per pair: on the terminal they would interleave.
            let log = self.logs.join(format!("{label}.log"));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .with_context(|| format!("failed to create {}", log.display()))?;
            cmd.stdout(f.try_clone()?).stderr(f);
        }
        cmd.spawn()
            .with_context(|| format!("failed to start linkperf suite in {}", p.client_ns))
    }

    /// Waits for every suite; forwards Ctrl-C to them once, kills them on a
    /// second. True when all exited 0.
    fn wait(&self, suites: &mut [Child]) -> anyhow::Result<bool> {
        Ok(self.wait_codes(suites)?.iter().all(|c| *c == Some(0)))
    }

    /// [`wait`](Self::wait), with each suite's exit code (`None`: a signal).
    fn wait_codes(&self, suites: &mut [Child]) -> anyhow::Result<Vec<Option<i32>>> {
        let mut forwarded = 0;
        let mut status = vec![None; suites.len()];
        loop {
            for (c, s) in suites.iter_mut().zip(status.iter_mut()) {
                if s.is_none() {
                    *s = c.try_wait().context("failed to wait for a suite")?;
                }
            }
            if status.iter().all(Option::is_some) {
                return Ok(status.iter().flatten().map(|s| s.code()).collect());
            }
            let seen = self.interrupts.load(Ordering::Acquire);
            if seen > forwarded {
                for (c, s) in suites.iter_mut().zip(&status) {
                    if s.is_none() {
                        if seen == 1 {
                            let _ = interrupt(c.id());
                        } else {
                            let _ = c.kill();
                        }
                    }
                }
                forwarded = seen;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// The configuration `--base` names, checked against the configurations'
/// `names` before anything runs.
fn base_config<'a>(
    base: Option<&str>,
    names: impl Iterator<Item = &'a str> + Clone,
) -> anyhow::Result<Option<String>> {
    let Some(base) = base else { return Ok(None) };
    if names.clone().any(|n| n == base) {
        return Ok(Some(base.to_string()));
    }
    Err(usage(format!(
        "--base {base} is not one of --configs ({})",
        names.collect::<Vec<_>>().join(", ")
    )))
}

/// The comparison: `linkperf compare` when this build has it and there are at
/// least two configurations, else a plain table. The base is `base` when
/// given, else the first configuration; a base without results leaves a
/// plain table (the others are not compared against another base unasked).
fn report(
    exe: &Path,
    dir: &Path,
    done: &[(String, PathBuf)],
    base: Option<&str>,
) -> anyhow::Result<()> {
    let mut done: Vec<&(String, PathBuf)> = done.iter().filter(|(_, f)| f.exists()).collect();
    if done.is_empty() {
        return Ok(());
    }
    let mut comparable = true;
    if let Some(base) = base {
        match done.iter().position(|(n, _)| n == base) {
            Some(i) => {
                let b = done.remove(i);
                done.insert(0, b);
            }
            None => {
                eprintln!("linkperf lab: the base {base} has no results: no comparison, a plain table instead:");
                comparable = false;
            }
        }
    }
    let has_compare = Command::new(exe)
        .args(["compare", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if comparable && has_compare && done.len() >= 2 {
        let out = dir.join("report");
        let status = Command::new(exe)
            .arg("compare")
            .args(done.iter().map(|(_, f)| f))
            .arg("--base")
            .arg(&done[0].1)
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .status()
            .context("failed to run linkperf compare")?;
        if status.success() {
            eprintln!(
                "linkperf lab: comparison (base {}) in {}",
                done[0].0,
                out.join("index.html").display()
            );
            return Ok(());
        }
        eprintln!("linkperf lab: linkperf compare failed ({status}); a plain table instead:");
    }
    let docs = done
        .iter()
        .map(|(n, f)| {
            ResultsDocument::load(f)
                .map(|d| (n.clone(), d))
                .with_context(|| format!("failed to read {}", f.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    crate::emit(&linkperf_lab::throughput_table(&docs))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_one_of_the_configurations() {
        let names = ["veth", "veth-10g", "veth-1g"];
        assert_eq!(base_config(None, names.into_iter()).unwrap(), None);
        assert_eq!(
            base_config(Some("veth-1g"), names.into_iter()).unwrap(),
            Some("veth-1g".to_string())
        );
        let e = base_config(Some("vxlan"), names.into_iter()).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some(), "exit 2");
        assert_eq!(
            e.to_string(),
            "--base vxlan is not one of --configs (veth, veth-10g, veth-1g)"
        );
    }

    #[test]
    fn result_files_per_pair() {
        let (all, pairs) = result_files(Path::new("/o"), "veth", 1);
        assert_eq!(all, Path::new("/o/veth.json"));
        assert_eq!(pairs, [Path::new("/o/veth.json")]);
        let (all, pairs) = result_files(Path::new("/o"), "veth-1g", 2);
        assert_eq!(all, Path::new("/o/veth-1g.json"));
        assert_eq!(
            pairs,
            [
                Path::new("/o/veth-1g-pair1.json"),
                Path::new("/o/veth-1g-pair2.json")
            ]
        );
    }

    #[test]
    fn by_hand_instructions_name_the_namespaces_and_addresses() {
        let t = Topology::build(Catalog::builtin().get("vxlan").unwrap(), 1).unwrap();
        let r = Record {
            name: "vxlan".into(),
            configuration: t.describe(),
            owner: linkperf_lab::Owner::Up,
            namespaces: t.namespaces.clone(),
            pairs: t.pairs.clone(),
            commands: t.command_lines(),
            capacity_bits_per_s: None,
        };
        let s = by_hand(&r, Path::new("/usr/bin/linkperf"));
        assert!(
            s.contains("ip netns exec lp-vxlan-s1 /usr/bin/linkperf serve --listen 198.19.1.1 &"),
            "{s}"
        );
        assert!(
            s.contains("ip netns exec lp-vxlan-c1 /usr/bin/linkperf run --server 198.19.1.1"),
            "{s}"
        );
        assert!(s.contains("linkperf lab down vxlan"), "{s}");
        let l = render_up(&[r]);
        assert!(
            l.starts_with("vxlan  [lab up]  vxlan: vxlan, 1 pair\n"),
            "{l}"
        );
        assert!(l.contains("    ip netns add lp-vxlan-s1\n"), "{l}");
        assert_eq!(render_up(&[]), "linkperf lab: nothing is up\n");
    }
}
