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

/// One metric of one test: each pair's mean, by source row and target
/// column (`None`: no measured run, or no pair).
#[derive(Debug, Clone, Serialize)]
pub struct Heatmap {
    /// The test (without the pair).
    pub test: String,
    /// The metric.
    pub metric: Metric,
    /// `cells[source][target]`.
    pub cells: Vec<Vec<Option<Cell>>>,
    /// The median over the cells of ok runs.
    pub median: Option<f64>,
}

/// One pair's figure in a heatmap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    /// The mean of the pair's ok runs, or, when it has none, of its suspect
    /// runs (shown as such, and left out of the median and every verdict).
    pub value: f64,
    /// The runs averaged.
    pub runs: u32,
    /// Whether they are suspect runs.
    pub suspect: bool,
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

/// A pair's cell for `metric`: its ok runs' mean, else its suspect runs'.
fn cell(t: &TestResult, metric: Metric) -> Option<Cell> {
    for status in [
        linkperf_results::RunStatus::Ok,
        linkperf_results::RunStatus::Suspect,
    ] {
        let values: Vec<f64> = t
            .runs
            .iter()
            .filter(|r| r.status == status)
            .filter_map(|r| metric.value(r))
            .collect();
        if let Some(value) = mean(&values) {
            return Some(Cell {
                value,
                runs: values.len() as u32,
                suspect: status == linkperf_results::RunStatus::Suspect,
            });
        }
    }
    None
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
                        let Some(c) = cell(t, metric) else { continue };
                        let Some(a) = t.runs.iter().find_map(|r| r.agents.as_ref()) else {
                            continue;
                        };
                        if let (Some(&s), Some(&d)) = (
                            index.get(a.source.name.as_str()),
                            index.get(a.target.name.as_str()),
                        ) {
                            cells[s][d] = Some(c);
                            if !c.suspect {
                                all.push(c.value);
                            }
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
    use crate::testdata::{self, fig};
    use crate::{Outcome, Verdict};
    use linkperf_measured::AgentIdentity;
    use linkperf_mesh::{Agent, Pair};
    use linkperf_results::{MeshRecord, RunAgent, RunAgents, RunStatus, TestConfig};
    use linkperf_workload::{Placement, Protocol, TestSpec};

    /// Two nodes with a host and a pod agent each, every directed pair run
    /// three times, each class at a throughput known by construction:
    /// same node 8 GB/s, cross-node host 1 GB/s, cross-node pod 0.8 GB/s,
    /// host to pod and pod to host 0.9 GB/s; but n2-pod to n1-host 0.5 GB/s,
    /// the third run of n1-pod to n2-host failed, and n1-host to n1-pod has
    /// only suspect runs.
    fn mesh_doc() -> ResultsDocument {
        let mut doc = testdata::document("mesh-all-pairs");
        let agents: Vec<Agent> = [("n1", "host"), ("n1", "pod"), ("n2", "host"), ("n2", "pod")]
            .iter()
            .enumerate()
            .map(|(i, (node, network))| Agent {
                name: format!("{node}-{network}"),
                address: format!("198.18.0.{}:7410", i + 1),
                identity: AgentIdentity {
                    node: Some(node.to_string()),
                    network: Some(network.to_string()),
                    zone: None,
                },
            })
            .collect();
        let mut pairs = Vec::new();
        let spec = TestSpec::new(
            "str-writex30k".parse().unwrap(),
            Protocol::Tcp,
            1,
            std::time::Duration::from_secs(1),
        );
        for s in 0..4u32 {
            for t in (0..4u32).filter(|t| *t != s) {
                pairs.push(Pair {
                    source: s,
                    target: t,
                });
                let (a, b) = (&agents[s as usize], &agents[t as usize]);
                let class = classify(&a.identity, &b.identity);
                let bytes = match (class.locality, class.network.as_str()) {
                    _ if a.name == "n2-pod" && b.name == "n1-host" => 0.5e9,
                    (Locality::SameNode, _) => 8e9,
                    (_, "host") => 1e9,
                    (_, "pod") => 0.8e9,
                    _ => 0.9e9,
                };
                let name = format!("{}@{}->{}", spec.name(), a.name, b.name);
                for k in 0..3u32 {
                    // ±1 % around the class's figure, so that runs vary.
                    let f = fig(bytes * (0.99 + 0.01 * f64::from(k)), 50.0, 2e9);
                    let mut run = testdata::run(k + 1, f);
                    if a.name == "n1-pod" && b.name == "n2-host" && k == 2 {
                        run = linkperf_results::failed_run(
                            3,
                            "2024-05-01T10:00:00Z".into(),
                            RunStatus::Failed,
                            "agent n1-pod toward n2-host: connection refused".into(),
                        );
                    }
                    if a.name == "n1-host" && b.name == "n1-pod" {
                        run.status = RunStatus::Suspect;
                    }
                    let side = |x: &Agent| RunAgent {
                        name: x.name.clone(),
                        address: x.address.clone(),
                        identity: x.identity.clone(),
                        environment: Some(testdata::environment("6.1.0", 1500)),
                    };
                    run.agents = Some(RunAgents {
                        source: side(a),
                        target: side(b),
                        path_class: class.to_string(),
                    });
                    let config = TestConfig::from_spec(
                        &spec,
                        b.address.clone(),
                        Placement::with_threads(1),
                        Placement::with_threads(1),
                    );
                    doc.push_named_run(name.clone(), &spec, config, run);
                }
            }
        }
        doc.refresh_summaries();
        doc.mesh = Some(MeshRecord {
            plan: "all-pairs".into(),
            seed: 1,
            concurrency: "1".into(),
            agents,
            pairs,
        });
        doc
    }

    #[test]
    fn heatmaps_hold_each_pairs_mean_by_source_and_destination() {
        let r = MeshReport::of(&mesh_doc(), Options::default());
        assert_eq!(r.agents, ["n1-host", "n1-pod", "n2-host", "n2-pod"]);
        assert_eq!(r.tests, ["str-writex30k--1"]);
        assert_eq!(r.heatmaps.len(), HEATMAP_METRICS.len());
        let h = &r.heatmaps[0];
        assert_eq!(h.metric, Metric::Throughput);
        for (i, row) in h.cells.iter().enumerate() {
            assert_eq!(row.len(), 4);
            assert_eq!(row[i], None, "no agent meets itself");
        }
        let c = h.cells[0][2].unwrap();
        assert!(
            (c.value - 1e9).abs() < 1.0 && c.runs == 3 && !c.suspect,
            "{c:?}"
        );
        let two_ok = h.cells[1][2].unwrap();
        assert_eq!(two_ok.runs, 2, "the failed run is not in the mean");
        let suspect = h.cells[0][1].unwrap();
        assert!(suspect.suspect && (suspect.value - 8e9).abs() < 1.0);
        // The median of the 11 pairs with ok runs: 0.9 GB/s.
        assert!((h.median.unwrap() - 0.9e9).abs() < 1.0, "{:?}", h.median);
    }

    #[test]
    fn the_slowest_pairs_are_listed_with_their_distance_from_the_median() {
        let r = MeshReport::of(&mesh_doc(), Options::default());
        let first = &r.slowest[0];
        assert_eq!(first.pair, "n2-pod->n1-host");
        assert_eq!(first.class, "cross-node pod-host");
        // 0.5 against a median of 0.9 (suspect runs included in neither).
        let expect = (1.0 - 0.5 / 0.9) * 100.0;
        assert!((first.below_median_pct - expect).abs() < 0.1, "{first:?}");
        assert!(r.slowest.len() <= SLOWEST);
        assert!(r.slowest.iter().all(|p| p.below_median_pct > 0.0));
    }

    #[test]
    fn node_totals_count_each_nodes_runs_on_either_side() {
        let r = MeshReport::of(&mesh_doc(), Options::default());
        let names: Vec<&str> = r.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["n1", "n2"]);
        let n1 = &r.nodes[0];
        assert_eq!(n1.agents, 2);
        assert_eq!(n1.failed_runs, 1, "n1-pod's failed run");
        assert_eq!(r.nodes[1].failed_runs, 1, "toward n2-host");
        assert_eq!(r.failures.len(), 1);
        assert!(r.failures[0].1.contains("connection refused"));
        // 36 runs: 1 failed, 3 suspect.
        assert_eq!(r.ok_runs, 32);
    }

    #[test]
    fn path_classes_are_compared_as_any_two_files_are() {
        let r = MeshReport::of(&mesh_doc(), Options::default());
        let titles: Vec<&str> = r.comparisons.iter().map(|c| c.title.as_str()).collect();
        assert!(
            titles.contains(&"pod network vs host network (cross-node)"),
            "{titles:?}"
        );
        assert!(
            titles.contains(&"cross-node vs same-node (pod-host network)"),
            "{titles:?}"
        );
        let overlay = r
            .comparisons
            .iter()
            .find(|c| c.title == "pod network vs host network (cross-node)")
            .unwrap();
        let t = &overlay.comparison.tests[0];
        assert_eq!(t.name, "str-writex30k--1");
        assert_eq!(
            (t.base_runs, t.candidate_runs),
            (6, 6),
            "two pairs of three runs each"
        );
        let m = t.metric(Metric::Throughput).unwrap();
        assert!((m.judgement.relative_pct + 20.0).abs() < 0.5, "{m:?}");
        assert_eq!(m.judgement.outcome, Outcome::Worse);
        assert_eq!(t.verdict, Verdict::Worse);
        assert_eq!(overlay.dir, "pod-network-vs-host-network-cross-node");
        let text = r.text();
        assert!(
            text.contains(
                "pod network vs host network (cross-node): cross-node pod is better in 0 of 1 test"
            ),
            "{text}"
        );
        assert!(
            text.contains("str-writex30k--1: throughput -20.0 %"),
            "{text}"
        );
        assert!(
            text.contains("slow: str-writex30k--1 n2-pod->n1-host"),
            "{text}"
        );
        assert!(
            text.contains("failed: str-writex30k--1@n1-pod->n2-host"),
            "{text}"
        );
    }

    #[test]
    fn the_page_shows_every_part_and_marks_suspect_cells() {
        let r = MeshReport::of(&mesh_doc(), Options::default());
        let page = crate::mesh_page::mesh_page(&r);
        for part in [
            "<h1>Mesh of 4 agents</h1>",
            "Path classes compared",
            "href=\"pod-network-vs-host-network-cross-node/index.html\"",
            "str-writex30k--1: throughput (source rows × destination columns)",
            "Slowest pairs",
            "<h2>Per node</h2>",
            "Runs that did not complete",
            "<td class=suspect",
        ] {
            assert!(page.contains(part), "{part}");
        }
        assert_eq!(
            page.matches("<table>").count(),
            page.matches("</table>").count()
        );
    }

    #[test]
    fn a_document_without_a_mesh_gives_an_empty_report() {
        let r = MeshReport::of(&testdata::document("plain"), Options::default());
        assert!(r.agents.is_empty() && r.heatmaps.is_empty() && r.comparisons.is_empty());
    }

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
