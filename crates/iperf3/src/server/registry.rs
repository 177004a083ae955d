//! What the acceptor and the tests share: which cookies belong to running
//! tests (and which of those are waiting for their streams), how many tests
//! and streams run, and the UDP port.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::codec::Cookie;
use crate::server::ServerConfig;

/// A TCP data stream handed to its test: the connection and the order it was
/// accepted in.
pub(crate) struct DataConn {
    pub stream: mio::net::TcpStream,
    pub seq: u64,
}

enum Slot {
    /// Connecting its streams: send them here.
    Waiting(mpsc::Sender<DataConn>),
    /// Running: more connections with this cookie are refused.
    Running,
}

#[derive(Default)]
struct Tests {
    cookies: HashMap<Cookie, Slot>,
    running: usize,
    streams: usize,
}

/// Where a connection goes once its cookie is read.
pub(crate) enum Route {
    /// A data stream of a test waiting for it.
    Stream(mpsc::Sender<DataConn>),
    /// A new test.
    NewTest(TestTicket),
    /// Refused (busy, or the cookie of a running test).
    Refuse,
}

pub(crate) struct Shared {
    pub cfg: ServerConfig,
    tests: Mutex<Tests>,
    /// Notified each time a test ends.
    ended: Condvar,
    /// The UDP socket on the server's port that receives UDP streams' first datagrams.
    pub udp: UdpSocket,
    /// Held by the one test whose UDP streams are connecting.
    pub udp_setup: Mutex<()>,
    next_test: AtomicU64,
    /// Set when the server shuts down: running tests end with SERVER_TERMINATE.
    pub terminating: AtomicBool,
    /// Tests that ended so.
    pub terminated: AtomicUsize,
    /// A second handle on the control connection of each test still setting
    /// up (parameters, streams), by test number: a shutdown tells those
    /// clients SERVER_TERMINATE too. The data phase does its own.
    setup: Mutex<HashMap<u64, std::net::TcpStream>>,
}

impl Shared {
    pub(crate) fn new(cfg: ServerConfig, udp: UdpSocket) -> Arc<Shared> {
        Arc::new(Shared {
            cfg,
            tests: Mutex::new(Tests::default()),
            ended: Condvar::new(),
            udp,
            udp_setup: Mutex::new(()),
            next_test: AtomicU64::new(1),
            terminating: AtomicBool::new(false),
            terminated: AtomicUsize::new(0),
            setup: Mutex::new(HashMap::new()),
        })
    }

    fn setup(&self) -> MutexGuard<'_, HashMap<u64, std::net::TcpStream>> {
        self.setup.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Test `id` sets up on `ctrl`: until [`SetupGuard::data_phase`], a
    /// shutdown sends its client SERVER_TERMINATE and closes the connection.
    /// None if the server is shutting down already.
    pub(crate) fn setting_up(&self, id: u64, ctrl: &std::net::TcpStream) -> Option<SetupGuard<'_>> {
        let mut setup = self.setup();
        if self.terminating.load(Ordering::Acquire) {
            return None;
        }
        if let Ok(c) = ctrl.try_clone() {
            setup.insert(id, c);
        }
        Some(SetupGuard { shared: self, id })
    }

    /// At a shutdown: every test still setting up gets SERVER_TERMINATE, and
    /// its control connection is shut, so that its session's wait ends.
    pub(crate) fn terminate_setups(&self) {
        for (_, mut c) in self.setup().drain() {
            use std::io::Write;
            let _ = c.write_all(&[crate::codec::State::ServerTerminate.to_byte()]);
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Tests running now.
    pub(crate) fn running(&self) -> usize {
        self.tests().running
    }

    /// Waits until no test runs, at most until `deadline`.
    pub(crate) fn wait_idle(&self, deadline: Instant) {
        let wait = deadline.saturating_duration_since(Instant::now());
        let _ = self
            .ended
            .wait_timeout_while(self.tests(), wait, |t| t.running > 0);
    }

    fn tests(&self) -> MutexGuard<'_, Tests> {
        self.tests.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn udp_setup(&self) -> MutexGuard<'_, ()> {
        self.udp_setup.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides where a connection that sent `cookie` goes.
    pub(crate) fn route(self: &Arc<Self>, cookie: Cookie) -> Route {
        let mut t = self.tests();
        match t.cookies.get(&cookie) {
            Some(Slot::Waiting(tx)) => Route::Stream(tx.clone()),
            Some(Slot::Running) => Route::Refuse,
            None if t.running >= self.cfg.max_tests => Route::Refuse,
            // Shutting down: no new test.
            None if self.terminating.load(Ordering::Acquire) => Route::Refuse,
            None => {
                t.running += 1;
                t.cookies.insert(cookie, Slot::Running);
                Route::NewTest(TestTicket {
                    shared: self.clone(),
                    cookie,
                    id: self.next_test.fetch_add(1, Ordering::Relaxed),
                    streams: 0,
                })
            }
        }
    }
}

/// A running test's place in the registry; dropping it frees the place.
pub(crate) struct TestTicket {
    shared: Arc<Shared>,
    cookie: Cookie,
    /// The test's number in the log.
    pub id: u64,
    streams: usize,
}

impl TestTicket {
    /// Reserves `n` streams of the server's total; false if that is too many.
    pub(crate) fn reserve_streams(&mut self, n: usize) -> bool {
        let mut t = self.shared.tests();
        if t.streams + n > self.shared.cfg.max_total_streams {
            return false;
        }
        t.streams += n;
        self.streams += n;
        true
    }

    /// Streams carrying this cookie go to the returned receiver from now on.
    pub(crate) fn await_streams(&self) -> mpsc::Receiver<DataConn> {
        let (tx, rx) = mpsc::channel();
        self.shared
            .tests()
            .cookies
            .insert(self.cookie, Slot::Waiting(tx));
        rx
    }

    /// The streams are all there: later connections with this cookie are refused.
    pub(crate) fn streams_connected(&self) {
        self.shared
            .tests()
            .cookies
            .insert(self.cookie, Slot::Running);
    }
}

impl Drop for TestTicket {
    fn drop(&mut self) {
        let mut t = self.shared.tests();
        t.cookies.remove(&self.cookie);
        t.running = t.running.saturating_sub(1);
        t.streams = t.streams.saturating_sub(self.streams);
        self.shared.ended.notify_all();
    }
}

/// A test's place among those setting up; dropping it (the test ended in
/// setup) forgets its control connection.
pub(crate) struct SetupGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl SetupGuard<'_> {
    /// The test enters its data phase, where a shutdown is its data loop's to
    /// tell. False if a shutdown already told its client SERVER_TERMINATE.
    pub(crate) fn data_phase(self) -> bool {
        self.shared.setup().remove(&self.id).is_some()
    }

    /// True once a shutdown told this test's client SERVER_TERMINATE.
    pub(crate) fn terminated(&self) -> bool {
        self.shared.terminating.load(Ordering::Acquire)
            && !self.shared.setup().contains_key(&self.id)
    }
}

impl Drop for SetupGuard<'_> {
    fn drop(&mut self) {
        self.shared.setup().remove(&self.id);
    }
}
