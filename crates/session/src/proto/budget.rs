//! What a test may hold on the server, charged before anything is allocated.
//!
//! A request is turned into the threads, descriptors, memory and data
//! connections its server side will hold at most ([`Cost`]), and admitted only
//! if that fits what the daemon has left of its [`Budget`] (what its host's
//! limits and its flags allow). The charge is given back when the test ends
//! ([`Charge`] on drop), so the sum over running sessions never passes the
//! budget. A refusal names the limit, what the test needed and what was left:
//! `needs 2,512 descriptors, this server may use 2,048 (300 in use by other
//! tests)`. The formula and the worst cases are in `docs/security.md`.

use std::fmt;
use std::sync::Mutex;

use linkperf_protocol::{LimitInfo, LimitKind};
use linkperf_workload::{Protocol, TestSpec};

/// Descriptors a worker holds besides its connections: its listener (or
/// UDP socket), its event queue and the waker's event descriptor.
const WORKER_DESCRIPTORS: u64 = 3;
/// Descriptors a session holds besides its workers: its control connection
/// and room for the environment's reads.
const SESSION_DESCRIPTORS: u64 = 4;
/// Threads a session holds besides its workers: its own and its CPU sampler.
const SESSION_THREADS: u64 = 2;
/// Threads a delegated test holds besides a test's: the one that runs it as
/// a client (`run_test`) and the one that waits for its client workers.
const DELEGATE_THREADS: u64 = 2;
/// Descriptors a delegated test holds besides a test's: its control
/// connection to the target.
const DELEGATE_DESCRIPTORS: u64 = 1;
/// A worker's own memory: its read scratch and datagram room, and its
/// histogram and counters (an HDR histogram of 3 significant figures,
/// allocated with its first value and grown with the values, takes at most
/// [`linkperf_metrics::MAX_HISTOGRAM_BYTES`]).
const WORKER_MEMORY: u64 =
    linkperf_engine::BUFFER_BYTES_PER_WORKER as u64 + linkperf_metrics::MAX_HISTOGRAM_BYTES;
/// A data connection's user-space state: its flow, its slab entry, its
/// per-flow counts.
const CONNECTION_MEMORY: u64 = 1024;
/// The kernel's receive buffer of a TCP connection, counted at the size it
/// starts with (`tcp_rmem`'s default; the kernel grows it within
/// `net.ipv4.tcp_mem`, which bounds all TCP memory of the host).
const DEFAULT_RCVBUF: u64 = 128 * 1024;
/// The socket buffers of a connection nobody sized: `tcp_wmem`'s and
/// `tcp_rmem`'s defaults (a connection still waiting for its preamble, a
/// profile's).
const DEFAULT_SOCKET_BUFFERS: u64 = 16 * 1024 + DEFAULT_RCVBUF;

/// What the daemon may hold for all its tests together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Worker and session threads of running tests.
    pub threads: u64,
    /// File descriptors of running tests.
    pub descriptors: u64,
    /// Memory of running tests, bytes (user space, and socket buffers at
    /// their starting sizes).
    pub memory_bytes: u64,
    /// Data connections of running tests.
    pub connections: u64,
}

/// What one test holds at most.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Threads.
    pub threads: u64,
    /// File descriptors.
    pub descriptors: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Data connections.
    pub connections: u64,
}

impl Cost {
    /// A workload test of `spec` carried by `workers` server workers (the
    /// server runs at most one per user).
    pub fn workload(spec: &TestSpec, workers: u32) -> Cost {
        let connections = u64::from(spec.users);
        let workers = workers.clamp(1, spec.users.max(1));
        // The workload server's gate follows its connected flows: connected
        // and waiting, each worker holds its flows and 64 more at most.
        let waiting = linkperf_engine::io::waiting_beyond(u64::from(workers));
        Cost::of(connections, workers, socket_buffers(spec), waiting)
    }

    /// A delegated test of `spec` run by this daemon as the client, on
    /// `workers` client workers: what a server side of the same test holds
    /// (its workers hold as many connections and buffers), and the threads
    /// and the control connection of a client.
    pub fn delegated(spec: &TestSpec, workers: u32) -> Cost {
        let mut c = Cost::workload(spec, workers);
        c.threads += DELEGATE_THREADS;
        c.descriptors += DELEGATE_DESCRIPTORS;
        c
    }

    /// A profile whose server side holds `connections` data connections at
    /// most, carried by `workers` workers, with `transactions` transaction
    /// elements in all its groups: each worker, and the merge of theirs,
    /// keeps a histogram for each of them and for each flowop type
    /// ([`linkperf_engine::program::most_stats_bytes`]).
    pub fn profile(connections: u64, workers: u32, transactions: usize) -> Cost {
        // A profile's workers keep their gate's cap of none connected: as
        // many more waiting as their connections, and 64 a worker.
        let workers = workers.max(1);
        let waiting =
            connections.saturating_add(linkperf_engine::io::waiting_beyond(u64::from(workers)));
        let mut c = Cost::of(connections, workers, DEFAULT_SOCKET_BUFFERS, waiting);
        let stats =
            linkperf_engine::program::most_stats_bytes(transactions, workers.max(1) as usize);
        c.memory_bytes = c.memory_bytes.saturating_add(stats);
        c
    }

    /// `connections` with `per_socket` of buffers each, and `waiting` more
    /// (the engine's own bound on those waiting for their preamble beyond
    /// them) at the kernel's default buffers; a connection's place may be
    /// held by one waiting, so each is charged the larger of the two.
    fn of(connections: u64, workers: u32, per_socket: u64, waiting: u64) -> Cost {
        let workers = u64::from(workers);
        let per_socket = per_socket.max(DEFAULT_SOCKET_BUFFERS);
        let memory = workers
            .saturating_mul(WORKER_MEMORY)
            .saturating_add(connections.saturating_mul(CONNECTION_MEMORY + per_socket))
            .saturating_add(waiting.saturating_mul(CONNECTION_MEMORY + DEFAULT_SOCKET_BUFFERS));
        Cost {
            threads: workers + SESSION_THREADS,
            descriptors: connections
                .saturating_add(waiting)
                .saturating_add(WORKER_DESCRIPTORS * workers + SESSION_DESCRIPTORS),
            memory_bytes: memory,
            connections,
        }
    }

    fn plus(self, o: Cost) -> Cost {
        Cost {
            threads: self.threads.saturating_add(o.threads),
            descriptors: self.descriptors.saturating_add(o.descriptors),
            memory_bytes: self.memory_bytes.saturating_add(o.memory_bytes),
            connections: self.connections.saturating_add(o.connections),
        }
    }

    fn minus(self, o: Cost) -> Cost {
        Cost {
            threads: self.threads.saturating_sub(o.threads),
            descriptors: self.descriptors.saturating_sub(o.descriptors),
            memory_bytes: self.memory_bytes.saturating_sub(o.memory_bytes),
            connections: self.connections.saturating_sub(o.connections),
        }
    }
}

/// The socket buffers one data connection of `spec` may hold on the server:
/// its send buffer as the server locks it (twice
/// [`linkperf_engine::io::server_sndbuf`]: the kernel doubles what is asked
/// and, the size set, no longer grows it, whatever the client reads), and
/// its receive buffer at the size it starts with (twice SO_RCVBUF as asked,
/// else `tcp_rmem`'s default); for UDP, 208 KiB each unless asked.
fn socket_buffers(spec: &TestSpec) -> u64 {
    let asked = |b: Option<u32>, default: u64| b.map_or(default, |b| 2 * u64::from(b));
    let locked = linkperf_engine::io::server_sndbuf(spec).map(|n| n as u64);
    let (snd, rcv) = match spec.protocol {
        Protocol::Udp => (
            asked(spec.socket.sndbuf, 208 * 1024),
            asked(spec.socket.rcvbuf, 208 * 1024),
        ),
        _ => (
            locked.map_or(16 * 1024, |n| 2 * n),
            asked(spec.socket.rcvbuf, DEFAULT_RCVBUF),
        ),
    };
    snd + rcv
}

/// A limit a request met: which, what it needed, the most allowed, and what
/// others held. Says nothing of flags: the command line maps kinds to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Which limit.
    pub kind: LimitKind,
    /// What the request needed.
    pub got: u64,
    /// The most allowed (in all, for a budget).
    pub max: u64,
    /// What other tests held when it was asked for (budgets only).
    pub in_use: u64,
}

impl Limit {
    /// The limit as it crosses the wire.
    pub fn info(&self) -> LimitInfo {
        LimitInfo {
            kind: self.kind,
            got: self.got,
            max: self.max,
            in_use: self.in_use,
        }
    }
}

/// `12345678` → `12,345,678`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (got, max) = (thousands(self.got), thousands(self.max));
        let others = if self.in_use > 0 {
            format!(" ({} in use by other tests)", thousands(self.in_use))
        } else {
            String::new()
        };
        match self.kind {
            LimitKind::Users => write!(f, "{got} users exceed this server's limit of {max} per test"),
            LimitKind::DurationS => write!(
                f,
                "a test of {got} s (warm-up and duration) exceeds this server's limit of {max} s"
            ),
            LimitKind::Threads => {
                write!(f, "needs {got} threads, this server may use {max}{others}")
            }
            LimitKind::Descriptors => {
                write!(f, "needs {got} descriptors, this server may use {max}{others}")
            }
            LimitKind::MemoryBytes => write!(
                f,
                "needs {} MiB of memory, this server may use {} MiB{}",
                thousands(self.got.div_ceil(1 << 20)),
                thousands(self.max >> 20),
                if self.in_use > 0 {
                    format!(" ({} MiB in use by other tests)", thousands(self.in_use >> 20))
                } else {
                    String::new()
                }
            ),
            LimitKind::Connections => {
                write!(f, "needs {got} data connections, this server may hold {max}{others}")
            }
            LimitKind::Sessions => write!(f, "this server already serves {max} sessions, its limit"),
            LimitKind::BytesPerSession => write!(
                f,
                "the test moved {got} bytes, past this server's limit of {max} per session; the server stopped it"
            ),
        }
    }
}

/// The resources running tests hold, charged against the budget.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    in_use: Mutex<Cost>,
}

/// A test's charge; given back when dropped.
#[derive(Debug)]
pub(crate) struct Charge<'a> {
    ledger: &'a Ledger,
    cost: Cost,
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        let mut used = self.ledger.in_use.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.minus(self.cost);
    }
}

impl Ledger {
    /// Charges `cost` if, with what is in use, it stays within `budget`;
    /// otherwise the first limit it would pass.
    pub(crate) fn charge(&self, cost: Cost, budget: &Budget) -> Result<Charge<'_>, Limit> {
        let mut used = self.in_use.lock().unwrap_or_else(|e| e.into_inner());
        let total = used.plus(cost);
        for (kind, want, max, held) in [
            (
                LimitKind::Threads,
                cost.threads,
                budget.threads,
                used.threads,
            ),
            (
                LimitKind::Descriptors,
                cost.descriptors,
                budget.descriptors,
                used.descriptors,
            ),
            (
                LimitKind::MemoryBytes,
                cost.memory_bytes,
                budget.memory_bytes,
                used.memory_bytes,
            ),
            (
                LimitKind::Connections,
                cost.connections,
                budget.connections,
                used.connections,
            ),
        ] {
            let now = match kind {
                LimitKind::Threads => total.threads,
                LimitKind::Descriptors => total.descriptors,
                LimitKind::MemoryBytes => total.memory_bytes,
                _ => total.connections,
            };
            if now > max {
                return Err(Limit {
                    kind,
                    got: want,
                    max,
                    in_use: held,
                });
            }
        }
        *used = total;
        Ok(Charge { ledger: self, cost })
    }

    /// What running tests hold now.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> Cost {
        *self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spec(w: &str, users: u32) -> TestSpec {
        TestSpec::new(
            w.parse().unwrap(),
            Protocol::Tcp,
            users,
            Duration::from_secs(1),
        )
    }

    #[test]
    fn a_tests_cost_grows_with_its_users_not_with_its_messages() {
        // Past the largest send buffer the server locks (256 KiB), the
        // message size changes nothing.
        let small = Cost::workload(&spec("rr:1x256k", 1024), 16);
        let huge = Cost::workload(&spec("rr:1x64m", 1024), 16);
        assert_eq!(
            small, huge,
            "a 64 MiB response costs what a 256 KiB one does"
        );
        assert_eq!(small.threads, 18);
        assert_eq!(small.connections, 1024);
        // 1024 connections, 64 more per worker connected or waiting (the
        // engine's gate), each worker's own 3, the session's 4.
        assert_eq!(small.descriptors, 1024 + 64 * 16 + 3 * 16 + 4);
        // The server runs at most one worker per user.
        assert_eq!(Cost::workload(&spec("rr1c-1x1", 1), 64).threads, 3);
    }

    #[test]
    fn charges_stay_within_the_budget_and_are_given_back() {
        let ledger = Ledger::default();
        let budget = Budget {
            threads: 10,
            descriptors: 2048,
            memory_bytes: 1 << 30,
            connections: 50_000,
        };
        let one = Cost::workload(&spec("rr1c-1x1", 100), 2);
        let a = ledger.charge(one, &budget).unwrap();
        let b = ledger.charge(one, &budget).unwrap();
        // A third would need 4 threads more than the 10 allowed: 8 in use.
        let e = ledger.charge(one, &budget).unwrap_err();
        assert_eq!(
            (e.kind, e.got, e.max, e.in_use),
            (LimitKind::Threads, 4, 10, 8)
        );
        assert_eq!(
            e.to_string(),
            "needs 4 threads, this server may use 10 (8 in use by other tests)"
        );
        drop(a);
        let c = ledger.charge(one, &budget).unwrap();
        drop((b, c));
        assert_eq!(ledger.in_use(), Cost::default());
    }

    #[test]
    fn a_test_larger_than_the_descriptors_is_refused_with_the_figures() {
        let ledger = Ledger::default();
        let budget = Budget {
            threads: 64,
            descriptors: 2048,
            memory_bytes: 1 << 34,
            connections: 50_000,
        };
        let e = ledger
            .charge(Cost::workload(&spec("rr1c-1x1", 2500), 2), &budget)
            .unwrap_err();
        assert_eq!(e.kind, LimitKind::Descriptors);
        assert!(
            e.to_string()
                .starts_with("needs 2,638 descriptors, this server may use 2,048"),
            "{e}"
        );
        assert_eq!(
            ledger.in_use(),
            Cost::default(),
            "nothing charged for a refusal"
        );
    }

    #[test]
    fn a_stream_servers_send_buffers_are_charged_as_locked() {
        let kib = 1024;
        let per_conn = |w: &str| {
            let one = Cost::workload(&spec(w, 1), 1).memory_bytes;
            let two = Cost::workload(&spec(w, 2), 1).memory_bytes;
            // One connection more (those waiting for a preamble are bounded
            // by the workers, not the users).
            two - one
        };
        // A download's sender: as locked on this host (tcp_wmem's maximum
        // for few users), doubled, and the receive buffer's 128 KiB.
        let locked = linkperf_engine::io::server_sndbuf(&spec("str-writex30k", 2)).unwrap() as u64;
        assert_eq!(per_conn("str-writex30k"), kib + 2 * locked + 128 * kib);
        // An upload's server sends nothing: the least, 2 x 16 KiB.
        assert_eq!(per_conn("str-readx30k"), kib + 32 * kib + 128 * kib);
        // A response of 30 KiB at a time: 2 x 30 KiB.
        assert_eq!(per_conn("rr1c-200x30k"), kib + 60 * kib + 128 * kib);
        // Asked for: as asked, doubled.
        let mut asked = spec("str-writex30k", 1);
        asked.socket.sndbuf = Some(1 << 20);
        let mut asked2 = asked.clone();
        asked2.users = 2;
        let d = Cost::workload(&asked2, 1).memory_bytes - Cost::workload(&asked, 1).memory_bytes;
        assert_eq!(d, kib + 2048 * kib + 128 * kib);
    }

    #[test]
    fn a_profiles_statistics_are_charged_per_transaction_and_worker() {
        let few = Cost::profile(16, 2, 4);
        let many = Cost::profile(16, 2, 8 * 1024);
        let per = linkperf_metrics::MAX_HISTOGRAM_BYTES;
        // Two workers and their merge, each a histogram per transaction more.
        assert_eq!(
            many.memory_bytes - few.memory_bytes,
            3 * (8 * 1024 - 4) * per
        );
        // 8 groups of 1,024 transactions on 2 workers: 7.9 GiB at most
        // (with the flowop types' and the iterations' two each), refused by
        // a budget of 200 MiB.
        assert_eq!(many.memory_bytes >> 20, 8_099, "{}", many.memory_bytes);
        let ledger = Ledger::default();
        let budget = Budget {
            threads: 64,
            descriptors: 1 << 20,
            memory_bytes: 200 << 20,
            connections: 50_000,
        };
        let e = ledger.charge(many, &budget).unwrap_err();
        assert_eq!(e.kind, LimitKind::MemoryBytes);
        assert!(ledger.charge(few, &budget).is_ok());
    }

    #[test]
    fn a_delegated_test_charges_a_clients_threads_too() {
        let s = spec("rr1c-1x1", 64);
        let (w, d) = (Cost::workload(&s, 14), Cost::delegated(&s, 14));
        // 14 client workers, the session, its sampler, the test's runner and
        // its waiter: 18.
        assert_eq!(d.threads, 18);
        assert_eq!(d.threads - w.threads, 2);
        assert_eq!(d.descriptors - w.descriptors, 1);
    }

    #[test]
    fn numbers_have_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2512), "2,512");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
