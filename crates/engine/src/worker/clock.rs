//! A worker's window clock: where it runs (pinned or not), and its thread's
//! CPU time at the measurement window's edges.

use std::time::Instant;

use linkperf_measured::WorkerPlacement;
use linkperf_metrics::{
    current_cpu, current_thread_allowed_cpus, pin_current_thread, thread_cpu_now, ProcessCpu,
};

use crate::schedule::Schedule;

/// A worker's window bookkeeping: thread CPU at the window's edges, placement.
#[derive(Debug)]
pub struct WindowClock {
    id: u32,
    pinned: Option<Vec<usize>>,
    cpu_start: Option<ProcessCpu>,
    cpu_end: Option<ProcessCpu>,
    last_cpu: Option<usize>,
    /// Set once the window has closed (TCP_INFO is read then).
    pub closed: bool,
}

impl WindowClock {
    /// Pins the calling thread when `cpus` says so.
    pub fn start(id: u32, cpus: Option<Vec<usize>>) -> Result<Self, String> {
        if let Some(c) = &cpus {
            pin_current_thread(c).map_err(|e| format!("worker {id}: {e}"))?;
        }
        Ok(WindowClock {
            id,
            pinned: cpus,
            cpu_start: None,
            cpu_end: None,
            last_cpu: None,
            closed: false,
        })
    }

    /// Whether the window opens at `now` (its CPU not yet sampled): what a
    /// worker reads to subtract from its window's figures (each connection's
    /// retransmits so far) it reads then, before [`WindowClock::tick`].
    pub fn opening(&self, schedule: &Schedule, now: Instant) -> bool {
        self.cpu_start.is_none() && now >= schedule.measure_from
    }

    /// Whether the window has opened (its CPU sampled at the opening).
    pub fn opened(&self) -> bool {
        self.cpu_start.is_some()
    }

    /// Samples thread CPU when `now` crosses the window's edges. Returns true
    /// exactly once, when the window has just closed.
    pub fn tick(&mut self, schedule: &Schedule, now: Instant) -> bool {
        if self.cpu_start.is_none() && now >= schedule.measure_from {
            self.cpu_start = Some(thread_cpu_now());
        }
        if self.cpu_end.is_none() && now >= schedule.measure_until {
            self.cpu_end = Some(thread_cpu_now());
            self.last_cpu = current_cpu();
            self.closed = true;
            return true;
        }
        false
    }

    /// Closes the window now if it has not closed (an abort or early end).
    pub fn close(&mut self) {
        if self.cpu_start.is_some() && self.cpu_end.is_none() {
            self.cpu_end = Some(thread_cpu_now());
            self.last_cpu = current_cpu();
            self.closed = true;
        }
    }

    /// CPU over the window, and where the worker ran.
    pub fn finish(&self, flows: u32) -> (ProcessCpu, WorkerPlacement) {
        let cpu = match (self.cpu_start, self.cpu_end) {
            (Some(a), Some(b)) => b.since(&a),
            _ => ProcessCpu {
                user_s: 0.0,
                system_s: 0.0,
            },
        };
        let placement = WorkerPlacement {
            worker: self.id,
            pinned: self.pinned.clone(),
            allowed_cpus: current_thread_allowed_cpus(),
            last_cpu: self.last_cpu.or_else(current_cpu),
            flows,
        };
        (cpu, placement)
    }
}

/// CPU list for worker `i` from an affinity list.
pub fn cpus_for(i: usize, affinity: Option<&Vec<usize>>) -> Option<Vec<usize>> {
    affinity
        .filter(|a| !a.is_empty())
        .map(|a| vec![a[i % a.len()]])
}
