//! The blocking shells that move the machines of `proto`: the daemon and
//! its session threads, the control connection, the client's drivers.

pub(crate) mod channel;
pub(crate) mod client;
pub(crate) mod daemon;
pub(crate) mod key;
pub(crate) mod server;
