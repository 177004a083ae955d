//! What the lab has up and what it left behind.
//!
//! The lab keeps one record per configuration it brings up, in
//! `/run/linkperf-lab/NAME.json` (a tmpfs, emptied at boot like the
//! namespaces themselves), written *before* the first namespace is created.
//! A record is owned either by `lab up` (it stays until `lab down`) or by a
//! running `lab run` (its process id and start time). On the host, lab objects
//! are the namespaces named `lp-…` and any link named `lp-…` in the root
//! namespace (the lab creates none there; one found there is left over).
//!
//! An object is **stale** when no live record claims it: its record's `lab run`
//! is no longer running (killed, crashed), or there is no record at all. Every
//! lab command finds the stale objects first, reports them and removes them.
//! This module decides, from plain text and records, what is stale; it runs
//! nothing.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::addresses::PREFIX;
use crate::Pair;

/// Who keeps a configuration up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Owner {
    /// `linkperf lab up`: up until `linkperf lab down`.
    Up,
    /// A running command (`lab run`, or `lab up` while it builds): stale once
    /// that process is gone.
    Process {
        /// Its process id.
        pid: u32,
        /// Its start time (field 22 of `/proc/PID/stat`, clock ticks since
        /// boot), so that a reused process id is not mistaken for it.
        start_time: u64,
    },
}

/// One configuration the lab has up (or is bringing up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The configuration's name.
    pub name: String,
    /// Its description with every setting and the number of pairs.
    pub configuration: String,
    /// Who keeps it up.
    pub owner: Owner,
    /// Its namespaces.
    pub namespaces: Vec<String>,
    /// Where each pair's server and client are.
    pub pairs: Vec<Pair>,
    /// The commands that built it.
    pub commands: Vec<String>,
    /// Capacity all pairs together can use, bits per second (`None`: unshaped).
    pub capacity_bits_per_s: Option<f64>,
}

/// What kind of object is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A network namespace.
    Namespace,
    /// A link in the root namespace.
    Link,
    /// A record file with nothing live behind it.
    Record,
}

/// A lab object nobody live claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// What it is.
    pub kind: ObjectKind,
    /// Its name (namespace, link or configuration).
    pub name: String,
    /// Why it is stale, in words.
    pub reason: String,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ObjectKind::Namespace => "namespace",
            ObjectKind::Link => "link",
            ObjectKind::Record => "record of",
        };
        write!(f, "{kind} {} ({})", self.name, self.reason)
    }
}

/// The lab's objects on the host, sorted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Survey {
    /// Configurations up, with a live owner.
    pub up: Vec<Record>,
    /// Objects to report and remove.
    pub stale: Vec<Stale>,
}

/// Namespace names from `ip netns list` (`NAME` or `NAME (id: N)` per line).
pub fn parse_netns_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// Link names from `ip -o link` (`N: NAME[@PEER]: <FLAGS> …` per line).
pub fn parse_link_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(": ")?;
            let (name, _) = rest.split_once(':')?;
            let name = name.split('@').next()?.trim();
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// Process ids from `ip netns pids NS` (one per line).
pub fn parse_pids(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// A process's start time from the text of `/proc/PID/stat` (field 22). The
/// command name (field 2) may hold spaces and parentheses, so fields are
/// counted after its last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, after) = stat.rsplit_once(')')?;
    // After the name come field 3 (state) onwards: field 22 is the 20th.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Sorts the host's lab objects into what is up and what is stale.
///
/// `namespaces` and `links` are every namespace and root-namespace link name;
/// `records` every record read (`Err` with the file name for one that could
/// not be read); `alive` says whether an owner still runs.
pub fn classify(
    namespaces: &[String],
    links: &[String],
    records: Vec<Result<Record, String>>,
    alive: impl Fn(&Owner) -> bool,
) -> Survey {
    let ours = |n: &String| n.starts_with(PREFIX);
    let mut survey = Survey::default();
    // Namespaces claimed by a dead owner, with the reason.
    let mut dead_claims: Vec<(String, String)> = Vec::new();
    for r in records {
        let r = match r {
            Ok(r) => r,
            Err(file) => {
                survey.stale.push(Stale {
                    kind: ObjectKind::Record,
                    name: file,
                    reason: "unreadable record".into(),
                });
                continue;
            }
        };
        let missing: Vec<&String> = r
            .namespaces
            .iter()
            .filter(|n| !namespaces.contains(n))
            .collect();
        let why = match r.owner {
            Owner::Process { pid, .. } if !alive(&r.owner) => Some(format!(
                "left by linkperf lab (pid {pid}), which is no longer running"
            )),
            // A building process may not have created every namespace yet.
            Owner::Process { .. } => None,
            Owner::Up if !missing.is_empty() => Some(format!(
                "configuration {} is incomplete: namespace {} is gone",
                r.name, missing[0]
            )),
            Owner::Up => None,
        };
        match why {
            None => survey.up.push(r),
            Some(why) => {
                for n in r.namespaces.iter().filter(|n| namespaces.contains(n)) {
                    dead_claims.push((n.clone(), why.clone()));
                }
                survey.stale.push(Stale {
                    kind: ObjectKind::Record,
                    name: r.name,
                    reason: why,
                });
            }
        }
    }
    for n in namespaces.iter().filter(|n| ours(n)) {
        if survey.up.iter().any(|r| r.namespaces.contains(n)) {
            continue;
        }
        let reason = dead_claims
            .iter()
            .find(|(d, _)| d == n)
            .map(|(_, why)| why.clone())
            .unwrap_or_else(|| {
                "no lab record claims it: left by a lab command killed before recording it, or made by hand".into()
            });
        survey.stale.push(Stale {
            kind: ObjectKind::Namespace,
            name: n.clone(),
            reason,
        });
    }
    for l in links.iter().filter(|l| ours(l)) {
        survey.stale.push(Stale {
            kind: ObjectKind::Link,
            name: l.clone(),
            reason: "in the root namespace, where the lab creates nothing".into(),
        });
    }
    survey.up.sort_by(|a, b| a.name.cmp(&b.name));
    survey
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETNS: &str = "\
lp-veth-c1 (id: 4)
lp-veth-s1 (id: 3)
lp-vxlan-s1
lp-vxlan-c1
lp-handmade
docker-ns (id: 1)
";

    const LINKS: &str = "\
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast state UP mode DEFAULT group default qlen 1000\\    link/ether 02:fc:00:00:00:01 brd ff:ff:ff:ff:ff:ff
9: lp-s1@if8: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000\\    link/ether 4a:b7:b4:65:18:ce brd ff:ff:ff:ff:ff:ff link-netns lp-veth-c1
11: lp-br: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000\\    link/ether 0a:c0:da:fc:9a:12 brd ff:ff:ff:ff:ff:ff
12: vethab12@lp-x: <BROADCAST> mtu 1500 qdisc noop state DOWN
";

    fn record(name: &str, owner: Owner, namespaces: &[&str]) -> Record {
        Record {
            name: name.into(),
            configuration: format!("{name}: veth, 1 pair"),
            owner,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            pairs: Vec::new(),
            commands: Vec::new(),
            capacity_bits_per_s: None,
        }
    }

    #[test]
    fn parses_ip_output() {
        assert_eq!(
            parse_netns_list(NETNS),
            [
                "lp-veth-c1",
                "lp-veth-s1",
                "lp-vxlan-s1",
                "lp-vxlan-c1",
                "lp-handmade",
                "docker-ns"
            ]
        );
        assert_eq!(parse_netns_list(""), Vec::<String>::new());
        assert_eq!(
            parse_link_names(LINKS),
            ["lo", "eth0", "lp-s1", "lp-br", "vethab12"]
        );
        assert_eq!(parse_pids("123\n4567\n\n"), [123, 4567]);
        assert_eq!(parse_pids(""), Vec::<u32>::new());
    }

    #[test]
    fn start_time_survives_odd_process_names() {
        let stat = "4242 (linkperf (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 5 3 0 0 20 0 3 0 987654 123456789 300";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("4242 (short) S 1"), None);
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn everything_claimed_by_live_records_is_up() {
        let ns = parse_netns_list(NETNS);
        let s = classify(
            &ns,
            &["lo".into(), "eth0".into()],
            vec![
                Ok(record("vxlan", Owner::Up, &["lp-vxlan-s1", "lp-vxlan-c1"])),
                Ok(record(
                    "veth",
                    Owner::Process {
                        pid: 7,
                        start_time: 1,
                    },
                    &["lp-veth-s1", "lp-veth-c1"],
                )),
            ],
            |_| true,
        );
        assert_eq!(
            s.up.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["veth", "vxlan"]
        );
        // Only the namespace nobody recorded; docker's is not ours.
        assert_eq!(s.stale.len(), 1);
        assert_eq!(s.stale[0].kind, ObjectKind::Namespace);
        assert_eq!(s.stale[0].name, "lp-handmade");
        assert!(s.stale[0].reason.contains("no lab record"));
    }

    #[test]
    fn a_dead_run_leaves_its_namespaces_and_record_stale() {
        let ns = parse_netns_list(NETNS);
        let links = parse_link_names(LINKS);
        let dead = Owner::Process {
            pid: 4242,
            start_time: 9,
        };
        let s = classify(
            &ns,
            &links,
            vec![
                Ok(record("veth", dead, &["lp-veth-s1", "lp-veth-c1"])),
                Ok(record("vxlan", Owner::Up, &["lp-vxlan-s1", "lp-vxlan-c1"])),
                Err("broken.json".into()),
            ],
            |o| *o != dead,
        );
        let seen: Vec<String> = s.stale.iter().map(ToString::to_string).collect();
        assert_eq!(s.up.len(), 1);
        assert_eq!(
            seen,
            [
                "record of veth (left by linkperf lab (pid 4242), which is no longer running)",
                "record of broken.json (unreadable record)",
                "namespace lp-veth-c1 (left by linkperf lab (pid 4242), which is no longer running)",
                "namespace lp-veth-s1 (left by linkperf lab (pid 4242), which is no longer running)",
                "namespace lp-handmade (no lab record claims it: left by a lab command killed before recording it, or made by hand)",
                "link lp-s1 (in the root namespace, where the lab creates nothing)",
                "link lp-br (in the root namespace, where the lab creates nothing)",
            ]
        );
    }

    #[test]
    fn an_up_configuration_missing_a_namespace_is_stale_but_a_building_one_is_not() {
        let ns = vec!["lp-a-s1".to_string(), "lp-b-s1".to_string()];
        let s = classify(
            &ns,
            &[],
            vec![
                Ok(record("a", Owner::Up, &["lp-a-s1", "lp-a-c1"])),
                Ok(record(
                    "b",
                    Owner::Process {
                        pid: 1,
                        start_time: 1,
                    },
                    &["lp-b-s1", "lp-b-c1"],
                )),
            ],
            |_| true,
        );
        assert_eq!(s.up.len(), 1);
        assert_eq!(s.up[0].name, "b");
        assert_eq!(s.stale.len(), 2);
        assert!(
            s.stale[0].reason.contains("namespace lp-a-c1 is gone"),
            "{:?}",
            s.stale
        );
        assert_eq!(s.stale[1].name, "lp-a-s1");
    }

    #[test]
    fn records_round_trip_through_json() {
        let r = record(
            "veth",
            Owner::Process {
                pid: 3,
                start_time: 4,
            },
            &["lp-veth-s1"],
        );
        let j = serde_json::to_string(&r).unwrap();
        assert!(
            j.contains(r#""owner":{"by":"process","pid":3,"start_time":4}"#),
            "{j}"
        );
        assert_eq!(serde_json::from_str::<Record>(&j).unwrap(), r);
        let up = serde_json::to_string(&Owner::Up).unwrap();
        assert_eq!(up, r#"{"by":"up"}"#);
    }
}
