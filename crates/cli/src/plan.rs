//! Turning validated arguments into a plan: the test spec, both sides'
//! placement, where the server is. Nothing here runs anything.

use linkperf_metrics::ProcessMethod;
use linkperf_session::{RunRequest, Target};
use linkperf_workload::{CpuList, Placement, SocketOptions, TestSpec};

use crate::args::RunArgs;

/// Everything `linkperf run` will do.
pub struct RunPlan {
    /// The test and both sides' workers.
    pub request: RunRequest,
    /// The server, or `None` for the embedded one.
    pub target: Option<Target>,
}

/// Number of CPUs this process may use.
pub fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Builds the plan; errors are usage errors.
pub fn plan_run(a: &RunArgs, command_line: Vec<String>) -> anyhow::Result<RunPlan> {
    let mut spec = TestSpec::new(a.workload.clone(), a.protocol, a.users, a.duration);
    spec.warmup = a.warmup;
    spec.udp_timeout = a.udp_timeout;
    spec.socket = SocketOptions {
        nodelay: a.nodelay,
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        cc: a.cc.clone(),
        mss: a.mss,
    };
    spec.validate()?;
    let threads = a.threads.unwrap_or_else(default_threads);
    let server_threads = a.server_threads.unwrap_or_else(default_threads);
    for (what, n) in [("--threads", threads), ("--server-threads", server_threads)] {
        if n == 0 || n > 1024 {
            anyhow::bail!("{what} must be between 1 and 1024, got {n}");
        }
    }
    let embedded = a.server.is_none();
    // CPUs of this host can be checked now; a remote server checks its own.
    let allowed = linkperf_metrics::current_thread_allowed_cpus();
    let local_lists = [
        ("--affinity", a.affinity.as_ref()),
        (
            "--server-affinity",
            a.server_affinity.as_ref().filter(|_| embedded),
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
    let client = Placement {
        threads,
        affinity: a.affinity.clone(),
        busy_poll: a.busy_poll,
    };
    let server = Placement {
        threads: server_threads,
        affinity: a.server_affinity.clone(),
        busy_poll: a.busy_poll,
    };
    let process_method = if embedded {
        ProcessMethod::RusageThreadSum
    } else {
        ProcessMethod::RusageSelf
    };
    let target = a.server.as_ref().map(|s| Target {
        address: s.clone(),
        default_port: a.port,
    });
    Ok(RunPlan {
        request: RunRequest {
            spec,
            client,
            server,
            process_method,
            cancel: None,
            command_line,
        },
        target,
    })
}
