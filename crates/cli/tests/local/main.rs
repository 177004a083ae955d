//! linkperf end to end on this host: the real binary, real `linkperf serve`
//! processes, real sockets on loopback (and, as root, a few faults in
//! network namespaces), stock iperf3 where interop is claimed, a real
//! browser where a page is claimed. One test binary; `util` is the one
//! helper module it shares with the lab's.

// Each binary uses part of the helpers.
#[allow(dead_code, unused_imports)]
#[path = "../util/mod.rs"]
mod util;

mod budgets;
mod deploy;
mod e2e;
mod faults;
mod help;
mod history;
mod iperf3;
mod mesh;
mod noise;
mod open_loop;
mod profile;
mod report;
mod strangers;
mod suite;
