use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Why a results document could not be saved or read.
///
/// Every message names the file and reads after "failed to …". Operating-system
/// and encoder errors are part of the message rather than a separate cause, so a
/// chain printer shows them once.
#[derive(Debug, Error)]
pub enum ResultsError {
    /// The file system has no room for what a run or suite will write.
    #[error(
        "keep room for the results in {}: {needed} bytes are needed and the file system has not that much ({error})",
        dir.display()
    )]
    NoRoom {
        /// Where the results go.
        dir: std::path::PathBuf,
        /// Bytes needed.
        needed: u64,
        /// What writing them said.
        error: std::io::Error,
    },
    /// The file to read does not exist.
    #[error("read results file {origin}: the file does not exist")]
    NotFound {
        /// The file.
        origin: String,
    },
    /// The file exists but could not be read.
    #[error("read results file {origin}: {error}")]
    Read {
        /// The file.
        origin: String,
        /// What the operating system said (part of the message, not a separate cause).
        error: io::Error,
    },
    /// The file holds nothing but whitespace.
    #[error("read results file {origin}: the file is empty")]
    Empty {
        /// The file.
        origin: String,
    },
    /// The JSON stops before the document is complete.
    #[error("read results file {origin}: the file is truncated (the JSON ends early, at line {line} column {column}); was it written completely?")]
    Truncated {
        /// The file.
        origin: String,
        /// Line where the text ended.
        line: usize,
        /// Column where the text ended.
        column: usize,
    },
    /// The file is not JSON at all.
    #[error("read results file {origin}: the file is not JSON ({detail})")]
    NotJson {
        /// The file.
        origin: String,
        /// The parser's message, with line and column.
        detail: String,
    },
    /// The file is JSON but not a linkperf results document.
    #[error("read results file {origin}: it is not a linkperf results file ({detail})")]
    NotResults {
        /// The file.
        origin: String,
        /// What is missing or different.
        detail: String,
    },
    /// The file was written by a newer linkperf whose schema this build cannot read.
    #[error("read results file {origin}: it was written by a newer linkperf (schema {found}); this build reads {expected}")]
    NewerSchema {
        /// The file.
        origin: String,
        /// The schema named in the file.
        found: String,
        /// The schema this build reads.
        expected: &'static str,
    },
    /// The file names a linkperf results schema this build does not know, and not a newer one.
    #[error("read results file {origin}: unsupported schema {found}; this build reads {expected}")]
    UnsupportedSchema {
        /// The file.
        origin: String,
        /// The schema named in the file.
        found: String,
        /// The schema this build reads.
        expected: &'static str,
    },
    /// The file has the right schema but a field has the wrong type or is missing.
    #[error("read results file {origin}: the document does not have the expected shape: {detail}")]
    Shape {
        /// The file.
        origin: String,
        /// serde's message, with line and column.
        detail: String,
    },
    /// The directory to save into does not exist.
    #[error("save results to {path}: the directory {dir} does not exist")]
    MissingDirectory {
        /// The file to be written.
        path: PathBuf,
        /// Its parent directory.
        dir: PathBuf,
    },
    /// Writing, syncing or renaming the file failed.
    #[error("save results to {path}: could not {step}: {error}")]
    Write {
        /// The file to be written.
        path: PathBuf,
        /// The step that failed, e.g. "create a temporary file in /data".
        step: String,
        /// What the operating system said (part of the message, not a separate cause).
        error: io::Error,
    },
    /// The document could not be turned into JSON.
    #[error("encode results as JSON: {0}")]
    Encode(serde_json::Error),
}
