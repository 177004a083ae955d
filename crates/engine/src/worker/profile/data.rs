//! Data flowops: a write (or sendfile) and a read on a user's connection,
//! a datagram each over UDP.

use super::*;

/// Largest single read or write.
pub(super) const MAX_CHUNK: usize = 256 * 1024;

/// An anonymous file holding `payload`, for sendfile(2).
pub(super) fn payload_file(payload: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns
    // a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"linkperf-sendfile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just created and own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned.try_clone()?);
    f.write_all(payload)?;
    Ok(owned)
}

/// sendfile(2) of `n` bytes of `file` from its start to `sock`.
pub(super) fn send_file(sock: RawFd, file: RawFd, n: usize) -> io::Result<usize> {
    let mut off: libc::off_t = 0;
    // SAFETY: both descriptors are open for the call; `off` is a valid
    // pointer the kernel updates.
    let r = unsafe { libc::sendfile(sock, file, &mut off, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

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
                    let file = self.file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
                    send_file(l.conn.as_raw_fd(), file, n)
                } else {
                    l.conn.write(&self.buf[..n])
                }
            }
            Some(SocketState::Udp { seq, .. }) => {
                let Some(l) = slot.link(c) else {
                    return failed("the connection is not open".into());
                };
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                l.conn.write(&self.buf[..n]).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                })
            }
            Some(SocketState::Peer { addr, seq }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                let Some(sock) = self.udp.as_ref() else {
                    return failed("no datagram socket".into());
                };
                let r = sock.send_to(&self.buf[..n], *addr).map(|_| {
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
                match l.conn.read(&mut self.buf[..n]) {
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
                    match l.conn.read(&mut self.buf) {
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
