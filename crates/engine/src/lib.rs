//! linkperf's data path. Each side of a test runs a few event-loop workers
//! (mio/epoll) that carry all its users' flows; a flow is a state machine
//! ([`flow`]) that is told what its socket did and when, and decides what to do
//! next. The client connects the users and times transactions; the server
//! answers and counts what it saw itself.
#![warn(missing_docs)]

mod aggregate;
mod client;
mod counters;
mod datagram_counts;
mod error;
pub mod flow;
pub mod io;
pub mod live;
mod open_tally;
#[cfg(test)]
mod pair;
pub mod program;
mod sampler;
mod schedule;
mod server;
pub mod worker;

pub use aggregate::{aggregate, Aggregate};
pub use client::{Aborter, ClientConfig, ClientTest};
pub use counters::Counters;
pub use error::EngineError;
pub use io::DataEndpoints;
pub use live::LiveStats;
pub use sampler::{Sampler, WindowCpu};
pub use schedule::{Phase, Schedule};
pub use server::{ServerConfig, ServerTest};
pub use worker::driver;
pub use worker::{SocketFacts, WorkerReport, BUFFER_BYTES_PER_WORKER};
