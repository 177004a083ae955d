//! A precise wake-up for the event wait: a timerfd (Linux) in the event
//! set, armed for the next deadline to the nanosecond. The event wait's own
//! timeout counts whole milliseconds (epoll's), and the kernel adds its
//! timer slack (50 µs by default) to it; an open-loop generator must send
//! within tens of microseconds of when each arrival is due, so its worker
//! arms this timer before it sleeps, and wakes when it fires.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// The token of a worker's precise wake-up (the tokens at the top are the
/// workers' own: the waker, data sources; this one is clear of them).
pub const WAKE: Token = Token(usize::MAX - 16);

/// A timer in the event set.
#[derive(Debug)]
pub struct Wake {
    fd: OwnedFd,
}

impl Wake {
    /// A timer registered with `registry` under [`WAKE`].
    pub fn new(registry: &Registry) -> io::Result<Self> {
        // SAFETY: timerfd_create takes two ints and returns a new descriptor
        // or -1; the descriptor is owned from here on.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), WAKE, Interest::READABLE)?;
        Ok(Wake { fd })
    }

    /// Fires `after` from now (once; arming again replaces it and clears
    /// what it counted, so each firing is a new readiness edge).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        // A zero value would disarm it: a nanosecond is as good as now.
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: libc::c_long::from(after.subsec_nanos() as i32),
            },
        };
        // SAFETY: the descriptor is a live timerfd and `spec` a valid
        // itimerspec; the old value is not asked for.
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::Instant;

    #[test]
    fn an_armed_wake_ends_the_wait_when_it_fires_not_at_the_wait_timeout() {
        let mut poll = Poll::new().unwrap();
        let wake = Wake::new(poll.registry()).unwrap();
        let mut events = Events::with_capacity(4);
        for _ in 0..2 {
            let t0 = Instant::now();
            wake.arm(Duration::from_micros(300)).unwrap();
            // The wait could sleep 10 s: only the wake ends it.
            poll.poll(&mut events, Some(Duration::from_secs(10)))
                .unwrap();
            assert!(events.iter().any(|e| e.token() == WAKE));
            assert!(t0.elapsed() >= Duration::from_micros(300));
        }
    }
}
