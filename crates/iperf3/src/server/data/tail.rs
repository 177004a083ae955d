//! The data phase once it has ended: its worker kept, with its streams
//! still open, for the top-up once the client's results are in. The
//! receivers then read, as flows on the same worker, until they hold all
//! the client says it sent.

use std::time::Instant;

use linkperf_engine::worker::generic::{Core, Worker};
use mio::Events;

use super::stream::{DRAIN_MAX, QUIET};
use super::{DataOutcome, Finish, Iperf3Kind, Phase};
use crate::codec::TestResults;
use crate::server::plan::TestPlan;

/// The data phase once it has ended: what it counted, and its worker with
/// the streams still open, for [`DataPhase::top_up`].
pub(crate) struct DataPhase<'a> {
    /// What it counted.
    pub out: DataOutcome,
    pub(super) worker: Worker<Iperf3Kind<'a>>,
    pub(super) events: Events,
}

/// The top-up's goal: what the client says it sent.
pub(super) struct TopUp {
    t0: Instant,
    /// When bytes last came.
    pub(super) last: Instant,
    /// The client's bytes over the TCP streams the server receives on.
    tcp_wanted: u64,
    /// Each receiver's key, whether it is TCP, and the datagrams the client
    /// says it sent on it (UDP).
    receivers: Vec<(usize, bool, Option<i64>)>,
}

impl TopUp {
    /// Leaves reading the receivers that hold what the client sent.
    pub(super) fn settle(&self, core: &mut Core<Iperf3Kind<'_>>) {
        let tcp_had: u64 = self
            .receivers
            .iter()
            .filter(|r| r.1)
            .filter_map(|r| core.slots.get(r.0))
            .map(|s| s.flow.tally.total(&core.counts))
            .sum();
        let tcp_short = tcp_had < self.tcp_wanted;
        for &(key, tcp, packets) in &self.receivers {
            let Some(s) = core.slots.get_mut(key) else {
                continue;
            };
            let short = if tcp {
                tcp_short
            } else {
                packets.is_some_and(|p| (s.flow.tally.packets() as i64) < p)
            };
            if !short {
                s.flow.rest();
            }
        }
    }

    /// The receivers still reading, and whether any of them (UDP) has lost
    /// datagrams.
    fn reading(&self, core: &Core<Iperf3Kind<'_>>) -> (bool, bool) {
        let mut reading = false;
        let mut lossy = false;
        for &(key, tcp, _) in &self.receivers {
            if let Some(s) = core.slots.get(key).filter(|s| !s.flow.settled()) {
                reading = true;
                lossy |= !tcp && s.flow.tally.lost() > 0;
            }
        }
        (reading, lossy)
    }

    /// Whether the top-up is over at `now`: every receiver holds what the
    /// client sent (or closed), [`DRAIN_MAX`] has passed, or a UDP stream
    /// that has lost datagrams (it may have lost its last ones too) has
    /// been quiet for [`QUIET`].
    pub(super) fn over(&self, core: &Core<Iperf3Kind<'_>>, now: Instant) -> bool {
        let (reading, lossy) = self.reading(core);
        !reading
            || now.saturating_duration_since(self.t0) >= DRAIN_MAX
            || (lossy && now.saturating_duration_since(self.last) >= QUIET)
    }

    /// When it must be looked at whatever the sockets do.
    pub(super) fn deadline(&self, core: &Core<Iperf3Kind<'_>>) -> Instant {
        let most = self.t0 + DRAIN_MAX;
        match self.reading(core) {
            (_, true) => most.min(self.last + QUIET),
            _ => most,
        }
    }
}

impl DataPhase<'_> {
    /// Once the client's results are in: reads the receiving streams until
    /// they have all the client says it sent, so that the server reports
    /// everything the client sent however late its last bytes came (the
    /// drain after `TEST_END` stops when nothing arrives for [`QUIET`]).
    /// TCP: the client's bytes over the streams the server receives on
    /// (summed: a client that numbers its streams in another order than the
    /// server accepted them pairs the counts differently, as linkperf's own
    /// client may), when nothing was omitted (the client counts from its own
    /// omit timer). UDP: each stream's datagrams, by sequence number. At most
    /// [`DRAIN_MAX`]; a UDP stream that has lost datagrams may have lost its
    /// last ones too, so then only while more arrive, [`QUIET`] at a time.
    pub(crate) fn top_up(&mut self, theirs: &TestResults, plan: &TestPlan) {
        if self.out.end != Finish::TestEnd {
            return;
        }
        let w = &mut self.worker;
        let mut receivers = Vec::new();
        let mut tcp_wanted = 0;
        for (key, s) in w.core.slots.iter_mut() {
            let st = &mut s.flow;
            if st.sends || !st.open() {
                continue;
            }
            let ours = theirs.stream(i64::from(st.id));
            if st.tcp && plan.omit.is_zero() {
                tcp_wanted += ours.map_or(0, |s| s.bytes);
            }
            receivers.push((key, st.tcp, ours.map(|s| s.packets)));
            st.read_on();
            // Whatever came since the drain is read at once.
            s.readable = true;
        }
        if receivers.is_empty() {
            return;
        }
        let now = Instant::now();
        let top_up = TopUp {
            t0: now,
            last: now,
            tcp_wanted,
            receivers,
        };
        // It counts into the phase's counters.
        std::mem::swap(&mut w.core.counts, &mut self.out.counters);
        top_up.settle(&mut w.core);
        let keys: Vec<usize> = top_up.receivers.iter().map(|r| r.0).collect();
        w.kind.phase = Phase::TopUp(top_up);
        for key in keys {
            w.drive(key, now);
        }
        let _ = w.run(&mut self.events);
        std::mem::swap(&mut w.core.counts, &mut self.out.counters);
        for (r, (_, s)) in self.out.records.iter_mut().zip(w.core.slots.iter()) {
            r.tally = s.flow.tally.clone();
        }
    }
}
