//! A mesh at the scale of a large cluster, planned for real: a thousand
//! agents all-pairs, and a thousand nodes (two agents each) with the plans
//! meant for that size. The sizes and the memory held are counted and
//! asserted; the planning times are printed for docs/kubernetes.md (run with
//! `--nocapture`), not asserted: they are this host's, not a contract.

use std::collections::HashSet;
use std::time::Instant;

use crate::{
    classify, nodes_of, plan_pairs, Agent, Concurrency, Item, Pair, Plan, PlanCost, Scheduler,
};
use linkperf_measured::AgentIdentity;

/// `nodes` nodes with a host and a pod agent each, four zones.
fn cluster(nodes: u32) -> Vec<Agent> {
    let mut v = Vec::with_capacity(2 * nodes as usize);
    for k in 0..nodes {
        for (net, port) in [("host", 7411), ("pod", 7410)] {
            v.push(Agent {
                name: format!("node{k}-{net}"),
                address: format!("10.{}.{}.{}:{port}", k / 65536, (k / 256) % 256, k % 256),
                identity: AgentIdentity {
                    node: Some(format!("node{k}")),
                    network: Some(net.into()),
                    zone: Some(format!("zone{}", k % 4)),
                },
            });
        }
    }
    v
}

/// Pair `m` of all-pairs over 1,000 agents (by offset, as `plan_pairs` orders them).
fn agents_pair(m: u32) -> Pair {
    let (d, s) = (m / 1000 + 1, m % 1000);
    Pair {
        source: s,
        target: (s + d) % 1000,
    }
}

/// Every run of `pairs`, `tests` tests once each, interleaved.
fn items(pairs: usize, tests: u32) -> Vec<Item> {
    let mut v = Vec::with_capacity(pairs * tests as usize);
    for test in 0..tests {
        v.extend((0..pairs as u32).map(|pair| Item { pair, test, run: 1 }));
    }
    v
}

#[test]
fn a_thousand_agents_all_pairs_is_999000_pairs_held_in_8_mb() {
    // 500 nodes × {host, pod}.
    let agents = cluster(500);
    assert_eq!(agents.len(), 1000);
    let t = Instant::now();
    let pairs = plan_pairs(&Plan::AllPairs, &agents, 1).unwrap();
    let planned = t.elapsed();
    assert_eq!(pairs.len(), 999_000, "N × (N − 1)");
    assert_eq!(pairs.capacity(), pairs.len(), "exactly sized");
    assert_eq!(std::mem::size_of::<Pair>(), 8);
    // The quick suite's 8 tests, once, at most 250 at once (500 nodes, none in two).
    let cost = PlanCost::of(&pairs, 500, 8, 1, Some(1000));
    assert_eq!(cost.plan_bytes, 7_992_000);
    assert_eq!(cost.runs, 7_992_000);
    assert_eq!(cost.at_once, 250);
    assert_eq!(cost.rounds(), 31_968);
    assert_eq!(std::mem::size_of::<Item>(), 12);
    assert_eq!(cost.queue_bytes, 95_904_000);
    // The scheduler holds what the cost says, counted from its collections.
    let t = Instant::now();
    let mut s = Scheduler::new(
        pairs,
        nodes_of(&agents),
        items(999_000, 8),
        Concurrency::Count(1000),
    );
    let queued = t.elapsed();
    let held = s.held_bytes();
    assert_eq!(held, cost.plan_bytes + cost.queue_bytes + 1000 * 4 + 500);
    // The first round: all-pairs starts with offset 1, each node's host agent
    // to its pod agent (and each pod agent to the next node's host agent):
    // the 500 same-node pairs, one node each, all at once.
    let t = Instant::now();
    let round: Vec<Item> = std::iter::from_fn(|| s.next_run()).collect();
    let handed = t.elapsed();
    assert_eq!(round.len(), 500);
    let mut used = HashSet::new();
    let node = |a: u32| a / 2;
    for i in &round {
        let p = agents_pair(i.pair);
        assert!(used.insert(node(p.source)), "no node twice");
        assert_eq!(node(p.source), node(p.target), "same-node pairs first");
    }
    // Ended, they make room for cross-node pairs: 250 at once, 2 nodes each.
    round.iter().for_each(|i| s.finished(*i));
    let next: Vec<Item> = std::iter::from_fn(|| s.next_run()).collect();
    assert_eq!(next.len(), 250);
    eprintln!(
        "1,000 agents all-pairs: planned in {planned:?}, queued 7,992,000 runs in {queued:?}, \
         first round of {} handed out in {handed:?}; held {:.1} MB",
        round.len(),
        held as f64 / 1e6
    );
}

#[test]
fn a_thousand_nodes_are_planned_by_classes_or_by_sampling() {
    let agents = cluster(1000);
    assert_eq!(agents.len(), 2000);
    // path-classes looks at every one of the 3,998,000 ordered pairs, holds
    // three of each class.
    let t = Instant::now();
    let classes = plan_pairs(&Plan::PathClasses(3), &agents, 1).unwrap();
    let by_class = t.elapsed();
    let kinds: HashSet<String> = classes
        .iter()
        .map(|p| {
            classify(
                &agents[p.source as usize].identity,
                &agents[p.target as usize].identity,
            )
            .to_string()
        })
        .collect();
    // Same node: host-pod, pod-host (no zone across); cross node: 4 networks
    // × same or cross zone.
    assert_eq!(kinds.len(), 2 + 4 * 2, "{kinds:?}");
    assert_eq!(classes.len(), kinds.len() * 3);
    // random:K holds K pairs, whatever N.
    let t = Instant::now();
    let sample = plan_pairs(&Plan::Random(10_000), &agents, 1).unwrap();
    let sampled = t.elapsed();
    assert_eq!(sample.len(), 10_000);
    assert_eq!(sample.iter().copied().collect::<HashSet<_>>().len(), 10_000);
    let cost = PlanCost::of(&sample, 1000, 1, 1, Some(500));
    assert!(cost.plan_bytes <= 2 * 8 * 10_000, "{cost:?}");
    assert_eq!(cost.rounds(), 20);
    // ring and one-to-all: N and N − 1.
    let t = Instant::now();
    assert_eq!(plan_pairs(&Plan::Ring, &agents, 1).unwrap().len(), 2000);
    assert_eq!(
        plan_pairs(&Plan::OneToAll("node0-pod".into()), &agents, 1)
            .unwrap()
            .len(),
        1999
    );
    let small = t.elapsed();
    eprintln!(
        "1,000 nodes (2,000 agents): path-classes:3 planned in {by_class:?} ({} pairs), \
         random:10000 in {sampled:?}, ring and one-to-all in {small:?}",
        classes.len()
    );
}
