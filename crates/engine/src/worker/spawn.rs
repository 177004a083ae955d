//! How every worker's thread starts, a test's client or server or a
//! profile's on either side: named after its side and number, and pinned
//! where its placement says by starting its [`WindowClock`] on the thread
//! itself, before it does anything else. What a failed pin means (a message
//! to the coordinating thread, an empty report) is the worker's own.

use std::thread::JoinHandle;

use super::clock::WindowClock;
use crate::EngineError;

/// Starts worker `id`'s thread, named `name`, which runs `run` with its
/// clock, started (and the thread pinned to `cpus`, when given) on the
/// thread; or with why the pin failed. An error only when no thread could
/// be made.
pub(crate) fn spawn_worker<T: Send + 'static>(
    name: String,
    id: u32,
    cpus: Option<Vec<usize>>,
    run: impl FnOnce(Result<WindowClock, String>) -> T + Send + 'static,
) -> Result<JoinHandle<T>, EngineError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || run(WindowClock::start(id, cpus)))
        .map_err(|e| EngineError::Worker(e.to_string()))
}
