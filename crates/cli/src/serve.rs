//! `linkperf serve`: the daemon.

use std::net::SocketAddr;
use std::process::ExitCode;

use linkperf_session::{Daemon, DaemonConfig};

use crate::args::ServeArgs;
use crate::UsageError;

/// Serves until killed.
pub fn serve(a: ServeArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let addr = SocketAddr::new(a.listen, a.port);
    let mut cfg = DaemonConfig::new(addr);
    cfg.max_duration = a.max_duration;
    cfg.max_sessions = a.max_sessions;
    cfg.max_users = a.max_users;
    cfg.command_line = command_line;
    cfg.log = !a.quiet;
    if a.max_sessions == 0 {
        return Err(UsageError("--max-sessions must be at least 1".into()).into());
    }
    let daemon = Daemon::bind(cfg).map_err(|e| UsageError(format!("failed to {e}")))?;
    let bound = daemon.local_addr();
    if !a.listen.is_loopback() {
        eprintln!("linkperf serve: WARNING: listening on {bound}, beyond loopback, with no authentication: anyone who can reach this port can make this host send traffic");
    }
    eprintln!(
        "linkperf serve: listening on {bound} (control protocol v{})",
        linkperf_wire_version()
    );
    daemon.serve();
    Ok(ExitCode::SUCCESS)
}

fn linkperf_wire_version() -> u32 {
    1
}
