use thiserror::Error;

/// Why a side of a test could not run.
#[derive(Debug, Error)]
pub enum EngineError {
    /// Creating, binding or listening on a data socket failed.
    #[error("set up data sockets: {0}")]
    Setup(String),
    /// A data connection could not be made.
    #[error("connect data flows: {0}")]
    Connect(String),
    /// Pinning a worker to its CPUs failed.
    #[error("pin workers: {0}")]
    Affinity(String),
    /// A worker thread could not be started or died.
    #[error("run worker threads: {0}")]
    Worker(String),
    /// The test was aborted before it could start.
    #[error("test aborted before it started")]
    Aborted,
}
