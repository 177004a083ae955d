//! The real [`System`]: std::process, std::fs and two libc calls.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::{Output, System};

/// The host this process runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

impl System for Host {
    /// The open lock file: closing it releases the lock.
    type Lock = File;

    fn run(&self, program: &str, args: &[String]) -> io::Result<Output> {
        let out = Command::new(program).args(args).output()?;
        Ok(Output {
            success: out.status.success(),
            status: out.status.to_string(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write(&self, path: &Path, contents: &str) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        let mut f = File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn has_program(&self, name: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        let Some(path) = std::env::var_os("PATH") else {
            return false;
        };
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    }

    fn lock(&self, path: &Path) -> io::Result<File> {
        let file = lock_file(path)?;
        flock(&file, libc::LOCK_EX)?;
        Ok(file)
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<File>> {
        let file = lock_file(path)?;
        match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(file)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        signal(pid, libc::SIGKILL)
    }

    fn pid(&self) -> u32 {
        std::process::id()
    }
}

/// The lock file at `path`, created with its directory if missing.
fn lock_file(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

/// flock(2) with `op` on `file`, again when a signal interrupts it.
fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock(2) on a descriptor `file` owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a process id"))?;
    // SAFETY: kill(2) with a positive pid signals that one process; no memory is involved.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends SIGINT to process `pid` (as Ctrl-C would).
pub fn interrupt(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGINT)
}

/// `ip netns exec NS PROGRAM ARGS…`, set to receive SIGKILL when the thread
/// that spawns it dies, so that a killed `lab run` leaves no server or client
/// behind. `ip netns exec` enters the namespace and then executes `program`
/// in the same process, so the setting reaches it.
pub fn netns_command(ns: &str, program: &Path, args: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.arg("netns").arg("exec").arg(ns).arg(program).args(args);
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes one async-signal-safe system call.
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_lock_creates_its_file_and_excludes_a_second_holder_until_dropped() {
        let dir = std::env::temp_dir().join(format!("linkperf-lab-lock-{}", std::process::id()));
        let path = dir.join("state").join(".lock");
        let first = Host.lock(&path).unwrap();
        assert!(path.is_file());
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                // Another open of the file: flock excludes it like another process.
                let second = Host.lock(&path).unwrap();
                tx.send(Instant::now()).unwrap();
                drop(second);
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "a second holder got the lock while the first held it"
        );
        let released = Instant::now();
        drop(first);
        let got = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(got >= released);
        waiter.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn trying_the_lock_does_not_wait_for_its_holder() {
        let dir = std::env::temp_dir().join(format!("linkperf-lab-try-{}", std::process::id()));
        let path = dir.join(".runs.lock");
        let first = Host.try_lock(&path).unwrap().expect("a free lock is taken");
        // Another open of the file: flock excludes it like another process.
        assert!(Host.try_lock(&path).unwrap().is_none(), "taken twice");
        drop(first);
        assert!(
            Host.try_lock(&path).unwrap().is_some(),
            "released with its holder"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
