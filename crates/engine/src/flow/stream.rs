//! A stream's two halves as state machines: the sender writes messages of
//! a fixed size back to back and stops on a message boundary; the receiver
//! counts the messages that arrived and splits a read's time between them.

use std::time::{Duration, Instant};

use super::want::{clamp, Completed, Want};

/// The sending half of a stream: messages of a fixed size, back to back.
#[derive(Debug, Clone)]
pub struct StreamTx {
    message: u64,
    left: u64,
    started: Option<Instant>,
    running: bool,
    done: bool,
}

impl StreamTx {
    /// A sender of `message`-byte messages, idle until started.
    pub fn new(message: u64) -> Self {
        StreamTx {
            message,
            left: message,
            started: None,
            running: false,
            done: false,
        }
    }

    /// Starts sending at `now`.
    pub fn start(&mut self, now: Instant) {
        if !self.running && !self.done {
            self.running = true;
            self.started = Some(now);
        }
    }

    /// What to do next.
    pub fn want(&self) -> Want {
        if self.done {
            Want::Done
        } else if self.running {
            Want::Write(clamp(self.left))
        } else {
            Want::Idle
        }
    }

    /// `n` bytes were written at `now`. Returns the message completed by this
    /// write, if one was; at a message boundary the sender stops if `stop`.
    pub fn wrote(&mut self, n: usize, now: Instant, stop: bool) -> Option<Completed> {
        if !self.running {
            return None;
        }
        self.left = self.left.saturating_sub(n as u64);
        if self.left > 0 {
            return None;
        }
        let took = self
            .started
            .map(|s| now.saturating_duration_since(s))
            .unwrap_or_default();
        self.left = self.message;
        self.started = Some(now);
        if stop {
            self.running = false;
            self.done = true;
        }
        Some(Completed {
            took,
            service: None,
        })
    }

    /// Stops at once, mid-message or not.
    pub fn finish(&mut self) {
        self.running = false;
        self.done = true;
    }

    /// True once the sender has stopped.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The receiving half of a stream: counts whole messages as they arrive.
#[derive(Debug, Clone)]
pub struct StreamRx {
    message: u64,
    got: u64,
    last: Option<Instant>,
}

impl StreamRx {
    /// A receiver of `message`-byte messages.
    pub fn new(message: u64) -> Self {
        StreamRx {
            message,
            got: 0,
            last: None,
        }
    }

    /// Sets the time from which the first message's time is counted.
    pub fn start(&mut self, now: Instant) {
        if self.last.is_none() {
            self.last = Some(now);
        }
    }

    /// `n` bytes were read at `now`. Returns how many messages completed and the
    /// time each took (the time since the previous completion, shared evenly
    /// when one read completes several).
    pub fn read(&mut self, n: usize, now: Instant) -> (u64, Duration) {
        self.got += n as u64;
        let complete = self.got / self.message;
        if complete == 0 {
            return (0, Duration::ZERO);
        }
        self.got %= self.message;
        let since = self
            .last
            .map(|l| now.saturating_duration_since(l))
            .unwrap_or_default();
        self.last = Some(now);
        let each = since / u32::try_from(complete).unwrap_or(u32::MAX);
        (complete, each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_tx_counts_messages_and_stops_on_a_boundary() {
        let t0 = Instant::now();
        let mut tx = StreamTx::new(100);
        assert_eq!(tx.want(), Want::Idle);
        tx.start(t0);
        assert_eq!(tx.want(), Want::Write(100));
        assert!(
            tx.wrote(60, t0, true).is_none(),
            "mid-message: keeps going even when stopping"
        );
        assert_eq!(tx.want(), Want::Write(40));
        let c = tx.wrote(40, t0 + Duration::from_micros(7), true).unwrap();
        assert_eq!(c.took, Duration::from_micros(7));
        assert_eq!(tx.want(), Want::Done);
    }

    #[test]
    fn stream_rx_splits_time_between_messages_of_one_read() {
        let t0 = Instant::now();
        let mut rx = StreamRx::new(10);
        rx.start(t0);
        assert_eq!(rx.read(5, t0), (0, Duration::ZERO));
        let (n, each) = rx.read(25, t0 + Duration::from_micros(30));
        assert_eq!(n, 3);
        assert_eq!(each, Duration::from_micros(10));
        let (n, _) = rx.read(5, t0 + Duration::from_micros(40));
        assert_eq!(n, 0);
    }
}
