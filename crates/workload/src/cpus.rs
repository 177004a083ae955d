use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;

/// Highest CPU number accepted in a list (the kernel's CPU_SETSIZE).
const MAX_CPU: usize = 1023;

/// A list of CPU numbers, as `taskset -c` reads it: `0`, `0,2`, `0-3,6`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || WorkloadError::CpuList(s.to_string());
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse::<usize>().map_err(|_| err())?,
                    b.trim().parse::<usize>().map_err(|_| err())?,
                ),
                None => {
                    let n = part.parse::<usize>().map_err(|_| err())?;
                    (n, n)
                }
            };
            if lo > hi || hi > MAX_CPU {
                return Err(err());
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err(err());
        }
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

/// Where a side's workers run when no CPU list is given (`--placement`).
///
/// On one host, whether the client and the server share CPUs decides a
/// request/response result by a factor of 2 to 4 (a wake-up on the same CPU
/// against a cross-CPU wake-up), so a study names its placement rather than
/// leave it to the scheduler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementPolicy {
    /// Nothing pinned: the scheduler decides.
    #[default]
    Free,
    /// Both sides' worker *i* on the *i*-th CPU of the host (round-robin):
    /// they share CPUs. Meaningless across hosts.
    Same,
    /// The client's workers on the first half of the host's CPUs, the
    /// server's on the second half, worker *i* on the *i*-th CPU of its half
    /// (round-robin); on 2 CPUs the client on CPU 0, the server on CPU 1.
    Split,
}

/// Which side a placement is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The side that opens the connections.
    Client,
    /// The side that accepts them.
    Server,
}

impl PlacementPolicy {
    /// Whether it pins nothing (and so is left out of files and messages).
    pub fn is_free(&self) -> bool {
        *self == PlacementPolicy::Free
    }

    /// The CPUs `side`'s workers go to on a host whose usable CPUs are
    /// `allowed` (in order), worker *i* on the *i*-th; `None` pins nothing.
    /// With `split` on a single CPU both halves are that CPU.
    pub fn cpus(self, side: Side, allowed: &[usize]) -> Option<CpuList> {
        if allowed.is_empty() {
            return None;
        }
        let half = (allowed.len() / 2).max(1);
        let cpus = match (self, side) {
            (PlacementPolicy::Free, _) => return None,
            (PlacementPolicy::Same, _) => allowed,
            (PlacementPolicy::Split, Side::Client) => &allowed[..half],
            (PlacementPolicy::Split, Side::Server) => &allowed[allowed.len() - half..],
        };
        Some(CpuList(cpus.to_vec()))
    }
}

impl fmt::Display for PlacementPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlacementPolicy::Free => "free",
            PlacementPolicy::Same => "same",
            PlacementPolicy::Split => "split",
        })
    }
}

impl FromStr for PlacementPolicy {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "free" => Ok(PlacementPolicy::Free),
            "same" => Ok(PlacementPolicy::Same),
            "split" => Ok(PlacementPolicy::Split),
            other => Err(WorkloadError::Placement(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_halves_the_host_and_same_shares_it() {
        use PlacementPolicy::*;
        let two = [0, 1];
        assert_eq!(Split.cpus(Side::Client, &two), Some(CpuList(vec![0])));
        assert_eq!(Split.cpus(Side::Server, &two), Some(CpuList(vec![1])));
        let eight: Vec<usize> = (0..8).collect();
        assert_eq!(Split.cpus(Side::Client, &eight).unwrap().0, [0, 1, 2, 3]);
        assert_eq!(Split.cpus(Side::Server, &eight).unwrap().0, [4, 5, 6, 7]);
        // An odd count: the halves are as large as each other, the middle CPU unused.
        let odd = [0, 2, 5];
        assert_eq!(Split.cpus(Side::Client, &odd).unwrap().0, [0]);
        assert_eq!(Split.cpus(Side::Server, &odd).unwrap().0, [5]);
        // One CPU: nothing to split.
        assert_eq!(Split.cpus(Side::Server, &[3]).unwrap().0, [3]);
        assert_eq!(Same.cpus(Side::Client, &two), Same.cpus(Side::Server, &two));
        assert_eq!(Free.cpus(Side::Client, &two), None);
        assert_eq!(Split.cpus(Side::Client, &[]), None);
    }

    #[test]
    fn policies_read_and_print_their_names() {
        for p in ["free", "same", "split"] {
            assert_eq!(p.parse::<PlacementPolicy>().unwrap().to_string(), p);
        }
        let e = "spread".parse::<PlacementPolicy>().unwrap_err().to_string();
        assert!(
            e.contains("spread") && e.contains("same, split or free"),
            "{e}"
        );
    }

    #[test]
    fn parses_ranges_and_lists() {
        assert_eq!("0".parse::<CpuList>().unwrap().0, vec![0]);
        assert_eq!("0-2,5".parse::<CpuList>().unwrap().0, vec![0, 1, 2, 5]);
        assert_eq!("1,1,0".parse::<CpuList>().unwrap().0, vec![0, 1]);
    }

    #[test]
    fn refuses_bad_lists() {
        for bad in ["", "a", "3-1", "0,,1", "5000"] {
            assert!(bad.parse::<CpuList>().is_err(), "{bad}");
        }
    }
}
