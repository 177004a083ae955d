//! `linkperf lab`: emulated network configurations in network namespaces.
//!
//! `lab run` brings the configurations up (all at once, interleaved; one
//! after another with `--order sequential`), starts `linkperf serve` inside
//! each server namespace, runs `linkperf suite` from each client namespace,
//! records the link in the results, tears them down, and finally compares
//! the configurations. `lab up`, `lab list` and `lab down` manage
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

mod run;

use run::run;

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
    /// Bring every configuration up, run a suite through them interleaved (run by run, the order rotating; --order sequential: one configuration's whole suite after another's), take them down; then compare them.
    Run(Box<LabRunArgs>),
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
    /// Also record each configuration's runs (their aggregate with --pairs) into this
    /// history (an SQLite file or a postgres:// URL) once its results file is complete.
    #[arg(long, value_name = "DB")]
    pub history: Option<String>,
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
        LabError::Option(_) | LabError::ConfigFile { .. } | LabError::Preflight(_) => {
            usage(format!("failed to use the lab: {e}"))
        }
        LabError::AlreadyUp { ref name, .. } => usage(format!(
            "failed to use the lab: {e} with `linkperf lab down {name}`"
        )),
        LabError::NotUp(_) => usage(format!(
            "failed to use the lab: {e} (`linkperf lab list` shows what is)"
        )),
        other => anyhow::Error::new(other),
    }
}

/// Runs a lab subcommand.
pub fn lab(a: LabArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    match a.command {
        LabCommand::Run(r) => run(*r, command_line),
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

#[cfg(test)]
mod tests {
    use super::run::{base_config, result_files};
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
