//! A mesh across a lab cluster on this host: four "nodes" (network
//! namespaces) on a bridge (the host network, 198.18.0.0/24, each node's
//! link shaped to 200 Mbit/s) with a VXLAN overlay between them (the pod
//! network, 198.19.0.0/24), two agents per node, one on each network, and
//! `linkperf mesh` run from the first node as a Job's pod would.
//!
//! Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2; without them the
//! test says why and skips, or fails under LINKPERF_LAB_REQUIRED=1 (as
//! scripts/test.sh sets it as root). Nothing touches the root namespace: the
//! bridge is in a namespace of its own, and every namespace is named after
//! this process (`lpm<pid>-…`), so that runs in other worktrees never meet
//! it. They are removed when the test ends, failed or not.

use crate::util;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::control::key_file;
use crate::util::lab::{namespaces, sh};
use crate::util::mesh::{lab_ready, one_test_suite, Agent, AgentSpec, Controller};
use serde_json::Value;

const NODES: u32 = 4;
/// The host network's agents' port, and the pod network's.
const HOST_PORT: u16 = 7410;
const POD_PORT: u16 = 7411;
/// The rate of each node's link.
const RATE: &str = "200mbit";
/// Longest a mesh of this test may take.
const MESH_DEADLINE: Duration = Duration::from_secs(300);

/// The lab cluster's namespaces, removed when dropped.
struct Cluster {
    prefix: String,
}

impl Cluster {
    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    fn node(&self, k: u32) -> String {
        format!("{}-n{k}", self.prefix)
    }

    /// Every namespace of this cluster.
    fn namespaces(&self) -> Vec<String> {
        namespaces(&format!("{}-", self.prefix))
    }

    /// A bridge in its own namespace; each node a namespace with `eth0` on it
    /// (198.18.0.K) and `vx0`, a VXLAN device over eth0 to every other node
    /// (198.19.0.K).
    fn up(nodes: u32) -> Cluster {
        let c = Cluster {
            prefix: format!("lpm{}", std::process::id()),
        };
        for ns in c.namespaces() {
            sh("ip", &["netns", "del", &ns]);
        }
        let sw = c.switch();
        sh("ip", &["netns", "add", &sw]);
        sh("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        sh("ip", &["-n", &sw, "link", "set", "br0", "up"]);
        for k in 1..=nodes {
            let n = c.node(k);
            let port = format!("n{k}");
            sh("ip", &["netns", "add", &n]);
            sh(
                "ip",
                &[
                    "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", &n,
                ],
            );
            sh("ip", &["-n", &sw, "link", "set", &port, "master", "br0"]);
            // The wire into each node: a link of a known rate, so that what
            // a path carries is set by it and by the headers it adds, not by
            // how busy this host's CPUs are.
            sh(
                "tc",
                &[
                    "-n", &sw, "qdisc", "add", "dev", &port, "root", "tbf", "rate", RATE, "burst",
                    "131072", "latency", "5ms",
                ],
            );
            sh("ip", &["-n", &sw, "link", "set", &port, "up"]);
            sh("ip", &["-n", &n, "link", "set", "lo", "up"]);
            sh("ip", &["-n", &n, "link", "set", "eth0", "up"]);
            let host = format!("198.18.0.{k}");
            sh(
                "ip",
                &[
                    "-n",
                    &n,
                    "addr",
                    "add",
                    &format!("{host}/24"),
                    "dev",
                    "eth0",
                ],
            );
            sh(
                "ip",
                &[
                    "-n", &n, "link", "add", "vx0", "type", "vxlan", "id", "42", "local", &host,
                    "dstport", "4789", "dev", "eth0",
                ],
            );
            for j in (1..=nodes).filter(|j| *j != k) {
                sh(
                    "bridge",
                    &[
                        "-n",
                        &n,
                        "fdb",
                        "append",
                        "00:00:00:00:00:00",
                        "dev",
                        "vx0",
                        "dst",
                        &format!("198.18.0.{j}"),
                    ],
                );
            }
            sh(
                "ip",
                &[
                    "-n",
                    &n,
                    "addr",
                    "add",
                    &format!("198.19.0.{k}/24"),
                    "dev",
                    "vx0",
                ],
            );
            sh("ip", &["-n", &n, "link", "set", "vx0", "up"]);
        }
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for ns in self.namespaces() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

/// The agent of node `k` on `network` (`host` or `pod`).
fn agent(c: &Cluster, key: &Path, k: u32, network: &str) -> Agent {
    let (listen, port) = match network {
        "host" => (format!("198.18.0.{k}"), HOST_PORT),
        _ => (format!("198.19.0.{k}"), POD_PORT),
    };
    let node = format!("node{k}");
    let ns = c.node(k);
    Agent::start(&AgentSpec {
        netns: Some(&ns),
        listen: Some(&listen),
        port,
        key: Some(key),
        node: Some(&node),
        network: Some(network),
        extra: &[],
        ..AgentSpec::default()
    })
}

/// Whether a run measured its window (ok, or suspect for a busy host only).
fn measured(r: &Value) -> bool {
    match r["status"].as_str() {
        Some("ok") => true,
        Some("suspect") => util::failed_checks(r)
            .iter()
            .all(|c| util::BUSY_HOST_CHECKS.contains(c)),
        _ => false,
    }
}

/// The report's comparison of the pod network with the host network across
/// nodes: its throughput's relative difference (%) and the test's comparison.
fn overlay_throughput_pct(report: &Value) -> (f64, Value) {
    let overlay = report["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "pod network vs host network (cross-node)")
        .unwrap_or_else(|| panic!("no overlay comparison: {}", report["comparisons"]));
    let t = overlay["comparison"]["tests"][0].clone();
    let throughput = t["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "throughput.bytes_per_s")
        .unwrap_or_else(|| panic!("no throughput in {t}"))
        .clone();
    (throughput["relative_pct"].as_f64().unwrap(), t)
}

/// Test name → its runs.
fn runs_by_test(doc: &Value) -> Vec<(String, Vec<Value>)> {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["runs"].as_array().unwrap().clone(),
            )
        })
        .collect()
}

#[test]
fn a_four_node_mesh_survives_a_lost_agent_resumes_and_shows_the_overlays_cost() {
    let test = "a_four_node_mesh_survives_a_lost_agent_resumes_and_shows_the_overlays_cost";
    if !lab_ready(test) {
        return;
    }
    let _lab = crate::util::one_lab_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", "the lab mesh's key, 32 bytes long");
    let suite = one_test_suite(dir.path(), "str-writex30k", "1s");
    let cluster = Cluster::up(NODES);
    let mut agents: Vec<(String, Agent)> = Vec::new();
    for k in 1..=NODES {
        for network in ["host", "pod"] {
            agents.push((
                format!("node{k}-{network}"),
                agent(&cluster, &key, k, network),
            ));
        }
    }
    let list = agents
        .iter()
        .map(|(_, a)| a.addr().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let controller_ns = cluster.node(1);
    let all = dir.path().join("all");
    let args = |out: &Path, plan: &str, concurrency: &str| -> Vec<String> {
        [
            "mesh",
            "--agents",
            &list,
            "--auth-key",
            key.to_str().unwrap(),
            "--suite",
            suite.to_str().unwrap(),
            "--plan",
            plan,
            "--concurrency",
            concurrency,
            "--out",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    // 1. all-pairs, four at once: 8 agents, 56 directed pairs. One agent is
    // killed mid-mesh; its pairs fail with a reason, the others complete.
    let all_args = args(&all, "all-pairs", "4");
    let argv: Vec<&str> = all_args.iter().map(String::as_str).collect();
    let clock = std::time::Instant::now();
    let mut mesh = Controller::spawn(Some(&controller_ns), &argv);
    let started = mesh.wait_for(MESH_DEADLINE, |l| {
        l.starts_with("[8/") || l.starts_with("[9/") || l.starts_with("[10/")
    });
    assert!(
        started,
        "the mesh did not get to its 8th run: {}",
        mesh.seen()
    );
    let victim = agents.iter().position(|(n, _)| n == "node3-pod").unwrap();
    agents[victim].1.kill();
    let (code, out, err) = mesh.finish(MESH_DEADLINE);
    assert_eq!(code, 1, "failed runs make exit code 1:\n{out}\n{err}");
    assert!(err.contains("rerun them with --resume"), "{err}");
    let doc = crate::util::read_doc(&all.join("mesh.json"));
    let victim_addr = agents[victim].1.addr().to_string();
    let mut failed_of_victim = 0;
    let mut done = 0;
    for (name, runs) in runs_by_test(&doc) {
        let last = runs.last().unwrap();
        if name.contains("node3-pod") {
            if !measured(last) {
                failed_of_victim += 1;
                let why = last["error"].as_str().unwrap_or_default();
                assert!(
                    why.contains("node3-pod") || why.contains(&victim_addr),
                    "{name}: the reason names the agent: {why}"
                );
            }
        } else {
            assert!(
                runs.iter().any(measured),
                "{name} does not involve the lost agent and completes: {runs:?}"
            );
            done += 1;
        }
    }
    assert_eq!(done, 42, "every pair without the lost agent");
    assert!(failed_of_victim >= 1, "{out}");
    assert!(out.contains("failed"), "{out}");
    eprintln!(
        "the mesh with a lost agent, {:?}:\n{out}\n{err}",
        clock.elapsed()
    );
    let clock = std::time::Instant::now();

    // 2. The agent comes back; --resume runs what did not complete.
    agents[victim].1 = agent(&cluster, &key, 3, "pod");
    let mut resume_args = all_args.clone();
    resume_args.push("--resume".into());
    let argv: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    let (code, out, err) = Controller::spawn(Some(&controller_ns), &argv).finish(MESH_DEADLINE);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("resuming:"), "{err}");
    eprintln!("the resumed mesh, {:?}", clock.elapsed());
    let doc = crate::util::read_doc(&all.join("mesh.json"));
    let tests = runs_by_test(&doc);
    assert_eq!(tests.len(), 56, "8 agents make 56 pairs");
    for (name, runs) in &tests {
        assert!(runs.iter().any(measured), "{name}: {runs:?}");
        for r in runs {
            let a = &r["agents"];
            assert!(a["source"]["environment"].is_object(), "{name}: {a}");
            assert!(
                a["target"]["identity"]["network"].is_string(),
                "{name}: {a}"
            );
        }
    }
    let report = crate::util::read_doc(&all.join("report").join("mesh-report.json"));
    assert_eq!(report["agents"].as_array().unwrap().len(), 8);
    let heatmap = &report["heatmaps"][0];
    assert_eq!(heatmap["cells"].as_array().unwrap().len(), 8);
    assert!(all.join("report").join("index.html").is_file());
    // The overlay's cost, over the 12 cross-node pairs of each network: the
    // 50 bytes VXLAN adds to each packet on a link of a fixed rate.
    let (pct, t) = overlay_throughput_pct(&report);
    assert!(
        pct < 0.0,
        "the overlay's throughput is below the underlay's: {pct:+.1} %: {t}"
    );

    // 3. path-classes: a few pairs of each class, compared (four pairs a
    // class are too few to hold the sign of a 3.5 % difference on a busy
    // host: the all-pairs mesh above showed it).
    let classes = dir.path().join("classes");
    let class_args = args(&classes, "path-classes:4", "2");
    let argv: Vec<&str> = class_args.iter().map(String::as_str).collect();
    let clock = std::time::Instant::now();
    let (code, out, err) = Controller::spawn(Some(&controller_ns), &argv).finish(MESH_DEADLINE);
    assert_eq!(code, 0, "{out}\n{err}");
    eprintln!("the path classes, {:?}", clock.elapsed());
    let doc = crate::util::read_doc(&classes.join("mesh.json"));
    assert_eq!(
        doc["mesh"]["pairs"].as_array().unwrap().len(),
        6 * 4,
        "six classes among 4 nodes × {{host, pod}}, four pairs each"
    );
    let report = crate::util::read_doc(&classes.join("report").join("mesh-report.json"));
    overlay_throughput_pct(&report);
    assert!(
        out.contains("pod network vs host network (cross-node)"),
        "the summary says it: {out}"
    );
    eprintln!("the path classes:\n{out}");
    drop(agents);
    drop(cluster);
}
