//! Which run of which pair goes next.
//!
//! Runs are (pair, test, run number) [`Item`]s in the order the controller
//! wants them (the suite's interleaving: every pair and test once, then
//! again). The scheduler hands them out as slots free up:
//!
//! - `--concurrency N`: at most N runs at once, and no node in two of them
//!   (two agents of one node share its CPUs and its link), so that a pair's
//!   figures are its path's alone (N = 1: each pair alone, in isolation). A
//!   run whose nodes are busy waits; the next one whose nodes are free goes
//!   first, looking no further than [`LOOKAHEAD`] runs.
//! - `--concurrency all`: every pair at once (at most [`MAX_AT_ONCE`]), test
//!   by test: all pairs' run of one test start together and the next test
//!   starts when all have ended, so each round measures the cluster under the
//!   whole mesh's load (the saturation test).
//!
//! Pure: the controller tells it what finished and asks what may start.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{MeshError, Pair};

/// Most waiting runs looked at for one whose agents are free.
pub const LOOKAHEAD: usize = 4096;
/// Most runs at once under `--concurrency all`: each is a thread and a
/// control connection of the controller's, and two sessions on agents.
pub const MAX_AT_ONCE: usize = 1024;

/// How many runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Concurrency {
    /// At most this many, no node in two.
    Count(u32),
    /// Every pair at once, test by test.
    All,
}

impl FromStr for Concurrency {
    type Err = MeshError;

    fn from_str(s: &str) -> Result<Concurrency, MeshError> {
        if s == "all" {
            return Ok(Concurrency::All);
        }
        s.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(Concurrency::Count)
            .ok_or_else(|| MeshError::BadConcurrency(s.to_string()))
    }
}

impl fmt::Display for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Concurrency::Count(n) => write!(f, "{n}"),
            Concurrency::All => f.write_str("all"),
        }
    }
}

/// One run of one test of one pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Item {
    /// Index into the plan's pairs.
    pub pair: u32,
    /// Index into the suite's tests.
    pub test: u32,
    /// 1-based run number.
    pub run: u32,
}

/// Hands out runs at a bounded concurrency.
#[derive(Debug)]
pub struct Scheduler {
    pairs: Vec<Pair>,
    /// Each agent's node, an index into `busy`.
    node_of: Vec<u32>,
    pending: VecDeque<Item>,
    concurrency: Concurrency,
    /// By node.
    busy: Vec<bool>,
    running: usize,
    /// `all`: the (run, test) of the round running now.
    round: Option<(u32, u32)>,
}

impl Scheduler {
    /// A scheduler for `items` (in order) over `pairs` of agents whose nodes
    /// are `node_of` (see [`nodes_of`](crate::nodes_of)).
    pub fn new(
        pairs: Vec<Pair>,
        node_of: Vec<u32>,
        items: Vec<Item>,
        concurrency: Concurrency,
    ) -> Self {
        let nodes = node_of.iter().map(|n| *n as usize + 1).max().unwrap_or(0);
        Scheduler {
            pairs,
            node_of,
            pending: items.into(),
            concurrency,
            busy: vec![false; nodes],
            running: 0,
            round: None,
        }
    }

    /// The nodes of a run's two agents.
    fn nodes_of(&self, item: &Item) -> (usize, usize) {
        let p = self.pairs[item.pair as usize];
        (
            self.node_of[p.source as usize] as usize,
            self.node_of[p.target as usize] as usize,
        )
    }

    /// A run that may start now, if any: `None` while the slots are full,
    /// every waiting run's nodes are busy, the round is not over, or
    /// nothing waits.
    pub fn next_run(&mut self) -> Option<Item> {
        match self.concurrency {
            Concurrency::All => {
                let front = *self.pending.front()?;
                let key = (front.run, front.test);
                match self.round {
                    Some(r) if r != key && self.running > 0 => return None,
                    _ if self.running >= MAX_AT_ONCE => return None,
                    _ => self.round = Some(key),
                }
                self.running += 1;
                self.pending.pop_front()
            }
            Concurrency::Count(n) => {
                if self.running >= n as usize {
                    return None;
                }
                let at = self.pending.iter().take(LOOKAHEAD).position(|i| {
                    let (s, t) = self.nodes_of(i);
                    !self.busy[s] && !self.busy[t]
                })?;
                let item = self.pending.remove(at)?;
                let (s, t) = self.nodes_of(&item);
                self.busy[s] = true;
                self.busy[t] = true;
                self.running += 1;
                Some(item)
            }
        }
    }

    /// `item` has ended (however it ended).
    pub fn finished(&mut self, item: Item) {
        self.running = self.running.saturating_sub(1);
        if let Concurrency::Count(_) = self.concurrency {
            let (s, t) = self.nodes_of(&item);
            self.busy[s] = false;
            self.busy[t] = false;
        }
    }

    /// `item` is to run again (a suspect run retried): it goes first among
    /// the waiting runs, in its round under `all`. Call it before
    /// [`finished`](Self::finished) of the run it retries, so that a round
    /// does not end before its retry.
    pub fn retry(&mut self, item: Item) {
        self.pending.push_front(item);
    }

    /// Runs going on now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Runs not started yet.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Bytes this scheduler holds, by counting its collections' capacity:
    /// the pairs, each agent's node, the queue of runs, the nodes' flags.
    pub fn held_bytes(&self) -> u64 {
        (self.pairs.capacity() * std::mem::size_of::<Pair>()
            + self.node_of.capacity() * std::mem::size_of::<u32>()
            + self.pending.capacity() * std::mem::size_of::<Item>()
            + self.busy.capacity() * std::mem::size_of::<bool>()) as u64
    }

    /// Whether every run has been handed out and has ended.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty() && self.running == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: u32) -> Vec<Pair> {
        let mut v = Vec::new();
        for s in 0..n {
            for t in (0..n).filter(|t| *t != s) {
                v.push(Pair {
                    source: s,
                    target: t,
                });
            }
        }
        v
    }

    /// Each agent a node of its own.
    fn own_nodes(agents: u32) -> Vec<u32> {
        (0..agents).collect()
    }

    fn items(pairs: usize, tests: u32, runs: u32) -> Vec<Item> {
        let mut v = Vec::new();
        for run in 1..=runs {
            for test in 0..tests {
                v.extend((0..pairs as u32).map(|pair| Item { pair, test, run }));
            }
        }
        v
    }

    #[test]
    fn concurrency_parses() {
        assert_eq!("all".parse(), Ok(Concurrency::All));
        assert_eq!("3".parse(), Ok(Concurrency::Count(3)));
        for bad in ["0", "-1", "x", ""] {
            assert!(bad.parse::<Concurrency>().is_err(), "{bad}");
        }
    }

    #[test]
    fn one_at_a_time_runs_every_item_alone_in_order() {
        let p = pairs(3);
        let mut s = Scheduler::new(
            p.clone(),
            own_nodes(3),
            items(p.len(), 2, 1),
            Concurrency::Count(1),
        );
        let mut order = Vec::new();
        while let Some(i) = s.next_run() {
            assert_eq!(s.next_run(), None, "one at a time");
            order.push(i);
            s.finished(i);
        }
        assert!(s.is_done());
        assert_eq!(order, items(p.len(), 2, 1));
    }

    #[test]
    fn no_node_is_in_two_runs_at_once_below_all() {
        let p = pairs(6);
        let mut s = Scheduler::new(
            p.clone(),
            own_nodes(6),
            items(p.len(), 1, 2),
            Concurrency::Count(10),
        );
        let mut done = 0;
        while !s.is_done() {
            let mut started = Vec::new();
            while let Some(i) = s.next_run() {
                started.push(i);
            }
            assert!(
                !started.is_empty() && started.len() <= 3,
                "6 agents: 3 disjoint pairs at most"
            );
            let mut used = std::collections::HashSet::new();
            for i in &started {
                let x = p[i.pair as usize];
                assert!(used.insert(x.source) && used.insert(x.target));
            }
            for i in started {
                s.finished(i);
                done += 1;
            }
        }
        assert_eq!(done, 60);
    }

    #[test]
    fn two_agents_of_one_node_are_never_in_two_runs_at_once() {
        // Agents 0 and 1 on node 0, 2 and 3 on node 1.
        let p = pairs(4);
        let nodes = [0u32, 0, 1, 1];
        let mut s = Scheduler::new(
            p.clone(),
            nodes.to_vec(),
            items(p.len(), 1, 1),
            Concurrency::Count(4),
        );
        let mut runs = 0;
        while !s.is_done() {
            let started: Vec<Item> = std::iter::from_fn(|| s.next_run()).collect();
            let mut used = std::collections::HashSet::new();
            for i in &started {
                let x = p[i.pair as usize];
                let (a, b) = (nodes[x.source as usize], nodes[x.target as usize]);
                assert!(used.insert(a) && (a == b || used.insert(b)), "{started:?}");
            }
            // Two same-node pairs, one on each node, may run together.
            assert!(started.len() <= 2, "{started:?}");
            runs += started.len();
            started.into_iter().for_each(|i| s.finished(i));
        }
        assert_eq!(runs, 12);
    }

    #[test]
    fn a_retry_goes_first_and_stays_in_its_round() {
        let p = pairs(3);
        let mut s = Scheduler::new(
            p.clone(),
            own_nodes(3),
            items(p.len(), 2, 1),
            Concurrency::All,
        );
        let round: Vec<Item> = std::iter::from_fn(|| s.next_run()).collect();
        assert_eq!(round.len(), 6);
        for i in &round[1..] {
            s.finished(*i);
        }
        s.retry(round[0]);
        s.finished(round[0]);
        assert_eq!(s.next_run(), Some(round[0]), "the retry, in test 0's round");
        assert_eq!(s.next_run(), None, "test 1 waits for it");
        s.finished(round[0]);
        assert_eq!(std::iter::from_fn(|| s.next_run()).count(), 6);
        let mut one = Scheduler::new(
            p.clone(),
            own_nodes(3),
            items(p.len(), 1, 1),
            Concurrency::Count(1),
        );
        let first = one.next_run().unwrap();
        one.retry(first);
        one.finished(first);
        assert_eq!(one.next_run(), Some(first));
    }

    #[test]
    fn all_is_bounded_at_once() {
        let p = pairs(40);
        assert!(p.len() > MAX_AT_ONCE);
        let mut s = Scheduler::new(
            p.clone(),
            own_nodes(40),
            items(p.len(), 1, 1),
            Concurrency::All,
        );
        assert_eq!(std::iter::from_fn(|| s.next_run()).count(), MAX_AT_ONCE);
    }

    #[test]
    fn all_runs_every_pair_of_a_test_together_then_the_next_test() {
        let p = pairs(4);
        let mut s = Scheduler::new(
            p.clone(),
            own_nodes(4),
            items(p.len(), 2, 1),
            Concurrency::All,
        );
        let mut round = Vec::new();
        while let Some(i) = s.next_run() {
            round.push(i);
        }
        assert_eq!(round.len(), 12, "every pair of test 0 at once");
        assert!(round.iter().all(|i| i.test == 0));
        for i in &round[..11] {
            s.finished(*i);
        }
        assert_eq!(s.next_run(), None, "the round is not over");
        s.finished(round[11]);
        let next: Vec<Item> = std::iter::from_fn(|| s.next_run()).collect();
        assert_eq!(next.len(), 12);
        assert!(next.iter().all(|i| i.test == 1));
        next.iter().for_each(|i| s.finished(*i));
        assert!(s.is_done());
    }
}
