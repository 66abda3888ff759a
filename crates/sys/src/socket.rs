//! Sockets: `accept4`, receiving and sending without SIGPIPE (blocking as the socket is, or
//! never), `sendfile`, `shutdown`, descriptors passed over Unix sockets, and the length of a
//! listener's accept queue.
//!
//! The calls a fiber makes per request (`recvfrom`, `sendto`, `sendmsg`) go through
//! `syscall(2)` rather than libc's wrappers: those are thread-cancellation points, which in a
//! multi-threaded process cost two atomic updates of the thread's cancel state around every
//! call, and nothing in the workspace uses cancellation.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::{cvt, cvt_long, cvt_size};

/// A send flag: more data follows at once (the body after a head), so both may leave in one
/// segment.
pub const MSG_MORE: libc::c_int = libc::MSG_MORE;

/// The most iovecs one vectored call passes (`IOV_MAX` on Linux).
const IOV_MAX: usize = 1024;

/// `accept4` with `SOCK_NONBLOCK | SOCK_CLOEXEC`: one system call instead of three. The
/// accepted socket and its peer's address.
pub fn accept(fd: RawFd) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut new_fd: RawFd = -1;
    // SAFETY: `try_init` hands us storage and a length of the right size for any socket
    // address; accept4 writes at most `*len` bytes into it.
    let ((), addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            new_fd = cvt(libc::accept4(
                fd,
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ))?;
            Ok(())
        })?
    };
    // SAFETY: accept4 succeeded, so `new_fd` is a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(new_fd) };
    let addr = addr
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "accepted a non-IP socket"))?;
    Ok((owned, addr))
}

/// `recv(2)` into `buf`: for sockets, the direct path (`read(2)` goes through the VFS layer
/// first: `vfs_read`, `sock_read_iter`, about 100 ns more per call in a profile of the server).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recvfrom(fd, buf, len, flags, NULL, NULL): the kernel writes at most
    // `buf.len()` bytes into the slice we borrow mutably and no address (both pointers null).
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// `recv(2)` that never blocks (`MSG_DONTWAIT`, whatever the socket's mode): `WouldBlock`
/// when nothing is there.
pub fn recv_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: as in `recv`: the kernel writes at most `buf.len()` bytes into the slice we
    // borrow mutably, and no address (both pointers null).
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            libc::MSG_DONTWAIT,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// `send(2)` with `MSG_NOSIGNAL`: a peer that went away is `EPIPE`, not a process-wide SIGPIPE.
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, 0)
}

/// `send(2)` with `MSG_NOSIGNAL | extra` (e.g. [`MSG_MORE`]).
pub fn send_flags(fd: RawFd, buf: &[u8], extra: libc::c_int) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | extra;
    // SAFETY: sendto(fd, buf, len, flags, NULL, 0): the kernel reads at most `buf.len()`
    // bytes from the slice we borrow, and no address.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            flags,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    })
}

/// `send(2)` that never blocks (`MSG_DONTWAIT`, whatever the socket's mode), with `extra`
/// added (e.g. [`MSG_MORE`]), and no SIGPIPE.
pub fn send_nowait(fd: RawFd, buf: &[u8], extra: libc::c_int) -> io::Result<usize> {
    send_flags(fd, buf, extra | libc::MSG_DONTWAIT)
}

/// `sendmsg(2)` of `bufs` with `MSG_NOSIGNAL` (a `writev` that cannot raise SIGPIPE).
pub fn send_vectored(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    sendmsg(fd, bufs, 0)
}

/// `sendmsg(2)` of `bufs`, never blocking, as [`send_nowait`].
pub fn sendmsg_nowait(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    sendmsg(fd, bufs, libc::MSG_DONTWAIT)
}

fn sendmsg(fd: RawFd, bufs: &[io::IoSlice<'_>], extra: libc::c_int) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `struct iovec` on Unix; the kernel only reads it.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(IOV_MAX) as _;
    // SAFETY: sendmsg(fd, &msg, flags): `msg` is a live local pointing at `bufs`, borrowed
    // for the call; the kernel only reads the iovecs and the bytes they name.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            fd,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL | extra,
        )
    })
}

/// Bytes a vectored write of `bufs` offers (the iovecs [`send_vectored`] and
/// [`fd::writev`](crate::fd::writev) pass: at most `IOV_MAX`).
pub fn iov_len(bufs: &[io::IoSlice<'_>]) -> usize {
    bufs.iter().take(IOV_MAX).map(|b| b.len()).sum()
}

/// `sendfile(2)`: copies up to `len` bytes of `in_fd` (a file) from `*offset` to `out_fd` (a
/// socket or pipe) inside the kernel, advancing `*offset` by what was sent. Returns the bytes
/// sent: 0 when `*offset` is at or past the end of the file; `WouldBlock` when a non-blocking
/// `out_fd` is full. An offset past `i64::MAX` is `InvalidInput`.
pub fn sendfile(out_fd: RawFd, in_fd: RawFd, offset: &mut u64, len: usize) -> io::Result<usize> {
    let mut off = i64::try_from(*offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // Linux sends at most 0x7ffff000 bytes per call anyway.
    let len = len.min(0x7fff_f000);
    // SAFETY: `off` is a live local the kernel reads and updates; the fds are plain numbers
    // to the kernel (a closed or wrong one fails with EBADF or EINVAL, touching no memory).
    let n = cvt_size(unsafe { libc::sendfile(out_fd, in_fd, &mut off, len) })?;
    *offset = off as u64;
    Ok(n)
}

/// `shutdown(2)`: ends one or both directions of the socket `fd` (a thread blocked reading
/// it wakes up with end of stream, which graceful shutdown uses).
pub fn shutdown(fd: RawFd, how: Shutdown) -> io::Result<()> {
    let how = match how {
        Shutdown::Read => libc::SHUT_RD,
        Shutdown::Write => libc::SHUT_WR,
        Shutdown::Both => libc::SHUT_RDWR,
    };
    // SAFETY: shutdown takes no pointers; an fd that was closed meanwhile yields
    // EBADF/ENOTSOCK.
    cvt(unsafe { libc::shutdown(fd, how) }).map(drop)
}

/// `getsockopt(TCP_INFO)` on `fd`: the struct and how many bytes of it the kernel filled.
fn tcp_info(fd: RawFd) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a live, exclusively borrowed tcp_info and `len` its size; the kernel
    // writes at most `len` bytes and says how many in `len`. `fd` is a plain number to it.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    })?;
    Ok((info, len as usize))
}

/// Connections waiting in the accept queue of the listening socket `fd` (Linux reports it as
/// `tcpi_unacked` of `TCP_INFO` for a socket in the LISTEN state).
pub fn accept_backlog(fd: RawFd) -> io::Result<u32> {
    Ok(tcp_info(fd)?.0.tcpi_unacked)
}

/// How long the TCP socket `fd` has carried no data either way (`tcpi_last_data_sent` and
/// `tcpi_last_data_recv` of `TCP_INFO`, in milliseconds): how long a keep-alive connection
/// has been idle, whoever held it meanwhile.
pub fn idle_for(fd: RawFd) -> io::Result<std::time::Duration> {
    let (info, _) = tcp_info(fd)?;
    let ms = info.tcpi_last_data_sent.min(info.tcpi_last_data_recv);
    Ok(std::time::Duration::from_millis(u64::from(ms)))
}

/// Bytes of the TCP socket `fd`'s output its peer has acknowledged, over the connection's life
/// (`tcpi_bytes_acked` of `TCP_INFO`): what the client's kernel took, whatever the sender's
/// buffers still hold.
pub fn bytes_acked(fd: RawFd) -> io::Result<u64> {
    let (info, len) = tcp_info(fd)?;
    // A kernel older than the field (Linux 4.1) writes less: no count, rather than zero.
    let end = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + std::mem::size_of::<u64>();
    if len < end {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "TCP_INFO has no tcpi_bytes_acked on this kernel",
        ));
    }
    Ok(info.tcpi_bytes_acked)
}

/// The most descriptors [`send_with_fds`] passes and [`recv_with_fds`] takes in one message.
pub const MAX_PASSED_FDS: usize = 16;

/// Control-message room for [`MAX_PASSED_FDS`] descriptors, aligned as `cmsghdr` requires
/// (`CMSG_SPACE(16 * 4)` is 80 bytes on Linux; checked where it is used).
type CmsgSpace = [u64; 16];

/// Sends `data` and the descriptors `fds` (at most [`MAX_PASSED_FDS`], `SCM_RIGHTS`) in one
/// message on the Unix socket `sock`, without SIGPIPE. The receiver gets its own copies; the
/// sender's stay open. Blocking as `sock` is.
pub fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    if fds.len() > MAX_PASSED_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors for one message",
        ));
    }
    let mut space: CmsgSpace = [0; 16];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds) as u32;
        msg.msg_control = space.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE computes a size from a number; no pointers.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as _;
        assert!(msg.msg_controllen as usize <= std::mem::size_of_val(&space));
        // SAFETY: `msg` points at `space`, which holds CMSG_SPACE(bytes) bytes (asserted), so
        // CMSG_FIRSTHDR is non-null and CMSG_DATA has room for `fds.len()` descriptors; the
        // copy is unaligned-safe (a byte copy of the slice).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(c),
                bytes as usize,
            );
        }
    }
    // SAFETY: `msg` and everything it points at (`iov`, `data`, `space`) live across the call.
    cvt_size(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) as isize })
}

/// Receives one message sent by [`send_with_fds`] from the Unix socket `sock` into `buf`:
/// its length and the descriptors it carried (close-on-exec, owned by the caller). A message
/// longer than `buf` is an error (`InvalidData`), its descriptors closed. Non-blocking with
/// `MSG_DONTWAIT`: `WouldBlock` when none is queued.
pub fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space: CmsgSpace = [0; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as in `send_with_fds`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    // SAFETY: `msg` points at live buffers of the lengths it states.
    let n = cvt_size(unsafe {
        libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) as isize
    })?;
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes; CMSG_FIRSTHDR and
    // CMSG_NXTHDR return null or a header inside them, and an SCM_RIGHTS header's data holds
    // (cmsg_len - CMSG_LEN(0)) / 4 descriptors, read unaligned. Each is new in this process
    // and owned by nobody else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "message or its descriptors cut short",
        ));
    }
    Ok((n, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{IoSlice, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn idle_for_grows_while_quiet_and_restarts_with_data_either_way() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        // Data both ways, then quiet.
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        (&s).read_exact(&mut got).unwrap();
        (&s).write_all(b"pong").unwrap();
        c.read_exact(&mut got).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let quiet = idle_for(s.as_raw_fd()).unwrap();
        assert!(quiet >= Duration::from_millis(250), "{quiet:?}");
        // Data from the peer alone restarts it.
        c.write_all(b"more").unwrap();
        (&s).read_exact(&mut got).unwrap();
        let after = idle_for(s.as_raw_fd()).unwrap();
        assert!(after < quiet, "{after:?} after {quiet:?}");
        assert!(idle_for(-1).is_err());
    }

    #[test]
    fn bytes_acked_counts_what_the_peer_took_not_what_was_written() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(bytes_acked(s.as_raw_fd()).unwrap(), 0);
        (&s).write_all(&[1u8; 1000]).unwrap();
        let mut got = [0u8; 1000];
        c.read_exact(&mut got).unwrap();
        // The peer's ACK follows its kernel's receipt at once on loopback; allow a moment.
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while bytes_acked(s.as_raw_fd()).unwrap() < 1000 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(bytes_acked(s.as_raw_fd()).unwrap(), 1000);
        // A peer that reads nothing and keeps a small window: far less than written is taken.
        c.set_nonblocking(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let chunk = vec![1u8; 1 << 16];
        let mut sent = 1000u64;
        loop {
            match (&s).write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        let acked = bytes_acked(s.as_raw_fd()).unwrap();
        assert!(acked < sent, "{acked} of {sent}");
        assert!(bytes_acked(-1).is_err());
    }

    #[test]
    fn descriptors_pass_with_a_message_and_stay_open_in_the_sender() {
        use std::os::unix::net::UnixDatagram;
        let (a, b) = UnixDatagram::pair().unwrap();
        let (r, w) = crate::fd::pipe().unwrap();
        let (r2, _w2) = crate::fd::pipe().unwrap();
        let n = send_with_fds(a.as_raw_fd(), b"hello", &[w.as_raw_fd(), r2.as_raw_fd()]).unwrap();
        assert_eq!(n, 5);
        let mut buf = [0u8; 16];
        let (n, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 2);
        // The received write end is the same pipe: what goes in comes out of `r`.
        crate::fd::write(fds[0].as_raw_fd(), b"x").unwrap();
        let mut one = [0u8; 1];
        crate::fd::read(r.as_raw_fd(), &mut one).unwrap();
        assert_eq!(&one, b"x");
        // The sender's copy is still open, and the received one is another number.
        assert!(crate::fd::fd_is_open(w.as_raw_fd()));
        assert_ne!(fds[0].as_raw_fd(), w.as_raw_fd());
        // Nothing more queued: WouldBlock, not a wait.
        let e = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // A message without descriptors, and one too long for the buffer.
        send_with_fds(a.as_raw_fd(), b"plain", &[]).unwrap();
        let (n, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"plain"[..], 0));
        send_with_fds(a.as_raw_fd(), &[7u8; 32], &[w.as_raw_fd()]).unwrap();
        let e = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let too_many = vec![w.as_raw_fd(); MAX_PASSED_FDS + 1];
        let e = send_with_fds(a.as_raw_fd(), b"x", &too_many).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // The most allowed fits the control room.
        let most = vec![w.as_raw_fd(); MAX_PASSED_FDS];
        send_with_fds(a.as_raw_fd(), b"m", &most).unwrap();
        let (_, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(fds.len(), MAX_PASSED_FDS);
    }

    #[test]
    fn accept_takes_a_connection_non_blocking_with_its_address() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let e = accept(l.as_raw_fd()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        crate::poll::poll_readable(l.as_raw_fd(), Duration::from_secs(5)).unwrap();
        let (fd, peer) = accept(l.as_raw_fd()).unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        // Non-blocking: an empty read is WouldBlock, not a wait.
        let mut buf = [0u8; 4];
        let e = recv(fd.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(accept(-1).is_err());
    }

    #[test]
    fn recv_nowait_never_waits_on_a_blocking_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut buf = [0u8; 8];
        let e = recv_nowait(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(send(a.as_raw_fd(), b"hi").unwrap(), 2);
        assert_eq!(recv_nowait(b.as_raw_fd(), &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"hi");
        drop(a);
        assert_eq!(recv_nowait(b.as_raw_fd(), &mut buf).unwrap(), 0, "the end");
    }

    #[test]
    fn recv_send_and_vectored_sends_over_a_socket_pair() {
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(send(a.as_raw_fd(), b"one ").unwrap(), 4);
        assert_eq!(send_flags(a.as_raw_fd(), b"two ", MSG_MORE).unwrap(), 4);
        assert_eq!(send_nowait(a.as_raw_fd(), b"three ", 0).unwrap(), 6);
        let bufs = [IoSlice::new(b"fo"), IoSlice::new(b""), IoSlice::new(b"ur ")];
        assert_eq!(iov_len(&bufs), 5);
        assert_eq!(send_vectored(a.as_raw_fd(), &bufs).unwrap(), 5);
        assert_eq!(sendmsg_nowait(a.as_raw_fd(), &bufs[..1]).unwrap(), 2);
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        while got.len() < 21 {
            let n = recv(b.as_raw_fd(), &mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"one two three four fo");
        // A peer that went away: EPIPE, not SIGPIPE (which would end the test process).
        drop(b);
        let e = send(a.as_raw_fd(), b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        let e = sendmsg_nowait(a.as_raw_fd(), &bufs).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn the_nowait_sends_never_block_on_a_full_socket() {
        let (a, _b) = UnixStream::pair().unwrap();
        let chunk = [0u8; 65536];
        let mut full = false;
        for _ in 0..1000 {
            match send_nowait(a.as_raw_fd(), &chunk, 0) {
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    full = true;
                    break;
                }
            }
        }
        assert!(full, "a blocking socket filled up without blocking");
        let e = sendmsg_nowait(a.as_raw_fd(), &[IoSlice::new(&chunk)]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // sendfile: not supported by miri
    fn sendfile_sends_a_range_and_advances_the_offset() {
        let path = std::env::temp_dir().join(format!("weft-sys-sendfile-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut off = 3;
        assert_eq!(
            sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut off, 4).unwrap(),
            4
        );
        assert_eq!(off, 7);
        // Past the end: nothing sent, the offset stays.
        let mut end = 10;
        assert_eq!(
            sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut end, 4).unwrap(),
            0
        );
        assert_eq!(end, 10);
        let mut huge = u64::MAX;
        let e = sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut huge, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = sendfile(-1, f.as_raw_fd(), &mut 0, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        (&b).write_all(b"!").unwrap();
        shutdown(b.as_raw_fd(), Shutdown::Write).unwrap();
        let mut got = Vec::new();
        a.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"3456!");
        a.write_all(b"x").unwrap();
    }

    #[test]
    fn shutdown_wakes_a_blocked_reader_with_end_of_stream() {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = b.as_raw_fd();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 1];
            (&b).read(&mut buf).unwrap()
        });
        std::thread::sleep(Duration::from_millis(20));
        shutdown(fd, Shutdown::Read).unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        shutdown(a.as_raw_fd(), Shutdown::Both).unwrap();
        assert!(shutdown(-1, Shutdown::Both).is_err());
    }

    #[test]
    fn accept_backlog_counts_unaccepted_connections() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(accept_backlog(l.as_raw_fd()).unwrap(), 0);
        let _c1 = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _c2 = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // The handshake completes in the kernel; poll until both are queued.
        let mut n = 0;
        for _ in 0..100 {
            n = accept_backlog(l.as_raw_fd()).unwrap();
            if n == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(n, 2);
        let _ = l.accept().unwrap();
        assert_eq!(accept_backlog(l.as_raw_fd()).unwrap(), 1);
        assert!(accept_backlog(-1).is_err());
    }
}
