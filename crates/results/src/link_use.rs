//! What the link carried each way over a run's window, read from the sending
//! side's own interface and its root queue (headers included, every GSO
//! segment counted), as opposed to the payload the sockets moved.
//!
//! Each side samples its namespace's interfaces at its window's edges
//! ([`SideReport::links`]); the direction client → server is the client's
//! busiest sending interface, server → client the server's. The loopback is
//! left out: its one counter carries both directions, so it says nothing
//! about either.
//!
//! In the results document a run keeps it under `wire` (schema v2's name);
//! in the code "wire" is the control protocol's bytes only (crates/protocol).

use serde::{Deserialize, Serialize};

use linkperf_measured::{LinkCounters, SideReport};
use linkperf_metrics::sending_link;

/// The link's use in each direction of one run; a direction is absent when
/// its sender recorded no interface other than the loopback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkUse {
    /// Client to server, from the client's sending interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_to_server: Option<LinkDirection>,
    /// Server to client, from the server's sending interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_to_client: Option<LinkDirection>,
}

/// What one interface sent over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkDirection {
    /// The interface, as named in the sender's namespace.
    pub interface: String,
    /// Its root queue discipline (`tbf`, `fq_codel`, …), when it has one that counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Bits sent per second, headers included.
    pub bits_per_s: f64,
    /// Packets sent per second.
    pub packets_per_s: f64,
    /// Packets dropped on the way out (by the queue and the device) over the window.
    pub drops: u64,
    /// `drops / (packets sent + drops)`, 0 to 1.
    pub drop_ratio: f64,
    /// Bytes waiting in the queue when the window closed.
    pub backlog_bytes: u64,
}

impl LinkUse {
    /// The wire of a run from what each side recorded; `None` when neither
    /// direction is known.
    pub fn of(client: &SideReport, server: Option<&SideReport>) -> Option<LinkUse> {
        Self::between(
            (&client.links, client.window_s),
            server.map(|s| (&s.links[..], s.window_s)),
        )
    }

    /// The wire from each sender's interfaces and window length, seconds.
    pub fn between(
        client: (&[LinkCounters], f64),
        server: Option<(&[LinkCounters], f64)>,
    ) -> Option<LinkUse> {
        let w = LinkUse {
            client_to_server: direction(client),
            server_to_client: server.and_then(direction),
        };
        (w.client_to_server.is_some() || w.server_to_client.is_some()).then_some(w)
    }

    /// The direction that carried more bits.
    pub fn busier(&self) -> Option<&LinkDirection> {
        match (&self.client_to_server, &self.server_to_client) {
            (Some(a), Some(b)) => Some(if b.bits_per_s > a.bits_per_s { b } else { a }),
            (a, b) => a.as_ref().or(b.as_ref()),
        }
    }

    /// The directions known, client to server first.
    pub fn directions(&self) -> impl Iterator<Item = &LinkDirection> {
        [&self.client_to_server, &self.server_to_client]
            .into_iter()
            .flatten()
    }

    /// Packets dropped on the way out, both directions.
    pub fn drops(&self) -> u64 {
        self.directions().map(|d| d.drops).sum()
    }

    /// The larger direction's share of packets dropped, 0 to 1.
    pub fn worst_drop_ratio(&self) -> f64 {
        self.directions().map(|d| d.drop_ratio).fold(0.0, f64::max)
    }

    /// The most bytes either direction's queue held when the window closed.
    pub fn backlog_bytes(&self) -> u64 {
        self.directions()
            .map(|d| d.backlog_bytes)
            .max()
            .unwrap_or(0)
    }
}

/// What a side's sending interface carried, per second of its window.
fn direction((links, window_s): (&[LinkCounters], f64)) -> Option<LinkDirection> {
    let link = sending_link(links).filter(|l| l.interface != "lo")?;
    if window_s <= 0.0 || !window_s.is_finite() {
        return None;
    }
    let counted = link.qdisc.as_ref().filter(|q| q.bytes > 0);
    let packets = counted.map_or(link.tx_packets, |q| q.packets);
    let drops = link.tx_drops();
    let attempted = packets + drops;
    Some(LinkDirection {
        interface: link.interface.clone(),
        queue: counted.map(|q| q.kind.clone()),
        bits_per_s: link.wire_tx_bytes() as f64 * 8.0 / window_s,
        packets_per_s: packets as f64 / window_s,
        drops,
        drop_ratio: if attempted == 0 {
            0.0
        } else {
            drops as f64 / attempted as f64
        },
        backlog_bytes: link.qdisc.as_ref().map_or(0, |q| q.backlog_bytes),
    })
}

#[cfg(test)]
mod tests {
    use linkperf_measured::QdiscCounters;

    use super::*;

    fn link(name: &str, tx_bytes: u64, q: Option<(u64, u64, u64)>) -> LinkCounters {
        LinkCounters {
            interface: name.into(),
            tx_bytes,
            tx_packets: tx_bytes / 1000,
            qdisc: q.map(|(bytes, packets, drops)| QdiscCounters {
                kind: "tbf".into(),
                bytes,
                packets,
                drops,
                backlog_bytes: 4096,
                ..QdiscCounters::default()
            }),
            ..LinkCounters::default()
        }
    }

    #[test]
    fn each_direction_is_its_senders_interface_headers_and_drops_included() {
        // The client sent 125 MB payload over 1 s; its queue counted 130 MB of
        // segments with headers, sent 86,000 packets and dropped 1,000.
        let client = [
            link("lo", 5_000, None),
            link("lp-c1", 125_000_000, Some((130_000_000, 86_000, 1_000))),
        ];
        let server = [link("lp-s1", 4_000_000, None)];
        let w = LinkUse::between((&client, 1.0), Some((&server, 2.0))).unwrap();
        let up = w.client_to_server.as_ref().unwrap();
        assert_eq!(up.interface, "lp-c1");
        assert_eq!(up.queue.as_deref(), Some("tbf"));
        assert_eq!(up.bits_per_s, 1.04e9);
        assert_eq!(up.packets_per_s, 86_000.0);
        assert_eq!(up.drops, 1_000);
        assert!((up.drop_ratio - 1_000.0 / 87_000.0).abs() < 1e-12);
        assert_eq!(up.backlog_bytes, 4096);
        // No queue that counted: the device's own counters, per its window.
        let down = w.server_to_client.as_ref().unwrap();
        assert_eq!(down.bits_per_s, 16e6);
        assert_eq!(down.queue, None);
        assert_eq!(w.busier().unwrap().interface, "lp-c1");
        assert_eq!(w.drops(), 1_000);
        assert!((w.worst_drop_ratio() - 1_000.0 / 87_000.0).abs() < 1e-12);
        assert_eq!(w.backlog_bytes(), 4096);
    }

    #[test]
    fn the_loopback_says_nothing_about_a_direction() {
        let lo = [link("lo", 1_000_000, None)];
        assert_eq!(LinkUse::between((&lo, 1.0), Some((&lo, 1.0))), None);
        assert_eq!(LinkUse::between((&[], 1.0), None), None);
        // A window of no length gives no rate.
        assert_eq!(
            LinkUse::between((&[link("eth0", 10, None)], 0.0), None),
            None
        );
    }
}
