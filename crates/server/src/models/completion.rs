//! Write completion for the `process` model (issue 56), as Apache's event MPM does it: a
//! connection process whose client stops taking its response does not wait for that client.
//! What is left to send (byte ranges of files, and the bytes it wrote after the client fell
//! behind, in an in-memory file) goes to the master in one message over a Unix datagram socket
//! with the files' descriptors (`SCM_RIGHTS`); the child exits, free for the next connection,
//! and the master sends the rest from its epoll loop with `sendfile(2)`, then holds the
//! connection idle for its next request (or closes it, for a response that closes). Before,
//! 1,000 readers of a few bytes every few seconds held every child (`process.max_children`)
//! and a normal client waited seconds.
//!
//! The child hands back only when a send found no room for [`STALL`]: a client that keeps
//! reading is served by its child to the end (no extra message, and the child lingers for the
//! next request as before). Once deferring, the child defers every later send too (the
//! responses to requests pipelined behind, in order) until it hands the lot over between
//! requests; a read of the socket first sends what was deferred (the client may be waiting
//! for it), as does more than a hand-back holds. Nothing is handed back over TLS (the
//! session's state stays with the child), nor at shutdown (the child finishes within the
//! grace, as before). A child that handed back exits with its own status, and a connection
//! whose hand-back the master did not receive is closed, never left waiting.
//! The master applies `timeouts.send` to each wait and `timeouts.send_min_rate` to the rest
//! it sends.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use weft_sys::socket::{self, MAX_PASSED_FDS};

use crate::config::Timeouts;
use crate::minrate::MinRate;

/// How long a connection process's send waits for room before the rest goes to the master.
pub(crate) const STALL: Duration = Duration::from_millis(20);
/// The most ranges one hand-back carries (each may name its own file): a pipelined run of
/// responses beyond it is sent by the child.
const MAX_SEGS: usize = 12;
/// The most bytes a child puts in the in-memory file for the master (the rest of a larger
/// generated body is sent by the child, blocking): what a slow reader can make the master hold
/// in memory is about what a child per slow reader cost before.
pub(crate) const MAX_BYTES: u64 = 1 << 20;
/// The most bytes the master sends for one connection per turn of its loop, so a client that
/// drains at line rate cannot keep the master from its other connections (level-triggered
/// `EPOLLOUT` brings it back at once).
const STEP_BYTES: u64 = 1 << 20;
/// The size of a hand-back message: pid, connection, flags, count, then the ranges.
const MSG_MAX: usize = 4 + 4 + 1 + 1 + MAX_SEGS * 17;

/// A range of a file to send: `files[file]` from `off`, `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    file: usize,
    off: u64,
    len: u64,
}

/// What a connection process has yet to send, in order, once its client fell behind.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    files: Vec<File>,
    segs: Vec<Seg>,
    /// The in-memory file for written bytes (an index into `files`) and its length.
    mem: Option<(usize, u64)>,
}

impl Deferred {
    /// Whether `bytes` more written bytes, or one more range, still fit a hand-back.
    pub(crate) fn room_for(&self, bytes: u64) -> bool {
        let mem = self.mem.map_or(0, |(_, len)| len);
        self.segs.len() < MAX_SEGS
            && self.files.len() < MAX_PASSED_FDS
            && mem.saturating_add(bytes) <= MAX_BYTES
    }

    /// Appends what `bufs` hold (all of it); returns its length.
    pub(crate) fn push_bytes(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        let (index, at) = match self.mem {
            Some(m) => m,
            None => {
                self.files.push(weft_sys::fd::memfd("weft-completion")?);
                (self.files.len() - 1, 0)
            }
        };
        let mut f = &self.files[index];
        for b in bufs {
            f.write_all(b)?;
        }
        self.mem = Some((index, at + total as u64));
        match self.segs.last_mut() {
            // Contiguous with the last range of the same file: one range.
            Some(s) if s.file == index && s.off + s.len == at => s.len += total as u64,
            _ => self.segs.push(Seg {
                file: index,
                off: at,
                len: total as u64,
            }),
        }
        Ok(total)
    }

    /// Appends `len` bytes of `file` from `off` (a copy of its descriptor is kept).
    pub(crate) fn push_file(&mut self, file: &File, off: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.files.push(file.try_clone()?);
        self.segs.push(Seg {
            file: self.files.len() - 1,
            off,
            len,
        });
        Ok(())
    }

    /// Sends it all through `send_file` (the child's own blocking send).
    pub(crate) fn send_with(
        self,
        mut send_file: impl FnMut(&File, u64, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        self.segs
            .iter()
            .try_for_each(|s| send_file(&self.files[s.file], s.off, s.len))
    }

    /// Hands it to the master over `chan`: the rest of connection `conn` of process `pid`,
    /// to be closed after it (`then_close`) or held idle.
    pub(crate) fn hand_back(
        &self,
        chan: RawFd,
        pid: i32,
        conn: RawFd,
        then_close: bool,
    ) -> io::Result<()> {
        let mut msg = Vec::with_capacity(MSG_MAX);
        msg.extend_from_slice(&pid.to_le_bytes());
        msg.extend_from_slice(&conn.to_le_bytes());
        msg.push(u8::from(then_close));
        msg.push(self.segs.len() as u8);
        for s in &self.segs {
            msg.push(s.file as u8);
            msg.extend_from_slice(&s.off.to_le_bytes());
            msg.extend_from_slice(&s.len.to_le_bytes());
        }
        let fds: Vec<RawFd> = self.files.iter().map(AsRawFd::as_raw_fd).collect();
        socket::send_with_fds(chan, &msg, &fds).map(drop)
    }
}

/// A hand-back as the master received it.
#[derive(Debug)]
pub(crate) struct HandBack {
    pub(crate) pid: i32,
    pub(crate) conn: RawFd,
    pub(crate) job: Job,
}

/// Takes the next hand-back queued on `chan` (non-blocking): `Ok(None)` when none is; an
/// ill-formed message is an error (its descriptors closed).
pub(crate) fn receive(chan: RawFd, t: &Timeouts) -> io::Result<Option<HandBack>> {
    let mut buf = [0u8; MSG_MAX];
    let (n, fds) = match socket::recv_with_fds(chan, &mut buf) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
        Err(e) => return Err(e),
    };
    decode(&buf[..n], fds, t, Instant::now()).map(Some)
}

fn decode(msg: &[u8], fds: Vec<OwnedFd>, t: &Timeouts, now: Instant) -> io::Result<HandBack> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "ill-formed hand-back message");
    let int = |at: usize| -> io::Result<i32> {
        Ok(i32::from_le_bytes(
            msg.get(at..at + 4).ok_or_else(bad)?.try_into().unwrap(),
        ))
    };
    let (pid, conn) = (int(0)?, int(4)?);
    let then_close = *msg.get(8).ok_or_else(bad)? != 0;
    let count = usize::from(*msg.get(9).ok_or_else(bad)?);
    if msg.len() != 10 + count * 17 || count > MAX_SEGS {
        return Err(bad());
    }
    let files: Vec<File> = fds.into_iter().map(File::from).collect();
    let mut segs = VecDeque::with_capacity(count);
    for i in 0..count {
        let at = 10 + i * 17;
        let file = usize::from(msg[at]);
        let off = u64::from_le_bytes(msg[at + 1..at + 9].try_into().unwrap());
        let len = u64::from_le_bytes(msg[at + 9..at + 17].try_into().unwrap());
        if file >= files.len() {
            return Err(bad());
        }
        segs.push_back(Seg { file, off, len });
    }
    Ok(HandBack {
        pid,
        conn,
        job: Job {
            files,
            segs,
            then_close,
            rule: MinRate::send(t, now),
            progress_by: now + t.send,
        },
    })
}

/// The rest of a response that the master sends for a connection process.
#[derive(Debug)]
pub(crate) struct Job {
    files: Vec<File>,
    segs: VecDeque<Seg>,
    /// The connection closes after it (else it is held idle for its next request).
    pub(crate) then_close: bool,
    /// `timeouts.send_min_rate` over what the master sends, from the hand-back.
    rule: MinRate,
    /// `timeouts.send` from the last progress.
    progress_by: Instant,
}

/// How a step of a [`Job`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// All of it is out.
    Done,
    /// The socket is full (or this turn's share went): wait until it is writable.
    Blocked,
}

impl Job {
    /// Descriptors it holds.
    pub(crate) fn fds(&self) -> usize {
        self.files.len()
    }

    /// The descriptors it holds, to be closed in a forked child.
    pub(crate) fn raw_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.files.iter().map(AsRawFd::as_raw_fd)
    }

    /// Bytes still to send.
    pub(crate) fn left(&self) -> u64 {
        self.segs.iter().map(|s| s.len).sum()
    }

    /// Sends as much as the non-blocking socket `sock` takes now.
    pub(crate) fn step(&mut self, sock: RawFd, t: &Timeouts) -> io::Result<Sent> {
        let mut this_turn = 0u64;
        while let Some(s) = self.segs.front_mut() {
            if this_turn >= STEP_BYTES {
                return Ok(Sent::Blocked);
            }
            if s.len == 0 {
                self.segs.pop_front();
                continue;
            }
            let chunk = usize::try_from(s.len.min(STEP_BYTES)).unwrap_or(usize::MAX);
            let mut off = s.off;
            match socket::sendfile(sock, self.files[s.file].as_raw_fd(), &mut off, chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ))
                }
                Ok(n) => {
                    s.off = off;
                    s.len -= n as u64;
                    this_turn += n as u64;
                    self.progress_by = Instant::now() + t.send;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Sent::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Sent::Done)
    }

    /// When the master gives up on the client, and why: `timeouts.send` since the last
    /// progress, or the minimum rate from the hand-back over what the client has taken on the
    /// connection (`taken`: what its kernel acknowledged, `weft_sys::socket::bytes_acked`).
    pub(crate) fn due(&self, taken: Option<u64>) -> (Instant, &'static str) {
        // Where the kernel cannot say what the client took, the send timeout alone.
        let Some(taken) = taken else {
            return (self.progress_by, "send timeout");
        };
        match self.rule.earliest(taken, self.progress_by) {
            (d, true) => (d, "the client read slower than timeouts.send_min_rate"),
            (d, false) => (d, "send timeout"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::{UnixDatagram, UnixStream};

    fn timeouts() -> Timeouts {
        Timeouts {
            send: Duration::from_secs(7),
            send_min_rate: 100,
            min_rate_grace: Duration::from_secs(3),
            ..Timeouts::default()
        }
    }

    #[test]
    fn written_bytes_and_file_ranges_go_to_the_master_in_order() {
        let dir = std::env::temp_dir().join(format!("weft-completion-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = File::open(&path).unwrap();

        let mut d = Deferred::default();
        assert_eq!(d.push_bytes(&[IoSlice::new(b"head:")]).unwrap(), 5);
        d.push_file(&file, 2, 5).unwrap();
        d.push_bytes(&[IoSlice::new(b"|"), IoSlice::new(b"tail")])
            .unwrap();
        // Contiguous bytes after the file go on in the same in-memory file, a range of their own.
        assert_eq!(d.segs.len(), 3);
        assert_eq!(d.files.len(), 2);
        d.push_file(&file, 0, 0).unwrap();
        assert_eq!(d.segs.len(), 3, "an empty range is none");

        let (tx, rx) = UnixDatagram::pair().unwrap();
        d.hand_back(tx.as_raw_fd(), 42, 9, true).unwrap();
        drop(d);
        let back = receive(rx.as_raw_fd(), &timeouts()).unwrap().unwrap();
        assert_eq!((back.pid, back.conn, back.job.then_close), (42, 9, true));
        assert!(receive(rx.as_raw_fd(), &timeouts()).unwrap().is_none());

        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut job = back.job;
        assert_eq!(job.fds(), 2);
        assert_eq!(job.step(a.as_raw_fd(), &timeouts()).unwrap(), Sent::Done);
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "head:23456|tail");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_socket_blocks_the_job_and_it_resumes_where_it_stopped() {
        let big = vec![7u8; 4 << 20];
        let mut d = Deferred::default();
        d.push_bytes(&[IoSlice::new(&big)]).unwrap();
        let (tx, rx) = UnixDatagram::pair().unwrap();
        d.hand_back(tx.as_raw_fd(), 1, 2, false).unwrap();
        let mut job = receive(rx.as_raw_fd(), &timeouts()).unwrap().unwrap().job;
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        assert_eq!(job.step(a.as_raw_fd(), &timeouts()).unwrap(), Sent::Blocked);
        assert!(job.left() > 0 && job.left() < big.len() as u64);
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            b.read_to_end(&mut all).unwrap();
            all
        });
        loop {
            match job.step(a.as_raw_fd(), &timeouts()).unwrap() {
                Sent::Done => break,
                Sent::Blocked => {
                    weft_sys::poll::poll_writable(a.as_raw_fd(), Duration::from_secs(5)).unwrap();
                }
            }
        }
        drop(a);
        assert_eq!(reader.join().unwrap(), big);
    }

    #[test]
    fn the_master_gives_up_at_the_send_timeout_or_the_minimum_rate() {
        let t = timeouts();
        let now = Instant::now();
        let job = decode(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0], Vec::new(), &t, now)
            .unwrap()
            .job;
        // Nothing sent: the grace (3 s) binds before the send timeout (7 s).
        assert_eq!(job.due(Some(0)).0, now + Duration::from_secs(3));
        assert!(job.due(Some(0)).1.contains("send_min_rate"));
        // 1,000 bytes taken earn 10 s more: the send timeout binds; 200 earn 2 s.
        assert_eq!(
            job.due(Some(1_000)),
            (now + Duration::from_secs(7), "send timeout")
        );
        assert_eq!(job.due(Some(200)).0, now + Duration::from_secs(5));
        assert_eq!(
            job.due(None),
            (now + Duration::from_secs(7), "send timeout")
        );
    }

    #[test]
    fn ill_formed_messages_are_refused() {
        let t = timeouts();
        let now = Instant::now();
        for msg in [
            &b""[..],
            &[0; 9],
            // One range announced, none there.
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            // A range naming a file that did not come.
            &[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
            ],
        ] {
            let e = decode(msg, Vec::new(), &t, now).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{msg:?}");
        }
    }

    #[test]
    fn a_hand_back_holds_only_so_much() {
        let mut d = Deferred::default();
        assert!(d.room_for(MAX_BYTES));
        assert!(!d.room_for(MAX_BYTES + 1));
        d.push_bytes(&[IoSlice::new(&[1; 10])]).unwrap();
        assert!(!d.room_for(MAX_BYTES - 9));
        let file = weft_sys::fd::memfd("t").unwrap();
        for _ in 1..MAX_SEGS {
            d.push_file(&file, 0, 1).unwrap();
        }
        assert!(!d.room_for(0), "as many ranges as one message carries");
    }
}
