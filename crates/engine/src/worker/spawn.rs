//! How every worker starts, a test's client or server, a profile's on
//! either side, or the iperf3 server's data phase: its event loop is made
//! here (the one place a worker's is), before its thread starts, so that the
//! coordinating thread holds its waker and may register its sockets; then
//! its thread starts, named after its side and number, and pinned where its
//! placement says by starting its [`WindowClock`] on the thread itself,
//! before it does anything else. What a failed pin means (a message to the
//! coordinating thread, an empty report) is the worker's own.

use std::sync::Arc;
use std::thread::JoinHandle;

use mio::{Registry, Waker};

use super::clock::WindowClock;
use super::driver::Driver;
use crate::EngineError;

/// A worker not yet started: its event loop, made, and where its thread
/// is to run.
pub struct WorkerLoop {
    driver: Driver,
    waker: Arc<Waker>,
    name: String,
    id: u32,
    cpus: Option<Vec<usize>>,
}

impl WorkerLoop {
    /// Worker `id`'s event loop (busy-polling its sockets when
    /// `busy_poll`), its thread to be named `name` and pinned to `cpus`
    /// when given.
    pub fn new(
        name: String,
        id: u32,
        cpus: Option<Vec<usize>>,
        busy_poll: bool,
    ) -> Result<WorkerLoop, EngineError> {
        let (driver, waker) =
            Driver::new(busy_poll).map_err(|e| EngineError::Worker(e.to_string()))?;
        Ok(WorkerLoop {
            driver,
            waker,
            name,
            id,
            cpus,
        })
    }

    /// Where sockets are registered with its loop before it starts.
    pub fn registry(&self) -> &Registry {
        self.driver.registry()
    }

    /// What wakes its loop from another thread.
    pub fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Starts its thread, which runs `run` with its loop and its clock,
    /// started (and the thread pinned) on the thread; or with why the pin
    /// failed. An error only when no thread could be made.
    pub fn spawn<T: Send + 'static>(
        self,
        run: impl FnOnce(Driver, Result<WindowClock, String>) -> T + Send + 'static,
    ) -> Result<JoinHandle<T>, EngineError> {
        let WorkerLoop {
            driver,
            id,
            cpus,
            name,
            ..
        } = self;
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(driver, WindowClock::start(id, cpus)))
            .map_err(|e| EngineError::Worker(e.to_string()))
    }

    /// Starts it on the calling thread, for a worker that is its thread's
    /// only work: its loop, and its clock, started (and the thread pinned,
    /// when it has CPUs) here; or why the pin failed.
    pub fn start_here(self) -> (Driver, Result<WindowClock, String>) {
        (self.driver, WindowClock::start(self.id, self.cpus))
    }
}
