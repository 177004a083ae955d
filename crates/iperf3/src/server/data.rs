//! The data path of one test on the server: the engine's one worker
//! (`worker::generic`) over the test's streams, each a flow (stream.rs), and
//! its control connection, as iperf3 runs one loop per test. It counts what
//! it receives, sends what it must (whole blocks, paced when the client
//! asked for a rate, up to `-n`/`-k`), and watches the control connection
//! for the client's `TEST_END`. Then, on the same worker, the streams' tails
//! make the counts whole: a receiver reads what is still arriving until it
//! is quiet, a TCP sender waits until what it sent has been delivered; once
//! the client's results are in, the receivers read until they hold all the
//! client sent (tail.rs).
//!
//! The test counts in the engine's [`Counters`], its omitted seconds the
//! warm-up and its limit the window's end, each stream in a flow slot with
//! iperf3's extension beside it ([`Iperf3Tally`]); the thread's CPU is taken
//! by the engine workers' window clock ([`WindowClock`]), over the whole
//! phase as iperf3 reports it (omitted seconds included).

mod stream;
mod tail;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linkperf_engine::flow::step::{Carried, Step, Told};
use linkperf_engine::flow::Pacer;
use linkperf_engine::io::{read_arrived, write_messages, Conn, Messages, Moved};
use linkperf_engine::worker::generic::{drive, Core, Kind, Worker, KIND_TOKENS};
use linkperf_engine::worker::WorkerLoop;
use linkperf_engine::{Counters, Schedule};
use linkperf_metrics::{read_tcp_info, socket_congestion_control, ProcessCpu};
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};

use crate::codec::{State, UdpHeader};
use crate::server::accounting::{Budget, Iperf3Tally, Stamp};
use crate::server::plan::TestPlan;
use crate::sys;

pub(crate) use stream::Stream;
use stream::{Io, Next};
pub(crate) use tail::DataPhase;
use tail::TopUp;

/// The control connection's token: one of the kind's own (past every flow's).
const CTRL: Token = Token(KIND_TOKENS);
/// Payload buffer, at least (UDP datagrams up to 64 KiB are read whole).
const MIN_BUFFER: usize = 128 * 1024;
/// After `TEST_END`, the longest the streams' tails take: a receiver's
/// drain, or a sender's wait for its acknowledgements and then its quiet.
const TAIL_MAX: Duration = stream::DRAIN_MAX.saturating_add(stream::QUIET);
/// At a shutdown, how long the streams stay open after SERVER_TERMINATE for
/// the client to read it (it closes its control connection when it has).
const TERMINATE_WAIT: Duration = Duration::from_secs(1);

/// A stream ready to run.
pub(crate) struct DataStream {
    /// Its iperf3 id.
    pub id: u32,
    /// True if the server sends on it.
    pub sends: bool,
    /// The socket.
    pub sock: Conn,
}

/// How the data phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The client sent `TEST_END`.
    TestEnd,
    /// The client sent `CLIENT_TERMINATE`.
    ClientTerminate,
    /// The control connection closed or failed.
    ControlClosed,
    /// The test outlived its limit.
    Deadline,
    /// The server is shutting down.
    Shutdown,
    /// The client sent a byte that is no state, or one out of turn.
    Protocol(u8),
}

/// What one stream counted: its iperf3 figures (its bytes are in the
/// phase's counters).
#[derive(Debug, Clone)]
pub(crate) struct StreamRecord {
    pub id: u32,
    pub sends: bool,
    pub tally: Iperf3Tally,
    /// TCP retransmits of a sending stream.
    pub retransmits: Option<u32>,
}

/// What the data phase produced.
#[derive(Debug)]
pub(crate) struct DataOutcome {
    pub end: Finish,
    /// What the streams counted, each in its flow slot.
    pub counters: Counters,
    pub records: Vec<StreamRecord>,
    /// From the start (after the omitted seconds) to `TEST_END`.
    pub seconds: f64,
    /// From the start to `TEST_END`, omitted seconds included.
    pub wall_s: f64,
    /// This thread's CPU over the test.
    pub cpu: ProcessCpu,
    /// The congestion control of the TCP streams.
    pub congestion: Option<String>,
    /// Streams that failed, in words.
    pub errors: Vec<String>,
}

/// Gives each stream to the worker (its socket registered under its
/// key), each sender its pacer, and each a flow slot in the counters.
fn add_streams(
    core: &mut Core<Iperf3Kind<'_>>,
    streams: Vec<DataStream>,
    plan: &TestPlan,
    start: Instant,
    client_end: Option<Instant>,
) -> io::Result<()> {
    for s in streams {
        let pacer = if s.sends {
            // As iperf3 paces: the first block at once, and however far
            // behind, it catches up.
            plan.rate.map(|r| Pacer::new(r, start, None))
        } else {
            None
        };
        let tcp = s.sock.is_tcp();
        let udp = matches!(s.sock, Conn::Udp(_));
        let tally = Iperf3Tally::new(&mut core.counts, s.id, s.sends, udp);
        let end = client_end.map(|e| (e, start));
        let key = core.add(Stream::new(s.id, s.sends, tcp, tally, pacer, end));
        core.attach(key, 0, s.sock)?;
    }
    Ok(())
}

/// Each stream's record, in the order given.
fn records(core: &Core<Iperf3Kind<'_>>) -> Vec<StreamRecord> {
    core.slots
        .iter()
        .map(|(_, slot)| {
            let st = &slot.flow;
            let retransmits = match (slot.links.last().map(|l| &l.conn), st.sends) {
                (Some(conn), true) => retransmits(conn),
                // Read as it closed.
                _ => st.retransmits,
            };
            StreamRecord {
                id: st.id,
                sends: st.sends,
                retransmits,
                tally: st.tally.clone(),
            }
        })
        .collect()
}

/// The retransmits of a TCP connection.
fn retransmits(conn: &Conn) -> Option<u32> {
    match conn {
        Conn::Tcp(t) => read_tcp_info(t.as_raw_fd()).map(|i| i.total_retrans),
        _ => None,
    }
}

/// Runs the test's data phase on `ctrl` (put in non-blocking mode for the
/// duration) and `streams`, and the streams' tails. `client_end` is when
/// the client will stop counting (its `-t` and `-O` from when `TEST_START`
/// went out).
pub(crate) fn run<'a>(
    ctrl: &TcpStream,
    streams: Vec<DataStream>,
    plan: &TestPlan,
    client_end: Option<Instant>,
    terminating: &'a AtomicBool,
) -> io::Result<DataPhase<'a>> {
    let start = Instant::now();
    // The phase is a worker on the test's thread. Its CPU is the whole
    // phase's: a window open from the start (and closed after the tail).
    let (driver, clock) = WorkerLoop::new("lp-iperf3-data".into(), 0, None, false)
        .map_err(|e| io::Error::other(e.to_string()))?
        .start_here();
    let clock = clock.map_err(io::Error::other)?;
    // The omitted seconds are the warm-up; the limit ends the window.
    let schedule = Schedule::new(
        start,
        plan.omit,
        plan.limit.saturating_sub(plan.omit),
        Duration::ZERO,
    );
    let mut counters = Counters::new(false);
    counters.set_schedule(schedule);
    // The worker's own handle on the control connection (the same one).
    let ctrl = ctrl.try_clone()?;
    ctrl.set_nonblocking(true)?;
    let ctrl_fd = ctrl.as_raw_fd();
    driver
        .registry()
        .register(&mut SourceFd(&ctrl_fd), CTRL, Interest::READABLE)?;
    let mut core = Core::new(driver, clock, None, 0, false, counters, start);
    core.set_schedule(schedule);
    core.set_window_schedule(Schedule::new(
        start,
        Duration::ZERO,
        plan.limit,
        Duration::ZERO,
    ));
    // Read now: a stream the client closes is closed before the end.
    let congestion = streams.iter().find_map(|s| match &s.sock {
        Conn::Tcp(t) => socket_congestion_control(t.as_raw_fd()),
        _ => None,
    });
    add_streams(&mut core, streams, plan, start, client_end)?;
    let kind = Iperf3Kind {
        ctrl: Some(ctrl),
        buf: payload(plan.blksize.max(MIN_BUFFER)),
        budget: Budget::new(plan.bytes, plan.blocks),
        omitting: !plan.omit.is_zero(),
        errors: Vec::new(),
        plan: plan.clone(),
        schedule,
        deadline: start + plan.limit,
        terminating,
        finish: None,
        ended: None,
        phase: Phase::Run,
    };
    let mut worker = Worker::new(core, kind);
    let mut events = Events::with_capacity(256);
    worker.run(&mut events)?;
    // The loop stops only once the phase has an end.
    let end = worker.kind.finish.unwrap_or(Finish::Deadline);
    let ended = worker.kind.ended.unwrap_or_else(Instant::now);
    if let Some(ctrl) = worker.kind.ctrl.take() {
        let _ = worker
            .core
            .driver()
            .registry()
            .deregister(&mut SourceFd(&ctrl_fd));
        ctrl.set_nonblocking(false)?;
    }
    let records = records(&worker.core);
    // Only the receivers of a test that ended well stay open, for the
    // top-up; the client's side of every other stream sees its end now.
    let closing: Vec<usize> = worker
        .core
        .slots
        .iter()
        .filter(|(_, s)| end != Finish::TestEnd || s.flow.sends || !s.flow.open())
        .map(|(k, _)| k)
        .collect();
    for key in closing {
        worker.core.drop_link(key, 0);
        if let Some(s) = worker.core.slots.get_mut(key) {
            s.flow.rest();
        }
    }
    let counted_from = if plan.omit.is_zero() {
        start
    } else {
        schedule.measure_from.min(ended)
    };
    let flows = u32::try_from(records.len()).unwrap_or(u32::MAX);
    let (cpu, _, _) = worker.core.finish_window(flows);
    let counters = std::mem::replace(&mut worker.core.counts, Counters::new(false));
    let errors = std::mem::take(&mut worker.kind.errors);
    Ok(DataPhase {
        out: DataOutcome {
            end,
            counters,
            records,
            seconds: ended.saturating_duration_since(counted_from).as_secs_f64(),
            wall_s: ended.saturating_duration_since(start).as_secs_f64(),
            cpu,
            congestion,
            errors,
        },
        worker,
        events,
    })
}

/// Where the data phase is.
enum Phase {
    /// The test runs.
    Run,
    /// After `TEST_END`: the streams' tails, at most until `until`.
    Tail { until: Instant },
    /// At a shutdown: SERVER_TERMINATE told the client at `since` with its
    /// streams still open (a client writing into a closed stream would see a
    /// reset before it reads the state); the receivers read what it still
    /// sends (not counted) until it closes its control connection
    /// (`closed`), at most [`TERMINATE_WAIT`].
    Terminate { since: Instant, closed: bool },
    /// Once the client's results are in: the receivers read until they hold
    /// all it says it sent (tail.rs).
    TopUp(TopUp),
}

/// The data phase's streams as the one engine worker carries them: what
/// stays the iperf3 server's own (the control connection, the test's
/// budget and end, the I/O of the streams' steps).
pub(crate) struct Iperf3Kind<'a> {
    /// The control connection, until the phase has ended.
    ctrl: Option<TcpStream>,
    buf: Vec<u8>,
    budget: Budget,
    /// Inside `-O`'s omitted seconds.
    omitting: bool,
    errors: Vec<String>,
    plan: TestPlan,
    /// The omitted seconds, then the counted ones until the limit.
    schedule: Schedule,
    deadline: Instant,
    terminating: &'a AtomicBool,
    /// How the phase ended, once it has, and when.
    finish: Option<Finish>,
    ended: Option<Instant>,
    phase: Phase,
}

impl Iperf3Kind<'_> {
    /// Whether what arrives now is counted.
    fn counting(&self) -> bool {
        !self.omitting && !matches!(self.phase, Phase::Terminate { .. })
    }

    /// The phase ends at `now` as `how`: after `TEST_END` the streams' tails
    /// begin, at a shutdown the client is told and its streams read on.
    fn finish(&mut self, core: &mut Core<Self>, how: Finish, now: Instant) {
        if self.finish.is_some() {
            return;
        }
        self.finish = Some(how);
        self.ended = Some(Instant::now());
        match how {
            Finish::TestEnd => {
                for (_, s) in core.slots.iter_mut() {
                    s.flow.test_end(now);
                }
                self.phase = Phase::Tail {
                    until: now + TAIL_MAX,
                };
            }
            Finish::Shutdown => {
                if let Some(mut ctrl) = self.ctrl.as_ref() {
                    let _ = ctrl.write(&[State::ServerTerminate.to_byte()]);
                }
                for (_, s) in core.slots.iter_mut() {
                    s.flow.read_on();
                }
                self.phase = Phase::Terminate {
                    since: now,
                    closed: false,
                };
            }
            _ => return,
        }
        // Each is read at once, whatever its last readiness edge said.
        let keys: Vec<usize> = core
            .slots
            .iter_mut()
            .map(|(k, s)| {
                s.readable = true;
                k
            })
            .collect();
        for key in keys {
            drive(core, self, key, now);
        }
    }

    /// What `st` reads on `conn` at `now`: counted into its tally (a
    /// sender's are dropped: nothing is expected there); the bytes read.
    fn receive(
        &mut self,
        st: &mut Stream,
        conn: &mut Conn,
        counters: &mut Counters,
        now: Instant,
    ) -> (Moved, u64) {
        let counting = self.counting();
        let (udp, sends, wide) = (matches!(conn, Conn::Udp(_)), st.sends, self.plan.udp_wide);
        let mut got = 0;
        // After the test, an end that came with the last bytes is seen.
        let to_end = !matches!(self.phase, Phase::Run);
        let how = read_arrived(conn, &mut self.buf, usize::MAX, to_end, |b| {
            let len = b.len() as u64;
            got += len;
            if sends {
                return;
            }
            let t = &mut st.tally;
            match udp.then(|| UdpHeader::decode(b, wide)) {
                Some(Ok(h)) => {
                    let (sec, usec) = sys::monotonic_now();
                    t.datagram(counters, len, &h, Stamp { sec, usec }, now, counting);
                }
                _ => t.bytes(counters, len, now, counting),
            }
        });
        if got > 0 {
            let at = Instant::now();
            st.arrived(at);
            if let Phase::TopUp(t) = &mut self.phase {
                t.last = at;
            }
        }
        (how, got)
    }

    fn failed(&mut self, id: u32, e: io::Error) -> Option<Told> {
        if self.errors.len() < 4 {
            self.errors.push(format!("stream {id}: {e}"));
        }
        Some(carried(Carried::Failed(e)))
    }
}

fn carried(how: Carried) -> Told {
    Told::Carried { conn: 0, how }
}

impl Kind for Iperf3Kind<'_> {
    type Flow = Stream;
    type Counts = Counters;
    // iperf3's results carry a sender's retransmits only, read at its end.
    const TCP_INFO: bool = false;

    fn begin(&mut self, core: &mut Core<Self>, now: Instant) {
        if let Phase::TopUp(t) = &mut self.phase {
            t.settle(core);
            return;
        }
        if !matches!(self.phase, Phase::Run) {
            return;
        }
        if self.omitting && now >= self.schedule.measure_from {
            self.omitting = false;
            for (_, s) in core.slots.iter_mut() {
                s.flow.tally.omit_over();
            }
        }
        if now >= self.deadline {
            self.finish(core, Finish::Deadline, now);
        } else if self.terminating.load(Ordering::Acquire) {
            self.finish(core, Finish::Shutdown, now);
        }
    }

    fn stop(&mut self, core: &Core<Self>, now: Instant) -> bool {
        match &self.phase {
            Phase::Run => self.finish.is_some(),
            Phase::Tail { until } => {
                now >= *until || core.slots.iter().all(|(_, s)| s.flow.settled())
            }
            Phase::Terminate { since, closed } => *closed || now >= *since + TERMINATE_WAIT,
            Phase::TopUp(t) => t.over(core, now),
        }
    }

    fn perform(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        step: Step,
        now: &mut Instant,
    ) -> Option<Told> {
        if let Step::Close(c) = step {
            // The client closed it, or it failed: its socket goes now (the
            // client's side sees its end), a sender's retransmits read first.
            let slot = core.slots.get_mut(key)?;
            if slot.flow.sends {
                slot.flow.retransmits = slot.links.last().and_then(|l| retransmits(&l.conn));
            }
            core.drop_link(key, c);
            return Some(Told::Closed(c));
        }
        let slot = core.slots.get_mut(key)?;
        let conn = &mut slot.links.last_mut()?.conn;
        let st = &mut slot.flow;
        let counters = &mut core.counts;
        if st.io() == Io::Unacked {
            st.unacked(sys::unacked_bytes(conn.as_raw_fd()).unwrap_or(0), *now);
            return Some(carried(Carried::Blocked));
        }
        if slot.readable {
            slot.readable = false;
            match self.receive(st, conn, counters, *now).0 {
                // The client closed its end.
                Moved::Eof => return Some(carried(Carried::Eof)),
                Moved::Failed(e) => return self.failed(st.id, e),
                // Read all there was; or an ICMP error from an earlier
                // datagram: the peer may be gone; go on.
                _ => {}
            }
        }
        if st.sending() && slot.writable {
            st.carrying();
            let counting = self.counting();
            let fd = conn.as_raw_fd();
            let mut blocks = Blocks {
                st: &mut *st,
                buf: &mut self.buf,
                counters,
                budget: &mut self.budget,
                plan: &self.plan,
                fd,
                now: *now,
                counting,
                starting: false,
                failed: None,
            };
            let how = write_messages(conn, &mut blocks, usize::MAX);
            let failed = blocks.failed.take();
            match how {
                Moved::Blocked => slot.writable = false,
                Moved::Stopped | Moved::Again => {
                    if let Some(e) = failed {
                        return self.failed(st.id, e);
                    }
                }
                // UDP: an ICMP error from an earlier datagram; the next may
                // pass.
                Moved::Refused => st.refused(*now),
                Moved::Eof => {
                    return self.failed(st.id, io::Error::other("the socket took no bytes"))
                }
                Moved::Failed(e) => return self.failed(st.id, e),
            }
        }
        Some(carried(Carried::Blocked))
    }

    fn event(&mut self, core: &mut Core<Self>, ev: &mio::event::Event, now: Instant) {
        if ev.token() != CTRL {
            return;
        }
        let read = match (&self.phase, self.ctrl.as_ref()) {
            (Phase::Run | Phase::Terminate { .. }, Some(ctrl)) => read_control(ctrl),
            _ => return,
        };
        match (&mut self.phase, read) {
            (Phase::Run, Some(how)) => self.finish(core, how, now),
            (Phase::Terminate { closed, .. }, Some(_)) => *closed = true,
            _ => {}
        }
    }

    fn deadline(&self, core: &Core<Self>) -> Option<Instant> {
        Some(match &self.phase {
            Phase::Run => self.deadline,
            Phase::Tail { until } => *until,
            Phase::Terminate { since, .. } => *since + TERMINATE_WAIT,
            Phase::TopUp(t) => t.deadline(core),
        })
    }
}

/// A sender's blocks as the engine's writer takes them: each block's start
/// decided by the stream (its budget, its pacer, the client's end, sampled
/// on its socket when it asks).
struct Blocks<'s> {
    st: &'s mut Stream,
    buf: &'s mut [u8],
    counters: &'s mut Counters,
    budget: &'s mut Budget,
    plan: &'s TestPlan,
    fd: RawFd,
    now: Instant,
    counting: bool,
    /// Whether the bytes given last start a block.
    starting: bool,
    failed: Option<io::Error>,
}

impl Messages for Blocks<'_> {
    fn next(&mut self) -> Option<&[u8]> {
        let blk = self.plan.blksize;
        self.starting = self.st.starting();
        if self.starting {
            let at = Instant::now();
            let mut next = self.st.next_block(self.now, at, self.budget);
            if next == Next::Sample {
                let window = sys::peer_window(self.fd);
                let unacked = sys::unacked_bytes(self.fd).unwrap_or(0);
                next = self.st.sampled(at, window, unacked, blk, self.counters);
            }
            if next != Next::Send {
                return None;
            }
        }
        if self.st.tcp {
            return Some(&self.buf[self.st.rest_of_block(blk)]);
        }
        let (sec, usec) = sys::monotonic_now();
        let h = UdpHeader {
            sec,
            usec,
            seq: self.st.tally.packets() + 1,
        };
        if h.encode(self.plan.udp_wide, &mut self.buf[..blk]).is_err() {
            self.failed = Some(io::Error::other("block smaller than the UDP header"));
            return None;
        }
        Some(&self.buf[..blk])
    }

    fn wrote(&mut self, n: usize) {
        let blk = self.plan.blksize;
        if std::mem::take(&mut self.starting) {
            self.budget.start_block(blk as u64);
        }
        self.st
            .wrote(n, blk, self.counters, self.now, self.counting);
    }
}

/// A block's worth of bytes that do not compress (xorshift).
fn payload(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (len as u64);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Reads the control connection; `Some` when the data phase is over.
fn read_control(mut ctrl: &TcpStream) -> Option<Finish> {
    let mut b = [0u8; 1];
    loop {
        match ctrl.read(&mut b) {
            Ok(0) => return Some(Finish::ControlClosed),
            Ok(_) => match State::from_byte(b[0]) {
                Ok(State::TestEnd) => return Some(Finish::TestEnd),
                Ok(State::ClientTerminate) => return Some(Finish::ClientTerminate),
                // Harmless out of turn: iperf3's server ignores them too.
                Ok(State::TestStart | State::IperfDone) => {}
                _ => return Some(Finish::Protocol(b[0])),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Some(Finish::ControlClosed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Shutdown, TcpListener};

    use super::*;
    use crate::codec::{decode_json, TestParams};
    use crate::server::plan::{plan, Limits};

    fn tcp_plan() -> TestPlan {
        let json = r#"{"tcp":true,"time":30,"len":1000}"#;
        let p: TestParams = decode_json(json.as_bytes()).unwrap();
        let limits = Limits {
            max_duration: Duration::from_secs(60),
            max_streams: 8,
        };
        plan(&p, &limits).unwrap()
    }

    /// A receiving stream on real loopback sockets: the client sends,
    /// closes its end, then `TEST_END`. The phase ends at `TEST_END` with
    /// everything counted (the end that came with the last bytes read on
    /// the worker's tail), and the server closes its side of the stream.
    #[test]
    fn at_test_end_a_receiver_has_all_its_client_sent_and_closes_once_its_client_has() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client_ctrl = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server_ctrl, _) = l.accept().unwrap();
        let mut client_data = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server_data, _) = l.accept().unwrap();
        server_data.set_nonblocking(true).unwrap();
        let stream = DataStream {
            id: 1,
            sends: false,
            sock: Conn::Tcp(mio::net::TcpStream::from_std(server_data)),
        };
        let client = std::thread::spawn(move || {
            client_data.write_all(&[7u8; 80_000]).unwrap();
            client_data.shutdown(Shutdown::Write).unwrap();
            client_ctrl.write_all(&[State::TestEnd.to_byte()]).unwrap();
            // The server's end: bounded, so that a server that never
            // closes fails the test rather than hanging it.
            client_data
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let mut b = [0u8; 16];
            let got = client_data.read(&mut b);
            (client_ctrl, got.map_err(|e| e.kind()))
        });
        let terminating = AtomicBool::new(false);
        let p = tcp_plan();
        let phase = run(&server_ctrl, vec![stream], &p, None, &terminating).unwrap();
        let (_ctrl, got) = client.join().unwrap();
        assert_eq!(got, Ok(0), "the server closed its side");
        let out = &phase.out;
        assert_eq!(out.end, Finish::TestEnd);
        assert_eq!(out.records[0].tally.total(&out.counters), 80_000);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert!(out.wall_s < 30.0, "ended by TEST_END, not its limit");
    }
}
