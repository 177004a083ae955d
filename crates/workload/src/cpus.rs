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

#[cfg(test)]
mod tests {
    use super::*;

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
