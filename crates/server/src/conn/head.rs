//! The request-head rules, without I/O, shared by the blocking driver ([`super::driver`]), the
//! pipeline's receive stage and the process model's master: what the bytes buffered so far say ([`head_step`]: a whole
//! head, a bad one, or part of one and until when the rest may take), the header-read
//! deadline and minimum rate from the head's first byte, the wait for a request that has not
//! begun ([`idle_timeout`]), and idle marking for graceful shutdown ([`mark_idle`]). Each model
//! does its own reads and waits: a blocking read with a timeout, or a park in the poller.

use std::time::{Duration, Instant};

use weft_http::Parser;

use crate::config::Timeouts;
use crate::minrate::MinRate;

use super::{ConnInfo, Start};

/// When the head being received must be complete: the header-read deadline and the
/// minimum-rate rule (`timeouts.header_min_rate`), both from the head's first byte. Empty
/// until then, and again once a head is complete.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeadDue {
    /// The header-read deadline (the pipeline also keeps its TLS handshake's here).
    pub(crate) deadline: Option<Instant>,
    pub(crate) rate: Option<MinRate>,
}

impl HeadDue {
    /// The deadline and rule of a head whose first byte arrived at `now`.
    pub(crate) fn begin(&mut self, t: &Timeouts, now: Instant) {
        self.deadline = Some(now + t.header_read);
        self.rate = Some(MinRate::head(t, now));
    }

    /// When the head must be complete with `received` bytes of it here, and whether the
    /// minimum rate is what binds; `None` before the head began.
    pub(crate) fn due(&self, received: usize) -> Option<(Instant, bool)> {
        let d = self.deadline?;
        Some(match self.rate {
            Some(r) => r.earliest(received as u64, d),
            None => (d, false),
        })
    }
}

/// What the bytes buffered so far say about the next request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadStep {
    /// A whole head of `head_len` bytes is buffered (the parser holds it).
    Complete { head_len: usize },
    /// Part of a head is buffered: the rest must arrive by `deadline`; past it the answer is
    /// 408, logged with `late`.
    Partial {
        deadline: Instant,
        late: &'static str,
    },
    /// Nothing of a request is buffered: wait for one ([`idle_timeout`], [`mark_idle`]).
    Empty,
    /// Answer this status (logged with this reason), then close.
    Fail(u16, &'static str),
}

/// Parses what `rbuf` holds and applies the head's deadlines: the step both the blocking driver
/// and the pipeline take after every read. A head's deadlines begin the first time part of it
/// is seen (`due`, kept by the caller between steps); `now` is read only then and for a
/// partial head, so a head that arrives whole costs no clock read.
// Inlined into the keep-alive loop, its one caller outside tests: left to the compiler's
// heuristics it moved in and out of line with unrelated changes (44 instructions a request).
#[inline]
pub(crate) fn head_step(
    parser: &mut Parser,
    data: &[u8],
    due: &mut HeadDue,
    t: &Timeouts,
    now: impl FnOnce() -> Instant,
) -> HeadStep {
    if data.is_empty() {
        return HeadStep::Empty;
    }
    match parser.parse(data) {
        Ok(Some(head_len)) => return HeadStep::Complete { head_len },
        Ok(None) => {}
        Err(e) => return HeadStep::Fail(e.status(), e.reason()),
    }
    let now = now();
    let header_read = match due.deadline {
        Some(d) => d,
        None => {
            due.begin(t, now);
            now + t.header_read
        }
    };
    let (deadline, slow) = match due.rate {
        Some(r) => r.earliest(data.len() as u64, header_read),
        None => (header_read, false),
    };
    if deadline <= now {
        return HeadStep::Fail(408, head_late(slow));
    }
    HeadStep::Partial {
        deadline,
        late: head_late(slow),
    }
}

/// How long a connection waits for a request that has not begun: a new connection's first
/// for the header-read timeout (nginx `client_header_timeout`), a later one for the
/// keep-alive timeout.
pub(crate) fn idle_timeout(start: Start, t: &Timeouts) -> Duration {
    match start {
        Start::Fresh => t.header_read,
        Start::Resumed => t.keepalive,
    }
}

/// Marks a connection with nothing of a request buffered idle for graceful shutdown; false if
/// the drain has begun and it is to close now. A new connection's first request is awaited
/// even while draining (it stays busy, so shutdown does not wake it): its client was accepted
/// and has sent, or is about to send, a request that closing now would lose (an upgrade's new
/// process serves everything accepted after this one stopped).
pub(crate) fn mark_idle(info: &ConnInfo, start: Start) -> bool {
    match (&info.registration, start) {
        (Some(r), Start::Resumed) => r.set_idle(true),
        _ => true,
    }
}

/// Marks a connection busy (part of a request has arrived) for graceful shutdown.
pub(crate) fn mark_busy(info: &ConnInfo) {
    if let Some(r) = &info.registration {
        r.set_idle(false);
    }
}

/// The reason logged with a 408 for a head cut short: which limit the client ran into.
pub(crate) fn head_late(too_slow: bool) -> &'static str {
    if too_slow {
        "request head below timeouts.header_min_rate"
    } else {
        "request head not received in time"
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use crate::body::ReadBuf;

    use super::*;
    use crate::config::Model;
    use crate::metrics::ListenerMetrics;
    use crate::shutdown::Shutdown;

    fn buf(bytes: &[u8]) -> ReadBuf {
        let mut rbuf = ReadBuf::new(64);
        let mut src = bytes;
        if !bytes.is_empty() {
            rbuf.fill(&mut src, 1 << 20).unwrap();
        }
        rbuf
    }

    fn timeouts(header_min_rate: u64) -> Timeouts {
        Timeouts {
            header_read: Duration::from_secs(60),
            keepalive: Duration::from_secs(75),
            header_min_rate,
            min_rate_grace: Duration::from_secs(20),
            ..Timeouts::default()
        }
    }

    fn no_clock() -> Instant {
        panic!("the clock was read for a head that needs no deadline")
    }

    #[test]
    fn a_whole_head_or_nothing_buffered_reads_no_clock() {
        let t = timeouts(500);
        let mut parser = Parser::new(weft_http::Limits::default());
        let mut due = HeadDue::default();
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next";
        let step = head_step(&mut parser, buf(head).data(), &mut due, &t, no_clock);
        assert_eq!(step, HeadStep::Complete { head_len: 27 });
        assert!(due.deadline.is_none());
        let step = head_step(&mut parser, buf(b"").data(), &mut due, &t, no_clock);
        assert_eq!(step, HeadStep::Empty);
    }

    #[test]
    fn a_partial_head_is_due_from_its_first_byte_and_gets_408_after() {
        let t = timeouts(0);
        let mut parser = Parser::new(weft_http::Limits::default());
        let mut due = HeadDue::default();
        let t0 = Instant::now();
        let rbuf = buf(b"GET / HTTP/1.1\r\nHo");
        let step = head_step(&mut parser, rbuf.data(), &mut due, &t, || t0);
        let deadline = t0 + Duration::from_secs(60);
        let late = "request head not received in time";
        assert_eq!(step, HeadStep::Partial { deadline, late });
        // More bytes later: still due at the first byte's deadline, not pushed back.
        parser.reset();
        let rbuf = buf(b"GET / HTTP/1.1\r\nHost: a\r\n");
        let t1 = t0 + Duration::from_secs(59);
        let step = head_step(&mut parser, rbuf.data(), &mut due, &t, || t1);
        assert_eq!(step, HeadStep::Partial { deadline, late });
        parser.reset();
        let step = head_step(&mut parser, rbuf.data(), &mut due, &t, || deadline);
        assert_eq!(step, HeadStep::Fail(408, late));
    }

    #[test]
    fn a_head_below_the_minimum_rate_gets_408_saying_so() {
        // 500 bytes/s after 20 s: 25 bytes earn 50 ms beyond the grace.
        let t = timeouts(500);
        let mut parser = Parser::new(weft_http::Limits::default());
        let mut due = HeadDue::default();
        let t0 = Instant::now();
        let rbuf = buf(b"GET / HTTP/1.1\r\nHost: a\r\n");
        let step = head_step(&mut parser, rbuf.data(), &mut due, &t, || t0);
        let deadline = t0 + Duration::from_millis(20_050);
        let late = "request head below timeouts.header_min_rate";
        assert_eq!(step, HeadStep::Partial { deadline, late });
        assert_eq!(due.due(rbuf.len()), Some((deadline, true)));
        parser.reset();
        let step = head_step(&mut parser, rbuf.data(), &mut due, &t, || deadline);
        assert_eq!(step, HeadStep::Fail(408, late));
    }

    #[test]
    fn bad_and_oversized_heads_fail_with_their_status() {
        let t = timeouts(500);
        let mut due = HeadDue::default();
        let mut parser = Parser::new(weft_http::Limits::default());
        let step = head_step(
            &mut parser,
            buf(b"GET / HTTP/9.9\r\n\r\n").data(),
            &mut due,
            &t,
            no_clock,
        );
        assert!(matches!(step, HeadStep::Fail(505, _)), "{step:?}");
        let limits = weft_http::Limits {
            max_head_bytes: 64,
            ..weft_http::Limits::default()
        };
        let mut parser = Parser::new(limits);
        let long = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n", "y".repeat(80));
        let step = head_step(
            &mut parser,
            buf(long.as_bytes()).data(),
            &mut due,
            &t,
            no_clock,
        );
        assert!(matches!(step, HeadStep::Fail(431, _)), "{step:?}");
    }

    #[test]
    fn a_fresh_connection_waits_for_the_header_read_timeout_and_is_never_marked_idle() {
        let t = timeouts(500);
        assert_eq!(idle_timeout(Start::Fresh, &t), t.header_read);
        assert_eq!(idle_timeout(Start::Resumed, &t), t.keepalive);

        let shutdown = Arc::new(Shutdown::default());
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let info = ConnInfo {
            peer: addr,
            local: addr,
            listener: Arc::new(ListenerMetrics::new(addr, Model::Thread)),
            // Not a socket: a drain's shut-down of it fails harmlessly.
            registration: Some(shutdown.register(-1)),
            accepted: None,
            proxied: Default::default(),
            client_slot: Default::default(),
            h2: Default::default(),
            tls: Default::default(),
            life: crate::conn::Life::now(),
        };
        assert!(mark_idle(&info, Start::Resumed));
        mark_busy(&info);
        shutdown.begin();
        // Draining: a connection between requests closes; a new one's first request is
        // still awaited.
        assert!(!mark_idle(&info, Start::Resumed));
        assert!(mark_idle(&info, Start::Fresh));
    }
}
