//! Flows as sans-IO state machines. A flow decides what to do next (write
//! so many bytes, read so many, send datagrams, wait until a time) and is
//! told what happened and when; it never touches a socket or a clock
//! itself. The worker does the I/O and passes the time in.
//!
//! - request/response (rr.rs), open-loop request/response (open_loop.rs:
//!   arrivals on a schedule, timed from when they were due), streams (stream.rs), UDP streams
//!   (udp_stream.rs: the paced sender, the receiver's sequence accounting);
//! - what they all share: what a flow wants (want.rs), the one pacer
//!   (pace.rs) and the one interarrival jitter (jitter.rs), which the
//!   iperf3 server's streams and a profile's paced transactions use too.

mod exchange;
mod jitter;
pub mod open_loop;
mod pace;
mod rr;
pub mod step;
mod stream;
pub mod udp_stream;
mod want;

pub use exchange::Exchange;
pub use jitter::Jitter;
pub use open_loop::{OpenCounts, OpenLoop};
pub use pace::{Pacer, MAX_CATCH_UP};
pub use rr::{RrClient, RrServer};
pub use stream::{StreamRx, StreamTx};
pub use want::{Completed, Want};

#[cfg(test)]
mod layout {
    /// The flows are sans-IO: outside their tests, no file here names a
    /// socket type, the event library or the engine's I/O, or reads the
    /// clock (the worker passes the time in).
    #[test]
    fn flows_touch_no_socket_no_event_wait_and_no_clock() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/flow");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            // An address (`std::net::SocketAddr`) is data a flow may keep;
            // a socket is not.
            for banned in [
                "Instant::now",
                "mio::",
                "crate::io",
                "TcpStream",
                "TcpListener",
                "UdpSocket",
                "UnixStream",
                "UnixListener",
                "SystemTime::now",
            ] {
                assert!(!code.contains(banned), "{} names {banned}", path.display());
            }
            read += 1;
        }
        assert!(read >= 10, "read {read} files");
    }
}
