//! The connection prelude: what a connection must say before it carries requests, as one
//! sans-I/O state machine that every model drives with its own reads and waits.
//!
//! A new connection goes through, in order and each only where its listener asks for it:
//! the PROXY protocol header (`[[listen]] proxy_protocol`, within the header-read timeout from
//! the accept), the TLS handshake (the first bytes tell a ClientHello from plain HTTP or
//! garbage; rustls does the rest, within `timeouts.tls_handshake`), the count against
//! `limits.conn_per_ip`, and then the protocol that ALPN (or the listener) chose. Each
//! request's head then follows the head rules (`head.rs`), and a model that reads a small
//! body ahead of its handler follows [`BodyDue`].
//!
//! [`Prelude::step`] looks at the bytes buffered so far and the clock and says what to do
//! next ([`Step`]); a deadline passed is found by stepping again. Every refusal carries its
//! [`Reason`], so the log line reads the same on every model, and [`refuse`] writes the
//! answer's bytes and log lines the same way for each. The blocking driver (`driver.rs`), the
//! pipeline's receive stage and the process master all drive this one machine; the protocol
//! it hands over ([`Protocol`]) is where an HTTP/2 driver will enter.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use weft_http::h2::PREFACE;
use weft_http::proxy_protocol::{self, Parsed, Proxied, ProxyError};
use weft_http::RequestHead;

use crate::app::App;
use crate::config::{Config, Timeouts};
use crate::metrics::ListenerMetrics;
use crate::minrate::{self, MinRate};

use super::ConnInfo;

/// The TLS record type of a handshake message: the first byte of every ClientHello.
pub(crate) const HANDSHAKE_RECORD: u8 = 0x16;

/// The protocol a connection speaks once its prelude is done: the listener's, or what the
/// TLS handshake's ALPN settled. Each has its own driver above the prelude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.x (`conn::serve` and the pipeline's stages).
    Http1,
    /// HTTP/2 (`conn::h2`): ALPN `h2`, or the preface on an h2c listener.
    Http2,
}

impl Protocol {
    /// The protocol an ALPN answer names (`None`: the client offered none, which means
    /// HTTP/1.1 for a web server).
    pub(crate) fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
        match alpn {
            Some(b"h2") => Protocol::Http2,
            _ => Protocol::Http1,
        }
    }
}

/// Where a connection is in its prelude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Its PROXY protocol header is awaited until `deadline`.
    Proxy { deadline: Instant },
    /// Its TLS handshake is awaited until `deadline`: the first bytes, which must begin a
    /// ClientHello.
    Tls { deadline: Instant },
    /// Its TLS handshake is under way (the driver's, with rustls) until `deadline`.
    Handshaking { deadline: Instant },
    /// It is to be counted against `limits.conn_per_ip` (its client address is known).
    Admit,
    /// On an h2c listener, its first bytes are awaited until `deadline` to tell the HTTP/2
    /// preface from an HTTP/1.1 request.
    Sniff { deadline: Instant },
    /// It carries requests in this protocol.
    Open(Protocol),
}

/// What to do next, from [`Prelude::step`].
#[derive(Debug)]
pub(crate) enum Step {
    /// Read more (up to `max` bytes buffered in all), waiting until `until`; then step again
    /// (past `until`, the step says what the lateness means).
    Read { max: usize, until: Instant },
    /// A PROXY header of `len` bytes is at the front of the buffer: consume it and record
    /// `client` (`None`: a header that names none, such as a balancer's health check).
    Proxied {
        len: usize,
        client: Option<SocketAddr>,
    },
    /// Count the connection against `limits.conn_per_ip` by its client address
    /// ([`Prelude::admit`], or [`Prelude::counted`] where the count is kept elsewhere).
    Admit,
    /// The buffered bytes begin a ClientHello: run the TLS handshake with them first, by
    /// `until`, then tell [`Prelude::secured`].
    Handshake { until: Instant },
    /// The prelude is done: serve requests in this protocol.
    Open(Protocol),
    /// Answer this status in plain HTTP, log the reason, and close ([`refuse`]).
    Answer(u16, Reason),
    /// Close without an answer (not an HTTP client, or not yet one), logging the reason.
    Close(Reason),
}

/// Why a connection was refused or closed: one wording per cause, on every model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A rule of the request head or body (the 4xx's reason from weft-http or the deadlines).
    Rule(&'static str),
    /// No whole PROXY header within the header-read timeout.
    ProxyLate(Duration),
    /// What came first was not a PROXY header.
    ProxyBad(ProxyError),
    /// The client closed before its PROXY header was whole.
    ProxyCut,
    /// The first bytes on a TLS listener were neither TLS nor HTTP.
    NotTls,
    /// Plain HTTP on a TLS listener (answered 400, as nginx answers it).
    PlainHttp,
    /// The TLS handshake did not finish within `timeouts.tls_handshake`.
    TlsLate(Duration),
    /// The client closed before (or during) the TLS handshake.
    TlsCut,
    /// More connections open from `client` than `limit` (the setting's name and value).
    ConnPerIp { limit: String, client: IpAddr },
    /// The client closed in the middle of a request head.
    HeadCut,
}

impl Reason {
    /// The level its log line is written at: a client's plain going away is a debug line.
    pub(crate) fn level(&self) -> log::Level {
        match self {
            Reason::TlsCut | Reason::HeadCut => log::Level::Debug,
            _ => log::Level::Info,
        }
    }

    /// Writes the reason's log line for the connection from `peer`; `status` when it is
    /// answered.
    pub(crate) fn log(&self, peer: SocketAddr, status: Option<u16>) {
        match status {
            Some(s) => log::log!(self.level(), "{peer}: {s} {self}"),
            None => log::log!(self.level(), "{peer}: {self}"),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Rule(why) => f.write_str(why),
            Reason::ProxyLate(t) => write!(f, "no PROXY header within {t:?}; connection closed"),
            Reason::ProxyBad(e) => write!(f, "{e}; connection closed"),
            Reason::ProxyCut => f.write_str("closed before its PROXY header"),
            Reason::NotTls => f.write_str("not a TLS handshake; connection closed"),
            Reason::PlainHttp => f.write_str("plain HTTP request sent to the HTTPS port"),
            Reason::TlsLate(t) => write!(f, "TLS handshake not done within {t:?}; closed"),
            Reason::TlsCut => f.write_str("closed before the end of the TLS handshake"),
            Reason::ConnPerIp { limit, client } => {
                write!(f, "more than {limit} connections open from {client}")
            }
            Reason::HeadCut => f.write_str("closed in the middle of a request head"),
        }
    }
}

/// One connection's prelude: its stage and that stage's deadline. A few words; the process
/// master keeps one per held connection, and a forked child goes on with its copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prelude {
    stage: Stage,
    /// The listener speaks TLS (the stage after the PROXY header).
    tls: bool,
    /// What requests will speak: the listener's, until ALPN says otherwise.
    protocol: Protocol,
    /// The listener takes HTTP/2 with prior knowledge (`[[listen]] h2c`; plain listeners).
    h2c: bool,
    /// On an h2c listener, when the first bytes must have come: the header-read timeout from
    /// the accept (or from where a driver resumed the prelude).
    sniff_due: Instant,
}

impl Prelude {
    /// The prelude of a connection accepted at `now` on listener `lm`.
    pub(crate) fn new(lm: &ListenerMetrics, t: &Timeouts, now: Instant) -> Prelude {
        let tls = lm.tls();
        let stage = if lm.proxy_protocol() {
            Stage::Proxy {
                deadline: now + t.header_read,
            }
        } else {
            after_proxy(tls, t, now)
        };
        Prelude {
            stage,
            tls,
            protocol: Protocol::Http1,
            h2c: lm.h2c() && !tls,
            sniff_due: now + t.header_read,
        }
    }

    /// The prelude of `info`'s connection, at the first stage its facts do not settle yet: a
    /// driver that starts after another has done part of it (a process model's child after
    /// its master, the blocking driver after `tls::start`) goes on from there.
    pub(crate) fn resume(info: &ConnInfo, t: &Timeouts, now: Instant) -> Prelude {
        let mut p = Prelude::new(&info.listener, t, now);
        if info.proxied.get().is_some() && matches!(p.stage, Stage::Proxy { .. }) {
            p.stage = after_proxy(p.tls, t, now);
        }
        if let Some(tls) = info.tls.get() {
            p.secured(tls.alpn.as_deref());
        }
        if info.client_slot.get().is_some() {
            p.counted();
        }
        p
    }

    /// Where the connection is.
    #[cfg(test)]
    pub(crate) fn stage(&self) -> Stage {
        self.stage
    }

    /// When the stage must be done (none once it waits only on the driver).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Proxy { deadline }
            | Stage::Tls { deadline }
            | Stage::Handshaking { deadline }
            | Stage::Sniff { deadline } => Some(deadline),
            Stage::Admit | Stage::Open(_) => None,
        }
    }

    /// True once requests may be read.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self.stage, Stage::Open(_))
    }

    /// What to do with `data` (the bytes buffered so far, unconsumed) at `now`.
    pub(crate) fn step(&mut self, data: &[u8], cfg: &Config, now: Instant) -> Step {
        let t = &cfg.timeouts;
        match self.stage {
            Stage::Proxy { deadline } => match proxy_protocol::parse(data) {
                Ok(Parsed::Done { proxied, len }) => {
                    self.stage = after_proxy(self.tls, t, now);
                    let client = match proxied {
                        Proxied::Tcp { source, .. } => Some(source),
                        Proxied::Local => None,
                    };
                    Step::Proxied { len, client }
                }
                Err(e) => Step::Close(Reason::ProxyBad(e)),
                Ok(Parsed::Partial) if deadline <= now => {
                    Step::Close(Reason::ProxyLate(t.header_read))
                }
                Ok(Parsed::Partial) => Step::Read {
                    max: proxy_read_max(cfg),
                    until: deadline,
                },
            },
            // Past the deadline, whatever has come: a handshake begun now would have no time.
            Stage::Tls { deadline } | Stage::Handshaking { deadline } if deadline <= now => {
                Step::Close(Reason::TlsLate(t.tls_handshake))
            }
            Stage::Tls { deadline } => match data.first() {
                Some(&HANDSHAKE_RECORD) => {
                    self.stage = Stage::Handshaking { deadline };
                    Step::Handshake { until: deadline }
                }
                // A request line begins with a method in capitals.
                Some(b) if b.is_ascii_uppercase() => Step::Answer(400, Reason::PlainHttp),
                Some(_) => Step::Close(Reason::NotTls),
                None => Step::Read {
                    max: super::READ_BUF,
                    until: deadline,
                },
            },
            // Bytes for a handshake that has begun go to it, whatever they are.
            Stage::Handshaking { deadline } if !data.is_empty() => {
                Step::Handshake { until: deadline }
            }
            Stage::Handshaking { deadline } => Step::Read {
                max: super::READ_BUF,
                until: deadline,
            },
            Stage::Admit => Step::Admit,
            Stage::Sniff { deadline } => {
                let n = data.len().min(PREFACE.len());
                if data[..n] != PREFACE[..n] {
                    match first_line_protocol(data) {
                        Some(p) => {
                            self.stage = Stage::Open(p);
                            Step::Open(p)
                        }
                        None if deadline <= now => {
                            Step::Answer(408, Reason::Rule(super::head_late(false)))
                        }
                        None => Step::Read {
                            max: super::READ_BUF,
                            until: deadline,
                        },
                    }
                } else if n == PREFACE.len() {
                    self.stage = Stage::Open(Protocol::Http2);
                    Step::Open(Protocol::Http2)
                } else if deadline <= now {
                    // Nothing, or part of the preface only: as a head that did not come.
                    Step::Answer(408, Reason::Rule(super::head_late(false)))
                } else {
                    Step::Read {
                        max: super::READ_BUF,
                        until: deadline,
                    }
                }
            }
            Stage::Open(p) => Step::Open(p),
        }
    }

    /// The handshake's end past its deadline: what to log when the driver's handshake ran out
    /// of time.
    pub(crate) fn handshake_late(cfg: &Config) -> Reason {
        Reason::TlsLate(cfg.timeouts.tls_handshake)
    }

    /// The TLS handshake is done, with this ALPN answer: the connection is counted next.
    pub(crate) fn secured(&mut self, alpn: Option<&[u8]>) -> Protocol {
        self.protocol = Protocol::from_alpn(alpn);
        if let Stage::Tls { .. } | Stage::Handshaking { .. } = self.stage {
            self.stage = Stage::Admit;
        }
        self.protocol
    }

    /// Counts `info`'s connection against `limits.conn_per_ip` ([`admit`]); `Err` is the
    /// refusal, answered 503. Requests may follow once it is counted.
    pub(crate) fn admit(&mut self, app: &App, info: &ConnInfo) -> Result<(), Reason> {
        admit(app, info)?;
        self.counted();
        Ok(())
    }

    /// The connection was counted (by a driver that keeps the count elsewhere: the process
    /// master); requests may follow.
    pub(crate) fn counted(&mut self) {
        if self.stage == Stage::Admit {
            self.stage = if self.h2c {
                Stage::Sniff {
                    deadline: self.sniff_due,
                }
            } else {
                Stage::Open(self.protocol)
            };
        }
    }

    /// What a client's close with `buffered` bytes unconsumed means at this stage: `None` for
    /// a quiet end (nothing of a request begun).
    pub(crate) fn ended(&self, buffered: usize) -> Option<Reason> {
        match self.stage {
            Stage::Proxy { .. } => Some(Reason::ProxyCut),
            Stage::Tls { .. } | Stage::Handshaking { .. } => Some(Reason::TlsCut),
            Stage::Admit | Stage::Sniff { .. } | Stage::Open(_) => {
                (buffered > 0).then_some(Reason::HeadCut)
            }
        }
    }
}

/// On an h2c listener, what a connection that does not begin with the HTTP/2 preface speaks,
/// from its first line: HTTP/1.1 if it ends as an HTTP/1.x request line does (or is longer
/// than the prelude reads: the head rules answer it), else HTTP/2, whose driver refuses the
/// bad preface with GOAWAY PROTOCOL_ERROR (RFC 9113 §3.4). `None` until the line is whole.
fn first_line_protocol(data: &[u8]) -> Option<Protocol> {
    let Some(end) = data.iter().position(|&b| b == b'\n') else {
        return (data.len() >= super::READ_BUF).then_some(Protocol::Http1);
    };
    let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
    let http1 = line.len() >= 9 && {
        let v = &line[line.len() - 9..];
        v.starts_with(b" HTTP/1.") && v[8].is_ascii_digit()
    };
    Some(if http1 {
        Protocol::Http1
    } else {
        Protocol::Http2
    })
}

/// The stage after a PROXY header (or instead of one): the handshake on a TLS listener, else
/// the count.
fn after_proxy(tls: bool, t: &Timeouts, now: Instant) -> Stage {
    if tls {
        Stage::Tls {
            deadline: now + t.tls_handshake,
        }
    } else {
        Stage::Admit
    }
}

/// The read buffer's limit while a PROXY header is read: room for the longest one.
pub(crate) fn proxy_read_max(cfg: &Config) -> usize {
    (cfg.limits.max_head_bytes + 1).max(16 + proxy_protocol::V2_MAX_PAYLOAD)
}

/// Counts `info`'s connection against `limits.conn_per_ip` by its client address (the PROXY
/// header's, once read), keeping the count in `info.client_slot` for the connection's life;
/// the refusal's reason when that address has as many open already. At once for a
/// connection counted already (by the process model's master).
pub(crate) fn admit(app: &App, info: &ConnInfo) -> Result<(), Reason> {
    if info.client_slot.get().is_some() {
        return Ok(());
    }
    let slot = count(app, &info.listener, info.client().ip())?;
    let _ = info.client_slot.set(slot);
    Ok(())
}

/// Counts a connection from `client` on listener `lm` against `limits.conn_per_ip`: its slot,
/// or the refusal's reason.
pub(crate) fn count(
    app: &App,
    lm: &ListenerMetrics,
    client: IpAddr,
) -> Result<crate::limits_ip::ConnSlot, Reason> {
    crate::limits_ip::admit(&app.clients, &app.cfg, lm, client).map_err(|_| Reason::ConnPerIp {
        limit: crate::limits_ip::conn_limit(&app.cfg, lm),
        client,
    })
}

/// Logs a refusal with `status` once, as every model logs it: the reason in the error log and,
/// for a request whose head was not read, an access-log line with what the client sent
/// (`received`, whose first line names the request). Encodes the answer into `wbuf`.
pub(crate) fn refuse(
    app: &App,
    peer: SocketAddr,
    client: IpAddr,
    received: Option<&[u8]>,
    status: u16,
    why: &Reason,
    wbuf: &mut Vec<u8>,
) -> super::Encoded {
    why.log(peer, Some(status));
    if let Some(received) = received {
        super::log_refused(app, client, received, status);
    }
    wbuf.clear();
    super::encode_response(wbuf, super::failure(status), None, false, b"")
}

/// When the body of a request read ahead of its handler must be whole: the body-read timeout
/// since its last bytes (nginx's `client_body_timeout`) and the minimum rate
/// (`timeouts.body_min_rate`) from the head. The pipeline's receive stage and the process
/// master read a small body ahead this way, so a slow one waits in their poller and holds no
/// handler thread or process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyDue {
    deadline: Instant,
    rate: MinRate,
}

/// What a body read ahead needs next, from [`BodyDue::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyStep {
    /// Nothing more to wait for: the handler may run (the body is whole, or too large to be
    /// read ahead, or there is none).
    Ready,
    /// Read more by `until`; past it the answer is 408 with `late`.
    Read { until: Instant, late: &'static str },
    /// Too late: answer 408 with this reason.
    Late(&'static str),
}

impl BodyDue {
    /// Whether the body of `head`, of which `body` has arrived, is read ahead at all: `None`
    /// when the handler may run now; else its deadlines from `now`.
    pub(crate) fn begin(
        head: &RequestHead,
        body: &[u8],
        cfg: &Config,
        now: Instant,
    ) -> Option<BodyDue> {
        minrate::wait_for_body(head, body, &cfg.limits).then(|| BodyDue {
            deadline: now + cfg.timeouts.body_read,
            rate: MinRate::body(&cfg.timeouts, now),
        })
    }

    /// More of the body arrived at `now`: the body-read timeout counts from here.
    pub(crate) fn progressed(&mut self, t: &Timeouts, now: Instant) {
        self.deadline = now + t.body_read;
    }

    /// What the body of `head`, of which `body` has arrived, needs at `now`.
    pub(crate) fn step(
        &self,
        head: &RequestHead,
        body: &[u8],
        cfg: &Config,
        now: Instant,
    ) -> BodyStep {
        if !minrate::wait_for_body(head, body, &cfg.limits) {
            return BodyStep::Ready;
        }
        let (until, late) = self.due(body.len());
        if until <= now {
            BodyStep::Late(late)
        } else {
            BodyStep::Read { until, late }
        }
    }

    /// When the body must have come on, with `received` bytes of it here, and the 408's reason
    /// past that.
    pub(crate) fn due(&self, received: usize) -> (Instant, &'static str) {
        let (until, slow) = self.rate.earliest(received as u64, self.deadline);
        let late = if slow {
            "request body below timeouts.body_min_rate"
        } else {
            "request body not received in time"
        };
        (until, late)
    }
}

#[cfg(test)]
mod tests;
