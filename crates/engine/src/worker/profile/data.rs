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

impl Worker {
    pub(super) fn write(
        &mut self,
        u: usize,
        c: usize,
        len: u64,
        sendfile: bool,
        now: Instant,
    ) -> bool {
        if sendfile && self.file.is_none() {
            match payload_file(&self.buf) {
                Ok(f) => self.file = Some(f),
                Err(e) => return self.fail(u, &format!("sendfile payload: {e}"), now),
            }
        }
        let id = self.users[u].id;
        let tag = self.token.session_tag();
        let r = match self.links[u][c].last_mut() {
            None => return self.fail(u, "the connection is not open", now),
            Some(Link::Tcp { conn, .. }) => {
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                if sendfile {
                    let file = self.file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
                    send_file(conn.as_raw_fd(), file, n)
                } else {
                    conn.write(&self.buf[..n])
                }
            }
            Some(Link::Udp { conn, seq, .. }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                conn.write(&self.buf[..n]).map(|_| {
                    *seq += 1;
                    n - UDP_HEADER_LEN
                })
            }
            Some(Link::Peer { addr, seq }) => {
                let n = datagram(&mut self.buf, tag, id, c, *seq, len);
                let Some(sock) = self.udp.as_ref() else {
                    return self.fail(u, "no datagram socket", now);
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
        match r {
            Ok(0) if len > 0 => self.fail(u, "the connection wrote nothing", now),
            Ok(k) => {
                self.users[u].wrote(k as u64, Instant::now(), &mut self.stats);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(e) => {
                if matches!(self.links[u][c].last(), Some(Link::Tcp { .. })) {
                    self.drop_link(u, c);
                }
                self.fail(u, &e.to_string(), now)
            }
        }
    }

    pub(super) fn read(&mut self, u: usize, c: usize, len: u64, now: Instant) -> bool {
        let tag = self.token.session_tag();
        match self.links[u][c].last_mut() {
            None => self.fail(u, "the connection is not open", now),
            Some(Link::Tcp { conn, .. }) => {
                let n = usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                match conn.read(&mut self.buf[..n]) {
                    Ok(0) => {
                        self.drop_link(u, c);
                        self.fail(u, "the other side closed the connection", now)
                    }
                    Ok(k) => {
                        self.users[u].got(k as u64, Instant::now(), &mut self.stats);
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
                    Err(e) => {
                        self.drop_link(u, c);
                        self.fail(u, &e.to_string(), now)
                    }
                }
            }
            Some(Link::Udp { conn, .. }) => loop {
                match conn.read(&mut self.buf) {
                    Ok(k) => {
                        // Only this session's datagrams count; one of the
                        // header alone is a late answer to a registration.
                        let ours = k > UDP_HEADER_LEN
                            && UdpHeader::decode(&self.buf[..k]).is_ok_and(|h| h.tag == tag);
                        if ours {
                            let n = (k - UDP_HEADER_LEN) as u64;
                            self.users[u].got_datagram(n, Instant::now(), &mut self.stats);
                            return true;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // An ICMP error for an earlier datagram: the read times
                    // out if the server stays away.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return self.fail(u, &e.to_string(), now),
                }
            },
            Some(Link::Peer { .. }) => {
                let Some((_, n)) = self.dgrams.get_mut(&(u, c)).and_then(|q| q.pop_front()) else {
                    return false;
                };
                self.users[u].got_datagram(n as u64, Instant::now(), &mut self.stats);
                true
            }
        }
    }
}
