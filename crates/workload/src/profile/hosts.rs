//! Which linkperf server each group of a profile talks to: the
//! `remotehost` of its `connect` flowops. A profile naming several hosts
//! runs on several servers at once, each with its own groups.

use super::model::{FlowopKind, Profile, ProfileProtocol};
use super::parse::ProfileError;

/// Refuses what linkperf does not run yet, naming the flowop's line: an
/// `accept` over UDP on the client (docs/profiles.md says so).
pub fn check_runnable(p: &Profile) -> Result<(), ProfileError> {
    for f in p
        .groups
        .iter()
        .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
    {
        let refuse = |what: &str| ProfileError {
            line: f.line,
            element: "flowop".into(),
            message: format!("{what} is not supported yet (docs/profiles.md)"),
            unset_variable: None,
        };
        match &f.kind {
            FlowopKind::Accept(e) if e.protocol == ProfileProtocol::Udp => {
                return Err(refuse(
                    "type=accept with protocol=udp (the server opening the connection)",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The profile split by remote host, in order of first appearance: each
/// host (`None` where no flowop names one) with the groups that connect to
/// it. A group whose flowops name two hosts is refused (a user talks to one
/// server).
pub fn split_by_host(p: &Profile) -> Result<Vec<(Option<String>, Profile)>, ProfileError> {
    let mut parts: Vec<(Option<String>, Profile)> = Vec::new();
    for g in &p.groups {
        let mut host: Option<(&str, u32)> = None;
        for f in g.transactions.iter().flat_map(|t| t.flowops.iter()) {
            let (FlowopKind::Connect(e) | FlowopKind::Accept(e)) = &f.kind else {
                continue;
            };
            let Some(h) = e.remotehost.as_deref() else {
                continue;
            };
            match host {
                None => host = Some((h, f.line)),
                Some((first, line)) if first != h => {
                    return Err(ProfileError {
                        line: f.line,
                        element: "flowop".into(),
                        message: format!(
                            "remotehost={h} differs from remotehost={first} (line {line}) in the same \
                             group: each user talks to one server; put the other host's flowops in a \
                             group of their own"
                        ),
                        unset_variable: None,
                    });
                }
                Some(_) => {}
            }
        }
        let host = host.map(|(h, _)| h.to_string());
        match parts.iter_mut().find(|(h, _)| *h == host) {
            Some((_, part)) => part.groups.push(g.clone()),
            None => parts.push((
                host,
                Profile {
                    name: p.name.clone(),
                    groups: vec![g.clone()],
                },
            )),
        }
    }
    // Groups that name no host go with the first host named, if any.
    if parts.len() > 1 {
        if let Some(i) = parts.iter().position(|(h, _)| h.is_none()) {
            let (_, unnamed) = parts.remove(i);
            parts[0].1.groups.extend(unnamed.groups);
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse_profile;

    #[test]
    fn groups_go_to_the_host_their_connects_name() {
        let p = parse_profile(
            "<profile name=two>\
             <group nthreads=2><transaction><flowop type=connect options=\"remotehost=a\"/></transaction></group>\
             <group nthreads=3><transaction><flowop type=connect options=\"remotehost=b\"/></transaction></group>\
             <group nthreads=1><transaction><flowop type=nop/></transaction></group>\
             <group nthreads=4><transaction><flowop type=connect options=\"remotehost=a\"/></transaction></group>\
             </profile>",
            &|_| None,
        )
        .unwrap();
        let parts = split_by_host(&p).unwrap();
        let shape: Vec<(Option<&str>, u32)> = parts
            .iter()
            .map(|(h, p)| (h.as_deref(), p.users()))
            .collect();
        assert_eq!(shape, vec![(Some("a"), 7), (Some("b"), 3)]);
    }

    #[test]
    fn a_group_naming_two_hosts_is_refused_with_its_line() {
        let p = parse_profile(
            "<profile name=x>\n<group nthreads=1><transaction>\n\
             <flowop type=connect options=\"remotehost=a conn=1\"/>\n\
             <flowop type=connect options=\"remotehost=b conn=2\"/>\n\
             </transaction></group></profile>",
            &|_| None,
        )
        .unwrap();
        let e = split_by_host(&p).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("remotehost=b differs"), "{e}");
    }
}
