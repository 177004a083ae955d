//! The server's side: its session, what it makes of a request and of a
//! running test, and the agent's side of a delegated test.

pub(crate) mod delegate;
pub(crate) mod fail;
pub(crate) mod midtest;
pub(crate) mod request;
pub(crate) mod session;
