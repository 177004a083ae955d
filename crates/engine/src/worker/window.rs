//! A test worker's window: what every worker of a test, client or server,
//! does at each turn of its loop whatever flows it carries, and at its end.
//! It publishes its counts for the live readers (its totals; on the client
//! each second too, with its connections' retransmits), samples its
//! thread's CPU at the measurement window's edges, notes each TCP
//! connection's retransmits as the window opens and reads TCP_INFO of each
//! as it closes (of a connection that closes in the window, or as it
//! closes, just before it goes).

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use linkperf_measured::WorkerPlacement;
use linkperf_metrics::{ProcessCpu, TcpInfoAggregator};

use crate::counters::Counters;
use crate::io::Conn;
use crate::live::{LiveStats, Publisher};
use crate::schedule::Schedule;
use crate::worker::clock::WindowClock;
use crate::worker::handover::{retransmits_so_far, sample_tcp_info};

/// What a worker publishes for the live readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// Its whole-life totals (the server's: its daemon's byte limit).
    Totals,
    /// Its totals and each second once it is over (the client's: the
    /// progress bar, the interval lines, the JSON stream).
    Seconds,
}

/// A worker's flows as the window reads their connections.
pub(crate) trait Connections {
    /// Calls `f` with each open TCP connection of the test and where the
    /// retransmits it had when the window opened are kept.
    fn each_tcp(&mut self, f: impl FnMut(&Conn, &mut u32));
    /// Each flow's TCP retransmits so far, flow slot by flow slot (`None`
    /// for a flow without a TCP connection), for the live seconds.
    fn retransmits(&self) -> impl Iterator<Item = Option<u32>>;
}

/// A test worker's window.
#[derive(Debug)]
pub(crate) struct Window {
    clock: WindowClock,
    tcp: TcpInfoAggregator,
    publisher: Publisher,
    live: Option<Arc<LiveStats>>,
    /// The worker's slot in `live`.
    index: usize,
    publish: Publish,
}

impl Window {
    /// The window of worker `index`, publishing into `live` (if anyone
    /// watches) from `now`.
    pub fn new(
        clock: WindowClock,
        live: Option<Arc<LiveStats>>,
        index: usize,
        publish: Publish,
        now: Instant,
    ) -> Self {
        Window {
            clock,
            tcp: TcpInfoAggregator::new(),
            publisher: Publisher::new(now),
            live,
            index,
            publish,
        }
    }

    /// Whether anyone watches the worker live.
    pub fn watched(&self) -> bool {
        self.live.is_some()
    }

    /// The start of a turn at `now`: publishes when due; at the window's
    /// opening notes each connection's retransmits, at its close reads
    /// their TCP_INFO (`schedule`: once the test has started).
    pub fn turn(
        &mut self,
        now: Instant,
        schedule: Option<&Schedule>,
        counters: &mut Counters,
        flows: &mut impl Connections,
    ) {
        if let Some(live) = &self.live {
            if self.publisher.due(now) {
                match self.publish {
                    Publish::Totals => live.publish(self.index, &counters.totals),
                    Publish::Seconds => {
                        let retransmits = || flows.retransmits();
                        self.publisher
                            .publish(live, self.index, counters, now, retransmits);
                    }
                }
            }
        }
        let Some(s) = schedule else {
            return;
        };
        if self.clock.opening(s, now) {
            flows.each_tcp(|c, before| *before = retransmits_so_far(c.as_raw_fd()));
        }
        if self.clock.tick(s, now) {
            self.read_tcp_info(flows);
        }
    }

    /// A connection of the test is about to close: if the window has opened
    /// and its connections have not yet been read, its TCP_INFO is read now,
    /// before its socket goes. A connection that ends before the worker's
    /// window closes (a single flow's client closes right after its last
    /// transaction; a stream's receiver closes when its sender, on the other
    /// side's clock, has stopped) is read as it goes, or its segments would
    /// be in no side's figures. One of a connect-per-transaction flow's
    /// (`per_transaction`) closed inside the window adds its retransmits
    /// only: it is one of the flow's many connections, not a flow.
    pub fn closing(
        &mut self,
        conn: &Conn,
        retrans_before: u32,
        per_transaction: bool,
        schedule: Option<&Schedule>,
    ) {
        // Opened: its retransmits at the opening were noted.
        if self.clock.closed || !conn.is_tcp() || !self.clock.opened() {
            return;
        }
        let window_over = schedule.is_some_and(|s| Instant::now() >= s.measure_until);
        if per_transaction && !window_over {
            let so_far = retransmits_so_far(conn.as_raw_fd());
            self.tcp
                .add_retransmits(so_far.saturating_sub(retrans_before));
        } else {
            sample_tcp_info(conn.as_raw_fd(), retrans_before, &mut self.tcp);
        }
    }

    /// The loop is over: an aborted side's seconds stop now; a window
    /// still open closes (its CPU, its connections' TCP_INFO); the last
    /// figures are published.
    pub fn end(&mut self, counters: &mut Counters, flows: &mut impl Connections, aborted: bool) {
        if aborted {
            // The seconds after this one never ran.
            counters.stop(Instant::now());
        }
        if !self.clock.closed {
            self.clock.close();
            self.read_tcp_info(flows);
        }
        if let Some(live) = &self.live {
            match self.publish {
                Publish::Totals => live.publish(self.index, &counters.totals),
                Publish::Seconds => {
                    let retransmits = || flows.retransmits();
                    self.publisher
                        .publish_last(live, self.index, counters, retransmits);
                }
            }
        }
    }

    /// The window's CPU, where the worker ran (carrying `flows` flows) and
    /// its connections' TCP_INFO; its CPU clock closes now if it is open (a
    /// worker whose window covers a tail after its loop).
    pub fn finish(&mut self, flows: u32) -> (ProcessCpu, WorkerPlacement, TcpInfoAggregator) {
        if !self.clock.closed {
            self.clock.close();
        }
        let (cpu, placement) = self.clock.finish(flows);
        (cpu, placement, std::mem::take(&mut self.tcp))
    }

    fn read_tcp_info(&mut self, flows: &mut impl Connections) {
        let tcp = &mut self.tcp;
        flows.each_tcp(|c, before| sample_tcp_info(c.as_raw_fd(), *before, tcp));
    }
}
