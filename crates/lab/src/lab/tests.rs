//! The lab's logic on a fake host: what it runs, in which order, what it
//! cleans up after a failure, what it finds stale.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Barrier, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::*;
use crate::sys::Output;
use crate::Catalog;

const ME: u32 = 100;
const MY_START: u64 = 5000;
const ROOT_STATUS: &str = "Name:\tlinkperf\nCapEff:\t000001ffffffffff\n";

/// A host that keeps namespaces, links, files and processes in memory and
/// records every command. Threads may share it: its lock is a real one.
#[derive(Default, Debug)]
struct Fake {
    state: Mutex<State>,
    /// The thread holding the lab's lock.
    holder: Mutex<Option<ThreadId>>,
    released: Condvar,
    /// Threads racing through the lab ([`Fake::racing`]).
    race: Mutex<Race>,
    race_moved: Condvar,
}

/// Threads racing through the lab on one fake host. A listing of a
/// directory answers only once every racer still running is held up too:
/// listing as well, or waiting for the lab's lock. So what a listing shows
/// may be out of date when it answers, in the worst order there is, every
/// time and without a clock: without the lock, every racer reads the
/// records before any writes its own.
#[derive(Default, Debug)]
struct Race {
    /// Racers that have not finished.
    running: usize,
    /// Racers in a listing, waiting for the others to be held up.
    listing: usize,
    /// Racers waiting for the lab's lock.
    locking: usize,
    /// Counts the times the listings were answered.
    answered: u64,
}

/// Longest a racer waits for the others to be held up: far more than any
/// takes, however busy the host.
const RACE_DEADLINE: Duration = Duration::from_secs(60);

impl Fake {
    fn s(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn r(&self) -> MutexGuard<'_, Race> {
        self.race.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes this thread a racer until the guard is dropped.
    fn racing(&self) -> Racer<'_> {
        self.r().running += 1;
        Racer(self)
    }

    /// A listing: waits until every racer is held up (none racing: at once).
    fn held_up_with_the_others(&self) {
        let deadline = Instant::now() + RACE_DEADLINE;
        let mut r = self.r();
        r.listing += 1;
        let mine = r.answered;
        while r.answered == mine {
            if r.listing + r.locking >= r.running {
                // Every racer is held up: the listings answer, all at once.
                r.answered += 1;
                r.listing = 0;
                self.race_moved.notify_all();
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the racers were never all held up: {r:?}");
            r = self
                .race_moved
                .wait_timeout(r, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A racer of [`Fake::racing`], done when dropped.
struct Racer<'a>(&'a Fake);

impl Drop for Racer<'_> {
    fn drop(&mut self) {
        self.0.r().running -= 1;
        self.0.race_moved.notify_all();
    }
}

/// The fake's lock, released when dropped.
#[derive(Debug)]
struct FakeLock<'a>(&'a Fake);

impl Drop for FakeLock<'_> {
    fn drop(&mut self) {
        *self.0.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.0.released.notify_all();
    }
}

#[derive(Default, Debug)]
struct State {
    namespaces: Vec<String>,
    links: Vec<String>,
    files: BTreeMap<PathBuf, String>,
    ran: Vec<String>,
    /// A command line that fails.
    fail_on: Option<String>,
    /// Processes in each namespace.
    pids: BTreeMap<String, Vec<u32>>,
    killed: Vec<u32>,
    /// Running processes and their start times.
    procs: BTreeMap<u32, u64>,
    status: Option<String>,
    missing_programs: Vec<String>,
}

fn ok(stdout: String) -> Output {
    Output {
        success: true,
        status: "exit status: 0".into(),
        stdout,
        stderr: String::new(),
    }
}

impl<'a> System for &'a Fake {
    type Lock = FakeLock<'a>;

    fn run(&self, program: &str, args: &[String]) -> io::Result<Output> {
        let line = format!("{program} {}", args.join(" "));
        let mut s = self.s();
        s.ran.push(line.clone());
        if s.fail_on.as_deref() == Some(line.as_str()) {
            return Ok(Output {
                success: false,
                status: "exit status: 2".into(),
                stdout: String::new(),
                stderr: "Error: Unknown device type.\n".into(),
            });
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = match (program, a.as_slice()) {
            ("ip", ["netns", "list"]) => s
                .namespaces
                .iter()
                .map(|n| format!("{n} (id: 1)\n"))
                .collect(),
            ("ip", ["-o", "link"]) => s
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| format!("{}: {l}: <BROADCAST> mtu 1500\n", i + 1))
                .collect(),
            ("ip", ["netns", "add", ns]) if s.namespaces.iter().any(|n| n == ns) => {
                return Ok(Output {
                    success: false,
                    status: "exit status: 1".into(),
                    stdout: String::new(),
                    stderr: format!(
                        "Cannot create namespace file \"/run/netns/{ns}\": File exists\n"
                    ),
                });
            }
            ("ip", ["netns", "add", ns]) => {
                s.namespaces.push(ns.to_string());
                String::new()
            }
            ("ip", ["netns", "del", ns]) => {
                s.namespaces.retain(|n| n != ns);
                String::new()
            }
            ("ip", ["netns", "pids", ns]) => s
                .pids
                .get(*ns)
                .map(|p| p.iter().map(|p| format!("{p}\n")).collect())
                .unwrap_or_default(),
            ("ip", ["link", "del", l]) => {
                s.links.retain(|x| x != l);
                String::new()
            }
            _ => String::new(),
        };
        Ok(ok(out))
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        let s = self.s();
        let p = path.to_string_lossy();
        if p == "/proc/self/status" {
            return s
                .status
                .clone()
                .ok_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied));
        }
        if let Some(pid) = p
            .strip_prefix("/proc/")
            .and_then(|r| r.strip_suffix("/stat"))
        {
            let pid: u32 = pid.parse().unwrap();
            return s
                .procs
                .get(&pid)
                .map(|t| format!("{pid} (linkperf) S {} {t} 0", "0 ".repeat(18)))
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound));
        }
        s.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn write(&self, path: &Path, contents: &str) -> io::Result<()> {
        self.s()
            .files
            .insert(path.to_path_buf(), contents.to_string());
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.s().files.remove(path);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let s = self.s();
        let names = s
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        drop(s);
        // Among racers, what it lists may be out of date when it answers.
        self.held_up_with_the_others();
        Ok(names)
    }

    fn has_program(&self, name: &str) -> bool {
        !self.s().missing_programs.iter().any(|m| m == name)
    }

    fn lock(&self, _path: &Path) -> io::Result<FakeLock<'a>> {
        let me = std::thread::current().id();
        let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        assert_ne!(*holder, Some(me), "the lab's lock taken twice: a deadlock");
        if holder.is_some() {
            // Held up: a racer's listing may answer now.
            self.r().locking += 1;
            self.race_moved.notify_all();
            while holder.is_some() {
                holder = self
                    .released
                    .wait(holder)
                    .unwrap_or_else(|e| e.into_inner());
            }
            self.r().locking -= 1;
        }
        *holder = Some(me);
        Ok(FakeLock(self))
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<FakeLock<'a>>> {
        let free = self
            .holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none();
        // Between the look and the lock another thread may take it: then
        // this waits, as a lock would.
        if free {
            self.lock(path).map(Some)
        } else {
            Ok(None)
        }
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        let mut s = self.s();
        s.killed.push(pid);
        s.procs.remove(&pid);
        Ok(())
    }

    fn pid(&self) -> u32 {
        ME
    }
}

fn fake() -> Fake {
    let f = Fake::default();
    {
        let mut s = f.s();
        s.status = Some(ROOT_STATUS.into());
        s.procs.insert(ME, MY_START);
        s.links = vec!["lo".into(), "eth0".into()];
    }
    f
}

fn lab(f: &Fake) -> Lab<&Fake> {
    Lab::with_state_dir(f, "/state")
}

fn topo(spec: &str, pairs: u32) -> Topology {
    Topology::build(&Catalog::builtin().resolve(spec).unwrap(), pairs).unwrap()
}

fn record_of(f: &Fake, name: &str) -> Option<Record> {
    f.s()
        .files
        .get(Path::new(&format!("/state/{name}.json")))
        .map(|t| serde_json::from_str(t).unwrap())
}

#[test]
fn preflight_names_everything_missing_and_runs_nothing() {
    let f = fake();
    assert!(lab(&f).preflight().is_ok());
    f.s().status = Some("CapEff:\t0000000000000000\n".into());
    f.s().missing_programs = vec!["tc".into()];
    let e = lab(&f).preflight().unwrap_err().to_string();
    assert!(
        e.starts_with("the lab cannot run on this host: missing CAP_NET_ADMIN"),
        "{e}"
    );
    assert!(e.contains("CAP_SYS_ADMIN") && e.contains("`tc`"), "{e}");
    assert!(f.s().ran.is_empty());
}

#[test]
fn up_records_first_then_runs_every_command_in_order() {
    let f = fake();
    let l = lab(&f);
    let t = topo("veth-1g", 1);
    let up = l.up(&t, l.this_process()).unwrap();
    assert_eq!(
        up.record().owner,
        Owner::Process {
            pid: ME,
            start_time: MY_START
        }
    );
    let ran = f.s().ran.clone();
    assert_eq!(ran[0], "ip netns list");
    assert_eq!(ran[ran.len() - t.commands.len()..], t.command_lines()[..]);
    let kept = up.keep().unwrap();
    assert_eq!(kept.owner, Owner::Up);
    let r = record_of(&f, "veth-1g").unwrap();
    assert_eq!(r, kept);
    assert_eq!(r.configuration, "veth-1g: veth, rate=1gbit, 1 pair");
    assert_eq!(r.capacity_bits_per_s, Some(1e9));
    assert_eq!(r.namespaces, ["lp-veth-1g-s1", "lp-veth-1g-c1"]);
    // Kept: still there, and the survey says it is up.
    assert_eq!(f.s().namespaces.len(), 2);
    let s = l.survey().unwrap();
    assert_eq!(s.up.len(), 1);
    assert!(s.stale.is_empty(), "{:?}", s.stale);
}

#[test]
fn a_failed_command_removes_what_was_created_and_names_the_command() {
    let f = fake();
    let l = lab(&f);
    let t = topo("vxlan", 1);
    let bad = "ip -n lp-vxlan-c1 link add lp-vx1 type vxlan id 1 local 198.18.1.2 remote 198.18.1.1 dev lp-c1 dstport 4789";
    f.s().fail_on = Some(bad.into());
    f.s().pids.insert("lp-vxlan-s1".into(), vec![4321]);
    let e = l.up(&t, l.this_process()).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("run `{bad}`: exit status: 2: Error: Unknown device type.")
    );
    let s = f.s();
    assert!(s.namespaces.is_empty(), "{:?}", s.namespaces);
    assert!(s.files.is_empty(), "the record is gone");
    assert_eq!(s.killed, [4321]);
    // Nothing after the failed command ran; the clean-up deleted newest first.
    let i = s.ran.iter().position(|r| r == bad).unwrap();
    assert_eq!(
        s.ran[i + 1..],
        [
            "ip netns list",
            "ip netns pids lp-vxlan-c1",
            "ip netns pids lp-vxlan-s1",
            "ip netns del lp-vxlan-c1",
            "ip netns del lp-vxlan-s1",
        ]
    );
}

#[test]
fn dropping_the_guard_takes_it_down_and_kills_what_runs_inside() {
    let f = fake();
    let l = lab(&f);
    {
        let _up = l.up(&topo("veth", 2), l.this_process()).unwrap();
        assert_eq!(f.s().namespaces.len(), 6);
        let mut s = f.s();
        s.pids.insert("lp-veth-s1".into(), vec![7, ME]);
        s.pids.insert("lp-veth-c2".into(), vec![8]);
    }
    let s = f.s();
    assert!(s.namespaces.is_empty());
    assert!(s.files.is_empty());
    // Never itself, even if it were inside.
    assert_eq!(s.killed, [8, 7]);
}

#[test]
fn explicit_down_reports_success() {
    let f = fake();
    let l = lab(&f);
    let up = l.up(&topo("bridge", 1), l.this_process()).unwrap();
    up.down().unwrap();
    assert!(f.s().namespaces.is_empty());
    assert!(l.survey().unwrap().up.is_empty());
}

#[test]
fn bringing_up_twice_is_refused_before_anything_runs() {
    let f = fake();
    let l = lab(&f);
    let t = topo("macvlan", 1);
    let _kept = l.up(&t, l.this_process()).unwrap().keep().unwrap();
    let before = f.s().ran.len();
    let e = l.up(&t, l.this_process()).unwrap_err().to_string();
    assert!(
        e.contains("already up (namespace lp-macvlan-sedge exists)"),
        "{e}"
    );
    assert!(e.ends_with("; take it down first"), "{e}");
    assert_eq!(f.s().ran.len(), before + 1, "only the namespace list");
}

#[test]
fn a_killed_run_is_found_stale_reported_and_cleaned() {
    let f = fake();
    let l = lab(&f);
    // A lab run (pid 200) brought veth up, then was killed.
    f.s().procs.insert(200, 77);
    let dead = Owner::Process {
        pid: 200,
        start_time: 77,
    };
    let _ = l.up(&topo("veth", 1), dead).unwrap().keep();
    // `keep` made it Up; make it the dead run's again, as a kill would leave it.
    let mut r = record_of(&f, "veth").unwrap();
    r.owner = dead;
    l.save(&r).unwrap();
    f.s().procs.remove(&200);
    // Plus a hand-made namespace, a root link, and a configuration kept up.
    let kept = l
        .up(&topo("vxlan", 1), l.this_process())
        .unwrap()
        .keep()
        .unwrap();
    {
        let mut s = f.s();
        s.namespaces.push("lp-junk".into());
        s.links.push("lp-s1".into());
        s.pids.insert("lp-veth-s1".into(), vec![201]);
    }
    let survey = l.survey().unwrap();
    assert_eq!(survey.up, [kept]);
    let names: Vec<&str> = survey.stale.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["veth", "lp-veth-s1", "lp-veth-c1", "lp-junk", "lp-s1"]
    );
    assert!(survey.stale[0].reason.contains("pid 200"));

    l.clean(&survey.stale).unwrap();
    let s = f.s();
    assert_eq!(s.namespaces, ["lp-vxlan-s1", "lp-vxlan-c1"]);
    assert_eq!(s.links, ["lo", "eth0"]);
    assert_eq!(s.killed, [201]);
    assert!(record_of_in(&s, "veth").is_none());
    assert!(record_of_in(&s, "vxlan").is_some());
}

fn record_of_in(s: &State, name: &str) -> Option<String> {
    s.files
        .get(Path::new(&format!("/state/{name}.json")))
        .cloned()
}

#[test]
fn a_reused_pid_does_not_keep_a_dead_run_alive() {
    let f = fake();
    let l = lab(&f);
    f.s().procs.insert(300, 1);
    let _ = l
        .up(
            &topo("loopback", 1),
            Owner::Process {
                pid: 300,
                start_time: 1,
            },
        )
        .unwrap()
        .keep();
    let mut r = record_of(&f, "loopback").unwrap();
    r.owner = Owner::Process {
        pid: 300,
        start_time: 1,
    };
    l.save(&r).unwrap();
    assert!(l.survey().unwrap().stale.is_empty());
    // Process 300 ends; another process gets its id.
    f.s().procs.insert(300, 999);
    let s = l.survey().unwrap();
    assert!(s.up.is_empty());
    assert_eq!(s.stale.len(), 2);
}

#[test]
fn unreadable_records_are_stale() {
    let f = fake();
    f.s()
        .files
        .insert("/state/bad.json".into(), "{not json".into());
    f.s()
        .files
        .insert("/state/.tmp.json.tmp".into(), "x".into());
    let l = lab(&f);
    let s = l.survey().unwrap();
    assert_eq!(s.stale.len(), 1);
    assert_eq!(s.stale[0].to_string(), "record of bad (unreadable record)");
    l.clean(&s.stale).unwrap();
    assert_eq!(
        f.s().files.len(),
        1,
        "the temporary file is not the lab's to judge"
    );
}

/// Regression: the "already up" check and writing the record were two steps,
/// so two `lab up X` at once could both pass it; the loser's first command
/// then failed (its namespace existed) and its clean-up deleted the winner's
/// namespaces. Both checks now run under the lab's lock with the record's
/// write, and the loser is refused before it runs anything.
#[test]
fn two_bring_ups_of_one_configuration_at_once_one_wins_and_the_other_touches_nothing() {
    let f = fake();
    // Each check's listing of the records answers only once the other
    // racer is held up too: without the lock, both pass.
    let t = topo("veth", 1);
    let start = Barrier::new(2);
    let outcomes: Vec<Result<Record, String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let l = lab(&f);
                    let _racer = f.racing();
                    start.wait();
                    l.up(&t, l.this_process())
                        .and_then(Up::keep)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<&Record> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    let lost = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
    // Refused on the winner's record or, once the winner ran its commands,
    // on its namespaces.
    assert!(
        lost.starts_with("bring up veth: it is already up (the lab has a record of it")
            || lost.starts_with("bring up veth: it is already up (namespace lp-veth-s1 exists)"),
        "{lost}"
    );
    assert!(lost.ends_with("; take it down first"), "{lost}");
    let s = f.s();
    assert_eq!(s.namespaces, ["lp-veth-s1", "lp-veth-c1"]);
    assert_eq!(
        s.ran
            .iter()
            .filter(|r| r.starts_with("ip netns add"))
            .count(),
        2,
        "only the winner created namespaces: {:?}",
        s.ran
    );
    assert!(
        !s.ran.iter().any(|r| r.starts_with("ip netns del")),
        "{:?}",
        s.ran
    );
    drop(s);
    assert_eq!(record_of(&f, "veth").unwrap().owner, Owner::Up);
}

#[test]
fn a_live_owners_record_refuses_a_bring_up_and_names_the_owner() {
    let f = fake();
    let l = lab(&f);
    let t = topo("veth-1g", 1);
    let kept = l.up(&t, l.this_process()).unwrap().keep().unwrap();
    // Its namespaces deleted by hand, but the record (of `lab up`) is there.
    f.s().namespaces.clear();
    let e = l.up(&t, l.this_process()).unwrap_err().to_string();
    assert!(
        e.contains("already up (the lab has a record of it: it was left up)"),
        "{e}"
    );
    assert_eq!(record_of(&f, "veth-1g").unwrap(), kept);
}

#[test]
fn a_dead_owners_record_is_replaced_by_the_next_bring_up() {
    let f = fake();
    let l = lab(&f);
    f.s().procs.insert(200, 77);
    let t = topo("veth", 1);
    let gone = Owner::Process {
        pid: 200,
        start_time: 77,
    };
    let up = l.up(&t, gone).unwrap();
    // Killed before it could clean up; its namespaces were removed by hand.
    std::mem::forget(up);
    f.s().procs.remove(&200);
    f.s().namespaces.clear();
    let again = l.up(&t, l.this_process()).unwrap();
    assert_eq!(again.record().owner, l.this_process());
    assert_eq!(record_of(&f, "veth").unwrap().owner, l.this_process());
}

#[test]
fn removing_stale_objects_reports_them_first_and_leaves_what_is_up() {
    let f = fake();
    let l = lab(&f);
    let kept = l
        .up(&topo("bridge", 1), l.this_process())
        .unwrap()
        .keep()
        .unwrap();
    f.s().namespaces.push("lp-junk".into());
    let mut told = Vec::new();
    let survey = l
        .remove_stale(|stale| told.extend(stale.iter().map(ToString::to_string)))
        .unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].starts_with("namespace lp-junk (no lab record claims it"),
        "{told:?}"
    );
    assert_eq!(survey.up, [kept]);
    assert_eq!(
        f.s().namespaces,
        ["lp-bridge-switch", "lp-bridge-s1", "lp-bridge-c1"]
    );
    // Nothing stale: nothing to report.
    let survey = l.remove_stale(|_| panic!("nothing is stale")).unwrap();
    assert!(survey.stale.is_empty());
}

/// Issue 32: two `lab run`s at once brought up the same namespace names
/// (`lp-veth-s1`), and the second was refused in the middle of its study.
/// A run holds the runs' lock: a second is told it waits, and goes on when
/// the first lets go.
#[test]
fn a_second_lab_run_waits_for_the_first_and_is_told_so() {
    let f = fake();
    let lab = lab(&f);
    let mut told = false;
    let first = lab.hold_for_run(|| told = true).unwrap();
    assert!(!told, "a free lab waits for no one");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let second = scope.spawn(|| {
            let held = lab.hold_for_run(|| tx.send("waiting").unwrap()).unwrap();
            drop(held);
        });
        // The second says it waits while the first holds the lock...
        assert_eq!(rx.recv().unwrap(), "waiting");
        // ... and gets it once the first lets go.
        drop(first);
        second.join().unwrap();
    });
    assert!(lab.hold_for_run(|| panic!("nobody holds it")).is_ok());
}
