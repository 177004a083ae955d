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

use linkperf_wire::{LimitInfo, LimitKind};
use linkperf_workload::{Protocol, TestSpec};

/// Descriptors a worker holds besides its connections: its listener (or
/// UDP socket), its event queue and the waker's event descriptor.
const WORKER_DESCRIPTORS: u64 = 3;
/// Descriptors a session holds besides its workers: its control connection
/// and room for the environment's reads.
const SESSION_DESCRIPTORS: u64 = 4;
/// Threads a session holds besides its workers: its own and its CPU sampler.
const SESSION_THREADS: u64 = 2;
/// Connections waiting for their preamble a worker lets in beyond what it
/// expects (the engine's bound; see `engine::server`).
const PREAMBLE_SLACK: u64 = 64;
/// Most connections waiting for their preamble per worker counted from its
/// users (a real user's preamble arrives with its connection).
const PREAMBLE_PER_WORKER: u64 = 256;
/// A worker's own memory: its read scratch and datagram room, and its
/// histogram and counters (an HDR histogram of 3 significant figures over
/// 1 ns to an hour is under 128 KiB).
const WORKER_MEMORY: u64 = linkperf_engine::BUFFER_BYTES_PER_WORKER as u64 + 128 * 1024;
/// A data connection's user-space state: its flow, its slab entry, its
/// per-flow counts.
const CONNECTION_MEMORY: u64 = 1024;
/// The kernel's socket buffers of a connection, counted at the sizes a socket
/// starts with (the kernel grows them within `net.ipv4.tcp_mem`, which bounds
/// all TCP memory of the host): SO_SNDBUF and SO_RCVBUF as asked (the
/// kernel doubles what is asked), else the defaults of `tcp_wmem`/`tcp_rmem`.
const DEFAULT_SOCKET_BUFFERS: u64 = 16 * 1024 + 128 * 1024;

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
        Cost::of(
            connections,
            workers.clamp(1, spec.users.max(1)),
            socket_buffers(spec),
        )
    }

    /// A profile whose server side holds `connections` data connections at
    /// most, carried by `workers` workers.
    pub fn profile(connections: u64, workers: u32) -> Cost {
        Cost::of(connections, workers.max(1), DEFAULT_SOCKET_BUFFERS)
    }

    fn of(connections: u64, workers: u32, per_socket: u64) -> Cost {
        let workers = u64::from(workers);
        // The connections waiting for their preamble that the engine lets in.
        let waiting = connections.min(PREAMBLE_PER_WORKER * workers) + PREAMBLE_SLACK * workers;
        Cost {
            threads: workers + SESSION_THREADS,
            descriptors: connections + waiting + WORKER_DESCRIPTORS * workers + SESSION_DESCRIPTORS,
            memory_bytes: workers * WORKER_MEMORY
                + (connections + waiting) * (CONNECTION_MEMORY + per_socket),
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

/// The socket buffers one connection of `spec` starts with.
fn socket_buffers(spec: &TestSpec) -> u64 {
    let asked = |b: Option<u32>, default: u64| b.map_or(default, |b| 2 * u64::from(b));
    let (snd, rcv) = match spec.protocol {
        Protocol::Udp => (
            asked(spec.socket.sndbuf, 208 * 1024),
            asked(spec.socket.rcvbuf, 208 * 1024),
        ),
        _ => (
            asked(spec.socket.sndbuf, 16 * 1024),
            asked(spec.socket.rcvbuf, 128 * 1024),
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
        let small = Cost::workload(&spec("rr:1x64k", 1024), 16);
        let huge = Cost::workload(&spec("rr:1x64m", 1024), 16);
        assert_eq!(
            small, huge,
            "a 64 MiB response costs what a 64 KiB one does"
        );
        assert_eq!(small.threads, 18);
        assert_eq!(small.connections, 1024);
        // 1024 connections, 1024 waiting at most (256 per worker), 64 more per worker.
        assert_eq!(small.descriptors, 1024 + 1024 + 64 * 16 + 3 * 16 + 4);
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
                .starts_with("needs 3,150 descriptors, this server may use 2,048"),
            "{e}"
        );
        assert_eq!(
            ledger.in_use(),
            Cost::default(),
            "nothing charged for a refusal"
        );
    }

    #[test]
    fn numbers_have_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2512), "2,512");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
