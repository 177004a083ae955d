//! The server's view of a profile: every flowop turned into its opposite, as
//! uperf's slave runs it (a `write` on the client is a `read` on the server,
//! `connect` is `accept`, `think` is the client's own time).

use super::model::{Flowop, FlowopKind, Profile};

/// The profile the server runs: the same groups, users and transactions,
/// each flowop replaced by its opposite.
pub fn mirror(p: &Profile) -> Profile {
    let mut out = p.clone();
    for g in &mut out.groups {
        for t in &mut g.transactions {
            for f in &mut t.flowops {
                *f = opposite(f);
            }
        }
    }
    out
}

fn opposite(f: &Flowop) -> Flowop {
    let kind = match &f.kind {
        FlowopKind::Connect(e) => FlowopKind::Accept(e.clone()),
        FlowopKind::Accept(e) => FlowopKind::Connect(e.clone()),
        FlowopKind::Disconnect => FlowopKind::Disconnect,
        FlowopKind::Read(x) => FlowopKind::Write(*x),
        FlowopKind::Write(x) | FlowopKind::Sendfile(x) => FlowopKind::Read(*x),
        FlowopKind::Send(x) => FlowopKind::Recv(*x),
        FlowopKind::Recv(x) => FlowopKind::Send(*x),
        FlowopKind::Think { .. } | FlowopKind::Nop => FlowopKind::Nop,
    };
    Flowop {
        kind,
        // The server waits as long as the client lets it (its timeouts are
        // the client's business), and follows the client's failures.
        timeout: None,
        canfail: f.canfail,
        ..f.clone()
    }
}
