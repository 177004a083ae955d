//! `--history DB` on `run`, `suite`, `lab run` and `mesh`: each run
//! recorded into the history as its results file is saved. The history is
//! an index of the files: a failure to record says so, names the file, and
//! how to import it later, and never fails the command or loses a run.

use std::collections::HashMap;
use std::path::Path;

use linkperf_history::{record_of, History};
use linkperf_results::ResultsDocument;

use crate::UsageError;

/// Records runs into a history as their document is saved.
pub struct Recorder {
    db: String,
    history: Option<History>,
    /// Per test, the runs recorded so far (a document's runs are appended).
    recorded: HashMap<String, usize>,
}

/// Opens the history `db` (creating an SQLite file, bringing the schema up
/// to date), before anything runs: a database that cannot be used is a
/// usage error, found at once.
pub fn open(db: &str) -> anyhow::Result<History> {
    History::open(db).map_err(|e| UsageError(format!("--history {db}: failed to {e}")).into())
}

impl Recorder {
    /// A recorder into `db`, opened now.
    pub fn new(db: &str) -> anyhow::Result<Recorder> {
        Ok(Recorder {
            db: db.to_string(),
            history: Some(open(db)?),
            recorded: HashMap::new(),
        })
    }

    /// A recorder when `db` is given.
    pub fn maybe(db: Option<&str>) -> anyhow::Result<Option<Recorder>> {
        db.map(Recorder::new).transpose()
    }

    /// A recorder into `db` that opens it at its first record: for a command
    /// that checked the history at its start and records much later (`lab
    /// run`), where a history gone meanwhile must not fail it.
    pub fn later(db: &str) -> Recorder {
        Recorder {
            db: db.to_string(),
            history: None,
            recorded: HashMap::new(),
        }
    }

    /// Records the runs of `doc` (saved at `file`) not recorded before; a
    /// failure is said on stderr, with the command that imports the file
    /// later.
    pub fn record(&mut self, doc: &ResultsDocument, file: &Path) {
        let origin = file.display().to_string();
        let mut records = Vec::new();
        let mut counts = Vec::new();
        for test in &doc.tests {
            let done = self.recorded.get(&test.name).copied().unwrap_or(0);
            for run in test.runs.iter().skip(done) {
                match record_of(doc, test, run, &origin) {
                    Ok(r) => records.push(r),
                    Err(e) => {
                        self.warn(&format!("{e}"), file);
                        return;
                    }
                }
            }
            counts.push((test.name.clone(), test.runs.len()));
        }
        if records.is_empty() {
            return;
        }
        let history = match self.history.take() {
            Some(h) => Ok(h),
            None => History::open(&self.db),
        };
        // After a failure the connection is dropped: the next save opens the
        // history again (a server back up) and records what is missing.
        match history.and_then(|mut h| {
            h.import_records(&[(origin.clone(), records)])?;
            self.history = Some(h);
            Ok(())
        }) {
            Ok(()) => self.recorded.extend(counts),
            Err(e) => self.warn(&format!("failed to {e}"), file),
        }
    }

    fn warn(&self, what: &str, file: &Path) {
        eprintln!(
            "linkperf: could not record into the history {}: {what}; the runs are in {}: import them later with: linkperf history import {} --db {}",
            self.db,
            file.display(),
            crate::save::shell_line(&[file.display().to_string()]),
            crate::save::shell_line(std::slice::from_ref(&self.db)),
        );
    }
}
