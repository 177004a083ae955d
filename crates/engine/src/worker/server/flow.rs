//! A server worker's flow once through the gate (or seen on its datagram
//! socket), sans-IO: it says what it wants of the worker and is told what
//! came of it, its datagrams included (the worker reads its shared datagram
//! socket and tells each datagram to its flow). The bytes themselves are
//! moved by the kind's executors (`io::exchange`, `StreamHalves::drive`,
//! `io::udp_stream`, the UDP answers).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use linkperf_protocol::UdpHeader;

use crate::counters::{Counters, FlowSlotId};
use crate::flow::step::{Carried, Deadline, Flow, Step, Told};
use crate::flow::udp_stream::UdpStreamHalves;
use crate::flow::RrServer;
use crate::io::stream::StreamHalves;

/// What a server flow carries.
#[derive(Debug)]
pub(crate) enum Logic {
    /// Request/response on its connection.
    Rr(RrServer),
    /// One transaction per connection: the server closes first.
    Crr(RrServer),
    /// A TCP (or Unix) stream's halves.
    Stream(StreamHalves),
    /// UDP request/response on the worker's datagram socket: each request
    /// told is answered, to where it came from, by the next carry.
    UdpRr {
        /// Requests told and not answered yet, oldest first: their headers
        /// (echoed in the answers) and where they came from. A carry answers
        /// them all unless the socket buffer is full.
        requests: VecDeque<(UdpHeader, SocketAddr)>,
    },
    /// A UDP stream on the worker's datagram socket.
    UdpStream {
        /// Where its datagrams go (where its registration came from).
        addr: SocketAddr,
        /// Its flow (user).
        flow: u32,
        halves: Box<UdpStreamHalves>,
        /// When its sender's next datagram is due.
        next: Option<Instant>,
    },
}

/// Requests a UDP request/response flow keeps while its answers cannot go
/// out (the socket buffer is full).
const MAX_UNANSWERED: usize = 1024;

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    /// Its connection is to be closed (its work on it is over).
    Closing,
    Closed,
}

/// One of a server worker's flows.
#[derive(Debug)]
pub(crate) struct ServerFlow {
    /// Where its traffic is counted.
    pub slot: FlowSlotId,
    pub logic: Logic,
    /// The worker's own token its connection's events come under (the one
    /// it was accepted under), if it has a connection.
    pub route: Option<usize>,
    end: End,
}

impl ServerFlow {
    /// Flow counted in `slot` carrying `logic`.
    pub fn new(slot: FlowSlotId, logic: Logic) -> Self {
        ServerFlow {
            slot,
            logic,
            route: None,
            end: End::Open,
        }
    }

    /// The same, its connection's events coming under the worker's token
    /// `route`.
    pub fn routed(mut self, route: usize) -> Self {
        self.route = Some(route);
        self
    }

    /// A connect-per-transaction flow (its connection's retransmits count
    /// per transaction).
    pub fn per_transaction(&self) -> bool {
        matches!(self.logic, Logic::Crr(_))
    }
}

impl Flow for ServerFlow {
    type Counts = Counters;

    fn step(&mut self, _now: Instant, _counts: &mut Counters) -> Step {
        match self.end {
            End::Closed => Step::Done,
            End::Closing => Step::Close(0),
            End::Open => match &self.logic {
                // Nothing to answer: the next request is told.
                Logic::UdpRr { requests } if requests.is_empty() => Step::Wait,
                _ => Step::Carry(0),
            },
        }
    }

    fn told(&mut self, what: Told, now: Instant, counts: &mut Counters) {
        match what {
            Told::Datagram {
                header,
                payload,
                from,
                clock_ns,
                ..
            } => match &mut self.logic {
                Logic::UdpRr { requests } => {
                    counts.rx(self.slot, payload, now);
                    // More than a socket buffer's worth waiting means the
                    // answers cannot go out: the newest are lost, as the
                    // kernel would lose them.
                    if requests.len() < MAX_UNANSWERED {
                        requests.push_back((header, from));
                    }
                }
                Logic::UdpStream { halves, .. } => {
                    halves.received(&header, payload, now, clock_ns, counts, self.slot)
                }
                _ => {}
            },
            // The client is done (or gone), a crr response is out, or the
            // connection failed: it closes.
            Told::Carried {
                how: Carried::Finished | Carried::Eof | Carried::Failed(_),
                ..
            } if self.end == End::Open => self.end = End::Closing,
            Told::Closed(_) => self.end = End::Closed,
            // Its sender's time came: the next carry sends.
            Told::Timer(_) => {
                if let Logic::UdpStream { next, .. } = &mut self.logic {
                    *next = None;
                }
            }
            _ => {}
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        match &self.logic {
            Logic::UdpStream { next, .. } if self.end == End::Open => next.map(Deadline::at),
            _ => None,
        }
    }

    fn parkable(&self) -> bool {
        self.end == End::Open && matches!(self.logic, Logic::Rr(_))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_workload::{BitsPerSecond, StreamDirection};

    use super::*;

    fn udp_stream() -> ServerFlow {
        let halves = UdpStreamHalves::for_side(
            7,
            0,
            1000,
            StreamDirection::Down,
            BitsPerSecond(8_000_000),
            false,
        );
        ServerFlow::new(
            0,
            Logic::UdpStream {
                addr: "127.0.0.1:9".parse().unwrap(),
                flow: 0,
                halves: Box::new(halves),
                next: None,
            },
        )
    }

    fn carried(how: Carried) -> Told {
        Told::Carried { conn: 0, how }
    }

    #[test]
    fn a_request_response_flow_carries_until_its_client_is_done_then_closes_once() {
        let mut f = ServerFlow::new(3, Logic::Rr(RrServer::new(10, 20)));
        let mut c = Counters::new(false);
        let now = Instant::now();
        assert!(f.parkable());
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        // Blocked carries are not told: it carries again on the next edge.
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        f.told(carried(Carried::Eof), now, &mut c);
        assert!(!f.parkable(), "a closing flow stays off the fast path");
        assert_eq!(f.step(now, &mut c), Step::Close(0));
        // A failure told while closing changes nothing.
        let e = std::io::Error::other("gone");
        f.told(carried(Carried::Failed(e)), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Close(0));
        f.told(Told::Closed(0), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Done);
        assert_eq!(f.deadline(), None);
    }

    #[test]
    fn a_crr_flow_closes_once_its_transaction_is_out_and_is_never_parked() {
        let mut f = ServerFlow::new(0, Logic::Crr(RrServer::new(1, 1)));
        let mut c = Counters::new(false);
        let now = Instant::now();
        assert!(f.per_transaction());
        assert!(!f.parkable());
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        f.told(carried(Carried::Finished), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Close(0));
        f.told(Told::Closed(0), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Done);
    }

    #[test]
    fn a_stream_flow_closes_when_its_peer_does() {
        let halves = StreamHalves::for_side(1000, StreamDirection::Up, false);
        let mut f = ServerFlow::new(0, Logic::Stream(halves));
        let mut c = Counters::new(false);
        let now = Instant::now();
        assert!(!f.parkable());
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        f.told(carried(Carried::Eof), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Close(0));
    }

    fn datagram(seq: u64, payload: usize) -> Told {
        Told::Datagram {
            conn: 0,
            header: UdpHeader {
                tag: 7,
                flow: 0,
                seq,
                sent_ns: 0,
            },
            payload,
            from: "127.0.0.1:9".parse().unwrap(),
            clock_ns: 0,
        }
    }

    #[test]
    fn a_udp_request_response_flow_carries_while_requests_wait_and_keeps_them_bounded() {
        let mut f = ServerFlow::new(
            0,
            Logic::UdpRr {
                requests: VecDeque::new(),
            },
        );
        let mut c = Counters::new(false);
        let now = Instant::now();
        c.add_flow(0);
        assert_eq!(f.step(now, &mut c), Step::Wait, "nothing to answer");
        f.told(datagram(0, 100), now, &mut c);
        f.told(datagram(1, 100), now, &mut c);
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        let Logic::UdpRr { requests } = &mut f.logic else {
            unreachable!()
        };
        let seqs: Vec<u64> = requests.iter().map(|(h, _)| h.seq).collect();
        assert_eq!(seqs, [0, 1], "oldest first");
        // The carry answered them.
        requests.clear();
        assert_eq!(f.step(now, &mut c), Step::Wait);
        for seq in 0..2 * MAX_UNANSWERED as u64 {
            f.told(datagram(seq, 1), now, &mut c);
        }
        let Logic::UdpRr { requests } = &f.logic else {
            unreachable!()
        };
        assert_eq!(requests.len(), MAX_UNANSWERED);
        assert_eq!(
            requests.back().map(|(h, _)| h.seq),
            Some(MAX_UNANSWERED as u64 - 1)
        );
        f.told(Told::Timer(now), now, &mut c);
        assert_eq!(f.deadline(), None);
        assert!(!f.parkable());
    }

    #[test]
    fn a_udp_stream_gives_its_senders_next_send_and_is_carried_when_it_comes() {
        let mut f = udp_stream();
        let mut c = Counters::new(false);
        let now = Instant::now();
        assert_eq!(f.deadline(), None);
        assert_eq!(f.step(now, &mut c), Step::Carry(0));
        // The carry found the next datagram due later.
        let at = now + Duration::from_millis(3);
        if let Logic::UdpStream { next, .. } = &mut f.logic {
            *next = Some(at);
        }
        assert_eq!(f.deadline(), Some(Deadline::at(at)));
        assert!(!f.deadline().unwrap().precise);
        f.told(Told::Timer(at), at, &mut c);
        assert_eq!(f.deadline(), None, "told once");
        assert_eq!(f.step(at, &mut c), Step::Carry(0));
        assert!(!f.parkable());
    }
}
