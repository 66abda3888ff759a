//! The frame layer (RFC 9113 §4 and §6): the 9-byte header, each frame type's payload, and
//! the error codes.
//!
//! [`parse`] checks what a frame's own bytes can tell (its stream identifier against its
//! type, its length, its padding) and says whether a fault is the connection's or one
//! stream's; what depends on the connection's state (stream states, windows, settings
//! values) is the connection's business. The `write_*` functions append whole frames to an
//! output buffer.

use super::StreamId;

/// The length of a frame header (RFC 9113 §4.1).
pub(crate) const HEADER_LEN: usize = 9;

/// The largest window or window increment (RFC 9113 §6.9.1): 2^31 - 1.
pub(crate) const MAX_WINDOW: u32 = (1 << 31) - 1;

/// The initial window of every stream and of the connection (RFC 9113 §6.9.2).
pub(crate) const DEFAULT_WINDOW: u32 = 65_535;

/// The smallest SETTINGS_MAX_FRAME_SIZE, and every peer's until it says otherwise.
pub(crate) const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE (2^24 - 1).
pub(crate) const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// Frame flags (RFC 9113 §6). END_STREAM and ACK share a bit on different frame types.
pub(crate) mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2).
pub(crate) mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The frame types weft knows (RFC 9113 §6); others are ignored as §5.5 requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    Unknown(u8),
}

impl FrameKind {
    /// The kind of type octet `t`.
    pub fn from_u8(t: u8) -> FrameKind {
        match t {
            0x0 => FrameKind::Data,
            0x1 => FrameKind::Headers,
            0x2 => FrameKind::Priority,
            0x3 => FrameKind::RstStream,
            0x4 => FrameKind::Settings,
            0x5 => FrameKind::PushPromise,
            0x6 => FrameKind::Ping,
            0x7 => FrameKind::GoAway,
            0x8 => FrameKind::WindowUpdate,
            0x9 => FrameKind::Continuation,
            t => FrameKind::Unknown(t),
        }
    }

    /// The type octet of this kind.
    pub fn as_u8(self) -> u8 {
        match self {
            FrameKind::Data => 0x0,
            FrameKind::Headers => 0x1,
            FrameKind::Priority => 0x2,
            FrameKind::RstStream => 0x3,
            FrameKind::Settings => 0x4,
            FrameKind::PushPromise => 0x5,
            FrameKind::Ping => 0x6,
            FrameKind::GoAway => 0x7,
            FrameKind::WindowUpdate => 0x8,
            FrameKind::Continuation => 0x9,
            FrameKind::Unknown(t) => t,
        }
    }
}

/// The error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NoError,
    Protocol,
    Internal,
    FlowControl,
    SettingsTimeout,
    StreamClosed,
    FrameSize,
    RefusedStream,
    Cancel,
    Compression,
    Connect,
    EnhanceYourCalm,
    InadequateSecurity,
    Http11Required,
    /// A code this implementation does not name (kept as received).
    Other(u32),
}

impl ErrorCode {
    /// The code of wire value `v` (unknown values are kept, RFC 9113 §7).
    pub fn from_u32(v: u32) -> ErrorCode {
        match v {
            0x0 => ErrorCode::NoError,
            0x1 => ErrorCode::Protocol,
            0x2 => ErrorCode::Internal,
            0x3 => ErrorCode::FlowControl,
            0x4 => ErrorCode::SettingsTimeout,
            0x5 => ErrorCode::StreamClosed,
            0x6 => ErrorCode::FrameSize,
            0x7 => ErrorCode::RefusedStream,
            0x8 => ErrorCode::Cancel,
            0x9 => ErrorCode::Compression,
            0xa => ErrorCode::Connect,
            0xb => ErrorCode::EnhanceYourCalm,
            0xc => ErrorCode::InadequateSecurity,
            0xd => ErrorCode::Http11Required,
            v => ErrorCode::Other(v),
        }
    }

    /// The wire value of this code.
    pub fn as_u32(self) -> u32 {
        match self {
            ErrorCode::NoError => 0x0,
            ErrorCode::Protocol => 0x1,
            ErrorCode::Internal => 0x2,
            ErrorCode::FlowControl => 0x3,
            ErrorCode::SettingsTimeout => 0x4,
            ErrorCode::StreamClosed => 0x5,
            ErrorCode::FrameSize => 0x6,
            ErrorCode::RefusedStream => 0x7,
            ErrorCode::Cancel => 0x8,
            ErrorCode::Compression => 0x9,
            ErrorCode::Connect => 0xa,
            ErrorCode::EnhanceYourCalm => 0xb,
            ErrorCode::InadequateSecurity => 0xc,
            ErrorCode::Http11Required => 0xd,
            ErrorCode::Other(v) => v,
        }
    }
}

/// A frame header (RFC 9113 §4.1); the reserved bit of the stream identifier is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub len: u32,
    pub kind: FrameKind,
    pub flags: u8,
    pub stream: StreamId,
}

impl FrameHeader {
    /// The header at the start of `b`, if all nine bytes are there.
    pub fn parse(b: &[u8]) -> Option<FrameHeader> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: FrameKind::from_u8(b[3]),
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        })
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Appends a frame header. `len` must fit 24 bits (the callers split at the peer's
/// SETTINGS_MAX_FRAME_SIZE, itself below 2^24).
pub(crate) fn write_header(
    out: &mut Vec<u8>,
    len: usize,
    kind: FrameKind,
    flags: u8,
    stream: StreamId,
) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind.as_u8(), flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Appends a SETTINGS frame carrying `params` in order.
pub(crate) fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_header(out, params.len() * 6, FrameKind::Settings, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub(crate) fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, 0, FrameKind::Settings, flag::ACK, 0);
}

/// Appends a PING (an acknowledgement if `ack`) with `data`.
pub(crate) fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    let flags = if ack { flag::ACK } else { 0 };
    write_header(out, 8, FrameKind::Ping, flags, 0);
    out.extend_from_slice(&data);
}

/// Appends a WINDOW_UPDATE of `increment` (1..=2^31-1) for `stream` (0: the connection).
pub(crate) fn write_window_update(out: &mut Vec<u8>, stream: StreamId, increment: u32) {
    debug_assert!(increment > 0 && increment <= MAX_WINDOW);
    write_header(out, 4, FrameKind::WindowUpdate, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Appends a RST_STREAM of `stream` with `code`.
pub(crate) fn write_rst_stream(out: &mut Vec<u8>, stream: StreamId, code: ErrorCode) {
    write_header(out, 4, FrameKind::RstStream, 0, stream);
    out.extend_from_slice(&code.as_u32().to_be_bytes());
}

/// Appends a GOAWAY naming `last_stream` with `code` and no debug data.
pub(crate) fn write_goaway(out: &mut Vec<u8>, last_stream: StreamId, code: ErrorCode) {
    write_header(out, 8, FrameKind::GoAway, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.as_u32().to_be_bytes());
}

/// The priority fields of HEADERS and PRIORITY (RFC 9113 §5.3.2, §6.3): read to check a
/// stream does not depend on itself, otherwise unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Priority {
    pub dependency: StreamId,
    pub exclusive: bool,
    pub weight: u8,
}

impl Priority {
    fn parse(b: &[u8; 5]) -> Priority {
        let d = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Priority {
            dependency: d & MAX_WINDOW,
            exclusive: d & !MAX_WINDOW != 0,
            weight: b[4],
        }
    }
}

/// One frame whose payload has been checked against its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// `data` is the payload less any padding; the whole payload length (`header.len`) is
    /// what flow control counts.
    Data {
        end_stream: bool,
        data: &'a [u8],
    },
    Headers {
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        fragment: &'a [u8],
    },
    Priority(Priority),
    RstStream(ErrorCode),
    /// Parameters in order: iterate with [`settings`].
    Settings {
        ack: bool,
        params: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: StreamId,
        code: ErrorCode,
    },
    /// The increment as sent (0 is the connection's to refuse, with a scope it decides).
    WindowUpdate(u32),
    Continuation {
        end_headers: bool,
        fragment: &'a [u8],
    },
    Unknown,
}

/// A frame that breaks RFC 9113 §6 by its own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameError {
    pub code: ErrorCode,
    /// True when only the frame's stream is in error (RFC 9113 §5.4.2); otherwise the
    /// connection is.
    pub stream_only: bool,
    pub reason: &'static str,
}

fn conn_err(code: ErrorCode, reason: &'static str) -> FrameError {
    FrameError {
        code,
        stream_only: false,
        reason,
    }
}

/// The frame of `h` and its whole `payload` (`payload.len() == h.len`).
pub(crate) fn parse<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    debug_assert_eq!(payload.len(), h.len as usize);
    let on_stream = |f: Frame<'a>| {
        if h.stream == 0 {
            Err(conn_err(ErrorCode::Protocol, "frame type needs a stream"))
        } else {
            Ok(f)
        }
    };
    let on_connection = |f: Frame<'a>| {
        if h.stream != 0 {
            Err(conn_err(ErrorCode::Protocol, "frame type needs stream 0"))
        } else {
            Ok(f)
        }
    };
    match h.kind {
        FrameKind::Data => {
            let data = unpad(h, payload)?;
            on_stream(Frame::Data {
                end_stream: h.has(flag::END_STREAM),
                data,
            })
        }
        FrameKind::Headers => {
            let mut fragment = unpad(h, payload)?;
            let mut priority = None;
            if h.has(flag::PRIORITY) {
                let Some((p, rest)) = fragment.split_first_chunk::<5>() else {
                    return Err(conn_err(ErrorCode::Protocol, "HEADERS too short"));
                };
                priority = Some(Priority::parse(p));
                fragment = rest;
            }
            on_stream(Frame::Headers {
                end_stream: h.has(flag::END_STREAM),
                end_headers: h.has(flag::END_HEADERS),
                priority,
                fragment,
            })
        }
        FrameKind::Priority => {
            if h.stream == 0 {
                return Err(conn_err(ErrorCode::Protocol, "PRIORITY on stream 0"));
            }
            let Ok(p) = <&[u8; 5]>::try_from(payload) else {
                // RFC 9113 §6.3: a stream error.
                return Err(FrameError {
                    code: ErrorCode::FrameSize,
                    stream_only: true,
                    reason: "PRIORITY length not 5",
                });
            };
            Ok(Frame::Priority(Priority::parse(p)))
        }
        FrameKind::RstStream => {
            let Ok(c) = <[u8; 4]>::try_from(payload) else {
                return Err(conn_err(ErrorCode::FrameSize, "RST_STREAM length not 4"));
            };
            on_stream(Frame::RstStream(ErrorCode::from_u32(u32::from_be_bytes(c))))
        }
        FrameKind::Settings => {
            on_connection(Frame::Unknown)?;
            let ack = h.has(flag::ACK);
            if ack && !payload.is_empty() {
                return Err(conn_err(ErrorCode::FrameSize, "SETTINGS ACK with payload"));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(conn_err(
                    ErrorCode::FrameSize,
                    "SETTINGS length not a multiple of 6",
                ));
            }
            Ok(Frame::Settings {
                ack,
                params: payload,
            })
        }
        FrameKind::PushPromise => Err(conn_err(ErrorCode::Protocol, "PUSH_PROMISE from a client")),
        FrameKind::Ping => {
            on_connection(Frame::Unknown)?;
            let Ok(data) = <[u8; 8]>::try_from(payload) else {
                return Err(conn_err(ErrorCode::FrameSize, "PING length not 8"));
            };
            Ok(Frame::Ping {
                ack: h.has(flag::ACK),
                data,
            })
        }
        FrameKind::GoAway => {
            on_connection(Frame::Unknown)?;
            let Some((head, _debug)) = payload.split_first_chunk::<8>() else {
                return Err(conn_err(ErrorCode::FrameSize, "GOAWAY shorter than 8"));
            };
            Ok(Frame::GoAway {
                last_stream: u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & MAX_WINDOW,
                code: ErrorCode::from_u32(u32::from_be_bytes([head[4], head[5], head[6], head[7]])),
            })
        }
        FrameKind::WindowUpdate => {
            let Ok(i) = <[u8; 4]>::try_from(payload) else {
                return Err(conn_err(ErrorCode::FrameSize, "WINDOW_UPDATE length not 4"));
            };
            Ok(Frame::WindowUpdate(u32::from_be_bytes(i) & MAX_WINDOW))
        }
        FrameKind::Continuation => on_stream(Frame::Continuation {
            end_headers: h.has(flag::END_HEADERS),
            fragment: payload,
        }),
        FrameKind::Unknown(_) => Ok(Frame::Unknown),
    }
}

/// The payload of a PADDED frame less its pad length octet and padding (RFC 9113 §6.1).
fn unpad<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if !h.has(flag::PADDED) {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(conn_err(
            ErrorCode::Protocol,
            "padded frame without pad length",
        ));
    };
    let pad = pad as usize;
    if pad > rest.len() {
        return Err(conn_err(ErrorCode::Protocol, "padding longer than payload"));
    }
    Ok(&rest[..rest.len() - pad])
}

/// The (identifier, value) pairs of a SETTINGS payload already checked by [`parse`].
pub(crate) fn settings(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params.chunks_exact(6).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u32, kind: FrameKind, flags: u8, stream: StreamId) -> FrameHeader {
        FrameHeader {
            len,
            kind,
            flags,
            stream,
        }
    }

    fn parse_bytes(b: &[u8]) -> Result<Frame<'_>, FrameError> {
        let h = FrameHeader::parse(b).unwrap();
        parse(&h, &b[HEADER_LEN..])
    }

    #[test]
    fn header_round_trip_and_reserved_bit() {
        let mut out = Vec::new();
        write_header(&mut out, 0x01_02_03, FrameKind::Headers, 0x25, 7);
        assert_eq!(out, [1, 2, 3, 1, 0x25, 0, 0, 0, 7]);
        let h = FrameHeader::parse(&out).unwrap();
        assert_eq!(h, header(0x01_02_03, FrameKind::Headers, 0x25, 7));
        // The reserved bit is ignored on receipt (RFC 9113 §4.1).
        let h = FrameHeader::parse(&[0, 0, 0, 0xee, 0, 0x80, 0, 0, 1]).unwrap();
        assert_eq!(h, header(0, FrameKind::Unknown(0xee), 0, 1));
        assert_eq!(FrameHeader::parse(&out[..8]), None);
    }

    #[test]
    fn kinds_and_codes_round_trip() {
        for t in 0..=255u8 {
            assert_eq!(FrameKind::from_u8(t).as_u8(), t);
        }
        for v in (0..20).chain([0xffff_ffff]) {
            assert_eq!(ErrorCode::from_u32(v).as_u32(), v);
        }
        assert_eq!(ErrorCode::from_u32(0xb), ErrorCode::EnhanceYourCalm);
        assert_eq!(ErrorCode::from_u32(0xe), ErrorCode::Other(0xe));
    }

    #[test]
    fn data_padding() {
        // Padded: pad length 2, "ab", two zero octets.
        let f = [0, 0, 5, 0, 0x9, 0, 0, 0, 1, 2, b'a', b'b', 0, 0];
        assert_eq!(
            parse_bytes(&f),
            Ok(Frame::Data {
                end_stream: true,
                data: b"ab"
            })
        );
        // All padding is allowed: pad length 4 of 4 remaining octets.
        let f = [0, 0, 5, 0, 0x8, 0, 0, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(
            parse_bytes(&f),
            Ok(Frame::Data {
                end_stream: false,
                data: b""
            })
        );
        // One octet too much padding.
        let f = [0, 0, 5, 0, 0x8, 0, 0, 0, 1, 5, 0, 0, 0, 0];
        let e = parse_bytes(&f).unwrap_err();
        assert_eq!((e.code, e.stream_only), (ErrorCode::Protocol, false));
        // PADDED with an empty payload.
        let f = [0, 0, 0, 0, 0x8, 0, 0, 0, 1];
        assert_eq!(parse_bytes(&f).unwrap_err().code, ErrorCode::Protocol);
        // On stream 0.
        let f = [0, 0, 1, 0, 0, 0, 0, 0, 0, b'x'];
        assert_eq!(parse_bytes(&f).unwrap_err().code, ErrorCode::Protocol);
    }

    #[test]
    fn headers_padding_and_priority() {
        // PADDED | PRIORITY | END_HEADERS: pad 1, dependency 0x80000003 (exclusive), weight
        // 15, fragment 0x82, one padding octet.
        let f = [0, 0, 8, 1, 0x2c, 0, 0, 0, 5, 1, 0x80, 0, 0, 3, 15, 0x82, 0];
        assert_eq!(
            parse_bytes(&f),
            Ok(Frame::Headers {
                end_stream: false,
                end_headers: true,
                priority: Some(Priority {
                    dependency: 3,
                    exclusive: true,
                    weight: 15
                }),
                fragment: &[0x82],
            })
        );
        // PRIORITY flag without room for the fields.
        let f = [0, 0, 3, 1, 0x24, 0, 0, 0, 5, 0, 0, 0];
        assert_eq!(parse_bytes(&f).unwrap_err().code, ErrorCode::Protocol);
        // Padding covering the priority fields.
        let f = [0, 0, 6, 1, 0x2c, 0, 0, 0, 5, 5, 0, 0, 0, 0, 0];
        assert_eq!(parse_bytes(&f).unwrap_err().code, ErrorCode::Protocol);
        let f = [0, 0, 1, 1, 0x4, 0, 0, 0, 0, 0x82];
        assert_eq!(parse_bytes(&f).unwrap_err().code, ErrorCode::Protocol);
    }

    #[test]
    fn fixed_lengths() {
        let cases: &[(&[u8], ErrorCode, bool)] = &[
            // PRIORITY of 4 octets: a stream error.
            (
                &[0, 0, 4, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0],
                ErrorCode::FrameSize,
                true,
            ),
            // PRIORITY on stream 0.
            (
                &[0, 0, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
                ErrorCode::Protocol,
                false,
            ),
            (
                &[0, 0, 3, 3, 0, 0, 0, 0, 1, 0, 0, 0],
                ErrorCode::FrameSize,
                false,
            ),
            (
                &[0, 0, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0, 8],
                ErrorCode::Protocol,
                false,
            ),
            (
                &[0, 0, 6, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                ErrorCode::FrameSize,
                false,
            ),
            (
                &[0, 0, 8, 6, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
                ErrorCode::Protocol,
                false,
            ),
            (
                &[0, 0, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                ErrorCode::FrameSize,
                false,
            ),
            (
                &[0, 0, 8, 7, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
                ErrorCode::Protocol,
                false,
            ),
            (
                &[0, 0, 3, 8, 0, 0, 0, 0, 0, 0, 0, 1],
                ErrorCode::FrameSize,
                false,
            ),
            (&[0, 0, 0, 5, 0, 0, 0, 0, 1], ErrorCode::Protocol, false),
            (&[0, 0, 0, 9, 4, 0, 0, 0, 0], ErrorCode::Protocol, false),
        ];
        for (bytes, code, stream_only) in cases {
            let e = parse_bytes(bytes).unwrap_err();
            assert_eq!((e.code, e.stream_only), (*code, *stream_only), "{bytes:?}");
        }
        assert_eq!(
            parse_bytes(&[0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 8]),
            Ok(Frame::RstStream(ErrorCode::Cancel))
        );
        assert_eq!(
            parse_bytes(&[0, 0, 4, 8, 0, 0, 0, 0, 1, 0x80, 0, 0, 0]),
            Ok(Frame::WindowUpdate(0))
        );
        assert_eq!(
            parse_bytes(&[0, 0, 10, 7, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0x1f, b'h', b'i']),
            Ok(Frame::GoAway {
                last_stream: 9,
                code: ErrorCode::Other(0x1f)
            })
        );
        assert_eq!(
            parse_bytes(&[0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
            Ok(Frame::Ping {
                ack: true,
                data: [1, 2, 3, 4, 5, 6, 7, 8]
            })
        );
        // An unknown type on any stream, any length.
        assert_eq!(
            parse_bytes(&[0, 0, 1, 0x20, 0xff, 0, 0, 0, 0, 9]),
            Ok(Frame::Unknown)
        );
    }

    #[test]
    fn settings_frames() {
        let mut out = Vec::new();
        write_settings(
            &mut out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::MAX_FRAME_SIZE, 1 << 20),
            ],
        );
        let h = FrameHeader::parse(&out).unwrap();
        assert_eq!(h, header(12, FrameKind::Settings, 0, 0));
        let Ok(Frame::Settings { ack: false, params }) = parse(&h, &out[HEADER_LEN..]) else {
            panic!("not SETTINGS");
        };
        assert_eq!(settings(params).collect::<Vec<_>>(), [(2, 0), (5, 1 << 20)]);
        let mut ack = Vec::new();
        write_settings_ack(&mut ack);
        assert_eq!(ack, [0, 0, 0, 4, 1, 0, 0, 0, 0]);
        // ACK with a payload.
        let e = parse_bytes(&[0, 0, 6, 4, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]).unwrap_err();
        assert_eq!(e.code, ErrorCode::FrameSize);
    }

    #[test]
    fn writers() {
        let mut out = Vec::new();
        write_ping(&mut out, true, *b"12345678");
        assert_eq!(out, b"\0\0\x08\x06\x01\0\0\0\x0012345678");
        out.clear();
        write_window_update(&mut out, 3, MAX_WINDOW);
        assert_eq!(out, [0, 0, 4, 8, 0, 0, 0, 0, 3, 0x7f, 0xff, 0xff, 0xff]);
        out.clear();
        write_rst_stream(&mut out, 5, ErrorCode::RefusedStream);
        assert_eq!(out, [0, 0, 4, 3, 0, 0, 0, 0, 5, 0, 0, 0, 7]);
        out.clear();
        write_goaway(&mut out, 7, ErrorCode::EnhanceYourCalm);
        assert_eq!(out, [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0xb]);
    }
}
