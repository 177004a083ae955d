//! What a host's interfaces and their root queues carried over a window (the
//! counters are read in `linkperf-metrics`).

use serde::{Deserialize, Serialize};

/// What one interface carried over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkCounters {
    /// The interface's name.
    pub interface: String,
    /// Bytes received over the window, headers included.
    pub rx_bytes: u64,
    /// Bytes sent over the window, headers included.
    pub tx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets the device dropped on receive.
    pub rx_dropped: u64,
    /// Packets the device dropped on send.
    pub tx_dropped: u64,
    /// Its root queue over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc: Option<QdiscCounters>,
}

/// What a root queue did over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QdiscCounters {
    /// The queue discipline.
    pub kind: String,
    /// Bytes sent, each GSO segment with its headers.
    pub bytes: u64,
    /// Packets sent (segments).
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Times the rate held a packet back.
    pub overlimits: u64,
    /// Bytes waiting at the window's close.
    pub backlog_bytes: u64,
    /// Packets waiting at the window's close.
    pub backlog_packets: u64,
}

impl LinkCounters {
    /// Bytes this interface sent as the wire sees them: its queue's count
    /// (every segment with its headers) where it has a queue that counted,
    /// else the device's.
    pub fn wire_tx_bytes(&self) -> u64 {
        match &self.qdisc {
            Some(q) if q.bytes > 0 => q.bytes,
            _ => self.tx_bytes,
        }
    }

    /// Packets dropped on the way out: by the queue and by the device.
    pub fn tx_drops(&self) -> u64 {
        self.qdisc.as_ref().map_or(0, |q| q.drops) + self.tx_dropped
    }
}
