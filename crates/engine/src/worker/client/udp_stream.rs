//! A client worker's UDP streams: each flow's registration with the server
//! (a header-only datagram, sent again until the server answers it), and its
//! drive: what has arrived counted by its receiver, then what its pacer lets
//! it send.

use std::io;
use std::time::{Duration, Instant};

use linkperf_wire::{UdpHeader, UDP_HEADER_LEN};

use super::{Io, Logic, Stage, Worker};
use crate::flow::udp_stream::{nanos_since, registration};
use crate::io::udp_stream::{receive_due, send_due, Got, Out, Sent};
use crate::io::{Conn, Register, Registration};
use crate::schedule::{Phase, Schedule};

/// How long a flow tries to register before the test fails.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);

impl Worker {
    /// Starts flow `i`'s registration at `now`: its first datagram goes at once.
    pub(super) fn register(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let tag = self.token.session_tag();
        let f = &mut self.flows[i];
        let mut reg = Register::new(registration(tag, f.id), now, Some(REGISTER_TIMEOUT));
        if let Some(sock) = f.conn.as_ref().and_then(Conn::udp) {
            reg.send_due(sock, now)?;
        }
        f.stage = Stage::Registering(reg);
        self.registering.push(i);
        Ok(())
    }

    /// Sends again the registrations whose answer is late; a flow that
    /// waited too long fails the setup.
    pub(super) fn retry_registrations(&mut self, now: Instant) {
        for i in std::mem::take(&mut self.registering) {
            let f = &mut self.flows[i];
            let Stage::Registering(reg) = &mut f.stage else {
                continue;
            };
            self.registering.push(i);
            if reg.gave_up(now) {
                let (id, endpoint) = (f.id, f.endpoint);
                self.connect_error = Some(format!(
                    "flow {id} could not register with {}: no answer to its UDP datagrams within {} s \
                     (does something between the hosts drop UDP?)",
                    self.describe_endpoint(endpoint),
                    REGISTER_TIMEOUT.as_secs()
                ));
                return;
            }
            if let Some(sock) = f.conn.as_ref().and_then(Conn::udp) {
                if let Err(e) = reg.send_due(sock, now) {
                    self.fail_registration(i, e);
                    return;
                }
            }
        }
    }

    fn fail_registration(&mut self, i: usize, e: io::Error) {
        let f = &self.flows[i];
        self.connect_error = Some(format!(
            "flow {} could not connect to {}: {e}",
            f.id,
            self.describe_endpoint(f.endpoint)
        ));
    }

    /// Reads flow `i`'s socket for the server's answer to its registration.
    pub(super) fn await_registration(&mut self, i: usize) {
        let f = &mut self.flows[i];
        let (Stage::Registering(reg), Some(sock)) = (&f.stage, f.conn.as_ref().and_then(Conn::udp))
        else {
            return;
        };
        match reg.read(sock) {
            Registration::Registered => {
                f.stage = Stage::Open;
                self.registering.retain(|&r| r != i);
                self.connecting -= 1;
                self.open += 1;
            }
            Registration::NotYet => {}
            Registration::Failed(e) => self.fail_registration(i, e),
        }
    }

    /// Drives UDP stream flow `i`: takes in what arrived, then sends what is
    /// due; both halves end with the window.
    pub(super) fn drive_udp_stream(&mut self, i: usize, schedule: Schedule) -> Io {
        let tag = self.token.session_tag();
        let clock0 = self.clock0;
        let f = &mut self.flows[i];
        let (id, seq) = (f.id, f.seq);
        let (Logic::UdpStream(h), Some(sock)) = (&mut f.logic, f.conn.as_ref().and_then(Conn::udp))
        else {
            return Io::Blocked;
        };
        let counters = &mut self.counters;
        let got = receive_due(sock, &mut self.bufs.read, |d, _| {
            let Ok(hd) = UdpHeader::decode(d) else {
                return;
            };
            // A late answer to a registration sent twice carries no payload.
            if hd.tag != tag || hd.flow != id || d.len() == UDP_HEADER_LEN {
                return;
            }
            let now = Instant::now();
            let clock = nanos_since(clock0, now);
            h.received(&hd, d.len() - UDP_HEADER_LEN, now, clock, counters, i);
        });
        let mut again = match got {
            Got::Drained => false,
            Got::Again => true,
            Got::Failed(e) => return Io::Failed(e),
        };
        let over = schedule.phase(Instant::now()) >= Phase::Draining;
        if let Some(tx) = &mut h.tx {
            if over {
                tx.finish();
            }
            let mut out = Out {
                sock,
                to: None,
                runs: &mut self.udp_runs,
            };
            match send_due(tx, &mut out, &mut self.bufs.datagram, &mut self.counters, i) {
                Sent::Waiting(at) => {
                    if h.armed.is_none_or(|a| at < a) {
                        h.armed = Some(at);
                        self.io.timers.arm(at, i, seq);
                    }
                }
                Sent::Again => again = true,
                Sent::Blocked | Sent::Idle => {}
                Sent::Failed(e) => return Io::Failed(e),
            }
        }
        if over {
            Io::Finished
        } else if again {
            Io::Again
        } else {
            Io::Blocked
        }
    }
}
