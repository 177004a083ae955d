//! The server's side: its session, what it makes of a request and of a
//! running test, the agent's side of a delegated test, and a control
//! connection before it is a session (a stranger in its handshake, and the
//! table of them).

pub(crate) mod delegate;
pub(crate) mod fail;
pub(crate) mod midtest;
pub(crate) mod request;
pub(crate) mod session;
pub(crate) mod stranger;
pub(crate) mod table;
