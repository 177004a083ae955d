//! `linkperf compare` (a base and candidates) and `linkperf report` (one
//! file): results documents in; an HTML report, charts and CSV, Markdown and
//! JSON exports out, or one format on stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use linkperf_report::{
    write_report, BitsPerSecond, CpuSide, CsvExporter, Exporter, HtmlExporter, JsonExporter,
    MarkdownExporter, Options, Report, Source, DEFAULT_THRESHOLD_PCT,
};
use linkperf_results::ResultsDocument;

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
    s.parse::<BitsPerSecond>().map_err(|e| {
        let msg = e.to_string();
        msg.split_once(": ")
            .map_or(msg.clone(), |(_, why)| why.to_string())
    })
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
    /// The base results file, then one or more candidates (linkperf run --json or suite --out).
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Where the report goes.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Smallest relative difference that counts, percent (with repeats it must also be significant, Welch p < 0.05).
    #[arg(long, default_value_t = DEFAULT_THRESHOLD_PCT, value_parser = parse_threshold, value_name = "PERCENT")]
    pub threshold: f64,
    /// Whose system-wide CPU efficiency is a headline metric: client or server.
    #[arg(long, default_value = "server", value_parser = parse_cpu_side, value_name = "SIDE")]
    pub cpu_side: CpuSide,
    /// Link capacity for the saturation check, bits per second each direction (1gbit, 10g, 100mbit: powers of 1000); default: the capacity recorded in each file.
    #[arg(long, value_parser = parse_capacity, value_name = "RATE")]
    pub capacity: Option<BitsPerSecond>,
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
    /// Link capacity for the saturation check, bits per second each direction (1gbit, 10g, 100mbit); default: the capacity recorded in the file.
    #[arg(long, value_parser = parse_capacity, value_name = "RATE")]
    pub capacity: Option<BitsPerSecond>,
}

/// Reads a results file; any problem is an input error naming the file.
fn load(path: &Path) -> anyhow::Result<ResultsDocument> {
    ResultsDocument::load(path).map_err(|e| usage(format!("failed to {e}")))
}

/// Compares candidates with a base.
pub fn compare(a: CompareArgs, _command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let docs = a
        .files
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let paths: Vec<String> = a.files.iter().map(|p| p.display().to_string()).collect();
    let sources: Vec<Source<'_>> = docs
        .iter()
        .zip(&paths)
        .map(|(doc, path)| Source { path, doc })
        .collect();
    let options = Options {
        threshold_pct: a.threshold,
        cpu_side: a.cpu_side,
        capacity_bits_per_s: a.capacity,
    };
    let report = Report::comparison(sources[0], &sources[1..], options);
    for (c, path) in report.comparisons.iter().zip(&paths[1..]) {
        if c.tests.is_empty() {
            return Err(usage(format!(
                "nothing to compare: no test of {path} has a counterpart with an ok run in {} (tests are matched by name, e.g. rr1c-200x1000--50)",
                paths[0]
            )));
        }
    }
    emit(&report, &a.output)
}

/// Reports on one results file.
pub fn report(a: ReportArgs, _command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    let doc = load(&a.file)?;
    let path = a.file.display().to_string();
    let options = Options {
        cpu_side: a.cpu_side,
        capacity_bits_per_s: a.capacity,
        ..Options::default()
    };
    let report = Report::single(
        Source {
            path: &path,
            doc: &doc,
        },
        options,
    );
    emit(&report, &a.output)
}

/// Writes the directory and/or prints the format asked for.
fn emit(report: &Report, out: &OutputArgs) -> anyhow::Result<ExitCode> {
    let format = match (&out.out, out.format) {
        (None, None) => Some(Format::Md),
        (_, f) => f,
    };
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
