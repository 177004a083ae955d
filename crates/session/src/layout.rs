//! The crate's layout holds: the machines under proto/ use none of the
//! shells, and outside their tests reach no socket, clock, thread, file or
//! random source.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// What a machine's code never names: the shells, and the OS's sockets,
/// clock, threads, files and random source.
const SHELL: &[&str] = &["crate::shell", "super::super::shell"];
const IO: &[&str] = &[
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "ToSocketAddrs",
    "Instant::now",
    "SystemTime::now",
    "std::thread",
    "std::fs",
    "getrandom",
];

#[test]
fn no_machine_uses_a_shell_or_the_os() {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proto");
    let files = sources(&proto);
    assert!(files.len() > 10, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for word in SHELL {
            assert!(!text.contains(word), "{} names {word}", file.display());
        }
        // Tests may take a clock's reading as their virtual time's start.
        if file.ends_with("pair.rs") {
            continue;
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for word in IO {
            assert!(!code.contains(word), "{} names {word}", file.display());
        }
    }
}
