//! `linkperf serve`: the daemon.
//!
//! It serves until SIGINT or SIGTERM; then running tests are aborted (their
//! clients are told, and keep what they measured) and it exits within 5 s.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkperf_session::{AuthKey, Daemon, DaemonConfig};

use crate::args::ServeArgs;
use crate::UsageError;

/// Smallest `--max-frame`: the largest message a client sends (a test request)
/// must fit.
const MIN_FRAME: u64 = 4 * 1024;

/// How long, after the daemon's own sessions have ended, `serve` waits for its
/// iperf3 tests to end at a signal: each notices within a tenth of a second,
/// then keeps its streams open up to a second for its client to read
/// SERVER_TERMINATE.
const IPERF3_GRACE: Duration = Duration::from_secs(3);

/// The daemon's settings from `serve`'s flags, each checked.
fn daemon_config(a: &ServeArgs, command_line: Vec<String>) -> anyhow::Result<DaemonConfig> {
    let usage = |m: String| -> anyhow::Error { UsageError(m).into() };
    if a.max_sessions == 0 {
        return Err(usage("--max-sessions must be at least 1".into()));
    }
    if a.max_handshakes == 0 {
        return Err(usage("--max-handshakes must be at least 1".into()));
    }
    if a.max_connections == 0 {
        return Err(usage("--max-connections must be at least 1".into()));
    }
    for (flag, t) in [
        ("--handshake-timeout", a.handshake_timeout),
        ("--control-timeout", a.control_timeout),
        ("--start-timeout", a.start_timeout),
    ] {
        if t.is_zero() {
            return Err(usage(format!("{flag} must be more than 0")));
        }
    }
    let max_frame = usize::try_from(a.max_frame)
        .ok()
        .filter(|n| (MIN_FRAME..=u64::from(u32::MAX)).contains(&(*n as u64)))
        .ok_or_else(|| {
            usage(format!(
                "--max-frame must be between 4k and 4g - 1 bytes, got {}",
                a.max_frame
            ))
        })?;
    let auth_key = a
        .auth_key
        .as_deref()
        .map(AuthKey::from_file)
        .transpose()
        .map_err(|e| usage(format!("failed to {:#}", anyhow::Error::from(e))))?;

    let addr = SocketAddr::new(a.listen, a.port);
    let mut cfg = DaemonConfig::new(addr);
    cfg.max_duration = a.max_duration;
    cfg.max_sessions = a.max_sessions;
    cfg.max_handshakes = a.max_handshakes;
    cfg.max_users = a.max_users;
    cfg.max_connections = a.max_connections;
    cfg.max_bytes_per_session = (a.max_bytes_per_session > 0).then_some(a.max_bytes_per_session);
    cfg.max_frame = max_frame;
    cfg.handshake_timeout = a.handshake_timeout;
    cfg.control_timeout = a.control_timeout;
    cfg.start_timeout = a.start_timeout;
    cfg.auth_key = auth_key;
    cfg.command_line = command_line;
    cfg.log = !a.quiet;
    // Every control connection and every data connection is a descriptor:
    // as many as the host lets this process have, and the tests' budget is
    // what that leaves after the control connections' share.
    let wanted = a.max_handshakes as u64 + a.max_sessions as u64 + 3 * a.max_connections + 256;
    let _ = linkperf_metrics::raise_fd_limit(wanted);
    for (flag, v) in [
        ("--max-threads", a.max_threads),
        ("--max-descriptors", a.max_descriptors),
        ("--max-memory", a.max_memory),
    ] {
        if v == Some(0) {
            return Err(usage(format!("{flag} must be more than 0")));
        }
    }
    cfg.budget = linkperf_session::Budget::of_host(
        a.max_connections,
        linkperf_session::control_descriptors(a.max_handshakes, a.max_sessions),
        linkperf_session::Overrides {
            threads: a.max_threads,
            descriptors: a.max_descriptors,
            memory_bytes: a.max_memory,
        },
    );
    if cfg.budget.descriptors == 0 {
        return Err(usage(format!(
            "the open-file limit ({}) leaves no descriptors for tests after {} for control connections: raise it (ulimit -n) or lower --max-handshakes",
            linkperf_metrics::fd_limit().unwrap_or(0),
            linkperf_session::control_descriptors(a.max_handshakes, a.max_sessions)
        )));
    }
    cfg.setting_name = Some(setting_flag);
    // An agent of a mesh says who it is (LINKPERF_NODE, LINKPERF_NETWORK,
    // LINKPERF_ZONE), whatever else it serves.
    let identity = linkperf_measured::AgentIdentity::from_env();
    cfg.identity = (!identity.is_empty()).then_some(identity);

    Ok(cfg)
}

/// Serves until SIGINT or SIGTERM.
pub fn serve(a: ServeArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let usage = |m: String| -> anyhow::Error { UsageError(m).into() };
    let cfg = daemon_config(&a, command_line)?;
    let authenticated = cfg.auth_key.is_some();
    let identity = cfg.identity.clone().unwrap_or_default();
    let daemon = Daemon::bind(cfg).map_err(|e| usage(format!("failed to {e}")))?;
    let bound = daemon.local_addr();
    if !a.listen.is_loopback() && !authenticated {
        eprintln!(
            "linkperf serve: WARNING: listening on {bound}, beyond loopback, with no authentication: \
             anyone who can reach this port can make this host send traffic (up to the limits); \
             give --auth-key FILE to require a pre-shared key (docs/security.md)"
        );
    }
    // Stock iperf3 clients on their own port, beside the control port (docs/iperf3.md).
    let _iperf3 = if a.iperf3 {
        let mut c = linkperf_iperf3::ServerConfig::new(SocketAddr::new(a.listen, a.iperf3_port));
        c.max_duration = a.max_duration;
        c.max_tests = a.max_sessions;
        c.max_total_streams = usize::try_from(a.max_connections).unwrap_or(usize::MAX);
        c.handshake_timeout = a.handshake_timeout;
        c.log = !a.quiet;
        let s = linkperf_iperf3::Iperf3Server::bind(c)
            .map_err(|e| UsageError(format!("failed to {e}")))?;
        eprintln!(
            "linkperf serve: serving iperf3 clients on {} (TCP and UDP; iperf3 clients are never authenticated)",
            s.local_addr()
        );
        Some(s.spawn().map_err(|e| anyhow::anyhow!("failed to {e}"))?)
    } else {
        None
    };
    // The history's latest figures for Prometheus (docs/history.md).
    if let Some(addr) = a.metrics {
        let bound = crate::history::metrics::spawn(addr, &a.history)?;
        eprintln!(
            "linkperf serve: metrics of the history {} on http://{bound}/metrics",
            a.history
        );
    }
    // SIGINT/SIGTERM: both servers stop at once; running tests, linkperf's
    // and iperf3's, end as aborted and their clients are told.
    let shutdown = daemon.shutdown_handle();
    let terminator = _iperf3.as_ref().map(|s| s.terminator());
    ctrlc::set_handler(move || {
        if let Some(t) = &terminator {
            t.terminate();
        }
        shutdown.shutdown()
    })
    .context("failed to install the SIGINT/SIGTERM handler")?;
    eprintln!(
        "linkperf serve: listening on {bound} (control protocol v{}{}{})",
        linkperf_protocol::PROTOCOL_VERSION,
        if authenticated {
            ", clients must authenticate; delegated tests from them are run toward agents that prove the key"
        } else {
            ""
        },
        agent_words(&identity)
    );
    let summary = daemon.serve();
    // The iperf3 tests were told at the signal; a moment for them to end.
    let iperf3_aborted = _iperf3
        .as_ref()
        .map_or(0, |s| s.wait_tests(Instant::now() + IPERF3_GRACE));
    eprintln!(
        "linkperf serve: shut down; {} aborted{}",
        crate::table::count(
            (summary.aborted_tests + iperf3_aborted) as u64,
            "running test"
        ),
        if summary.abandoned_sessions > 0 {
            format!(
                ", {} still ending {} dropped",
                crate::table::count(summary.abandoned_sessions as u64, "session"),
                if summary.abandoned_sessions == 1 {
                    "was"
                } else {
                    "were"
                }
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The `serve` flag of a setting a session's message points to.
fn setting_flag(setting: linkperf_session::Setting) -> &'static str {
    use linkperf_session::Setting as S;
    match setting {
        S::Limit(kind) => limit_flag(kind),
        S::ControlTimeout => "--control-timeout",
        S::HandshakeTimeout => "--handshake-timeout",
        S::MaxFrame => "--max-frame",
        S::AuthKey => "--auth-key",
    }
}

/// The `serve` flag that sets a limit: named beside a refusal in the log.
pub fn limit_flag(kind: linkperf_protocol::LimitKind) -> &'static str {
    use linkperf_protocol::LimitKind as K;
    match kind {
        K::Users => "--max-users",
        K::DurationS => "--max-duration",
        K::Threads => "--max-threads",
        K::Descriptors => "--max-descriptors",
        K::MemoryBytes => "--max-memory",
        K::Connections => "--max-connections",
        K::Sessions => "--max-sessions",
        K::BytesPerSession => "--max-bytes-per-session",
    }
}

/// `, agent n1 (pod network, zone z1)`, or nothing for a daemon that is no agent.
fn agent_words(id: &linkperf_measured::AgentIdentity) -> String {
    if id.is_empty() {
        return String::new();
    }
    let mut extra = Vec::new();
    if let Some(n) = &id.network {
        extra.push(format!("{n} network"));
    }
    if let Some(z) = &id.zone {
        extra.push(format!("zone {z}"));
    }
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(" ({})", extra.join(", "))
    };
    format!(
        ", agent {}{extra}",
        id.node.as_deref().unwrap_or("of an unnamed node")
    )
}
