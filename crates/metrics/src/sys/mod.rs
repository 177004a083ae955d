//! The operating-system boundary: every system call and every read of `/proc`,
//! `/sys` or a cgroup file in this crate goes through here, so the logic above it
//! (deltas, aggregation, choosing a counter, planning a limit change) works on
//! plain values and is tested without root or a particular kernel.
//!
//! # Contract
//!
//! - Nothing here panics on what the OS returns. A call that fails, a file that is
//!   missing or unreadable, or text that does not parse gives `None` (or an
//!   `io::Error` where the caller must report why), never a guessed value.
//! - Parsers are pure functions over `&str` (see [`procfs`]), unit-tested on fixed
//!   text; the functions that read a file only read it and hand the text to them.
//! - Times leave this module in seconds (`f64`) or in the counter's own integer
//!   unit (ticks, nanoseconds, microseconds), as each function says.
//! - Thread-affecting calls ([`affinity`]) act on the calling thread only.
//! - Socket calls ([`socket`]) take a raw descriptor they do not own and never close
//!   it; the one probe that needs a socket of its own (whether a congestion control
//!   can be set) opens it and closes it before returning.
//!
//! Modules: [`procfs`] (text files and their parsers), [`rusage`] (getrusage,
//! rlimits, sysconf), [`affinity`] (sched_setaffinity, sched_getaffinity,
//! sched_getcpu), [`socket`] (TCP_INFO and other getsockopt), [`host`] (hostname,
//! uname, interface addresses), [`netlink`] (the namespace's interfaces and root
//! queues with their counters, over rtnetlink).

pub(crate) mod affinity;
pub(crate) mod host;
pub(crate) mod netlink;
pub(crate) mod procfs;
pub(crate) mod rusage;
pub(crate) mod socket;
