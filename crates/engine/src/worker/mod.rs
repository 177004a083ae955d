//! The event-loop workers and what every one of them is made of: the loop
//! it turns and its event wait (driver.rs), what the coordinating thread
//! tells it (signals.rs), its window clock and placement (clock.rs), its
//! payload buffers (buffers.rs), what it hands over at its end (handover.rs)
//! and how it starts, its event loop made and its thread pinned (spawn.rs).
//! Beside them, the one acceptor (acceptor.rs): the event loop where new
//! connections wait until they are someone's (the daemon's lobby, the
//! iperf3 port).
//! The workers: a test's client (client.rs, client/) and server (server.rs,
//! server/) sides, and a profile's on either side (profile.rs, profile/).
//! Both sides of a test run together on loopback in tests.rs.

pub mod acceptor;
pub(crate) mod buffers;
pub(crate) mod client;
pub(crate) mod clock;
pub mod driver;
pub mod generic;
pub(crate) mod handover;
pub(crate) mod profile;
pub(crate) mod server;
pub(crate) mod signals;
pub mod spawn;
#[cfg(test)]
mod tests;
pub(crate) mod wake;
pub(crate) mod window;

pub use acceptor::{Acceptor, Admission, Conns, Held, Stop};
pub use buffers::{payload, Buffers, BUFFER_BYTES_PER_WORKER};
pub use clock::{cpus_for, WindowClock};
pub use driver::{Driver, Flows, Polled, Turn, MAX_SLEEP, WAKER};
pub use handover::{retransmits_so_far, sample_tcp_info, SocketFacts, WorkerReport};
pub use spawn::WorkerLoop;
