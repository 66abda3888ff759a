//! Clock readings of one request (`[timing]`): [`Times`], recorded into `metrics::Phase` and
//! the `Server-Timing` field, and [`Stamped`], the transport that notes the first byte out.

use std::io;
use std::time::{Duration, Instant};

use crate::metrics::Phase;
use crate::net::Transport;

use super::ConnInfo;

/// Clock readings of one request, taken only when `[timing]` is on.
#[derive(Debug, Default)]
pub(crate) struct Times {
    /// The request's first byte arrived (or, pipelined, its turn came).
    pub(crate) start: Option<Instant>,
    /// Its head was complete.
    pub(crate) head: Option<Instant>,
    /// The connection's first request (the only one with an `accept` phase).
    pub(crate) first: bool,
    /// Time inside the handler's body reads.
    pub(super) body: Duration,
    /// The handler's time less `body`.
    pub(super) handler: Option<Duration>,
}

impl Times {
    /// Counts a wait for body bytes outside the handler's reads (a body read ahead).
    pub(crate) fn add_body_wait(&mut self, d: Duration) {
        self.body += d;
    }

    fn since_accept(&self, info: &ConnInfo) -> Option<Duration> {
        Some(self.start?.saturating_duration_since(info.accepted?))
    }

    fn head_time(&self) -> Option<Duration> {
        Some(self.head?.saturating_duration_since(self.start?))
    }

    pub(crate) fn record_head(&self, info: &ConnInfo) {
        if self.first {
            if let Some(d) = self.since_accept(info) {
                info.listener.phase(Phase::AcceptToFirstByte, d);
            }
        }
        if let Some(d) = self.head_time() {
            info.listener.phase(Phase::Head, d);
        }
    }

    /// After the response: body, handler and output phases.
    pub(crate) fn record_out(&self, info: &ConnInfo, first_out: Option<Instant>) {
        let Some(head) = self.head else { return };
        let l = &info.listener;
        if let Some(h) = self.handler {
            l.phase(Phase::BodyRead, self.body);
            l.phase(Phase::Handler, h);
        }
        if let Some(t) = first_out {
            l.phase(Phase::FirstByteOut, t.saturating_duration_since(head));
            l.phase(Phase::LastByteOut, head.elapsed());
        }
    }

    /// A `Server-Timing` field (milliseconds) with what is known before the response goes
    /// out; `accept` only for a connection's first request.
    pub(crate) fn server_timing(&self, info: &ConnInfo) -> Vec<u8> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut parts = Vec::new();
        if self.first {
            if let Some(d) = self.since_accept(info) {
                parts.push(format!("accept;dur={:.3}", ms(d)));
            }
        }
        if let Some(d) = self.head_time() {
            parts.push(format!("head;dur={:.3}", ms(d)));
        }
        if let Some(h) = self.handler {
            parts.push(format!("body;dur={:.3}", ms(self.body)));
            parts.push(format!("handler;dur={:.3}", ms(h)));
        }
        format!("Server-Timing: {}\r\n", parts.join(", ")).into_bytes()
    }
}

/// A transport that notes when the first response byte went out (for `[timing]`).
pub(super) struct Stamped<'a, T: Transport> {
    pub(super) inner: &'a mut T,
    pub(super) first: Option<Instant>,
}

impl<T: Transport> Stamped<'_, T> {
    fn stamp<V>(&mut self, r: &io::Result<V>) {
        if self.first.is_none() && r.is_ok() {
            self.first = Some(Instant::now());
        }
    }
}

impl<T: Transport> io::Read for Stamped<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl<T: Transport> io::Write for Stamped<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        self.stamp(&r);
        r
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let r = self.inner.write_vectored(bufs);
        self.stamp(&r);
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<T: Transport> Transport for Stamped<'_, T> {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
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
        self.inner.read_or(buf, timeout, wake)
    }

    fn write_head(&mut self, head: &[u8]) -> io::Result<()> {
        let r = self.inner.write_head(head);
        self.stamp(&r);
        r
    }

    fn write_all_vectored2(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let r = self.inner.write_all_vectored2(a, b);
        self.stamp(&r);
        r
    }

    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        let r = self.inner.send_file(file, offset, len);
        self.stamp(&r);
        r
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.inner.shutdown_write()
    }
}
