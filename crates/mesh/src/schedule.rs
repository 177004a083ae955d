//! Which run of which pair goes next.
//!
//! Runs are (pair, test, run number) [`Item`]s in the order the controller
//! wants them (the suite's interleaving: every pair and test once, then
//! again). The scheduler hands them out as slots free up:
//!
//! - `--concurrency N`: at most N runs at once, and no agent in two of them,
//!   so that a pair's figures are its path's alone (N = 1: each pair alone,
//!   in isolation). A run whose agents are busy waits; the next one whose
//!   agents are free goes first, looking no further than [`LOOKAHEAD`] runs.
//! - `--concurrency all`: every pair at once, test by test: all pairs' run of
//!   one test start together and the next test starts when all have ended,
//!   so each round measures the cluster under the whole mesh's load (the
//!   saturation test).
//!
//! Pure: the controller tells it what finished and asks what may start.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{MeshError, Pair};

/// Most waiting runs looked at for one whose agents are free.
pub const LOOKAHEAD: usize = 4096;

/// How many runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Concurrency {
    /// At most this many, no agent in two.
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
    pending: VecDeque<Item>,
    concurrency: Concurrency,
    busy: Vec<bool>,
    running: usize,
    /// `all`: the (run, test) of the round running now.
    round: Option<(u32, u32)>,
}

impl Scheduler {
    /// A scheduler for `items` (in order) over `pairs` of `agents` agents.
    pub fn new(
        pairs: Vec<Pair>,
        agents: usize,
        items: Vec<Item>,
        concurrency: Concurrency,
    ) -> Self {
        Scheduler {
            pairs,
            pending: items.into(),
            concurrency,
            busy: vec![false; agents],
            running: 0,
            round: None,
        }
    }

    fn agents_of(&self, item: &Item) -> (usize, usize) {
        let p = self.pairs[item.pair as usize];
        (p.source as usize, p.target as usize)
    }

    /// A run that may start now, if any: `None` while the slots are full,
    /// every waiting run's agents are busy, the round is not over, or
    /// nothing waits.
    pub fn next_run(&mut self) -> Option<Item> {
        match self.concurrency {
            Concurrency::All => {
                let front = *self.pending.front()?;
                let key = (front.run, front.test);
                match self.round {
                    Some(r) if r != key && self.running > 0 => return None,
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
                    let (s, t) = self.agents_of(i);
                    !self.busy[s] && !self.busy[t]
                })?;
                let item = self.pending.remove(at)?;
                let (s, t) = self.agents_of(&item);
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
            let (s, t) = self.agents_of(&item);
            self.busy[s] = false;
            self.busy[t] = false;
        }
    }

    /// Runs going on now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Runs not started yet.
    pub fn waiting(&self) -> usize {
        self.pending.len()
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
        let mut s = Scheduler::new(p.clone(), 3, items(p.len(), 2, 1), Concurrency::Count(1));
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
    fn no_agent_is_in_two_runs_at_once_below_all() {
        let p = pairs(6);
        let mut s = Scheduler::new(p.clone(), 6, items(p.len(), 1, 2), Concurrency::Count(10));
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
    fn all_runs_every_pair_of_a_test_together_then_the_next_test() {
        let p = pairs(4);
        let mut s = Scheduler::new(p.clone(), 4, items(p.len(), 2, 1), Concurrency::All);
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
