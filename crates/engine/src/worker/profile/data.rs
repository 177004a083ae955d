//! Data flowops: a write (or sendfile) and a read on a user's connection,
//! a datagram each over UDP.

use super::*;

/// Largest single read or write.
pub(super) const MAX_CHUNK: usize = 256 * 1024;

impl ProfileKind {
    /// Writes (or sends from the payload file) up to `len` bytes of user
    /// `u`'s current write on connection `c`.
    pub(super) fn write(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        len: u64,
        sendfile: bool,
        now: &mut Instant,
    ) -> Told {
        let failed = |why: String| Told::Carried {
            conn: c,
            how: Carried::Failed(io::Error::other(why)),
        };
        if sendfile && self.file.is_none() {
            match payload_file(&self.buf) {
                Ok(f) => self.file = Some(f),
                Err(e) => return failed(format!("sendfile payload: {e}")),
            }
        }
        let generic::Core { slots, counts, .. } = &mut *core;
        let slot = &mut slots[u];
        let id = slot.flow.user.id;
        let tag = self.token.session_tag();
        let r = match self.sockets[u][c].last_mut() {
            None => return failed("the connection is not open".into()),
            Some(SocketState::Tcp { .. }) => {
                let Some(l) = slot.link(c) else {
                    return failed("the connection is not open".into());
                };
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                if sendfile {
                    let Some(file) = &self.file else {
                        return failed("no sendfile payload".into());
                    };
                    send_file(&l.conn, file, n)
                } else {
                    write_some(&mut l.conn, &self.buf[..n])
                }
            }
            Some(SocketState::Udp { seq, .. }) => {
                let Some(l) = slot.link(c) else {
                    return failed("the connection is not open".into());
                };
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                write_some(&mut l.conn, &self.buf[..n]).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                })
            }
            Some(SocketState::Peer { addr, seq }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                let Some(sock) = self.udp.as_ref() else {
                    return failed("no datagram socket".into());
                };
                let r = send_one(sock, &self.buf[..n], Some(*addr)).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                });
                if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                    self.udp_blocked.push(u);
                }
                r
            }
        };
        let how = match r {
            Ok(0) if len > 0 => return failed("the connection wrote nothing".into()),
            Ok(k) => {
                *now = Instant::now();
                slot.flow.user.wrote(k as u64, *now, counts);
                Carried::Finished
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Carried::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Carried::Finished,
            Err(e) => {
                if matches!(self.sockets[u][c].last(), Some(SocketState::Tcp { .. })) {
                    self.drop_link(core, u, c);
                }
                Carried::Failed(e)
            }
        };
        Told::Carried { conn: c, how }
    }

    /// Reads up to `len` bytes of user `u`'s current read (or drain) on
    /// connection `c`, or one datagram.
    pub(super) fn read(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        len: u64,
        now: &mut Instant,
    ) -> Told {
        let carried = |how| Told::Carried { conn: c, how };
        let tag = self.token.session_tag();
        let generic::Core { slots, counts, .. } = &mut *core;
        let slot = &mut slots[u];
        let how = match self.sockets[u][c].last_mut() {
            None => Carried::Failed(io::Error::other("the connection is not open")),
            Some(SocketState::Tcp { .. }) => {
                let Some(l) = slot.link(c) else {
                    return carried(Carried::Failed(io::Error::other(
                        "the connection is not open",
                    )));
                };
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                match read_some(&mut l.conn, &mut self.buf[..n]) {
                    Ok(0) => {
                        self.drop_link(core, u, c);
                        Carried::Eof
                    }
                    Ok(k) => {
                        *now = Instant::now();
                        slot.flow.user.got(k as u64, *now, counts);
                        Carried::Finished
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Carried::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => Carried::Finished,
                    Err(e) => {
                        self.drop_link(core, u, c);
                        Carried::Failed(e)
                    }
                }
            }
            Some(SocketState::Udp { .. }) => {
                let Some(l) = slot.link(c) else {
                    return carried(Carried::Failed(io::Error::other(
                        "the connection is not open",
                    )));
                };
                loop {
                    match read_some(&mut l.conn, &mut self.buf) {
                        Ok(k) => {
                            // Only this session's datagrams count; one of the
                            // header alone is a late answer to a registration.
                            let ours = k > UDP_HEADER_LEN
                                && UdpHeader::decode(&self.buf[..k]).is_ok_and(|h| h.tag == tag);
                            if ours {
                                let n = (k - UDP_HEADER_LEN) as u64;
                                *now = Instant::now();
                                slot.flow.user.got_datagram(n, *now, counts);
                                break Carried::Finished;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Carried::Blocked,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // An ICMP error for an earlier datagram: the read times
                        // out if the server stays away.
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                        Err(e) => break Carried::Failed(e),
                    }
                }
            }
            Some(SocketState::Peer { .. }) => {
                let Some(n) = slot.flow.take_datagram(c) else {
                    return carried(Carried::Blocked);
                };
                *now = Instant::now();
                slot.flow.user.got_datagram(n as u64, *now, counts);
                Carried::Finished
            }
        };
        carried(how)
    }
}
