//! A UDP socket's registration with the server: a header-only datagram
//! naming its session and flow (user), sent again every [`REGISTER_RETRY`]
//! until the server answers it with the same bytes, given up at a deadline
//! of its caller's choosing. The server then knows where to send before the
//! client has sent anything. A client's UDP streams and a profile's UDP
//! connections register alike.
//!
//! The time is an input: whoever drives it says when it is, so the resend
//! and the give-up are tested without a clock.

use std::io;
use std::time::{Duration, Instant};

use linkperf_protocol::UDP_HEADER_LEN;
use mio::net::UdpSocket;

/// How long a registration waits for its answer before it is sent again.
pub const REGISTER_RETRY: Duration = Duration::from_millis(100);

/// A socket's registration on its way: sent, its answer awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    datagram: [u8; UDP_HEADER_LEN],
    /// When it is sent (again).
    next: Instant,
    /// When it gives up; never if none.
    deadline: Option<Instant>,
}

/// What reading the socket found.
#[derive(Debug)]
pub enum Registration {
    /// The server answered: the socket is registered.
    Registered,
    /// No answer yet (what arrived, if anything, was not one).
    NotYet,
    /// The socket failed.
    Failed(io::Error),
}

impl Register {
    /// A registration of `datagram` started at `now`: its first send is due
    /// at once; it gives up `give_up` after `now` (never with none: its
    /// caller's own timeout bounds it).
    pub fn new(datagram: [u8; UDP_HEADER_LEN], now: Instant, give_up: Option<Duration>) -> Self {
        Register {
            datagram,
            next: now,
            deadline: give_up.map(|d| now + d),
        }
    }

    /// When it is to be sent (again).
    pub fn due(&self) -> Instant {
        self.next
    }

    /// When it gives up, if it ever does.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether it has given up by `now`.
    pub fn gave_up(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    /// Sends the registration on `sock` if it is due at `now`; true if it
    /// went (or the socket buffer had no room for it: it goes again at its
    /// next due time, as a lost one does). Sent or failed, it is next due
    /// [`REGISTER_RETRY`] after `now`: a caller that lets a failed send go
    /// by tries again then, not at once.
    pub fn send_due(&mut self, sock: &UdpSocket, now: Instant) -> io::Result<bool> {
        if now < self.next {
            return Ok(false);
        }
        self.next = now + REGISTER_RETRY;
        match sock.send(&self.datagram) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Reads what has arrived on `sock` (connected to the server) for the
    /// answer: the registration itself, byte for byte. Anything else (a
    /// datagram of another session, flow or socket, one with a payload) is
    /// read and passed over.
    pub fn read(&self, sock: &UdpSocket) -> Registration {
        // One byte more than an answer: a longer datagram reads longer.
        let mut got = [0u8; UDP_HEADER_LEN + 1];
        loop {
            match sock.recv(&mut got) {
                Ok(k) if got[..k] == self.datagram => return Registration::Registered,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Registration::NotYet,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Registration::Failed(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_protocol::UdpHeader;
    use mio::{Events, Interest, Poll, Token};
    use std::net::{SocketAddr, UdpSocket as StdUdpSocket};

    /// How long a test waits for a datagram that must come: a bound on a
    /// failure, not a measure of anything.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn header(tag: u32, flow: u32, seq: u64, sent_ns: u64) -> [u8; UDP_HEADER_LEN] {
        let mut out = [0u8; UDP_HEADER_LEN];
        UdpHeader {
            tag,
            flow,
            seq,
            sent_ns,
        }
        .encode(&mut out);
        out
    }

    /// A plain socket as the server, blocking on its reads.
    fn server() -> StdUdpSocket {
        let s = StdUdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s
    }

    /// A client socket connected to `to`, watched by its own poll.
    fn client(to: SocketAddr) -> (UdpSocket, Poll) {
        let mut sock = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        sock.connect(to).unwrap();
        let poll = Poll::new().unwrap();
        poll.registry()
            .register(&mut sock, Token(0), Interest::READABLE)
            .unwrap();
        (sock, poll)
    }

    /// Waits until the client's socket has something to read (or an error).
    fn readable(poll: &mut Poll) {
        let mut events = Events::with_capacity(4);
        let until = Instant::now() + PATIENCE;
        while events.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "nothing arrived within {PATIENCE:?}");
            poll.poll(&mut events, Some(left)).unwrap();
        }
    }

    /// The next datagram the server receives, and from where.
    fn receive(server: &StdUdpSocket) -> (Vec<u8>, SocketAddr) {
        let mut buf = [0u8; 64];
        let (k, from) = server.recv_from(&mut buf).unwrap();
        (buf[..k].to_vec(), from)
    }

    #[test]
    fn an_answered_registration_completes() {
        let srv = server();
        let (sock, mut poll) = client(srv.local_addr().unwrap());
        let dg = header(7, 3, 0, 0);
        let t0 = Instant::now();
        let mut reg = Register::new(dg, t0, Some(Duration::from_secs(5)));
        assert_eq!(reg.due(), t0, "its first send is due at once");
        assert!(reg.send_due(&sock, t0).unwrap());
        let (got, from) = receive(&srv);
        assert_eq!(got, dg, "the registration goes out as given");
        assert!(matches!(reg.read(&sock), Registration::NotYet));
        srv.send_to(&got, from).unwrap();
        readable(&mut poll);
        assert!(matches!(reg.read(&sock), Registration::Registered));
    }

    #[test]
    fn an_unanswered_registration_is_sent_again_after_its_retry_interval() {
        let srv = server();
        let (sock, _poll) = client(srv.local_addr().unwrap());
        let dg = header(7, 3, 0, 0);
        let t0 = Instant::now();
        let mut reg = Register::new(dg, t0, None);
        assert!(reg.send_due(&sock, t0).unwrap());
        assert_eq!(reg.due(), t0 + REGISTER_RETRY);
        // Not before its interval.
        let early = t0 + REGISTER_RETRY - Duration::from_millis(1);
        assert!(!reg.send_due(&sock, early).unwrap());
        assert_eq!(reg.due(), t0 + REGISTER_RETRY);
        // Then again, and again an interval after that.
        let t1 = t0 + REGISTER_RETRY;
        assert!(reg.send_due(&sock, t1).unwrap());
        assert_eq!(reg.due(), t1 + REGISTER_RETRY);
        assert!(!reg.send_due(&sock, t1).unwrap());
        let t2 = t1 + REGISTER_RETRY + Duration::from_millis(30);
        assert!(reg.send_due(&sock, t2).unwrap());
        assert_eq!(reg.due(), t2 + REGISTER_RETRY);
        // The server got exactly three, each the registration, before the
        // marker sent after them.
        sock.send(b"end").unwrap();
        let mut registrations = 0;
        loop {
            let (got, _) = receive(&srv);
            if got == b"end" {
                break;
            }
            assert_eq!(got, dg);
            registrations += 1;
        }
        assert_eq!(registrations, 3);
    }

    #[test]
    fn an_answer_of_another_session_flow_or_socket_is_not_taken() {
        let srv = server();
        let (sock, mut poll) = client(srv.local_addr().unwrap());
        let dg = header(7, 3, 5 << 48 | 2, 4);
        let mut reg = Register::new(dg, Instant::now(), None);
        assert!(reg.send_due(&sock, Instant::now()).unwrap());
        let (_, from) = receive(&srv);
        let mut with_payload = dg.to_vec();
        with_payload.push(0);
        let wrong: [&[u8]; 7] = [
            &header(8, 3, 5 << 48 | 2, 4), // another session
            &header(7, 4, 5 << 48 | 2, 4), // another flow
            &header(7, 3, 6 << 48 | 2, 4), // another connection
            &header(7, 3, 5 << 48 | 1, 4), // another transaction
            &header(7, 3, 5 << 48 | 2, 3), // another socket of the connection
            &with_payload,                 // data, not an answer
            &dg[..UDP_HEADER_LEN - 1],     // truncated
        ];
        for w in wrong {
            srv.send_to(w, from).unwrap();
            readable(&mut poll);
            assert!(
                matches!(reg.read(&sock), Registration::NotYet),
                "{w:?} taken for an answer"
            );
            // It was read, not left waiting.
            let mut buf = [0u8; 64];
            let left = sock.recv(&mut buf);
            assert!(
                left.as_ref()
                    .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
                "{left:?}"
            );
        }
        srv.send_to(&dg, from).unwrap();
        readable(&mut poll);
        assert!(matches!(reg.read(&sock), Registration::Registered));
    }

    #[test]
    fn a_registration_gives_up_at_its_deadline_and_not_before() {
        let t0 = Instant::now();
        let give_up = Duration::from_secs(5);
        let mut reg = Register::new(header(7, 3, 0, 0), t0, Some(give_up));
        assert_eq!(reg.deadline(), Some(t0 + give_up));
        assert!(!reg.gave_up(t0));
        assert!(!reg.gave_up(t0 + give_up - Duration::from_nanos(1)));
        // Sending again does not move its deadline.
        let srv = server();
        let (sock, _poll) = client(srv.local_addr().unwrap());
        assert!(reg.send_due(&sock, t0 + Duration::from_secs(4)).unwrap());
        assert_eq!(reg.deadline(), Some(t0 + give_up));
        assert!(reg.gave_up(t0 + give_up));
        assert!(reg.gave_up(t0 + give_up + Duration::from_secs(1)));
        // One with no deadline of its own never gives up.
        let forever = Register::new(header(7, 3, 0, 0), t0, None);
        assert_eq!(forever.deadline(), None);
        assert!(!forever.gave_up(t0 + Duration::from_secs(86_400)));
    }

    #[test]
    fn a_registration_refused_by_the_host_fails_and_a_failed_send_waits_its_interval() {
        // A port nothing listens on: the host answers each registration
        // with ICMP port unreachable, which the connected socket reports
        // once, to its next send or read.
        let closed = server();
        let to = closed.local_addr().unwrap();
        drop(closed);
        let (sock, mut poll) = client(to);
        let t0 = Instant::now();
        let mut reg = Register::new(header(7, 3, 0, 0), t0, None);
        assert!(reg.send_due(&sock, t0).unwrap());
        readable(&mut poll);
        // A send that fails is due again an interval later all the same.
        let t1 = t0 + REGISTER_RETRY;
        let e = reg.send_due(&sock, t1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(reg.due(), t1 + REGISTER_RETRY);
        assert!(!reg.send_due(&sock, t1).unwrap());
        // Sent again, refused again: reading says so.
        assert!(reg.send_due(&sock, t1 + REGISTER_RETRY).unwrap());
        readable(&mut poll);
        match reg.read(&sock) {
            Registration::Failed(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused),
            other => panic!("{other:?}"),
        }
    }
}
