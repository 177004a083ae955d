use thiserror::Error;

/// Why the lab refused or failed. Messages read after "failed to …" where they
/// describe an action, and stand alone where they describe bad input.
#[derive(Debug, Error)]
pub enum LabError {
    /// A configuration name, option or list could not be understood.
    #[error("{0}")]
    Option(String),
    /// A custom configuration file could not be read or is invalid.
    #[error("read lab configurations from {path}: {message}")]
    ConfigFile {
        /// The file.
        path: String,
        /// What is wrong, with the line where TOML says.
        message: String,
    },
    /// The host cannot run the lab: what is missing, before anything was created.
    #[error("the lab cannot run on this host: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Preflight(Vec<crate::Missing>),
    /// A command exited with an error or could not be started.
    #[error("run `{command}`: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and what it printed to stderr.
        message: String,
    },
    /// The configuration (or an object with one of its names) is already up.
    #[error("bring up {name}: it is already up ({detail}); take it down first")]
    AlreadyUp {
        /// The configuration's name.
        name: String,
        /// What was found.
        detail: String,
    },
    /// Nothing of that name is up.
    #[error("take down {0}: the lab has nothing of that name up")]
    NotUp(String),
    /// Some objects could not be removed.
    #[error("remove {}", .0.join("; "))]
    Teardown(Vec<String>),
    /// The lab's state directory or a results file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. `write /run/linkperf-lab/veth.json`.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The results of the pairs cannot be aggregated.
    #[error("aggregate the pairs' results: {0}")]
    Aggregate(String),
}
