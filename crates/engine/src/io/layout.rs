//! The I/O is here: outside their tests, no file of the workers (worker/)
//! or of the profile's programs (program/) reads, writes, sends or receives
//! on a socket itself, or calls the C library's socket calls; they call the
//! functions of io/.

use std::path::{Path, PathBuf};

/// Calls on a socket (or a file) that belong in io/: method calls with a
/// buffer, the datagram calls by name, and the C library's socket calls.
const RAW_CALLS: &[&str] = &[
    ".read(&mut",
    ".write(&",
    ".read_exact(",
    ".write_all(",
    ".read_to_end(",
    ".read_vectored(",
    ".write_vectored(",
    ".recv(&mut",
    ".send(&",
    ".peek(&mut",
    "send_to(",
    "recv_from(",
    "peek_from(",
    "io::Read",
    "io::Write",
    "io::prelude",
    "libc::send",
    "libc::recv",
    "libc::read(",
    "libc::write(",
    "libc::readv(",
    "libc::writev(",
    "libc::splice(",
    "libc::memfd_create(",
    "libc::socket(",
    "libc::setsockopt(",
    "libc::getsockopt(",
    "libc::shutdown(",
    "libc::connect(",
    "libc::accept",
    "libc::bind(",
    "SockRef",
];

/// What the check calls a `use` of std::io's `Read` or `Write`.
const TRAITS: &str = "a use of std::io's Read or Write";

/// The raw calls in `code` (a file's source, its test module cut off
/// already), each with its count.
fn raw_calls(code: &str) -> Vec<(&'static str, usize)> {
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found: Vec<(&'static str, usize)> = RAW_CALLS
        .iter()
        .map(|call| (*call, code.matches(call).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    // The traits that make a socket's `read` and `write` callable, brought
    // in by a `use` of std::io (`use std::io::{self, Read};`).
    let mut rest = code.as_str();
    let mut traits = 0;
    while let Some(at) = rest.find("use std::io") {
        let statement = &rest[at..];
        let end = statement.find(';').unwrap_or(statement.len());
        traits += statement[..end]
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| matches!(*w, "Read" | "Write" | "BufRead"))
            .count();
        rest = &statement[end..];
    }
    if traits > 0 {
        found.push((TRAITS, traits));
    }
    found
}

/// A file's source without its test module (the last `#[cfg(test)] mod`).
fn without_tests(text: &str) -> &str {
    match text.find("\n#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn workers_and_programs_make_no_socket_call_of_their_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src.join("worker"), &mut files);
    sources(&src.join("program"), &mut files);
    let mut read = 0;
    let mut problems = Vec::new();
    for path in &files {
        let name = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // Modules compiled for tests only.
        if name.ends_with("/tests.rs") || name.ends_with("/fixtures.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let code = without_tests(&text);
        for (call, n) in raw_calls(code) {
            problems.push(format!("{name}: {n} × {call}"));
        }
        read += 1;
    }
    assert!(
        problems.is_empty(),
        "socket calls outside io/:\n{}",
        problems.join("\n")
    );
    assert!(read >= 25, "read {read} files");
}

/// The check finds each kind of call it is for, and passes the calls of
/// io/ and the flows' own methods of the same names.
#[test]
fn the_check_finds_raw_calls_and_passes_io_functions() {
    for raw in [
        "let n = l.conn.read(&mut self.buf)?;",
        "conn.write(&buf[..n])",
        "let _ = sock.send_to(d, from);",
        "match sock.recv_from(&mut buf) {",
        "sock.send(&bufs.datagram[..len])",
        "sock.recv(&mut bufs.read)",
        "let r = unsafe { libc::sendfile(sock, file, &mut off, n) };",
        "let fd = unsafe { libc::memfd_create(name, 0) };",
        "use std::io::{self, Read};",
        "use std::io::{\n    self,\n    Write,\n};",
        "std::io::Read::read(&mut c, &mut b)",
        "let _ = SockRef::from(socket).shutdown(Shutdown::Both);",
    ] {
        assert!(!raw_calls(raw).is_empty(), "missed: {raw}");
    }
    for fine in [
        "match read_some(&mut l.conn, &mut self.buf[..n]) {",
        "write_some(&mut l.conn, &self.buf[..n])",
        "let _ = send_one(sock, d, Some(from));",
        "receive_one(fd, &mut buf)",
        "match reg.read(sock) {",
        "if let Some(done) = rr.read(payload.max(1), now, stop) {",
        "let _ = tx.send(SetupEvent::Ready);",
        "use std::io;",
        "Want::Read(_) => {}",
        "// sock.send_to(d, from) was here",
    ] {
        assert!(raw_calls(fine).is_empty(), "flagged: {fine}");
    }
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() { c.read(&mut d); }\n}\n";
    assert!(raw_calls(without_tests(text)).is_empty());
}
