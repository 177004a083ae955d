//! sendfile(2) from an anonymous file: a payload written once into a memory
//! file (`memfd_create`), then sent from it to a stream connection by the
//! kernel, without a copy through the process's buffers (a profile's
//! `sendfile` flowop).

use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::io::socket::Conn;

/// An anonymous file holding `payload`, for [`send_file`].
pub fn payload_file(payload: &[u8]) -> io::Result<OwnedFd> {
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

/// sendfile(2) of up to `n` bytes of `file` from its start to `conn`: what
/// went, in one system call.
#[inline]
pub fn send_file(conn: &Conn, file: &OwnedFd, n: usize) -> io::Result<usize> {
    let mut off: libc::off_t = 0;
    // SAFETY: both descriptors are open for the call (borrowed from live
    // owners); `off` is a valid pointer the kernel updates.
    let r = unsafe { libc::sendfile(conn.as_raw_fd(), file.as_raw_fd(), &mut off, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_stream_receives_the_payload_sent_from_its_file() {
        let (a, b) = mio::net::UnixStream::pair().unwrap();
        let (sender, mut receiver) = (Conn::Unix(a), Conn::Unix(b));
        let payload: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let file = payload_file(&payload).unwrap();
        // Part of it, from the start, then all of it: each send starts at
        // the file's start.
        assert_eq!(send_file(&sender, &file, 10).unwrap(), 10);
        assert_eq!(send_file(&sender, &file, payload.len()).unwrap(), 1000);
        drop(sender);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match receiver.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                // All of it was sent before the sender closed.
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(&got[..10], &payload[..10]);
        assert_eq!(&got[10..], &payload[..]);
    }
}
