//! The client's side: its session, what it makes of the server's answers,
//! the address it is given, and the controller's side of a delegated test.

pub(crate) mod address;
pub(crate) mod answers;
pub(crate) mod delegate;
pub(crate) mod foreign;
pub(crate) mod midtest;
pub(crate) mod outcome;
pub(crate) mod session;
