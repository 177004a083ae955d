//! The data path of one test on the server: one event loop over the test's
//! streams and its control connection, as iperf3 runs one. It counts what it
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

use linkperf_engine::driver::{self, Driver, Turn};
use linkperf_engine::flow::Pacer;
use linkperf_engine::io::Conn;
use linkperf_engine::worker::WindowClock;
use linkperf_engine::{Counters, Schedule};
use linkperf_metrics::{read_tcp_info, socket_congestion_control, ProcessCpu};
use mio::unix::SourceFd;
use mio::{Events, Interest, Registry, Token};

use crate::server::accounting::{Budget, EndOfSending, Iperf3Tally, Sample, Stamp};
use crate::server::plan::TestPlan;
use crate::sys;
use crate::wire::{State, UdpHeader};

pub(crate) use tail::DataPhase;
use tail::{drain, terminate, wait_delivered, Tail};

const CTRL: Token = Token(usize::MAX - 1);
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

struct Live {
    id: u32,
    sends: bool,
    sock: Conn,
    tally: Iperf3Tally,
    /// Bytes of the current block already written (TCP senders).
    off: usize,
    pacer: Option<Pacer>,
    open: bool,
    /// Waiting for a writable edge.
    blocked: bool,
    /// The largest window the client advertised (its receive buffer, empty).
    peer_max_window: u32,
    /// Holding its next block until the client has read more (near its end).
    holding: bool,
    /// When to stop for that.
    end: EndOfSending,
    /// Last time the client's reading was measured.
    sampled: Option<Instant>,
}

/// Until the client's end is near (see `EndOfSending::near`), how often a
/// sender samples the client's window and reading; then it checks each block.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// How often a holding sender looks again.
const HOLD_CHECK: Duration = Duration::from_millis(1);

/// Registers each stream with the loop under the token of its index, each
/// sender with its pacer, and gives it a flow slot in `counters`.
fn register_streams(
    registry: &Registry,
    streams: Vec<DataStream>,
    plan: &TestPlan,
    start: Instant,
    counters: &mut Counters,
) -> io::Result<Vec<Live>> {
    let mut live = Vec::with_capacity(streams.len());
    for (i, s) in streams.into_iter().enumerate() {
        let mut sock = s.sock;
        let interest = Interest::READABLE | Interest::WRITABLE;
        registry.register(sock.source(), Token(i), interest)?;
        let pacer = if s.sends {
            // As iperf3 paces: the first block at once, and however far
            // behind, it catches up.
            plan.rate.map(|r| Pacer::new(r, start, None))
        } else {
            None
        };
        let udp = matches!(sock, Conn::Udp(_));
        live.push(Live {
            id: s.id,
            sends: s.sends,
            tally: Iperf3Tally::new(counters, s.id, s.sends, udp),
            sock,
            off: 0,
            pacer,
            open: true,
            blocked: false,
            peer_max_window: 0,
            holding: false,
            end: EndOfSending::default(),
            sampled: None,
        });
    }
    Ok(live)
}

/// Each stream's record; the receivers still open after a test's end, with
/// the index of their record, for the top-up.
fn records(live: Vec<Live>, end: Finish) -> (Vec<StreamRecord>, Vec<(usize, Live)>) {
    let mut records = Vec::with_capacity(live.len());
    let mut receivers = Vec::new();
    for l in live {
        records.push(StreamRecord {
            id: l.id,
            sends: l.sends,
            retransmits: match (&l.sock, l.sends) {
                (Conn::Tcp(t), true) => read_tcp_info(t.as_raw_fd()).map(|i| i.total_retrans),
                _ => None,
            },
            tally: l.tally.clone(),
        });
        // Still registered, under the token of its index.
        if end == Finish::TestEnd && !l.sends && l.open {
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
    // The CPU is the whole phase's: a window open from the start.
    let mut clock = WindowClock::start(0, None).map_err(io::Error::other)?;
    clock.tick(
        &Schedule::new(start, Duration::ZERO, plan.limit, Duration::ZERO),
        start,
    );
    // The omitted seconds are the warm-up; the limit ends the window.
    let schedule = Schedule::new(
        start,
        plan.omit,
        plan.limit.saturating_sub(plan.omit),
        Duration::ZERO,
    );
    let mut counters = Counters::new(false);
    counters.set_schedule(schedule);
    let deadline = start + plan.limit;
    let (driver, _) = Driver::new(false)?;
    ctrl.set_nonblocking(true)?;
    let ctrl_fd = ctrl.as_raw_fd();
    driver
        .registry()
        .register(&mut SourceFd(&ctrl_fd), CTRL, Interest::READABLE)?;
    let live = register_streams(driver.registry(), streams, plan, start, &mut counters)?;
    let buf = payload(plan.blksize.max(MIN_BUFFER));
    let mut streams = Streams {
        driver,
        ctrl,
        live,
        counters,
        buf,
        budget: Budget::new(plan.bytes, plan.blocks),
        omitting: !plan.omit.is_zero(),
        errors: Vec::new(),
        plan,
        client_end,
        schedule,
        deadline,
        terminating,
        end: None,
    };
    let mut events = Events::with_capacity(256);
    driver::run(&mut streams, &mut events)?;
    let Streams {
        mut driver,
        mut live,
        mut counters,
        mut buf,
        omitting,
        mut errors,
        end,
        ..
    } = streams;
    // The loop stops only once the phase has an end.
    let end = end.unwrap_or(Finish::Deadline);
    let ended = Instant::now();
    if end == Finish::Shutdown {
        terminate(
            ctrl,
            &mut driver,
            &mut events,
            &mut live,
            &mut counters,
            &mut buf,
            plan,
            &mut errors,
        );
    }
    if end == Finish::TestEnd {
        drain(
            &mut driver,
            &mut events,
            &mut live,
            &mut counters,
            &mut buf,
            plan,
            !omitting,
            &mut errors,
        );
        wait_delivered(&mut driver, &mut events, &live);
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
    clock.close();
    let (cpu, _) = clock.finish(u32::try_from(records.len()).unwrap_or(u32::MAX));
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
        tail: Tail {
            driver,
            events,
            receivers,
            buf,
            counting: !omitting,
        },
    })
}

/// The data phase's streams as the engine driver's loop turns them, until
/// the phase has an end.
struct Streams<'a> {
    driver: Driver,
    ctrl: &'a TcpStream,
    live: Vec<Live>,
    counters: Counters,
    buf: Vec<u8>,
    budget: Budget,
    /// Inside `-O`'s omitted seconds.
    omitting: bool,
    errors: Vec<String>,
    plan: &'a TestPlan,
    client_end: Option<Instant>,
    /// The omitted seconds, then the counted ones until the limit.
    schedule: Schedule,
    deadline: Instant,
    terminating: &'a std::sync::atomic::AtomicBool,
    /// How the phase ended, once it has.
    end: Option<Finish>,
}

impl driver::Flows for Streams<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    fn turn(&mut self, now: Instant) -> Turn {
        if now >= self.deadline {
            self.end.get_or_insert(Finish::Deadline);
        }
        if self.terminating.load(std::sync::atomic::Ordering::Acquire) {
            self.end.get_or_insert(Finish::Shutdown);
        }
        if self.end.is_some() {
            return Turn::Stop;
        }
        if self.omitting && now >= self.schedule.measure_from {
            self.omitting = false;
            for l in &mut self.live {
                l.tally.omit_over();
            }
        }
        let end = self.client_end.map(|e| (e, self.schedule.start));
        for l in self
            .live
            .iter_mut()
            .filter(|l| l.sends && l.open && !l.blocked)
        {
            send(
                l,
                &mut self.counters,
                &mut self.buf,
                self.plan,
                &mut self.budget,
                !self.omitting,
                now,
                end,
                &mut self.errors,
            );
        }
        // The omitted seconds' end and the limit are the schedule's edges.
        let mut wake = self.deadline;
        if self.budget.may_start() {
            for l in self.live.iter().filter(|l| l.sends && l.open && !l.blocked) {
                if let Some(p) = &l.pacer {
                    wake = wake.min(p.due().max(now + Duration::from_micros(200)));
                }
                if l.holding {
                    wake = wake.min(now + HOLD_CHECK);
                }
            }
        }
        let schedule = Some(&self.schedule);
        Turn::Wait(self.driver.timeout(now, schedule, Some(wake), false))
    }

    fn event(&mut self, ev: &mio::event::Event, now: Instant) {
        if self.end.is_some() {
            return;
        }
        if ev.token() == CTRL {
            self.end = read_control(self.ctrl);
            return;
        }
        let Some(l) = self.live.get_mut(ev.token().0) else {
            return;
        };
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            receive(
                l,
                &mut self.counters,
                &mut self.buf,
                self.plan,
                !self.omitting,
                now,
                &mut self.errors,
            );
        }
        if ev.is_writable() {
            l.blocked = false;
        }
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

fn close(l: &mut Live, why: Option<String>, errors: &mut Vec<String>) {
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
fn receive(
    l: &mut Live,
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
        let r = l.sock.read(buf);
        match r {
            Ok(0) if l.sock.is_tcp() => {
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
                match &l.sock {
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
    l: &mut Live,
    counters: &Counters,
    now: Instant,
    end: Option<(Instant, Instant)>,
    blk: usize,
) -> bool {
    let Some((end, start)) = end else {
        return false;
    };
    let t = match &l.sock {
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

/// Sends whole blocks while the socket, the budget and the pacer allow.
#[allow(clippy::too_many_arguments)]
fn send(
    l: &mut Live,
    counters: &mut Counters,
    buf: &mut [u8],
    plan: &TestPlan,
    budget: &mut Budget,
    counting: bool,
    now: Instant,
    end: Option<(Instant, Instant)>,
    errors: &mut Vec<String>,
) {
    let blk = plan.blksize;
    loop {
        let starting = match &l.sock {
            Conn::Tcp(_) => l.off == 0,
            _ => true,
        };
        if starting {
            if !budget.may_start() || l.pacer.as_mut().is_some_and(|p| !p.may_send(now)) {
                return;
            }
            l.holding = ending(l, counters, Instant::now(), end, blk);
            if l.holding {
                return;
            }
        }
        let r = match &mut l.sock {
            Conn::Udp(u) => {
                let (sec, usec) = sys::monotonic_now();
                let h = UdpHeader {
                    sec,
                    usec,
                    seq: l.tally.packets() + 1,
                };
                if h.encode(plan.udp_wide, &mut buf[..blk]).is_err() {
                    close(l, Some("block smaller than the UDP header".into()), errors);
                    return;
                }
                u.send(&buf[..blk])
            }
            stream => stream.write(&buf[l.off..blk]),
        };
        match r {
            Ok(0) => {
                close(l, Some("the socket took no bytes".into()), errors);
                return;
            }
            Ok(n) => {
                if starting {
                    budget.start_block(blk as u64);
                }
                if let Some(p) = &mut l.pacer {
                    p.sent_bytes(n as u64);
                }
                let (t, len) = (&mut l.tally, n as u64);
                match &l.sock {
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
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                l.blocked = true;
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // UDP: an ICMP error from an earlier datagram; the next may pass.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return,
            Err(e) => {
                close(l, Some(e.to_string()), errors);
                return;
            }
        }
    }
}
