//! An open-loop user as a state machine: its arrivals come on a schedule
//! (Poisson or evenly spaced, its share of the offered rate), whatever its
//! answers do; each is sent as soon as its connection has room for one more
//! outstanding transaction, and timed from when it was due (so a server
//! that stalls is measured stalling: no coordinated omission), its service
//! time beside it from when it was sent. An arrival that finds its
//! connection's outstanding transactions at their bound waits, counted
//! late; one that finds [`MAX_WAIT`] of arrivals already waiting is
//! dropped, counted. Nothing is skipped silently. The time is passed in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use linkperf_workload::{Arrival, OfferedLoad, TransactionSizes};

use super::exchange::Exchange;
use super::want::{clamp, Completed, Want};

/// The most arrivals one connection keeps waiting, in time: two seconds of
/// its arrivals (at least 64). A server stalled for a second
/// is measured stalling; one stalled longer, or a rate the path cannot
/// carry, drops arrivals rather than holding without bound.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// Arrivals a connection may keep waiting whatever its rate.
const MIN_WAITING: usize = 64;
/// Dropped arrivals drawn one by one in a stretch before the rest of it is
/// counted in one draw.
const DROP_DRAWS: u64 = 256;
/// Arrivals a connection keeps waiting at most whatever its rate (2 s of
/// 32k/s): a bound on memory when far more is offered than is carried.
const MAX_WAITING: usize = 1 << 16;
/// An arrival sent this long after it was due, with room on its connection
/// to send it, was held up by the generator itself: counted `behind` (the
/// client could not keep the schedule).
pub const BEHIND_AFTER: Duration = Duration::from_millis(1);

/// What an open-loop user counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenCounts {
    /// Arrivals that came due.
    pub arrivals: u64,
    /// Arrivals sent.
    pub sent: u64,
    /// Arrivals that found their connection's outstanding transactions at
    /// their bound and waited.
    pub late: u64,
    /// Arrivals dropped: too many were waiting.
    pub dropped: u64,
    /// Arrivals sent more than [`BEHIND_AFTER`] after they were due with
    /// room on the connection: the generator fell behind.
    pub behind: u64,
}

/// What happened to one arrival, for the worker's accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An arrival came due.
    Arrived {
        /// When.
        due: Instant,
        /// It found the connection's outstanding transactions at their
        /// bound, and waits.
        late: bool,
    },
    /// A stretch of `n` arrivals, the first due at `due`, dropped: too
    /// many were waiting. A stretch lies wholly before the window opens or
    /// wholly in it.
    Dropped {
        /// When the first was due.
        due: Instant,
        /// How many.
        n: u64,
    },
    /// One was sent at `sent`, due at `due`; `waited` if it found the
    /// connection's outstanding transactions at their bound.
    Sent {
        /// When it was due.
        due: Instant,
        /// When its first byte went.
        sent: Instant,
        /// It waited for room.
        waited: bool,
        /// Since this user's previous arrival as the generator offered them:
        /// between the sends, or between the due times where either waited
        /// for an answer (the wait is the server's, not the generator's).
        gap: Option<Duration>,
    },
}

/// The schedule of one user's arrivals.
#[derive(Debug, Clone)]
struct Schedule {
    arrival: Arrival,
    /// Mean time between arrivals, ns (fractional).
    mean_ns: f64,
    /// The next arrival.
    next: Instant,
    rng: fastrand::Rng,
}

impl Schedule {
    /// The gap after the one just due.
    fn gap(&mut self) -> Duration {
        let ns = match self.arrival {
            Arrival::Fixed => self.mean_ns,
            // Exponential by inversion: −ln U × mean, U in (0, 1]; to the
            // nearest nanosecond (cut, the gaps would be half a nanosecond
            // short on average: 1 % fast at a mean gap of 50 ns).
            Arrival::Poisson => (-(1.0 - self.rng.f64()).ln() * self.mean_ns).round(),
        };
        Duration::from_nanos(ns.clamp(0.0, 1e15) as u64)
    }

    /// Passes every arrival due from `next` to `to` (inclusive): their
    /// number. The first [`DROP_DRAWS`] are drawn one by one; the rest of
    /// the stretch is counted in one draw of the same law, so that a
    /// generator far behind (offered far more than it can send, or starved
    /// of CPU) catches up in bounded time instead of spending it on
    /// arrivals it drops.
    fn pass_until(&mut self, to: Instant) -> u64 {
        let mut n = 0;
        while self.next <= to {
            if n == DROP_DRAWS {
                return n + self.jump_until(to);
            }
            n += 1;
            let gap = self.gap();
            self.next += gap;
        }
        n
    }

    /// [`Schedule::pass_until`] in one draw: the arrival at `next` (at or
    /// before `to`) and those after it up to `to`, and `next` moved to the
    /// first after `to`.
    fn jump_until(&mut self, to: Instant) -> u64 {
        let span = to.saturating_duration_since(self.next).as_nanos() as f64;
        match self.arrival {
            Arrival::Fixed => {
                // As the draws one by one step: whole nanoseconds.
                let gap = (self.mean_ns.clamp(1.0, 1e15) as u64) as f64;
                let k = (span / gap).floor();
                self.next += Duration::from_nanos(((k + 1.0) * gap) as u64);
                1 + k as u64
            }
            Arrival::Poisson => {
                // The arrivals in (next, to] are Poisson with mean span /
                // mean gap; the first after `to` is an exponential gap
                // away from it (a Poisson process has no memory).
                let mean = span / self.mean_ns.max(1e-9);
                let after = if mean < 64.0 {
                    let mut k = 0;
                    let mut at = self.next + self.gap();
                    while at <= to {
                        k += 1;
                        let gap = self.gap();
                        at += gap;
                    }
                    k
                } else {
                    // Normal approximation, within a fraction of a percent
                    // at this mean; Box–Muller for the normal draw.
                    let u1 = 1.0 - self.rng.f64();
                    let u2 = self.rng.f64();
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    (mean + mean.sqrt() * z).round().max(0.0) as u64
                };
                // Strictly after `to` (a gap may round to nothing): the
                // next stretch starts after this one.
                self.next = to + self.gap().max(Duration::from_nanos(1));
                1 + after
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Its transaction number (a datagram's sequence number).
    seq: u64,
    due: Instant,
    /// When its first byte went, once it did.
    sent: Option<Instant>,
    waited: bool,
    request: u64,
    response: u64,
}

/// One open-loop user on one connection.
#[derive(Debug, Clone)]
pub struct OpenLoop {
    sizes: TransactionSizes,
    flow: u32,
    /// Number of the next transaction (its sizes).
    seq: u64,
    schedule: Schedule,
    max_outstanding: usize,
    max_waiting: usize,
    /// Transactions due and not answered, oldest first: the first
    /// `outstanding` sent (the last of those perhaps in part), the rest
    /// waiting.
    queue: VecDeque<Pending>,
    outstanding: usize,
    /// Request bytes of the newest outstanding one left to write.
    writing: u64,
    /// Response bytes of the oldest outstanding one left to read.
    reading: u64,
    /// Response bytes of all those outstanding left to read.
    owed: u64,
    running: bool,
    /// No arrival after this comes due (the window closed).
    stopped: bool,
    counts: OpenCounts,
    /// What happened since the worker last looked.
    events: Vec<Event>,
    /// The last arrival sent: when it was due, when it went, whether it
    /// waited (see [`Event::Sent`]'s gap).
    last_offered: Option<(Instant, Instant, bool)>,
    /// When the window opens (drops before it are not the window's).
    opens: Option<Instant>,
}

impl OpenLoop {
    /// User `flow` of `users` offering its share of `load`, its arrivals
    /// drawn from `seed` (Poisson).
    pub fn new(
        sizes: TransactionSizes,
        flow: u32,
        users: u32,
        load: &OfferedLoad,
        seed: u64,
        now: Instant,
    ) -> Self {
        let per_user = load.per_user(users);
        let mean_ns = 1e9 / per_user.max(1e-9);
        let waiting = (per_user * MAX_WAIT.as_secs_f64()).ceil() as usize;
        OpenLoop {
            sizes,
            flow,
            seq: 0,
            schedule: Schedule {
                arrival: load.arrival,
                mean_ns,
                next: now,
                rng: fastrand::Rng::with_seed(seed ^ u64::from(flow).wrapping_mul(0x9e37_79b9)),
            },
            max_outstanding: load.max_outstanding.max(1) as usize,
            max_waiting: waiting.clamp(MIN_WAITING, MAX_WAITING),
            queue: VecDeque::new(),
            outstanding: 0,
            writing: 0,
            reading: 0,
            owed: 0,
            running: false,
            stopped: false,
            counts: OpenCounts::default(),
            events: Vec::new(),
            last_offered: None,
            opens: None,
        }
    }

    /// Starts the schedule at `now`. Evenly spaced users start a share of
    /// the period apart (user `flow` of `users` at `flow / users` of it), so
    /// that their arrivals together are evenly spaced too; a Poisson user's
    /// first arrival is a draw away.
    pub fn start(&mut self, now: Instant, users: u32) {
        if self.running {
            return;
        }
        self.running = true;
        let offset = match self.schedule.arrival {
            Arrival::Fixed => {
                let share = f64::from(self.flow % users.max(1)) / f64::from(users.max(1));
                Duration::from_nanos((self.schedule.mean_ns * share) as u64)
            }
            Arrival::Poisson => self.schedule.gap(),
        };
        self.schedule.next = now + offset;
    }

    /// The arrivals due by `now` come: each waits for room on the
    /// connection (or is dropped if too many wait). None comes at or after
    /// `end` (the window's close): from then on the schedule is over, and
    /// those already due are still sent and answered.
    pub fn arrivals(&mut self, now: Instant, end: Instant) {
        if !self.running || self.stopped {
            return;
        }
        while self.schedule.next <= now && self.schedule.next < end {
            if self.queue.len() - self.outstanding >= self.max_waiting {
                // Every arrival due from here to `now` finds as many
                // waiting: dropped, counted by the stretch.
                self.drop_until(now, end);
                break;
            }
            let due = self.schedule.next;
            self.schedule.next = due + self.schedule.gap();
            self.counts.arrivals += 1;
            let (request, response) = self.sizes.at(self.flow, self.seq);
            let seq = self.seq;
            self.seq += 1;
            // Room now means it goes with this turn's writes; none, it
            // waits for an answer.
            let waited = self.queue.len() >= self.max_outstanding;
            if waited {
                self.counts.late += 1;
            }
            self.events.push(Event::Arrived { due, late: waited });
            self.queue.push_back(Pending {
                seq,
                due,
                sent: None,
                waited,
                request,
                response,
            });
        }
        if now >= end {
            self.stopped = true;
        }
    }

    /// Drops every arrival due from the next to `now` (and before `end`),
    /// in a stretch before the window opens and one in it.
    fn drop_until(&mut self, now: Instant, end: Instant) {
        let Some(last) = end.checked_sub(Duration::from_nanos(1)) else {
            return;
        };
        let to = now.min(last);
        let mut stops = [
            self.opens
                .and_then(|o| o.checked_sub(Duration::from_nanos(1))),
            Some(to),
        ];
        stops[0] = stops[0].filter(|o| *o < to);
        for stop in stops.into_iter().flatten() {
            let due = self.schedule.next;
            let n = self.schedule.pass_until(stop);
            if n > 0 {
                self.counts.arrivals += n;
                self.counts.dropped += n;
                self.events.push(Event::Dropped { due, n });
            }
        }
    }

    /// The window opens at `at`: a stretch of drops is split there (those
    /// before are not the window's).
    pub fn opens_at(&mut self, at: Instant) {
        self.opens = Some(at);
    }

    /// When the user should next look at its schedule, `end` the window's
    /// close: its next arrival, or the close if that comes first (`None`
    /// once the schedule is over).
    pub fn next_arrival(&self, end: Instant) -> Option<Instant> {
        (self.running && !self.stopped).then_some(self.schedule.next.min(end))
    }

    /// Whether its next arrival would go the moment it is due (its
    /// connection has room, none is waiting): only then does the time it
    /// is looked at matter to the microsecond. One that must wait is timed
    /// from when it was due whenever it is looked at.
    pub fn next_goes_at_once(&self) -> bool {
        self.queue.len() < self.max_outstanding
    }

    /// What it counted.
    pub fn counts(&self) -> OpenCounts {
        self.counts
    }

    /// What happened since the last call, for the worker's accounting.
    pub fn take_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain(..)
    }

    /// Transactions sent and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Arrivals due, not yet sent.
    pub fn waiting(&self) -> usize {
        self.queue.len() - self.outstanding
    }

    /// The transaction in `queue` that a write goes to next, if one may.
    fn next_to_send(&self) -> Option<&Pending> {
        if self.outstanding >= self.max_outstanding {
            return None;
        }
        self.queue.get(self.outstanding)
    }
}

/// Over datagrams: each arrival is one request datagram and its answer
/// one datagram, matched by its transaction number; an answer may come out
/// of order, or never (lost after the test's UDP timeout).
impl OpenLoop {
    /// The next arrival that may go now (its connection has room): its
    /// number and request size; it is counted sent at `now`.
    pub fn send_datagram(&mut self, now: Instant) -> Option<(u64, u64)> {
        let p = *self.next_to_send()?;
        self.outstanding += 1;
        self.record_send(p, now);
        Some((p.seq, p.request))
    }

    /// The answer to transaction `seq` came at `now`: the transaction, if
    /// it was outstanding (a late answer to one counted lost is not).
    pub fn answered(&mut self, seq: u64, now: Instant) -> Option<Completed> {
        let i = self
            .queue
            .iter()
            .take(self.outstanding)
            .position(|p| p.seq == seq)?;
        let p = self.queue.remove(i)?;
        self.outstanding -= 1;
        Some(Completed {
            took: now.saturating_duration_since(p.due),
            service: Some(now.saturating_duration_since(p.sent.unwrap_or(p.due))),
        })
    }

    /// Transactions sent before `before` and not answered are lost: given
    /// up, their room freed. How many.
    pub fn expire(&mut self, before: Instant) -> u64 {
        let mut lost = 0;
        let mut i = 0;
        while i < self.outstanding {
            if self.queue[i].sent.is_some_and(|t| t < before) {
                self.queue.remove(i);
                self.outstanding -= 1;
                lost += 1;
            } else {
                i += 1;
            }
        }
        lost
    }

    /// When the oldest transaction outstanding was sent.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.queue
            .iter()
            .take(self.outstanding)
            .filter_map(|p| p.sent)
            .min()
    }

    /// Whether the schedule is over and nothing is left to send or answer.
    pub fn finished(&self) -> bool {
        self.stopped && self.queue.is_empty()
    }

    /// Transaction `p` goes at `now`: counted, its event noted.
    fn record_send(&mut self, p: Pending, now: Instant) {
        if let Some(q) = self.queue.get_mut(self.outstanding - 1) {
            q.sent = Some(now);
        }
        self.counts.sent += 1;
        if !p.waited && now.saturating_duration_since(p.due) > BEHIND_AFTER {
            self.counts.behind += 1;
        }
        // The generator's own timing: the gap between two sends that had
        // room; where either waited for an answer (it went when the server
        // let it, not when the generator did), the gap between their due
        // times.
        let gap = self.last_offered.map(|(due, sent, waited)| {
            if waited || p.waited {
                p.due.saturating_duration_since(due)
            } else {
                now.saturating_duration_since(sent)
            }
        });
        self.last_offered = Some((p.due, now, p.waited));
        self.events.push(Event::Sent {
            due: p.due,
            sent: now,
            waited: p.waited,
            gap,
        });
    }
}

/// Bytes of requests one write carries at most (the shared payload's size):
/// the arrivals that have room go together, one system call for all.
const WRITE_BATCH: u64 = 1 << 20;

impl Exchange for OpenLoop {
    fn pipelined(&self) -> bool {
        self.max_outstanding > 1
    }

    fn read_aside(&self) -> usize {
        if self.pipelined() {
            clamp(self.owed)
        } else {
            0
        }
    }

    /// What is begun of a request and every arrival with room after it
    /// go in one write; what all those outstanding owe is read in one.
    fn want(&self) -> Want {
        let room = self.max_outstanding.saturating_sub(self.outstanding);
        let mut write = self.writing;
        for p in self.queue.iter().skip(self.outstanding).take(room) {
            if write >= WRITE_BATCH {
                break;
            }
            write += p.request;
        }
        if write > 0 {
            return Want::Write(clamp(write));
        }
        if self.outstanding > 0 {
            return Want::Read(clamp(self.owed));
        }
        if self.stopped && self.queue.is_empty() {
            return Want::Done;
        }
        Want::Idle
    }

    fn written(&mut self, n: usize, now: Instant, _done: &mut dyn FnMut(Completed)) {
        let mut n = n as u64;
        while n > 0 {
            if self.writing == 0 {
                // The first byte of the next one.
                let Some(p) = self.next_to_send().copied() else {
                    break;
                };
                self.outstanding += 1;
                self.writing = p.request;
                self.owed += p.response;
                if self.outstanding == 1 {
                    self.reading = p.response;
                }
                self.record_send(p, now);
            }
            let k = n.min(self.writing);
            (self.writing, n) = (self.writing - k, n - k);
        }
    }

    fn arrived(&mut self, n: usize, now: Instant, _stop: bool, done: &mut dyn FnMut(Completed)) {
        let mut n = n as u64;
        while n > 0 && self.outstanding > 0 {
            let k = n.min(self.reading);
            (self.reading, n) = (self.reading - k, n - k);
            self.owed = self.owed.saturating_sub(k);
            if self.reading > 0 {
                break;
            }
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            self.outstanding -= 1;
            self.reading = self
                .queue
                .front()
                .filter(|_| self.outstanding > 0)
                .map_or(0, |q| q.response);
            done(Completed {
                took: now.saturating_duration_since(p.due),
                service: Some(now.saturating_duration_since(p.sent.unwrap_or(p.due))),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_workload::TransactionsPerSecond;

    fn load(rate: u64, arrival: Arrival, outstanding: u32) -> OfferedLoad {
        OfferedLoad {
            rate: TransactionsPerSecond(rate),
            arrival,
            max_outstanding: outstanding,
        }
    }

    fn user(l: &OfferedLoad, t0: Instant) -> OpenLoop {
        let sizes = TransactionSizes::Fixed {
            request: 10,
            response: 20,
        };
        OpenLoop::new(sizes, 0, 1, l, 7, t0)
    }

    const MS: Duration = Duration::from_millis(1);

    fn wrote(u: &mut OpenLoop, n: usize, at: Instant) {
        u.written(n, at, &mut |_| panic!("a write completes nothing"));
    }

    fn came(u: &mut OpenLoop, n: usize, at: Instant) -> Vec<Completed> {
        let mut done = Vec::new();
        u.arrived(n, at, false, &mut |c| done.push(c));
        done
    }

    fn one(mut done: Vec<Completed>) -> Completed {
        assert_eq!(done.len(), 1, "{done:?}");
        done.pop().unwrap()
    }

    /// A user whose window opens at `opens` starts at `t0`, sends its first
    /// request and is never answered: its arrivals until `until` wait as
    /// many as may, and the rest are dropped. The stretches of drops.
    fn dropped_behind(
        u: &mut OpenLoop,
        t0: Instant,
        opens: Instant,
        until: Instant,
    ) -> Vec<(Instant, u64)> {
        let far = t0 + Duration::from_secs(3600);
        u.opens_at(opens);
        u.start(t0, 1);
        u.arrivals(t0, far);
        wrote(u, 10, t0);
        u.arrivals(until, far);
        u.take_events()
            .filter_map(|e| match e {
                Event::Dropped { due, n } => Some((due, n)),
                _ => None,
            })
            .collect()
    }

    /// A generator offered far more than it sends drops by the stretch: a
    /// stretch before the window opens and one in it, each one event, with
    /// the count the offered rate gives, however long the stretch (a
    /// starved generator catches up in bounded work, not one draw per
    /// arrival it drops).
    #[test]
    fn arrivals_dropped_far_behind_are_counted_by_the_stretch_split_where_the_window_opens() {
        for arrival in [Arrival::Fixed, Arrival::Poisson] {
            let t0 = Instant::now();
            let opens = t0 + Duration::from_secs(1);
            let mut u = user(&load(10_000_000, arrival, 1), t0);
            let drops = dropped_behind(&mut u, t0, opens, t0 + Duration::from_secs(3));
            assert_eq!(drops.len(), 2, "{arrival:?}: {drops:?}");
            assert!(drops[0].0 < opens && drops[1].0 >= opens, "{drops:?}");
            let c = u.counts();
            let near = |got: u64, want: f64| (got as f64 / want - 1.0).abs() < 1e-3;
            // 10 M/s for 3 s (Poisson: a standard deviation of 0.02 %).
            assert!(near(c.arrivals, 30e6), "{arrival:?}: {c:?}");
            assert!(
                near(drops[1].1, 20e6),
                "{arrival:?}: the window's 2 s: {drops:?}"
            );
            assert_eq!(c.dropped, drops[0].1 + drops[1].1);
            assert_eq!(c.arrivals, c.dropped + c.sent + MAX_WAITING as u64);
        }
    }

    /// At a mean gap of a nanosecond, drawn gaps often round to nothing;
    /// a stretch that ends where the window opens still leaves the next
    /// arrival after it, so the window's stretch is counted in the window.
    #[test]
    fn a_stretch_ending_where_the_window_opens_leaves_the_window_its_own() {
        let sizes = TransactionSizes::Fixed {
            request: 10,
            response: 20,
        };
        let l = load(1_000_000_000, Arrival::Poisson, 1);
        for seed in 0..20 {
            let t0 = Instant::now();
            let opens = t0 + 10 * MS;
            let mut u = OpenLoop::new(sizes.clone(), 0, 1, &l, seed, t0);
            let drops = dropped_behind(&mut u, t0, opens, t0 + 20 * MS);
            assert_eq!(drops.len(), 2, "seed {seed}: {drops:?}");
            assert!(drops[1].0 >= opens, "seed {seed}: {drops:?}");
            // 10 ms at 1 G/s.
            let share = drops[1].1 as f64 / 1e7;
            assert!((share - 1.0).abs() < 1e-2, "seed {seed}: {drops:?}");
        }
    }

    #[test]
    fn evenly_spaced_arrivals_are_timed_from_when_they_were_due() {
        let t0 = Instant::now();
        let mut u = user(&load(1000, Arrival::Fixed, 1), t0);
        u.start(t0, 1);
        assert_eq!(u.want(), Want::Idle);
        u.arrivals(t0, t0 + Duration::from_secs(3600));
        assert_eq!(u.want(), Want::Write(10), "the first is due at once");
        wrote(&mut u, 10, t0 + Duration::from_micros(3));
        assert_eq!(u.want(), Want::Read(20));
        assert_eq!(
            u.next_arrival(t0 + Duration::from_secs(3600)),
            Some(t0 + MS)
        );
        // The server is slow: the next arrival comes while the first is out.
        u.arrivals(t0 + MS, t0 + Duration::from_secs(3600));
        assert_eq!(
            u.want(),
            Want::Read(20),
            "one outstanding at most: it waits"
        );
        assert_eq!(u.counts().late, 1);
        let done = one(came(&mut u, 20, t0 + 3 * MS));
        assert_eq!(done.took, 3 * MS);
        assert_eq!(done.service, Some(3 * MS - Duration::from_micros(3)));
        assert_eq!(u.want(), Want::Write(10), "the waiting one goes");
        wrote(&mut u, 10, t0 + 3 * MS);
        let done = one(came(&mut u, 20, t0 + 4 * MS));
        assert_eq!(
            done.took,
            3 * MS,
            "timed from its due time, 1 ms, not its send"
        );
        assert_eq!(done.service, Some(MS));
    }

    #[test]
    fn several_outstanding_go_back_to_back_and_answers_pair_in_order() {
        let t0 = Instant::now();
        let mut u = user(&load(1000, Arrival::Fixed, 4), t0);
        u.start(t0, 1);
        u.arrivals(t0 + 2 * MS, t0 + Duration::from_secs(3600));
        assert_eq!(u.want(), Want::Write(30), "the three due go in one write");
        wrote(&mut u, 25, t0 + 2 * MS);
        assert_eq!(u.outstanding(), 3, "the third is begun");
        assert_eq!(u.want(), Want::Write(5), "the rest of it");
        wrote(&mut u, 5, t0 + 2 * MS);
        assert_eq!(u.want(), Want::Read(60), "all three answers in one read");
        // Answers in parts and across boundaries.
        assert!(came(&mut u, 15, t0 + 3 * MS).is_empty());
        let a = one(came(&mut u, 5, t0 + 3 * MS));
        assert_eq!(a.took, 3 * MS);
        assert_eq!(u.want(), Want::Read(40));
        let bc = came(&mut u, 40, t0 + 3 * MS);
        let took: Vec<Duration> = bc.iter().map(|c| c.took).collect();
        assert_eq!(took, [2 * MS, MS], "two in one read, in order");
        assert_eq!(u.want(), Want::Idle);
        assert_eq!(u.counts().late, 0);
        assert_eq!(
            u.counts().behind,
            1,
            "sent 2 ms after due with room (1 ms is within the bound)"
        );
    }

    #[test]
    fn arrivals_past_the_wait_bound_are_dropped_and_counted_and_stop_ends_the_schedule() {
        let t0 = Instant::now();
        // 100/s: 200 may wait (2 s of them).
        let mut u = user(&load(100, Arrival::Fixed, 1), t0);
        u.start(t0, 1);
        u.arrivals(t0, t0 + Duration::from_secs(3600));
        wrote(&mut u, 10, t0);
        u.arrivals(t0 + Duration::from_secs(5), t0 + Duration::from_secs(3600));
        let c = u.counts();
        assert_eq!(c.arrivals, 501);
        assert_eq!(u.waiting(), 200);
        assert_eq!(c.dropped, 300);
        assert_eq!(c.late, 200);
        let end = t0 + Duration::from_secs(5) + MS;
        assert_eq!(u.next_arrival(end), Some(end), "woken at the close");
        u.arrivals(t0 + Duration::from_secs(6), end);
        assert_eq!(u.next_arrival(end), None);
        assert_eq!(u.counts().arrivals, 501, "none due after the close came");
        // The ones due are still answered, then it is done.
        for _ in 0..201 {
            assert_eq!(came(&mut u, 20, t0 + Duration::from_secs(7)).len(), 1);
            if u.want() == Want::Write(10) {
                wrote(&mut u, 10, t0 + Duration::from_secs(7));
            }
        }
        assert_eq!(u.want(), Want::Done);
    }

    #[test]
    fn datagrams_are_answered_by_number_in_any_order_and_lost_after_the_timeout() {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(3600);
        let mut u = user(&load(1000, Arrival::Fixed, 3), t0);
        u.start(t0, 1);
        u.arrivals(t0 + 3 * MS, far);
        let sent: Vec<u64> =
            std::iter::from_fn(|| u.send_datagram(t0 + 3 * MS).map(|s| s.0)).collect();
        assert_eq!(sent, [0, 1, 2], "three outstanding at most");
        assert_eq!(u.send_datagram(t0 + 3 * MS), None);
        // The second's answer first.
        let b = u.answered(1, t0 + 4 * MS).unwrap();
        assert_eq!(b.took, 3 * MS, "due at 1 ms");
        assert_eq!(b.service, Some(MS));
        assert_eq!(u.answered(1, t0 + 4 * MS), None, "a duplicate is nothing");
        assert_eq!(
            u.send_datagram(t0 + 4 * MS).map(|s| s.0),
            Some(3),
            "room again"
        );
        // The first and third never come: lost after the timeout.
        assert_eq!(u.expire(t0 + 3 * MS + Duration::from_nanos(1)), 2);
        assert_eq!(u.outstanding(), 1);
        assert_eq!(u.answered(0, t0 + 5 * MS), None, "too late: it was lost");
        assert_eq!(u.oldest_sent(), Some(t0 + 4 * MS));
        assert_eq!(u.counts().sent, 4);
    }

    #[test]
    fn poisson_arrivals_keep_the_rate_and_vary() {
        let t0 = Instant::now();
        let mut u = user(&load(10_000, Arrival::Poisson, 1024), t0);
        u.start(t0, 1);
        let mut gaps = Vec::new();
        let mut last = None;
        u.arrivals(t0 + Duration::from_secs(10), t0 + Duration::from_secs(3600));
        for e in u.take_events() {
            if let Event::Arrived { due: at, .. } = e {
                if let Some(l) = last {
                    gaps.push(at.duration_since(l).as_secs_f64());
                }
                last = Some(at);
            }
        }
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!((mean - 1e-4).abs() < 2e-6, "mean gap {mean}");
        // An exponential's standard deviation is its mean.
        assert!((sd / mean - 1.0).abs() < 0.03, "cv {}", sd / mean);
    }
}
