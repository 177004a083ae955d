//! The engine's sockets and the I/O on them: creating, binding, connecting
//! and accepting data sockets with a test's options (socket.rs), moving a
//! stream flow's bytes (stream.rs), UDP's batched system calls (datagram.rs:
//! GSO and GRO) and a UDP stream's sends and reads on top of them
//! (udp_stream.rs). Workers do their I/O through here; flows never do.

pub(crate) mod datagram;
pub(crate) mod socket;
pub(crate) mod stream;
pub(crate) mod udp_stream;

pub use socket::{DataEndpoints, DataOptions};
