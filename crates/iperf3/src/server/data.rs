//! The data path of one test on the server: the engine's one worker
//! (`worker::generic`) over the test's streams, each a flow ([`Stream`]),
//! and its control connection, as iperf3 runs one loop per test. It counts what it
//! receives, sends what it must (whole blocks, paced when the client asked
//! for a rate, up to `-n`/`-k`), and watches the control connection for the
//! client's `TEST_END`. Then it makes sure the counts are whole: it reads
//! what is still arriving and waits until what it sent has been delivered
//! (tail.rs).
//!
//! The test counts in the engine's [`Counters`], its omitted seconds the
//! warm-up and its limit the window's end, each stream in a flow slot with
//! iperf3's extension beside it ([`Iperf3Tally`]); the thread's CPU is taken
//! by the engine workers' window clock ([`WindowClock`]), over the whole
//! phase as iperf3 reports it (omitted seconds included).

mod tail;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use linkperf_engine::driver::Driver;
use linkperf_engine::flow::step::{Carried, Deadline, Flow, Step, Told};
use linkperf_engine::flow::Pacer;
use linkperf_engine::io::Conn;
use linkperf_engine::worker::generic::{Core, Kind, Parts, Worker, KIND_TOKENS};
use linkperf_engine::worker::WindowClock;
use linkperf_engine::{Counters, Schedule};
use linkperf_metrics::{read_tcp_info, socket_congestion_control, ProcessCpu};
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};

use crate::server::accounting::{Budget, EndOfSending, Iperf3Tally, Sample, Stamp};
use crate::server::plan::TestPlan;
use crate::sys;
use crate::codec::{State, UdpHeader};

pub(crate) use tail::DataPhase;
use tail::{drain, terminate, wait_delivered, Tail};

/// The control connection's token: one of the kind's own (past every flow's).
const CTRL: Token = Token(KIND_TOKENS);
/// Payload buffer, at least (UDP datagrams up to 64 KiB are read whole).
const MIN_BUFFER: usize = 128 * 1024;

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

/// One stream of the test as the server's worker carries it: a flow
/// (sans-IO: its socket is the worker's), sending whole blocks paced as
/// the client asked, or counting what arrives.
pub(super) struct Stream {
    id: u32,
    sends: bool,
    tally: Iperf3Tally,
    /// Bytes of the current block already written (TCP senders).
    off: usize,
    pacer: Option<Pacer>,
    open: bool,
    /// The largest window the client advertised (its receive buffer, empty).
    peer_max_window: u32,
    /// Holding its next block until the client has read more (near its end).
    holding: bool,
    /// When to stop for that.
    end: EndOfSending,
    /// Last time the client's reading was measured.
    sampled: Option<Instant>,
    /// When a sender must look again whatever its socket does: its
    /// pacer's next block, or the next look of a holding sender.
    wake: Option<Instant>,
}

impl Flow for Stream {
    type Counts = Counters;

    fn step(&mut self, _now: Instant, _counts: &mut Counters) -> Step {
        if self.open {
            Step::Carry(0)
        } else {
            Step::Done
        }
    }

    fn told(&mut self, _what: Told, _now: Instant, _counts: &mut Counters) {
        // What a carry came to is in the stream already (it closed, or
        // waits for its socket or its wake-up).
    }

    fn deadline(&self) -> Option<Deadline> {
        self.wake.filter(|_| self.open).map(Deadline::at)
    }
}

/// A stream with its socket, after the data phase's loop (its tail).
pub(super) struct Live {
    pub(super) st: Stream,
    pub(super) sock: Conn,
}

/// Until the client's end is near (see `EndOfSending::near`), how often a
/// sender samples the client's window and reading; then it checks each block.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// How often a holding sender looks again.
const HOLD_CHECK: Duration = Duration::from_millis(1);

/// Gives each stream to the worker (its socket registered under its
/// key), each sender its pacer, and each a flow slot in the counters.
fn add_streams(
    core: &mut Core<Iperf3Kind<'_>>,
    streams: Vec<DataStream>,
    plan: &TestPlan,
    start: Instant,
) -> io::Result<()> {
    for s in streams {
        let pacer = if s.sends {
            // As iperf3 paces: the first block at once, and however far
            // behind, it catches up.
            plan.rate.map(|r| Pacer::new(r, start, None))
        } else {
            None
        };
        let udp = matches!(s.sock, Conn::Udp(_));
        let tally = Iperf3Tally::new(&mut core.counts, s.id, s.sends, udp);
        let key = core.add(Stream {
            id: s.id,
            sends: s.sends,
            tally,
            off: 0,
            pacer,
            open: true,
            peer_max_window: 0,
            holding: false,
            end: EndOfSending::default(),
            sampled: None,
            wake: None,
        });
        core.attach(key, 0, s.sock)?;
    }
    Ok(())
}

/// Each stream's record; the receivers still open after a test's end, with
/// the index of their record, for the top-up.
fn records(live: Vec<Live>, end: Finish) -> (Vec<StreamRecord>, Vec<(usize, Live)>) {
    let mut records = Vec::with_capacity(live.len());
    let mut receivers = Vec::new();
    for l in live {
        records.push(StreamRecord {
            id: l.st.id,
            sends: l.st.sends,
            retransmits: match (&l.sock, l.st.sends) {
                (Conn::Tcp(t), true) => read_tcp_info(t.as_raw_fd()).map(|i| i.total_retrans),
                _ => None,
            },
            tally: l.st.tally.clone(),
        });
        // Still registered.
        if end == Finish::TestEnd && !l.st.sends && l.st.open {
            receivers.push((records.len() - 1, l));
        }
    }
    (records, receivers)
}

/// Runs the test's data phase on `ctrl` (put in non-blocking mode for the
/// duration) and `streams`. `client_end` is when the client will stop
/// counting (its `-t` and `-O` from when `TEST_START` went out).
pub(crate) fn run(
    ctrl: &TcpStream,
    streams: Vec<DataStream>,
    plan: &TestPlan,
    client_end: Option<Instant>,
    terminating: &std::sync::atomic::AtomicBool,
) -> io::Result<DataPhase> {
    let start = Instant::now();
    // The CPU is the whole phase's: a window open from the start (and
    // closed after the tail).
    let clock = WindowClock::start(0, None).map_err(io::Error::other)?;
    // The omitted seconds are the warm-up; the limit ends the window.
    let schedule = Schedule::new(
        start,
        plan.omit,
        plan.limit.saturating_sub(plan.omit),
        Duration::ZERO,
    );
    let mut counters = Counters::new(false);
    counters.set_schedule(schedule);
    let (driver, _) = Driver::new(false)?;
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
    add_streams(&mut core, streams, plan, start)?;
    let kind = Iperf3Kind {
        ctrl,
        buf: payload(plan.blksize.max(MIN_BUFFER)),
        budget: Budget::new(plan.bytes, plan.blocks),
        omitting: !plan.omit.is_zero(),
        errors: Vec::new(),
        plan,
        end: client_end.map(|e| (e, start)),
        schedule,
        deadline: start + plan.limit,
        terminating,
        finish: None,
    };
    let mut worker = Worker::new(core, kind);
    let mut events = Events::with_capacity(256);
    worker.run(&mut events)?;
    let Worker { core, kind } = worker;
    let Iperf3Kind {
        mut buf,
        omitting,
        mut errors,
        finish,
        ..
    } = kind;
    let mut parts = core.into_parts();
    // Each stream with its socket (still registered), in the order given.
    let mut live: Vec<Live> = std::mem::take(&mut parts.slots)
        .into_iter()
        .filter_map(|(_, mut slot)| {
            let sock = slot.links.pop()?.conn;
            Some(Live {
                st: slot.flow,
                sock,
            })
        })
        .collect();
    let (driver, counts) = (&mut parts.driver, &mut parts.counts);
    // The loop stops only once the phase has an end.
    let end = finish.unwrap_or(Finish::Deadline);
    let ended = Instant::now();
    if end == Finish::Shutdown {
        terminate(
            ctrl,
            driver,
            &mut events,
            &mut live,
            counts,
            &mut buf,
            plan,
            &mut errors,
        );
    }
    if end == Finish::TestEnd {
        drain(
            driver,
            &mut events,
            &mut live,
            counts,
            &mut buf,
            plan,
            !omitting,
            &mut errors,
        );
        wait_delivered(driver, &mut events, &live);
    }
    let congestion = live.iter().find_map(|l| match &l.sock {
        Conn::Tcp(t) => socket_congestion_control(t.as_raw_fd()),
        _ => None,
    });
    let (records, receivers) = records(live, end);
    let _ = driver.registry().deregister(&mut SourceFd(&ctrl_fd));
    ctrl.set_nonblocking(false)?;
    let counted_from = if plan.omit.is_zero() {
        start
    } else {
        schedule.measure_from.min(ended)
    };
    let flows = u32::try_from(records.len()).unwrap_or(u32::MAX);
    let (cpu, _, _) = parts.finish(flows);
    let Parts { driver, counts, .. } = parts;
    Ok(DataPhase {
        out: DataOutcome {
            end,
            counters: counts,
            records,
            seconds: ended.saturating_duration_since(counted_from).as_secs_f64(),
            wall_s: ended.saturating_duration_since(start).as_secs_f64(),
            cpu,
            congestion,
            errors,
        },
        tail: Tail {
            driver,
            events,
            receivers,
            buf,
            counting: !omitting,
        },
    })
}

/// The data phase's streams as the one engine worker carries them, until
/// the phase has an end: what stays the iperf3 server's own.
struct Iperf3Kind<'a> {
    ctrl: &'a TcpStream,
    buf: Vec<u8>,
    budget: Budget,
    /// Inside `-O`'s omitted seconds.
    omitting: bool,
    errors: Vec<String>,
    plan: &'a TestPlan,
    /// When the client stops counting, and the test's start.
    end: Option<(Instant, Instant)>,
    /// The omitted seconds, then the counted ones until the limit.
    schedule: Schedule,
    deadline: Instant,
    terminating: &'a std::sync::atomic::AtomicBool,
    /// How the phase ended, once it has.
    finish: Option<Finish>,
}

impl Kind for Iperf3Kind<'_> {
    type Flow = Stream;
    type Counts = Counters;
    // iperf3's results carry a sender's retransmits only, read at its end.
    const TCP_INFO: bool = false;

    fn begin(&mut self, core: &mut Core<Self>, now: Instant) {
        if self.omitting && now >= self.schedule.measure_from {
            self.omitting = false;
            for (_, s) in core.slots.iter_mut() {
                s.flow.tally.omit_over();
            }
        }
    }

    fn stop(&mut self, _core: &Core<Self>, now: Instant) -> bool {
        if now >= self.deadline {
            self.finish.get_or_insert(Finish::Deadline);
        }
        if self.terminating.load(std::sync::atomic::Ordering::Acquire) {
            self.finish.get_or_insert(Finish::Shutdown);
        }
        self.finish.is_some()
    }

    fn perform(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        _step: Step,
        now: &mut Instant,
    ) -> Option<Told> {
        let counting = !self.omitting;
        let slot = core.slots.get_mut(key)?;
        let sock = &mut slot.links.last_mut()?.conn;
        let st = &mut slot.flow;
        let counters = &mut core.counts;
        if slot.readable {
            slot.readable = false;
            receive(
                st,
                sock,
                counters,
                &mut self.buf,
                self.plan,
                counting,
                *now,
                &mut self.errors,
            );
        }
        if st.sends && st.open && slot.writable {
            let sent = send(
                st,
                sock,
                counters,
                &mut self.buf,
                self.plan,
                &mut self.budget,
                counting,
                *now,
                self.end,
                &mut self.errors,
            );
            if sent == Sent::Blocked {
                slot.writable = false;
            }
        }
        let how = if st.open {
            Carried::Blocked
        } else {
            Carried::Eof
        };
        Some(Told::Carried { conn: 0, how })
    }

    fn event(&mut self, _core: &mut Core<Self>, ev: &mio::event::Event, _now: Instant) {
        if ev.token() == CTRL && self.finish.is_none() {
            self.finish = read_control(self.ctrl);
        }
    }

    fn deadline(&self, _core: &Core<Self>) -> Option<Instant> {
        Some(self.deadline)
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

fn close(l: &mut Stream, why: Option<String>, errors: &mut Vec<String>) {
    if l.open {
        l.open = false;
        if let Some(w) = why {
            if errors.len() < 4 {
                errors.push(format!("stream {}: {w}", l.id));
            }
        }
    }
}

/// Reads what has arrived by `now`; returns the bytes read.
#[allow(clippy::too_many_arguments)]
pub(super) fn receive(
    l: &mut Stream,
    sock: &mut Conn,
    counters: &mut Counters,
    buf: &mut [u8],
    plan: &TestPlan,
    counting: bool,
    now: Instant,
    errors: &mut Vec<String>,
) -> u64 {
    if !l.open {
        return 0;
    }
    let mut got = 0;
    loop {
        let r = sock.read(buf);
        match r {
            Ok(0) if sock.is_tcp() => {
                // The client closed its end.
                close(l, None, errors);
                return got;
            }
            Ok(n) => {
                got += n as u64;
                if l.sends {
                    continue; // nothing is expected here; drop it
                }
                let (t, len) = (&mut l.tally, n as u64);
                match &*sock {
                    Conn::Udp(_) => match UdpHeader::decode(&buf[..n], plan.udp_wide) {
                        Ok(h) => {
                            let (sec, usec) = sys::monotonic_now();
                            let at = Stamp { sec, usec };
                            t.datagram(counters, len, &h, at, now, counting);
                        }
                        Err(_) => t.bytes(counters, len, now, counting),
                    },
                    _ => {
                        t.bytes(counters, len, now, counting);
                        if n < buf.len() {
                            // Drained: the next arrival raises a new edge.
                            return got;
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error from an earlier datagram: the peer may be gone; go on.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return got,
            Err(e) => {
                close(l, Some(e.to_string()), errors);
                return got;
            }
        }
    }
}

/// Whether a sender should stop before the client's end (`end`, and the
/// start of the test). TCP: everything it sends from now would arrive after
/// the client stops counting; it samples the client's window and reading on
/// the way (at most every millisecond, then, once the end is near, before
/// each block). UDP: the client's end has come on
/// the server's clock, which started before the client's (a datagram reaches
/// a client on this host as it is sent, one sent later is never counted).
fn ending(
    l: &mut Stream,
    sock: &Conn,
    counters: &Counters,
    now: Instant,
    end: Option<(Instant, Instant)>,
    blk: usize,
) -> bool {
    let Some((end, start)) = end else {
        return false;
    };
    let t = match sock {
        Conn::Tcp(t) => t,
        _ => return now >= end,
    };
    if !l.end.watching()
        && l.sampled
            .is_some_and(|s| now.saturating_duration_since(s) < SAMPLE_EVERY)
    {
        return false;
    }
    l.sampled = Some(now);
    let fd = t.as_raw_fd();
    let window = sys::peer_window(fd);
    if let Some(w) = window {
        l.peer_max_window = l.peer_max_window.max(w);
    }
    let unread = window.map_or(0, |w| l.peer_max_window.saturating_sub(w));
    let unacked = sys::unacked_bytes(fd).unwrap_or(0);
    let in_flight = unacked + u64::from(unread);
    let total = l.tally.total(counters);
    l.end.observe(now, total.saturating_sub(in_flight));
    let secs = now.saturating_duration_since(start).as_secs_f64();
    let average = if secs > 0.0 { total as f64 / secs } else { 0.0 };
    let sample = Sample {
        now,
        in_flight,
        next: blk as u64,
        average,
    };
    l.end.near(&sample, end) && l.end.stop(&sample, end)
}

/// How a sender's sending stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Its socket is full: until it is writable again.
    Blocked,
    /// The budget, its pacer or its end held it (its wake-up says until
    /// when), or it closed.
    Stopped,
}

/// Shortest wait of a sender held by its pacer: a block that is not quite
/// due is not worth a wake-up of its own.
const PACE_FLOOR: Duration = Duration::from_micros(200);

/// Sends whole blocks while the socket, the budget and the pacer allow;
/// sets when the sender must look again.
#[allow(clippy::too_many_arguments)]
fn send(
    l: &mut Stream,
    sock: &mut Conn,
    counters: &mut Counters,
    buf: &mut [u8],
    plan: &TestPlan,
    budget: &mut Budget,
    counting: bool,
    now: Instant,
    end: Option<(Instant, Instant)>,
    errors: &mut Vec<String>,
) -> Sent {
    let blk = plan.blksize;
    l.wake = None;
    loop {
        let starting = match &*sock {
            Conn::Tcp(_) => l.off == 0,
            _ => true,
        };
        if starting {
            if !budget.may_start() {
                return Sent::Stopped;
            }
            if let Some(p) = l.pacer.as_mut() {
                if !p.may_send(now) {
                    l.wake = Some(p.due().max(now + PACE_FLOOR));
                    return Sent::Stopped;
                }
            }
            let at = Instant::now();
            l.holding = ending(l, sock, counters, at, end, blk);
            if l.holding {
                l.wake = Some(at + HOLD_CHECK);
                return Sent::Stopped;
            }
        }
        let r = match &mut *sock {
            Conn::Udp(u) => {
                let (sec, usec) = sys::monotonic_now();
                let h = UdpHeader {
                    sec,
                    usec,
                    seq: l.tally.packets() + 1,
                };
                if h.encode(plan.udp_wide, &mut buf[..blk]).is_err() {
                    close(l, Some("block smaller than the UDP header".into()), errors);
                    return Sent::Stopped;
                }
                u.send(&buf[..blk])
            }
            stream => stream.write(&buf[l.off..blk]),
        };
        match r {
            Ok(0) => {
                close(l, Some("the socket took no bytes".into()), errors);
                return Sent::Stopped;
            }
            Ok(n) => {
                if starting {
                    budget.start_block(blk as u64);
                }
                if let Some(p) = &mut l.pacer {
                    p.sent_bytes(n as u64);
                }
                let (t, len) = (&mut l.tally, n as u64);
                match &*sock {
                    Conn::Tcp(_) | Conn::Unix(_) => {
                        t.bytes(counters, len, now, counting);
                        l.off += n;
                        if l.off >= blk {
                            l.off = 0;
                            t.block_sent();
                        }
                    }
                    Conn::Udp(_) => t.datagram_sent(counters, len, now, counting),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // UDP: an ICMP error from an earlier datagram; the next may pass.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                l.wake = Some(now + PACE_FLOOR);
                return Sent::Stopped;
            }
            Err(e) => {
                close(l, Some(e.to_string()), errors);
                return Sent::Stopped;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::plan::{plan, Limits};
    use crate::codec::{decode_json, TestParams};

    fn udp_plan(rate_bps: u64) -> TestPlan {
        let json = format!(r#"{{"udp":true,"time":1,"len":1000,"bandwidth":{rate_bps}}}"#);
        let p: TestParams = decode_json(json.as_bytes()).unwrap();
        let limits = Limits {
            max_duration: Duration::from_secs(60),
            max_streams: 8,
        };
        plan(&p, &limits).unwrap()
    }

    fn stream(plan: &TestPlan, counters: &mut Counters, start: Instant) -> Stream {
        Stream {
            id: 1,
            sends: true,
            tally: Iperf3Tally::new(counters, 1, true, true),
            off: 0,
            pacer: plan.rate.map(|r| Pacer::new(r, start, None)),
            open: true,
            peer_max_window: 0,
            holding: false,
            end: EndOfSending::default(),
            sampled: None,
            wake: None,
        }
    }

    #[test]
    fn a_stream_carries_while_open_and_is_done_once_closed() {
        let p = udp_plan(8_000);
        let (mut counters, now) = (Counters::new(false), Instant::now());
        let mut st = stream(&p, &mut counters, now);
        st.wake = Some(now);
        assert_eq!(st.step(now, &mut counters), Step::Carry(0));
        assert_eq!(st.deadline(), Some(Deadline::at(now)));
        close(&mut st, Some("gone".into()), &mut Vec::new());
        assert_eq!(st.step(now, &mut counters), Step::Done);
        assert_eq!(st.deadline(), None, "a closed stream is looked at no more");
    }

    #[test]
    fn a_paced_sender_sends_its_block_then_looks_again_when_the_next_is_due() {
        // 8 kbit/s of 1000-byte datagrams: one a second.
        let p = udp_plan(8_000);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(peer.local_addr().unwrap()).unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut sock = Conn::Udp(mio::net::UdpSocket::from_std(sock));
        let (mut counters, start) = (Counters::new(false), Instant::now());
        counters.set_schedule(Schedule::new(
            start,
            Duration::ZERO,
            Duration::from_secs(10),
            Duration::ZERO,
        ));
        let mut st = stream(&p, &mut counters, start);
        let mut budget = Budget::new(None, None);
        let mut buf = payload(MIN_BUFFER);
        let mut errors = Vec::new();
        let sent = send(
            &mut st,
            &mut sock,
            &mut counters,
            &mut buf,
            &p,
            &mut budget,
            true,
            start,
            None,
            &mut errors,
        );
        assert_eq!(sent, Sent::Stopped);
        assert_eq!(st.tally.packets(), 1, "the first block goes at once");
        let mut got = [0u8; 2048];
        assert_eq!(peer.recv(&mut got).unwrap(), 1000);
        let wake = st.deadline().expect("held by its pacer").at;
        assert!(wake >= start + Duration::from_millis(900), "{wake:?}");
        assert!(errors.is_empty(), "{errors:?}");
    }
}
