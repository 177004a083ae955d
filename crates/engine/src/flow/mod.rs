//! Flows as sans-IO state machines. A flow decides what to do next (write
//! so many bytes, read so many, send datagrams, wait until a time) and is
//! told what happened and when; it never touches a socket or a clock
//! itself. The worker does the I/O and passes the time in.
//!
//! - request/response (rr.rs), open-loop request/response (open_loop.rs:
//!   arrivals on a schedule, timed from when they were due), streams (stream.rs), UDP streams
//!   (udp_stream.rs: the paced sender, the receiver's sequence accounting);
//! - what they all share: what a flow wants (want.rs), the one pacer
//!   (pace.rs) and the one interarrival jitter (jitter.rs), which the
//!   iperf3 server's streams and a profile's paced transactions use too.

mod exchange;
mod jitter;
pub mod open_loop;
mod pace;
mod rr;
mod stream;
pub mod udp_stream;
mod want;

pub use exchange::Exchange;
pub use jitter::Jitter;
pub use open_loop::{OpenCounts, OpenLoop};
pub use pace::{Pacer, MAX_CATCH_UP};
pub use rr::{RrClient, RrServer};
pub use stream::{StreamRx, StreamTx};
pub use want::{Completed, Want};
