//! Bringing configurations up and down on a [`System`]: preflight, the
//! inventory of what is up and stale, bring-up that cleans up after itself
//! when a command fails, and tear-down.

use std::path::{Path, PathBuf};

use crate::inventory::{
    classify, parse_link_names, parse_netns_list, parse_pids, parse_start_time, ObjectKind, Owner,
    Record, Stale, Survey,
};
use crate::sys::System;
use crate::{preflight, Cmd, LabError, Topology};

/// Where the lab keeps its records: a tmpfs, emptied at boot like the
/// namespaces it describes.
pub const STATE_DIR: &str = "/run/linkperf-lab";

/// The lab's lock, in the state directory: held while a configuration is
/// claimed, while stale objects are found and removed, and while a
/// configuration is taken down (never while a configuration runs).
const LOCK_FILE: &str = ".lock";

/// The lock a `lab run` holds from before its first configuration comes up
/// until its last is down: two runs at once on one host would bring up the
/// same namespace names, and measure each other's load besides.
const RUNS_LOCK_FILE: &str = ".runs.lock";

/// The lab on one host.
#[derive(Debug)]
pub struct Lab<S: System> {
    sys: S,
    state_dir: PathBuf,
}

impl<S: System> Lab<S> {
    /// The lab on `sys`, its records in [`STATE_DIR`].
    pub fn new(sys: S) -> Self {
        Lab::with_state_dir(sys, STATE_DIR)
    }

    /// The lab on `sys`, its records in `dir`.
    pub fn with_state_dir(sys: S, dir: impl Into<PathBuf>) -> Self {
        Lab {
            sys,
            state_dir: dir.into(),
        }
    }

    /// The system it runs on.
    pub fn system(&self) -> &S {
        &self.sys
    }

    /// Fails, naming everything missing, unless this process may create
    /// namespaces and links and `ip` and `tc` are installed.
    pub fn preflight(&self) -> Result<(), LabError> {
        let status = self
            .sys
            .read(Path::new("/proc/self/status"))
            .map_err(|e| format!("read /proc/self/status: {e}"));
        let missing = preflight::missing(
            status.as_deref().map_err(Clone::clone),
            self.sys.has_program("ip"),
            self.sys.has_program("tc"),
        );
        if missing.is_empty() {
            Ok(())
        } else {
            Err(LabError::Preflight(missing))
        }
    }

    /// Runs one command; a non-zero exit is an error with its stderr.
    fn run(&self, cmd: &Cmd) -> Result<String, LabError> {
        let fail = |message: String| LabError::Command {
            command: cmd.to_string(),
            message,
        };
        let out = self
            .sys
            .run(cmd.program.name(), &cmd.args)
            .map_err(|e| fail(e.to_string()))?;
        if out.success {
            Ok(out.stdout)
        } else {
            Err(fail(format!("{}: {}", out.status, out.stderr.trim())))
        }
    }

    /// Every network namespace on the host.
    pub fn namespaces(&self) -> Result<Vec<String>, LabError> {
        Ok(parse_netns_list(&self.run(&Cmd::ip("netns list"))?))
    }

    /// Every link in the root namespace.
    pub fn root_links(&self) -> Result<Vec<String>, LabError> {
        Ok(parse_link_names(&self.run(&Cmd::ip("-o link"))?))
    }

    /// The owner that stands for this process.
    pub fn this_process(&self) -> Owner {
        let pid = self.sys.pid();
        Owner::Process {
            pid,
            start_time: self.start_time(pid).unwrap_or(0),
        }
    }

    fn start_time(&self, pid: u32) -> Option<u64> {
        let stat = self
            .sys
            .read(&PathBuf::from(format!("/proc/{pid}/stat")))
            .ok()?;
        parse_start_time(&stat)
    }

    fn alive(&self, owner: &Owner) -> bool {
        match *owner {
            Owner::Up => true,
            Owner::Process { pid, start_time } => self.start_time(pid) == Some(start_time),
        }
    }

    /// The lab's lock, held until the value is dropped. Not re-entrant: no
    /// method called while it is held may take it again.
    fn lock(&self) -> Result<S::Lock, LabError> {
        let path = self.state_dir.join(LOCK_FILE);
        self.sys.lock(&path).map_err(|e| LabError::Io {
            what: format!("lock {}", path.display()),
            source: e,
        })
    }

    /// The lock of a `lab run`, held until the value is dropped: taken at
    /// once when no other run holds it, else after `waiting` was called,
    /// when the other run ends (or dies: the kernel releases it).
    pub fn hold_for_run(&self, waiting: impl FnOnce()) -> Result<S::Lock, LabError> {
        let path = self.state_dir.join(RUNS_LOCK_FILE);
        let io = |e| LabError::Io {
            what: format!("lock {}", path.display()),
            source: e,
        };
        if let Some(held) = self.sys.try_lock(&path).map_err(io)? {
            return Ok(held);
        }
        waiting();
        self.sys.lock(&path).map_err(io)
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.state_dir.join(format!("{name}.json"))
    }

    fn records(&self) -> Result<Vec<Result<Record, String>>, LabError> {
        let names = self
            .sys
            .list_dir(&self.state_dir)
            .map_err(|e| LabError::Io {
                what: format!("list {}", self.state_dir.display()),
                source: e,
            })?;
        let mut out = Vec::new();
        for n in names {
            let Some(stem) = n.strip_suffix(".json").filter(|_| !n.starts_with('.')) else {
                continue;
            };
            let rec = self
                .sys
                .read(&self.state_dir.join(&n))
                .ok()
                .and_then(|t| serde_json::from_str::<Record>(&t).ok())
                .filter(|r| r.name == stem);
            out.push(rec.ok_or_else(|| stem.to_string()));
        }
        Ok(out)
    }

    fn save(&self, record: &Record) -> Result<(), LabError> {
        let path = self.record_path(&record.name);
        let text = serde_json::to_string_pretty(record).expect("records serialize");
        self.sys.write(&path, &text).map_err(|e| LabError::Io {
            what: format!("write {}", path.display()),
            source: e,
        })
    }

    fn forget(&self, name: &str) -> Result<(), LabError> {
        let path = self.record_path(name);
        self.sys.remove(&path).map_err(|e| LabError::Io {
            what: format!("remove {}", path.display()),
            source: e,
        })
    }

    /// What is up and what is stale.
    pub fn survey(&self) -> Result<Survey, LabError> {
        let namespaces = self.namespaces()?;
        let links = self.root_links()?;
        let records = self.records()?;
        Ok(classify(&namespaces, &links, records, |o| self.alive(o)))
    }

    /// Under the lab's lock: what is up and what is stale; `report` is told
    /// the stale objects before they are removed ([`Lab::clean`]). Holding the
    /// lock keeps another lab command from claiming a stale configuration's
    /// name between the survey and the clean-up.
    pub fn remove_stale(&self, report: impl FnOnce(&[Stale])) -> Result<Survey, LabError> {
        let _lock = self.lock()?;
        let survey = self.survey()?;
        if !survey.stale.is_empty() {
            report(&survey.stale);
            self.clean(&survey.stale)?;
        }
        Ok(survey)
    }

    /// Removes stale objects: kills what runs in the namespaces, deletes them,
    /// deletes root links, forgets records. Goes on past failures and reports
    /// them all.
    pub fn clean(&self, stale: &[Stale]) -> Result<(), LabError> {
        let mut failures = Vec::new();
        let namespaces: Vec<String> = stale
            .iter()
            .filter(|s| s.kind == ObjectKind::Namespace)
            .map(|s| s.name.clone())
            .collect();
        if let Err(LabError::Teardown(f)) = self.remove_namespaces(&namespaces) {
            failures.extend(f);
        }
        for s in stale {
            let r = match s.kind {
                ObjectKind::Namespace => Ok(()),
                ObjectKind::Link => self
                    .run(&Cmd::ip(&format!("link del {}", s.name)))
                    .map(drop),
                ObjectKind::Record => self.forget(&s.name),
            };
            if let Err(e) = r {
                failures.push(e.to_string());
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(LabError::Teardown(failures))
        }
    }

    /// Kills every process in each namespace that exists, then deletes the
    /// namespaces (their links go with them), last created first.
    pub fn remove_namespaces(&self, names: &[String]) -> Result<(), LabError> {
        let existing = self.namespaces()?;
        let present: Vec<&String> = names
            .iter()
            .rev()
            .filter(|n| existing.contains(n))
            .collect();
        let mut failures = Vec::new();
        let me = self.sys.pid();
        for ns in &present {
            match self.run(&Cmd::ip(&format!("netns pids {ns}"))) {
                Ok(text) => {
                    for pid in parse_pids(&text).into_iter().filter(|p| *p != me) {
                        // Gone already is fine: the namespace is what matters.
                        let _ = self.sys.kill(pid);
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        for ns in present {
            if let Err(e) = self.run(&Cmd::ip(&format!("netns del {ns}"))) {
                failures.push(e.to_string());
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(LabError::Teardown(failures))
        }
    }

    /// Brings `topology` up for `owner`. The configuration is claimed under
    /// the lab's lock: its record is written there, before the first
    /// namespace is created, so a process killed half-way leaves objects the
    /// next command finds stale, and a second bring-up of the same name
    /// (another `lab up` at the same moment) finds the record and is refused
    /// without touching anything. If a command fails, whatever was created is
    /// removed again and the error names the command. The returned guard
    /// takes it down when dropped.
    pub fn up(&self, topology: &Topology, owner: Owner) -> Result<Up<'_, S>, LabError> {
        let record = {
            let _lock = self.lock()?;
            self.claim(topology, owner)?
        };
        let guard = Up {
            lab: self,
            record,
            armed: true,
        };
        for cmd in &topology.commands {
            if let Err(e) = self.run(cmd) {
                // Dropping the guard removes what was created.
                let cleanup = guard.down();
                return Err(match cleanup {
                    Ok(()) => e,
                    Err(c) => LabError::Command {
                        command: cmd.to_string(),
                        message: format!("{e}; and then failed to clean up: {c}"),
                    },
                });
            }
        }
        Ok(guard)
    }

    /// Refuses a configuration that is up (any of its namespaces exists, or a
    /// live owner has its record), else writes its record. Called under the
    /// lab's lock, so no other lab command claims the name in between.
    fn claim(&self, topology: &Topology, owner: Owner) -> Result<Record, LabError> {
        let name = &topology.config.name;
        let existing = self.namespaces()?;
        if let Some(ns) = topology.namespaces.iter().find(|n| existing.contains(n)) {
            return Err(LabError::AlreadyUp {
                name: name.clone(),
                detail: format!("namespace {ns} exists"),
            });
        }
        if let Some(Ok(r)) = self
            .records()?
            .into_iter()
            .find(|r| matches!(r, Ok(r) if &r.name == name))
        {
            if self.alive(&r.owner) {
                let by = match r.owner {
                    Owner::Up => "it was left up".to_string(),
                    Owner::Process { pid, .. } => format!("process {pid} keeps it up"),
                };
                return Err(LabError::AlreadyUp {
                    name: name.clone(),
                    detail: format!("the lab has a record of it: {by}"),
                });
            }
        }
        // A record whose owner is gone is stale: replacing it is safe here.
        let record = Record {
            name: name.clone(),
            configuration: topology.describe(),
            owner,
            namespaces: topology.namespaces.clone(),
            pairs: topology.pairs.clone(),
            commands: topology.command_lines(),
            capacity_bits_per_s: topology.capacity().map(|c| c.as_f64()),
        };
        self.save(&record)?;
        Ok(record)
    }

    /// Takes down a configuration the lab has up (its namespaces and record).
    /// Done under the lab's lock, so that no other lab command sees its
    /// namespaces without their record half-way and takes them for stale.
    pub fn down(&self, record: &Record) -> Result<(), LabError> {
        let _lock = self.lock()?;
        let r = self.remove_namespaces(&record.namespaces);
        let f = self.forget(&record.name);
        r.and(f)
    }
}

/// A configuration that is up; taken down when dropped unless kept.
#[derive(Debug)]
pub struct Up<'a, S: System> {
    lab: &'a Lab<S>,
    record: Record,
    armed: bool,
}

impl<S: System> Up<'_, S> {
    /// What is up.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Leaves it up, owned by `lab up` until `lab down`.
    pub fn keep(mut self) -> Result<Record, LabError> {
        self.record.owner = Owner::Up;
        self.lab.save(&self.record)?;
        self.armed = false;
        Ok(self.record.clone())
    }

    /// Takes it down now, reporting what could not be removed.
    pub fn down(mut self) -> Result<(), LabError> {
        self.armed = false;
        self.lab.down(&self.record)
    }
}

impl<S: System> Drop for Up<'_, S> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.lab.down(&self.record);
        }
    }
}

#[cfg(test)]
mod tests;
