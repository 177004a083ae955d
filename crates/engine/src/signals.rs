//! What the coordinating thread tells a side's workers, and how they wake.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::schedule::Schedule;

/// Signals shared by the coordinator and the workers of one side of one test.
#[derive(Debug, Default)]
pub struct Signals {
    schedule: OnceLock<Schedule>,
    finish: AtomicBool,
    abort: AtomicBool,
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
    }

    /// True once finish was asked.
    pub fn finishing(&self) -> bool {
        self.finish.load(Ordering::Acquire)
    }

    /// Asks workers to stop at once; what they measured is kept.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Release);
    }

    /// True once abort was asked.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }
}
