//! `linkperf history`: every run kept in one database; its series, their
//! change points, a regression gate for CI, and OpenMetrics for dashboards
//! (docs/history.md).

mod chart;
pub mod metrics;
mod record;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use linkperf_history::changes::{
    change_points, ChangePoint, Options, DEFAULT_P_VALUE, DEFAULT_WINDOW, MIN_WINDOW,
};
use linkperf_history::gate::{judge, Verdict};
use linkperf_history::store::metric_of;
use linkperf_history::{
    records_of, short, History, HistoryError, Point, RunRecord, SeriesFilter, SeriesInfo,
    SeriesKey, DEFAULT_DB,
};
use linkperf_report::Metric;
use linkperf_results::ResultsDocument;

pub use record::{open as open_history, Recorder};

use crate::UsageError;

/// `linkperf history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// What to do with the history.
    #[command(subcommand)]
    pub command: HistoryCommand,
}

/// The history's subcommands.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Import results files (v1, v2, a mesh's mesh.json) into the history; a run already there is not added again.
    Import(ImportArgs),
    /// The series (per label, test, pair, metric and environment) with their latest figures; charts with --out.
    Show(ShowArgs),
    /// Change points of every series: E-divisive means with a t-test (Apache Otava's method).
    Detect(DetectArgs),
    /// Exit 1 when a candidate results file is a significant regression against its series (for CI).
    Gate(GateArgs),
    /// The latest figure of every test, metric and pair, as OpenMetrics text.
    Export(ExportArgs),
}

/// Where the history is.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The history: an SQLite file (created when absent) or a postgres://USER@HOST/DB URL.
    #[arg(long, value_name = "PATH|URL", default_value = DEFAULT_DB, env = "LINKPERF_HISTORY_DB")]
    pub db: String,
}

/// Which series.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// Only this configuration label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only this test (rr1c-200x1000--50).
    #[arg(long)]
    pub test: Option<String>,
    /// Only this mesh pair (SOURCE->TARGET).
    #[arg(long)]
    pub pair: Option<String>,
    /// Metrics by key (throughput.bytes_per_s, transaction_time_us.p99, ...), repeatable; `all`
    /// for every one. Default: throughput (bytes and transactions per second) and mean and p99
    /// transaction time.
    #[arg(long = "metric", value_name = "KEY|all", value_parser = parse_metrics)]
    pub metrics: Vec<Vec<Metric>>,
    /// Count suspect runs too (they are kept out by default).
    #[arg(long)]
    pub include_suspect: bool,
}

/// How change points are found.
#[derive(Debug, Args)]
pub struct DetectOptions {
    /// Largest p-value of a change point (Student's t-test between the stretches either side).
    #[arg(long, default_value_t = DEFAULT_P_VALUE, value_parser = parse_p_value)]
    pub p_value: f64,
    /// Points per E-divisive window (windows overlap by half).
    #[arg(long, default_value_t = DEFAULT_WINDOW, value_parser = parse_window)]
    pub window: usize,
    /// Smallest relative change of the mean that counts, percent (5 or 5%).
    #[arg(long, value_name = "PCT", default_value = "0", value_parser = parse_magnitude)]
    pub min_magnitude: f64,
}

impl DetectOptions {
    fn options(&self) -> Options {
        Options {
            window: self.window,
            p_value: self.p_value,
            min_magnitude: self.min_magnitude,
        }
    }
}

/// `linkperf history import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Results files: run's --json, suite's --out, lab's DIR/CONFIG.json, a mesh's mesh.json.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `linkperf history show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub detect: DetectOptions,
    /// Write DIR/index.html (every series charted, change points marked) and a PNG and SVG per series.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `linkperf history detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub detect: DetectOptions,
    /// The change points as JSON lines, one per change point, instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `linkperf history gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The candidate's results file (its ok runs are judged against their series).
    #[arg(long, value_name = "FILE")]
    pub candidate: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub detect: DetectOptions,
}

/// `linkperf history export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The format: openmetrics (also Prometheus's text format).
    #[arg(long, default_value = "openmetrics", value_parser = ["openmetrics"])]
    pub format: String,
    /// Write to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The metrics every command looks at unless told.
const HEADLINE: [Metric; 4] = [
    Metric::Throughput,
    Metric::TransactionRate,
    Metric::TimeMean,
    Metric::TimeP99,
];

fn parse_metrics(s: &str) -> Result<Vec<Metric>, String> {
    if s == "all" {
        return Ok(Metric::ALL.to_vec());
    }
    s.split(',')
        .map(|k| {
            metric_of(k.trim()).ok_or_else(|| {
                format!(
                    "unknown metric {k:?}; one of: all, {}",
                    Metric::ALL.map(|m| m.key()).join(", ")
                )
            })
        })
        .collect()
}

fn parse_p_value(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number between 0 and 1"))?;
    if !(p > 0.0 && p < 1.0) {
        return Err(format!("{s} is not between 0 and 1 (exclusive)"));
    }
    Ok(p)
}

fn parse_window(s: &str) -> Result<usize, String> {
    let w: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of points"))?;
    if w < MIN_WINDOW {
        return Err(format!("the window must hold at least {MIN_WINDOW} points"));
    }
    Ok(w)
}

fn parse_magnitude(s: &str) -> Result<f64, String> {
    let f = linkperf_workload::parse_percent(s)?;
    if f < 0.0 {
        return Err(format!("{s} is negative"));
    }
    Ok(f)
}

impl SelectArgs {
    fn filter(&self) -> SeriesFilter {
        let mut metrics: Vec<Metric> = self.metrics.iter().flatten().copied().collect();
        if metrics.is_empty() {
            metrics = HEADLINE.to_vec();
        }
        metrics.sort();
        metrics.dedup();
        SeriesFilter {
            label: self.label.clone().unwrap_or_default(),
            test: self.test.clone().unwrap_or_default(),
            pair: self.pair.clone().unwrap_or_default(),
            metrics,
        }
    }
}

/// A history error as the command reports it: the database or a file
/// that is not what it should be is a usage error (exit 2).
fn history_error(e: HistoryError) -> anyhow::Error {
    match e {
        HistoryError::Results(_)
        | HistoryError::Run { .. }
        | HistoryError::Foreign { .. }
        | HistoryError::NewerSchema { .. } => UsageError(format!("failed to {e}")).into(),
        other => anyhow::anyhow!("failed to {other}"),
    }
}

fn open(db: &DbArgs) -> anyhow::Result<History> {
    History::open(&db.db).map_err(history_error)
}

/// Runs `linkperf history`.
pub fn history(a: HistoryArgs) -> anyhow::Result<ExitCode> {
    match a.command {
        HistoryCommand::Import(a) => import(a),
        HistoryCommand::Show(a) => show(a),
        HistoryCommand::Detect(a) => detect(a),
        HistoryCommand::Gate(a) => gate(a),
        HistoryCommand::Export(a) => export(a),
    }
}

/// Loads every file before anything is written: a file that is missing,
/// corrupt or not a results document stops the import with nothing added
/// (the first such file in the order given is named).
fn load_all(files: &[PathBuf]) -> anyhow::Result<Vec<(String, ResultsDocument)>> {
    let loaded = load_each(files, |_, doc| Ok(doc))?;
    Ok(files
        .iter()
        .map(|f| f.display().to_string())
        .zip(loaded)
        .collect())
}

/// Every file's runs as records, each file dropped once made into them (a
/// large import holds the records, not the documents): read before anything
/// is written, as [`load_all`].
fn load_records(files: &[PathBuf]) -> anyhow::Result<Vec<(String, Vec<RunRecord>)>> {
    let loaded = load_each(files, |origin, doc| {
        records_of(&doc, origin).map_err(history_error)
    })?;
    Ok(files
        .iter()
        .map(|f| f.display().to_string())
        .zip(loaded)
        .collect())
}

/// `then` of each file's document, in the files' order. The files are read
/// and parsed on one thread per CPU: parsing is most of an import's time.
fn load_each<T: Send>(
    files: &[PathBuf],
    then: impl Fn(&str, ResultsDocument) -> anyhow::Result<T> + Sync,
) -> anyhow::Result<Vec<T>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let load = |f: &PathBuf| -> anyhow::Result<T> {
        let doc =
            ResultsDocument::load(f).map_err(|e| UsageError(format!("failed to import: {e}")))?;
        then(&f.display().to_string(), doc)
    };
    let mut loaded: Vec<(usize, anyhow::Result<T>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(f) = files.get(i) else {
                            return mine;
                        };
                        mine.push((i, load(f)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a results file's reader panicked"))
            .collect()
    });
    loaded.sort_by_key(|(i, _)| *i);
    loaded.into_iter().map(|(_, t)| t).collect()
}

fn import(a: ImportArgs) -> anyhow::Result<ExitCode> {
    let batches = load_records(&a.files)?;
    let mut h = open(&a.db)?;
    let s = h.import_records(&batches).map_err(history_error)?;
    crate::emit(&format!(
        "imported {} of {} from {} into {} ({} already there), {}\n",
        crate::table::count(s.added as u64, "run"),
        s.runs,
        crate::table::count(s.files as u64, "file"),
        h.name(),
        s.runs - s.added,
        crate::table::count(s.points as u64, "point"),
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// A series with its points and change points.
pub(crate) struct Analysed {
    pub(crate) info: SeriesInfo,
    pub(crate) points: Vec<Point>,
    pub(crate) changes: Vec<ChangePoint>,
}

/// Every selected series, its points (suspect ones only when asked) and
/// its change points (over the ok points, or all when suspect ones count).
fn analyse(
    h: &mut History,
    select: &SelectArgs,
    options: &Options,
) -> anyhow::Result<Vec<Analysed>> {
    let series = h.series(&select.filter()).map_err(history_error)?;
    let mut out = Vec::with_capacity(series.len());
    for info in series {
        let points = h
            .points(info.id, select.include_suspect)
            .map_err(history_error)?;
        let values: Vec<f64> = points.iter().map(|p| p.value).collect();
        let changes = change_points(&values, options);
        out.push(Analysed {
            info,
            points,
            changes,
        });
    }
    Ok(out)
}

/// `label test[@pair]`.
fn test_words(k: &SeriesKey) -> String {
    if k.pair.is_empty() {
        format!("{} {}", k.label, k.test)
    } else {
        format!("{} {}@{}", k.label, k.test, k.pair)
    }
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let mut h = open(&a.db)?;
    let all = analyse(&mut h, &a.select, &a.detect.options())?;
    let mut text = String::new();
    if all.is_empty() {
        text.push_str(&format!(
            "no series in {}{}\n",
            h.name(),
            " (import results with: linkperf history import FILE...)"
        ));
    } else {
        text.push_str(&format!(
            "{:<44} {:<34} {:<8} {:>6} {:>7} {:>14} {:>7}\n",
            "label test", "metric", "env", "ok", "suspect", "latest", "changes"
        ));
        for s in &all {
            let k = &s.info.key;
            let latest = s
                .points
                .iter()
                .rev()
                .find(|p| p.ok)
                .map_or("-".to_string(), |p| k.metric.format(p.value));
            text.push_str(&format!(
                "{:<44} {:<34} {:<8} {:>6} {:>7} {:>14} {:>7}\n",
                test_words(k),
                k.metric.key(),
                short(&k.environment),
                s.info.ok,
                s.info.suspect,
                latest,
                s.changes.len()
            ));
        }
    }
    crate::emit(&text)?;
    if let Some(dir) = &a.out {
        let written = chart::write(dir, &all, h.name(), &a.detect.options())?;
        eprintln!(
            "linkperf: {written} series charted in {}",
            dir.join("index.html").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One change point in words: when, before → after, the change and p.
pub(crate) fn change_words(metric: Metric, points: &[Point], c: &ChangePoint) -> String {
    let at = points
        .get(c.index)
        .map_or("?".to_string(), |p| p.started.clone());
    format!(
        "at {at} (point {}): {} -> {} ({:+.1} %), p = {:.2e}, {} points before, {} after",
        c.index + 1,
        metric.format(c.before_mean),
        metric.format(c.after_mean),
        c.relative_change() * 100.0,
        c.p_value,
        c.before_n,
        c.after_n
    )
}

fn detect(a: DetectArgs) -> anyhow::Result<ExitCode> {
    let mut h = open(&a.db)?;
    let all = analyse(&mut h, &a.select, &a.detect.options())?;
    let mut text = String::new();
    let mut found = 0usize;
    for s in &all {
        let k = &s.info.key;
        for c in &s.changes {
            found += 1;
            if a.json {
                let line = serde_json::json!({
                    "label": k.label, "test": k.test, "pair": k.pair,
                    "metric": k.metric.key(), "environment": k.environment,
                    "index": c.index, "started": s.points.get(c.index).map(|p| p.started.clone()),
                    "before_mean": c.before_mean, "after_mean": c.after_mean,
                    "before_n": c.before_n, "after_n": c.after_n,
                    "relative_change": c.relative_change(), "p_value": c.p_value,
                });
                text.push_str(&line.to_string());
                text.push('\n');
            } else {
                text.push_str(&format!(
                    "{} {} [{}] {}\n",
                    test_words(k),
                    k.metric.key(),
                    short(&k.environment),
                    change_words(k.metric, &s.points, c)
                ));
            }
        }
    }
    if !a.json {
        text.push_str(&format!(
            "{} in {} series (p <= {}, window {}, min magnitude {} %)\n",
            crate::table::count(found as u64, "change point"),
            all.len(),
            a.detect.p_value,
            a.detect.window,
            a.detect.min_magnitude * 100.0
        ));
    }
    crate::emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn gate(a: GateArgs) -> anyhow::Result<ExitCode> {
    let docs = load_all(std::slice::from_ref(&a.candidate))?;
    let (origin, doc) = &docs[0];
    let records = records_of(doc, origin).map_err(history_error)?;
    let filter = a.select.filter();
    let mut h = open(&a.db)?;
    // The candidate's ok figures per series, in its order.
    let mut candidates: Vec<(SeriesKey, Vec<f64>)> = Vec::new();
    for r in records.iter().filter(|r| {
        r.status == linkperf_results::RunStatus::Ok
            || (a.select.include_suspect && r.status.completed())
    }) {
        for (metric, value) in &r.values {
            if !filter.metrics.contains(metric) {
                continue;
            }
            let key = SeriesKey {
                label: r.label.clone(),
                test: r.test.clone(),
                pair: r.pair.clone(),
                metric: *metric,
                environment: r.environment.hash(),
            };
            if (!filter.test.is_empty() && key.test != filter.test)
                || (!filter.label.is_empty() && key.label != filter.label)
            {
                continue;
            }
            match candidates.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(*value),
                None => candidates.push((key, vec![*value])),
            }
        }
    }
    if candidates.is_empty() {
        return Err(UsageError(format!(
            "failed to gate {origin}: it has no ok run with the metrics asked for"
        ))
        .into());
    }
    let options = a.detect.options();
    let (mut regressions, mut judged, mut new) = (0usize, 0usize, 0usize);
    let mut text = String::new();
    for (key, values) in &candidates {
        let Some(id) = h.find_series(key).map_err(history_error)? else {
            new += 1;
            text.push_str(&format!(
                "new         {} {} [{}]: no history in this environment (a new series starts)\n",
                test_words(key),
                key.metric.key(),
                short(&key.environment)
            ));
            continue;
        };
        let series: Vec<f64> = h
            .points(id, a.select.include_suspect)
            .map_err(history_error)?
            .iter()
            .map(|p| p.value)
            .collect();
        let j = judge(&series, values, key.metric, &options);
        judged += 1;
        let word = match j.verdict {
            Verdict::Regression => {
                regressions += 1;
                "REGRESSION"
            }
            Verdict::Improvement => "improvement",
            Verdict::Same => "same",
            Verdict::TooFew => "too few",
        };
        let detail = if j.verdict == Verdict::TooFew {
            format!(
                "{} ok points since its last change point, {} needed",
                j.baseline_n,
                linkperf_history::gate::MIN_BASELINE
            )
        } else {
            format!(
                "{} -> {} ({:+.1} %), p = {:.2e}, against {} points",
                key.metric.format(j.baseline_mean),
                key.metric.format(j.candidate_mean),
                j.relative_change * 100.0,
                j.p_value,
                j.baseline_n
            )
        };
        text.push_str(&format!(
            "{word:<11} {} {} [{}]: {detail}\n",
            test_words(key),
            key.metric.key(),
            short(&key.environment)
        ));
    }
    text.push_str(&format!(
        "{}: {} of {} judged ({} new) at p <= {}, min magnitude {} %\n",
        if regressions > 0 { "FAIL" } else { "pass" },
        crate::table::count(regressions as u64, "regression"),
        judged,
        new,
        options.p_value,
        options.min_magnitude * 100.0
    ));
    crate::emit(&text)?;
    Ok(if regressions > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The OpenMetrics text of the history's latest figures.
pub(crate) fn exposition(h: &mut History) -> Result<String, HistoryError> {
    Ok(linkperf_history::openmetrics::exposition(&h.latest()?))
}

fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let mut h = open(&a.db)?;
    let text = exposition(&mut h).map_err(history_error)?;
    match &a.out {
        Some(f) => {
            std::fs::write(f, text).with_context(|| format!("failed to write {}", f.display()))?
        }
        None => crate::emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
