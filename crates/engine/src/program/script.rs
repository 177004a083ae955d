//! A profile compiled for one side: each group's transactions with their
//! flowops resolved to connection numbers and flowop-type slots, so the
//! interpreter never looks at names.

use std::sync::Arc;
use std::time::Duration;

use linkperf_protocol::UDP_HEADER_LEN;
use linkperf_workload::profile::{FlowopKind, Limit, Profile, ProfileProtocol, Size};

/// The flowop types, in the order of [`TYPE_NAMES`].
pub const TYPES: usize = 10;
/// Names of the flowop types, indexed by [`Op::type_slot`].
pub const TYPE_NAMES: [&str; TYPES] = [
    "connect",
    "accept",
    "disconnect",
    "read",
    "write",
    "send",
    "recv",
    "sendfile",
    "think",
    "nop",
];

/// Largest payload of one datagram: UDP's 65,507 bytes less linkperf's header.
pub const MAX_DATAGRAM: u64 = 65_507 - UDP_HEADER_LEN as u64;

/// Most named connections one user may hold.
pub const MAX_CONNS: usize = 64;

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpKind {
    /// Open the connection (client) to the server.
    Connect,
    /// Take the connection the other side opens.
    Accept,
    /// Close the connection (after the other side's EOF on the server).
    Disconnect,
    /// Read `size` bytes, at most `chunk` per read call if set (`rsize`).
    Read(Size, Option<u64>),
    /// Write `size` bytes.
    Write(Size),
    /// Write `size` bytes with sendfile(2).
    Sendfile(Size),
    /// Wait.
    Think {
        /// How long.
        duration: Duration,
        /// Spin instead of sleeping.
        busy: bool,
    },
    /// Nothing.
    Nop,
}

/// One flowop, compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// What it does.
    pub kind: OpKind,
    /// How many times in a row.
    pub count: u64,
    /// The user's connection it uses.
    pub conn: usize,
    /// Longest one operation may take (`None`: the stall limit).
    pub timeout: Option<Duration>,
    /// A failure is counted and the user goes on.
    pub canfail: bool,
    /// Index into [`TYPE_NAMES`].
    pub type_slot: usize,
    /// Its place in its transaction (for the size draw).
    pub index: usize,
    /// Line of its flowop in the profile.
    pub line: u32,
}

/// One transaction, compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Txn {
    /// How many iterations or how long.
    pub limit: Limit,
    /// Iterations per second per user.
    pub rate: Option<f64>,
    /// The operations of one iteration.
    pub ops: Vec<Op>,
    /// Its slot in the side's per-transaction statistics.
    pub slot: usize,
}

/// What one group's users run.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// Transactions in order.
    pub txns: Vec<Txn>,
    /// Named connections each user holds.
    pub conns: usize,
    /// Socket options of each connection (from its connect/accept flowop).
    pub conn_options: Vec<ConnOptions>,
    /// The most sockets each connection holds open at once: every connect
    /// (or accept) opens one more, as uperf's do, and a disconnect closes
    /// the newest.
    pub peaks: Vec<u64>,
}

/// The most sockets each of a user's connections holds open at once over
/// the script: a connect opens one more (the earlier ones stay open), a
/// disconnect closes the newest. A timed transaction whose iterations open
/// more than they close would open without bound: refused.
fn peaks(
    txns: &[Txn],
    conns: usize,
    elements: &[linkperf_workload::profile::Transaction],
) -> Result<Vec<u64>, CompileError> {
    let mut open = vec![0u64; conns];
    let mut peak = vec![0u64; conns];
    for (t, element) in txns.iter().zip(elements) {
        for c in 0..conns {
            // One iteration's effect on connection c: the highest it goes
            // above where it started, and where it ends (disconnects below
            // nothing close nothing: they fail).
            let (mut level, mut high) = (0i128, 0i128);
            for op in t.ops.iter().filter(|o| o.conn == c) {
                let n = i128::from(op.count);
                match op.kind {
                    OpKind::Connect | OpKind::Accept => level = level.saturating_add(n),
                    OpKind::Disconnect => level = level.saturating_sub(n).max(-i128::from(open[c])),
                    _ => continue,
                }
                high = high.max(level);
            }
            let start = i128::from(open[c]);
            let (end, top) = match t.limit {
                Limit::Iterations(0) => (start, start),
                Limit::Iterations(n) if level > 0 => {
                    let n = i128::from(n);
                    (
                        start.saturating_add(n.saturating_mul(level)),
                        start
                            .saturating_add((n - 1).saturating_mul(level))
                            .saturating_add(high),
                    )
                }
                Limit::Iterations(n) => (
                    start.saturating_add(i128::from(n).saturating_mul(level)),
                    start + high,
                ),
                Limit::Duration(_) if level > 0 => {
                    return Err(CompileError {
                        line: element.line,
                        element: "transaction",
                        message: "each iteration of this timed transaction opens a connection it \
                              does not close: it would open connections without bound (uperf \
                              opens them until it runs out of descriptors); disconnect in the \
                              same iteration, or limit it with iterations="
                            .into(),
                    });
                }
                Limit::Duration(_) => ((start + level).max(0), start + high),
            };
            let clamp = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
            open[c] = clamp(end);
            peak[c] = peak[c].max(clamp(top));
        }
    }
    Ok(peak)
}

/// Socket options a profile sets on one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnOptions {
    /// `wndsz`: SO_SNDBUF and SO_RCVBUF.
    pub wndsz: Option<u64>,
    /// `tcp_nodelay`.
    pub nodelay: bool,
    /// `cc`.
    pub cc: Option<String>,
    /// `protocol=udp`: each write is one datagram, each read takes one.
    pub udp: bool,
}

/// A profile compiled: one script per group, and where each transaction
/// element's statistics go.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// One per group.
    pub scripts: Vec<Arc<Script>>,
    /// Users of each group.
    pub users: Vec<u32>,
    /// (group, index, line, limit in words, users) of each statistics slot.
    pub slots: Vec<SlotInfo>,
}

/// Which transaction element a statistics slot belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotInfo {
    /// Group, from 0.
    pub group: u32,
    /// Transaction in the group, from 0.
    pub index: u32,
    /// Line in the profile.
    pub line: u32,
    /// `iterations=5`, `duration=2s rate=100`.
    pub limit: String,
    /// Users of the group.
    pub users: u32,
}

/// Why a profile cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// Line of the element.
    pub line: u32,
    /// The element.
    pub element: &'static str,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, <{}>: {}",
            self.line, self.element, self.message
        )
    }
}

/// Compiles a profile (the client's view, or the mirrored server's view).
pub fn compile(p: &Profile) -> Result<Compiled, CompileError> {
    let mut scripts = Vec::new();
    let mut slots = Vec::new();
    for g in &p.groups {
        // A slot is one connection name opened with one protocol: uperf
        // lets a name be reconnected with another protocol once it is
        // closed (`multi_proto_connect.xml`), so `(name, udp)` keys a slot
        // and the other flowops use the slot their name's latest connect
        // (or accept) opened.
        let mut names: Vec<(Option<String>, bool)> = Vec::new();
        let mut current: std::collections::HashMap<Option<String>, usize> =
            std::collections::HashMap::new();
        let mut conn_options: Vec<ConnOptions> = Vec::new();
        // A flowop without conn= uses the user's unnamed connection, as
        // uperf's do; in a group whose connects (and accepts) are all named,
        // the one the group's first connect opens.
        let opens = || {
            g.transactions
                .iter()
                .flat_map(|t| t.flowops.iter())
                .filter(|f| matches!(f.kind, FlowopKind::Connect(_) | FlowopKind::Accept(_)))
        };
        let default_conn: Option<String> = if opens().any(|f| f.conn.is_none()) {
            None
        } else {
            opens().next().and_then(|f| f.conn.clone())
        };
        let mut txns = Vec::new();
        for (ti, t) in g.transactions.iter().enumerate() {
            let mut ops = Vec::new();
            for (oi, f) in t.flowops.iter().enumerate() {
                let name = f.conn.clone().or_else(|| default_conn.clone());
                let opened = match &f.kind {
                    FlowopKind::Connect(e) | FlowopKind::Accept(e) => {
                        Some(e.protocol == ProfileProtocol::Udp)
                    }
                    _ => None,
                };
                let found = match opened {
                    Some(udp) => names.iter().position(|n| n.0 == name && n.1 == udp),
                    None => current
                        .get(&name)
                        .copied()
                        .or_else(|| names.iter().position(|n| n.0 == name)),
                };
                let conn = match found {
                    Some(i) => i,
                    None => {
                        if names.len() == MAX_CONNS {
                            return Err(CompileError {
                                line: f.line,
                                element: "flowop",
                                message: format!(
                                    "more than {MAX_CONNS} named connections in one group"
                                ),
                            });
                        }
                        names.push((name.clone(), opened.unwrap_or(false)));
                        conn_options.push(ConnOptions::default());
                        names.len() - 1
                    }
                };
                if opened.is_some() {
                    current.insert(name, conn);
                }
                let kind = match &f.kind {
                    FlowopKind::Connect(e) | FlowopKind::Accept(e) => {
                        let udp = e.protocol == ProfileProtocol::Udp;
                        conn_options[conn] = ConnOptions {
                            wndsz: e.wndsz,
                            nodelay: e.nodelay,
                            cc: e.cc.clone(),
                            udp,
                        };
                        if matches!(f.kind, FlowopKind::Connect(_)) {
                            OpKind::Connect
                        } else {
                            OpKind::Accept
                        }
                    }
                    FlowopKind::Disconnect => OpKind::Disconnect,
                    FlowopKind::Read(x) | FlowopKind::Recv(x) => OpKind::Read(x.size, x.rsize),
                    FlowopKind::Write(x) | FlowopKind::Send(x) => OpKind::Write(x.size),
                    FlowopKind::Sendfile(x) => OpKind::Sendfile(x.size),
                    FlowopKind::Think { duration, busy } => OpKind::Think {
                        duration: *duration,
                        busy: *busy,
                    },
                    FlowopKind::Nop => OpKind::Nop,
                };
                let name = f.kind.name();
                let type_slot = TYPE_NAMES.iter().position(|n| *n == name).unwrap_or(0);
                ops.push(Op {
                    kind,
                    count: f.count.max(1),
                    conn,
                    timeout: f.timeout,
                    canfail: f.canfail,
                    type_slot,
                    index: oi,
                    line: f.line,
                });
            }
            let limit = match t.limit {
                Limit::Iterations(n) => format!("iterations={n}"),
                Limit::Duration(d) => format!("duration={d:?}"),
            };
            let limit = match t.rate {
                Some(r) => format!("{limit} rate={}", r.0),
                None => limit,
            };
            txns.push(Txn {
                limit: t.limit,
                rate: t.rate.map(|r| r.0),
                ops,
                slot: slots.len(),
            });
            slots.push(SlotInfo {
                group: g.number,
                index: ti as u32,
                line: t.line,
                limit,
                users: g.users,
            });
        }
        datagrams_fit(&txns, &conn_options)?;
        let peaks = peaks(&txns, names.len(), &g.transactions)?;
        scripts.push(Arc::new(Script {
            txns,
            conns: names.len(),
            conn_options,
            peaks,
        }));
    }
    Ok(Compiled {
        scripts,
        users: p.groups.iter().map(|g| g.users).collect(),
        slots,
    })
}

/// Over UDP, one datagram per operation, within what UDP carries; no
/// sendfile.
fn datagrams_fit(txns: &[Txn], conn_options: &[ConnOptions]) -> Result<(), CompileError> {
    for op in txns.iter().flat_map(|t: &Txn| t.ops.iter()) {
        if !conn_options.get(op.conn).is_some_and(|o| o.udp) {
            continue;
        }
        let refuse = |message: String| CompileError {
            line: op.line,
            element: "flowop",
            message,
        };
        match op.kind {
            OpKind::Sendfile(_) => return Err(refuse("sendfile needs a TCP connection".into())),
            OpKind::Read(s, _) | OpKind::Write(s) if s.max() > MAX_DATAGRAM => {
                return Err(refuse(format!(
                    "size {} does not fit in one UDP datagram (at most {MAX_DATAGRAM} bytes \
                     with linkperf's {UDP_HEADER_LEN}-byte header)",
                    s.max()
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

impl Compiled {
    /// (script, user within its group, group) of every user, users numbered
    /// group after group.
    pub fn user(&self, global: u32) -> Option<(Arc<Script>, u32, usize)> {
        let mut base = 0u32;
        for (gi, n) in self.users.iter().enumerate() {
            if global < base + n {
                return Some((self.scripts[gi].clone(), global - base, gi));
            }
            base += n;
        }
        None
    }

    /// Users over all groups.
    pub fn total_users(&self) -> u32 {
        self.users.iter().sum()
    }

    /// Transactions of the longest group.
    pub fn transactions(&self) -> usize {
        self.scripts.iter().map(|s| s.txns.len()).max().unwrap_or(0)
    }

    /// Whether transaction `i` of any group is limited by time (its end is
    /// agreed over the control connection).
    pub fn timed(&self, i: usize) -> bool {
        self.scripts
            .iter()
            .any(|s| matches!(s.txns.get(i).map(|t| t.limit), Some(Limit::Duration(_))))
    }

    /// The largest single operation's size.
    pub fn largest_op(&self) -> u64 {
        self.scripts
            .iter()
            .flat_map(|s| s.txns.iter().flat_map(|t| t.ops.iter()))
            .map(|o| match o.kind {
                OpKind::Read(s, _) | OpKind::Write(s) | OpKind::Sendfile(s) => s.max(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }
}

/// The key of one operation's size draw; both ends derive the same.
pub fn size_key(user: u32, txn: usize, iteration: u64, op: usize, rep: u64) -> u64 {
    let mut k = u64::from(user);
    for v in [txn as u64, iteration, op as u64, rep] {
        k = linkperf_workload::profile::splitmix64(k ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    k
}

impl Compiled {
    /// Data connections one side holds open at most: each user's most
    /// sockets open at once, over all users.
    pub fn connections(&self) -> u64 {
        self.scripts
            .iter()
            .zip(&self.users)
            .map(|(s, n)| {
                s.peaks
                    .iter()
                    .fold(0u64, |a, p| a.saturating_add(*p))
                    .saturating_mul(u64::from(*n))
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Whether any connection is UDP (the server then binds datagram sockets).
    pub fn uses_udp(&self) -> bool {
        self.scripts
            .iter()
            .any(|s| s.conn_options.iter().any(|o| o.udp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_workload::profile::parse_profile;

    fn compiled(body: &str) -> Result<Compiled, CompileError> {
        let text = format!(r#"<profile name="p"><group nthreads="3">{body}</group></profile>"#);
        compile(&parse_profile(&text, &|_| None).unwrap())
    }

    #[test]
    fn each_connect_opens_one_more_socket_and_each_disconnect_closes_one() {
        let c = compiled(
            r#"<transaction iterations="10"><flowop type="connect"/></transaction>
               <transaction iterations="4"><flowop type="disconnect"/></transaction>
               <transaction iterations="2"><flowop type="connect"/></transaction>"#,
        )
        .unwrap();
        assert_eq!(c.scripts[0].peaks, vec![10]);
        assert_eq!(c.connections(), 30);
        let c = compiled(
            r#"<transaction duration="1s"><flowop type="connect"/>
               <flowop type="disconnect"/></transaction>"#,
        )
        .unwrap();
        assert_eq!(c.scripts[0].peaks, vec![1]);
    }

    #[test]
    fn an_unnamed_flowop_uses_the_unnamed_connection_when_there_is_one() {
        let c = compiled(
            r#"<transaction><flowop type="accept" options="conn=1"/>
               <flowop type="connect"/><flowop type="write" options="size=1"/>
               <flowop type="write" options="conn=1 size=1"/></transaction>"#,
        )
        .unwrap();
        let ops = &c.scripts[0].txns[0].ops;
        assert_eq!(
            ops.iter().map(|o| o.conn).collect::<Vec<_>>(),
            vec![0, 1, 1, 0]
        );
    }

    #[test]
    fn a_timed_transaction_opening_more_than_it_closes_is_refused() {
        let e = compiled(r#"<transaction duration="1s"><flowop type="connect"/></transaction>"#)
            .unwrap_err();
        assert!(e.message.contains("without bound"), "{e}");
    }
}
