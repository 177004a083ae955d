//! The iperf3 server's settings.

use std::net::SocketAddr;
use std::time::Duration;

/// How the iperf3 server listens and what it accepts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP and UDP address (iperf3 uses one port for both, control and data).
    pub addr: SocketAddr,
    /// Tests served at once; more clients are told the server is busy.
    pub max_tests: usize,
    /// Streams per test (iperf3's own limit, 128, is the most).
    pub max_streams: u32,
    /// Data streams of all tests together.
    pub max_total_streams: usize,
    /// Longest test: time plus omitted seconds (`-n`/`-k` tests end there).
    pub max_duration: Duration,
    /// Time a client has for each step of its handshake: the cookie, the
    /// parameters, connecting its streams, its results.
    pub handshake_timeout: Duration,
    /// Connections still sending their cookie, at most; more are closed at once.
    pub max_pending: usize,
    /// Largest JSON message read from a client.
    pub max_json: usize,
    /// Print a line per test on stderr.
    pub log: bool,
}

impl ServerConfig {
    /// Defaults for `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        ServerConfig {
            addr,
            max_tests: 16,
            max_streams: crate::server::plan::MAX_STREAMS,
            max_total_streams: 4096,
            max_duration: Duration::from_secs(3600),
            handshake_timeout: Duration::from_secs(10),
            max_pending: 256,
            max_json: 64 * 1024,
            log: true,
        }
    }
}
