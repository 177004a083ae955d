//! The operating-system boundary: every process the lab starts, every file it
//! reads or writes (`/proc`, `/run/linkperf-lab`) and every signal it sends
//! goes through here, so the logic above it (which commands, in which order,
//! what is stale, what to clean) works on plain values and is tested with a
//! fake [`System`] without root.
//!
//! # Contract
//!
//! - [`System::run`] runs a program to completion and hands back its exit
//!   status and output as text; it fails only when the program could not be
//!   started. Deciding whether a non-zero status is an error is the caller's.
//! - Reads return the file's text, untouched; parsing is done above, by pure
//!   functions unit-tested on fixed text.
//! - [`System::write`] replaces a file atomically (temporary file, rename),
//!   creating its directory; [`System::remove`] of a missing file succeeds.
//! - [`System::kill`] sends SIGKILL to one process by id, never to a group.
//! - [`System::lock`] waits for an exclusive lock on a file, shared by every
//!   process and thread of the host, held until the returned value is dropped
//!   and released by the kernel if its holder dies. It is not re-entrant:
//!   taking it again while holding it waits forever. [`System::try_lock`]
//!   is the same lock taken only if nobody holds it, without waiting.
//! - Nothing here panics on what the OS returns.
//!
//! Besides the trait, two functions for the binary: [`netns_command`] builds
//! the `ip netns exec` command that starts linkperf inside a namespace (and
//! dies with its parent), [`interrupt`] sends one process SIGINT.

mod host;

use std::io;
use std::path::Path;

pub use host::{interrupt, netns_command, Host};

/// How a program ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its exit status in words (`exit status: 2`, `signal: 9`).
    pub status: String,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// What the lab asks of the operating system.
pub trait System {
    /// A lock taken with [`System::lock`]; dropping it releases the lock.
    type Lock;
    /// Runs `program` (looked up in `PATH`) with `args` to completion.
    fn run(&self, program: &str, args: &[String]) -> io::Result<Output>;
    /// The text of a file.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Replaces a file's content atomically, creating its directory.
    fn write(&self, path: &Path, contents: &str) -> io::Result<()>;
    /// Removes a file; a missing one is not an error.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory; a missing directory has none.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether an executable `name` is in `PATH`.
    fn has_program(&self, name: &str) -> bool;
    /// Takes the exclusive lock of file `path` (created, with its directory,
    /// if missing), waiting while anyone else holds it.
    fn lock(&self, path: &Path) -> io::Result<Self::Lock>;
    /// [`System::lock`] without waiting: `None` while anyone else holds it.
    fn try_lock(&self, path: &Path) -> io::Result<Option<Self::Lock>>;
    /// Sends SIGKILL to process `pid`.
    fn kill(&self, pid: u32) -> io::Result<()>;
    /// This process's id.
    fn pid(&self) -> u32;
}
