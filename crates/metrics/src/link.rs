//! What the network interfaces of a side's namespace carried over the window:
//! their own counters (bytes and packets as the device counts them, headers
//! included) and their root queue's (what the queue sent, dropped, held back),
//! sampled at the window's edges like the CPU. These are the wire's figures,
//! beside the payload the workers counted: how full a shaped link really was,
//! and whether its queue overflowed.
//!
//! The counters are the interface's, not the test's: other traffic through the
//! same interface is in them. In a lab namespace only the test's is.

use crate::sys;
use linkperf_measured::{LinkCounters, QdiscCounters};

/// Interfaces kept in a side's report: the busiest, by bytes sent.
pub const MAX_INTERFACES: usize = 16;

/// One interface's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceSample {
    /// The interface's name.
    pub name: String,
    /// Bytes received, as the device counts them (link-layer headers included).
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets received (a GSO/GRO packet counts once).
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Packets dropped on send.
    pub tx_dropped: u64,
    /// Its root queue's counters, when it has a queue that counts.
    pub qdisc: Option<QdiscSample>,
}

/// A root queue's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QdiscSample {
    /// The queue discipline (`tbf`, `fq_codel`, `noqueue`, ...).
    pub kind: String,
    /// Bytes it sent, as the queue counts them: a GSO packet as the segments
    /// it becomes, each with its headers (what a shaper charges its rate with).
    pub bytes: u64,
    /// Packets it sent (GSO segments counted).
    pub packets: u64,
    /// Packets it dropped.
    pub drops: u64,
    /// Times a packet had to wait because the rate was used up.
    pub overlimits: u64,
    /// Packets put back into the queue.
    pub requeues: u64,
    /// Bytes waiting in it at this moment.
    pub backlog_bytes: u64,
    /// Packets waiting in it at this moment.
    pub backlog_packets: u64,
}

/// Every interface of this thread's namespace now; `None` when they cannot
/// be read (no rtnetlink, a sandbox without it).
pub fn interfaces_now() -> Option<Vec<InterfaceSample>> {
    sys::netlink::interfaces_now().ok()
}

/// What the interfaces carried from `start` to `end`: those present in both
/// whose counters moved, busiest sender first, at most [`MAX_INTERFACES`]. An
/// interface whose counters went backwards (removed and made again) is left
/// out rather than given a wrong difference.
pub fn links_between(start: &[InterfaceSample], end: &[InterfaceSample]) -> Vec<LinkCounters> {
    let mut out: Vec<LinkCounters> = end
        .iter()
        .filter_map(|e| {
            let s = start.iter().find(|s| s.name == e.name)?;
            let d = |a: u64, b: u64| b.checked_sub(a);
            let qdisc = match (&s.qdisc, &e.qdisc) {
                (Some(a), Some(b)) if a.kind == b.kind => Some(QdiscCounters {
                    kind: b.kind.clone(),
                    bytes: d(a.bytes, b.bytes)?,
                    packets: d(a.packets, b.packets)?,
                    drops: d(a.drops, b.drops)?,
                    overlimits: d(a.overlimits, b.overlimits)?,
                    backlog_bytes: b.backlog_bytes,
                    backlog_packets: b.backlog_packets,
                }),
                _ => None,
            };
            let c = LinkCounters {
                interface: e.name.clone(),
                rx_bytes: d(s.rx_bytes, e.rx_bytes)?,
                tx_bytes: d(s.tx_bytes, e.tx_bytes)?,
                rx_packets: d(s.rx_packets, e.rx_packets)?,
                tx_packets: d(s.tx_packets, e.tx_packets)?,
                rx_dropped: d(s.rx_dropped, e.rx_dropped)?,
                tx_dropped: d(s.tx_dropped, e.tx_dropped)?,
                qdisc,
            };
            let moved = c.rx_bytes > 0 || c.tx_bytes > 0 || c.tx_drops() > 0 || c.rx_dropped > 0;
            moved.then_some(c)
        })
        .collect();
    out.sort_by(|a, b| {
        b.wire_tx_bytes()
            .cmp(&a.wire_tx_bytes())
            .then_with(|| a.interface.cmp(&b.interface))
    });
    out.truncate(MAX_INTERFACES);
    out
}

/// The interface that carried this side's sending: the busiest sender that is
/// not the loopback, or the loopback when nothing else moved.
pub fn sending_link(links: &[LinkCounters]) -> Option<&LinkCounters> {
    links
        .iter()
        .filter(|l| l.interface != "lo")
        .max_by_key(|l| l.wire_tx_bytes())
        .or_else(|| links.iter().find(|l| l.interface == "lo"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, tx: u64, q: Option<(u64, u64)>) -> InterfaceSample {
        InterfaceSample {
            name: name.into(),
            rx_bytes: tx / 10,
            tx_bytes: tx,
            rx_packets: tx / 1000,
            tx_packets: tx / 1500,
            qdisc: q.map(|(bytes, drops)| QdiscSample {
                kind: "tbf".into(),
                bytes,
                packets: bytes / 1514,
                drops,
                backlog_bytes: 3000,
                backlog_packets: 2,
                ..QdiscSample::default()
            }),
            ..InterfaceSample::default()
        }
    }

    #[test]
    fn differences_of_what_moved_busiest_first() {
        let start = [
            sample("lo", 100, None),
            sample("eth0", 1_000, Some((1_100, 1))),
            sample("idle", 5, None),
        ];
        let end = [
            sample("lo", 300, None),
            sample("eth0", 101_000, Some((105_100, 4))),
            sample("idle", 5, None),
            sample("new", 50, None),
        ];
        let l = links_between(&start, &end);
        let names: Vec<&str> = l.iter().map(|l| l.interface.as_str()).collect();
        // "idle" did not move; "new" has no start.
        assert_eq!(names, ["eth0", "lo"]);
        assert_eq!(l[0].tx_bytes, 100_000);
        let q = l[0].qdisc.as_ref().unwrap();
        assert_eq!((q.bytes, q.drops, q.backlog_bytes), (104_000, 3, 3000));
        // The queue's count, with every segment's headers, is the wire's.
        assert_eq!(l[0].wire_tx_bytes(), 104_000);
        assert_eq!(l[0].tx_drops(), 3);
        assert_eq!(sending_link(&l).unwrap().interface, "eth0");
        assert_eq!(sending_link(&l[1..]).unwrap().interface, "lo");
    }

    #[test]
    fn counters_that_went_backwards_are_left_out() {
        let l = links_between(&[sample("eth0", 1_000, None)], &[sample("eth0", 10, None)]);
        assert!(l.is_empty());
    }

    #[test]
    fn this_namespace_can_be_read_and_the_loopback_counts_what_crosses_it() {
        use std::io::{Read, Write};
        let Some(before) = interfaces_now() else {
            // No rtnetlink here: nothing to check.
            return;
        };
        assert!(before.iter().any(|i| i.name == "lo"), "{before:?}");
        // 1 MiB through the loopback moves its counters by at least that.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(&vec![7u8; 1 << 20]).unwrap();
        });
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        let after = interfaces_now().unwrap();
        let l = links_between(&before, &after);
        let lo = l.iter().find(|l| l.interface == "lo").unwrap();
        assert!(lo.tx_bytes >= 1 << 20, "{lo:?}");
        assert!(lo.rx_bytes >= 1 << 20, "{lo:?}");
    }
}
