//! Nothing measured is lost on a full disk.

use super::*;

// ---------------------------------------------------------------------------
// Nothing measured is lost on a full disk.
// ---------------------------------------------------------------------------

/// A small tmpfs of the test's own, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// A tmpfs of `size` (e.g. `600k`), or `None` where this process may not
    /// mount one (then the test says so, and fails where root is required).
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("LINKPERF_LAB_REQUIRED").is_none(),
                "cannot mount a tmpfs (root is needed)"
            );
            eprintln!("skipped: cannot mount a tmpfs (root is needed)");
            return None;
        }
        Some(SmallFs { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a filler file until the file system is full.
    fn fill(&self, name: &str) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.path(name)).unwrap();
        let chunk = vec![1u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }

    fn remount(&self, how: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{how}")])
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount {how}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

const THREE: &str = r#"
name = "three"
duration = "300ms"
warmup = "100ms"
retry_suspect = 0
[[test]]
workload = "rr1c-1x1"
users = 1
[[test]]
workload = "rr1c-1x1"
users = 2
[[test]]
workload = "rr1c-1x1"
users = 3
"#;

#[test]
fn a_full_file_system_loses_no_run() {
    let _g = shared();
    let Some(fs) = SmallFs::mount("2m") else {
        return;
    };
    let suite_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(suite_file.path(), THREE).unwrap();
    let file = suite_file.path().to_str().unwrap();
    // A server of its own, whose log says when the suite takes on its second
    // test: the first run is saved, and the room the save gave up is held
    // again (a save does both before the next run).
    let server = Server::start(&[]);
    let addr = server.addr();
    let second_test = |n: usize| {
        server.wait_for_log("the suite's second test", DEADLINE, |l| {
            l.matches("running rr1c-1x1--2").count() >= n
        });
    };

    // 1. Too little room for what the suite will write: refused before anything runs.
    fs.fill("filler");
    let out = fs.path("a.json");
    let (code, stdout, err) = suite(&[file, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}\n{err}");
    assert!(err.contains("keep room for the results"), "{err}");
    assert!(!stdout.contains(" run 1/1"), "nothing ran: {stdout}");
    std::fs::remove_file(fs.path("filler")).unwrap();

    // 2. Room kept, then the file system fills up mid-suite: every run is saved.
    // (The fill comes once the room the first save gave up is held again:
    // another writer in that moment would take it, and the later saves would
    // go to the fallback of part 3.)
    let out_arg = out.to_str().unwrap();
    let child = spawn(&[
        "suite", file, "--server", &addr, "--out", out_arg, "--quiet",
    ]);
    second_test(1);
    fs.fill("filler");
    let (code, stdout, err) = finish(child);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let doc = read_doc(&out).unwrap();
    assert_eq!(names(&doc), ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"]);
    std::fs::remove_file(fs.path("filler")).unwrap();

    // 3. A save that fails anyway (the file system read-only mid-suite): the
    // run is printed, the document goes to a fallback file whose path is
    // printed, every later run is saved there, and a resume continues from it.
    let out = fs.path("b.json");
    let out_arg = out.to_str().unwrap();
    let child = spawn(&[
        "suite", file, "--server", &addr, "--out", out_arg, "--quiet",
    ]);
    second_test(2);
    fs.remount("ro");
    let (code, stdout, err) = finish(child);
    fs.remount("rw");
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert_eq!(order(&stdout).len(), 3, "every run printed: {stdout}");
    let fallback = err
        .split("they are in ")
        .nth(1)
        .and_then(|r| r.split(" instead").next())
        .unwrap_or_else(|| panic!("no fallback said: {err}"));
    let doc = read_doc(Path::new(fallback)).unwrap();
    assert_eq!(names(&doc), ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"]);
    assert!(
        err.contains(&format!("--out {fallback} --resume")),
        "the exact command to continue: {err}"
    );
    let (code, stdout, err) = suite(&[file, "--server", &addr, "--out", fallback, "--resume"]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert!(err.contains("3 of 3 runs already done"), "{err}");
    let _ = std::fs::remove_file(fallback);
}
