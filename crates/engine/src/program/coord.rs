//! Where a profile's workers and its driver meet: the client's barriers
//! between transactions (every user of every group ends transaction `i`
//! before any starts `i + 1`), the server's end of timed transactions (the
//! client's iteration counts in, the bytes written per connection out), a
//! failure, and the abort.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use mio::Waker;

/// A user at a barrier: iterations it did in the transaction just ended, and
/// the bytes it read on each connection in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Iterations done.
    pub iterations: u64,
    /// Bytes read per connection.
    pub read: Vec<u64>,
}

/// The release of a transaction to the client's users.
#[derive(Debug, Clone)]
pub struct Release {
    /// Which transaction.
    pub txn: usize,
    /// Bytes each user discards first on each connection (by user id).
    pub drain: Arc<Vec<Vec<u64>>>,
    /// Counter of releases, so workers see each once.
    pub generation: u64,
}

#[derive(Debug, Default)]
struct State {
    release: Option<Release>,
    barrier: usize,
    arrivals: Vec<Option<Arrival>>,
    arrived: usize,
    stops: HashMap<usize, Arc<Vec<u64>>>,
    stop_generation: u64,
    ended: HashMap<usize, Vec<Option<Vec<u64>>>>,
    gone: Vec<bool>,
    /// Users whose script is over (done, failed or stopped).
    finished: usize,
    failure: Option<String>,
}

/// Shared by one side's workers and its driver.
#[derive(Debug)]
pub struct Coord {
    state: Mutex<State>,
    cv: Condvar,
    wakers: Mutex<Vec<Arc<Waker>>>,
    aborted: AtomicBool,
    /// Bumped on every release and stop, so workers look under the lock
    /// only when something changed (they ask on every event-loop turn).
    changes: AtomicU64,
    users: usize,
}

impl Coord {
    /// For `users` users.
    pub fn new(users: usize) -> Self {
        Coord {
            state: Mutex::new(State {
                arrivals: vec![None; users],
                gone: vec![false; users],
                finished: 0,
                ..State::default()
            }),
            cv: Condvar::new(),
            wakers: Mutex::new(Vec::new()),
            aborted: AtomicBool::new(false),
            changes: AtomicU64::new(0),
            users,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker's waker, to be woken on every release, stop and abort.
    pub fn add_waker(&self, w: Arc<Waker>) {
        self.wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(w);
    }

    fn wake_all(&self) {
        for w in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = w.wake();
        }
    }

    /// Stops every worker.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        self.cv.notify_all();
        self.wake_all();
    }

    /// Whether the run is aborted.
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// A user failed (without `canfail`): the run is over.
    pub fn fail(&self, message: String) {
        let mut s = self.lock();
        if s.failure.is_none() {
            s.failure = Some(message);
        }
        drop(s);
        self.cv.notify_all();
    }

    /// The first failure.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    /// Client: releases transaction `txn` (the next barrier is `txn + 1`).
    pub fn release(&self, txn: usize, drain: Vec<Vec<u64>>) {
        let mut s = self.lock();
        s.barrier = txn + 1;
        s.arrivals.iter_mut().for_each(|a| *a = None);
        s.arrived = 0;
        let generation = s.release.as_ref().map_or(1, |r| r.generation + 1);
        s.release = Some(Release {
            txn,
            drain: Arc::new(drain),
            generation,
        });
        drop(s);
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.wake_all();
    }

    /// A number that changes with every release and stop.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// The latest release.
    pub fn current_release(&self) -> Option<Release> {
        self.lock().release.clone()
    }

    /// Client: user `id` waits for transaction `next`.
    pub fn arrive(&self, id: u32, next: usize, arrival: Arrival) {
        let mut s = self.lock();
        if next != s.barrier {
            return;
        }
        if let Some(slot) = s.arrivals.get_mut(id as usize) {
            if slot.is_none() {
                *slot = Some(arrival);
                s.arrived += 1;
            }
        }
        let all = s.arrived == self.users;
        drop(s);
        if all {
            self.cv.notify_all();
        }
    }

    /// Client: waits until every user waits for transaction `next`; their
    /// arrivals by user id. `Err` with the reason on failure, abort or `until`.
    pub fn wait_barrier(&self, next: usize, until: Instant) -> Result<Vec<Arrival>, String> {
        let mut s = self.lock();
        loop {
            if let Some(f) = &s.failure {
                return Err(f.clone());
            }
            if self.aborted() {
                return Err("aborted".into());
            }
            if s.barrier == next && s.arrived == self.users {
                return Ok(s
                    .arrivals
                    .iter()
                    .map(|a| a.clone().unwrap_or_default())
                    .collect());
            }
            let now = Instant::now();
            if now >= until {
                return Err(format!(
                    "{} of {} users ended transaction {} in time",
                    s.arrived,
                    self.users,
                    next.saturating_sub(1)
                ));
            }
            s = self
                .cv
                .wait_timeout(s, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Server: the client did `iterations[user]` iterations of timed transaction `txn`.
    pub fn stop(&self, txn: usize, iterations: Vec<u64>) {
        let mut s = self.lock();
        s.stops.insert(txn, Arc::new(iterations));
        s.stop_generation += 1;
        drop(s);
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.wake_all();
    }

    /// Server: the stops known, and their generation.
    pub fn stops(&self) -> (u64, HashMap<usize, Arc<Vec<u64>>>) {
        let s = self.lock();
        (s.stop_generation, s.stops.clone())
    }

    /// Server: user `id` ended timed transaction `txn` having written
    /// `written[c]` bytes on each connection.
    pub fn ended(&self, txn: usize, id: u32, written: Vec<u64>) {
        let users = self.users;
        let mut s = self.lock();
        let e = s.ended.entry(txn).or_insert_with(|| vec![None; users]);
        if let Some(slot) = e.get_mut(id as usize) {
            *slot = Some(written);
        }
        drop(s);
        self.cv.notify_all();
    }

    /// Server: user `id` failed and will report nothing more.
    pub fn gone(&self, id: u32) {
        let mut s = self.lock();
        if let Some(g) = s.gone.get_mut(id as usize) {
            *g = true;
        }
        drop(s);
        self.cv.notify_all();
    }

    /// A user's script is over.
    pub fn user_finished(&self) {
        self.lock().finished += 1;
        self.cv.notify_all();
    }

    /// Waits until every user's script is over, or `until`; true when all are.
    pub fn wait_all_finished(&self, until: Instant) -> bool {
        let mut s = self.lock();
        loop {
            if s.finished >= self.users {
                return true;
            }
            let now = Instant::now();
            if now >= until || self.aborted() {
                return false;
            }
            s = self
                .cv
                .wait_timeout(s, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Server: waits until every user in `expected` ended timed transaction
    /// `txn` (or is gone); the bytes each wrote per connection, by user id
    /// (empty for users not expected or gone).
    pub fn wait_ended(
        &self,
        txn: usize,
        expected: &[bool],
        until: Instant,
    ) -> Result<Vec<Vec<u64>>, String> {
        let users = self.users;
        let mut s = self.lock();
        loop {
            if self.aborted() {
                return Err("aborted".into());
            }
            let ended = s.ended.get(&txn);
            let done = (0..users).all(|u| {
                !expected.get(u).copied().unwrap_or(false)
                    || s.gone[u]
                    || ended.is_some_and(|e| e[u].is_some())
            });
            if done {
                let out = (0..users)
                    .map(|u| {
                        ended
                            .and_then(|e| e[u].clone())
                            .filter(|_| !s.gone[u])
                            .unwrap_or_default()
                    })
                    .collect();
                s.ended.remove(&txn);
                return Ok(out);
            }
            let now = Instant::now();
            if now >= until {
                return Err(format!(
                    "the server's users did not all end transaction {txn} in time"
                ));
            }
            s = self
                .cv
                .wait_timeout(s, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
