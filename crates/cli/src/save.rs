//! Saving results so that nothing measured is lost: room kept for them
//! before anything runs, each run printed before it is saved, and a fallback
//! file (its path printed) when a save fails anyway.

use std::path::{Path, PathBuf};

use anyhow::Context;
use linkperf_results::{save_fallback, ResultsDocument, SpaceReserve};

/// Where a command's results document goes.
pub struct Saver {
    out: PathBuf,
    reserve: Option<SpaceReserve>,
    fallback: Option<PathBuf>,
    history: Option<crate::history::Recorder>,
}

impl Saver {
    /// Saves to `out`, with room kept there for `bytes` more. Fails (before
    /// anything runs) when the file system has not that room.
    pub fn new(out: &Path, bytes: u64) -> anyhow::Result<Saver> {
        let reserve = SpaceReserve::new(out, bytes)
            .map_err(|e| crate::UsageError(format!("cannot write {}: {e}", out.display())))?;
        Ok(Saver {
            out: out.to_path_buf(),
            reserve: Some(reserve),
            fallback: None,
            history: None,
        })
    }

    /// Saves to `out` without room kept (a file written once, after the
    /// others), falling back as [`Saver::save`] does.
    pub fn unreserved(out: &Path) -> Saver {
        Saver {
            out: out.to_path_buf(),
            reserve: None,
            fallback: None,
            history: None,
        }
    }

    /// Records every save's new runs into `history` too (`--history DB`).
    pub fn with_history(mut self, history: Option<crate::history::Recorder>) -> Saver {
        self.history = history;
        self
    }

    /// Saves `doc`: to `out` in the room kept; if that fails, to a fallback
    /// file, said on stderr, where every later save goes too.
    pub fn save(&mut self, doc: &ResultsDocument) -> anyhow::Result<()> {
        if let Some(f) = &self.fallback {
            doc.save(f)
                .with_context(|| format!("failed to save results to {}", f.display()))?;
            if let Some(h) = &mut self.history {
                h.record(doc, f);
            }
            return Ok(());
        }
        let saved = match &self.reserve {
            Some(r) => r.save(doc, &self.out),
            None => doc.save(&self.out),
        };
        if let Err(e) = saved {
            let f = save_fallback(doc, &self.out).with_context(|| {
                format!(
                    "failed to save results to {} ({e}) or to a fallback file",
                    self.out.display()
                )
            })?;
            eprintln!(
                "linkperf: could not save the results to {} ({e}); they are in {} instead, and so are the next runs'",
                self.out.display(),
                f.display()
            );
            self.reserve = None;
            self.fallback = Some(f);
        }
        if let Some(h) = &mut self.history {
            let at = self.fallback.as_deref().unwrap_or(&self.out);
            h.record(doc, at);
        }
        Ok(())
    }

    /// Where the document is now: `out`, or the fallback file.
    pub fn path(&self) -> &Path {
        self.fallback.as_deref().unwrap_or(&self.out)
    }

    /// Whether a save went to the fallback file.
    pub fn fell_back(&self) -> bool {
        self.fallback.is_some()
    }
}

/// `args` as one shell command line, each argument quoted where it needs to be.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command that resumes a suite started as `command_line`, its results
/// now in `out`: the same command with `--out out` and `--resume`.
/// The command that runs `command_line` again keeping its results in `out`:
/// the same arguments with `--out OUT` added.
pub fn save_command(command_line: &[String], out: &Path) -> String {
    let mut args: Vec<String> = command_line.to_vec();
    if let Some(first) = args.first_mut() {
        if first.ends_with("linkperf") {
            *first = "linkperf".into();
        }
    }
    args.extend(["--out".into(), out.display().to_string()]);
    shell_line(&args)
}

pub fn resume_command(command_line: &[String], out: &Path) -> String {
    let mut args: Vec<String> = Vec::new();
    let mut skip = false;
    for a in command_line {
        if skip {
            skip = false;
            continue;
        }
        if a == "--out" {
            skip = true;
            continue;
        }
        if a.starts_with("--out=") || a == "--resume" {
            continue;
        }
        args.push(a.clone());
    }
    if let Some(first) = args.first_mut() {
        // The program as the user typed it may be a path; `linkperf` is the program.
        if first.ends_with("linkperf") {
            *first = "linkperf".into();
        }
    }
    args.extend(["--out".into(), out.display().to_string(), "--resume".into()]);
    shell_line(&args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_command_is_the_same_command_with_resume() {
        let cl: Vec<String> = [
            "/usr/bin/linkperf",
            "suite",
            "my study.toml",
            "--out",
            "a.json",
            "--repeat",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            resume_command(&cl, Path::new("/tmp/a.1.json")),
            "linkperf suite 'my study.toml' --repeat 3 --out /tmp/a.1.json --resume"
        );
        let cl: Vec<String> = ["linkperf", "suite", "q", "--out=x.json", "--resume"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            resume_command(&cl, Path::new("x.json")),
            "linkperf suite q --out x.json --resume"
        );
        assert_eq!(shell_line(&["it's".into()]), r"'it'\''s'");
    }
}
