//! The mesh report, from a mesh's results document alone: per test and
//! metric a heatmap of source × destination, the slowest pairs and how far
//! below the median they are, per-node totals, and the path classes compared
//! with the comparison every other report uses (relative differences,
//! significance, verdicts): each class's runs gathered into a document of
//! their own, pairs standing in for repeats, one class the base of another
//! that differs from it in one thing only (the network, the node, the zone).

use std::collections::{BTreeMap, BTreeSet};

use linkperf_mesh::{classify, Locality, PathClass, ZonePath};
use linkperf_results::{ResultsDocument, Run, TestResult};
use serde::Serialize;

use crate::{Better, CandidateComparison, Metric, Options, Report, Source};

/// The metrics of the heatmaps: throughput, p99 transaction time, and the
/// CPU efficiency of the target's host.
pub const HEATMAP_METRICS: [Metric; 3] = [
    Metric::Throughput,
    Metric::TimeP99,
    Metric::ServerSystemEfficiency,
];
/// Most agents a heatmap shows: past it, per-node totals say it.
pub const MAX_HEATMAP_AGENTS: usize = 64;
/// Slowest pairs listed per test.
pub const SLOWEST: usize = 5;

/// Everything the mesh report shows.
#[derive(Debug, Clone, Serialize)]
pub struct MeshReport {
    /// Agents by name, in the mesh's order.
    pub agents: Vec<String>,
    /// The suite's test names (without the pair).
    pub tests: Vec<String>,
    /// Runs that completed ok, and those that did not.
    pub ok_runs: usize,
    /// Runs that failed or were aborted, each with its test and reason.
    pub failures: Vec<(String, String)>,
    /// Per test and metric.
    pub heatmaps: Vec<Heatmap>,
    /// Per test, the pairs furthest below the median throughput.
    pub slowest: Vec<SlowPair>,
    /// Per node.
    pub nodes: Vec<NodeTotals>,
    /// Per path class: its pairs and ok runs.
    pub classes: Vec<(String, usize, usize)>,
    /// Classes compared.
    pub comparisons: Vec<ClassComparison>,
}

/// One metric of one test: the mean of each pair's ok runs, by source row
/// and target column (`None`: no ok run).
#[derive(Debug, Clone, Serialize)]
pub struct Heatmap {
    /// The test (without the pair).
    pub test: String,
    /// The metric.
    pub metric: Metric,
    /// `cells[source][target]`.
    pub cells: Vec<Vec<Option<f64>>>,
    /// The median over the pairs with a value.
    pub median: Option<f64>,
}

/// A pair of one test below the median.
#[derive(Debug, Clone, Serialize)]
pub struct SlowPair {
    /// The test.
    pub test: String,
    /// `source->target`.
    pub pair: String,
    /// Its path class.
    pub class: String,
    /// Its mean throughput, bytes/s.
    pub bytes_per_s: f64,
    /// How far below the test's median, percent (positive: below).
    pub below_median_pct: f64,
}

/// One node's share of the mesh.
#[derive(Debug, Clone, Serialize)]
pub struct NodeTotals {
    /// The node (or the agent's name when it states none).
    pub node: String,
    /// Its agents.
    pub agents: usize,
    /// Mean throughput of its ok runs as the source, bytes/s.
    pub as_source_bytes_per_s: Option<f64>,
    /// Mean throughput of its ok runs as the target, bytes/s.
    pub as_target_bytes_per_s: Option<f64>,
    /// Its ok runs (either side).
    pub ok_runs: usize,
    /// Its runs that did not complete (either side).
    pub failed_runs: usize,
}

/// One path class against another.
#[derive(Debug, Clone, Serialize)]
pub struct ClassComparison {
    /// E.g. `pod network vs host network (cross-node)`.
    pub title: String,
    /// The sub-directory of its full report.
    pub dir: String,
    /// The comparison itself.
    pub comparison: CandidateComparison,
    /// The full report (charts, tables), as any comparison's.
    #[serde(skip)]
    pub report: Report,
}

/// The test of a mesh test's name: `rr1c-1x1--1@n1->n2` → `rr1c-1x1--1`.
pub fn base_test_name(name: &str) -> &str {
    name.rsplit_once('@').map_or(name, |(t, _)| t)
}

/// The path class of a run's pair, from both agents' identities.
fn class_of(run: &Run) -> Option<PathClass> {
    let a = run.agents.as_ref()?;
    Some(classify(&a.source.identity, &a.target.identity))
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The ok runs of a test.
fn ok_runs(t: &TestResult) -> impl Iterator<Item = &Run> {
    t.runs
        .iter()
        .filter(|r| r.status == linkperf_results::RunStatus::Ok)
}

impl MeshReport {
    /// The report of a mesh's document (a document without a mesh gives an
    /// empty one).
    pub fn of(doc: &ResultsDocument, options: Options) -> MeshReport {
        let agents: Vec<String> = doc
            .mesh
            .as_ref()
            .map(|m| m.agents.iter().map(|a| a.name.clone()).collect())
            .unwrap_or_default();
        let index: BTreeMap<&str, usize> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.as_str(), i))
            .collect();
        let mut tests: Vec<String> = Vec::new();
        for t in &doc.tests {
            let b = base_test_name(&t.name).to_string();
            if !tests.contains(&b) {
                tests.push(b);
            }
        }
        let mut failures = Vec::new();
        let mut ok = 0;
        for t in &doc.tests {
            for r in &t.runs {
                match r.status {
                    linkperf_results::RunStatus::Ok => ok += 1,
                    linkperf_results::RunStatus::Suspect => {}
                    _ => failures.push((
                        t.name.clone(),
                        r.error.clone().unwrap_or_else(|| r.status.word().into()),
                    )),
                }
            }
        }
        let mut heatmaps = Vec::new();
        let mut slowest = Vec::new();
        for test in &tests {
            let of_test: Vec<&TestResult> = doc
                .tests
                .iter()
                .filter(|t| base_test_name(&t.name) == test)
                .collect();
            if agents.len() <= MAX_HEATMAP_AGENTS {
                for metric in HEATMAP_METRICS {
                    let mut cells = vec![vec![None; agents.len()]; agents.len()];
                    let mut all = Vec::new();
                    for t in &of_test {
                        let values: Vec<f64> = ok_runs(t).filter_map(|r| metric.value(r)).collect();
                        let Some(m) = mean(&values) else { continue };
                        let Some(a) = t.runs.iter().find_map(|r| r.agents.as_ref()) else {
                            continue;
                        };
                        if let (Some(&s), Some(&d)) = (
                            index.get(a.source.name.as_str()),
                            index.get(a.target.name.as_str()),
                        ) {
                            cells[s][d] = Some(m);
                            all.push(m);
                        }
                    }
                    heatmaps.push(Heatmap {
                        test: test.clone(),
                        metric,
                        cells,
                        median: median(&mut all),
                    });
                }
            }
            let mut pairs: Vec<(String, String, f64)> = of_test
                .iter()
                .filter_map(|t| {
                    let values: Vec<f64> = ok_runs(t)
                        .filter_map(|r| Metric::Throughput.value(r))
                        .collect();
                    let a = t.runs.iter().find_map(|r| r.agents.as_ref())?;
                    let class = class_of(t.runs.iter().find(|r| r.agents.is_some())?)?;
                    Some((
                        format!("{}->{}", a.source.name, a.target.name),
                        class.to_string(),
                        mean(&values)?,
                    ))
                })
                .collect();
            let mut values: Vec<f64> = pairs.iter().map(|p| p.2).collect();
            if let Some(med) = median(&mut values).filter(|m| *m > 0.0) {
                pairs.sort_by(|a, b| a.2.total_cmp(&b.2));
                slowest.extend(pairs.into_iter().filter(|p| p.2 < med).take(SLOWEST).map(
                    |(pair, class, v)| SlowPair {
                        test: test.clone(),
                        pair,
                        class,
                        bytes_per_s: v,
                        below_median_pct: (1.0 - v / med) * 100.0,
                    },
                ));
            }
        }
        MeshReport {
            nodes: node_totals(doc),
            classes: class_counts(doc),
            comparisons: compare_classes(doc, options),
            agents,
            tests,
            ok_runs: ok,
            failures,
            heatmaps,
            slowest,
        }
    }

    /// The report in a few lines of text: what the controller prints.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "mesh of {} agents: {} runs ok, {} failed or aborted",
            self.agents.len(),
            self.ok_runs,
            self.failures.len()
        );
        for (class, pairs, ok) in &self.classes {
            let _ = writeln!(s, "  {class}: {pairs} pairs, {ok} ok runs");
        }
        for c in &self.comparisons {
            let _ = writeln!(s, "{}: {}", c.title, c.comparison.summary);
            for t in &c.comparison.tests {
                let rel = |m: Metric| {
                    t.metric(m)
                        .map(|x| {
                            // Shown as the change of the figure itself, not
                            // the better-is-positive difference.
                            let pct = match x.better {
                                Better::Higher => x.judgement.relative_pct,
                                Better::Lower => -x.judgement.relative_pct,
                            };
                            format!("{pct:+.1} %")
                        })
                        .unwrap_or_else(|| "n/a".into())
                };
                let _ = writeln!(
                    s,
                    "  {}: throughput {}, p99 transaction time {}; {} ({} vs {} runs)",
                    t.name,
                    rel(Metric::Throughput),
                    rel(Metric::TimeP99),
                    t.verdict.word(),
                    t.candidate_runs,
                    t.base_runs
                );
            }
        }
        for p in &self.slowest {
            let _ = writeln!(
                s,
                "slow: {} {} ({}): {:.3} Gbit/s, {:.1} % below the median",
                p.test,
                p.pair,
                p.class,
                p.bytes_per_s * 8.0 / 1e9,
                p.below_median_pct
            );
        }
        for (test, why) in self.failures.iter().take(20) {
            let _ = writeln!(s, "failed: {test}: {why}");
        }
        if self.failures.len() > 20 {
            let _ = writeln!(s, "failed: ... and {} more", self.failures.len() - 20);
        }
        s
    }
}

/// Per node: its agents' runs on either side.
fn node_totals(doc: &ResultsDocument) -> Vec<NodeTotals> {
    #[derive(Default)]
    struct Acc {
        agents: BTreeSet<String>,
        src: Vec<f64>,
        dst: Vec<f64>,
        ok: usize,
        failed: usize,
    }
    let mut nodes: BTreeMap<String, Acc> = BTreeMap::new();
    for t in &doc.tests {
        for r in &t.runs {
            let Some(a) = &r.agents else { continue };
            let tp = (r.status == linkperf_results::RunStatus::Ok)
                .then(|| Metric::Throughput.value(r))
                .flatten();
            for (side, is_source) in [(&a.source, true), (&a.target, false)] {
                let node = side
                    .identity
                    .node
                    .clone()
                    .unwrap_or_else(|| side.name.clone());
                let acc = nodes.entry(node).or_default();
                acc.agents.insert(side.name.clone());
                match r.status {
                    linkperf_results::RunStatus::Ok => acc.ok += 1,
                    linkperf_results::RunStatus::Suspect => {}
                    _ => acc.failed += 1,
                }
                if let Some(v) = tp {
                    if is_source {
                        acc.src.push(v)
                    } else {
                        acc.dst.push(v)
                    }
                }
            }
        }
    }
    nodes
        .into_iter()
        .map(|(node, a)| NodeTotals {
            node,
            agents: a.agents.len(),
            as_source_bytes_per_s: mean(&a.src),
            as_target_bytes_per_s: mean(&a.dst),
            ok_runs: a.ok,
            failed_runs: a.failed,
        })
        .collect()
}

fn class_counts(doc: &ResultsDocument) -> Vec<(String, usize, usize)> {
    let mut m: BTreeMap<String, (BTreeSet<String>, usize)> = BTreeMap::new();
    for t in &doc.tests {
        for r in &t.runs {
            let (Some(c), Some(a)) = (class_of(r), &r.agents) else {
                continue;
            };
            let e = m.entry(c.to_string()).or_default();
            e.0.insert(format!("{}->{}", a.source.name, a.target.name));
            if r.status == linkperf_results::RunStatus::Ok {
                e.1 += 1;
            }
        }
    }
    m.into_iter().map(|(c, (p, ok))| (c, p.len(), ok)).collect()
}

/// Each class's completed runs as a document of its own: its tests named
/// without the pair, every pair's runs as the test's runs.
pub fn class_document(doc: &ResultsDocument, class: &PathClass) -> ResultsDocument {
    let label = class.to_string();
    let mut out = ResultsDocument::new(label, doc.command_line.clone());
    out.created = doc.created.clone();
    out.linkperf_version = doc.linkperf_version.clone();
    for t in &doc.tests {
        for r in t.runs.iter().filter(|r| r.status.completed()) {
            if class_of(r).as_ref() != Some(class) {
                continue;
            }
            let mut r = r.clone();
            if let Some(a) = &r.agents {
                if out.environment.client.is_none() {
                    out.environment.client = a.source.environment.clone();
                    out.environment.server = a.target.environment.clone();
                }
            }
            let name = base_test_name(&t.name).to_string();
            r.run = out.find_test(&name).map_or(0, |x| x.runs.len()) as u32 + 1;
            out.push_named_run(name, &t.spec, t.config.clone(), r);
        }
    }
    out.refresh_summaries();
    out
}

/// The classes that differ from another in one thing only, compared: the
/// pod network against the host network, cross node against same node,
/// cross zone against same zone (the base second in each).
fn compare_classes(doc: &ResultsDocument, options: Options) -> Vec<ClassComparison> {
    let classes: BTreeSet<PathClass> = doc
        .tests
        .iter()
        .flat_map(|t| t.runs.iter().filter_map(class_of))
        .collect();
    let mut pairs: Vec<(String, PathClass, PathClass)> = Vec::new();
    for c in &classes {
        if c.network == "pod" {
            let host = c.with_network("host");
            if classes.contains(&host) {
                pairs.push((
                    format!("pod network vs host network ({})", where_of(c)),
                    host,
                    c.clone(),
                ));
            }
        }
        if c.locality == Locality::CrossNode {
            let same = PathClass {
                locality: Locality::SameNode,
                zone: ZonePath::Unknown,
                ..c.clone()
            };
            if c.zone != ZonePath::CrossZone && classes.contains(&same) {
                pairs.push((
                    format!("cross-node vs same-node ({} network)", c.network),
                    same,
                    c.clone(),
                ));
            }
        }
        if c.zone == ZonePath::CrossZone {
            let same = PathClass {
                zone: ZonePath::SameZone,
                ..c.clone()
            };
            if classes.contains(&same) {
                pairs.push((
                    format!("cross-zone vs same-zone ({} network)", c.network),
                    same,
                    c.clone(),
                ));
            }
        }
    }
    pairs
        .into_iter()
        .map(|(title, base, cand)| {
            let (b, c) = (class_document(doc, &base), class_document(doc, &cand));
            let (bl, cl) = (base.to_string(), cand.to_string());
            let report = Report::comparison(Source::new(&bl, &b), &[Source::new(&cl, &c)], options);
            let comparison = report.comparisons[0].clone();
            ClassComparison {
                dir: slug(&title),
                title,
                comparison,
                report,
            }
        })
        .collect()
}

/// Where a class's pairs are, in words: `cross-node`, `same-node cross-zone`.
fn where_of(c: &PathClass) -> String {
    let s = c.to_string();
    s.rsplit_once(' ').map_or(s.clone(), |(w, _)| w.to_string())
}

/// A directory name for a title.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_slugs() {
        assert_eq!(base_test_name("rr1c-1x1--1@n1->n2"), "rr1c-1x1--1");
        assert_eq!(base_test_name("rr1c-1x1--1"), "rr1c-1x1--1");
        assert_eq!(
            slug("pod network vs host network (cross-node)"),
            "pod-network-vs-host-network-cross-node"
        );
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
