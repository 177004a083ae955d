//! iperf3's error numbers (`i_errno`, iperf_api.h), as a server sends them
//! after `SERVER_ERROR`: two 4-byte big-endian integers, iperf3's number then
//! the system's `errno`. The client prints its own text for the number.

/// The iperf3 error numbers linkperf sends or explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum IErrno {
    /// "test duration too long".
    Duration = 5,
    /// "number of parallel streams too large".
    NumStreams = 6,
    /// "block size too large".
    BlockSize = 7,
    /// "socket buffer size too large".
    BufSize = 8,
    /// "TCP MSS too large".
    Mss = 10,
    /// "an option you are trying to set is not implemented yet".
    Unimplemented = 13,
    /// "block size invalid" (UDP).
    UdpBlockSize = 20,
    /// "total required bandwidth is larger than server limit".
    TotalRate = 27,
    /// "unable to receive parameters from client".
    RecvParams = 114,
    /// "unable to receive results from client".
    RecvResults = 117,
    /// "received an unknown control message".
    Message = 110,
    /// "the server is busy running a test".
    AccessDenied = 121,
    /// "unable to set socket buffer size".
    SetBuf = 124,
    /// "protocol does not exist".
    Protocol = 131,
    /// "unable to set TCP_CONGESTION".
    SetCongestion = 134,
    /// "test authorization failed".
    AuthTest = 142,
    /// "unable to accept stream connection".
    StreamAccept = 204,
    /// "unable to write to stream socket".
    StreamWrite = 205,
}

/// The bytes of a refusal: the `SERVER_ERROR` state, iperf3's number, `errno`.
pub fn server_error_bytes(i_errno: IErrno, errno: i32) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = super::State::ServerError.to_byte();
    out[1..5].copy_from_slice(&(i_errno as i32).to_be_bytes());
    out[5..].copy_from_slice(&errno.to_be_bytes());
    out
}

/// iperf3's number and `errno` from the 8 bytes after `SERVER_ERROR`.
pub fn server_error_from_bytes(b: [u8; 8]) -> (i32, i32) {
    (
        i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// What iperf3 means by an error number (its own words, shortened), for the
/// numbers a server sends.
pub fn describe_errno(i_errno: i32) -> &'static str {
    match i_errno {
        5 => "test duration too long",
        6 => "number of parallel streams too large",
        7 => "block size too large",
        8 => "socket buffer size too large",
        10 => "TCP MSS too large",
        13 => "an option you are trying to set is not implemented yet",
        20 => "block size invalid",
        27 => "total required bandwidth is larger than server limit",
        102 => "unable to start listener for connections",
        110 => "received an unknown control message",
        114 => "unable to receive parameters from client",
        117 => "unable to receive results from client",
        121 => "the server is busy running a test",
        124 => "unable to set socket buffer size",
        131 => "protocol does not exist",
        134 => "unable to set TCP_CONGESTION",
        142 => "test authorization failed",
        200..=299 => "a data stream failed on the server",
        _ => "an iperf3 error linkperf does not know",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_bytes() {
        // IESETCONGESTION with ENOENT: iperf3 3.12 prints "unable to set
        // TCP_CONGESTION: Supplied congestion control algorithm not supported".
        assert_eq!(
            server_error_bytes(IErrno::SetCongestion, 2),
            [0xfe, 0, 0, 0, 134, 0, 0, 0, 2]
        );
        assert_eq!(
            server_error_from_bytes([0, 0, 0, 134, 0, 0, 0, 2]),
            (134, 2)
        );
        assert_eq!(server_error_from_bytes([0xff; 8]), (-1, -1));
        assert_eq!(describe_errno(6), "number of parallel streams too large");
    }
}
