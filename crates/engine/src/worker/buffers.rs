//! A worker's payload buffers: the one read-only region every worker of the
//! process writes from, and the bounded scratch each reads into, so that
//! memory never follows the message size.

/// Bytes of payload written at most per write: every worker writes from one
/// region of this size, shared by the whole process.
const PAYLOAD_BYTES: usize = 1 << 20;
/// Largest read scratch of a worker: what it reads into, whatever the
/// messages' size (a larger message is read in parts).
const MAX_SCRATCH: usize = 256 * 1024;
const MIN_SCRATCH: usize = 64 * 1024;
/// Largest UDP datagram, header included.
const MAX_DATAGRAM: usize = 65_536;

/// The payload every worker writes from: one read-only region for the whole
/// process, so that a worker's memory does not grow with the messages' size.
pub fn payload() -> &'static [u8] {
    static PAYLOAD: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    PAYLOAD.get_or_init(|| vec![0x5a; PAYLOAD_BYTES].into_boxed_slice())
}

/// Payload buffers of one worker: the shared payload it writes from, a
/// bounded scratch it reads into, and, for UDP, room for one datagram.
#[derive(Debug)]
pub struct Buffers {
    /// Written from (shared by every worker of the process).
    pub write: &'static [u8],
    /// Read into.
    pub read: Vec<u8>,
    /// A datagram, or a run of them, being assembled (header and payload);
    /// empty for TCP.
    pub datagram: Vec<u8>,
}

impl Buffers {
    /// Buffers for messages up to `largest` bytes, with room for a datagram
    /// when `udp`. At most [`BUFFER_BYTES_PER_WORKER`] of the worker's own,
    /// whatever `largest` is.
    pub fn new(largest: usize, udp: bool) -> Self {
        let scratch = if udp {
            // A datagram is read whole.
            largest.clamp(MIN_SCRATCH, MAX_DATAGRAM)
        } else {
            largest.clamp(MIN_SCRATCH, MAX_SCRATCH)
        };
        Buffers {
            write: payload(),
            read: vec![0; scratch],
            // Room for a run of datagrams sent in one call (UDP streams).
            datagram: if udp {
                vec![0x5a; MAX_DATAGRAM]
            } else {
                Vec::new()
            },
        }
    }
}

/// The most memory one worker's buffers hold, bytes (the shared payload
/// aside): what a server charges a worker for its buffers.
pub const BUFFER_BYTES_PER_WORKER: usize = MAX_SCRATCH + MAX_DATAGRAM;
