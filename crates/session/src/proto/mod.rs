//! The sessions as sans-IO state machines and pure functions: no socket,
//! no clock, no random source; what was heard and the time go in, what to
//! send and what to do come out. Nothing here uses the shells (a test in
//! layout.rs checks).

pub(crate) mod auth;
pub(crate) mod budget;
pub(crate) mod client;
pub(crate) mod handshake;
pub(crate) mod heard;
#[cfg(test)]
mod pair;
pub(crate) mod server;
