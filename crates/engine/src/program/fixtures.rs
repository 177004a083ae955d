//! Profiles the program's tests build: flowops, transfers, a connect, and a
//! connect followed by one transaction.

use linkperf_workload::profile::{
    Endpoint, Flowop, FlowopKind, Group, Limit, Profile, ProfileProtocol, Size, Transaction, Xfer,
};

/// Flowop `kind`, `count` times, on the default connection.
pub(crate) fn op(kind: FlowopKind, count: u64) -> Flowop {
    Flowop {
        kind,
        count,
        conn: None,
        timeout: None,
        canfail: false,
        line: 1,
    }
}

/// A transfer of `n` bytes.
pub(crate) fn x(n: u64) -> Xfer {
    Xfer {
        size: Size::Fixed(n),
        rsize: None,
    }
}

/// A connect over `protocol` to the server's default endpoint (with
/// `tcp_nodelay`, which a datagram connection ignores).
pub(crate) fn connect_over(protocol: ProfileProtocol) -> Flowop {
    op(
        FlowopKind::Connect(Endpoint {
            remotehost: None,
            protocol,
            port: None,
            wndsz: None,
            nodelay: true,
            cc: None,
        }),
        1,
    )
}

/// One group of one user: a connect over `protocol` (line 2), then a
/// transaction of `flowops` under `limit` (line 3).
pub(crate) fn connect_then(
    limit: Limit,
    protocol: ProfileProtocol,
    flowops: Vec<Flowop>,
) -> Profile {
    Profile {
        name: "t".into(),
        groups: vec![Group {
            number: 0,
            users: 1,
            line: 1,
            transactions: vec![
                Transaction {
                    limit: Limit::Iterations(1),
                    rate: None,
                    flowops: vec![connect_over(protocol)],
                    line: 2,
                },
                Transaction {
                    limit,
                    rate: None,
                    flowops,
                    line: 3,
                },
            ],
        }],
    }
}
