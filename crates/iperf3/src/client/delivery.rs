//! Whether the iperf3 server has taken in all the client sent, looked at
//! once per [`Do::LookDelivered`](crate::proto::client::Do::LookDelivered):
//! every upload connection (those of `--bidir`'s upload, or all but the
//! control connection) has had all its bytes and its FIN acknowledged (the
//! engine half-closes a stream after its last message), and a server on
//! this host has read them (its receive queues are empty). iperf3 stops
//! counting at `TEST_END`, so `TEST_END` goes only once it has everything.

use std::net::SocketAddr;

use crate::sys;

/// The looks after one test's window.
pub(super) struct Delivery {
    server: SocketAddr,
    control: Option<SocketAddr>,
    uploads: Option<Vec<SocketAddr>>,
    /// The local addresses of the upload connections seen.
    locals: Vec<SocketAddr>,
    /// Everything sent and the FINs are acknowledged.
    acked: bool,
}

impl Delivery {
    /// Looks at the connections to `server` from this host, but the
    /// control connection (`control`), or only `uploads` if given.
    pub(super) fn new(
        server: SocketAddr,
        control: Option<SocketAddr>,
        uploads: Option<Vec<SocketAddr>>,
    ) -> Self {
        Delivery {
            server,
            control: control.map(sys::canonical),
            uploads,
            locals: Vec::new(),
            acked: false,
        }
    }

    /// One look: true once the server has taken in everything (or nothing
    /// more can be known).
    pub(super) fn look(&mut self) -> bool {
        if !self.acked {
            let Ok(socks) = sys::sockets_to(self.server) else {
                self.acked = true;
                return self.read_all();
            };
            let mine: Vec<_> = socks
                .iter()
                .filter(|(_, local)| Some(*local) != self.control)
                .filter(|(_, local)| !matches!(&self.uploads, Some(u) if !u.contains(local)))
                .collect();
            for (_, local) in &mine {
                if !self.locals.contains(local) {
                    self.locals.push(*local);
                }
            }
            self.acked = mine
                .iter()
                .all(|(fd, _)| sys::tcp_state(*fd).map(sys::fin_acked).unwrap_or(true));
            if !self.acked {
                return false;
            }
        }
        self.read_all()
    }

    /// A server on this host has read everything (its receive queues are
    /// empty), however busy it is; elsewhere nothing more can be known.
    fn read_all(&self) -> bool {
        if self.locals.is_empty() {
            return true;
        }
        !matches!(sys::local_peer_unread(self.server, &self.locals), Some(n) if n > 0)
    }
}
