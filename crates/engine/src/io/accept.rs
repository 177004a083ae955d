//! The accepting side of a listener. Readiness is edge-triggered (the next
//! edge comes only with the next connection), so an acceptor takes every
//! connection waiting, each set up and put behind the gate before the next
//! is taken (so that the gate's bound holds while a flood is accepted).

use std::io;

use crate::io::socket::{Conn, Listener};

/// What one accept came to.
#[derive(Debug)]
pub enum Accept {
    /// A connection.
    Conn(Conn),
    /// No connection is left waiting.
    Drained,
    /// The listener failed to take one (the process out of descriptors, a
    /// connection reset before it was taken): the ones left wait for the
    /// next round.
    Stopped(io::Error),
}

/// The next connection waiting on `listener`.
pub fn accept_next(listener: &Listener) -> Accept {
    loop {
        match listener.accept() {
            Ok(conn) => return Accept::Conn(conn),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Accept::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Accept::Stopped(e),
        }
    }
}
