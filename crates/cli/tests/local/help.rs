//! The help and the documentation agree: every flag every subcommand's
//! `--help` shows (the real binary's, walked down its command tree) is
//! documented where the README documents that subcommand, or in a page of
//! docs/ that the README links from there; and the short forms a newcomer
//! reaches for work alike on `run` and `suite`.

use std::path::Path;

use crate::util::run;

/// The workspace's root, where README.md is.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/cli is two levels down")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Where the README documents a subcommand (by its first word): parts of the
/// README, each from a line starting with its first marker to one starting
/// with its second, and the pages of docs/ those parts link.
fn scope(
    command: &str,
) -> (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
) {
    match command {
        "serve" => (
            &[
                ("## Serve and run", "On the client host:"),
                ("## Security", "## uperf profiles"),
                ("## iperf3 compatibility", "## Tests"),
                ("## History", "## Compare and report"),
            ],
            &["docs/security.md", "docs/iperf3.md", "docs/history.md"],
        ),
        "run" => (
            &[
                ("On the client host:", "## Suites: whole studies, repeated"),
                ("## Lab", "## Mesh"),
                ("## uperf profiles", "## Tests"),
                ("## History", "## Compare and report"),
            ],
            &[
                "docs/open-loop.md",
                "docs/profiles.md",
                "docs/iperf3.md",
                "docs/results-schema.md",
            ],
        ),
        "suite" => (
            &[
                ("## Suites: whole studies, repeated", "## Lab"),
                ("## History", "## Compare and report"),
            ],
            &["docs/suites.md", "docs/history.md"],
        ),
        "lab" => (
            &[
                ("## Lab", "## Mesh"),
                ("## History", "## Compare and report"),
            ],
            &["docs/lab.md", "docs/studies.md", "docs/history.md"],
        ),
        "mesh" => (
            &[("## Mesh", "## Compare and report")],
            &["docs/kubernetes.md", "docs/history.md"],
        ),
        "history" => (
            &[("## History", "## Compare and report")],
            &["docs/history.md"],
        ),
        "compare" | "report" => (
            &[("## Compare and report", "## Workloads")],
            &["docs/reports.md"],
        ),
        other => panic!("a new subcommand, {other}: say where the README documents it"),
    }
}

/// The README's lines from one starting with `from` up to one starting with `to`.
fn part(readme: &str, from: &str, to: &str) -> String {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(from))
        .unwrap_or_else(|| panic!("the README has no line starting with {from:?}"));
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with(to))
        .map_or(lines.len(), |k| start + 1 + k);
    lines[start..end].join("\n")
}

/// Whether `text` names `flag` as itself (`--port`, not `--iperf3-port`).
fn names(text: &str, flag: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(flag).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + flag.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// A command's help: its subcommands (but `help`) and the long flags of its
/// options, read from the real binary's `--help`.
fn help(path: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "linkperf {path:?} --help: {err}");
    let mut section = "";
    let (mut commands, mut flags) = (Vec::new(), Vec::new());
    for line in out.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let item = line.trim_start();
        // An item starts 2 spaces in; its wrapped help further.
        if line.len() - item.len() > 6 || item.is_empty() {
            continue;
        }
        match section {
            "Commands:" => {
                let name = item.split_whitespace().next().unwrap_or_default();
                if name != "help" {
                    commands.push(name.to_string());
                }
            }
            "Options:" => {
                let long = item
                    .split([' ', ','])
                    .find(|w| w.starts_with("--"))
                    .map(|w| w.split(['=', '[', '<']).next().unwrap_or(w));
                if let Some(f) = long.filter(|f| !matches!(*f, "--help" | "--version")) {
                    flags.push(f.to_string());
                }
            }
            _ => {}
        }
    }
    (commands, flags)
}

/// Every command path under `path`, with its flags, depth first.
fn walk(path: Vec<String>, out: &mut Vec<(Vec<String>, Vec<String>)>) {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    let (commands, flags) = help(&p);
    if !path.is_empty() {
        out.push((path.clone(), flags));
    }
    for c in commands {
        let mut next = path.clone();
        next.push(c);
        walk(next, out);
    }
}

#[test]
fn every_flag_of_every_subcommand_is_documented_where_the_readme_documents_it() {
    let readme = read("README.md");
    let mut commands = Vec::new();
    walk(Vec::new(), &mut commands);
    let tops: Vec<&str> = commands
        .iter()
        .filter(|(p, _)| p.len() == 1)
        .map(|(p, _)| p[0].as_str())
        .collect();
    for top in ["serve", "run", "suite", "lab", "mesh", "compare", "report"] {
        assert!(tops.contains(&top), "no {top} in the help: {tops:?}");
    }
    assert!(
        commands.iter().any(|(p, _)| p == &["lab", "run"]),
        "the walk goes down to lab's subcommands"
    );
    let mut missing = Vec::new();
    let mut checked = 0;
    for (path, flags) in &commands {
        let (parts, pages) = scope(&path[0]);
        let mut text: String = parts
            .iter()
            .map(|(from, to)| part(&readme, from, to))
            .collect::<Vec<_>>()
            .join("\n");
        for page in pages {
            assert!(
                readme.contains(&format!("({page}")),
                "{page} documents {} but the README does not link it",
                path[0]
            );
            text.push_str(&read(page));
        }
        for f in flags {
            checked += 1;
            if !names(&text, f) {
                missing.push(format!("linkperf {} {f}", path.join(" ")));
            }
        }
    }
    assert!(checked > 100, "only {checked} flags read from the help");
    assert!(
        missing.is_empty(),
        "in the help but not where the README documents the command (nor the docs it links there):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_flag_is_named_as_itself_not_inside_another() {
    assert!(names("`--port N` (7410)", "--port"));
    assert!(names("--port", "--port"));
    assert!(!names("`--iperf3-port`", "--port"));
    assert!(!names("--ports", "--port"));
    assert!(names("(`--users`, `-u`)", "--users"));
}

/// Issue 35: `suite quick -d 1` took `-d` for a value and told the user to
/// write `-- -d`; `suite` takes the short forms `run` takes.
#[test]
fn suite_takes_the_short_forms_run_takes() {
    let (code, out, err) = run(&["suite", "quick", "-d", "1", "-u", "2,3", "--dry-run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    for name in ["rr1c-1x1--2", "rr1c-1x1--3", "str-writex30k--3"] {
        assert!(out.contains(name), "{name}: {out}");
    }
    assert!(
        !out.contains("--10 "),
        "the suite's own counts are replaced: {out}"
    );
    assert!(out.contains("8 tests"), "{out}");
    assert!(out.contains("1 s + 500 ms warm-up"), "{out}");
    let (code, _, err) = run(&["suite", "quick", "-u", "0", "--dry-run"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'0'"), "{err}");
}

/// Issue 35: `-w str-readx30` (a dropped `k`) streams 30-byte messages; it
/// runs, as asked, but says what it is.
#[test]
fn a_stream_of_tiny_messages_is_warned_of_before_it_runs() {
    let (code, out, err) = run(&["suite", "quick", "--dry-run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !err.contains("warning"),
        "the quick suite is what it means: {err}"
    );
    let _g = crate::util::shared();
    let (code, out, err) = run(&[
        "run",
        "-q",
        "-w",
        "str-readx30",
        "-u",
        "1",
        "-d",
        "1",
        "--warmup",
        "0",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning: str-readx30 streams 30-byte messages")
            && err.contains("30k would be 30 KiB"),
        "{err}"
    );
}
