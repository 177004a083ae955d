//! `linkperf compare` (a base and candidates) and `linkperf report` (one
//! file): results documents in; an HTML report, charts and CSV, Markdown and
//! JSON exports out, or one format on stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use linkperf_report::{
    write_report, CpuSide, CsvExporter, Exporter, HtmlExporter, JsonExporter, MarkdownExporter,
    Options, Report, Source, DEFAULT_THRESHOLD_PCT,
};
use linkperf_results::ResultsDocument;
use linkperf_workload::BitsPerSecond;

use crate::UsageError;

/// Largest `--threshold`, percent.
const MAX_THRESHOLD_PCT: f64 = 1000.0;

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let number = s.trim().trim_end_matches('%').trim();
    let v: f64 = number
        .parse()
        .map_err(|_| format!("expected a percentage such as 2 or 2.5%, got {s:?}"))?;
    if !(0.0..=MAX_THRESHOLD_PCT).contains(&v) {
        return Err(format!(
            "the threshold must be between 0 and {MAX_THRESHOLD_PCT} percent"
        ));
    }
    Ok(v)
}

fn parse_capacity(s: &str) -> Result<BitsPerSecond, String> {
    linkperf_report::parse_capacity(s).map_err(|e| {
        let msg = e.to_string();
        msg.split_once(": ")
            .map_or(msg.clone(), |(_, why)| why.to_string())
    })
}

/// A `--capacity`: for every file (`RATE`) or for one (`FILE=RATE`).
#[derive(Debug, Clone, PartialEq)]
pub enum CapacityArg {
    /// `--capacity 1gbit`: every file.
    All(BitsPerSecond),
    /// `--capacity 1g.json=1gbit`: that file only.
    File(PathBuf, BitsPerSecond),
}

/// `RATE` or `FILE=RATE` (split at the last `=`: a rate has none, a file
/// name may).
fn parse_capacity_arg(s: &str) -> Result<CapacityArg, String> {
    match s.rsplit_once('=') {
        None => parse_capacity(s).map(CapacityArg::All),
        Some(("", _)) => Err(format!(
            "{s:?} names no file: say FILE=RATE (1g.json=1gbit) or RATE alone for every file"
        )),
        Some((file, rate)) => Ok(CapacityArg::File(
            PathBuf::from(file),
            parse_capacity(rate)?,
        )),
    }
}

/// Which of the compared `files` the `--capacity FILE=…` names: the same file
/// (by canonical path), else, for a bare file name, the one compared file of
/// that name. An error for none, or for a bare name several files share.
fn capacity_file(named: &Path, files: &[PathBuf]) -> anyhow::Result<Vec<usize>> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let wanted = canonical(named);
    let same: Vec<usize> = (0..files.len())
        .filter(|&i| wanted.is_some() && canonical(&files[i]) == wanted)
        .collect();
    if !same.is_empty() {
        return Ok(same);
    }
    let bare = named.components().count() == 1;
    let by_name: Vec<usize> = (0..files.len())
        .filter(|&i| bare && files[i].file_name() == named.file_name())
        .collect();
    let listed = || {
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let distinct: Vec<Option<PathBuf>> = by_name.iter().map(|&i| canonical(&files[i])).collect();
    if by_name.len() > 1 && distinct.iter().any(|c| *c != distinct[0]) {
        return Err(usage(format!(
            "--capacity {}=…: several compared files are named {} ({}): give the path as on the command line",
            named.display(),
            named.display(),
            by_name
                .iter()
                .map(|&i| files[i].display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if by_name.is_empty() {
        return Err(usage(format!(
            "--capacity {}=…: {} is not one of the compared files ({})",
            named.display(),
            named.display(),
            listed()
        )));
    }
    Ok(by_name)
}

/// The `--capacity` arguments resolved against the compared `files`: the
/// capacity for every file, and each file's own.
fn capacities(
    args: &[CapacityArg],
    files: &[PathBuf],
) -> anyhow::Result<(Option<BitsPerSecond>, Vec<Option<BitsPerSecond>>)> {
    let mut all = None;
    let mut each = vec![None; files.len()];
    for a in args {
        match a {
            CapacityArg::All(c) => {
                if all.replace(*c).is_some() {
                    return Err(usage(
                        "--capacity RATE (for every file) given more than once; name a file for each other capacity: --capacity FILE=RATE",
                    ));
                }
            }
            CapacityArg::File(named, c) => {
                for i in capacity_file(named, files)? {
                    if each[i].replace(*c).is_some() {
                        return Err(usage(format!(
                            "--capacity: {} is given a capacity more than once",
                            files[i].display()
                        )));
                    }
                }
            }
        }
    }
    Ok((all, each))
}

fn parse_cpu_side(s: &str) -> Result<CpuSide, String> {
    s.parse()
}

/// An output format for stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown.
    Md,
    /// CSV, one row per test and metric.
    Csv,
    /// JSON (schema linkperf/report/v1).
    Json,
    /// The HTML page.
    Html,
}

impl Format {
    fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Md => &MarkdownExporter,
            Format::Csv => &CsvExporter,
            Format::Json => &JsonExporter,
            Format::Html => &HtmlExporter,
        }
    }
}

/// Where the report goes.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Write the report into this directory: index.html, one SVG and one PNG per chart, and the CSV, Markdown and JSON exports.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the report to stdout in this format (default: md when --out is not given).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// `linkperf compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The results files (linkperf run --json or suite --out): the base first, then one or more candidates, unless --base names the base.
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The base: one of the FILEs (its path, or its bare file name), or the label of one; every other file is a candidate against it. Default: the first FILE.
    #[arg(long, value_name = "FILE|LABEL")]
    pub base: Option<String>,
    /// Where the report goes.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Smallest relative difference that counts, percent (with repeats it must also be significant, Welch p < 0.05).
    #[arg(long, default_value_t = DEFAULT_THRESHOLD_PCT, value_parser = parse_threshold, value_name = "PERCENT")]
    pub threshold: f64,
    /// Whose system-wide CPU efficiency is a headline metric: client or server.
    #[arg(long, default_value = "server", value_parser = parse_cpu_side, value_name = "SIDE")]
    pub cpu_side: CpuSide,
    /// Link capacity for the saturation check, bits per second each direction (1gbit, 10g, 100mbit: powers of 1000): RATE for every file, or FILE=RATE for one (repeatable, e.g. --capacity 1g.json=1gbit); default: the capacity recorded in each file.
    #[arg(long, value_parser = parse_capacity_arg, value_name = "[FILE=]RATE")]
    pub capacity: Vec<CapacityArg>,
    /// Count suspect runs (completed, but a validity check failed: a busy host, a stall)
    /// beside the ok ones; every output says so. Default: suspect runs are left out.
    #[arg(long)]
    pub include_suspect: bool,
}

/// `linkperf report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The results file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where the report goes.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Whose system-wide CPU efficiency the tables show: client or server.
    #[arg(long, default_value = "server", value_parser = parse_cpu_side, value_name = "SIDE")]
    pub cpu_side: CpuSide,
    /// Link capacity for the saturation check, bits per second each direction (1gbit, 10g, 100mbit), as RATE or FILE=RATE; default: the capacity recorded in the file.
    #[arg(long, value_parser = parse_capacity_arg, value_name = "[FILE=]RATE")]
    pub capacity: Vec<CapacityArg>,
}

/// Reads a results file; any problem is an input error naming the file.
fn load(path: &Path) -> anyhow::Result<ResultsDocument> {
    ResultsDocument::load(path).map_err(|e| usage(format!("failed to {e}")))
}

/// Which of the compared `files` (with their documents' `labels`) `--base`
/// names: the same file (by canonical path), else, for a bare file name,
/// the one compared file of that name, else the one file labelled so. An
/// error for none, or for a name or label that several different files share.
fn base_index(named: &str, files: &[PathBuf], labels: &[&str]) -> anyhow::Result<usize> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    // Several matches are fine when they are one file given twice.
    let one = |found: Vec<usize>, what: &str| -> anyhow::Result<Option<usize>> {
        let distinct: Vec<Option<PathBuf>> = found.iter().map(|&i| canonical(&files[i])).collect();
        if found.len() > 1 && distinct.iter().any(|c| c.is_none() || *c != distinct[0]) {
            return Err(usage(format!(
                "--base {named}: several compared files are {what} {named} ({}): give the path of one as on the command line",
                found
                    .iter()
                    .map(|&i| files[i].display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(found.first().copied())
    };
    let path = Path::new(named);
    let wanted = canonical(path);
    let same = (0..files.len())
        .filter(|&i| wanted.is_some() && canonical(&files[i]) == wanted)
        .collect();
    if let Some(i) = one(same, "at")? {
        return Ok(i);
    }
    let bare = !named.is_empty() && path.components().count() == 1;
    let by_name = (0..files.len())
        .filter(|&i| bare && files[i].file_name() == path.file_name())
        .collect();
    if let Some(i) = one(by_name, "named")? {
        return Ok(i);
    }
    let by_label = (0..files.len()).filter(|&i| labels[i] == named).collect();
    if let Some(i) = one(by_label, "labelled")? {
        return Ok(i);
    }
    Err(usage(format!(
        "--base {named}: not one of the compared files ({}) nor the label of one ({})",
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        labels.join(", ")
    )))
}

/// Compares candidates with a base.
pub fn compare(a: CompareArgs, _command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let mut docs = a
        .files
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut files = a.files.clone();
    let (all, mut each) = capacities(&a.capacity, &files)?;
    if let Some(named) = &a.base {
        let labels: Vec<&str> = docs.iter().map(|d| d.label.as_str()).collect();
        let i = base_index(named, &files, &labels)?;
        // The base first; the candidates keep their order.
        let doc = docs.remove(i);
        docs.insert(0, doc);
        let file = files.remove(i);
        files.insert(0, file);
        let cap = each.remove(i);
        each.insert(0, cap);
    }
    let paths: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let sources: Vec<Source<'_>> = docs
        .iter()
        .zip(&paths)
        .zip(each)
        .map(|((doc, path), cap)| Source::new(path, doc).with_capacity(cap))
        .collect();
    let options = Options {
        threshold_pct: a.threshold,
        cpu_side: a.cpu_side,
        capacity_bits_per_s: all,
        include_suspect: a.include_suspect,
    };
    let report = Report::comparison(sources[0], &sources[1..], options);
    for (c, path) in report.comparisons.iter().zip(&paths[1..]) {
        if c.tests.is_empty() {
            return Err(usage(nothing_compared(&report, c, path, &paths[0])));
        }
    }
    emit(&report, &a.output)
}

/// Why a candidate had no test to compare, and how to go on: no test of
/// one name in both files, or the tests both have had no clean run on a
/// side (excluded as suspect, with the checks they failed; or failed).
fn nothing_compared(
    report: &Report,
    c: &linkperf_report::CandidateComparison,
    path: &str,
    base_path: &str,
) -> String {
    if c.not_compared.is_empty() {
        return format!(
            "nothing to compare: no test of {path} has a counterpart in {base_path} (tests are matched by name, e.g. rr1c-200x1000--50)"
        );
    }
    const SHOWN: usize = 6;
    let mut lines: Vec<String> = c
        .not_compared
        .iter()
        .take(SHOWN)
        .map(|n| format!("  {}: {}", n.name, n.reason))
        .collect();
    if c.not_compared.len() > SHOWN {
        lines.push(format!("  and {} more", c.not_compared.len() - SHOWN));
    }
    // The checks the excluded runs failed, over both files.
    let mut checks: Vec<&str> = Vec::new();
    for n in &c.not_compared {
        for f in [report.figures_of(&c.base), report.figures_of(&c.candidate)] {
            let reasons = f
                .and_then(|f| f.test(&n.name))
                .map(|t| t.suspect_reasons.as_slice())
                .unwrap_or_default();
            for r in reasons {
                if !checks.contains(&r.as_str()) {
                    checks.push(r);
                }
            }
        }
    }
    let how = if c.suspect_excluded > 0 {
        format!(
            "{} {} excluded as suspect (checks failed: {}): their figures are kept in the files but not believed. To go on: run them again where the checks can pass (a quieter host, or each side pinned to its own CPUs: --placement split), or compare them anyway with --include-suspect (every output then says they are included)",
            crate::table::count(u64::from(c.suspect_excluded), "run"),
            if c.suspect_excluded == 1 { "was" } else { "were" },
            if checks.is_empty() {
                "see each run's status_reasons".to_string()
            } else {
                checks.join(", ")
            }
        )
    } else {
        "no run of these tests completed on one side (see each run's error): run them again".into()
    };
    format!(
        "nothing to compare: {} test{} in both {base_path} and {path}, none with an ok run on each side:\n{}\n{how}",
        c.not_compared.len(),
        if c.not_compared.len() == 1 { " is" } else { "s are" },
        lines.join("\n")
    )
}

/// Reports on one results file.
pub fn report(a: ReportArgs, _command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let doc = load(&a.file)?;
    let (all, each) = capacities(&a.capacity, std::slice::from_ref(&a.file))?;
    let path = a.file.display().to_string();
    let options = Options {
        cpu_side: a.cpu_side,
        capacity_bits_per_s: all,
        ..Options::default()
    };
    let report = Report::single(Source::new(&path, &doc).with_capacity(each[0]), options);
    emit(&report, &a.output)
}

/// Writes the directory and/or prints the format asked for.
fn emit(report: &Report, out: &OutputArgs) -> anyhow::Result<ExitCode> {
    let format = match (&out.out, out.format) {
        (None, None) => Some(Format::Md),
        (_, f) => f,
    };
    // What makes a difference say more than the compared thing, on the
    // terminal whatever the format.
    if let Some(note) = report.suspect_note() {
        eprintln!("linkperf: warning: {note}");
    }
    let c = &report.consistency;
    for d in &c.placement {
        eprintln!(
            "linkperf: warning: placement differs in {}: {} in {}; {} in {}",
            d.side, d.base, d.base_label, d.candidate, d.candidate_label
        );
    }
    for d in &c.environment {
        eprintln!("linkperf: warning: environments differ: {}", d.describe());
    }
    let mut stdout = std::io::stdout().lock();
    if let Some(dir) = &out.out {
        let written = write_report(report, dir).map_err(|e| usage(format!("failed to {e}")))?;
        for w in &written.warnings {
            eprintln!("linkperf: warning: {w}");
        }
        // With a format on stdout, the summary goes to stderr.
        let mut lines: Vec<String> = report
            .comparisons
            .iter()
            .map(|c| c.summary.clone())
            .chain(report.insufficient().into_iter().map(str::to_string))
            .collect();
        lines.push(format!(
            "wrote {} files to {}: open {}",
            written.files.len(),
            dir.display(),
            dir.join("index.html").display()
        ));
        for l in lines {
            if format.is_some() {
                eprintln!("{l}");
            } else {
                writeln!(stdout, "{l}").context("failed to write to stdout")?;
            }
        }
    }
    if let Some(f) = format {
        let text = f
            .exporter()
            .render(report)
            .map_err(|e| anyhow::anyhow!("failed to {e}"))?;
        stdout
            .write_all(text.as_bytes())
            .context("failed to write to stdout")?;
    }
    stdout.flush().context("failed to write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_percentages_in_range() {
        assert_eq!(parse_threshold("2"), Ok(2.0));
        assert_eq!(parse_threshold(" 2.5% "), Ok(2.5));
        assert_eq!(parse_threshold("0"), Ok(0.0));
        for bad in ["", "%", "two", "-1", "1e400", "NaN", "inf"] {
            assert!(parse_threshold(bad).is_err(), "{bad:?}");
        }
        assert!(parse_threshold(&format!("{}", MAX_THRESHOLD_PCT + 1.0)).is_err());
    }

    #[test]
    fn a_capacity_is_for_every_file_or_for_one() {
        let gbit = BitsPerSecond(1_000_000_000);
        assert_eq!(parse_capacity_arg("1gbit"), Ok(CapacityArg::All(gbit)));
        assert_eq!(
            parse_capacity_arg("lab/1g.json=1gbit"),
            Ok(CapacityArg::File("lab/1g.json".into(), gbit))
        );
        // Split at the last `=`: a file name may hold one, a rate never does.
        assert_eq!(
            parse_capacity_arg("rate=1g.json=1gbit"),
            Ok(CapacityArg::File("rate=1g.json".into(), gbit))
        );
        assert!(parse_capacity_arg("=1gbit")
            .unwrap_err()
            .contains("names no file"));
        assert!(parse_capacity_arg("1g.json=1gbps").is_err());
    }

    #[test]
    fn file_capacities_are_matched_to_the_compared_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
        for p in [&a, &b] {
            std::fs::write(p, "{}").unwrap();
        }
        let files = vec![a.clone(), b.clone()];
        let (g, t) = (BitsPerSecond(1_000_000_000), BitsPerSecond(10_000_000_000));
        // By path, by bare file name, and the plain form for every file.
        let (all, each) = capacities(
            &[
                CapacityArg::File(b.clone(), g),
                CapacityArg::All(t),
                CapacityArg::File("a.json".into(), t),
            ],
            &files,
        )
        .unwrap();
        assert_eq!((all, each), (Some(t), vec![Some(t), Some(g)]));
        let err = |args: &[CapacityArg]| capacities(args, &files).unwrap_err().to_string();
        assert!(err(&[CapacityArg::File("c.json".into(), g)])
            .contains("c.json is not one of the compared files"));
        assert!(err(&[CapacityArg::File(dir.path().join("c.json"), g)])
            .contains("is not one of the compared files"));
        assert!(err(&[
            CapacityArg::File("b.json".into(), g),
            CapacityArg::File(b.clone(), t)
        ])
        .contains("more than once"));
        assert!(err(&[CapacityArg::All(g), CapacityArg::All(t)]).contains("more than once"));
    }

    #[test]
    fn the_base_is_a_compared_file_or_the_label_of_one() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let (a, b, c) = (
            dir.path().join("a.json"),
            dir.path().join("b.json"),
            sub.join("a.json"),
        );
        for p in [&a, &b, &c] {
            std::fs::write(p, "{}").unwrap();
        }
        let files = vec![a.clone(), b.clone()];
        let labels = ["osa", "hs"];
        let base = |named: &str| base_index(named, &files, &labels);
        assert_eq!(base(b.to_str().unwrap()).unwrap(), 1, "by path");
        assert_eq!(base("b.json").unwrap(), 1, "by bare file name");
        assert_eq!(base("osa").unwrap(), 0, "by label");
        assert_eq!(base("hs").unwrap(), 1);
        let e = base("10g").unwrap_err().to_string();
        assert!(
            e.contains("--base 10g: not one of the compared files")
                && e.contains("nor the label of one (osa, hs)"),
            "{e}"
        );
        assert!(base("").is_err());
        // A label two different files carry is ambiguous; a file given
        // twice is not.
        let e = base_index("x", &files, &["x", "x"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("several compared files are labelled x"), "{e}");
        assert_eq!(
            base_index("x", &[a.clone(), a.clone()], &["x", "x"]).unwrap(),
            0
        );
        // Two files of one bare name in different folders: give the path.
        let two = vec![a.clone(), c.clone()];
        let e = base_index("a.json", &two, &labels).unwrap_err().to_string();
        assert!(e.contains("several compared files are named a.json"), "{e}");
        assert_eq!(base_index(c.to_str().unwrap(), &two, &labels).unwrap(), 1);
    }
}
