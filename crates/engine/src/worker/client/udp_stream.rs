//! A client worker's UDP streams: each flow's registration with the server
//! (a header-only datagram, sent again until the server answers it), and its
//! carry: what has arrived counted by its receiver, then what its pacer lets
//! it send.

use std::io;
use std::time::{Duration, Instant};

use linkperf_protocol::{UdpHeader, UDP_HEADER_LEN};

use super::flow::{ClientFlow, Logic, Stage};
use super::ClientKind;
use crate::flow::step::{Carried, Deadline, Told};
use crate::flow::udp_stream::{nanos_since, registration};
use crate::io::udp_stream::{receive_due, send_due, Got, Out, Sent};
use crate::io::{Register, Registration};
use crate::schedule::Phase;
use crate::worker::generic::Core;

/// How long a flow tries to register before the test fails.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);

impl ClientKind {
    /// Starts flow `key`'s registration at `now`: its first datagram goes
    /// at once.
    pub(super) fn register(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        now: Instant,
    ) -> io::Result<()> {
        let tag = self.token.session_tag();
        let slot = &mut core.slots[key];
        let f = &mut slot.flow;
        let mut reg = Register::new(registration(tag, f.id), now, Some(REGISTER_TIMEOUT));
        if let Some(sock) = slot.links.last().and_then(|l| l.conn.udp()) {
            reg.send_due(sock, now)?;
        }
        f.stage = Stage::Registering(reg);
        Ok(())
    }

    /// The setup fails: flow `f`'s registration could not go.
    pub(super) fn fail_registration(&mut self, f: &ClientFlow, e: io::Error) {
        let (id, endpoint) = (f.id, f.endpoint);
        let at = self.describe_endpoint(endpoint);
        self.connect_error
            .get_or_insert_with(|| format!("flow {id} could not connect to {at}: {e}"));
    }

    /// Reads flow `key`'s socket for the server's answer to its
    /// registration; sends it again when its answer is late, and fails the
    /// setup once the flow waited too long.
    pub(super) fn await_registration(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        now: Instant,
    ) -> Option<Told> {
        let slot = &mut core.slots[key];
        let Stage::Registering(mut reg) = slot.flow.stage else {
            return None;
        };
        let sock = slot.links.last().and_then(|l| l.conn.udp())?;
        match reg.read(sock) {
            Registration::Registered => {
                self.connecting = self.connecting.saturating_sub(1);
                if let Some(q) = self.queued.pop_front() {
                    core.driver().again(q);
                }
                return Some(Told::Connected(0));
            }
            Registration::NotYet => {}
            Registration::Failed(e) => {
                let f = &core.slots[key].flow;
                self.fail_registration(f, e);
                return None;
            }
        }
        if reg.gave_up(now) {
            let f = &core.slots[key].flow;
            let (id, at) = (f.id, self.describe_endpoint(f.endpoint));
            self.connect_error.get_or_insert_with(|| {
                format!(
                    "flow {id} could not register with {at}: no answer to its UDP datagrams within {} s \
                     (does something between the hosts drop UDP?)",
                    REGISTER_TIMEOUT.as_secs()
                )
            });
            return None;
        }
        let sent = reg.send_due(sock, now);
        core.slots[key].flow.stage = Stage::Registering(reg);
        if let Err(e) = sent {
            let f = &core.slots[key].flow;
            self.fail_registration(f, e);
        }
        None
    }

    /// Carries UDP stream flow `key`: takes in what arrived, then sends what
    /// is due; both halves end with the window.
    pub(super) fn carry_udp_stream(&mut self, core: &mut Core<Self>, key: usize) -> Carried {
        let tag = self.token.session_tag();
        let clock0 = self.clock0;
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let id = f.id;
        let schedule = f.schedule;
        let (Logic::UdpStream(h), Some(sock)) =
            (&mut f.logic, slot.links.last().and_then(|l| l.conn.udp()))
        else {
            return Carried::Blocked;
        };
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
            h.received(&hd, d.len() - UDP_HEADER_LEN, now, clock, counts, key);
        });
        let mut again = match got {
            Got::Drained => false,
            Got::Again => true,
            Got::Failed(e) => return Carried::Failed(e),
        };
        let over = schedule.is_some_and(|s| s.phase(Instant::now()) >= Phase::Draining);
        if let Some(tx) = &mut h.tx {
            if over {
                tx.finish();
            }
            let mut out = Out {
                sock,
                to: None,
                runs: &mut self.udp_runs,
            };
            match send_due(tx, &mut out, &mut self.bufs.datagram, counts, key) {
                Sent::Waiting(at) => {
                    if f.wake.is_none_or(|w| at < w.at) {
                        f.wake = Some(Deadline::at(at));
                    }
                }
                Sent::Again => again = true,
                Sent::Blocked | Sent::Idle => {}
                Sent::Failed(e) => return Carried::Failed(e),
            }
        }
        if over {
            Carried::Finished
        } else if again {
            Carried::Again
        } else {
            Carried::Blocked
        }
    }
}
