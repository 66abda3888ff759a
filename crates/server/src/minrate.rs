//! Minimum data rates for request heads and bodies (issue 24: a slowloris of 1,000 connections
//! sending headers a byte at a time, or bodies a few bytes at a time, held what each model has
//! a bounded number of — the process model's children, the pipeline's process threads — for
//! the whole header-read or body-read timeout).
//!
//! The rule is Apache mod_reqtimeout's `MinRate`: a head or body that began at `start` must be
//! complete by `start + grace + received / rate`, so every byte received extends the deadline
//! by `1 / rate` seconds (`header = 20-40,MinRate=500` is an initial 20 s, extended by one
//! second per 500 bytes, up to 40 s). A client faster than the rate never notices it; a client
//! slower than it is cut after about `grace` plus what its bytes earned, with 408, however it
//! spaces its bytes (a per-read timeout such as nginx's `client_body_timeout` is reset by every
//! byte, so one byte every 59 s holds a connection forever). `rate = 0` turns the rule off.
//!
//! Every model applies the same [`MinRate`]: `conn::head_step` to heads (the blocking driver
//! of thread, fiber and the process model's children, and the pipeline's receive stage),
//! `body::RequestBody` to bodies, the pipeline's receive stage to the bodies it reads ahead,
//! and the process model's master to the heads and bodies it reads before forking.

use std::time::{Duration, Instant};

use weft_http::{BodyFraming, ChunkedDecoder, Expect, RequestHead};

use crate::config::{LimitsConfig, Timeouts};

/// Whether a request whose head is `head` should wait for more of its body, `body` being the
/// bytes after the head so far, before it is given what a slow body would hold (a process
/// model child, a pipeline process thread): true while a body of at most
/// `limits.client_body_buffer` bytes is incomplete. A larger body, a chunked one past that many
/// bytes or whose chunk-size lines announce more, one over `limits.max_body` (by its
/// Content-Length or its chunk-size lines; the handler's reader refuses it with 413 at once, so
/// it is not awaited), a client that waits for `100 Continue`, or chunked framing that is
/// already broken (the handler's reader answers 400) goes on at once.
pub(crate) fn wait_for_body(head: &RequestHead, body: &[u8], limits: &LimitsConfig) -> bool {
    let bound = limits.client_body_buffer;
    // What a body may announce and still be awaited.
    let most = (bound as u64).min(limits.max_body);
    if head.expect() != Expect::None {
        return false;
    }
    match head.framing() {
        BodyFraming::None => false,
        BodyFraming::Length(n) => n <= most && (body.len() as u64) < n,
        BodyFraming::Chunked => {
            if body.len() >= bound {
                return false;
            }
            let mut dec = ChunkedDecoder::new(&limits.http());
            let mut at = 0;
            let mut data = 0u64;
            while at < body.len() {
                match dec.decode(&body[at..]) {
                    Ok(step) if step.done => return false,
                    Ok(step) if step.consumed == 0 => return true,
                    Ok(step) => {
                        at += step.consumed;
                        data += (step.data.1 - step.data.0) as u64;
                        // Its size lines already announce more than `bound` (it will not
                        // fit) or than `max_body` (refused by the handler's reader at the
                        // size line): it goes on now, not after the wait.
                        if data.saturating_add(dec.data_left()) > most {
                            return false;
                        }
                    }
                    Err(_) => return false,
                }
            }
            !dec.is_done()
        }
    }
}

/// The minimum-rate deadline of one request head or body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MinRate {
    start: Instant,
    grace: Duration,
    /// Bytes per second; 0: off.
    rate: u64,
}

impl MinRate {
    /// The rule for a request head whose first byte arrived at `start`
    /// (`timeouts.header_min_rate`).
    pub(crate) fn head(t: &Timeouts, start: Instant) -> MinRate {
        MinRate {
            start,
            grace: t.min_rate_grace,
            rate: t.header_min_rate,
        }
    }

    /// The rule for what is left of a response that the process model's master sends for a
    /// connection process (write completion), handed over at `start`
    /// (`timeouts.send_min_rate`; there, every wait is a wait for the client).
    pub(crate) fn send(t: &Timeouts, start: Instant) -> MinRate {
        MinRate {
            start,
            grace: t.min_rate_grace,
            rate: t.send_min_rate,
        }
    }

    /// The rule for a request body whose head completed at `start`
    /// (`timeouts.body_min_rate`).
    pub(crate) fn body(t: &Timeouts, start: Instant) -> MinRate {
        MinRate {
            start,
            grace: t.min_rate_grace,
            rate: t.body_min_rate,
        }
    }

    /// When the head or body must be complete, having received `received` bytes of it so
    /// far; `None` with the rule off.
    pub(crate) fn deadline(&self, received: u64) -> Option<Instant> {
        if self.rate == 0 {
            return None;
        }
        // (None past the end of time: no deadline a client could reach anyway.)
        self.start
            .checked_add(self.grace.checked_add(earned(received, self.rate)?)?)
    }

    /// The earlier of `other` and this rule's deadline, and whether this rule's is the one
    /// that binds (so a 408 can say which limit the client ran into).
    pub(crate) fn earliest(&self, received: u64, other: Instant) -> (Instant, bool) {
        match self.deadline(received) {
            Some(d) if d < other => (d, true),
            _ => (other, false),
        }
    }
}

use crate::net::earned;
pub(crate) use crate::net::SendRate;

/// The minimum send rate `t` sets for a new connection (`timeouts.send_min_rate` after
/// `min_rate_grace`; [`SendRate`]); `None` with the rate 0 (off).
pub(crate) fn send_rate(t: &Timeouts) -> Option<SendRate> {
    SendRate::new(t.send_min_rate, t.min_rate_grace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(head: &str, body: &str, bound: usize) -> bool {
        waits_within(head, body, bound, u64::MAX)
    }

    /// `wait_for_body` with `client_body_buffer = bound` and `max_body`.
    fn waits_within(head: &str, body: &str, bound: usize, max_body: u64) -> bool {
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        let n = p.parse(head.as_bytes()).unwrap().expect("a whole head");
        assert_eq!(n, head.len());
        let limits = LimitsConfig {
            client_body_buffer: bound,
            max_body,
            ..LimitsConfig::default()
        };
        wait_for_body(p.head(), body.as_bytes(), &limits)
    }

    #[test]
    fn a_small_body_is_awaited_until_whole() {
        let h = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
        assert!(waits(h, "", 16));
        assert!(waits(h, "abcd", 16));
        assert!(!waits(h, "abcde", 16));
        // Over the bound: handed on at once, read by the handler under the rate rule.
        assert!(!waits(h, "", 4));
        assert!(!waits("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "", 16));
    }

    #[test]
    fn a_chunked_body_is_awaited_until_its_last_chunk_or_the_bound() {
        let h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(waits(h, "", 64));
        assert!(waits(h, "5\r\nab", 64));
        assert!(waits(h, "5\r\nabcde\r\n", 64));
        assert!(!waits(h, "5\r\nabcde\r\n0\r\n\r\n", 64));
        assert!(!waits(h, "5\r\nabcde\r\n", 8));
        // A chunk whose size line takes the body past the bound goes on at once (one over the
        // body limit is then refused at that line), one that does not is awaited.
        assert!(!waits(h, "41\r\nab", 64));
        assert!(waits(h, "40\r\nab", 64));
        assert!(!waits(
            h,
            "20\r\n0123456789abcdef0123456789abcdef\r\n21\r\n",
            64
        ));
        // Broken framing goes on to be answered 400 by the body reader.
        assert!(!waits(h, "zz\r\n", 64));
    }

    #[test]
    fn a_body_over_max_body_is_not_awaited() {
        let max = |head: &str, body: &str, max_body: u64| waits_within(head, body, 64, max_body);
        let h = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n";
        assert!(max(h, "", 11));
        assert!(!max(h, "", 10), "its length is over the limit");
        let h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(max(h, "8\r\n01234567\r\n3\r\nab", 11), "exactly the limit");
        assert!(
            !max(h, "8\r\n01234567\r\n4\r\nab", 11),
            "a size line past it"
        );
    }

    #[test]
    fn a_client_waiting_for_100_continue_is_not_awaited() {
        let h = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
        assert!(!waits(h, "", 16));
    }

    fn rule(grace: u64, rate: u64) -> (Instant, MinRate) {
        let t = Timeouts {
            min_rate_grace: Duration::from_secs(grace),
            header_min_rate: rate,
            body_min_rate: rate * 2,
            ..Timeouts::default()
        };
        let start = Instant::now();
        (start, MinRate::head(&t, start))
    }

    #[test]
    fn each_byte_extends_the_deadline_by_one_over_the_rate() {
        let (start, r) = rule(20, 500);
        assert_eq!(r.deadline(0), Some(start + Duration::from_secs(20)));
        assert_eq!(r.deadline(500), Some(start + Duration::from_secs(21)));
        assert_eq!(r.deadline(750), Some(start + Duration::from_millis(21_500)));
        assert_eq!(r.deadline(1), Some(start + Duration::from_millis(20_002)));
    }

    #[test]
    fn rate_zero_is_off() {
        let (start, r) = rule(20, 0);
        assert_eq!(r.deadline(1_000_000), None);
        let cap = start + Duration::from_secs(5);
        assert_eq!(r.earliest(0, cap), (cap, false));
    }

    #[test]
    fn the_earlier_deadline_binds_and_says_so() {
        let (start, r) = rule(2, 100);
        let cap = start + Duration::from_secs(60);
        assert_eq!(r.earliest(100, cap), (start + Duration::from_secs(3), true));
        // Enough bytes earn more than the cap: the cap binds.
        assert_eq!(r.earliest(10_000, cap), (cap, false));
    }

    #[test]
    fn body_rule_takes_the_body_rate() {
        let t = Timeouts {
            min_rate_grace: Duration::from_secs(1),
            header_min_rate: 1,
            body_min_rate: 1000,
            ..Timeouts::default()
        };
        let start = Instant::now();
        let r = MinRate::body(&t, start);
        assert_eq!(r.deadline(1000), Some(start + Duration::from_secs(2)));
    }

    #[test]
    fn sends_may_wait_the_grace_plus_what_the_client_took() {
        let t = Timeouts {
            min_rate_grace: Duration::from_secs(2),
            send_min_rate: 100,
            ..Timeouts::default()
        };
        let r = send_rate(&t).unwrap();
        let ms = Duration::from_millis;
        assert_eq!(r.left(0, Duration::ZERO), Duration::from_secs(2));
        // 250 bytes taken earn 2.5 s; 4 s waited leave 0.5 s.
        assert_eq!(r.left(250, Duration::ZERO), ms(4_500));
        assert_eq!(r.left(250, Duration::from_secs(4)), ms(500));
        // The send timeout binds while it is the shorter; then the rule does.
        let send = Some(ms(300));
        assert_eq!(
            SendRate::bound(Some(r.left(250, ms(4_000))), send),
            (send, false)
        );
        assert_eq!(
            SendRate::bound(Some(r.left(250, ms(4_300))), send),
            (Some(ms(200)), true)
        );
        assert_eq!(r.left(250, ms(5_300)), Duration::ZERO);
        assert_eq!(r.slow_reader().kind(), std::io::ErrorKind::TimedOut);
        assert!(r
            .slow_reader()
            .to_string()
            .contains("send_min_rate (100 bytes/s)"));
        // No rule: the send timeout alone.
        assert_eq!(SendRate::bound(None, send), (send, false));
        assert_eq!(SendRate::bound(None, None), (None, false));
        // Off at 0; a huge count saturates instead of overflowing.
        let off = Timeouts {
            send_min_rate: 0,
            ..Timeouts::default()
        };
        assert_eq!(send_rate(&off), None);
        let r = send_rate(&Timeouts {
            send_min_rate: 1,
            ..Timeouts::default()
        })
        .unwrap();
        assert_eq!(r.left(u64::MAX, Duration::ZERO), Duration::MAX);
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        // u64::MAX seconds do not fit an Instant: no deadline rather than a panic.
        let (_, r) = rule(20, 1);
        assert_eq!(r.deadline(u64::MAX), None);
        let (start, r) = rule(0, 3);
        assert_eq!(
            r.deadline(3_000_000_000),
            Some(start + Duration::from_secs(1_000_000_000))
        );
    }
}
