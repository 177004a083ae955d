//! The report: everything the exporters and charts show, derived from results
//! documents alone.

use std::path::Path;

use serde::Serialize;

use linkperf_results::{Environments, LinkInfo, ResultsDocument, TestConfig};
use linkperf_workload::{BitsPerSecond, Placement, Threads};

use crate::breakeven::{break_even, BreakEven, BreakEvenPoint};
use crate::compare::{compare_tests, CandidateComparison};
use crate::consistency::{
    environment_differences, flag_tests, offered_differences, placement_differences,
    stability_unjudged, Consistency,
};
use crate::open_loop::{open_loop_groups, OpenLoopGroup};
use crate::saturation::{above_capacity, saturation, Saturation, SaturationPoint};
use crate::sufficiency::{sufficiency, Sufficiency, SufficiencyPoint};
use crate::units::{capacity, capacity_as_f64, rate};
use crate::{CpuSide, FileFigures, Metric, WorkloadKey, DEFAULT_THRESHOLD_PCT};

/// The schema of the report's JSON export (`comparison.json`, `report.json`).
pub const REPORT_SCHEMA: &str = "linkperf/report/v1";

/// A results document and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The file it was read from, as the user named it.
    pub path: &'a str,
    /// The document.
    pub doc: &'a ResultsDocument,
    /// The link capacity to judge this file's saturation against, given for
    /// this file alone (`--capacity FILE=RATE`): it takes precedence over
    /// [`Options::capacity_bits_per_s`] and the file's recorded capacity.
    pub capacity_bits_per_s: Option<BitsPerSecond>,
}

impl<'a> Source<'a> {
    /// The document `doc`, read from `path`, with no capacity of its own.
    pub fn new(path: &'a str, doc: &'a ResultsDocument) -> Self {
        Source {
            path,
            doc,
            capacity_bits_per_s: None,
        }
    }

    /// The same source with a capacity given for it alone.
    pub fn with_capacity(self, capacity: Option<BitsPerSecond>) -> Self {
        Source {
            capacity_bits_per_s: capacity,
            ..self
        }
    }

    /// The capacity this file's saturation is judged against, and where it
    /// comes from: its own, else the one given for every file in `options`,
    /// else the one the lab recorded in the file.
    fn capacity(&self, options: &Options) -> Option<(BitsPerSecond, CapacityOrigin)> {
        let recorded = self
            .doc
            .link
            .as_ref()
            .and_then(|l| l.capacity_bits_per_s)
            .and_then(BitsPerSecond::from_f64);
        self.capacity_bits_per_s
            .map(|c| (c, CapacityOrigin::File))
            .or_else(|| {
                options
                    .capacity_bits_per_s
                    .map(|c| (c, CapacityOrigin::AllFiles))
            })
            .or_else(|| recorded.map(|c| (c, CapacityOrigin::Recorded)))
    }
}

/// Where a file's link capacity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityOrigin {
    /// Given for this file alone (`--capacity FILE=RATE`).
    File,
    /// Given for every file (`--capacity RATE`).
    AllFiles,
    /// Recorded in the file by the lab (`link.capacity_bits_per_s`).
    Recorded,
}

impl CapacityOrigin {
    /// In words: "given for this file", "given for every file", "recorded
    /// in the file".
    pub fn describe(self) -> &'static str {
        match self {
            CapacityOrigin::File => "given for this file",
            CapacityOrigin::AllFiles => "given for every file",
            CapacityOrigin::Recorded => "recorded in the file",
        }
    }
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Options {
    /// Smallest relative difference that counts, percent (default 2).
    pub threshold_pct: f64,
    /// Whose system-wide CPU efficiency is a headline metric (default server).
    pub cpu_side: CpuSide,
    /// The link capacity to test saturation against, for every file (unless
    /// a file has one of its own, [`Source::capacity_bits_per_s`]); a file's
    /// recorded capacity (`link.capacity_bits_per_s`) is used where this is
    /// `None`.
    #[serde(serialize_with = "capacity_as_f64")]
    pub capacity_bits_per_s: Option<BitsPerSecond>,
    /// Count suspect runs (completed, but a check failed) in the figures and
    /// comparisons beside the ok ones (`--include-suspect`); every output
    /// says so. Default false: suspect runs are left out.
    pub include_suspect: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold_pct: DEFAULT_THRESHOLD_PCT,
            cpu_side: CpuSide::Server,
            capacity_bits_per_s: None,
            include_suspect: false,
        }
    }
}

/// What the report says about one results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileInfo {
    /// Its label in the report (the document's label, made unique).
    pub label: String,
    /// The file, as named on the command line.
    pub path: String,
    /// When the document was created.
    pub created: String,
    /// The linkperf that wrote it.
    pub linkperf_version: String,
    /// The exact command that produced it.
    pub command_line: Vec<String>,
    /// Both sides' hosts.
    pub environment: Environments,
    /// The link it ran over, when recorded.
    pub link: Option<LinkInfo>,
    /// The suite that produced it, when one did.
    pub suite: Option<String>,
    /// Its tests.
    pub tests: usize,
    /// How its tests were set up beyond their workloads (worker placement,
    /// socket options), as (setting, value) pairs; a setting that differs
    /// between tests reads "varies: …".
    pub settings: Vec<(String, String)>,
    /// The capacity saturation was judged against (the one given for this
    /// file, else the one given for every file, else the file's recorded
    /// one), bits per second.
    #[serde(serialize_with = "capacity_as_f64")]
    pub capacity_bits_per_s: Option<BitsPerSecond>,
    /// Where [`capacity_bits_per_s`](Self::capacity_bits_per_s) came from.
    pub capacity_origin: Option<CapacityOrigin>,
}

/// A break-even finding for one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEvenNote {
    /// The candidate.
    pub candidate: String,
    /// The finding.
    pub finding: BreakEven,
    /// In words.
    pub text: String,
}

/// A saturation finding for one results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SaturationNote {
    /// The file's label.
    pub label: String,
    /// The finding.
    pub finding: Saturation,
    /// In words.
    pub text: String,
}

/// One workload across the files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// The workload and protocol.
    pub key: WorkloadKey,
    /// Its name in the report (`rr1c-1x1`, `rr1c-1x1--udp`).
    pub title: String,
    /// Its kind, as the results documents name it (`rr`, `crr`, `mix`,
    /// `stream`, `profile`): request/response kinds are charted in
    /// transactions per second, the others in bits per second.
    pub kind: String,
    /// For request/response workloads of fixed sizes, the larger of the
    /// request and the response, bytes.
    pub transaction_bytes: Option<u64>,
    /// Every user count any file measured, in increasing order.
    pub users: Vec<u32>,
    /// Per candidate: where its throughput difference crosses zero (judged
    /// by the same significance rule as the verdicts).
    pub break_even: Vec<BreakEvenNote>,
    /// Per file that saturates: from where.
    pub saturation: Vec<SaturationNote>,
    /// Per file with a known link capacity: whether the link is sufficient
    /// for the workload, and from which user count it is not.
    pub sufficiency: Vec<SufficiencyNote>,
}

/// Whether a file's link is sufficient for a workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SufficiencyNote {
    /// The file's label.
    pub label: String,
    /// The answer.
    pub finding: Sufficiency,
    /// In words.
    pub text: String,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// The linkperf version that made the report.
    pub linkperf_version: &'static str,
    /// How it compared.
    pub options: Options,
    /// The files, the base first.
    pub files: Vec<FileInfo>,
    /// Each file's tests, summarised, in the order of [`files`](Self::files).
    pub figures: Vec<FileFigures>,
    /// Each candidate against the base (empty for a one-file report).
    pub comparisons: Vec<CandidateComparison>,
    /// Per workload of closed-loop tests: break-even and saturation.
    pub workloads: Vec<WorkloadReport>,
    /// Per workload, protocol and user count of open-loop tests: the
    /// latency against the offered load of each file, and its knee (absent
    /// from the JSON when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub open_loop: Vec<OpenLoopGroup>,
    /// What may make the report say more than it should.
    pub consistency: Consistency,
}

impl WorkloadReport {
    /// Whether the workload is request/response (rr, crr, mix): its
    /// throughput is charted in transactions per second.
    pub fn is_transactional(&self) -> bool {
        crate::figures::transactional(&self.kind)
    }
}

impl Report {
    /// Every "not sufficient" answer of the report, in workload order: what
    /// its summary states first.
    pub fn insufficient(&self) -> Vec<&str> {
        self.workloads
            .iter()
            .flat_map(|w| &w.sufficiency)
            .filter(|n| n.finding.is_insufficient())
            .map(|n| n.text.as_str())
            .collect()
    }

    /// The report of one results file: absolute figures, saturation, unstable
    /// and failed tests.
    pub fn single(file: Source<'_>, options: Options) -> Report {
        Self::build(&[file], options)
    }

    /// The report of `candidates` against `base`.
    pub fn comparison(base: Source<'_>, candidates: &[Source<'_>], options: Options) -> Report {
        let mut all = vec![base];
        all.extend_from_slice(candidates);
        Self::build(&all, options)
    }

    /// What every output says when suspect runs were counted
    /// (`--include-suspect`), `None` otherwise: how many, and that their
    /// figures failed a check.
    pub fn suspect_note(&self) -> Option<String> {
        if !self.options.include_suspect {
            return None;
        }
        let n: u32 = self.figures.iter().map(FileFigures::suspect_included).sum();
        Some(format!(
            "SUSPECT RUNS INCLUDED (--include-suspect): {n} run{} that failed a validity check {} counted in these figures beside the ok ones; a difference may be the check's cause (a busy host, a stall), not the compared configurations.",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        ))
    }

    /// Whether this compares files (rather than reporting on one).
    pub fn is_comparison(&self) -> bool {
        !self.comparisons.is_empty()
    }

    /// The report's title: "hs against osa", or the one file's label.
    pub fn title(&self) -> String {
        if self.is_comparison() {
            let cands: Vec<&str> = self.files[1..].iter().map(|f| f.label.as_str()).collect();
            format!("{} against {}", join_and(&cands), self.files[0].label)
        } else {
            self.files[0].label.clone()
        }
    }

    /// The base's label.
    pub fn base(&self) -> &str {
        &self.files[0].label
    }

    /// The figures of the file labelled `label`.
    pub fn figures_of(&self, label: &str) -> Option<&FileFigures> {
        self.figures.iter().find(|f| f.label == label)
    }

    fn build(sources: &[Source<'_>], options: Options) -> Report {
        let labels = unique_labels(sources);
        let figures: Vec<FileFigures> = sources
            .iter()
            .zip(&labels)
            .map(|(s, l)| FileFigures::over(s.doc, l, options.include_suspect))
            .collect();
        let files: Vec<FileInfo> = sources
            .iter()
            .zip(&labels)
            .map(|(s, label)| FileInfo {
                label: label.clone(),
                path: s.path.to_string(),
                created: s.doc.created.clone(),
                linkperf_version: s.doc.linkperf_version.clone(),
                command_line: s.doc.command_line.clone(),
                environment: s.doc.environment.clone(),
                link: s.doc.link.clone(),
                suite: s.doc.suite.as_ref().map(|r| r.name.clone()),
                tests: s.doc.tests.len(),
                settings: settings(s.doc),
                capacity_bits_per_s: s.capacity(&options).map(|(c, _)| c),
                capacity_origin: s.capacity(&options).map(|(_, o)| o),
            })
            .collect();
        let comparisons: Vec<CandidateComparison> = figures[1..]
            .iter()
            .map(|c| {
                let mut cc = compare_tests(&figures[0], c, options.threshold_pct, options.cpu_side);
                let n = figures[0].suspect_included() + c.suspect_included();
                if options.include_suspect {
                    cc.summary
                        .push_str(&format!(" Suspect runs included (--include-suspect): {n}."));
                }
                cc
            })
            .collect();

        let mut consistency = Consistency::default();
        for f in &figures {
            flag_tests(f, &mut consistency);
        }
        consistency.stability_unjudged = stability_unjudged(&figures);
        for (s, label) in sources.iter().zip(&labels) {
            if let Some(note) = sender_counted(label, s.doc) {
                consistency.counting.push(note);
            }
        }
        for (s, label) in sources.iter().zip(&labels).skip(1) {
            consistency.environment.extend(environment_differences(
                (&labels[0], sources[0].doc),
                (label, s.doc),
            ));
            consistency.placement.extend(placement_differences(
                (&labels[0], sources[0].doc),
                (label, s.doc),
            ));
        }
        for f in &figures[1..] {
            consistency
                .offered
                .extend(offered_differences(&figures[0], f));
        }

        let mut keys: Vec<WorkloadKey> = Vec::new();
        for f in &figures {
            // Open-loop tests are charted against their offered rate, not
            // their users: they have groups of their own.
            for t in f.tests.iter().filter(|t| !t.workload.open_loop) {
                if !keys.contains(&t.workload) {
                    keys.push(t.workload.clone());
                }
            }
        }
        let workloads = keys
            .into_iter()
            .map(|key| workload_report(key, &figures, &files, &comparisons, &mut consistency))
            .collect();
        let open_loop = open_loop_groups(&figures);

        Report {
            schema: REPORT_SCHEMA,
            linkperf_version: env!("CARGO_PKG_VERSION"),
            options,
            files,
            figures,
            comparisons,
            workloads,
            open_loop,
            consistency,
        }
    }
}

fn workload_report(
    key: WorkloadKey,
    figures: &[FileFigures],
    files: &[FileInfo],
    comparisons: &[CandidateComparison],
    consistency: &mut Consistency,
) -> WorkloadReport {
    let mut users: Vec<u32> = figures
        .iter()
        .flat_map(|f| f.workload(&key).into_iter().map(|t| t.users))
        .collect();
    users.sort_unstable();
    users.dedup();
    let first = figures
        .iter()
        .find_map(|f| f.workload(&key).first().copied());
    let kind = first.map_or_else(String::new, |t| t.kind.clone());
    let transaction_bytes = first.and_then(|t| t.transaction_bytes);

    let break_even = comparisons
        .iter()
        .map(|c| {
            let points: Vec<BreakEvenPoint> = c
                .workload(&key)
                .iter()
                .filter_map(|t| {
                    t.metric(Metric::Throughput).map(|m| BreakEvenPoint {
                        users: t.users,
                        relative_pct: m.judgement.relative_pct,
                        outcome: m.judgement.outcome,
                    })
                })
                .collect();
            let finding = break_even(&points);
            BreakEvenNote {
                candidate: c.candidate.clone(),
                text: finding.describe(&c.candidate),
                finding,
            }
        })
        .collect();

    let mut notes = Vec::new();
    for (f, info) in figures.iter().zip(files) {
        let points: Vec<SaturationPoint> = f
            .workload(&key)
            .iter()
            .filter_map(|t| {
                Some(SaturationPoint {
                    users: t.users,
                    throughput_bytes_per_s: t.mean(Metric::Throughput)?,
                    busiest_direction_bytes_per_s: t.busiest_direction_bytes_per_s?,
                    mean_time_us: t.mean(Metric::TimeMean),
                    unstable: t.unstable,
                    throughput_cv: t.throughput_cv,
                })
            })
            .collect();
        if let Some(cap) = info.capacity_bits_per_s {
            let above = above_capacity(&points, cap);
            if let Some((u, bits)) = above
                .iter()
                .copied()
                .reduce(|a, b| if b.1 > a.1 { b } else { a })
            {
                consistency.capacity.push(format!(
                    "{}: {key} carried up to {} in its busier direction (at {u} users), more than the {} capacity allows: the capacity does not describe this path, so saturation is judged by the knee rule alone",
                    info.label,
                    rate(bits / 8.0),
                    capacity(cap.as_f64())
                ));
            }
        }
        let cap = info
            .capacity_bits_per_s
            .filter(|c| above_capacity(&points, *c).is_empty());
        if let Some(finding) = saturation(&points, cap) {
            notes.push(SaturationNote {
                label: f.label.clone(),
                text: finding.describe(&f.label),
                finding,
            });
        }
    }
    let sufficiency = figures
        .iter()
        .zip(files)
        .enumerate()
        .filter_map(|(i, (f, info))| {
            let cap = info.capacity_bits_per_s?;
            let base = (i > 0).then(|| &figures[0]);
            let points: Vec<SufficiencyPoint> = f
                .workload(&key)
                .iter()
                .map(|t| {
                    let base_p99 = base.and_then(|b| {
                        b.workload(&key)
                            .iter()
                            .find(|bt| bt.users == t.users)
                            .and_then(|bt| bt.mean(Metric::TimeP99))
                    });
                    SufficiencyPoint {
                        users: t.users,
                        bits_per_s: t
                            .wire
                            .as_ref()
                            .map(|w| w.bits_per_s)
                            .or(t.busiest_direction_bytes_per_s.map(|b| b * 8.0)),
                        bits_per_s_interval: match &t.wire {
                            Some(w) => w.bits_per_s_interval,
                            None => t
                                .busiest_direction_interval
                                .map(|(low, high)| (low * 8.0, high * 8.0)),
                        },
                        wire: t.wire.is_some(),
                        interface: t.wire.as_ref().map(|w| w.interface.clone()),
                        drop_ratio: t.wire.as_ref().map_or(0.0, |w| w.drop_ratio),
                        drops: t.wire.as_ref().map_or(0, |w| w.drops),
                        lost: t.lost_transactions.unwrap_or(0),
                        p99_us: t.mean(Metric::TimeP99),
                        base_p99_us: base_p99,
                    }
                })
                .collect();
            let finding = sufficiency(&points, cap, base.map(|b| b.label.as_str()))?;
            Some(SufficiencyNote {
                label: f.label.clone(),
                text: finding.describe(&f.label, &key.to_string()),
                finding,
            })
        })
        .collect();
    WorkloadReport {
        title: key.to_string(),
        key,
        kind,
        transaction_bytes,
        users,
        break_even,
        saturation: notes,
        sufficiency,
    }
}

/// A test setting as text.
type Setting = fn(&TestConfig) -> String;

/// The settings [`FileInfo::settings`] lists.
const SETTINGS: &[(&str, Setting)] = &[
    ("server", |c| c.server.clone()),
    ("client workers", |c| placement(&c.client_placement)),
    ("server workers", |c| placement(&c.server_placement)),
    ("SO_SNDBUF requested", |c| {
        c.sndbuf
            .map_or_else(|| "kernel default".into(), |b| format!("{b} bytes"))
    }),
    ("SO_RCVBUF requested", |c| {
        c.rcvbuf
            .map_or_else(|| "kernel default".into(), |b| format!("{b} bytes"))
    }),
    ("congestion control requested", |c| {
        c.cc.clone().unwrap_or_else(|| "host default".into())
    }),
    ("MSS requested", |c| {
        c.mss
            .map_or_else(|| "kernel's choice".into(), |m| format!("{m} bytes"))
    }),
];

/// "2 threads, pinned to 0,1, busy-poll".
fn placement(p: &Placement) -> String {
    let mut s = match p.threads {
        Threads::ServerDefault => "the server's default threads (one per CPU)".to_string(),
        Threads::Count(n) => format!("{n} thread{}", if n == 1 { "" } else { "s" }),
    };
    if let Some(a) = &p.affinity {
        s.push_str(&format!(", pinned to {a}"));
    }
    if p.busy_poll {
        s.push_str(", busy-poll");
    }
    s
}

/// Each setting of [`SETTINGS`] over the document's tests.
fn settings(doc: &ResultsDocument) -> Vec<(String, String)> {
    SETTINGS
        .iter()
        .map(|(name, get)| {
            let mut values: Vec<String> = Vec::new();
            for t in &doc.tests {
                let v = get(&t.config);
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            let value = match values.len() {
                0 => "-".to_string(),
                1 => values.remove(0),
                _ => format!("varies: {}", values.join("; ")),
            };
            (name.to_string(), value)
        })
        .collect()
}

/// The documents' labels, made unique by the file name where two are equal.
fn unique_labels(sources: &[Source<'_>]) -> Vec<String> {
    let mut labels: Vec<String> = sources.iter().map(|s| s.doc.label.clone()).collect();
    let dup = |labels: &[String], i: usize| labels.iter().filter(|l| **l == labels[i]).count() > 1;
    let stems: Vec<String> = sources
        .iter()
        .map(|s| {
            Path::new(s.path)
                .file_stem()
                .map_or_else(|| s.path.to_string(), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    let first: Vec<bool> = (0..labels.len()).map(|i| dup(&labels, i)).collect();
    for (i, d) in first.into_iter().enumerate() {
        if d {
            labels[i] = format!("{} ({})", labels[i], stems[i]);
        }
    }
    let second: Vec<bool> = (0..labels.len()).map(|i| dup(&labels, i)).collect();
    for (i, d) in second.into_iter().enumerate() {
        if d {
            labels[i] = format!("{} #{}", labels[i], i + 1);
        }
    }
    labels
}

/// "a", "a and b", "a, b and c".
pub(crate) fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// What a file's throughput counted at the sender, if any of its ok runs did
/// (files of `linkperf/results/v1`, runs against a foreign server): those
/// figures include bytes still in flight when the window closed.
fn sender_counted(label: &str, doc: &linkperf_results::ResultsDocument) -> Option<String> {
    use linkperf_results::{Counter, RunStatus};
    let counted: Vec<&str> = doc
        .tests
        .iter()
        .filter(|t| {
            t.runs.iter().any(|r| {
                r.status == RunStatus::Ok
                    && r.throughput
                        .is_some_and(|th| th.counted_at.client_to_server == Counter::Sender)
                    && t.workload.direction != linkperf_workload::Direction::ServerToClient
            })
        })
        .map(|t| t.name.as_str())
        .collect();
    if counted.is_empty() {
        return None;
    }
    let why = if doc.schema == linkperf_results::SCHEMA_V1 {
        format!("the file is {}", linkperf_results::SCHEMA_V1)
    } else {
        "its server did not report what it received".to_string()
    };
    Some(format!(
        "Counted at the sender: the client-to-server throughput of {} in {label} ({why}), which includes bytes still in flight when the window closed; a receiver-counted file may read lower for the same path.",
        if counted.len() > 4 {
            format!("{} tests", counted.len())
        } else {
            counted.join(", ")
        }
    ))
}
