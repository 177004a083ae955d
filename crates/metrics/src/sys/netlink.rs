//! The network namespace's interfaces and their root queues, read over
//! rtnetlink (`RTM_GETLINK` and `RTM_GETQDISC` dumps): the same counters `ip -s
//! link` and `tc -s qdisc` print, without starting either. A dump is answered
//! for the namespace of the calling thread.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcMessage, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::link::{InterfaceSample, QdiscSample};

/// At most this many messages are read from one dump (interfaces or queues):
/// a namespace with more is cut, never read without end.
const MAX_MESSAGES: usize = 4096;

/// A dump that has not finished within this long is given up.
const RECV_TIMEOUT_MS: i64 = 1000;

/// `TC_H_ROOT`: the parent handle of a device's root queue.
const TC_H_ROOT: u32 = 0xFFFF_FFFF;

/// Every interface of the calling thread's namespace, with its counters and
/// its root queue's, now.
pub(crate) fn interfaces_now() -> io::Result<Vec<InterfaceSample>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    set_recv_timeout(&socket)?;
    let mut links = Vec::new();
    dump(
        &socket,
        1,
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        |m| {
            if let RouteNetlinkMessage::NewLink(l) = m {
                links.push(l);
            }
        },
    )?;
    let mut queues: HashMap<u32, QdiscSample> = HashMap::new();
    dump(
        &socket,
        2,
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
        |m| {
            if let RouteNetlinkMessage::NewQueueDiscipline(q) = m {
                if let (Ok(index), Some(sample)) = (u32::try_from(q.header.index), root_qdisc(&q)) {
                    queues.insert(index, sample);
                }
            }
        },
    )?;
    Ok(links
        .into_iter()
        .filter_map(|l| {
            let index = l.header.index;
            let mut name = None;
            let mut stats = None;
            for a in l.attributes {
                match a {
                    LinkAttribute::IfName(n) => name = Some(n),
                    LinkAttribute::Stats64(s) => stats = Some(s),
                    _ => {}
                }
            }
            let (name, s) = (name?, stats?);
            Some(InterfaceSample {
                name,
                rx_bytes: s.rx_bytes,
                tx_bytes: s.tx_bytes,
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                rx_dropped: s.rx_dropped,
                tx_dropped: s.tx_dropped,
                qdisc: queues.remove(&index),
            })
        })
        .collect())
}

/// The counters of `q` if it is a device's root queue.
fn root_qdisc(q: &TcMessage) -> Option<QdiscSample> {
    if u32::from(q.header.parent) != TC_H_ROOT {
        return None;
    }
    let mut sample = QdiscSample::default();
    let mut seen = false;
    for a in &q.attributes {
        match a {
            TcAttribute::Kind(k) => sample.kind = k.clone(),
            TcAttribute::Stats2(stats) => {
                for s in stats {
                    match s {
                        TcStats2::Basic(b) => {
                            sample.bytes = b.bytes;
                            sample.packets = u64::from(b.packets);
                            seen = true;
                        }
                        TcStats2::Queue(q) => {
                            sample.drops = u64::from(q.drops);
                            sample.overlimits = u64::from(q.overlimits);
                            sample.requeues = u64::from(q.requeues);
                            sample.backlog_bytes = u64::from(q.backlog);
                            sample.backlog_packets = u64::from(q.qlen);
                            seen = true;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    seen.then_some(sample)
}

/// Sends `request` as a dump and hands every answer to `each`, until the
/// kernel says done (or [`MAX_MESSAGES`], or an error).
fn dump(
    socket: &Socket,
    sequence: u32,
    request: RouteNetlinkMessage,
    mut each: impl FnMut(RouteNetlinkMessage),
) -> io::Result<()> {
    let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(request));
    packet.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    packet.header.sequence_number = sequence;
    packet.finalize();
    let mut buf = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut buf[..]);
    socket.send(&buf, 0)?;
    let mut seen = 0usize;
    let mut receive = vec![0u8; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut receive[..], 0)?;
        let mut offset = 0;
        while offset < size {
            let message: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(&receive[offset..size])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let length = message.header.length as usize;
            match message.payload {
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(io::Error::other(format!("netlink: {e:?}")));
                }
                NetlinkPayload::InnerMessage(m) => each(m),
                _ => {}
            }
            seen += 1;
            if seen >= MAX_MESSAGES || length == 0 {
                return Ok(());
            }
            offset += length;
        }
    }
}

fn set_recv_timeout(socket: &Socket) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: RECV_TIMEOUT_MS / 1000,
        tv_usec: (RECV_TIMEOUT_MS % 1000) * 1000,
    };
    // SAFETY: a valid descriptor and a timeval of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(tv).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
