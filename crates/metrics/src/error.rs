use thiserror::Error;

/// Why a measurement could not be set up.
#[derive(Debug, Error)]
pub enum MetricsError {
    /// No CPUs were given to pin a thread to.
    #[error("cannot pin a thread to an empty CPU list")]
    EmptyCpuList,
    /// sched_setaffinity refused the CPUs.
    #[error("cannot pin the thread to CPU {cpus}: {source} (online CPUs: {online})")]
    Affinity {
        /// The CPUs asked for, as a list (`0-3,6`).
        cpus: String,
        /// The host's online CPUs, as a list, or `unknown`.
        online: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// RLIMIT_NOFILE could not be read or set.
    #[error("cannot {action} the open-file limit (RLIMIT_NOFILE): {source}")]
    Rlimit {
        /// `read` or `set`.
        action: &'static str,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// The open-file limit cannot reach what is needed.
    #[error(
        "open-file limit too low: {wanted} descriptors are needed but the soft limit is {soft} \
         and the hard limit {hard}; {hint}"
    )]
    FdLimit {
        /// Descriptors needed.
        wanted: u64,
        /// The soft limit now in force.
        soft: u64,
        /// The hard limit now in force.
        hard: u64,
        /// How to raise it.
        hint: String,
    },
    /// This host's TCP cannot use a congestion control.
    #[error("congestion control '{name}' {why} ({has})")]
    CongestionControl {
        /// The algorithm asked for.
        name: String,
        /// Why: not available, not allowed, ...
        why: String,
        /// The ones the host has.
        has: String,
    },
}
