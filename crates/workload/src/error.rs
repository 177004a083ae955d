use thiserror::Error;

/// Why a workload, size, protocol or test specification was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WorkloadError {
    /// A size such as `30k` could not be read.
    #[error("invalid size '{0}': expected a positive number with an optional k or m suffix (powers of 1024)")]
    Size(String),
    /// A size is outside what the workload allows.
    #[error("size {got} is out of range: {what} must be between {min} and {max} bytes")]
    SizeRange {
        /// Which size.
        what: &'static str,
        /// The value given.
        got: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// A workload name that matches no known form.
    #[error("unknown workload '{0}': expected one of rr1c-1x1, rr1c-200x1000, rr1c-200x30k, str-readx30k, str-writex30k, or rr:REQxRESP, crr:REQxRESP, stream-up:SIZE, stream-down:SIZE, stream-bidir:SIZE, mix:REQxRESP*W,...")]
    UnknownWorkload(String),
    /// A protocol name other than tcp, udp or unix.
    #[error("unknown protocol '{0}': expected tcp, udp or unix")]
    UnknownProtocol(String),
    /// A duration such as `30s` or `10` could not be read.
    #[error("{0} (examples: 30s, 500ms, 2m; a bare number is seconds: 10 is 10s)")]
    Duration(String),
    /// A rate such as `100m` could not be read.
    #[error("{0}")]
    Rate(String),
    /// An offered load (rate, arrival, outstanding) could not be read or
    /// cannot run.
    #[error("{0}")]
    Offered(String),
    /// A CPU list such as `0-3,6` could not be read.
    #[error("invalid CPU list '{0}': expected numbers and ranges such as 0,2-3")]
    CpuList(String),
    /// A placement other than `same`, `split` or `free`.
    #[error("invalid placement '{0}': expected same, split or free")]
    Placement(String),
    /// A pace set on a test that is not a UDP stream.
    #[error(
        "a rate paces UDP streams (stream-up, stream-down, stream-bidir over UDP); \
         {workload} over {protocol} is not one"
    )]
    RateNotUdpStream {
        /// The test's workload, by name.
        workload: String,
        /// Its transport.
        protocol: crate::Protocol,
    },
    /// A TCP socket option (congestion control, MSS) on another transport.
    #[error("congestion control and MSS are TCP options; protocol is {0}")]
    TcpOptions(crate::Protocol),
    /// The combination of settings cannot run.
    #[error("{0}")]
    Invalid(String),
}
