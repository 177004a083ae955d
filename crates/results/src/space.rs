//! Nothing measured is lost to a full disk. Before a run or a suite starts,
//! room for what it will write is taken in the results file's directory (a
//! hidden file of that size, written for real so that the file system has
//! given the blocks); each save gives that room up for its own write and
//! takes back what is left (written beside its place and moved there whole,
//! so the room is either held or not). Another writer filling the disk in
//! the moment between a save and the room taken back can still take it:
//! then a later save fails, and a save that fails goes to a fallback file
//! elsewhere, whose path the caller prints. No run is lost either way.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{ResultsDocument, ResultsError};

/// What one run adds to a results document at most, before its per-flow
/// counts and per-second samples: its figures, checks and both sides'
/// reports with their histograms.
const RUN_BYTES: u64 = 48 * 1024;
/// Per user: each side's per-flow counts, compactly encoded.
const USER_BYTES: u64 = 64;
/// Per second of window: each side's sample and the run's.
const SECOND_BYTES: u64 = 1024;

/// A generous bound on what `runs` runs of `users` users over `window_s`
/// seconds each add to a results document, bytes.
pub fn run_bytes(runs: u64, users: u64, window_s: f64) -> u64 {
    let seconds = window_s.max(1.0).ceil() as u64;
    runs.saturating_mul(RUN_BYTES + users.saturating_mul(USER_BYTES) + seconds * SECOND_BYTES)
}

/// Room held beside a results file.
#[derive(Debug)]
pub struct SpaceReserve {
    path: PathBuf,
    /// Where the room is written before it is moved to `path`: the room is
    /// there under `path` whole or not at all.
    taking: PathBuf,
    bytes: u64,
}

impl SpaceReserve {
    /// Takes `bytes` in the directory of `out`, twice over (a save writes the
    /// new document beside the old one before it replaces it). Fails, saying
    /// how much was needed, when the file system has not that much room.
    pub fn new(out: &Path, bytes: u64) -> Result<SpaceReserve, ResultsError> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = |what: &str| {
            format!(
                ".{}.{}.{what}{}",
                crate::store::temp_stem(out),
                std::process::id(),
                crate::store::TEMP_SUFFIX
            )
        };
        let reserve = SpaceReserve {
            path: dir.join(name("reserve")),
            taking: dir.join(name("reserving")),
            bytes: bytes.saturating_mul(2),
        };
        reserve
            .take(reserve.bytes)
            .map_err(|error| ResultsError::NoRoom {
                dir: dir.to_path_buf(),
                needed: reserve.bytes,
                error,
            })?;
        Ok(reserve)
    }

    /// Writes the hidden file of `bytes`, beside it first: it appears whole.
    fn take(&self, bytes: u64) -> io::Result<()> {
        let written = (|| {
            let mut f = File::create(&self.taking)?;
            let zeros = vec![0u8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                f.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            f.sync_all()?;
            fs::rename(&self.taking, &self.path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&self.taking);
        }
        written
    }

    /// Saves `doc` to `out` in the room held: the room is given up for the
    /// save, then taken back (as much as the disk still has).
    pub fn save(&self, doc: &ResultsDocument, out: &Path) -> Result<(), ResultsError> {
        let _ = fs::remove_file(&self.path);
        let saved = doc.save(out);
        let _ = self.take(self.bytes);
        saved
    }
}

impl Drop for SpaceReserve {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_file(&self.taking);
    }
}

/// Where a document that could not be saved at `out` goes instead: the same
/// name with this process's id, in the first of the system's temporary
/// directory and `/dev/shm` (memory) that takes it. Returns its path.
pub fn save_fallback(doc: &ResultsDocument, out: &Path) -> Result<PathBuf, ResultsError> {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "results".into());
    let name = format!("{stem}.{}.json", std::process::id());
    let mut last = None;
    for dir in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let path = dir.join(&name);
        match doc.save(&path) {
            Ok(()) => return Ok(path),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(ResultsError::MissingDirectory {
        path: out.to_path_buf(),
        dir: std::env::temp_dir(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_held_given_up_for_a_save_and_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        let r = SpaceReserve::new(&out, 100_000).unwrap();
        let held = |d: &Path| -> Vec<(String, u64)> {
            fs::read_dir(d)
                .unwrap()
                .flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().unwrap().len(),
                    )
                })
                .collect()
        };
        let files = held(dir.path());
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(
            files[0].0.starts_with(".r.json.") && files[0].0.ends_with(".reserve.linkperf-tmp")
        );
        assert_eq!(files[0].1, 200_000);
        let doc = ResultsDocument::new("x".into(), vec![]);
        r.save(&doc, &out).unwrap();
        assert!(ResultsDocument::load(&out).is_ok());
        assert_eq!(held(dir.path()).len(), 2, "the document and the room again");
        drop(r);
        assert_eq!(held(dir.path()).len(), 1, "the room goes with the reserve");
    }

    #[test]
    fn a_fallback_is_written_elsewhere_and_loads() {
        let doc = ResultsDocument::new("x".into(), vec![]);
        let p = save_fallback(&doc, Path::new("/nonexistent/dir/out.json")).unwrap();
        assert!(p.file_name().unwrap().to_string_lossy().starts_with("out."));
        assert!(ResultsDocument::load(&p).is_ok());
        let _ = fs::remove_file(p);
    }

    #[test]
    fn a_run_is_bounded_generously() {
        assert_eq!(run_bytes(1, 0, 0.1), RUN_BYTES + SECOND_BYTES);
        assert!(run_bytes(45, 250, 10.0) < 4 << 20);
    }
}
