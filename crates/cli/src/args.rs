//! Command-line arguments as typed, validated values. No I/O here.

use std::net::IpAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use linkperf_workload::{
    Arrival, BitsPerSecond, Bytes, CpuList, PlacementPolicy, Protocol, TransactionsPerSecond,
    Workload,
};

/// Default control port of `linkperf serve`.
pub const DEFAULT_PORT: u16 = 7410;

/// Measure how well a network path carries real workloads.
#[derive(Debug, Parser)]
#[command(name = "linkperf", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve tests to linkperf clients (the daemon).
    Serve(Box<ServeArgs>),
    /// Run one test against a server (or an embedded one on loopback).
    Run(Box<RunArgs>),
    /// Run a suite of tests (a built-in one or a TOML file), repeated, with statistics.
    Suite(Box<SuiteArgs>),
    /// Emulated network configurations in network namespaces.
    Lab(Box<crate::lab::LabArgs>),
    /// A mesh of agents: every agent runs the suite against others, as the plan pairs them.
    Mesh(Box<crate::mesh::MeshArgs>),
    /// Compare results files: a base, then one or more candidates (relative differences, verdicts, charts).
    Compare(Box<crate::compare::CompareArgs>),
    /// Report on one results file: absolute charts and tables.
    Report(Box<crate::compare::ReportArgs>),
    /// The history of every run: import, series, change points, a regression gate, OpenMetrics.
    History(Box<crate::history::HistoryArgs>),
}

/// Every duration option: `30s`, `500ms`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    linkperf_workload::parse_duration(s).map_err(|e| e.to_string())
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse::<Workload>().map_err(|e| e.to_string())
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=VALUE"))?;
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(format!(
            "'{name}' is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    s.parse::<Protocol>().map_err(|e| e.to_string())
}

fn parse_offered(s: &str) -> Result<TransactionsPerSecond, String> {
    linkperf_workload::parse_offered(s).map_err(|e| e.to_string())
}

fn parse_arrival(s: &str) -> Result<Arrival, String> {
    s.parse::<Arrival>().map_err(|e| e.to_string())
}

fn parse_rate(s: &str) -> Result<BitsPerSecond, String> {
    linkperf_workload::parse_udp_rate(s).map_err(|e| e.to_string())
}

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    s.parse::<CpuList>().map_err(|e| e.to_string())
}

pub(crate) fn parse_policy(s: &str) -> Result<PlacementPolicy, String> {
    s.parse::<PlacementPolicy>().map_err(|e| e.to_string())
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    s.parse::<Bytes>()
        .map(|b| b.0)
        .map_err(|e| format!("{e} (examples: 1m, 64k, 1024g)"))
}

fn parse_buffer(s: &str) -> Result<u32, String> {
    let b = s.parse::<Bytes>().map_err(|e| e.to_string())?;
    u32::try_from(b.0)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("buffer size {s} must be between 1 byte and 4 GiB"))
}

/// `linkperf serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback unless given; use 0.0.0.0 or :: to serve other hosts.
    #[arg(long, default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// Control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Longest test accepted (warmup + duration): 1h, 30m, or a bare number of seconds.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub max_duration: Duration,
    /// Most sessions served at once.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// Most users in one test.
    #[arg(long, default_value_t = 20_000)]
    pub max_users: u32,
    /// Most data connections (one per user) of all running tests together.
    #[arg(long, default_value_t = linkperf_session::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: u64,
    /// Most worker threads of all running tests together (default: 8 per CPU this
    /// process may use, at least 16).
    #[arg(long, value_name = "N")]
    pub max_threads: Option<u64>,
    /// Most file descriptors of all running tests together (default: what the
    /// open-file limit leaves after the control connections' share).
    #[arg(long, value_name = "N")]
    pub max_descriptors: Option<u64>,
    /// Most memory of all running tests together, e.g. 4g (default: half the host's
    /// available memory).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_memory: Option<u64>,
    /// Most payload bytes (sent + received by the server) in one session; the server
    /// stops a test that passes it. 0: no limit.
    #[arg(long, default_value = "1024g", value_parser = parse_bytes)]
    pub max_bytes_per_session: u64,
    /// Largest control message accepted (e.g. 1m).
    #[arg(long, default_value = "1m", value_parser = parse_bytes)]
    pub max_frame: u64,
    /// Time a new control connection has to say hello and authenticate; slower ones are
    /// dropped (5s, 500ms, or a bare number of seconds).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Time a session past its handshake may stay silent before its test request (10s,
    /// or a bare number of seconds).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub control_timeout: Duration,
    /// Time a client has, once its test is accepted, to connect its users and start (2m,
    /// or a bare number of seconds).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub start_timeout: Duration,
    /// Most control connections in their handshake at once (a quarter of them from one
    /// address); past it, the oldest is dropped for the new one.
    #[arg(long, default_value_t = linkperf_session::DEFAULT_MAX_HANDSHAKES)]
    pub max_handshakes: usize,
    /// Pre-shared key file: clients must prove they hold the same key (see docs/security.md).
    #[arg(long, env = "LINKPERF_AUTH_KEY_FILE", value_name = "FILE")]
    pub auth_key: Option<std::path::PathBuf>,
    /// Print nothing per session.
    #[arg(long)]
    pub quiet: bool,
    /// Also serve stock iperf3 clients (`iperf3 -c`), beside the control port.
    #[arg(long)]
    pub iperf3: bool,
    /// TCP and UDP port of the iperf3 server.
    #[arg(long, default_value_t = linkperf_iperf3::DEFAULT_PORT, requires = "iperf3")]
    pub iperf3_port: u16,
    /// Serve the history's latest figures as OpenMetrics at http://ADDR/metrics, for
    /// Prometheus (e.g. 0.0.0.0:9470).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The history --metrics reads: an SQLite file or a postgres:// URL.
    #[arg(long, value_name = "DB", default_value = linkperf_history::DEFAULT_DB, requires = "metrics")]
    pub history: String,
}

/// Where the server is.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Server to test against (HOST or HOST:PORT), or a comma-separated list (h1,h2,h3): one
    /// client group per server at once, aggregated. Without it, a server is started in-process
    /// on loopback.
    #[arg(long)]
    pub server: Option<String>,
    /// Control port when --server has none.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Pre-shared key file, to answer a server that requires authentication.
    #[arg(long, env = "LINKPERF_AUTH_KEY_FILE", value_name = "FILE")]
    pub auth_key: Option<std::path::PathBuf>,
}

/// Where each side's event-loop workers run.
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// Client event-loop workers (default: number of CPUs).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Server event-loop workers (default: one per CPU of the server's host; a server
    /// elsewhere counts its own).
    #[arg(long)]
    pub server_threads: Option<u32>,
    /// Pin the client's workers to these CPUs (e.g. 0 or 0-3,6).
    #[arg(long, value_parser = parse_cpus)]
    pub affinity: Option<CpuList>,
    /// Pin the server's workers to these CPUs.
    #[arg(long, value_parser = parse_cpus)]
    pub server_affinity: Option<CpuList>,
    /// Workers on both sides poll without sleeping (removes wake-up cost; burns CPU).
    #[arg(long)]
    pub busy_poll: bool,
    /// Where each side's workers run unless --affinity/--server-affinity say:
    /// split (client on the first half of the host's CPUs, server on the
    /// second; on 2 CPUs client CPU 0, server CPU 1), same (both sides' worker
    /// i on CPU i; one host only), free (the scheduler decides).
    #[arg(long, value_name = "same|split|free", value_parser = parse_policy)]
    pub placement: Option<PlacementPolicy>,
}

/// `linkperf run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the server is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Run against a stock iperf3 server (`iperf3 -s`) at HOST[:PORT] (port 5201
    /// unless given) instead of a linkperf server; stream workloads only.
    // clap prints this comment as the option's help, brackets and all: they
    // are not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "server")]
    pub iperf3_server: Option<String>,
    /// Workload: rr1c-1x1, rr1c-200x1000, rr1c-200x30k, str-readx30k, str-writex30k,
    /// or rr:REQxRESP, crr:REQxRESP, stream-up:SIZE, stream-down:SIZE, stream-bidir:SIZE,
    /// mix:REQxRESP*W,... (request/response, each transaction's sizes drawn from the weighted
    /// entries: mix:200x200*1,200x8k*3). Sizes take k, m (powers of 1024).
    #[arg(long, short, default_value = "rr1c-1x1", value_parser = parse_workload)]
    pub workload: Workload,
    /// Run a uperf profile (XML) instead of a workload: its groups' users run its
    /// transactions' flowops, the server the opposite ones (docs/profiles.md).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["iperf3_server", "workload", "users", "duration", "warmup", "protocol", "rate"]
    )]
    pub profile: Option<std::path::PathBuf>,
    /// A profile variable: `--var h=127.0.0.1` sets `$h` (over the environment's). Repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var, requires = "profile")]
    pub vars: Vec<(String, String)>,
    /// Transport: tcp, udp (request/response, or streams paced at --rate) or unix (same host only).
    #[arg(long, default_value = "tcp", value_parser = parse_protocol)]
    pub protocol: Protocol,
    /// UDP streams: each user's pace in bits per second, as iperf3's -b (100m = 100,000,000
    /// bit/s; k, m, g are powers of 1000); 0: as fast as the socket takes (default: 1m).
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<BitsPerSecond>,
    /// Open loop: transactions offered per second over all users (50k is 50,000; k, m, g
    /// are powers of 1000), each sent when due and timed from then, whatever the answers do.
    /// Request/response workloads only. Default: closed loop (each user's next request goes
    /// when its answer came).
    #[arg(long, value_name = "RATE", value_parser = parse_offered, allow_hyphen_values = true)]
    pub offered: Option<TransactionsPerSecond>,
    /// Open loop: how arrivals are spaced: poisson (exponential gaps) or fixed (evenly).
    #[arg(long, value_name = "poisson|fixed", default_value = "poisson", value_parser = parse_arrival, requires = "offered")]
    pub arrival: Arrival,
    /// Open loop: transactions each connection may have outstanding; an arrival past them
    /// waits (counted late), and one that finds 2 s of arrivals waiting is dropped (counted).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "offered")]
    pub max_outstanding: u32,
    /// Concurrent users, each a flow with its own connection.
    #[arg(long, short, default_value_t = 1)]
    pub users: u32,
    /// Length of the measurement window: 30s, 500ms, 2m, or a bare number of seconds (-d 10).
    #[arg(long, short, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Time before the window, excluded from every metric (2s, 500ms, or a bare number of
    /// seconds; 0 for none).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Where each side's workers run.
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// TCP_NODELAY (default: on for rr/crr, off for streams).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub nodelay: Option<bool>,
    /// SO_SNDBUF on every data socket (e.g. 256k).
    #[arg(long, value_parser = parse_buffer)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF on every data socket.
    #[arg(long, value_parser = parse_buffer)]
    pub rcvbuf: Option<u32>,
    /// TCP congestion control (e.g. cubic, bbr, reno).
    #[arg(long)]
    pub cc: Option<String>,
    /// TCP maximum segment size.
    #[arg(long)]
    pub mss: Option<u32>,
    /// UDP: time after which an unanswered transaction counts as lost (250ms, or a bare
    /// number of seconds).
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub udp_timeout: Duration,
    /// UDP: the run is suspect when more than PCT % of its transactions are lost
    /// (e.g. 1 or 0.5%; default: loss is reported, not judged).
    #[arg(long, value_name = "PCT", value_parser = parse_max_loss)]
    pub max_loss: Option<f64>,
    /// Label of this configuration in the results document.
    #[arg(long, default_value = "linkperf")]
    pub label: String,
    /// Write the results document (JSON) to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Also record the run into this history (an SQLite file or a postgres:// URL) as --json saves it.
    #[arg(long, value_name = "DB", requires = "json")]
    pub history: Option<String>,
    /// A line every D while the test runs, as the client sees it: what it sent and received,
    /// transactions/s and transaction time (request/response), retransmits (TCP), loss (UDP);
    /// the warm-up's seconds marked. Whole seconds (1s, 2s, or a bare number; 0 for none).
    /// Default: 1s when the lines go to a terminal, none otherwise.
    #[arg(long, value_name = "D", value_parser = parse_interval)]
    pub interval: Option<u32>,
    /// Write the test as JSON lines while it runs (start, one interval per second, end;
    /// docs/results-schema.md) to FILE, or with `-` to standard output (the lines and the
    /// table then go to standard error).
    #[arg(long, value_name = "FILE|-")]
    pub json_stream: Option<std::path::PathBuf>,
    /// Print only the results, no progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--interval D`: whole seconds, so that its lines are made of the results'
/// per-second intervals.
fn parse_interval(s: &str) -> Result<u32, String> {
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "{s} is not a whole number of seconds (the lines add up the per-second intervals: 1s, 2s, ...; 0 for none)"
        ));
    }
    u32::try_from(d.as_secs()).map_err(|_| format!("{s} is too long an interval"))
}

/// `linkperf suite`.
#[derive(Debug, Args)]
#[command(mut_arg("server", |a| a.help(
    "Server to test against (HOST or HOST:PORT; one server, a list is for `run`). \
     Without it, a server is started in-process on loopback"
)))]
pub struct SuiteArgs {
    /// A built-in suite (uperf45, tunnel, interconnect, quick) or a suite file (TOML).
    #[arg(required_unless_present = "list")]
    pub suite: Option<String>,
    /// List the built-in suites.
    #[arg(long, conflicts_with_all = ["dry_run", "resume"])]
    pub list: bool,
    /// Print the tests and the time they will take; run nothing (with --resume: also what is left of --out, checked as a resume checks it).
    #[arg(long)]
    pub dry_run: bool,
    /// Where the server is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Where each side's workers run (a suite file may set them per test).
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Label of this configuration in the results document (default: the suite's name).
    #[arg(long)]
    pub label: Option<String>,
    /// Runs of every test (default: the suite's own, 1 for most).
    #[arg(long, conflicts_with = "target_ci")]
    pub repeat: Option<u32>,
    /// Repeat each test until the 95% confidence interval of its mean throughput is
    /// within ± PCT % of the mean (as netperf's -i/-I), between --min-repeat and
    /// --max-repeat runs.
    #[arg(long, value_name = "PCT", value_parser = parse_target_ci)]
    pub target_ci: Option<f64>,
    /// Fewest runs of every test with --target-ci (default 3; alone: at least N runs of
    /// every test, more if the suite file's `repeat` asks more).
    #[arg(long, value_name = "N", conflicts_with = "repeat")]
    pub min_repeat: Option<u32>,
    /// Most runs of every test with --target-ci (default 10).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "repeat",
        requires = "target_ci"
    )]
    pub max_repeat: Option<u32>,
    /// Run each test's repeats back to back instead of the whole matrix once, then again.
    #[arg(long)]
    pub no_interleave: bool,
    /// Run a suspect run again at once, up to N times, before the next test
    /// (default: the suite file's `retry_suspect`, else 2). Retries do not count
    /// toward --repeat; the suspect runs stay in the results, left out of the statistics.
    #[arg(long, value_name = "N")]
    pub retry_suspect: Option<u32>,
    /// UDP: a run is suspect when more than PCT % of its transactions are lost
    /// (default: the suite file's `max_loss`, else loss is reported, not judged).
    #[arg(long, value_name = "PCT", value_parser = parse_max_loss)]
    pub max_loss: Option<f64>,
    /// Other tests run on this host at the same time by design (the lab's --pairs):
    /// host noise is not judged here, and suspect runs are not retried.
    #[arg(long, hide = true)]
    pub shared_host: bool,
    /// Run by `linkperf lab run`: an interrupted suite leaves the hint to
    /// continue to the lab (whose `--resume` continues every file).
    #[arg(long, hide = true)]
    pub by_lab: bool,
    /// Run at most N of the runs still to do (with --resume), then stop without the
    /// table: the lab's interleaving runs one run of each configuration in turn.
    #[arg(long, hide = true, value_name = "N", requires = "resume")]
    pub step: Option<usize>,
    /// The results document, rewritten atomically after every run.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Also record every run into this history (an SQLite file or a postgres:// URL) as --out saves it.
    #[arg(long, value_name = "DB", requires = "out")]
    pub history: Option<String>,
    /// Continue the suite recorded in --out, skipping completed runs.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Measurement window of every test, overriding the suite's: 30s, 500ms, 2m, or a bare
    /// number of seconds (-d 10).
    #[arg(long, short, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Users of every test, overriding the suite's: one count or a list (-u 10, -u 1,10,50);
    /// each workload of the suite runs at each count.
    #[arg(long, short, value_name = "N[,N...]", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub users: Option<Vec<u32>>,
    /// Warmup of every test, overriding the suite's (2s, or a bare number of seconds; 0 for none).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// One plain line per finished run, no progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--target-ci PCT`: a percentage strictly between 0 and 100, kept as a fraction.
fn parse_target_ci(s: &str) -> Result<f64, String> {
    let f = linkperf_workload::parse_percent(s)?;
    if f <= 0.0 || f >= 1.0 {
        return Err(format!("'{s}' is not between 0 and 100 % (exclusive)"));
    }
    Ok(f)
}

/// `--max-loss PCT`: a percentage, kept as a fraction.
fn parse_max_loss(s: &str) -> Result<f64, String> {
    linkperf_workload::parse_percent(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_whole_seconds() {
        assert_eq!(parse_interval("1s"), Ok(1));
        assert_eq!(parse_interval("2"), Ok(2));
        assert_eq!(parse_interval("0"), Ok(0));
        assert_eq!(parse_interval("1m"), Ok(60));
        let e = parse_interval("500ms").unwrap_err();
        assert!(e.contains("whole number of seconds"), "{e}");
    }

    #[test]
    fn profile_variables_are_name_equals_value() {
        assert_eq!(parse_var("h=10.0.0.2"), Ok(("h".into(), "10.0.0.2".into())));
        assert_eq!(parse_var("_n2=a=b"), Ok(("_n2".into(), "a=b".into())));
        assert_eq!(parse_var("x="), Ok(("x".into(), String::new())));
        for (bad, says) in [
            ("novalue", "is not NAME=VALUE"),
            ("=v", "is not a variable name"),
            ("2x=v", "is not a variable name"),
            ("a-b=v", "is not a variable name"),
            ("é=v", "is not a variable name"),
        ] {
            let e = parse_var(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
