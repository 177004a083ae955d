//! Why a history operation failed.

use thiserror::Error;

/// Why the history could not be opened, written or read.
///
/// Every message reads after "failed to …" and names the database or the
/// file concerned.
#[derive(Debug, Error)]
pub enum HistoryError {
    /// The SQLite file could not be opened or used.
    #[error("use the history database {db}: {detail}")]
    Sqlite {
        /// The database's path.
        db: String,
        /// What SQLite said.
        detail: String,
    },
    /// The PostgreSQL server could not be reached or refused a statement.
    #[error("use the history database {db}: {detail}")]
    Postgres {
        /// The database's URL, without its password.
        db: String,
        /// What the server or the client said.
        detail: String,
    },
    /// The file is a database, but not a linkperf history.
    #[error("open the history database {db}: it is not a linkperf history ({detail})")]
    Foreign {
        /// The database.
        db: String,
        /// What was found instead.
        detail: String,
    },
    /// The database was written by a newer linkperf.
    #[error("open the history database {db}: its schema is version {found}, newer than this build's {known}; use a newer linkperf")]
    NewerSchema {
        /// The database.
        db: String,
        /// The schema version found.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// A results file could not be read.
    #[error("import {0}")]
    Results(#[from] linkperf_results::ResultsError),
    /// A run of a results file cannot be placed in a series.
    #[error("import {origin}: test {test} run {run}: {detail}")]
    Run {
        /// The file.
        origin: String,
        /// The test's name.
        test: String,
        /// The run's number.
        run: u32,
        /// What is wrong.
        detail: String,
    },
    /// A value read back from the database is not what the schema says.
    #[error("read the history database {db}: {detail}")]
    Corrupt {
        /// The database.
        db: String,
        /// What was found.
        detail: String,
    },
}
