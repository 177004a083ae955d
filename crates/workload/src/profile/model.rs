//! A uperf profile as linkperf runs it: groups of users, each running the
//! same transactions in order, each transaction a list of flowops repeated a
//! number of times or for a time. Parsed from uperf's XML (parse/), turned
//! into the server's view (mirror.rs), shipped in the control protocol.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A whole profile, variables already substituted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Profile {
    /// `<profile name=...>`.
    pub name: String,
    /// Its groups, in the file's order.
    pub groups: Vec<Group>,
}

/// `<group nthreads=N>` (or `nprocs=N`): N users running the same transactions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Group {
    /// How many users (uperf's threads or processes: flows on an event loop here).
    pub users: u32,
    /// The transactions, in order.
    pub transactions: Vec<Transaction>,
    /// Line of the `<group>` element in the file.
    pub line: u32,
    /// Its place among the file's groups, from 0 (kept when a profile is
    /// split by host, so results name groups as the file does).
    #[serde(default)]
    pub number: u32,
}

/// `<transaction iterations=N | duration=T [rate=R]>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Transaction {
    /// How many times, or how long, each user repeats the flowops.
    pub limit: Limit,
    /// Iterations per second per user, if paced.
    pub rate: Option<Rate>,
    /// The flowops of one iteration, in order.
    pub flowops: Vec<Flowop>,
    /// Line of the `<transaction>` element in the file.
    pub line: u32,
}

/// `rate=R`: iterations per second per user (a finite positive number).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub f64);

// A rate is a finite number (the parser sees to it), so equality is total.
impl Eq for Rate {}

impl std::hash::Hash for Rate {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.to_bits().hash(h);
    }
}

/// How long a transaction lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `iterations=N`: each user runs the flowops N times.
    Iterations(u64),
    /// `duration=T`: each user runs whole iterations until T has passed.
    Duration(Duration),
}

/// One `<flowop>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Flowop {
    /// What it does.
    pub kind: FlowopKind,
    /// `count=N`: the operation is done N times in a row (default 1).
    pub count: u64,
    /// `conn=NAME`: the user's connection it uses; `None` is the user's first.
    pub conn: Option<String>,
    /// `timeout=T`: longest one operation may take.
    pub timeout: Option<Duration>,
    /// `canfail`: a failed operation is counted and the user goes on.
    pub canfail: bool,
    /// Line of the `<flowop>` element in the file.
    pub line: u32,
}

/// The flowop types.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FlowopKind {
    /// Open a connection to the remote host.
    Connect(Endpoint),
    /// Take a connection the remote host opens.
    Accept(Endpoint),
    /// Close the connection.
    Disconnect,
    /// Read `size` bytes from a stream.
    Read(Xfer),
    /// Write `size` bytes to a stream.
    Write(Xfer),
    /// Send one message of `size` bytes (a datagram on UDP).
    Send(Xfer),
    /// Receive one message of `size` bytes (a datagram on UDP).
    Recv(Xfer),
    /// Send `size` bytes from a file with sendfile(2).
    Sendfile(Xfer),
    /// Wait `duration`, spinning on the CPU if `busy`.
    Think {
        /// How long.
        duration: Duration,
        /// Spin instead of sleeping.
        busy: bool,
    },
    /// Nothing (it still counts as an operation).
    Nop,
}

impl FlowopKind {
    /// The type as the profile names it (`connect`, `read`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            FlowopKind::Connect(_) => "connect",
            FlowopKind::Accept(_) => "accept",
            FlowopKind::Disconnect => "disconnect",
            FlowopKind::Read(_) => "read",
            FlowopKind::Write(_) => "write",
            FlowopKind::Send(_) => "send",
            FlowopKind::Recv(_) => "recv",
            FlowopKind::Sendfile(_) => "sendfile",
            FlowopKind::Think { .. } => "think",
            FlowopKind::Nop => "nop",
        }
    }
}

/// Where and how a connection is opened (`connect` and `accept` options).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    /// `remotehost=`: which linkperf server. `None` is the server given on
    /// the command line (or the embedded default).
    pub remotehost: Option<String>,
    /// `protocol=`.
    pub protocol: ProfileProtocol,
    /// `port=`: recorded; linkperf's server chooses its data ports itself.
    pub port: Option<u16>,
    /// `wndsz=`: socket buffer size, both directions.
    pub wndsz: Option<u64>,
    /// `tcp_nodelay`.
    pub nodelay: bool,
    /// `cc=`: TCP congestion control.
    pub cc: Option<String>,
}

/// The transports a profile may name that linkperf carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileProtocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// Options of a data flowop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Xfer {
    /// `size=`.
    pub size: Size,
    /// `rsize=`: the most each read call takes: on a read flowop, this
    /// side's reads; on a write, the other side's (default: the whole `size`).
    pub rsize: Option<u64>,
}

/// A size: fixed, or drawn for each operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Size {
    /// `size=N`.
    Fixed(u64),
    /// `size=rand(min,max)`: uniform in [min, max], the same on both ends.
    Rand {
        /// Smallest.
        min: u64,
        /// Largest.
        max: u64,
    },
}

impl Size {
    /// The size of the operation identified by `key` (any number both ends
    /// derive the same way): a fixed size, or the same draw on both ends.
    pub fn at(&self, key: u64) -> u64 {
        match *self {
            Size::Fixed(n) => n,
            // Profile::check keeps 1 <= min <= max <= 64 MiB; whatever else
            // arrives still gives a size, never an overflow.
            Size::Rand { min, max } => {
                let span = max.saturating_sub(min).saturating_add(1);
                min.saturating_add(splitmix64(key) % span)
            }
        }
    }

    /// The largest size this can give.
    pub fn max(&self) -> u64 {
        match *self {
            Size::Fixed(n) => n,
            Size::Rand { max, .. } => max,
        }
    }
}

/// A well-mixed 64-bit hash (SplitMix64's finaliser).
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Profile {
    /// Users over all groups.
    pub fn users(&self) -> u32 {
        self.groups
            .iter()
            .fold(0u32, |n, g| n.saturating_add(g.users))
    }

    /// The most transactions any group has (transaction `i` of every group
    /// starts together).
    pub fn transactions(&self) -> usize {
        self.groups
            .iter()
            .map(|g| g.transactions.len())
            .max()
            .unwrap_or(0)
    }
}

impl Profile {
    /// The least time the profile takes: each transaction index lasts at
    /// least its longest timed transaction over the groups.
    pub fn least_time(&self) -> Duration {
        (0..self.transactions())
            .map(|i| {
                self.groups
                    .iter()
                    .filter_map(|g| match g.transactions.get(i).map(|t| t.limit) {
                        Some(Limit::Duration(d)) => Some(d),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(Duration::ZERO)
            })
            .fold(Duration::ZERO, Duration::saturating_add)
    }
}
