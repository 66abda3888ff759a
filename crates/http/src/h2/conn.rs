//! One server-side HTTP/2 connection's state: the streams, both directions' flow-control
//! windows, the HPACK contexts, the limits against floods, and the bytes to send.

use std::time::Instant;

use super::{ErrorCode, StreamId};

/// The limits and settings of a server connection. `Default` gives weft's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised and enforced (default 128): a HEADERS
    /// opening a stream beyond it is refused with RST_STREAM REFUSED_STREAM.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE advertised: each stream's receive window (default 65,535).
    pub initial_window_size: u32,
    /// The connection's receive window (default 1 MiB), opened by a WINDOW_UPDATE on stream 0
    /// right after the server's SETTINGS.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE advertised: the largest frame payload accepted (default 16,384).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE advertised and enforced: the decoded size of a request's
    /// field section (names + values + 32 per field, as RFC 7541 §4.1 counts; default 16 KiB).
    /// Larger: the stream is answered 431 by the caller (see [`Event::Request`]'s
    /// `too_large`), or reset when even decoding must stop.
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE advertised: the HPACK decoder's dynamic table (default 4,096).
    pub header_table_size: u32,
    /// The most encoded bytes of one header block (HEADERS + CONTINUATION frames; default
    /// 64 KiB): more is a connection error ENHANCE_YOUR_CALM (the 2024 CONTINUATION flood).
    pub max_header_block: u32,
    /// Streams the client may reset (RST_STREAM), or have refused, per second before the
    /// connection ends with GOAWAY ENHANCE_YOUR_CALM (CVE-2023-44487, rapid reset; default
    /// 200, counted over a one-second window).
    pub max_resets_per_sec: u32,
    /// SETTINGS, PING, PRIORITY, empty DATA without END_STREAM, and WINDOW_UPDATE frames the
    /// client may send per second before GOAWAY ENHANCE_YOUR_CALM (default 1,000).
    pub max_control_per_sec: u32,
    /// The most bytes [`Connection::output`] may hold from the connection's own answers (PING
    /// and SETTINGS acknowledgements) while the client does not read them: more is a flood,
    /// GOAWAY ENHANCE_YOUR_CALM (default 64 KiB).
    pub max_control_backlog: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 128,
            initial_window_size: 65_535,
            connection_window: 1 << 20,
            max_frame_size: 16_384,
            max_header_list_size: 16 * 1024,
            header_table_size: 4096,
            max_header_block: 64 * 1024,
            max_resets_per_sec: 200,
            max_control_per_sec: 1000,
            max_control_backlog: 64 * 1024,
        }
    }
}

/// A request's header section, decoded and validated (RFC 9113 §8.3): the pseudo-header
/// fields apart, then the regular fields in order. Bytes live in one buffer; fields are
/// ranges into it, so a request costs two allocations, reused by [`Connection::recycle`].
#[derive(Debug, Default, Clone)]
pub struct RequestHead2 {
    /// The decoded bytes the ranges below point into.
    pub buf: Vec<u8>,
    /// `:method`.
    pub method: std::ops::Range<u32>,
    /// `:scheme` (absent for CONNECT).
    pub scheme: std::ops::Range<u32>,
    /// `:authority` (may be empty: the `host` field, if any, is among `fields`).
    pub authority: std::ops::Range<u32>,
    /// `:path` (absent, an empty range, only for CONNECT).
    pub path: std::ops::Range<u32>,
    /// Regular fields (name, value), names lower-case as received. `cookie` fields are kept
    /// apart as received; joining them with "; " (RFC 9113 §8.2.3) is the caller's.
    pub fields: Vec<(std::ops::Range<u32>, std::ops::Range<u32>)>,
    /// The `content-length` value, if one was given (already checked to be one valid number).
    pub content_length: Option<u64>,
}

impl RequestHead2 {
    /// The bytes of `r` (a range of this head).
    pub fn get(&self, r: &std::ops::Range<u32>) -> &[u8] {
        &self.buf[r.start as usize..r.end as usize]
    }
}

/// Something the connection learned from the bytes it received.
#[derive(Debug)]
pub enum Event {
    /// A new request on stream `id`. `end_stream`: it has no body. `too_large`: its field
    /// section passed `max_header_list_size` (the head holds what was kept; the caller answers
    /// 431 and the body, if any, is discarded by the connection).
    Request {
        id: StreamId,
        head: RequestHead2,
        end_stream: bool,
        too_large: bool,
    },
    /// Body bytes of stream `id`; `end_stream` ends the body. They count against the stream's
    /// receive window until the caller gives them back ([`Connection::release`]).
    Data {
        id: StreamId,
        data: Vec<u8>,
        end_stream: bool,
    },
    /// Trailers ended stream `id`'s body (their fields are discarded).
    Trailers { id: StreamId },
    /// The client reset stream `id` (or the connection did, for a malformed frame on it): drop
    /// its response.
    Reset { id: StreamId, code: ErrorCode },
    /// The client sent GOAWAY: no new streams will come; finish the open ones.
    GoAway { code: ErrorCode },
}

/// Why the connection must end: GOAWAY with `code` is already queued in the output (write it,
/// then close). `reason` is for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnError {
    pub code: ErrorCode,
    pub reason: &'static str,
}

/// A server-side HTTP/2 connection, after the client's preface has been recognised (the
/// caller passes the preface bytes to [`Connection::recv`] like any others).
#[derive(Debug)]
pub struct Connection {
    _private: (),
}

impl Connection {
    /// A connection with `cfg`; its SETTINGS (and the connection WINDOW_UPDATE) are queued in
    /// [`Connection::output`] at once.
    pub fn new(cfg: Config) -> Connection {
        let _ = cfg;
        todo!()
    }

    /// Takes the received `bytes` (any split: partial frames are kept until complete; the
    /// client preface first). Events are queued for [`Connection::poll_event`]. An error ends
    /// the connection (GOAWAY queued).
    pub fn recv(&mut self, bytes: &[u8], now: Instant) -> Result<(), ConnError> {
        let _ = (bytes, now);
        todo!()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        todo!()
    }

    /// Queues the response head of stream `id`: `:status` then `fields` (lower-case names,
    /// no connection-specific fields: the caller's), as one HEADERS frame (and CONTINUATION
    /// frames if larger than the peer's max frame size). `end_stream`: no body follows.
    /// Ignored if the stream is not open for sending (reset meanwhile).
    pub fn send_headers<'a>(
        &mut self,
        id: StreamId,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) {
        let _ = (id, status, fields, end_stream);
        todo!()
    }

    /// How many body bytes stream `id` may send now: the least of its send window and the
    /// connection's (0 if the stream is not open for sending).
    pub fn send_capacity(&self, id: StreamId) -> usize {
        let _ = id;
        todo!()
    }

    /// Queues DATA frames for up to `send_capacity(id)` bytes of `data` (split at the peer's
    /// max frame size), with END_STREAM on the last if `end_stream` and all of `data` went;
    /// returns how many bytes were taken. An empty `data` with `end_stream` sends an empty
    /// DATA with END_STREAM.
    pub fn send_data(&mut self, id: StreamId, data: &[u8], end_stream: bool) -> usize {
        let _ = (id, data, end_stream);
        todo!()
    }

    /// Resets stream `id` with `code` (the server gives up on it).
    pub fn reset(&mut self, id: StreamId, code: ErrorCode) {
        let _ = (id, code);
        todo!()
    }

    /// Gives back `n` body bytes of stream `id` that the caller consumed: WINDOW_UPDATE frames
    /// for the stream and the connection are queued when a window is down by half.
    pub fn release(&mut self, id: StreamId, n: usize) {
        let _ = (id, n);
        todo!()
    }

    /// Begins a graceful close: GOAWAY NO_ERROR with the last stream id processed; streams
    /// opened after it are refused. [`Connection::is_finished`] once none is open.
    pub fn go_away(&mut self) {
        todo!()
    }

    /// True once the connection has nothing left to do: GOAWAY sent (by either side) or a
    /// connection error, and no stream open, and no output pending.
    pub fn is_finished(&self) -> bool {
        todo!()
    }

    /// Streams open (in either direction).
    pub fn open_streams(&self) -> usize {
        todo!()
    }

    /// The bytes to write to the socket, oldest first.
    pub fn output(&self) -> &[u8] {
        todo!()
    }

    /// Marks the first `n` bytes of [`Connection::output`] written.
    pub fn written(&mut self, n: usize) {
        let _ = n;
        todo!()
    }

    /// Gives a finished request head's storage back for the next one.
    pub fn recycle(&mut self, head: RequestHead2) {
        let _ = head;
        todo!()
    }
}
