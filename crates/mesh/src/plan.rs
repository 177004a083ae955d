//! Plans: which directed pairs of agents a mesh measures.
//!
//! | plan | pairs of N agents |
//! |---|---|
//! | `all-pairs` | every ordered pair: N × (N − 1) |
//! | `ring` | each agent to the next: N |
//! | `one-to-all:AGENT` | AGENT to every other: N − 1 |
//! | `path-classes[:K]` | up to K pairs (default [`DEFAULT_PER_CLASS`]) of every path class present |
//! | `random:K` | K ordered pairs drawn without replacement (all of them if K ≥ N × (N − 1)) |
//!
//! `path-classes` and `random` draw with a seed, recorded with the mesh, so
//! that the same seed over the same agents plans the same pairs. Planning
//! holds the pairs it returns and, for `path-classes`, K pairs per class; it
//! never holds the N × (N − 1) pairs it looks at.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{classify, Agent, MeshError, PathClass};

/// Most agents in one mesh: all-pairs of this many is 16.8 million pairs
/// (134 MB of plan), beyond what a mesh should ever run whole.
pub const MAX_AGENTS: usize = 4096;
/// Pairs per path class of `path-classes` unless told.
pub const DEFAULT_PER_CLASS: u32 = 3;

/// A plan, as `--plan` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Plan {
    /// Every ordered pair.
    AllPairs,
    /// Each agent to the next in the list.
    Ring,
    /// One agent (by name or address) to every other.
    OneToAll(String),
    /// Up to this many pairs of every path class.
    PathClasses(u32),
    /// This many ordered pairs drawn at random.
    Random(u64),
}

impl FromStr for Plan {
    type Err = MeshError;

    fn from_str(s: &str) -> Result<Plan, MeshError> {
        let bad = || MeshError::BadPlan(s.to_string());
        let count = |n: &str| n.parse::<u64>().ok().filter(|k| *k > 0);
        match s.split_once(':') {
            None => match s {
                "all-pairs" => Ok(Plan::AllPairs),
                "ring" => Ok(Plan::Ring),
                "path-classes" => Ok(Plan::PathClasses(DEFAULT_PER_CLASS)),
                _ => Err(bad()),
            },
            Some(("one-to-all", a)) if !a.is_empty() => Ok(Plan::OneToAll(a.to_string())),
            Some(("path-classes", k)) => count(k)
                .and_then(|k| u32::try_from(k).ok())
                .map(Plan::PathClasses)
                .ok_or_else(bad),
            Some(("random", k)) => count(k).map(Plan::Random).ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Plan::AllPairs => f.write_str("all-pairs"),
            Plan::Ring => f.write_str("ring"),
            Plan::OneToAll(a) => write!(f, "one-to-all:{a}"),
            Plan::PathClasses(k) if *k == DEFAULT_PER_CLASS => f.write_str("path-classes"),
            Plan::PathClasses(k) => write!(f, "path-classes:{k}"),
            Plan::Random(k) => write!(f, "random:{k}"),
        }
    }
}

/// One directed pair: agent `source` runs the client side against agent
/// `target` (indices into the mesh's agents). Eight bytes, so that a plan of
/// a million pairs holds 8 MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pair {
    /// The client side.
    pub source: u32,
    /// The server side.
    pub target: u32,
}

/// What a plan holds and implies, for `--dry-run` and the scale note.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanCost {
    /// Pairs planned.
    pub pairs: u64,
    /// Runs: pairs × tests × repeats.
    pub runs: u64,
    /// Bytes the plan's pairs hold in memory (by counting: capacity × size).
    pub plan_bytes: u64,
    /// Bytes the scheduler's queue of runs holds at its start (one
    /// [`Item`](crate::Item) a run; [`Scheduler::held_bytes`](crate::Scheduler::held_bytes)
    /// counts what it holds).
    pub queue_bytes: u64,
    /// Runs going on at once at most.
    pub at_once: u64,
}

impl PlanCost {
    /// The cost of `pairs` over agents on `nodes` nodes, each pair running
    /// `tests` tests `repeat` times, at most `concurrency` at once (`None`:
    /// all, within [`MAX_AT_ONCE`](crate::MAX_AT_ONCE)). No node is in two
    /// pairs at once below `all`, so at most `nodes / 2` run at once.
    pub fn of(
        pairs: &Vec<Pair>,
        nodes: usize,
        tests: u64,
        repeat: u64,
        concurrency: Option<u64>,
    ) -> PlanCost {
        let n = pairs.len() as u64;
        let at_once = match concurrency {
            None => n.min(crate::MAX_AT_ONCE as u64).max(1),
            Some(c) => c.min((nodes as u64 / 2).max(1)).min(n.max(1)),
        };
        PlanCost {
            pairs: n,
            runs: n * tests * repeat,
            plan_bytes: (pairs.capacity() * std::mem::size_of::<Pair>()) as u64,
            queue_bytes: n * tests * repeat * std::mem::size_of::<crate::Item>() as u64,
            at_once,
        }
    }

    /// Rounds of runs at `at_once` each: the time is rounds × one run's time.
    pub fn rounds(&self) -> u64 {
        self.runs.div_ceil(self.at_once.max(1))
    }
}

/// The pairs of `plan` over `agents`, drawing with `seed` where the plan
/// draws, in an order that spreads the agents (`all-pairs` by offset,
/// `random` shuffled with the seed, `path-classes` by class, each class's
/// pairs by source): the same arguments give the same pairs in the same
/// order.
pub fn plan_pairs(plan: &Plan, agents: &[Agent], seed: u64) -> Result<Vec<Pair>, MeshError> {
    let n = agents.len();
    if !(2..=MAX_AGENTS).contains(&n) {
        return Err(MeshError::AgentCount {
            got: n,
            max: MAX_AGENTS,
        });
    }
    let mut seen = HashSet::with_capacity(n);
    for a in agents {
        if !seen.insert(a.address.as_str()) {
            return Err(MeshError::Duplicate(a.address.clone()));
        }
    }
    let n32 = n as u32;
    let pairs = match plan {
        Plan::AllPairs => {
            // By offset: every agent to the next, then to the one after, ...
            // Each offset is a round in which every agent is the source of one
            // pair and the target of one, so that pairs next to each other in
            // the plan share no agent and a scheduler finds disjoint pairs
            // without looking far.
            let mut v = Vec::with_capacity(n * (n - 1));
            for d in 1..n32 {
                v.extend((0..n32).map(|s| Pair {
                    source: s,
                    target: (s + d) % n32,
                }));
            }
            v
        }
        Plan::Ring => (0..n32)
            .map(|s| Pair {
                source: s,
                target: (s + 1) % n32,
            })
            .collect(),
        Plan::OneToAll(who) => {
            let s = agents
                .iter()
                .position(|a| &a.name == who || &a.address == who)
                .ok_or_else(|| {
                    MeshError::NoSuchAgent(
                        who.clone(),
                        agents
                            .iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                })? as u32;
            (0..n32)
                .filter(|t| *t != s)
                .map(|t| Pair {
                    source: s,
                    target: t,
                })
                .collect()
        }
        Plan::PathClasses(k) => path_classes(agents, *k as usize, seed),
        Plan::Random(k) => random(n as u64, *k, seed),
    };
    Ok(pairs)
}

/// The `m`-th ordered pair of `n` agents (0 ≤ m < n × (n − 1)), in the
/// order of `all-pairs`.
fn nth_pair(n: u64, m: u64) -> Pair {
    let s = m / (n - 1);
    let t = m % (n - 1);
    let t = if t >= s { t + 1 } else { t };
    Pair {
        source: s as u32,
        target: t as u32,
    }
}

/// `k` ordered pairs of `n` agents drawn without replacement (Floyd's
/// algorithm: k draws, k held), sorted, then shuffled with the seed (so that
/// pairs next to each other rarely share an agent).
fn random(n: u64, k: u64, seed: u64) -> Vec<Pair> {
    let total = n * (n - 1);
    if k >= total {
        return (0..total).map(|m| nth_pair(n, m)).collect();
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut chosen: HashSet<u64> = HashSet::with_capacity(k as usize);
    for j in (total - k)..total {
        let m = rng.u64(0..=j);
        if !chosen.insert(m) {
            chosen.insert(j);
        }
    }
    let mut v: Vec<Pair> = chosen.into_iter().map(|m| nth_pair(n, m)).collect();
    v.sort_unstable();
    rng.shuffle(&mut v);
    v
}

/// Up to `k` pairs of every path class, drawn by reservoir sampling as the
/// ordered pairs go by: every pair of a class equally likely, `k` per class
/// held.
fn path_classes(agents: &[Agent], k: usize, seed: u64) -> Vec<Pair> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut classes: BTreeMap<PathClass, (u64, Vec<Pair>)> = BTreeMap::new();
    let n = agents.len() as u32;
    for s in 0..n {
        for t in (0..n).filter(|t| *t != s) {
            let class = classify(&agents[s as usize].identity, &agents[t as usize].identity);
            let (seen, kept) = classes.entry(class).or_default();
            *seen += 1;
            let pair = Pair {
                source: s,
                target: t,
            };
            if kept.len() < k {
                kept.push(pair);
            } else {
                let j = rng.u64(0..*seen) as usize;
                if j < k {
                    kept[j] = pair;
                }
            }
        }
    }
    classes
        .into_values()
        .flat_map(|(_, mut kept)| {
            kept.sort_unstable();
            kept
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use linkperf_measured::AgentIdentity;

    use super::*;

    /// `nodes` nodes with a host and a pod agent each.
    fn lab(nodes: u32) -> Vec<Agent> {
        let mut v = Vec::new();
        for k in 1..=nodes {
            for (net, port) in [("host", 7410), ("pod", 7411)] {
                v.push(Agent {
                    name: format!("n{k}-{net}"),
                    address: format!("198.18.0.{k}:{port}"),
                    identity: AgentIdentity {
                        node: Some(format!("n{k}")),
                        network: Some(net.into()),
                        zone: None,
                    },
                });
            }
        }
        v
    }

    #[test]
    fn plans_parse_and_print() {
        for s in [
            "all-pairs",
            "ring",
            "one-to-all:n1-pod",
            "path-classes",
            "path-classes:5",
            "random:40",
        ] {
            assert_eq!(s.parse::<Plan>().unwrap().to_string(), s);
        }
        for bad in [
            "",
            "all",
            "random",
            "random:0",
            "random:x",
            "one-to-all:",
            "path-classes:-1",
            "ring:2",
        ] {
            let e = bad.parse::<Plan>().unwrap_err().to_string();
            assert!(e.contains("all-pairs, ring"), "{bad}: {e}");
        }
    }

    #[test]
    fn all_pairs_of_eight_agents_is_fifty_six_directed_pairs() {
        let p = plan_pairs(&Plan::AllPairs, &lab(4), 0).unwrap();
        assert_eq!(p.len(), 56);
        let set: HashSet<Pair> = p.iter().copied().collect();
        assert_eq!(set.len(), 56);
        assert!(p.iter().all(|x| x.source != x.target));
        assert_eq!(plan_pairs(&Plan::Ring, &lab(4), 0).unwrap().len(), 8);
        let one = plan_pairs(&Plan::OneToAll("n2-pod".into()), &lab(4), 0).unwrap();
        assert_eq!(one.len(), 7);
        assert!(one.iter().all(|x| x.source == 3));
        let e = plan_pairs(&Plan::OneToAll("n9".into()), &lab(4), 0).unwrap_err();
        assert!(e.to_string().contains("n1-host, n1-pod"), "{e}");
    }

    #[test]
    fn path_classes_takes_a_few_pairs_of_every_class() {
        let agents = lab(4);
        let p = plan_pairs(&Plan::PathClasses(3), &agents, 7).unwrap();
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for x in &p {
            let c = classify(
                &agents[x.source as usize].identity,
                &agents[x.target as usize].identity,
            );
            *per.entry(c.to_string()).or_default() += 1;
        }
        // 4 same-node directed pairs per direction of network; cross-node 12 each.
        assert_eq!(
            per.into_iter().collect::<Vec<_>>(),
            [
                ("cross-node host".to_string(), 3),
                ("cross-node host-pod".to_string(), 3),
                ("cross-node pod".to_string(), 3),
                ("cross-node pod-host".to_string(), 3),
                ("same-node host-pod".to_string(), 3),
                ("same-node pod-host".to_string(), 3),
            ]
        );
        assert_eq!(
            p,
            plan_pairs(&Plan::PathClasses(3), &agents, 7).unwrap(),
            "same seed, same pairs"
        );
    }

    #[test]
    fn random_draws_distinct_pairs_and_all_when_asked_for_more() {
        let agents = lab(4);
        let p = plan_pairs(&Plan::Random(10), &agents, 1).unwrap();
        assert_eq!(p.len(), 10);
        assert_eq!(p.iter().copied().collect::<HashSet<_>>().len(), 10);
        assert_eq!(p, plan_pairs(&Plan::Random(10), &agents, 1).unwrap());
        assert_eq!(
            plan_pairs(&Plan::Random(1000), &agents, 1).unwrap().len(),
            56
        );
        for m in 0..56 {
            let x = nth_pair(8, m);
            assert!(x.source != x.target && x.source < 8 && x.target < 8);
        }
    }

    #[test]
    fn too_few_agents_or_one_twice_is_refused() {
        let one = &lab(1)[..1];
        assert!(matches!(
            plan_pairs(&Plan::AllPairs, one, 0),
            Err(MeshError::AgentCount { got: 1, .. })
        ));
        let mut twice = lab(1);
        twice[1].address = twice[0].address.clone();
        assert!(matches!(
            plan_pairs(&Plan::AllPairs, &twice, 0),
            Err(MeshError::Duplicate(_))
        ));
    }

    /// The scale note's figures (docs/kubernetes.md): a 1,000-node cluster
    /// with two agents per node, planned by counting, not by timing.
    #[test]
    fn a_thousand_node_mesh_plans_within_bounds() {
        let agents = lab(1000);
        assert_eq!(agents.len(), 2000);
        let all = plan_pairs(&Plan::AllPairs, &agents[..1000], 0).unwrap();
        assert_eq!(all.len(), 999_000, "1,000 agents: N × (N − 1)");
        // The first 1,000 agents are those of 500 nodes.
        let cost = PlanCost::of(&all, 500, 1, 1, Some(500));
        assert_eq!(
            cost.plan_bytes,
            999_000 * 8,
            "exactly sized: 8 bytes a pair"
        );
        assert_eq!(cost.rounds(), 3996, "250 pairs of disjoint nodes at once");
        let classes = plan_pairs(&Plan::PathClasses(3), &agents, 1).unwrap();
        assert_eq!(classes.len(), 6 * 3, "six classes, three pairs each");
        let sample = plan_pairs(&Plan::Random(10_000), &agents, 1).unwrap();
        assert_eq!(sample.len(), 10_000);
        assert!(PlanCost::of(&sample, 1000, 1, 1, None).plan_bytes <= 16 * 10_000);
    }

    proptest::proptest! {
        #[test]
        fn every_plan_gives_distinct_pairs_of_distinct_agents(nodes in 1u32..8, k in 1u64..100, seed in proptest::prelude::any::<u64>()) {
            let agents = lab(nodes);
            for plan in [Plan::AllPairs, Plan::Ring, Plan::PathClasses(2), Plan::Random(k)] {
                let p = plan_pairs(&plan, &agents, seed).unwrap();
                let n = agents.len() as u32;
                proptest::prop_assert!(p.iter().all(|x| x.source < n && x.target < n));
                proptest::prop_assert!(p.iter().all(|x| x.source != x.target));
                proptest::prop_assert_eq!(p.iter().copied().collect::<HashSet<_>>().len(), p.len());
            }
        }
    }
}
