//! The engine's sockets and the I/O on them: creating, binding and
//! connecting data sockets and setting their options in one place
//! (socket.rs), dialing out with a greeting (dial.rs) and accepting
//! (accept.rs; what the accepted say first is read behind gate.rs), a UDP
//! socket's registration with the server (register.rs), moving
//! a stream flow's bytes, or any connection's for a kind whose flows decide
//! each read and message (stream.rs), sendfile(2) from a memory file
//! (sendfile.rs), UDP's batched system calls
//! (datagram.rs: GSO and GRO) and a UDP stream's sends and reads on top of
//! them (udp_stream.rs). Workers do their I/O through here; flows never do
//! (layout.rs checks that workers and programs call no socket themselves).

pub(crate) mod accept;
pub(crate) mod datagram;
pub(crate) mod dial;
pub(crate) mod exchange;
pub mod gate;
#[cfg(test)]
mod layout;
pub(crate) mod register;
pub(crate) mod sendfile;
pub(crate) mod socket;
pub(crate) mod stream;
pub(crate) mod udp_stream;

pub use accept::{
    accept_all, accept_behind, accept_next, Accept, AcceptRetry, Accepting, Behind, Round,
    ACCEPT_RETRY,
};
pub use dial::{Dial, DialError};
pub use gate::waiting_beyond;
pub use register::{Register, Registration, REGISTER_RETRY};
pub use socket::{
    apply, server_sndbuf, server_sndbuf_on, tcp_connect, tcp_listener, udp_bind, udp_connect, Conn,
    DataEndpoints, HostTcpMemory, Kind, Listener, Settings, SERVER_MIN_SNDBUF,
    SERVER_SNDBUF_PER_TEST,
};
pub use stream::{read_arrived, write_messages, Messages, Moved};
