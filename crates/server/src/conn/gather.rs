//! Gathering the responses of pipelined requests into one write.
//!
//! A client that pipelines sends several requests in one segment; answering each with its own
//! `write` pays the kernel's per-call send path once per request. [`Gather`] wraps a
//! connection's transport: while the connection driver says more requests are already
//! buffered ([`Gather::set_gathering`]), response bytes are appended to a bounded buffer
//! instead of written; the next response written without gathering (the batch's last), a
//! file body, a close, or *any read* sends the gathered bytes first. Reading first flushes, so
//! a request whose body (or the next head) has not arrived yet never waits behind responses
//! the client is waiting for: the order of bytes on the wire is exactly the unbatched one.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::time::Duration;

use super::{Encoded, Tail};
use crate::net::Transport;

/// Most bytes gathered before they are written anyway (nginx `postpone_output` is 1460 bytes
/// for one response; this bounds a batch of many small ones).
pub(crate) const GATHER_BYTES: usize = 64 * 1024;
/// Most responses gathered into one write.
pub(crate) const GATHER_RESPONSES: u32 = 64;

/// A transport that can hold back writes while more pipelined responses follow.
pub(crate) struct Gather<'a, T: Transport> {
    inner: &'a mut T,
    out: Vec<u8>,
    gathering: bool,
}

impl<'a, T: Transport> Gather<'a, T> {
    /// Wraps `inner`, gathering into `out` (cleared; its storage is reused).
    pub(crate) fn new(inner: &'a mut T, mut out: Vec<u8>) -> Self {
        out.clear();
        Gather {
            inner,
            out,
            gathering: false,
        }
    }

    /// Whether the response about to be written may wait for the next one (another request
    /// is already buffered). Off: it goes out at once, with whatever was gathered before it.
    pub(crate) fn set_gathering(&mut self, on: bool) {
        self.gathering = on;
    }

    /// Writes what was gathered.
    pub(crate) fn flush_gathered(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = self.inner.write_all(&self.out);
        self.out.clear();
        r
    }

    /// Writes a response that `encode` appends straight after the bytes gathered so far (no
    /// copy through a separate buffer): held back while gathering if it is whole in memory
    /// and fits, else written at once together with them, then whatever follows its head (a
    /// file, a stream). Returns what [`super::write_encoded`] does.
    #[inline]
    pub(crate) fn write_encoding(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> Encoded,
    ) -> io::Result<(u64, u64)> {
        let enc = encode(&mut self.out);
        match &enc.tail {
            Tail::None if self.holds(0) => return Ok((enc.bytes, enc.body_len)),
            Tail::Bytes(b) if self.holds(b.len()) => {
                self.out.extend_from_slice(b);
                return Ok((enc.bytes, enc.body_len));
            }
            _ => {}
        }
        let r = super::write_encoded(self.inner, &self.out, enc);
        self.out.clear();
        r
    }

    /// Whether bytes are held back.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.out.len()
    }

    /// Gives the buffer back for reuse (anything still gathered is dropped: flush first).
    pub(crate) fn into_buf(self) -> Vec<u8> {
        self.out
    }

    /// Whether `n` more bytes are held back rather than written.
    fn holds(&self, n: usize) -> bool {
        self.gathering && self.out.len() + n <= GATHER_BYTES
    }
}

impl<T: Transport> Read for Gather<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.flush_gathered()?;
        self.inner.read(buf)
    }
}

impl<T: Transport> Write for Gather<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.holds(buf.len()) {
            self.out.extend_from_slice(buf);
            return Ok(());
        }
        if self.out.is_empty() {
            return self.inner.write_all(buf);
        }
        // The end of a batch: the gathered responses and this one in one call.
        let r = self.inner.write_all_vectored2(&self.out, buf);
        self.out.clear();
        r
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let n: usize = bufs.iter().map(|b| b.len()).sum();
        if self.holds(n) {
            for b in bufs {
                self.out.extend_from_slice(b);
            }
            return Ok(n);
        }
        self.flush_gathered()?;
        self.inner.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_gathered()?;
        self.inner.flush()
    }
}

impl<T: Transport> Transport for Gather<'_, T> {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
        self.flush_gathered().ok()?;
        self.inner.tunnel_end()
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_read_timeout(timeout)
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_write_timeout(timeout)
    }

    fn set_send_rate(&mut self, rule: Option<crate::minrate::SendRate>) {
        self.inner.set_send_rate(rule);
    }

    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &weft_fiber::sync::Interrupt,
    ) -> io::Result<usize> {
        self.flush_gathered()?;
        self.inner.read_or(buf, timeout, wake)
    }

    fn linger(&mut self, period: Duration) -> bool {
        self.flush_gathered().is_ok() && self.inner.linger(period)
    }

    fn write_head(&mut self, head: &[u8]) -> io::Result<()> {
        if self.out.is_empty() {
            return self.inner.write_head(head);
        }
        // A body follows at once (a file): the gathered bytes and this head go out together,
        // with the same hint.
        self.out.extend_from_slice(head);
        let r = self.inner.write_head(&self.out);
        self.out.clear();
        r
    }

    fn write_all_vectored2(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        if self.holds(a.len() + b.len()) {
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b);
            return Ok(());
        }
        if self.out.is_empty() {
            return self.inner.write_all_vectored2(a, b);
        }
        // `a` is a head, small: it joins the gathered bytes, the body goes beside them.
        self.out.extend_from_slice(a);
        let r = self.inner.write_all_vectored2(&self.out, b);
        self.out.clear();
        r
    }

    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        if !self.out.is_empty() {
            let r = self.inner.write_head(&self.out);
            self.out.clear();
            r?;
        }
        self.inner.send_file(file, offset, len)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.flush_gathered()?;
        self.inner.shutdown_write()
    }
}

/// A transport for tests: a client that sent `input` at once (then closes), and every write
/// call that reached the socket, as the bytes of that call.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) writes: Vec<Vec<u8>>,
    pub(crate) input: Vec<u8>,
}

#[cfg(test)]
impl Read for Recorder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.input.len().min(buf.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input.drain(..n);
        Ok(n)
    }
}

#[cfg(test)]
impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes.push(buf.to_vec());
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes
            .push(bufs.iter().flat_map(|b| b.iter().copied()).collect());
        Ok(bufs.iter().map(|b| b.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl Transport for Recorder {
    fn set_read_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    fn set_write_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_goes_out_in_one_call_with_its_last_response() {
        let mut t = Recorder::default();
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        g.write_all(b"one;").unwrap();
        g.write_all_vectored2(b"two:", b"body;").unwrap();
        assert_eq!(g.pending(), 13);
        g.set_gathering(false);
        g.write_all(b"three.").unwrap();
        assert_eq!(g.pending(), 0);
        drop(g);
        assert_eq!(t.writes, vec![b"one;two:body;three.".to_vec()]);
    }

    #[test]
    fn a_read_sends_what_was_gathered_first() {
        let mut t = Recorder {
            input: b"more".to_vec(),
            ..Recorder::default()
        };
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        g.write_all(b"answer").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(g.read(&mut buf).unwrap(), 4);
        assert_eq!(g.pending(), 0);
        drop(g);
        assert_eq!(t.writes, vec![b"answer".to_vec()]);
    }

    #[test]
    fn past_the_byte_bound_the_gathered_bytes_go_out() {
        let mut t = Recorder::default();
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        let big = vec![b'x'; GATHER_BYTES - 10];
        g.write_all(&big).unwrap();
        g.write_all(b"0123456789abc").unwrap(); // does not fit: both go out, in order
        assert_eq!(g.pending(), 0);
        drop(g);
        let all: Vec<u8> = t.writes.concat();
        assert_eq!(all.len(), GATHER_BYTES + 3);
        assert!(all.ends_with(b"xx0123456789abc"));
    }

    #[test]
    fn a_file_body_flushes_the_batch_with_its_head_before_it() {
        use std::io::Seek;
        let mut file = tempfile_with(b"FILE");
        file.rewind().unwrap();
        let mut t = Recorder::default();
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        g.write_all(b"r1;").unwrap();
        g.write_head(b"h2;").unwrap();
        g.send_file(&file, 0, 4).unwrap();
        g.write_all(b"r3;").unwrap();
        g.flush().unwrap();
        drop(g);
        assert_eq!(t.writes.concat(), b"r1;h2;FILEr3;".to_vec());
        assert_eq!(t.writes[0], b"r1;h2;".to_vec(), "head joins the batch");
    }

    /// `resp` encoded by the same code the driver uses, through [`Gather::write_encoding`].
    fn send(g: &mut Gather<'_, Recorder>, resp: crate::Response) -> (u64, u64) {
        g.write_encoding(|out| crate::conn::encode_append(out, resp, None, true, b""))
            .unwrap()
    }

    #[test]
    fn responses_encoded_in_place_go_out_in_one_call_and_count_their_own_bytes() {
        use crate::response::BodyStream;
        let mut t = Recorder::default();
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        let (a, a_body) = send(&mut g, crate::Response::text(200, "one"));
        assert_eq!(a_body, 3);
        assert_eq!(g.pending() as u64, a, "held back whole");
        // A body too large to copy after its head (a shared buffer) is held too, while it fits.
        let big = vec![b'b'; 3000];
        let (b, b_body) = send(&mut g, crate::Response::new(200).body(big.clone()));
        assert_eq!(b_body, 3000);
        assert_eq!(g.pending() as u64, a + b);
        // A stream is written at once, after what was gathered; its count is its own.
        let stream = BodyStream::with_len(std::io::Cursor::new(b"streamed".to_vec()), 8);
        let (c, c_body) = send(&mut g, crate::Response::new(200).body(stream));
        assert_eq!(c_body, 8);
        assert_eq!(g.pending(), 0);
        g.set_gathering(false);
        let (d, _) = send(&mut g, crate::Response::text(404, "last"));
        drop(g);
        let all = t.writes.concat();
        assert_eq!(all.len() as u64, a + b + c + d);
        let text = String::from_utf8_lossy(&all);
        assert_eq!(text.matches("HTTP/1.1 ").count(), 4, "{text}");
        let order = ["one", "bbbb", "streamed", "404 Not Found", "last"];
        let at: Vec<usize> = order.iter().map(|w| text.find(w).expect(w)).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "in order: {at:?}");
        // The first write carries the two gathered responses and the stream's head.
        assert!(t.writes[0].starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(String::from_utf8_lossy(&t.writes[0]).contains("bbbb"));
        assert_eq!(
            t.writes.last().unwrap().len() as u64,
            d,
            "the last answer alone"
        );
    }

    #[test]
    fn an_invalid_handler_header_becomes_a_500_after_the_gathered_bytes() {
        let mut t = Recorder::default();
        let mut g = Gather::new(&mut t, Vec::new());
        g.set_gathering(true);
        let (a, _) = send(&mut g, crate::Response::text(200, "fine"));
        let bad = crate::Response::text(200, "x").header("X-Bad", "split\r\nSet-Cookie: a=b");
        let (b, _) = send(&mut g, bad);
        g.set_gathering(false);
        g.flush_gathered().unwrap();
        drop(g);
        let all = t.writes.concat();
        assert_eq!(all.len() as u64, a + b);
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("fine"));
        assert!(text[a as usize..].starts_with("HTTP/1.1 500 "), "{text}");
        assert!(!text.contains("Set-Cookie"), "{text}");
    }

    fn tempfile_with(bytes: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!("weft-gather-{}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let f = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }
}
