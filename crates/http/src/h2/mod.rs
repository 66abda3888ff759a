//! HTTP/2 (RFC 9113) without I/O: frames, SETTINGS, flow control, stream states, GOAWAY,
//! RST_STREAM, PING and HPACK (RFC 7541, [`hpack`]) with a bounded dynamic table. Priorities
//! are parsed and ignored (RFC 9113 §5.3.2 allows it); there is no server push.
//!
//! A server feeds the bytes it reads to [`Connection::recv`], takes [`Event`]s out with
//! [`Connection::poll_event`], answers streams with [`Connection::send_headers`] and
//! [`Connection::send_data`] (which take what flow control allows now), and writes
//! [`Connection::output`] to the socket. Nothing here reads a clock except through the `now`
//! the caller passes, so floods and rapid resets are counted in the caller's time.
//!
//! Requests reach the caller validated as RFC 9113 §8 says (pseudo-header fields, no
//! connection-specific fields, lower-case names, no CR/LF/NUL, `content-length` against the
//! DATA received): a malformed request is reset with PROTOCOL_ERROR here and never becomes an
//! event.

mod conn;
mod frame;
pub mod hpack;

pub use conn::{Config, ConnError, Connection, Event, RequestHead2};
pub use frame::{ErrorCode, FrameKind};

/// What a client sends first on an HTTP/2 connection (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A stream identifier (31 bits; client-initiated streams are odd).
pub type StreamId = u32;
