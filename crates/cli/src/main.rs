//! The `linkperf` binary: parses arguments, plans, runs, prints, saves.
//!
//! Exit codes: 0 everything ran, 1 a test failed or was aborted, 2 usage or input error.

mod args;
mod compare;
mod history;
mod lab;
mod mesh;
mod plan;
mod progress;
mod run;
mod run_log;
mod save;
mod serve;
mod suite;
mod table;
mod watch;
mod words;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// A usage or input error: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let command_line: Vec<String> = std::env::args().collect();
    let result = match cli.command {
        Command::Serve(a) => serve::serve(*a, command_line),
        Command::Run(a) => run::run(*a, command_line),
        Command::Suite(a) => suite::suite(*a, command_line),
        Command::Compare(a) => compare::compare(*a, command_line),
        Command::Report(a) => compare::report(*a, command_line),
        Command::Lab(a) => lab::lab(*a, command_line),
        Command::Mesh(a) => mesh::mesh(*a, command_line),
        Command::History(a) => history::history(*a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("linkperf: error: {}", words::error_chain(&e));
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Writes to standard output. A closed pipe comes back as an error, which
/// `main` turns into a quiet exit (`linkperf ... | head` is not a failure).
pub fn emit(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
