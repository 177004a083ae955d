//! The bounds every profile keeps, whoever built it.
//!
//! The parser (parse/) refuses values out of range with the line and the
//! option at fault. A profile also arrives over the control protocol, as a
//! serde value a client built however it liked: the server checks it here
//! before anything computes with it, so that no size, count, time or user
//! total can overflow an operation or a clock further on.

use std::time::Duration;

use super::model::{FlowopKind, Limit, Profile, Size, Xfer};
use crate::MAX_USERS;

/// Largest `size=` and `rsize=`: 64 MiB.
pub(crate) const MAX_XFER: u64 = 64 * 1024 * 1024;

/// Largest `wndsz=`: 1 GiB (a socket buffer size is a C `int`).
pub(crate) const MAX_WNDSZ: u64 = 1024 * 1024 * 1024;

/// Longest time a profile may name (a transaction's duration, a think, a
/// timeout): 365 days. Far beyond any test, and far from a clock's overflow.
pub(crate) const MAX_TIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Longest name (profile, connection, host, congestion control): 1 KiB.
const MAX_NAME: usize = 1024;

/// Most groups, and transactions of a group: 1024 each. Each transaction
/// costs both ends statistics per worker (a latency histogram of its own), so
/// their number is what bounds a profile's memory.
pub(crate) const MAX_ELEMENTS: usize = 1024;

/// Most flowops of a transaction (a few bytes each; the 1 MiB text holds
/// about 20,000).
pub(crate) const MAX_FLOWOPS: usize = 65_536;

/// Slowest `rate=`: one iteration a day per user (1/86400 per second); a
/// smaller rate's wait between iterations would pass any clock.
pub(crate) const MIN_RATE: f64 = 1.0 / 86_400.0;

/// Why a profile is outside linkperf's bounds: the line of the element at
/// fault (as the client's file numbered it) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    /// Line of the element, in the file the profile came from.
    pub line: u32,
    /// What is wrong, naming the option.
    pub message: String,
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl Profile {
    /// Checks every bound the parser keeps, and the total of users: what
    /// passes can be mirrored, compiled and run without an overflow.
    pub fn check(&self) -> Result<(), CheckError> {
        let bad = |line: u32, message: String| Err(CheckError { line, message });
        if self.name.len() > MAX_NAME {
            return bad(
                1,
                format!("the profile's name is longer than {MAX_NAME} bytes"),
            );
        }
        if self.groups.is_empty() {
            return bad(1, "the profile has no groups".into());
        }
        if self.groups.len() > MAX_ELEMENTS {
            return bad(
                1,
                format!(
                    "the profile has {} groups; at most {MAX_ELEMENTS}",
                    self.groups.len()
                ),
            );
        }
        let mut users: u64 = 0;
        for g in &self.groups {
            if g.users == 0 || g.users > MAX_USERS {
                return bad(
                    g.line,
                    format!(
                        "nthreads={} is out of range: it must be between 1 and {MAX_USERS}",
                        g.users
                    ),
                );
            }
            users += u64::from(g.users);
            if g.transactions.is_empty() || g.transactions.len() > MAX_ELEMENTS {
                return bad(
                    g.line,
                    format!(
                        "a <group> has {} transactions: it needs 1 to {MAX_ELEMENTS}",
                        g.transactions.len()
                    ),
                );
            }
            for t in &g.transactions {
                if t.flowops.is_empty() || t.flowops.len() > MAX_FLOWOPS {
                    return bad(
                        t.line,
                        format!(
                            "a <transaction> has {} flowops: it needs 1 to {MAX_FLOWOPS}",
                            t.flowops.len()
                        ),
                    );
                }
                match t.limit {
                    Limit::Iterations(0) => {
                        return bad(t.line, "iterations=0: it must be at least 1".into())
                    }
                    Limit::Iterations(_) => {}
                    Limit::Duration(d) => time(t.line, "duration", d)?,
                }
                if let Some(r) = t.rate {
                    if !(r.0.is_finite() && r.0 >= MIN_RATE) {
                        return bad(
                            t.line,
                            format!(
                                "rate={} is out of range: at least one iteration a day (0.0000116)",
                                r.0
                            ),
                        );
                    }
                }
                for f in &t.flowops {
                    if f.count == 0 {
                        return bad(f.line, "count=0: it must be at least 1".into());
                    }
                    if let Some(d) = f.timeout {
                        time(f.line, "timeout", d)?;
                    }
                    if f.conn.as_ref().is_some_and(|c| c.len() > MAX_NAME) {
                        return bad(f.line, format!("conn= is longer than {MAX_NAME} bytes"));
                    }
                    match &f.kind {
                        FlowopKind::Connect(e) | FlowopKind::Accept(e) => {
                            let long =
                                |s: &Option<String>| s.as_ref().is_some_and(|s| s.len() > MAX_NAME);
                            if long(&e.remotehost) || long(&e.cc) {
                                return bad(
                                    f.line,
                                    format!("remotehost= or cc= is longer than {MAX_NAME} bytes"),
                                );
                            }
                            if e.wndsz.is_some_and(|w| w == 0 || w > MAX_WNDSZ) {
                                return bad(
                                    f.line,
                                    "wndsz= is out of range: it must be between 1 and 1g".into(),
                                );
                            }
                        }
                        FlowopKind::Read(x)
                        | FlowopKind::Write(x)
                        | FlowopKind::Send(x)
                        | FlowopKind::Recv(x)
                        | FlowopKind::Sendfile(x) => xfer(f.line, x)?,
                        FlowopKind::Think { duration, .. } => time(f.line, "duration", *duration)?,
                        FlowopKind::Disconnect | FlowopKind::Nop => {}
                    }
                }
            }
        }
        if users > u64::from(MAX_USERS) {
            return bad(
                self.groups[0].line,
                format!("the groups have {users} users together; at most {MAX_USERS} run at once"),
            );
        }
        Ok(())
    }
}

fn time(line: u32, key: &str, d: Duration) -> Result<(), CheckError> {
    if d.is_zero() || d > MAX_TIME {
        return Err(CheckError {
            line,
            message: format!(
                "{key}={d:?} is out of range: it must be longer than zero and at most 365 days"
            ),
        });
    }
    Ok(())
}

fn xfer(line: u32, x: &Xfer) -> Result<(), CheckError> {
    let bad = |message: &str| {
        Err(CheckError {
            line,
            message: message.into(),
        })
    };
    let in_range = |n: u64| (1..=MAX_XFER).contains(&n);
    match x.size {
        Size::Fixed(n) if !in_range(n) => {
            return bad("size= is out of range: it must be between 1 and 64m")
        }
        Size::Rand { min, max } if !in_range(min) || !in_range(max) => {
            return bad("size=rand(min,max) is out of range: both sizes must be between 1 and 64m")
        }
        Size::Rand { min, max } if min > max => {
            return bad("size=rand(min,max): the smallest size comes first")
        }
        _ => {}
    }
    if x.rsize.is_some_and(|r| !in_range(r)) {
        return bad("rsize= is out of range: it must be between 1 and 64m");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse_profile;

    fn base() -> Profile {
        parse_profile(
            r#"<profile name="p"><group nthreads="2"><transaction iterations="1">
               <flowop type="connect" options="remotehost=h protocol=tcp wndsz=1m"/>
               </transaction><transaction duration="1s">
               <flowop type="write" options="size=rand(1,10) rsize=4 count=2 timeout=1s"/>
               <flowop type="think" options="duration=1ms"/>
               </transaction></group></profile>"#,
            &|_| None,
        )
        .unwrap()
    }

    #[test]
    fn a_parsed_profile_passes() {
        assert_eq!(base().check(), Ok(()));
    }

    #[test]
    fn what_a_hostile_client_could_send_is_refused_naming_the_option() {
        type Edit = Box<dyn Fn(&mut Profile)>;
        let cases: Vec<(Edit, &str)> = vec![
            (Box::new(|p| p.groups.clear()), "no groups"),
            (Box::new(|p| p.groups[0].users = 0), "nthreads=0"),
            (
                Box::new(|p| {
                    p.groups[0].users = MAX_USERS;
                    let g = p.groups[0].clone();
                    p.groups.push(g);
                }),
                "users together",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].limit = Limit::Duration(Duration::MAX)),
                "duration=",
            ),
            (
                Box::new(|p| p.groups[0].transactions[0].limit = Limit::Iterations(0)),
                "iterations=0",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].rate = Some(super::super::Rate(f64::NAN))),
                "rate=",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].flowops[0].count = 0),
                "count=0",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].flowops.clear()),
                "has 0 flowops",
            ),
            (
                Box::new(|p| p.groups[0].transactions.clear()),
                "has 0 transactions",
            ),
            (
                Box::new(|p| {
                    let t = p.groups[0].transactions[0].clone();
                    p.groups[0].transactions = vec![t; MAX_ELEMENTS + 1];
                }),
                "has 1025 transactions",
            ),
            (
                Box::new(|p| {
                    let g = p.groups[0].clone();
                    p.groups = vec![g; MAX_ELEMENTS + 1];
                    for g in &mut p.groups {
                        g.users = 1;
                    }
                }),
                "1025 groups",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].rate = Some(super::super::Rate(1e-20))),
                "rate=",
            ),
            (
                Box::new(|p| p.groups[0].transactions[1].flowops[0].timeout = Some(Duration::ZERO)),
                "timeout=",
            ),
            (
                Box::new(|p| {
                    if let FlowopKind::Write(x) = &mut p.groups[0].transactions[1].flowops[0].kind {
                        x.size = Size::Rand {
                            min: 0,
                            max: u64::MAX,
                        };
                    }
                }),
                "between 1 and 64m",
            ),
            (
                Box::new(|p| {
                    if let FlowopKind::Write(x) = &mut p.groups[0].transactions[1].flowops[0].kind {
                        x.size = Size::Rand { min: 9, max: 2 };
                    }
                }),
                "smallest size comes first",
            ),
            (
                Box::new(|p| {
                    if let FlowopKind::Write(x) = &mut p.groups[0].transactions[1].flowops[0].kind {
                        x.rsize = Some(0);
                    }
                }),
                "rsize=",
            ),
            (
                Box::new(|p| {
                    if let FlowopKind::Connect(e) = &mut p.groups[0].transactions[0].flowops[0].kind
                    {
                        e.wndsz = Some(u64::MAX);
                    }
                }),
                "wndsz=",
            ),
            (
                Box::new(|p| {
                    p.groups[0].transactions[1].flowops[1].kind = FlowopKind::Think {
                        duration: Duration::MAX,
                        busy: false,
                    }
                }),
                "duration=",
            ),
        ];
        for (edit, want) in cases {
            let mut p = base();
            edit(&mut p);
            let e = p.check().expect_err(want);
            assert!(e.message.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn the_parser_refuses_times_past_the_bound() {
        let text = |t: &str| {
            format!(
                r#"<profile name="p"><group nthreads="1"><transaction duration="{t}">
                   <flowop type="nop"/></transaction></group></profile>"#
            )
        };
        assert!(parse_profile(&text("31536000"), &|_| None).is_ok());
        let e = parse_profile(&text("31536001"), &|_| None).unwrap_err();
        assert!(e.message.contains("at most 365 days"), "{e}");
    }
}
