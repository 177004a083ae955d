//! A profile's user as the generic worker carries it ([`Flow`]): what the
//! user needs ([`Need`]) becomes a step (open, take, carry on or close one
//! of its connections, wait, spin, hold at a barrier), and what the worker's
//! kind did is told back to the user. The user's deadlines (an operation's
//! timeout, a drain's, the server's wait for lost datagrams) come back as
//! [`Told::Timer`] and end the operation here.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::coord::Coord;
use super::stats::ProfileCounters;
use super::user::{Need, Role, User};
use crate::counters::Counters;
use crate::flow::step::{Carried, ConnIx, Deadline, Flow, Step, Told};

/// Instant steps (a nop, a think that is over, an iteration's end) one
/// drive of a user takes before the worker's other users get a turn.
const BUDGET: u32 = 64;

/// Datagrams a server's user keeps per connection until it reads them
/// (more are lost, as a full socket buffer would lose them).
pub const MAX_DATAGRAMS: usize = 8192;

/// The stops of the client's timed transactions the server has heard of:
/// per transaction, each user's iterations.
pub type Stops = Arc<HashMap<usize, Arc<Vec<u64>>>>;

impl AsMut<Counters> for ProfileCounters {
    fn as_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
}

/// What a close the user asks for is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Its `disconnect` flowop (the server reads to the client's end first).
    Disconnect,
    /// A connection opened in the iteration a timed transaction abandoned
    /// (the client never took it): closed at once.
    Abandoned,
    /// A connect that ran out of time: what it opened, if it is still
    /// opening, is closed, and the connect fails.
    TimedOut,
}

/// The step a user gave last, which says what its deadline is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Waiting on I/O: the operation's own deadline.
    Io,
    /// Thinking or paced until then.
    Until(Instant),
    /// Nothing to wait for on the clock.
    Other,
}

/// One profile user carried by the generic worker.
#[derive(Debug)]
pub struct ProfileUser {
    /// The user.
    pub user: User,
    /// What the carry it asked for last is (a write, read or drain).
    pub need: Need,
    /// What the close it asked for last is.
    pub closing: Closing,
    /// When a datagram connection's registration is sent again, while the
    /// server has not answered it (the worker's kind sets it).
    pub retry: Option<Instant>,
    coord: Arc<Coord>,
    stops: Stops,
    budget: u32,
    last: Last,
    /// Told anything since its last step (if not, that step blocked).
    told: bool,
    /// A timed transaction ended on the server: the connections its
    /// abandoned iteration opened, to close first, then its end to tell.
    abandoned: Vec<ConnIx>,
    ended: Option<(usize, Vec<u64>)>,
    /// The need computed before those closes.
    pending: Option<Need>,
    /// A connect that timed out, to close.
    timed_out: Option<ConnIx>,
    /// The latest time it was given: a user driven twice in one of the
    /// worker's rounds is given the round's time twice, though it spun or
    /// read since; its clock never goes back.
    latest: Option<Instant>,
    /// Server: the payload sizes of the datagrams told for each of its
    /// connections on the worker's shared socket, oldest first, until a
    /// read takes them.
    datagrams: HashMap<ConnIx, VecDeque<usize>>,
}

impl ProfileUser {
    /// `user`, whose timed transactions' ends (server) go to `coord`.
    pub fn new(user: User, coord: Arc<Coord>) -> Self {
        ProfileUser {
            user,
            need: Need::Done,
            closing: Closing::Disconnect,
            retry: None,
            coord,
            stops: Stops::default(),
            budget: BUDGET,
            last: Last::Other,
            told: false,
            abandoned: Vec::new(),
            ended: None,
            pending: None,
            timed_out: None,
            latest: None,
            datagrams: HashMap::new(),
        }
    }

    /// Server: the payload size of the oldest datagram told for connection
    /// `c` and not read yet, taken.
    pub fn take_datagram(&mut self, c: ConnIx) -> Option<usize> {
        self.datagrams.get_mut(&c)?.pop_front()
    }

    /// `now`, or the latest time it was given if that is later.
    fn at(&mut self, now: Instant) -> Instant {
        match self.latest {
            Some(l) if l > now => l,
            _ => {
                self.latest = Some(now);
                now
            }
        }
    }

    /// Server: the client's stops as known now.
    pub fn set_stops(&mut self, stops: Stops) {
        self.stops = stops;
    }

    /// Whether the operation it waits on is a datagram one (its timeout is
    /// a datagram lost).
    fn udp(&self) -> bool {
        let c = match self.need {
            Need::Read { conn, .. } | Need::Drain { conn, .. } | Need::Write { conn, .. } => conn,
            _ => return false,
        };
        self.user
            .script()
            .conn_options
            .get(c)
            .is_some_and(|o| o.udp)
    }

    /// The operation failed at `now` (the user goes on if it may fail).
    fn fail(&mut self, why: &str, now: Instant, counts: &mut ProfileCounters) {
        let _ = self.user.fail(why, now, counts);
    }

    /// The user's deadline came at `now` while it waited on I/O.
    fn timed_out(&mut self, now: Instant, counts: &mut ProfileCounters) {
        if matches!(self.need, Need::Drain { .. }) {
            self.user.stop_draining(now, counts);
            return;
        }
        if self.user.role() == Role::Server {
            // What the client sent before its end of the timed transaction
            // and never came was lost.
            self.user.give_up_lost(now, counts);
            return;
        }
        if let Need::Connect(c) = self.need {
            // A connect (or a UDP registration) that timed out leaves
            // nothing open: closed, then failed.
            self.timed_out = Some(c);
            return;
        }
        let why = if self.udp() {
            "no datagram before its timeout (lost)"
        } else {
            "no progress before its timeout"
        };
        self.fail(why, now, counts);
    }

    /// The step that yields the worker: a new drive starts with a whole
    /// budget.
    fn yielding(&mut self, step: Step, last: Last) -> Step {
        self.budget = BUDGET;
        self.last = last;
        step
    }

    fn io(&mut self, step: Step) -> Step {
        self.last = Last::Io;
        step
    }
}

impl Flow for ProfileUser {
    type Counts = ProfileCounters;

    fn step(&mut self, now: Instant, counts: &mut ProfileCounters) -> Step {
        let now = self.at(now);
        if self.last == Last::Io && !self.told {
            // Its last step blocked: this is a new drive.
            self.budget = BUDGET;
        }
        self.told = false;
        if let Some(c) = self.timed_out {
            self.closing = Closing::TimedOut;
            self.last = Last::Other;
            return Step::Close(c);
        }
        loop {
            if !self.abandoned.is_empty() {
                let c = self.abandoned.remove(0);
                self.closing = Closing::Abandoned;
                self.last = Last::Other;
                return Step::Close(c);
            }
            if let Some((txn, written)) = self.ended.take() {
                self.coord.ended(txn, self.user.id, written);
            }
            let need = match self.pending.take() {
                Some(n) => n,
                None => {
                    if self.user.role() == Role::Server {
                        let txn = self.user.txn();
                        if let Some(s) = self.stops.get(&txn) {
                            if let Some(n) = s.get(self.user.id as usize) {
                                self.user.stop_at(txn, *n, now);
                            }
                        }
                    }
                    let need = self.user.need(now, counts, &mut self.budget);
                    if let Some((txn, written, close)) = self.user.ended.take() {
                        self.abandoned = close;
                        self.ended = Some((txn, written));
                        self.pending = Some(need);
                        continue;
                    }
                    need
                }
            };
            self.need = need;
            if !matches!(need, Need::Connect(_)) {
                self.retry = None;
            }
            return match need {
                Need::Connect(c) => self.io(Step::Connect(c)),
                Need::Accept(c) => self.io(Step::Accept(c)),
                Need::Disconnect(c) => {
                    self.closing = Closing::Disconnect;
                    self.io(Step::Close(c))
                }
                Need::Write { conn, .. } | Need::Read { conn, .. } | Need::Drain { conn, .. } => {
                    self.io(Step::Carry(conn))
                }
                Need::Wait { until, busy } => {
                    if until <= now || busy {
                        self.yielding(Step::Again, Last::Other)
                    } else {
                        self.yielding(Step::Wait, Last::Until(until))
                    }
                }
                Need::Spin(left) => self.yielding(Step::Spin(left), Last::Other),
                Need::Barrier(n) => self.yielding(Step::Hold(n), Last::Other),
                Need::Done => self.yielding(Step::Done, Last::Other),
            };
        }
    }

    fn told(&mut self, what: Told, now: Instant, counts: &mut ProfileCounters) {
        if let Told::Datagram { conn, payload, .. } = what {
            // Kept for its read; not an answer to its last step.
            let q = self.datagrams.entry(conn).or_default();
            if q.len() < MAX_DATAGRAMS {
                q.push_back(payload);
            }
            return;
        }
        let now = self.at(now);
        self.told = true;
        match what {
            Told::Connected(_) => {
                self.retry = None;
                self.user.op_done(now, counts);
            }
            Told::Accepted(_) => self.user.op_done(now, counts),
            Told::Closed(_) => match self.closing {
                Closing::Disconnect => self.user.op_done(now, counts),
                Closing::Abandoned => {}
                Closing::TimedOut => {
                    self.timed_out = None;
                    self.fail("no progress before its timeout", now, counts);
                }
            },
            Told::Failed(_, e) => {
                self.retry = None;
                self.fail(&e.to_string(), now, counts);
            }
            Told::Carried { how, .. } => match how {
                Carried::Eof => self.fail("the other side closed the connection", now, counts),
                Carried::Failed(e) => self.fail(&e.to_string(), now, counts),
                Carried::Blocked | Carried::Again | Carried::Finished => {}
            },
            Told::Timer(_) => {
                // Only a deadline of the I/O it waits on ends anything; a
                // think's, a pace's or a registration's due to be sent
                // again just looks again.
                if self.last == Last::Io && self.user.deadline().is_some_and(|d| d <= now) {
                    self.timed_out(now, counts);
                }
            }
            Told::Spun(d) => self.user.spun(d),
            Told::Datagram { .. } => {}
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        let at = match self.last {
            Last::Io => match (self.user.deadline(), self.retry) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            },
            Last::Until(at) => Some(at),
            Last::Other => None,
        };
        at.map(Deadline::at)
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use linkperf_workload::profile::{
        mirror, Flowop, FlowopKind, Limit, Profile, ProfileProtocol, Rate,
    };

    use super::*;
    use crate::program::fixtures::{connect_then, op, x};
    use crate::program::script::compile;
    use crate::program::user::{STALL, UDP_QUIET};

    fn flowop(kind: FlowopKind, timeout: Option<Duration>) -> Flowop {
        Flowop {
            timeout,
            ..op(kind, 1)
        }
    }

    fn xfer(n: u64) -> FlowopKind {
        FlowopKind::Read(x(n))
    }

    fn write(n: u64) -> FlowopKind {
        FlowopKind::Write(x(n))
    }

    /// Connect, then a timed or counted transaction of a write and a read
    /// (`timeout` on the read), over `protocol`.
    fn profile(limit: Limit, protocol: ProfileProtocol, timeout: Option<Duration>) -> Profile {
        let flowops = vec![flowop(write(90), None), flowop(xfer(90), timeout)];
        connect_then(limit, protocol, flowops)
    }

    fn user(p: &Profile, role: Role, t0: Instant) -> (ProfileUser, ProfileCounters) {
        let c = match role {
            Role::Client => compile(p).unwrap(),
            Role::Server => compile(&mirror(p)).unwrap(),
        };
        let script = c.scripts[0].clone();
        let mut counts = ProfileCounters::new(c.slots.len());
        counts.start(t0);
        let u = User::new(0, 0, role, script, t0);
        (ProfileUser::new(u, Arc::new(Coord::new(1))), counts)
    }

    #[test]
    fn a_client_user_holds_connects_carries_and_is_told_each_result() {
        let t0 = Instant::now();
        let p = profile(Limit::Iterations(1), ProfileProtocol::Tcp, None);
        let (mut f, mut n) = user(&p, Role::Client, t0);
        assert_eq!(f.step(t0, &mut n), Step::Hold(0));
        assert_eq!(f.deadline(), None);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        // Waiting on its connect: the flowop's stall is its deadline.
        assert_eq!(f.deadline(), Some(Deadline::at(t0 + STALL)));
        f.told(Told::Connected(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Hold(1));
        f.user.release(1, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Carry(0));
        assert!(matches!(
            f.need,
            Need::Write {
                conn: 0,
                len: 90,
                ..
            }
        ));
        // The kind counts the bytes into the user as it moves them.
        f.user.wrote(90, t0, &mut n);
        f.told(
            Told::Carried {
                conn: 0,
                how: Carried::Finished,
            },
            t0,
            &mut n,
        );
        assert_eq!(f.step(t0, &mut n), Step::Carry(0));
        assert!(matches!(f.need, Need::Read { conn: 0, len: 90 }));
        f.user.got(90, t0, &mut n);
        f.told(
            Told::Carried {
                conn: 0,
                how: Carried::Finished,
            },
            t0,
            &mut n,
        );
        assert_eq!(f.step(t0, &mut n), Step::Hold(2));
        f.user.release(2, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Done);
        assert_eq!(f.user.failure(), None);
    }

    #[test]
    fn a_read_that_times_out_fails_the_user_with_the_timeout_words() {
        let t0 = Instant::now();
        let timeout = Duration::from_millis(300);
        for (protocol, words) in [
            (ProfileProtocol::Tcp, "no progress before its timeout"),
            (
                ProfileProtocol::Udp,
                "no datagram before its timeout (lost)",
            ),
        ] {
            let p = profile(Limit::Iterations(1), protocol, Some(timeout));
            let (mut f, mut n) = user(&p, Role::Client, t0);
            f.user.release(0, &[0], t0, 1);
            assert_eq!(f.step(t0, &mut n), Step::Connect(0));
            f.told(Told::Connected(0), t0, &mut n);
            assert_eq!(f.step(t0, &mut n), Step::Hold(1));
            f.user.release(1, &[0], t0, 1);
            assert_eq!(f.step(t0, &mut n), Step::Carry(0));
            f.user.wrote(90, t0, &mut n);
            f.told(
                Told::Carried {
                    conn: 0,
                    how: Carried::Finished,
                },
                t0,
                &mut n,
            );
            assert_eq!(f.step(t0, &mut n), Step::Carry(0));
            // The read blocks: its timeout is the deadline.
            let at = t0 + timeout;
            assert_eq!(f.deadline(), Some(Deadline::at(at)));
            // Told of it early (a stale timer), nothing ends.
            f.told(Told::Timer(at), t0, &mut n);
            assert_eq!(f.user.failure(), None);
            f.told(Told::Timer(at), at, &mut n);
            assert_eq!(f.step(at, &mut n), Step::Done);
            let failure = f.user.failure().unwrap();
            assert!(failure.ends_with(words), "{failure}");
            assert!(failure.contains("read failed"), "{failure}");
        }
    }

    #[test]
    fn a_connect_that_times_out_closes_what_it_opened_then_fails() {
        let t0 = Instant::now();
        let p = profile(Limit::Iterations(1), ProfileProtocol::Tcp, None);
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        let at = t0 + STALL;
        f.told(Told::Timer(at), at, &mut n);
        assert_eq!(f.step(at, &mut n), Step::Close(0));
        assert_eq!(f.closing, Closing::TimedOut);
        assert_eq!(f.deadline(), None);
        f.told(Told::Closed(0), at, &mut n);
        assert_eq!(f.step(at, &mut n), Step::Done);
        let failure = f.user.failure().unwrap();
        assert!(
            failure.ends_with("connect failed: no progress before its timeout"),
            "{failure}"
        );
    }

    #[test]
    fn a_failure_the_kind_reports_fails_the_user_in_its_words() {
        let t0 = Instant::now();
        let p = profile(Limit::Iterations(1), ProfileProtocol::Tcp, None);
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        let e = io::Error::other("connect to 127.0.0.1:9: refused");
        f.told(Told::Failed(0, e), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Done);
        assert_eq!(
            f.user.failure(),
            Some("user 0: connect failed: connect to 127.0.0.1:9: refused")
        );
    }

    #[test]
    fn a_timed_out_drain_stops_draining_and_a_lost_read_gives_up_on_the_server() {
        let t0 = Instant::now();
        // Client: transaction 1 starts with bytes to drain that never come.
        let p = profile(Limit::Iterations(1), ProfileProtocol::Tcp, None);
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        f.told(Told::Connected(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Hold(1));
        f.user.release(1, &[500], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Carry(0));
        assert!(matches!(f.need, Need::Drain { conn: 0, len: 500 }));
        let at = f.deadline().unwrap().at;
        assert!(at > t0);
        f.told(Told::Timer(at), at, &mut n);
        // The drain is given up (counted as an error) and the user goes on
        // to its write.
        assert_eq!(f.step(at, &mut n), Step::Carry(0));
        assert!(matches!(f.need, Need::Write { .. }));
        assert_eq!(n.counters.errors, 1);
        assert_eq!(f.user.failure(), None);

        // Server, datagrams: the client ended its timed transaction after
        // 3 iterations; the user waits for a datagram that was lost.
        let p = profile(
            Limit::Duration(Duration::from_secs(1)),
            ProfileProtocol::Udp,
            None,
        );
        let (mut f, mut n) = user(&p, Role::Server, t0);
        assert_eq!(f.step(t0, &mut n), Step::Accept(0));
        f.told(Told::Accepted(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Carry(0));
        assert!(matches!(f.need, Need::Read { .. }));
        assert_eq!(f.deadline(), None, "no deadline before the client's stop");
        let mut stops = HashMap::new();
        stops.insert(1, Arc::new(vec![3]));
        f.set_stops(Arc::new(stops));
        assert_eq!(f.step(t0, &mut n), Step::Carry(0));
        let at = t0 + UDP_QUIET;
        assert_eq!(f.deadline(), Some(Deadline::at(at)));
        f.told(Told::Timer(at), at, &mut n);
        // The transaction ends at the client's count (the script's last):
        // the user is done, with the loss counted and no failure.
        assert_eq!(f.step(at, &mut n), Step::Done);
        assert_eq!(f.user.failure(), None);
        assert_eq!(n.counters.errors, 1);
    }

    #[test]
    fn a_user_given_an_older_time_than_it_was_told_keeps_the_later_one() {
        let t0 = Instant::now();
        let mut p = profile(Limit::Iterations(1), ProfileProtocol::Tcp, None);
        p.groups[0].transactions[1].flowops = vec![flowop(
            FlowopKind::Think {
                duration: Duration::from_millis(2),
                busy: true,
            },
            None,
        )];
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        f.told(Told::Connected(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Hold(1));
        f.user.release(1, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Spin(Duration::from_millis(2)));
        let spun = t0 + Duration::from_millis(2);
        f.told(Told::Spun(Duration::from_millis(2)), spun, &mut n);
        // Driven again with the worker's round's older time: the think
        // ends when it was told it did, not before it began.
        assert_eq!(f.step(t0, &mut n), Step::Hold(2));
        let took = n.txns[1].latency.summary().unwrap();
        assert_eq!(took.count, 1);
        assert!(took.min >= 2_000.0, "{took:?}");
    }

    #[test]
    fn a_paced_or_thinking_user_waits_for_its_time_and_one_out_of_budget_looks_again() {
        let t0 = Instant::now();
        let mut p = profile(Limit::Iterations(1000), ProfileProtocol::Tcp, None);
        p.groups[0].transactions[1].flowops = vec![flowop(FlowopKind::Nop, None)];
        p.groups[0].transactions[1].rate = None;
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        f.told(Told::Connected(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Hold(1));
        f.user.release(1, &[0], t0, 1);
        // A thousand nops: a budget's worth at a time.
        assert_eq!(f.step(t0, &mut n), Step::Again);
        assert_eq!(f.user.iterations(), u64::from(BUDGET));
        assert_eq!(f.step(t0, &mut n), Step::Again);
        assert_eq!(f.user.iterations(), 2 * u64::from(BUDGET));

        // Paced: iteration 1 is due a second after the transaction began.
        let mut p = profile(Limit::Iterations(2), ProfileProtocol::Tcp, None);
        p.groups[0].transactions[1].flowops = vec![flowop(FlowopKind::Nop, None)];
        p.groups[0].transactions[1].rate = Some(Rate(1.0));
        let (mut f, mut n) = user(&p, Role::Client, t0);
        f.user.release(0, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Connect(0));
        f.told(Told::Connected(0), t0, &mut n);
        assert_eq!(f.step(t0, &mut n), Step::Hold(1));
        f.user.release(1, &[0], t0, 1);
        assert_eq!(f.step(t0, &mut n), Step::Wait);
        let at = t0 + Duration::from_secs(1);
        assert_eq!(f.deadline(), Some(Deadline::at(at)));
        f.told(Told::Timer(at), at, &mut n);
        assert_eq!(f.user.failure(), None);
        assert_eq!(f.step(at, &mut n), Step::Hold(2));
    }
}
