//! The shells that move the machines of `proto`: the daemon, its lobby
//! (the one event loop where control connections wait for their
//! handshake) and its session threads, the control connection, the
//! client's drivers.

pub(crate) mod channel;
pub(crate) mod client;
pub(crate) mod daemon;
pub(crate) mod key;
pub(crate) mod lobby;
pub(crate) mod server;
