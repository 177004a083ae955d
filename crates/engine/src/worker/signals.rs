//! What the coordinating thread tells a side's workers, and how they wake.
//!
//! Most workers wait in their event wait, and a [`mio::Waker`] wakes them. A
//! worker carrying a single request/response flow waits in that socket's
//! blocking read instead, without a timeout (a receive timeout arms and
//! cancels a kernel timer on every wait, which costs a few percent of a
//! 1-user test's rate). Such a worker *parks* its socket here; whoever stops
//! the side (abort, finish, or the client's deadline) shuts the parked
//! sockets down, which ends their blocking calls at once.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::io::socket::shut_down;
use crate::schedule::Schedule;

/// Signals shared by the coordinator and the workers of one side of one test.
#[derive(Debug, Default)]
pub struct Signals {
    schedule: OnceLock<Schedule>,
    finish: AtomicBool,
    abort: AtomicBool,
    expired: AtomicBool,
    /// Duplicates of the sockets workers block in, with a key each.
    parked: Mutex<Vec<(u64, OwnedFd)>>,
    next_key: AtomicU64,
}

impl Signals {
    /// Sets the schedule: traffic starts. Later calls are ignored.
    pub fn start(&self, schedule: Schedule) -> Schedule {
        *self.schedule.get_or_init(|| schedule)
    }

    /// The schedule, once started.
    pub fn schedule(&self) -> Option<Schedule> {
        self.schedule.get().copied()
    }

    /// Asks workers to close everything and report (server: the client is done).
    pub fn finish(&self) {
        self.finish.store(true, Ordering::Release);
        self.interrupt_parked();
    }

    /// True once finish was asked.
    pub fn finishing(&self) -> bool {
        self.finish.load(Ordering::Acquire)
    }

    /// Asks workers to stop at once; what they measured is kept.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Release);
        self.interrupt_parked();
    }

    /// True once abort was asked.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    /// The side's time is up (the client's drain has passed and a worker is
    /// still waiting for an answer that does not come): blocked workers are
    /// released. What they measured is kept.
    pub fn expire(&self) {
        self.expired.store(true, Ordering::Release);
        self.interrupt_parked();
    }

    /// True once the side's time was declared up.
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    /// Registers a socket that a worker is about to block in. `socket` is a
    /// duplicate of the worker's descriptor, so shutting it down is safe even
    /// while the worker closes its own. The socket stays parked until the
    /// returned guard is dropped.
    ///
    /// A stop asked before this call is seen by the worker's own check of
    /// [`Signals::aborted`] (and the others) after it; a stop asked after it
    /// shuts the socket down.
    pub(crate) fn park(self: &Arc<Self>, socket: OwnedFd) -> Parked {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        if self.stopped() {
            shut_down(&socket);
        }
        parked.push((key, socket));
        Parked {
            signals: self.clone(),
            key,
        }
    }

    /// How many sockets are parked now.
    #[cfg(test)]
    pub(crate) fn parked_count(&self) -> usize {
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn stopped(&self) -> bool {
        self.aborted() || self.finishing() || self.expired()
    }

    fn interrupt_parked(&self) {
        let parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        for (_, socket) in parked.iter() {
            // Ends the blocking calls on it: reads return end-of-file, writes fail.
            shut_down(socket);
        }
    }
}

/// A socket parked in [`Signals`]; dropping this un-parks (and closes the duplicate).
#[derive(Debug)]
pub(crate) struct Parked {
    signals: Arc<Signals>,
    key: u64,
}

impl Drop for Parked {
    fn drop(&mut self) {
        let mut parked = self
            .signals
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        parked.retain(|(k, _)| *k != self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    /// Whether thread `tid` of this process sleeps in the kernel (state S).
    fn sleeping(tid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('S'))
            })
            .unwrap_or(false)
    }

    /// A read parked and blocked in the kernel (its thread seen asleep after
    /// it parked the socket) is ended by `stop`: the stop comes after the
    /// park, so it is the parked duplicate's shutdown that ends the read,
    /// not the park seeing a stop already made.
    fn blocked_read(stop: impl Fn(&Signals)) {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let signals = Arc::new(Signals::default());
        let s2 = signals.clone();
        let (parked_tx, parked_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let _parked = s2.park(a.try_clone().unwrap().into());
            // SAFETY: gettid has no preconditions.
            let _ = parked_tx.send(unsafe { libc::gettid() });
            let mut buf = [0u8; 8];
            a.read(&mut buf).unwrap()
        });
        let tid = parked_rx.recv().expect("the reader parked its socket");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !sleeping(tid) {
            assert!(
                std::time::Instant::now() < deadline,
                "the read never blocked"
            );
            std::thread::yield_now();
        }
        stop(&signals);
        assert_eq!(reader.join().unwrap(), 0, "the read ends as end-of-file");
    }

    #[test]
    fn abort_finish_and_expire_end_a_parked_blocking_read() {
        blocked_read(Signals::abort);
        blocked_read(Signals::finish);
        blocked_read(Signals::expire);
    }

    #[test]
    fn a_socket_parked_after_the_stop_is_shut_at_once() {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let signals = Arc::new(Signals::default());
        signals.abort();
        let _parked = signals.park(a.try_clone().unwrap().into());
        let mut buf = [0u8; 8];
        assert_eq!(a.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn unparking_removes_the_duplicate() {
        let (a, _b) = UnixStream::pair().unwrap();
        let signals = Arc::new(Signals::default());
        drop(signals.park(a.try_clone().unwrap().into()));
        assert!(signals.parked.lock().unwrap().is_empty());
        signals.abort();
        // The original was not touched: it still takes writes.
        use std::io::Write;
        assert!((&a).write(b"x").is_ok());
    }
}
