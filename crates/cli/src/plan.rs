//! Turning validated arguments into a plan: the test spec, both sides'
//! placement, where the server is. Nothing here runs anything.

use linkperf_measured::ProcessMethod;
use linkperf_session::{parse_address, AuthKey, RunRequest, Target};
use linkperf_workload::profile::{
    check_runnable, load_profile_warned, profile_spec, split_by_host,
};
use linkperf_workload::{
    CpuList, OfferedLoad, Placement, Protocol, Side, SocketOptions, TestSpec, Threads,
};

use crate::args::{PlacementArgs, RunArgs, TargetArgs};

/// Everything `linkperf run` will do.
pub struct RunPlan {
    /// The test and both sides' workers.
    pub request: RunRequest,
    /// The server, or `None` for the embedded one.
    pub target: Option<Target>,
    /// `--profile`: the profile split by the remote hosts its groups name
    /// (one part, with or without a host, for most profiles).
    pub profile_parts: Vec<(Option<String>, TestSpec)>,
}

/// Number of CPUs this process may use.
pub fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// The server from `--server`/`--port` with the key of `--auth-key`, or `None`
/// for the embedded one. An address that cannot be one, a list of servers
/// (for `run` only, see [`run_target`]) or a key file that cannot be used is
/// an input error.
pub fn target(t: &TargetArgs) -> anyhow::Result<Option<Target>> {
    if let Some(s) = t.server.as_deref().filter(|s| s.contains(',')) {
        anyhow::bail!(
            "--server {s}: a suite runs against one server; a list of servers (h1,h2) is for \
             `linkperf run`"
        );
    }
    run_target(t)
}

/// [`target`] for `linkperf run`, whose `--server` may be a comma-separated
/// list: every address in it is checked.
pub fn run_target(t: &TargetArgs) -> anyhow::Result<Option<Target>> {
    if let Some(s) = &t.server {
        for address in s.split(',') {
            parse_address(address, t.port).map_err(|e| anyhow::anyhow!("--server: {e}"))?;
        }
    }
    let auth_key = t.auth_key.as_deref().map(AuthKey::from_file).transpose()?;
    Ok(t.server.as_ref().map(|s| Target {
        address: s.clone(),
        default_port: t.port,
        auth_key,
    }))
}

/// Per-test placement settings that may override the command line's.
#[derive(Debug, Clone, Default)]
pub struct PlacementOverrides {
    /// Client workers.
    pub threads: Option<u32>,
    /// Server workers.
    pub server_threads: Option<u32>,
    /// Client CPUs.
    pub affinity: Option<CpuList>,
    /// Server CPUs.
    pub server_affinity: Option<CpuList>,
    /// Busy polling.
    pub busy_poll: Option<bool>,
}

/// Both sides' placement: overrides first, then the command line, then defaults.
/// CPU lists are checked against this host where it runs them.
pub fn placements(
    p: &PlacementArgs,
    o: &PlacementOverrides,
    embedded: bool,
) -> anyhow::Result<(Placement, Placement)> {
    let threads = o.threads.or(p.threads);
    let server_threads = o.server_threads.or(p.server_threads);
    for (what, n) in [("--threads", threads), ("--server-threads", server_threads)] {
        if let Some(n) = n.filter(|&n| n == 0 || n > 1024) {
            anyhow::bail!("{what} must be between 1 and 1024, got {n}");
        }
    }
    let threads = Threads::Count(threads.unwrap_or_else(default_threads));
    // A server elsewhere runs one worker per CPU of its own host unless told
    // otherwise; the embedded one shares this host.
    let server_threads = match server_threads {
        Some(n) => Threads::Count(n),
        None if embedded => Threads::Count(default_threads()),
        None => Threads::ServerDefault,
    };
    let affinity = o.affinity.clone().or_else(|| p.affinity.clone());
    let server_affinity = o
        .server_affinity
        .clone()
        .or_else(|| p.server_affinity.clone());
    // CPUs of this host can be checked now; a remote server checks its own.
    let allowed = linkperf_metrics::current_thread_allowed_cpus();
    let local_lists = [
        ("--affinity", affinity.as_ref()),
        (
            "--server-affinity",
            server_affinity.as_ref().filter(|_| embedded),
        ),
    ];
    for (what, list) in local_lists {
        if let Some(bad) = list.and_then(|l| {
            l.0.iter()
                .find(|c| !allowed.is_empty() && !allowed.contains(c))
        }) {
            anyhow::bail!(
                "{what}: CPU {bad} is not available here (usable CPUs: {})",
                CpuList(allowed.clone())
            );
        }
    }
    let busy_poll = o.busy_poll.unwrap_or(p.busy_poll);
    let policy = p.placement.unwrap_or_default();
    // Conflicting flags on the command line; a suite's per-test CPU lists
    // simply win over it.
    if !policy.is_free() && p.affinity.is_some() && p.server_affinity.is_some() {
        anyhow::bail!(
            "--placement {policy} has no effect: --affinity and --server-affinity place both \
             sides (give one of them, or leave --placement out)"
        );
    }
    let mut client = Placement {
        threads,
        affinity,
        busy_poll,
        policy,
    };
    let mut server = Placement {
        threads: server_threads,
        affinity: server_affinity,
        busy_poll,
        policy,
    };
    // Each side settles the policy against its own host's CPUs: this one for
    // the client, and for the server when it is embedded; a server elsewhere
    // settles its own.
    client.settle(Side::Client, &allowed);
    if embedded {
        server.settle(Side::Server, &allowed);
    }
    Ok((client, server))
}

/// How the client's process CPU is taken: by thread when the server shares the process.
pub fn process_method(embedded: bool) -> ProcessMethod {
    if embedded {
        ProcessMethod::RusageThreadSum
    } else {
        ProcessMethod::RusageSelf
    }
}

/// A profile as `run --profile` or a suite file runs it: the whole, and
/// the parts for the remote hosts its groups name (one part for most).
pub struct ProfilePlan {
    /// The whole profile's spec, for the record.
    pub whole: TestSpec,
    /// Each remote host (`None`: the server of the command line) and its groups.
    pub parts: Vec<(Option<String>, TestSpec)>,
}

/// Reads a profile and checks that it can run.
pub fn plan_profile(
    path: &std::path::Path,
    vars: &[(String, String)],
) -> anyhow::Result<ProfilePlan> {
    let (profile, warnings) = load_profile_warned(path, vars).map_err(|e| {
        let hint = e
            .unset_variable()
            .map(|v| format!(" or with --var {v}=value"))
            .unwrap_or_default();
        anyhow::anyhow!("{e}{hint}")
    })?;
    // What linkperf accepts but ignores or does differently from uperf:
    // never in silence.
    for w in &warnings {
        eprintln!("linkperf: warning: {}: {w}", path.display());
    }
    let in_file =
        |e: linkperf_workload::profile::ProfileError| anyhow::anyhow!("{}: {e}", path.display());
    check_runnable(&profile).map_err(in_file)?;
    linkperf_engine::program::compile(&profile)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let parts: Vec<(Option<String>, TestSpec)> = split_by_host(&profile)
        .map_err(in_file)?
        .into_iter()
        .map(|(h, p)| (h, profile_spec(p)))
        .collect();
    let whole = profile_spec(profile);
    whole.validate()?;
    Ok(ProfilePlan { whole, parts })
}

/// A Unix-socket test needs its server on this host: refused when `--server`
/// (each of a list) is not an address of this host. One that does not
/// resolve fails when it is connected to.
pub fn unix_reaches(spec: &TestSpec, target: Option<&Target>) -> anyhow::Result<()> {
    let (Protocol::Unix, Some(t)) = (spec.protocol, target) else {
        return Ok(());
    };
    for address in t.address.split(',').map(str::trim) {
        let one = Target {
            address: address.to_string(),
            ..t.clone()
        };
        if one.is_this_host() == Some(false) {
            anyhow::bail!(
                "--protocol unix needs the server on this host, and {address} is not an \
                 address of this host: Unix sockets do not cross hosts (use tcp or udp)"
            );
        }
    }
    Ok(())
}

/// An open-loop test runs against one server: its schedule's checks are
/// the one client's.
pub fn open_loop_runs(spec: &TestSpec, target: Option<&Target>) -> anyhow::Result<()> {
    if spec.offered.is_none() {
        return Ok(());
    }
    if target.is_some_and(|t| t.address.contains(',')) {
        anyhow::bail!("--offered runs against one server; --server names several");
    }
    Ok(())
}

/// What this host must have for `spec`'s data sockets: its congestion
/// control (the server checks its own host).
pub fn usable_here(spec: &TestSpec) -> anyhow::Result<()> {
    if let Some(cc) = &spec.socket.cc {
        linkperf_metrics::check_congestion_control(cc)
            .map_err(|e| anyhow::anyhow!("--cc {cc}: on this host, {e}"))?;
    }
    Ok(())
}

/// Builds the plan of `linkperf run`; errors are usage errors.
pub fn plan_run(a: &RunArgs, command_line: Vec<String>) -> anyhow::Result<RunPlan> {
    let mut profile_parts = Vec::new();
    let spec = if let Some(path) = &a.profile {
        let plan = plan_profile(path, &a.vars)?;
        profile_parts = plan.parts;
        plan.whole
    } else {
        let mut spec = TestSpec::new(a.workload.clone(), a.protocol, a.users, a.duration);
        spec.warmup = a.warmup;
        spec.udp_timeout = a.udp_timeout;
        spec.rate = a.rate;
        spec.offered = a.offered.map(|rate| OfferedLoad {
            rate,
            arrival: a.arrival,
            max_outstanding: a.max_outstanding,
        });
        if let Some(default) = spec.stream_rate() {
            // Recorded as it runs, the default included.
            spec.rate.get_or_insert(default);
        }
        spec.socket = SocketOptions {
            nodelay: a.nodelay,
            sndbuf: a.sndbuf,
            rcvbuf: a.rcvbuf,
            cc: a.cc.clone(),
            mss: a.mss,
        };
        spec
    };
    spec.validate()?;
    usable_here(&spec)?;
    if let Some(s) = &a.iperf3_server {
        parse_address(s, linkperf_iperf3::DEFAULT_PORT)
            .map_err(|e| anyhow::anyhow!("--iperf3-server: {e}"))?;
    }
    let target = run_target(&a.target)?;
    unix_reaches(&spec, target.as_ref())?;
    open_loop_runs(&spec, target.as_ref())?;
    // A profile that names its hosts runs on their servers, not an embedded one.
    let embedded = target.is_none() && profile_parts.iter().all(|(host, _)| host.is_none());
    let (client, server) = placements(&a.placement, &PlacementOverrides::default(), embedded)?;
    Ok(RunPlan {
        request: RunRequest {
            spec,
            client,
            server,
            process_method: process_method(embedded),
            cancel: None,
            command_line,
            live: None,
        },
        target,
        profile_parts,
    })
}
