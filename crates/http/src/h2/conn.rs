//! One server-side HTTP/2 connection's state: the streams, both directions' flow-control
//! windows, the HPACK contexts, the limits against floods, and the bytes to send.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use super::frame::{
    self, flag, setting, Frame, FrameHeader, FrameKind, DEFAULT_WINDOW, HEADER_LEN, MAX_WINDOW,
};
use super::{hpack, ErrorCode, StreamId, PREFACE};

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
    /// Empties the head, keeping its storage.
    fn clear(&mut self) {
        self.buf.clear();
        self.method = 0..0;
        self.scheme = 0..0;
        self.authority = 0..0;
        self.path = 0..0;
        self.fields.clear();
        self.content_length = None;
    }

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
    /// 431 and the body's bytes, if any, are discarded by the connection: only its end comes,
    /// as an empty [`Event::Data`] with `end_stream` or as [`Event::Trailers`]).
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

/// How long the flood and reset counters count for (the limits are per second).
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// How many closed streams are remembered with how they closed (enough for the frames a
/// client has in flight when a stream closes; older ones are "closed" by their id alone).
const CLOSED_MEMORY: usize = 16;

/// Request heads and DATA buffers kept for reuse.
const SPARE_HEADS: usize = 4;
const SPARE_DATA: usize = 8;

/// Output capacity kept once everything has been written: a large response's buffer is
/// given back rather than held by an idle connection.
const OUTPUT_KEEP: usize = 64 * 1024;

/// Where the connection is in its life.
#[derive(Debug)]
enum Phase {
    /// This many bytes of the client preface have matched.
    Preface(usize),
    /// The preface is in; the next frame must be the client's SETTINGS (RFC 9113 §3.4).
    FirstSettings,
    Frames,
    /// A connection error ended it; GOAWAY is queued.
    Failed(ConnError),
}

/// The receiving half of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecvState {
    /// The request head is in; body DATA or trailers may follow.
    Body,
    /// As `Body`, but the connection drops the bytes that come (the head was too large) and
    /// gives their flow-control credit back at once; the body's end is still reported.
    Discard,
    /// END_STREAM received: half-closed (remote), or closed if sending is done too.
    Closed,
}

/// The sending half of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendState {
    /// No final response head yet (informational 1xx heads may have gone).
    Head,
    /// The response head went; DATA may follow.
    Body,
    /// END_STREAM sent: half-closed (local), or closed if receiving is done too.
    Closed,
}

/// How a remembered stream closed, which decides what a late frame on it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// Both sides ended it: frames on it are the client's error (RFC 9113 §5.1, "closed").
    Ended,
    /// The client reset it: anything but PRIORITY is a stream error STREAM_CLOSED.
    ResetByPeer,
    /// The server reset, refused or ignored it: frames the client had in flight are dropped
    /// (RFC 9113 §5.1: "MUST ignore frames that it receives on closed streams after it has
    /// sent a RST_STREAM frame").
    ResetByUs,
}

/// One open stream (open, half-closed (remote) or half-closed (local), RFC 9113 §5.1).
#[derive(Debug)]
struct Stream {
    id: StreamId,
    recv: RecvState,
    send: SendState,
    /// What the client may still send on the stream.
    recv_window: i64,
    /// Body bytes the caller gave back that no WINDOW_UPDATE has announced yet.
    recv_released: i64,
    /// What the server may still send on the stream (negative after the peer lowered
    /// SETTINGS_INITIAL_WINDOW_SIZE, RFC 9113 §6.9.2).
    send_window: i64,
    content_length: Option<u64>,
    received: u64,
}

impl Stream {
    fn is_closed(&self) -> bool {
        self.recv == RecvState::Closed && self.send == SendState::Closed
    }
}

/// What a header block, once whole, is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A new request on the block's stream.
    Request,
    /// Trailers of an open stream (END_STREAM is set: checked at HEADERS).
    Trailers,
    /// Decoded only to keep the HPACK context in step, then the stream is reset with this.
    Reset(ErrorCode),
    /// Decoded only to keep the HPACK context in step, then dropped.
    Ignore,
}

/// A header block whose CONTINUATION frames are still coming.
#[derive(Debug, Clone, Copy)]
struct Block {
    stream: StreamId,
    end_stream: bool,
    target: Target,
}

/// Counts events in fixed one-second windows: more than the limit within one is a flood.
/// (A fixed window never counts a flood where there was none; a burst across a window's edge
/// may pass at up to twice the rate, which is still bounded.)
#[derive(Debug, Default, Clone, Copy)]
struct Rate {
    start: Option<Instant>,
    count: u32,
}

impl Rate {
    /// Counts one event at `now`; true if the window's count passes `limit`.
    fn hit(&mut self, now: Instant, limit: u32) -> bool {
        match self.start {
            Some(s) if now.saturating_duration_since(s) < RATE_WINDOW => {}
            _ => {
                self.start = Some(now);
                self.count = 0;
            }
        }
        self.count = self.count.saturating_add(1);
        self.count > limit
    }
}

fn err(code: ErrorCode, reason: &'static str) -> ConnError {
    ConnError { code, reason }
}

fn protocol(reason: &'static str) -> ConnError {
    err(ErrorCode::Protocol, reason)
}

/// A server-side HTTP/2 connection, after the client's preface has been recognised (the
/// caller passes the preface bytes to [`Connection::recv`] like any others).
///
/// The caller's part, besides feeding bytes and writing [`Connection::output`]:
/// * every [`Event::Data`] it takes must be given back with [`Connection::release`] once
///   consumed (even if the stream was reset since), or the client runs out of window;
/// * after [`Connection::reset`], or an [`Event::Reset`], DATA still arriving for the stream
///   is dropped and credited back by the connection;
/// * [`Connection::send_data`] takes only what the windows allow: try again after each
///   [`Connection::recv`] (a WINDOW_UPDATE or SETTINGS may have opened them).
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    phase: Phase,
    /// A frame (or its header) not yet complete.
    inbuf: Vec<u8>,
    /// The caller's time at the current [`Connection::recv`].
    now: Option<Instant>,

    decoder: hpack::Decoder,
    encoder: hpack::Encoder,
    /// A header block being assembled from HEADERS and CONTINUATION frames.
    block: Option<Block>,
    block_buf: Vec<u8>,
    /// Scratch for encoding a response head.
    head_buf: Vec<u8>,

    streams: Vec<Stream>,
    /// The highest stream id the client has used (every lower idle id is closed, §5.1.1).
    last_client_id: StreamId,
    /// The highest stream id whose request was taken in: GOAWAY names it.
    last_processed: StreamId,
    closed: [(StreamId, Closed); CLOSED_MEMORY],
    closed_next: usize,

    /// Our SETTINGS were acknowledged: our stream window applies from then.
    settings_acked: bool,
    /// The receive window a new stream starts with (65,535 until our SETTINGS are acked).
    local_initial: i64,
    /// The connection's receive window target (`connection_window`, at least 65,535).
    conn_recv_target: i64,
    conn_recv_window: i64,
    conn_recv_released: i64,
    conn_send_window: i64,
    peer_initial: i64,
    peer_max_frame: u32,

    resets: Rate,
    control: Rate,
    /// GOAWAY we sent, with the last stream id it named.
    goaway_sent: Option<StreamId>,
    goaway_received: bool,

    events: VecDeque<Event>,
    spare_heads: Vec<RequestHead2>,
    spare_data: Vec<Vec<u8>>,

    out: Vec<u8>,
    out_start: usize,
    /// Bytes written since the connection began: the absolute offset of `out[out_start]`.
    written_total: u64,
    /// Runs of our acknowledgements in the output: (absolute end, length).
    acks: VecDeque<(u64, u64)>,
    ack_bytes: u64,
}

impl Connection {
    /// A connection with `cfg`; its SETTINGS (and the connection WINDOW_UPDATE) are queued in
    /// [`Connection::output`] at once.
    pub fn new(cfg: Config) -> Connection {
        let mut cfg = cfg;
        cfg.max_frame_size = cfg
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        cfg.initial_window_size = cfg.initial_window_size.min(MAX_WINDOW);
        let conn_recv_target = i64::from(cfg.connection_window.clamp(DEFAULT_WINDOW, MAX_WINDOW));
        // Until the client acknowledges a smaller table, its encoder may use the default
        // size (RFC 9113 §6.5.2).
        let table = (cfg.header_table_size as usize).max(hpack::DEFAULT_TABLE_SIZE);
        let mut c = Connection {
            cfg,
            phase: Phase::Preface(0),
            inbuf: Vec::new(),
            now: None,
            decoder: hpack::Decoder::new(table),
            encoder: hpack::Encoder::new(),
            block: None,
            block_buf: Vec::new(),
            head_buf: Vec::new(),
            streams: Vec::new(),
            last_client_id: 0,
            last_processed: 0,
            closed: [(0, Closed::Ended); CLOSED_MEMORY],
            closed_next: 0,
            settings_acked: false,
            local_initial: i64::from(DEFAULT_WINDOW),
            conn_recv_target,
            conn_recv_window: i64::from(DEFAULT_WINDOW),
            conn_recv_released: 0,
            conn_send_window: i64::from(DEFAULT_WINDOW),
            peer_initial: i64::from(DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            resets: Rate::default(),
            control: Rate::default(),
            goaway_sent: None,
            goaway_received: false,
            events: VecDeque::new(),
            spare_heads: Vec::new(),
            spare_data: Vec::new(),
            out: Vec::with_capacity(256),
            out_start: 0,
            written_total: 0,
            acks: VecDeque::new(),
            ack_bytes: 0,
        };
        let mut settings = [(0u16, 0u32); 6];
        let mut n = 0;
        let mut put = |id, value| {
            settings[n] = (id, value);
            n += 1;
        };
        put(setting::ENABLE_PUSH, 0);
        put(setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams);
        if cfg.initial_window_size != DEFAULT_WINDOW {
            put(setting::INITIAL_WINDOW_SIZE, cfg.initial_window_size);
        }
        if cfg.max_frame_size != frame::DEFAULT_MAX_FRAME_SIZE {
            put(setting::MAX_FRAME_SIZE, cfg.max_frame_size);
        }
        put(setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list_size);
        if cfg.header_table_size as usize != hpack::DEFAULT_TABLE_SIZE {
            put(setting::HEADER_TABLE_SIZE, cfg.header_table_size);
        }
        frame::write_settings(&mut c.out, &settings[..n]);
        let more = conn_recv_target - i64::from(DEFAULT_WINDOW);
        if more > 0 {
            frame::write_window_update(&mut c.out, 0, more as u32);
            c.conn_recv_window = conn_recv_target;
        }
        c
    }

    /// Takes the received `bytes` (any split: partial frames are kept until complete; the
    /// client preface first). Events are queued for [`Connection::poll_event`]. An error ends
    /// the connection (GOAWAY queued).
    pub fn recv(&mut self, bytes: &[u8], now: Instant) -> Result<(), ConnError> {
        if let Phase::Failed(e) = &self.phase {
            return Err(e.clone());
        }
        self.now = Some(now);
        let r = self.recv_bytes(bytes);
        if let Err(e) = &r {
            self.fail(e.clone());
        }
        r
    }

    /// Ends the connection with `e`: GOAWAY queued, streams forgotten, input ignored.
    fn fail(&mut self, e: ConnError) {
        frame::write_goaway(&mut self.out, self.last_processed, e.code);
        self.goaway_sent = Some(self.last_processed);
        self.streams.clear();
        self.block = None;
        self.inbuf = Vec::new();
        self.phase = Phase::Failed(e);
    }

    fn recv_bytes(&mut self, mut bytes: &[u8]) -> Result<(), ConnError> {
        if let Phase::Preface(n) = self.phase {
            let want = &PREFACE[n..];
            let k = want.len().min(bytes.len());
            if bytes[..k] != want[..k] {
                return Err(protocol("invalid connection preface"));
            }
            bytes = &bytes[k..];
            if n + k < PREFACE.len() {
                self.phase = Phase::Preface(n + k);
                return Ok(());
            }
            self.phase = Phase::FirstSettings;
        }
        if !self.inbuf.is_empty() {
            // Complete the frame begun by an earlier call.
            if self.inbuf.len() < HEADER_LEN {
                let k = (HEADER_LEN - self.inbuf.len()).min(bytes.len());
                self.inbuf.extend_from_slice(&bytes[..k]);
                bytes = &bytes[k..];
                let Some(h) = FrameHeader::parse(&self.inbuf) else {
                    return Ok(());
                };
                self.check_length(&h)?;
            }
            let Some(h) = FrameHeader::parse(&self.inbuf) else {
                return Ok(());
            };
            let total = HEADER_LEN + h.len as usize;
            let k = (total - self.inbuf.len()).min(bytes.len());
            self.inbuf.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if self.inbuf.len() < total {
                return Ok(());
            }
            let buf = std::mem::take(&mut self.inbuf);
            let r = self.frame(&h, &buf[HEADER_LEN..]);
            self.inbuf = buf;
            self.inbuf.clear();
            r?;
        }
        while let Some(h) = FrameHeader::parse(bytes) {
            self.check_length(&h)?;
            let total = HEADER_LEN + h.len as usize;
            if bytes.len() < total {
                break;
            }
            self.frame(&h, &bytes[HEADER_LEN..total])?;
            bytes = &bytes[total..];
        }
        self.inbuf.extend_from_slice(bytes);
        Ok(())
    }

    fn check_length(&self, h: &FrameHeader) -> Result<(), ConnError> {
        if h.len > self.cfg.max_frame_size {
            return Err(err(
                ErrorCode::FrameSize,
                "frame larger than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        Ok(())
    }

    /// One whole frame.
    fn frame(&mut self, h: &FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if let Phase::FirstSettings = self.phase {
            if h.kind != FrameKind::Settings || h.has(flag::ACK) {
                return Err(protocol("first frame is not SETTINGS"));
            }
            self.phase = Phase::Frames;
        }
        if let Some(b) = self.block {
            if h.kind != FrameKind::Continuation || h.stream != b.stream {
                return Err(protocol("frame inside a header block"));
            }
        }
        let f = match frame::parse(h, payload) {
            Ok(f) => f,
            Err(e) if e.stream_only => {
                self.count_control()?;
                return self.stream_error(h.stream, e.code);
            }
            Err(e) => return Err(err(e.code, e.reason)),
        };
        match f {
            Frame::Data { end_stream, data } => self.data(h, data, end_stream),
            Frame::Headers {
                end_stream,
                end_headers,
                priority,
                fragment,
            } => {
                let self_dependent = priority.is_some_and(|p| p.dependency == h.stream);
                self.headers(h.stream, end_stream, end_headers, self_dependent, fragment)
            }
            Frame::Continuation {
                end_headers,
                fragment,
            } => self.continuation(end_headers, fragment),
            Frame::Priority(p) => {
                self.count_control()?;
                if p.dependency == h.stream {
                    return self.stream_error(h.stream, ErrorCode::Protocol);
                }
                Ok(())
            }
            Frame::RstStream(code) => self.rst_stream(h.stream, code),
            Frame::Settings { ack, params } => self.settings(ack, params),
            Frame::Ping { ack, data } => {
                self.count_control()?;
                if !ack {
                    self.queue_ack(|out| frame::write_ping(out, true, data))?;
                }
                Ok(())
            }
            Frame::GoAway { code, .. } => {
                self.count_control()?;
                if !self.goaway_received {
                    self.goaway_received = true;
                    self.events.push_back(Event::GoAway { code });
                }
                Ok(())
            }
            Frame::WindowUpdate(increment) => self.window_update(h.stream, increment),
            Frame::Unknown => Ok(()),
        }
    }

    fn count_control(&mut self) -> Result<(), ConnError> {
        if let Some(now) = self.now {
            if self.control.hit(now, self.cfg.max_control_per_sec) {
                return Err(err(ErrorCode::EnhanceYourCalm, "control frame flood"));
            }
        }
        Ok(())
    }

    fn count_reset(&mut self) -> Result<(), ConnError> {
        if let Some(now) = self.now {
            if self.resets.hit(now, self.cfg.max_resets_per_sec) {
                return Err(err(ErrorCode::EnhanceYourCalm, "too many streams reset"));
            }
        }
        Ok(())
    }

    /// Appends one of our answers to the client's frames (SETTINGS and PING
    /// acknowledgements, RST_STREAM), refusing to hold more of them than
    /// `max_control_backlog` while the client does not read.
    fn queue_ack(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), ConnError> {
        let before = self.out.len();
        write(&mut self.out);
        let len = (self.out.len() - before) as u64;
        let end = self.written_total + (self.out.len() - self.out_start) as u64;
        match self.acks.back_mut() {
            Some(last) if last.0 == end - len => {
                last.0 = end;
                last.1 += len;
            }
            _ => self.acks.push_back((end, len)),
        }
        self.ack_bytes += len;
        if self.ack_bytes > u64::from(self.cfg.max_control_backlog) {
            return Err(err(
                ErrorCode::EnhanceYourCalm,
                "client does not read the answers to its frames",
            ));
        }
        Ok(())
    }

    fn find(&self, id: StreamId) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    fn remember_closed(&mut self, id: StreamId, how: Closed) {
        self.closed[self.closed_next] = (id, how);
        self.closed_next = (self.closed_next + 1) % CLOSED_MEMORY;
    }

    /// How a stream not open now closed, if it is remembered.
    fn closed_as(&self, id: StreamId) -> Option<Closed> {
        self.closed
            .iter()
            .find(|&&(i, _)| i == id && id != 0)
            .map(|&(_, how)| how)
    }

    /// Removes stream `at`, remembering how it closed.
    fn remove(&mut self, at: usize, how: Closed) {
        let id = self.streams.swap_remove(at).id;
        self.remember_closed(id, how);
    }

    /// A stream error (RFC 9113 §5.4.2): RST_STREAM with `code`; the caller hears of it as
    /// [`Event::Reset`] if it had the stream's request. Counted with the client's resets: a
    /// client that makes the server reset streams costs as much as one that resets them.
    fn stream_error(&mut self, id: StreamId, code: ErrorCode) -> Result<(), ConnError> {
        if let Some(at) = self.find(id) {
            self.remove(at, Closed::ResetByUs);
            self.events.push_back(Event::Reset { id, code });
        } else if id <= self.last_client_id {
            self.remember_closed(id, Closed::ResetByUs);
        }
        self.queue_ack(|out| frame::write_rst_stream(out, id, code))?;
        self.count_reset()
    }

    fn data(&mut self, h: &FrameHeader, data: &[u8], end_stream: bool) -> Result<(), ConnError> {
        let id = h.stream;
        let flow = i64::from(h.len);
        if flow > self.conn_recv_window {
            return Err(err(
                ErrorCode::FlowControl,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_window -= flow;
        if data.is_empty() && !end_stream {
            self.count_control()?;
        }
        let Some(at) = self.find(id) else {
            self.give_back_conn(flow);
            if id > self.last_client_id {
                return Err(protocol("DATA on an idle stream"));
            }
            return match self.closed_as(id) {
                Some(Closed::ResetByUs) => Ok(()),
                _ => self.stream_error(id, ErrorCode::StreamClosed),
            };
        };
        let s = &mut self.streams[at];
        if s.recv == RecvState::Closed {
            self.give_back_conn(flow);
            return self.stream_error(id, ErrorCode::StreamClosed);
        }
        if flow > s.recv_window {
            self.give_back_conn(flow);
            return self.stream_error(id, ErrorCode::FlowControl);
        }
        s.recv_window -= flow;
        s.received += data.len() as u64;
        let length_ok = match s.content_length {
            Some(n) if end_stream => s.received == n,
            Some(n) => s.received <= n,
            None => true,
        };
        if !length_ok {
            self.give_back_conn(flow);
            return self.stream_error(id, ErrorCode::Protocol);
        }
        let discard = s.recv == RecvState::Discard;
        if end_stream {
            s.recv = RecvState::Closed;
        }
        let kept = if discard { &[][..] } else { data };
        // Padding (and a discarded body) is the connection's to give back.
        self.give_back(at, flow - kept.len() as i64);
        if !kept.is_empty() || end_stream {
            self.push_data(id, kept, end_stream);
        }
        // Data held by the caller may have taken a window below half with credit waiting.
        self.update_windows(Some(at));
        if self.streams[at].is_closed() {
            self.remove(at, Closed::Ended);
        }
        Ok(())
    }

    /// Queues body bytes, joined to the stream's last queued [`Event::Data`] if it is the
    /// newest event.
    fn push_data(&mut self, id: StreamId, data: &[u8], end_stream: bool) {
        if let Some(Event::Data {
            id: last,
            data: d,
            end_stream: e,
        }) = self.events.back_mut()
        {
            if *last == id && !*e {
                d.extend_from_slice(data);
                *e = end_stream;
                return;
            }
        }
        let mut d = self.spare_data.pop().unwrap_or_default();
        d.clear();
        d.extend_from_slice(data);
        self.events.push_back(Event::Data {
            id,
            data: d,
            end_stream,
        });
    }

    /// Credit the connection takes back itself for bytes the caller never sees.
    fn give_back_conn(&mut self, n: i64) {
        self.conn_recv_released += n;
        self.update_windows(None);
    }

    /// As [`Connection::give_back_conn`], and for stream `at` while it still receives.
    fn give_back(&mut self, at: usize, n: i64) {
        self.conn_recv_released += n;
        let s = &mut self.streams[at];
        if s.recv != RecvState::Closed {
            s.recv_released += n;
        }
    }

    /// Announces released credit of the connection (and of stream `at`) where the window
    /// the client sees is below half its size.
    fn update_windows(&mut self, at: Option<usize>) {
        if self.conn_recv_released > 0 && self.conn_recv_window < self.conn_recv_target / 2 {
            let n = self.conn_recv_released.min(i64::from(MAX_WINDOW)) as u32;
            frame::write_window_update(&mut self.out, 0, n);
            self.conn_recv_window += i64::from(n);
            self.conn_recv_released -= i64::from(n);
        }
        let Some(at) = at else { return };
        let s = &mut self.streams[at];
        if s.recv != RecvState::Closed
            && s.recv_released > 0
            && s.recv_window < self.local_initial / 2
        {
            let n = s.recv_released.min(i64::from(MAX_WINDOW)) as u32;
            frame::write_window_update(&mut self.out, s.id, n);
            s.recv_window += i64::from(n);
            s.recv_released -= i64::from(n);
        }
    }

    fn headers(
        &mut self,
        id: StreamId,
        end_stream: bool,
        end_headers: bool,
        self_dependent: bool,
        fragment: &[u8],
    ) -> Result<(), ConnError> {
        let target = if let Some(at) = self.find(id) {
            let s = &self.streams[at];
            if s.recv == RecvState::Closed {
                Target::Reset(ErrorCode::StreamClosed)
            } else if !end_stream {
                // A second HEADERS is a trailer section, which must end the stream (§8.1).
                Target::Reset(ErrorCode::Protocol)
            } else if self_dependent {
                Target::Reset(ErrorCode::Protocol)
            } else {
                Target::Trailers
            }
        } else if id > self.last_client_id {
            if id.is_multiple_of(2) {
                return Err(protocol("even stream id from a client"));
            }
            self.last_client_id = id;
            if self.goaway_sent.is_some() || self.goaway_received {
                // Past a GOAWAY: not processed, and the client knows it will not be.
                self.remember_closed(id, Closed::ResetByUs);
                Target::Ignore
            } else if self_dependent {
                Target::Reset(ErrorCode::Protocol)
            } else if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
                Target::Reset(ErrorCode::RefusedStream)
            } else {
                Target::Request
            }
        } else {
            match self.closed_as(id) {
                Some(Closed::ResetByUs) => Target::Ignore,
                Some(Closed::ResetByPeer) => Target::Reset(ErrorCode::StreamClosed),
                Some(Closed::Ended) => {
                    return Err(err(ErrorCode::StreamClosed, "HEADERS on a closed stream"))
                }
                None => return Err(protocol("HEADERS on a stream id already passed")),
            }
        };
        let b = Block {
            stream: id,
            end_stream,
            target,
        };
        self.check_block_size(fragment.len())?;
        if end_headers {
            self.end_block(b, fragment)
        } else {
            self.block_buf.clear();
            self.block_buf.extend_from_slice(fragment);
            self.block = Some(b);
            Ok(())
        }
    }

    fn check_block_size(&self, len: usize) -> Result<(), ConnError> {
        if len > self.cfg.max_header_block as usize {
            return Err(err(
                ErrorCode::EnhanceYourCalm,
                "header block larger than max_header_block",
            ));
        }
        Ok(())
    }

    fn continuation(&mut self, end_headers: bool, fragment: &[u8]) -> Result<(), ConnError> {
        let Some(b) = self.block else {
            return Err(protocol("CONTINUATION without a header block"));
        };
        if fragment.is_empty() && !end_headers {
            // Empty CONTINUATION frames do not grow the block, so they are counted instead.
            self.count_control()?;
        }
        self.check_block_size(self.block_buf.len() + fragment.len())?;
        self.block_buf.extend_from_slice(fragment);
        if !end_headers {
            return Ok(());
        }
        self.block = None;
        let buf = std::mem::take(&mut self.block_buf);
        let r = self.end_block(b, &buf);
        self.block_buf = buf;
        self.block_buf.clear();
        if self.block_buf.capacity() > 2 * frame::DEFAULT_MAX_FRAME_SIZE as usize {
            self.block_buf = Vec::new();
        }
        r
    }

    /// A whole header block: decoded (always, to keep the HPACK context in step), then used
    /// as its target says.
    fn end_block(&mut self, b: Block, block: &[u8]) -> Result<(), ConnError> {
        match b.target {
            Target::Request => self.request(b, block),
            Target::Trailers => {
                let mut check = TrailerCheck::default();
                self.decode(block, &mut |n, v| check.field(n, v))?;
                let Some(at) = self.find(b.stream) else {
                    return Ok(());
                };
                let s = &mut self.streams[at];
                let length_ok = s.content_length.is_none_or(|n| n == s.received);
                if check.malformed || !length_ok {
                    return self.stream_error(b.stream, ErrorCode::Protocol);
                }
                s.recv = RecvState::Closed;
                self.events.push_back(Event::Trailers { id: b.stream });
                if self.streams[at].is_closed() {
                    self.remove(at, Closed::Ended);
                }
                Ok(())
            }
            Target::Reset(code) => {
                self.decode(block, &mut |_, _| {})?;
                if code == ErrorCode::RefusedStream {
                    // Refused before any processing: the client may retry it (§8.7).
                    self.remember_closed(b.stream, Closed::ResetByUs);
                    self.queue_ack(|out| frame::write_rst_stream(out, b.stream, code))?;
                    return self.count_reset();
                }
                self.stream_error(b.stream, code)
            }
            Target::Ignore => self.decode(block, &mut |_, _| {}),
        }
    }

    fn decode(
        &mut self,
        block: &[u8],
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), ConnError> {
        self.decoder
            .decode(block, emit)
            .map_err(|e| err(ErrorCode::Compression, e.0))
    }

    /// A new request's header block.
    fn request(&mut self, b: Block, block: &[u8]) -> Result<(), ConnError> {
        let mut head = self.spare_heads.pop().unwrap_or_default();
        head.clear();
        let mut check = RequestCheck::new(&mut head, self.cfg.max_header_list_size);
        let r = self
            .decoder
            .decode(block, &mut |n, v| check.field(n, v))
            .map_err(|e| err(ErrorCode::Compression, e.0));
        let verdict = check.finish();
        r?;
        let too_large = match verdict {
            Ok(too_large) => too_large,
            Err(_reason) => {
                self.recycle(head);
                return self.stream_error(b.stream, ErrorCode::Protocol);
            }
        };
        // A body announced by content-length cannot be empty (RFC 9113 §8.1.1).
        if b.end_stream && head.content_length.is_some_and(|n| n != 0) {
            self.recycle(head);
            return self.stream_error(b.stream, ErrorCode::Protocol);
        }
        let recv = match (b.end_stream, too_large) {
            (true, _) => RecvState::Closed,
            (false, false) => RecvState::Body,
            (false, true) => RecvState::Discard,
        };
        self.streams.push(Stream {
            id: b.stream,
            recv,
            send: SendState::Head,
            recv_window: self.local_initial,
            recv_released: 0,
            send_window: self.peer_initial,
            content_length: head.content_length,
            received: 0,
        });
        self.last_processed = b.stream;
        self.events.push_back(Event::Request {
            id: b.stream,
            head,
            end_stream: b.end_stream,
            too_large,
        });
        Ok(())
    }

    fn rst_stream(&mut self, id: StreamId, code: ErrorCode) -> Result<(), ConnError> {
        if id > self.last_client_id {
            return Err(protocol("RST_STREAM on an idle stream"));
        }
        if let Some(at) = self.find(id) {
            self.remove(at, Closed::ResetByPeer);
            self.events.push_back(Event::Reset { id, code });
            return self.count_reset();
        }
        Ok(())
    }

    fn settings(&mut self, ack: bool, params: &[u8]) -> Result<(), ConnError> {
        self.count_control()?;
        if ack {
            if !self.settings_acked {
                self.settings_acked = true;
                self.apply_local_settings();
            }
            return Ok(());
        }
        for (id, value) in frame::settings(params) {
            match id {
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(protocol("SETTINGS_ENABLE_PUSH not 0 or 1"));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(err(
                            ErrorCode::FlowControl,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(value) - self.peer_initial;
                    self.peer_initial = i64::from(value);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > i64::from(MAX_WINDOW) {
                            return Err(err(
                                ErrorCode::FlowControl,
                                "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window",
                            ));
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = value;
                }
                // Our encoder uses no dynamic table, so HEADER_TABLE_SIZE changes nothing;
                // we do not push; MAX_HEADER_LIST_SIZE is advisory; others are unknown.
                _ => {}
            }
        }
        self.queue_ack(frame::write_settings_ack)
    }

    /// Our SETTINGS are acknowledged: the client now counts with our values.
    fn apply_local_settings(&mut self) {
        let initial = i64::from(self.cfg.initial_window_size);
        let delta = initial - self.local_initial;
        self.local_initial = initial;
        for s in &mut self.streams {
            if s.recv != RecvState::Closed {
                s.recv_window += delta;
            }
        }
        if (self.cfg.header_table_size as usize) < hpack::DEFAULT_TABLE_SIZE {
            self.decoder
                .set_max_table_size(self.cfg.header_table_size as usize);
        }
    }

    fn window_update(&mut self, id: StreamId, increment: u32) -> Result<(), ConnError> {
        self.count_control()?;
        let inc = i64::from(increment);
        if id == 0 {
            if increment == 0 {
                return Err(protocol("WINDOW_UPDATE of 0 on the connection"));
            }
            self.conn_send_window += inc;
            if self.conn_send_window > i64::from(MAX_WINDOW) {
                return Err(err(
                    ErrorCode::FlowControl,
                    "connection send window above 2^31-1",
                ));
            }
            return Ok(());
        }
        if id > self.last_client_id {
            return Err(protocol("WINDOW_UPDATE on an idle stream"));
        }
        let Some(at) = self.find(id) else {
            // Closed: a WINDOW_UPDATE may cross the stream's end (RFC 9113 §6.9).
            return Ok(());
        };
        if increment == 0 {
            return self.stream_error(id, ErrorCode::Protocol);
        }
        let s = &mut self.streams[at];
        s.send_window += inc;
        if s.send_window > i64::from(MAX_WINDOW) {
            return self.stream_error(id, ErrorCode::FlowControl);
        }
        Ok(())
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn sending(&self, id: StreamId) -> Option<usize> {
        if matches!(self.phase, Phase::Failed(_)) {
            return None;
        }
        self.find(id)
    }

    /// Queues the response head of stream `id`: `:status` then `fields` (lower-case names,
    /// no connection-specific fields: the caller's), as one HEADERS frame (and CONTINUATION
    /// frames if larger than the peer's max frame size). `end_stream`: no body follows.
    /// Ignored if the stream is not open for sending (reset meanwhile).
    ///
    /// An informational status (1xx) leaves the stream waiting for its final head.
    pub fn send_headers<'a>(
        &mut self,
        id: StreamId,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) {
        self.send_headers_encoded(id, status, &[], fields, end_stream);
    }

    /// As [`Connection::send_headers`], with `encoded`: runs of fields already encoded by an
    /// [`hpack::Encoder`] (which uses no dynamic table, so an encoding made once for a cached
    /// response, or once a second for `date`, holds on every connection), placed after
    /// `:status` and before `fields`.
    pub fn send_headers_encoded<'a>(
        &mut self,
        id: StreamId,
        status: u16,
        encoded: &[&[u8]],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) {
        let Some(at) = self.sending(id) else { return };
        if self.streams[at].send != SendState::Head {
            return;
        }
        let informational = (100..200).contains(&status);
        let end_stream = end_stream && !informational;
        let mut block = std::mem::take(&mut self.head_buf);
        block.clear();
        self.encoder.status(status, &mut block);
        for run in encoded {
            block.extend_from_slice(run);
        }
        for (name, value) in fields {
            self.encoder.field(name, value, &mut block);
        }
        let max = self.peer_max_frame as usize;
        let mut rest = &block[..];
        let mut kind = FrameKind::Headers;
        loop {
            let n = rest.len().min(max);
            let last = n == rest.len();
            let mut flags = if last { flag::END_HEADERS } else { 0 };
            if kind == FrameKind::Headers && end_stream {
                flags |= flag::END_STREAM;
            }
            frame::write_header(&mut self.out, n, kind, flags, id);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            kind = FrameKind::Continuation;
            if last {
                break;
            }
        }
        self.head_buf = block;
        let s = &mut self.streams[at];
        if !informational {
            s.send = if end_stream {
                SendState::Closed
            } else {
                SendState::Body
            };
        }
        if s.is_closed() {
            self.remove(at, Closed::Ended);
        }
    }

    /// How many body bytes stream `id` may send now: the least of its send window and the
    /// connection's (0 if the stream is not open for sending: unknown, reset, its head not
    /// sent yet, or its body ended).
    pub fn send_capacity(&self, id: StreamId) -> usize {
        let Some(at) = self.sending(id) else { return 0 };
        let s = &self.streams[at];
        if s.send != SendState::Body {
            return 0;
        }
        s.send_window.min(self.conn_send_window).max(0) as usize
    }

    /// Queues DATA frames for up to `send_capacity(id)` bytes of `data` (split at the peer's
    /// max frame size), with END_STREAM on the last if `end_stream` and all of `data` went;
    /// returns how many bytes were taken. An empty `data` with `end_stream` sends an empty
    /// DATA with END_STREAM.
    pub fn send_data(&mut self, id: StreamId, data: &[u8], end_stream: bool) -> usize {
        let cap = self.send_capacity(id);
        let Some(at) = self.sending(id) else { return 0 };
        if self.streams[at].send != SendState::Body {
            return 0;
        }
        let n = data.len().min(cap);
        let ends = end_stream && n == data.len();
        if n == 0 && !ends {
            return 0;
        }
        let max = self.peer_max_frame as usize;
        let mut rest = &data[..n];
        loop {
            let k = rest.len().min(max);
            let last = k == rest.len();
            let flags = if last && ends { flag::END_STREAM } else { 0 };
            frame::write_header(&mut self.out, k, FrameKind::Data, flags, id);
            self.out.extend_from_slice(&rest[..k]);
            rest = &rest[k..];
            if last {
                break;
            }
        }
        self.conn_send_window -= n as i64;
        let s = &mut self.streams[at];
        s.send_window -= n as i64;
        if ends {
            s.send = SendState::Closed;
            if s.is_closed() {
                self.remove(at, Closed::Ended);
            }
        }
        n
    }

    /// Resets stream `id` with `code` (the server gives up on it). DATA the client still
    /// sends on it is dropped and its flow-control credit given back by the connection.
    pub fn reset(&mut self, id: StreamId, code: ErrorCode) {
        let Some(at) = self.sending(id) else { return };
        self.remove(at, Closed::ResetByUs);
        frame::write_rst_stream(&mut self.out, id, code);
    }

    /// Gives back `n` body bytes of stream `id` that the caller consumed: WINDOW_UPDATE frames
    /// for the stream and the connection are queued when a window is down by half.
    ///
    /// Give back every byte of every [`Event::Data`], even for a stream reset or closed
    /// since (the connection window counts them); more than was received is ignored.
    pub fn release(&mut self, id: StreamId, n: usize) {
        if matches!(self.phase, Phase::Failed(_)) {
            return;
        }
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let room = self.conn_recv_target - self.conn_recv_window - self.conn_recv_released;
        self.conn_recv_released += n.min(room.max(0));
        let at = self.find(id);
        if let Some(at) = at {
            let target = self.local_initial;
            let s = &mut self.streams[at];
            if s.recv != RecvState::Closed {
                let room = target - s.recv_window - s.recv_released;
                s.recv_released += n.min(room.max(0));
            }
        }
        self.update_windows(at);
    }

    /// Begins a graceful close: GOAWAY NO_ERROR with the last stream id processed; streams
    /// opened after it are refused. [`Connection::is_finished`] once none is open.
    pub fn go_away(&mut self) {
        if self.goaway_sent.is_some() || matches!(self.phase, Phase::Failed(_)) {
            return;
        }
        frame::write_goaway(&mut self.out, self.last_processed, ErrorCode::NoError);
        self.goaway_sent = Some(self.last_processed);
    }

    /// True once the connection has nothing left to do: GOAWAY sent (by either side) or a
    /// connection error, and no stream open, and no output pending.
    pub fn is_finished(&self) -> bool {
        (self.goaway_sent.is_some() || self.goaway_received)
            && self.streams.is_empty()
            && self.output().is_empty()
    }

    /// Streams open (in either direction).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The bytes to write to the socket, oldest first.
    pub fn output(&self) -> &[u8] {
        &self.out[self.out_start..]
    }

    /// Marks the first `n` bytes of [`Connection::output`] written.
    pub fn written(&mut self, n: usize) {
        let n = n.min(self.out.len() - self.out_start);
        self.out_start += n;
        self.written_total += n as u64;
        while let Some(&(end, len)) = self.acks.front() {
            if end > self.written_total {
                break;
            }
            self.acks.pop_front();
            self.ack_bytes -= len;
        }
        if self.out_start == self.out.len() {
            self.out.clear();
            self.out_start = 0;
            if self.out.capacity() > OUTPUT_KEEP {
                self.out.shrink_to(OUTPUT_KEEP);
            }
        } else if self.out_start > OUTPUT_KEEP && self.out_start * 2 > self.out.len() {
            self.out.drain(..self.out_start);
            self.out_start = 0;
        }
    }

    /// True when nothing is in progress: no stream open, no frame partly received, no event
    /// or output waiting. An idle connection can be kept as this state alone (after
    /// [`Connection::shrink`]) until the client sends again.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
            && self.inbuf.is_empty()
            && self.block.is_none()
            && self.events.is_empty()
            && self.output().is_empty()
    }

    /// True while a request head is partly received: a HEADERS frame whose CONTINUATION
    /// frames have not all come, or a HEADERS or CONTINUATION frame (or a frame header not
    /// yet whole) cut short. Nothing else may come on the connection meanwhile (RFC 9113
    /// §6.10), so a server bounds it as it bounds an HTTP/1.1 head (a minimum rate).
    pub fn head_in_progress(&self) -> bool {
        if self.block.is_some() {
            return true;
        }
        if self.inbuf.is_empty() {
            return false;
        }
        match FrameHeader::parse(&self.inbuf) {
            None => true,
            Some(h) => matches!(h.kind, FrameKind::Headers | FrameKind::Continuation),
        }
    }

    /// Frees every buffer an idle connection does not need (they are made again as requests
    /// come): what is left is the state proper, the HPACK table the client filled among it.
    pub fn shrink(&mut self) {
        if self.inbuf.is_empty() {
            self.inbuf = Vec::new();
        }
        if self.block.is_none() {
            self.block_buf = Vec::new();
        }
        self.head_buf = Vec::new();
        if self.output().is_empty() {
            self.out = Vec::new();
            self.out_start = 0;
        }
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
        if self.acks.is_empty() {
            self.acks = VecDeque::new();
        }
        self.spare_heads = Vec::new();
        self.spare_data = Vec::new();
        self.decoder.shrink();
    }

    /// Gives a finished request head's storage back for the next one.
    pub fn recycle(&mut self, head: RequestHead2) {
        if self.spare_heads.len() < SPARE_HEADS {
            self.spare_heads.push(head);
        }
    }

    /// Gives an [`Event::Data`] buffer back for reuse (after [`Connection::release`]).
    pub fn recycle_data(&mut self, data: Vec<u8>) {
        if self.spare_data.len() < SPARE_DATA && data.capacity() <= 2 * DEFAULT_WINDOW as usize {
            self.spare_data.push(data);
        }
    }
}

/// A regular field name as RFC 9113 §8.2.1 and §8.2.2 allow it in a request: `tchar`s of
/// RFC 9110 §5.6.2 (the crate's one token check), none upper-case.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| crate::request::is_tchar(b) && !b.is_ascii_uppercase())
        && !matches!(
            name,
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
        )
}

/// A field value as RFC 9113 §8.2.1 allows it: no NUL, CR or LF, no white space at either end.
fn valid_value(value: &[u8]) -> bool {
    let ws = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    !ws(value.first())
        && !ws(value.last())
        && !value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n'))
}

/// A `content-length` value: one decimal number.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const AUTHORITY: u8 = 4;
const PATH: u8 = 8;

/// Builds and checks a request head field by field (RFC 9113 §8.2 and §8.3.1).
struct RequestCheck<'a> {
    head: &'a mut RequestHead2,
    max: u64,
    size: u64,
    too_large: bool,
    pseudo: u8,
    regular_seen: bool,
    malformed: Option<&'static str>,
}

impl<'a> RequestCheck<'a> {
    fn new(head: &'a mut RequestHead2, max: u32) -> RequestCheck<'a> {
        RequestCheck {
            head,
            max: u64::from(max),
            size: 0,
            too_large: false,
            pseudo: 0,
            regular_seen: false,
            malformed: None,
        }
    }

    fn push(&mut self, bytes: &[u8]) -> Range<u32> {
        let start = self.head.buf.len() as u32;
        self.head.buf.extend_from_slice(bytes);
        start..self.head.buf.len() as u32
    }

    fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.malformed.is_some() {
            return;
        }
        self.size += name.len() as u64 + value.len() as u64 + 32;
        if self.size > self.max {
            self.too_large = true;
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            self.pseudo_field(pseudo, value);
            return;
        }
        self.regular_seen = true;
        if self.too_large {
            // Dropped: decoding goes on only for the HPACK context.
            return;
        }
        if !valid_name(name) {
            self.malformed = Some("field name not allowed");
            return;
        }
        if !valid_value(value) {
            self.malformed = Some("field value not allowed");
            return;
        }
        if name == b"te" && !value.eq_ignore_ascii_case(b"trailers") {
            self.malformed = Some("te other than trailers");
            return;
        }
        if name == b"content-length" {
            match (parse_length(value), self.head.content_length) {
                (Some(n), None) => self.head.content_length = Some(n),
                (Some(n), Some(m)) if n == m => {}
                _ => {
                    self.malformed = Some("invalid content-length");
                    return;
                }
            }
        }
        let n = self.push(name);
        let v = self.push(value);
        self.head.fields.push((n, v));
    }

    fn pseudo_field(&mut self, name: &[u8], value: &[u8]) {
        if self.regular_seen {
            self.malformed = Some("pseudo-header field after a regular field");
            return;
        }
        let bit = match name {
            b"method" => METHOD,
            b"scheme" => SCHEME,
            b"authority" => AUTHORITY,
            b"path" => PATH,
            _ => {
                self.malformed = Some("unknown or response pseudo-header field");
                return;
            }
        };
        if self.pseudo & bit != 0 {
            self.malformed = Some("duplicated pseudo-header field");
            return;
        }
        if !valid_value(value) {
            self.malformed = Some("pseudo-header value not allowed");
            return;
        }
        self.pseudo |= bit;
        let r = self.push(value);
        match bit {
            METHOD => self.head.method = r,
            SCHEME => self.head.scheme = r,
            AUTHORITY => self.head.authority = r,
            _ => self.head.path = r,
        }
    }

    /// Whether the head was too large, or why it is malformed.
    fn finish(self) -> Result<bool, &'static str> {
        if let Some(m) = self.malformed {
            return Err(m);
        }
        if self.pseudo & METHOD == 0 {
            return Err("no :method");
        }
        if self.head.get(&self.head.method) == b"CONNECT" {
            // RFC 9113 §8.5.
            if self.pseudo & (SCHEME | PATH) != 0 || self.pseudo & AUTHORITY == 0 {
                return Err("CONNECT with :scheme or :path, or without :authority");
            }
        } else if self.pseudo & (SCHEME | PATH) != SCHEME | PATH {
            return Err("no :scheme or :path");
        } else if self.head.path.is_empty() {
            return Err("empty :path");
        }
        Ok(self.too_large)
    }
}

/// Checks a trailer section: regular fields only, as a request's (RFC 9113 §8.1).
#[derive(Default)]
struct TrailerCheck {
    malformed: bool,
}

impl TrailerCheck {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if !valid_name(name) || !valid_value(value) || name == b"te" {
            self.malformed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal field without indexing, new name (RFC 7541 §6.2.2), for strings < 127 bytes.
    fn lit(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.push(0);
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.push(value.len() as u8);
        out.extend_from_slice(value);
    }

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            lit(&mut b, n.as_bytes(), v.as_bytes());
        }
        b
    }

    const GET: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/index.html"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut v = GET.to_vec();
        v.extend_from_slice(extra);
        v
    }

    fn frame(kind: u8, flags: u8, stream: StreamId, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame::write_header(
            &mut f,
            payload.len(),
            FrameKind::from_u8(kind),
            flags,
            stream,
        );
        f.extend_from_slice(payload);
        f
    }

    fn headers(stream: StreamId, flags: u8, fields: &[(&str, &str)]) -> Vec<u8> {
        frame(1, flags, stream, &block(fields))
    }

    fn data(stream: StreamId, flags: u8, payload: &[u8]) -> Vec<u8> {
        frame(0, flags, stream, payload)
    }

    fn window_update(stream: StreamId, inc: u32) -> Vec<u8> {
        frame(8, 0, stream, &inc.to_be_bytes())
    }

    fn rst(stream: StreamId, code: u32) -> Vec<u8> {
        frame(3, 0, stream, &code.to_be_bytes())
    }

    fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut f = Vec::new();
        frame::write_settings(&mut f, params);
        f
    }

    const ES: u8 = flag::END_STREAM;
    const EH: u8 = flag::END_HEADERS;

    /// A frame the server sent.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Out {
        kind: FrameKind,
        flags: u8,
        stream: StreamId,
        payload: Vec<u8>,
    }

    impl Out {
        fn code(&self) -> ErrorCode {
            let at = if self.kind == FrameKind::GoAway { 4 } else { 0 };
            let b = &self.payload[at..at + 4];
            ErrorCode::from_u32(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        }

        fn u32_at(&self, at: usize) -> u32 {
            let b = &self.payload[at..at + 4];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        }
    }

    /// A client's view: a connection, a clock, and the server's frames read so far.
    struct Peer {
        conn: Connection,
        now: Instant,
    }

    impl Peer {
        fn new(cfg: Config) -> Peer {
            Peer {
                conn: Connection::new(cfg),
                now: Instant::now(),
            }
        }

        /// Preface and empty SETTINGS sent, the server's SETTINGS acknowledged, all output
        /// read.
        fn ready(cfg: Config) -> Peer {
            let mut p = Peer::new(cfg);
            let mut b = PREFACE.to_vec();
            b.extend(settings(&[]));
            b.extend(frame(4, flag::ACK, 0, &[]));
            p.send(&b).unwrap();
            p.read();
            p
        }

        fn send(&mut self, b: &[u8]) -> Result<(), ConnError> {
            self.conn.recv(b, self.now)
        }

        fn ok(&mut self, b: &[u8]) {
            self.send(b).unwrap();
        }

        fn fails(&mut self, b: &[u8], code: ErrorCode) -> ConnError {
            let e = self.send(b).unwrap_err();
            assert_eq!(e.code, code, "{e:?}");
            let out = self.read();
            let last = out.last().expect("GOAWAY");
            assert_eq!((last.kind, last.code()), (FrameKind::GoAway, code));
            assert_eq!(self.send(b"more").unwrap_err(), e);
            e
        }

        /// The frames of the output, which is then written.
        fn read(&mut self) -> Vec<Out> {
            let out = self.conn.output().to_vec();
            self.conn.written(out.len());
            let mut frames = Vec::new();
            let mut rest = &out[..];
            while let Some(h) = FrameHeader::parse(rest) {
                let end = HEADER_LEN + h.len as usize;
                frames.push(Out {
                    kind: h.kind,
                    flags: h.flags,
                    stream: h.stream,
                    payload: rest[HEADER_LEN..end].to_vec(),
                });
                rest = &rest[end..];
            }
            assert!(rest.is_empty());
            frames
        }

        fn events(&mut self) -> Vec<Event> {
            std::iter::from_fn(|| self.conn.poll_event()).collect()
        }

        /// The single RST_STREAM the server sent since the last read.
        fn reset_with(&mut self) -> (StreamId, ErrorCode) {
            let out = self.read();
            assert_eq!(out.len(), 1, "{out:?}");
            assert_eq!(out[0].kind, FrameKind::RstStream);
            (out[0].stream, out[0].code())
        }
    }

    fn request_id(e: &Event) -> StreamId {
        match e {
            Event::Request { id, .. } => *id,
            e => panic!("not a request: {e:?}"),
        }
    }

    #[test]
    fn settings_and_window_update_at_start() {
        let p = Peer::new(Config::default());
        let out = p.conn.output().to_vec();
        let mut expect = settings(&[
            (setting::ENABLE_PUSH, 0),
            (setting::MAX_CONCURRENT_STREAMS, 128),
            (setting::MAX_HEADER_LIST_SIZE, 16 * 1024),
        ]);
        frame::write_window_update(&mut expect, 0, (1 << 20) - 65_535);
        assert_eq!(out, expect);
        let p = Peer::new(Config {
            initial_window_size: 1 << 20,
            max_frame_size: 1 << 16,
            header_table_size: 0,
            connection_window: 65_535,
            ..Config::default()
        });
        let expect = settings(&[
            (setting::ENABLE_PUSH, 0),
            (setting::MAX_CONCURRENT_STREAMS, 128),
            (setting::INITIAL_WINDOW_SIZE, 1 << 20),
            (setting::MAX_FRAME_SIZE, 1 << 16),
            (setting::MAX_HEADER_LIST_SIZE, 16 * 1024),
            (setting::HEADER_TABLE_SIZE, 0),
        ]);
        assert_eq!(p.conn.output(), expect);
    }

    #[test]
    fn preface_in_any_pieces_then_settings_acked() {
        let mut session = PREFACE.to_vec();
        session.extend(settings(&[(setting::MAX_FRAME_SIZE, 20_000)]));
        session.extend(frame(6, 0, 0, b"pingpong"));
        for split in 0..session.len() {
            let mut p = Peer::new(Config::default());
            p.read();
            p.ok(&session[..split]);
            p.ok(&session[split..]);
            let out = p.read();
            assert_eq!(out.len(), 2, "split {split}");
            assert_eq!(
                (out[0].kind, out[0].flags),
                (FrameKind::Settings, flag::ACK)
            );
            assert_eq!((out[1].kind, out[1].flags), (FrameKind::Ping, flag::ACK));
            assert_eq!(out[1].payload, b"pingpong");
            assert_eq!(p.conn.peer_max_frame, 20_000);
        }
        // One byte at a time.
        let mut p = Peer::new(Config::default());
        p.read();
        for b in &session {
            p.ok(std::slice::from_ref(b));
        }
        assert_eq!(p.read().len(), 2);
    }

    #[test]
    fn bad_preface_and_first_frame() {
        let mut p = Peer::new(Config::default());
        p.read();
        p.ok(&PREFACE[..10]);
        p.fails(b"HTTP/1.1 200", ErrorCode::Protocol);
        let mut p = Peer::new(Config::default());
        p.fails(b"GET / HTTP/1.1\r\n", ErrorCode::Protocol);
        // The first frame must be SETTINGS without ACK.
        for first in [frame(6, 0, 0, &[0; 8]), frame(4, flag::ACK, 0, &[])] {
            let mut p = Peer::new(Config::default());
            let mut b = PREFACE.to_vec();
            b.extend(first);
            p.fails(&b, ErrorCode::Protocol);
        }
    }

    #[test]
    fn settings_errors() {
        let cases: &[(Vec<u8>, ErrorCode)] = &[
            (settings(&[(setting::ENABLE_PUSH, 2)]), ErrorCode::Protocol),
            (
                settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
                ErrorCode::FlowControl,
            ),
            (
                settings(&[(setting::MAX_FRAME_SIZE, 16_383)]),
                ErrorCode::Protocol,
            ),
            (
                settings(&[(setting::MAX_FRAME_SIZE, 1 << 24)]),
                ErrorCode::Protocol,
            ),
            (frame(4, 0, 0, &[0; 5]), ErrorCode::FrameSize),
            (frame(4, flag::ACK, 0, &[0; 6]), ErrorCode::FrameSize),
            (frame(4, 0, 1, &[]), ErrorCode::Protocol),
        ];
        for (f, code) in cases {
            let mut p = Peer::ready(Config::default());
            p.fails(f, *code);
        }
        // Unknown settings are ignored, and acknowledged.
        let mut p = Peer::ready(Config::default());
        p.ok(&settings(&[(0xff, 7), (setting::ENABLE_PUSH, 1)]));
        assert_eq!(p.read()[0].flags, flag::ACK);
    }

    #[test]
    fn frame_rules_are_connection_errors() {
        let cases: &[(Vec<u8>, ErrorCode)] = &[
            // Larger than our SETTINGS_MAX_FRAME_SIZE (decided from the header alone).
            (data(1, 0, &[0; 16_385])[..9].to_vec(), ErrorCode::FrameSize),
            (data(0, ES, b"x"), ErrorCode::Protocol),
            (data(1, ES, b"x"), ErrorCode::Protocol),
            (headers(0, ES | EH, GET), ErrorCode::Protocol),
            (headers(2, ES | EH, GET), ErrorCode::Protocol),
            (rst(1, 8), ErrorCode::Protocol),
            (rst(0, 8), ErrorCode::Protocol),
            (frame(3, 0, 1, &[0; 3]), ErrorCode::FrameSize),
            (window_update(1, 1), ErrorCode::Protocol),
            (window_update(0, 0), ErrorCode::Protocol),
            (frame(8, 0, 0, &[0; 3]), ErrorCode::FrameSize),
            (frame(6, 0, 1, &[0; 8]), ErrorCode::Protocol),
            (frame(6, 0, 0, &[0; 7]), ErrorCode::FrameSize),
            (frame(7, 0, 1, &[0; 8]), ErrorCode::Protocol),
            (frame(7, 0, 0, &[0; 7]), ErrorCode::FrameSize),
            (frame(5, EH, 1, &[0, 0, 0, 2]), ErrorCode::Protocol),
            (frame(9, EH, 1, &block(GET)), ErrorCode::Protocol),
            (frame(2, 0, 0, &[0; 5]), ErrorCode::Protocol),
            // HPACK: indexed field 70, beyond the static table and an empty dynamic one.
            (frame(1, ES | EH, 1, &[0x80 | 70]), ErrorCode::Compression),
            (
                frame(1, ES | EH | flag::PADDED, 1, &[9, 0x82]),
                ErrorCode::Protocol,
            ),
        ];
        for (f, code) in cases {
            let mut p = Peer::ready(Config::default());
            p.fails(f, *code);
        }
    }

    #[test]
    fn round_trip() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(
            1,
            EH,
            &with(&[("content-length", "5"), ("accept", "*/*")]),
        ));
        p.ok(&data(1, 0, b"hel"));
        p.ok(&data(1, ES, b"lo"));
        let ev = p.events();
        assert_eq!(ev.len(), 2, "{ev:?}");
        let Event::Request {
            id: 1,
            head,
            end_stream: false,
            too_large: false,
        } = &ev[0]
        else {
            panic!("{ev:?}")
        };
        assert_eq!(head.get(&head.method), b"GET");
        assert_eq!(head.get(&head.scheme), b"https");
        assert_eq!(head.get(&head.authority), b"example.com");
        assert_eq!(head.get(&head.path), b"/index.html");
        assert_eq!(head.content_length, Some(5));
        let fields: Vec<_> = head
            .fields
            .iter()
            .map(|(n, v)| (head.get(n), head.get(v)))
            .collect();
        assert_eq!(
            fields,
            [
                (&b"content-length"[..], &b"5"[..]),
                (&b"accept"[..], &b"*/*"[..])
            ]
        );
        // Two DATA frames in a row become one event.
        let Event::Data {
            id: 1,
            data,
            end_stream: true,
        } = &ev[1]
        else {
            panic!("{ev:?}")
        };
        assert_eq!(data, b"hello");
        assert_eq!(p.conn.open_streams(), 1);
        assert_eq!(p.conn.send_capacity(1), 0, "no head sent yet");
        p.conn
            .send_headers(1, 200, [(&b"content-type"[..], &b"text/plain"[..])], false);
        assert_eq!(p.conn.send_capacity(1), 65_535);
        assert_eq!(p.conn.send_data(1, b"hello\n", true), 6);
        assert_eq!(p.conn.open_streams(), 0);
        let out = p.read();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].kind, out[0].flags), (FrameKind::Headers, EH));
        let mut fields = Vec::new();
        hpack::Decoder::new(4096)
            .decode(&out[0].payload, &mut |n, v| {
                fields.push((n.to_vec(), v.to_vec()))
            })
            .unwrap();
        assert_eq!(
            fields,
            [
                (b":status".to_vec(), b"200".to_vec()),
                (b"content-type".to_vec(), b"text/plain".to_vec())
            ]
        );
        assert_eq!(
            (out[1].kind, out[1].flags, out[1].stream),
            (FrameKind::Data, ES, 1)
        );
        assert_eq!(out[1].payload, b"hello\n");
        // The stream is closed; its head and data buffers go back for reuse.
        for e in ev {
            match e {
                Event::Request { head, .. } => p.conn.recycle(head),
                Event::Data { data, .. } => p.conn.recycle_data(data),
                _ => {}
            }
        }
        assert_eq!(p.conn.spare_heads.len(), 1);
        p.ok(&headers(3, ES | EH, GET));
        assert_eq!(p.conn.spare_heads.len(), 0);
    }

    #[test]
    fn request_head_without_body_and_head_only_response() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        let ev = p.events();
        assert!(matches!(
            ev[..],
            [Event::Request {
                id: 1,
                end_stream: true,
                ..
            }]
        ));
        // 100 Continue, then a final head that ends the stream.
        p.conn.send_headers(1, 100, [], false);
        assert_eq!(p.conn.open_streams(), 1);
        p.conn.send_headers(1, 204, [], true);
        assert_eq!(p.conn.open_streams(), 0);
        let out = p.read();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].flags, EH);
        assert_eq!(out[1].flags, EH | ES);
        // Nothing more can be sent on it.
        p.conn.send_headers(1, 200, [], true);
        assert_eq!(p.conn.send_data(1, b"x", true), 0);
        assert!(p.read().is_empty());
    }

    #[test]
    fn response_head_split_into_continuation() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        let big = vec![b'a'; 40_000];
        p.conn
            .send_headers(1, 200, [(&b"x-big"[..], &big[..])], true);
        let out = p.read();
        let kinds: Vec<_> = out.iter().map(|o| (o.kind, o.flags)).collect();
        assert_eq!(kinds[0], (FrameKind::Headers, ES));
        assert!(kinds[1..kinds.len() - 1]
            .iter()
            .all(|k| *k == (FrameKind::Continuation, 0)));
        assert_eq!(kinds[kinds.len() - 1], (FrameKind::Continuation, EH));
        assert!(out.iter().all(|o| o.payload.len() <= 16_384));
        let whole: Vec<u8> = out.iter().flat_map(|o| o.payload.clone()).collect();
        let mut n = 0;
        hpack::Decoder::new(4096)
            .decode(&whole, &mut |name, v| {
                n += 1;
                if name == b"x-big" {
                    assert_eq!(v.len(), 40_000);
                }
            })
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn request_head_split_into_continuation() {
        let b = block(GET);
        let mut p = Peer::ready(Config::default());
        p.ok(&frame(1, ES, 1, &b[..5]));
        p.ok(&frame(9, 0, 1, &b[5..20]));
        p.ok(&frame(9, 0, 1, &[]));
        assert!(p.events().is_empty());
        p.ok(&frame(9, EH, 1, &b[20..]));
        assert_eq!(request_id(&p.events()[0]), 1);
        // Anything else inside a block is a connection error, unknown types included.
        for other in [
            frame(0x20, 0, 0, b"ext"),
            frame(2, 0, 3, &[0, 0, 0, 1, 0]),
            headers(3, EH, GET),
            frame(9, EH, 5, &b[5..]),
            data(3, ES, b"x"),
        ] {
            let mut p = Peer::ready(Config::default());
            p.ok(&frame(1, ES, 3, &b[..5]));
            p.fails(&other, ErrorCode::Protocol);
        }
        // Unknown frames elsewhere are ignored.
        let mut p = Peer::ready(Config::default());
        p.ok(&frame(0x20, 0xff, 0, b"ext"));
        p.ok(&frame(0x20, 0, 7, b""));
        assert!(p.read().is_empty());
    }

    fn malformed(fields: &[(&str, &str)]) {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, fields));
        assert!(p.events().is_empty(), "{fields:?}");
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol), "{fields:?}");
        assert_eq!(p.conn.open_streams(), 0);
        // The connection goes on.
        p.ok(&headers(3, ES | EH, GET));
        assert_eq!(request_id(&p.events()[0]), 3);
    }

    #[test]
    fn malformed_requests_are_reset() {
        let m = |f: &[(&str, &str)]| malformed(f);
        m(&[
            (":method", "GET"),
            ("accept", "*/*"),
            (":scheme", "https"),
            (":path", "/"),
        ]);
        m(&with(&[(":foo", "bar")]));
        m(&with(&[(":status", "200")]));
        m(&with(&[(":method", "GET")]));
        m(&with(&[(":path", "/")]));
        m(&with(&[(":scheme", "http")]));
        m(&[(":scheme", "https"), (":path", "/")]);
        m(&[(":method", "GET"), (":path", "/")]);
        m(&[(":method", "GET"), (":scheme", "https")]);
        m(&[(":method", "GET"), (":scheme", "https"), (":path", "")]);
        m(&[
            (":method", "CONNECT"),
            (":authority", "a:443"),
            (":path", "/"),
        ]);
        m(&[
            (":method", "CONNECT"),
            (":scheme", "https"),
            (":authority", "a:443"),
        ]);
        m(&[(":method", "CONNECT")]);
        m(&with(&[("Accept", "*/*")]));
        m(&with(&[("connection", "keep-alive")]));
        m(&with(&[("keep-alive", "5")]));
        m(&with(&[("proxy-connection", "x")]));
        m(&with(&[("transfer-encoding", "chunked")]));
        m(&with(&[("upgrade", "h2c")]));
        m(&with(&[("te", "gzip")]));
        m(&with(&[("a b", "c")]));
        m(&with(&[("", "c")]));
        m(&with(&[("a", "b\r\nc: d")]));
        m(&with(&[("a", "b\0")]));
        m(&with(&[("a", " b")]));
        m(&with(&[("a", "b\t")]));
        m(&with(&[("content-length", "x")]));
        m(&with(&[("content-length", "1, 1")]));
        m(&with(&[("content-length", "1"), ("content-length", "2")]));
        // With END_STREAM on the head, a content-length other than 0 is a lie.
        m(&with(&[("content-length", "3")]));
        // What is allowed.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(
            1,
            ES | EH,
            &with(&[
                ("te", "trailers"),
                ("content-length", "0"),
                ("content-length", "0"),
                ("x", ""),
                ("cookie", "a=b"),
                ("cookie", "c=d"),
            ]),
        ));
        p.ok(&headers(
            3,
            ES | EH,
            &[(":method", "CONNECT"), (":authority", "example.com:443")],
        ));
        let ev = p.events();
        assert_eq!(ev.len(), 2, "{ev:?}");
        let Event::Request { head, .. } = &ev[0] else {
            panic!()
        };
        assert_eq!(head.fields.len(), 6);
        assert_eq!(head.content_length, Some(0));
        assert!(p.read().is_empty());
    }

    #[test]
    fn content_length_mismatch() {
        // More than announced: reset at once.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, &with(&[("content-length", "3")])));
        p.ok(&data(1, 0, b"ab"));
        p.ok(&data(1, 0, b"cd"));
        let ev = p.events();
        assert!(matches!(ev[1], Event::Data { .. }));
        assert!(matches!(
            ev[2],
            Event::Reset {
                id: 1,
                code: ErrorCode::Protocol
            }
        ));
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        // Less than announced when the body ends.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, &with(&[("content-length", "3")])));
        p.ok(&data(1, ES, b"ab"));
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        // Less than announced when trailers end it.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, &with(&[("content-length", "3")])));
        p.ok(&data(1, 0, b"ab"));
        p.ok(&headers(1, ES | EH, &[("x-checksum", "1")]));
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        // Exactly: fine, over several frames.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, &with(&[("content-length", "3")])));
        p.ok(&data(1, 0, b"a"));
        p.ok(&data(1, 0, b"b"));
        p.ok(&data(1, ES, b"c"));
        assert!(p.read().is_empty());
    }

    #[test]
    fn trailers() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&data(1, 0, b"body"));
        p.ok(&headers(1, ES | EH, &[("x-checksum", "abc")]));
        let ev = p.events();
        assert!(matches!(ev[2], Event::Trailers { id: 1 }), "{ev:?}");
        // Trailers without END_STREAM, or with a pseudo-header field.
        for (flags, fields) in [
            (EH, &[("x-checksum", "abc")][..]),
            (ES | EH, &[(":path", "/")][..]),
            (ES | EH, &[("Bad", "x")][..]),
        ] {
            let mut p = Peer::ready(Config::default());
            p.ok(&headers(1, EH, GET));
            p.ok(&headers(1, flags, fields));
            let ev = p.events();
            assert!(matches!(
                ev[1],
                Event::Reset {
                    id: 1,
                    code: ErrorCode::Protocol
                }
            ));
            assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        }
    }

    #[test]
    fn too_large_head_is_flagged_and_body_discarded() {
        let cfg = Config {
            max_header_list_size: 300,
            ..Config::default()
        };
        let mut p = Peer::ready(cfg);
        let v = "v".repeat(100);
        let f = with(&[("a", &*Box::leak(v.clone().into_boxed_str())), ("b", "c")]);
        let f2 = with(&[("z", "ok")]);
        p.ok(&headers(1, EH, &f));
        for _ in 0..3 {
            p.ok(&data(1, 0, &[7; 16_000]));
        }
        p.ok(&data(1, ES, &[7; 100]));
        let ev = p.events();
        assert_eq!(ev.len(), 2, "{ev:?}");
        let Event::Request {
            id: 1,
            head,
            too_large: true,
            end_stream: false,
        } = &ev[0]
        else {
            panic!("{ev:?}")
        };
        // Only the body's end arrives.
        let Event::Data {
            id: 1,
            data,
            end_stream: true,
        } = &ev[1]
        else {
            panic!("{ev:?}")
        };
        assert!(data.is_empty());
        assert_eq!(head.get(&head.path), b"/index.html");
        assert!(head.fields.is_empty());
        // The discarded body's credit came back at once.
        let out = p.read();
        assert!(out.iter().any(|o| o.kind == FrameKind::WindowUpdate));
        // The next request decodes as usual.
        p.ok(&headers(3, ES | EH, &f2));
        let Event::Request {
            too_large: false,
            head,
            ..
        } = &p.events()[0]
        else {
            panic!()
        };
        assert_eq!(head.fields.len(), 1);
    }

    #[test]
    fn stream_states() {
        // DATA and HEADERS on a half-closed (remote) stream: STREAM_CLOSED.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        p.ok(&data(1, ES, b"x"));
        assert_eq!(p.reset_with(), (1, ErrorCode::StreamClosed));
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        p.ok(&headers(1, ES | EH, GET));
        assert_eq!(p.reset_with(), (1, ErrorCode::StreamClosed));
        // After the client's RST_STREAM: stream errors STREAM_CLOSED.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&rst(1, 8));
        let ev = p.events();
        assert!(matches!(
            ev[1],
            Event::Reset {
                id: 1,
                code: ErrorCode::Cancel
            }
        ));
        p.ok(&data(1, ES, b"x"));
        assert_eq!(p.reset_with(), (1, ErrorCode::StreamClosed));
        p.ok(&headers(1, ES | EH, GET));
        assert_eq!(p.reset_with(), (1, ErrorCode::StreamClosed));
        // PRIORITY, WINDOW_UPDATE and RST_STREAM on a closed stream are ignored.
        p.ok(&frame(2, 0, 1, &[0, 0, 0, 0, 9]));
        p.ok(&window_update(1, 5));
        p.ok(&rst(1, 0));
        assert!(p.read().is_empty());
        // Closed by both ends: DATA is a stream error, HEADERS a connection error.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        p.conn.send_headers(1, 204, [], true);
        p.read();
        p.ok(&data(1, ES, b"x"));
        assert_eq!(p.reset_with(), (1, ErrorCode::StreamClosed));
        p.fails(&headers(1, ES | EH, GET), ErrorCode::StreamClosed);
        // A new stream id must grow: a lower one never used is a PROTOCOL_ERROR.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(5, ES | EH, GET));
        p.fails(&headers(3, ES | EH, GET), ErrorCode::Protocol);
        // PRIORITY on an idle stream neither opens it nor uses its id up.
        let mut p = Peer::ready(Config::default());
        p.ok(&frame(2, 0, 3, &[0, 0, 0, 0, 9]));
        p.ok(&headers(1, ES | EH, GET));
        assert_eq!(request_id(&p.events()[0]), 1);
    }

    #[test]
    fn priority_rules() {
        // A stream depending on itself, by PRIORITY or in HEADERS.
        let mut p = Peer::ready(Config::default());
        p.ok(&frame(2, 0, 3, &[0, 0, 0, 3, 9]));
        assert_eq!(p.reset_with(), (3, ErrorCode::Protocol));
        let mut p = Peer::ready(Config::default());
        let mut f = vec![0, 0, 0, 1, 9];
        f.extend(block(GET));
        p.ok(&frame(1, ES | EH | flag::PRIORITY, 1, &f));
        assert!(p.events().is_empty());
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        // The HPACK context stayed in step: the next request decodes.
        p.ok(&headers(3, ES | EH, GET));
        assert_eq!(request_id(&p.events()[0]), 3);
        // PRIORITY of the wrong length: a stream error FRAME_SIZE_ERROR.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&frame(2, 0, 1, &[0, 0, 0, 0]));
        assert_eq!(p.reset_with(), (1, ErrorCode::FrameSize));
    }

    #[test]
    fn concurrency_limit_refuses() {
        let cfg = Config {
            max_concurrent_streams: 2,
            ..Config::default()
        };
        let mut p = Peer::ready(cfg);
        p.ok(&headers(1, ES | EH, GET));
        p.ok(&headers(3, ES | EH, GET));
        p.ok(&headers(5, EH, GET));
        assert_eq!(p.reset_with(), (5, ErrorCode::RefusedStream));
        assert_eq!(p.events().len(), 2);
        // Body frames of the refused stream in flight are dropped quietly.
        p.ok(&data(5, ES, b"late"));
        assert!(p.read().iter().all(|o| o.kind == FrameKind::WindowUpdate));
        // Once one closes, a new one is taken.
        p.conn.send_headers(1, 204, [], true);
        p.ok(&headers(7, ES | EH, GET));
        assert_eq!(request_id(&p.events()[0]), 7);
    }

    #[test]
    fn rapid_reset() {
        let cfg = Config {
            max_resets_per_sec: 10,
            ..Config::default()
        };
        let mut p = Peer::ready(cfg);
        let mut id = 1;
        for _ in 0..10 {
            p.ok(&headers(id, EH, GET));
            p.ok(&rst(id, 8));
            id += 2;
        }
        // A second later the count starts again.
        p.now += Duration::from_millis(1001);
        for _ in 0..10 {
            p.ok(&headers(id, EH, GET));
            p.ok(&rst(id, 8));
            id += 2;
        }
        p.ok(&headers(id, EH, GET));
        p.fails(&rst(id, 8), ErrorCode::EnhanceYourCalm);
        // Refused streams count too.
        let cfg = Config {
            max_resets_per_sec: 5,
            max_concurrent_streams: 0,
            ..Config::default()
        };
        let mut p = Peer::ready(cfg);
        for id in (1..=9).step_by(2) {
            p.ok(&headers(id, ES | EH, GET));
        }
        p.fails(&headers(11, ES | EH, GET), ErrorCode::EnhanceYourCalm);
        // And so do streams the client makes the server reset.
        let mut p = Peer::ready(Config {
            max_resets_per_sec: 3,
            ..Config::default()
        });
        for id in (1..=5).step_by(2) {
            p.ok(&headers(id, ES | EH, &with(&[("Bad", "x")])));
        }
        p.fails(
            &headers(7, ES | EH, &with(&[("Bad", "x")])),
            ErrorCode::EnhanceYourCalm,
        );
    }

    #[test]
    fn a_head_is_in_progress_until_its_last_continuation() {
        let mut p = Peer::ready(Config::default());
        assert!(!p.conn.head_in_progress());
        let h = frame(1, ES, 1, &block(GET));
        // A frame header cut short, then the HEADERS frame cut short.
        p.ok(&h[..5]);
        assert!(p.conn.head_in_progress());
        p.ok(&h[5..12]);
        assert!(p.conn.head_in_progress());
        // Whole, without END_HEADERS: still in progress until its CONTINUATION.
        p.ok(&h[12..]);
        assert!(p.conn.head_in_progress());
        p.ok(&frame(9, EH, 1, &[]));
        assert!(!p.conn.head_in_progress());
        // A DATA frame cut short is a body, not a head.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&data(1, ES, b"hello")[..11]);
        assert!(!p.conn.head_in_progress());
    }

    #[test]
    fn continuation_flood() {
        let mut p = Peer::ready(Config {
            max_header_block: 1000,
            ..Config::default()
        });
        p.ok(&frame(1, ES, 1, &block(GET)));
        let filler = vec![0x82; 400];
        p.ok(&frame(9, 0, 1, &filler));
        p.ok(&frame(9, 0, 1, &filler));
        p.fails(&frame(9, 0, 1, &filler), ErrorCode::EnhanceYourCalm);
        // Empty CONTINUATION frames are counted as control frames.
        let mut p = Peer::ready(Config {
            max_control_per_sec: 50,
            ..Config::default()
        });
        p.ok(&frame(1, ES, 1, &block(GET)));
        let mut flood = Vec::new();
        for _ in 0..60 {
            flood.extend(frame(9, 0, 1, &[]));
        }
        p.fails(&flood, ErrorCode::EnhanceYourCalm);
    }

    #[test]
    fn settings_flood() {
        let mut p = Peer::ready(Config {
            max_control_per_sec: 100,
            ..Config::default()
        });
        // Ready sent two SETTINGS frames already.
        for _ in 0..98 {
            p.ok(&settings(&[]));
            p.read();
        }
        p.fails(&settings(&[]), ErrorCode::EnhanceYourCalm);
        // Below the rate, no complaint however long it goes on.
        let mut p = Peer::ready(Config {
            max_control_per_sec: 100,
            ..Config::default()
        });
        for _ in 0..1000 {
            p.now += Duration::from_millis(50);
            p.ok(&settings(&[]));
            p.ok(&frame(6, 0, 0, &[1; 8]));
            p.ok(&window_update(0, 1));
            p.ok(&frame(2, 0, 9, &[0, 0, 0, 0, 1]));
            p.read();
        }
    }

    #[test]
    fn ping_flood_without_reading() {
        let mut p = Peer::ready(Config {
            max_control_per_sec: 1_000_000,
            max_control_backlog: 1000,
            ..Config::default()
        });
        let ping = frame(6, 0, 0, &[1; 8]);
        // 17 bytes an answer: 58 fit in 1000 bytes.
        for _ in 0..58 {
            p.ok(&ping);
        }
        let e = p.send(&ping).unwrap_err();
        assert_eq!(e.code, ErrorCode::EnhanceYourCalm);
        // A client that reads is never cut off.
        let mut p = Peer::ready(Config {
            max_control_per_sec: 1_000_000,
            max_control_backlog: 1000,
            ..Config::default()
        });
        for i in 0..1000 {
            p.ok(&ping);
            if i % 10 == 0 {
                p.read();
            }
        }
        // Answers waiting behind a partly written response still count once written.
        let mut p = Peer::ready(Config {
            max_control_per_sec: 1_000_000,
            max_control_backlog: 100,
            ..Config::default()
        });
        p.ok(&headers(1, ES | EH, GET));
        p.conn.send_headers(1, 200, [], false);
        for _ in 0..5 {
            p.ok(&ping);
            p.conn.send_data(1, &[0; 1000], false);
        }
        let n = p.conn.output().len();
        // All but the end of the last DATA frame is written: no answer is waiting.
        p.conn.written(n - 10);
        for _ in 0..5 {
            p.ok(&ping);
        }
        let e = p.send(&ping).unwrap_err();
        assert_eq!(e.code, ErrorCode::EnhanceYourCalm);
    }

    #[test]
    fn ping_answered_and_acks_ignored() {
        let mut p = Peer::ready(Config::default());
        p.ok(&frame(6, 0, 0, b"abcdefgh"));
        p.ok(&frame(6, flag::ACK, 0, b"ijklmnop"));
        let out = p.read();
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].flags, &out[0].payload[..]),
            (flag::ACK, &b"abcdefgh"[..])
        );
    }

    #[test]
    fn send_window_updates_and_overflow() {
        // The connection's send window past 2^31-1.
        let mut p = Peer::ready(Config::default());
        p.ok(&window_update(0, MAX_WINDOW - 65_535));
        p.fails(&window_update(0, 1), ErrorCode::FlowControl);
        // A stream's: a stream error; an increment of 0 on a stream too.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&window_update(1, MAX_WINDOW));
        assert_eq!(p.reset_with(), (1, ErrorCode::FlowControl));
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&window_update(1, 0));
        assert_eq!(p.reset_with(), (1, ErrorCode::Protocol));
        // SETTINGS_INITIAL_WINDOW_SIZE taking an open stream's window past 2^31-1.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        p.ok(&window_update(1, MAX_WINDOW - 65_535));
        p.fails(
            &settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]),
            ErrorCode::FlowControl,
        );
    }

    #[test]
    fn initial_window_changes_apply_to_open_streams() {
        let mut p = Peer::ready(Config::default());
        p.ok(&settings(&[(setting::INITIAL_WINDOW_SIZE, 3)]));
        p.ok(&headers(1, ES | EH, GET));
        p.conn.send_headers(1, 200, [], false);
        assert_eq!(p.conn.send_data(1, b"hello\n", true), 3);
        // Lowered below what was sent: the window goes negative (RFC 9113 §6.9.2).
        p.ok(&settings(&[(setting::INITIAL_WINDOW_SIZE, 2)]));
        assert_eq!(p.conn.send_capacity(1), 0);
        p.ok(&window_update(1, 2));
        assert_eq!(p.conn.send_capacity(1), 1);
        assert_eq!(p.conn.send_data(1, b"lo\n", true), 1);
        p.ok(&settings(&[(setting::INITIAL_WINDOW_SIZE, 100)]));
        assert_eq!(p.conn.send_data(1, b"o\n", true), 2);
        let out = p.read();
        let lens: Vec<_> = out
            .iter()
            .filter(|o| o.kind == FrameKind::Data)
            .map(|o| (o.payload.len(), o.flags))
            .collect();
        assert_eq!(lens, [(3, 0), (1, 0), (2, ES)]);
    }

    #[test]
    fn megabyte_response_follows_window_updates() {
        let mut p = Peer::ready(Config::default());
        p.ok(&settings(&[(setting::MAX_FRAME_SIZE, 20_000)]));
        p.ok(&headers(1, ES | EH, GET));
        p.conn.send_headers(1, 200, [], false);
        let body = vec![b'z'; 1 << 20];
        let mut sent = p.conn.send_data(1, &body, true);
        assert_eq!(sent, 65_535);
        assert_eq!(p.conn.send_data(1, &body[sent..], true), 0);
        let mut got = 0;
        let mut rounds = 0;
        loop {
            let out = p.read();
            for o in out.iter().filter(|o| o.kind == FrameKind::Data) {
                assert!(o.payload.len() <= 20_000);
                got += o.payload.len();
                if o.flags & ES != 0 {
                    assert_eq!(got, 1 << 20);
                    assert_eq!(sent, 1 << 20);
                    assert_eq!(p.conn.open_streams(), 0);
                    assert!(rounds >= 16);
                    return;
                }
            }
            // Nothing moves until the client opens the windows.
            assert_eq!(p.conn.send_capacity(1), 0);
            p.ok(&window_update(0, 65_535));
            assert_eq!(p.conn.send_capacity(1), 0);
            p.ok(&window_update(1, 65_535));
            assert_eq!(p.conn.send_capacity(1), 65_535);
            sent += p.conn.send_data(1, &body[sent..], true);
            rounds += 1;
        }
    }

    #[test]
    fn receive_windows_and_release() {
        let mut p = Peer::ready(Config {
            connection_window: 100_000,
            ..Config::default()
        });
        p.ok(&headers(1, EH, &with(&[("content-length", "70000")])));
        p.ok(&data(1, 0, &[1; 16_000]));
        p.ok(&data(1, 0, &[1; 16_000]));
        // Released while the windows are above half: nothing announced yet.
        p.conn.release(1, 32_000);
        let out = p.read();
        assert!(out.is_empty(), "{out:?}");
        p.ok(&data(1, 0, &[1; 16_000]));
        let out = p.read();
        // The stream's window went below half with credit waiting: announced; the
        // connection's (100,000 - 48,000) is still above half.
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].stream, out[0].u32_at(0)), (1, 32_000));
        p.conn.release(1, 16_000);
        p.ok(&data(1, 0, &[1; 6_000]));
        // Now the connection's window is below half (46,000): 48,000 announced.
        let out = p.read();
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].stream, out[0].u32_at(0)), (0, 48_000));
        // Releasing more than was received is harmless: credit never passes the windows'
        // sizes.
        p.conn.release(1, 1 << 30);
        assert!(p.read().is_empty());
        assert_eq!(p.conn.conn_recv_window + p.conn.conn_recv_released, 100_000);
        let s = &p.conn.streams[0];
        assert_eq!(s.recv_window + s.recv_released, 65_535);
        // Padding is given back by the connection at once.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        let mut padded = vec![200];
        padded.extend([1; 10]);
        padded.extend([0; 200]);
        for _ in 0..200 {
            p.ok(&frame(0, flag::PADDED, 1, &padded));
        }
        let ev = p.events();
        let Event::Data { data, .. } = &ev[1] else {
            panic!()
        };
        assert_eq!(data.len(), 2000);
        // 42,200 bytes of flow, 40,200 of them padding given back: above half.
        assert_eq!(
            p.conn.streams[0].recv_window + p.conn.streams[0].recv_released,
            65_535 - 2000
        );
    }

    #[test]
    fn receive_window_exceeded() {
        // A stream's window: a stream error; the connection goes on.
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, EH, GET));
        for _ in 0..3 {
            p.ok(&data(1, 0, &[0; 16_384]));
        }
        p.ok(&data(1, 0, &[0; 16_383]));
        p.ok(&data(1, 0, &[0; 1]));
        assert_eq!(p.reset_with(), (1, ErrorCode::FlowControl));
        // The connection's: a connection error.
        let mut p = Peer::ready(Config {
            connection_window: 65_535,
            initial_window_size: 1 << 20,
            ..Config::default()
        });
        p.ok(&headers(1, EH, GET));
        for _ in 0..3 {
            p.ok(&data(1, 0, &[0; 16_384]));
        }
        p.ok(&data(1, 0, &[0; 16_383]));
        p.fails(&data(1, 0, &[0; 1]), ErrorCode::FlowControl);
        // Before our SETTINGS are acknowledged a smaller stream window is not enforced.
        let mut p = Peer::new(Config {
            initial_window_size: 1000,
            ..Config::default()
        });
        let mut b = PREFACE.to_vec();
        b.extend(settings(&[]));
        b.extend(headers(1, EH, GET));
        b.extend(data(1, 0, &[0; 2000]));
        p.ok(&b);
        // Once acknowledged, it is: 2,000 received of 1,000.
        p.ok(&frame(4, flag::ACK, 0, &[]));
        p.read();
        p.ok(&data(1, 0, &[0; 1]));
        assert_eq!(p.reset_with(), (1, ErrorCode::FlowControl));
    }

    #[test]
    fn data_after_reset_by_us_is_dropped_and_credited() {
        let mut p = Peer::ready(Config {
            connection_window: 65_535,
            ..Config::default()
        });
        p.ok(&headers(1, EH, GET));
        p.conn.reset(1, ErrorCode::Cancel);
        assert_eq!(p.reset_with(), (1, ErrorCode::Cancel));
        assert_eq!(p.conn.open_streams(), 0);
        for _ in 0..10 {
            p.ok(&data(1, 0, &[0; 16_384]));
        }
        let ev = p.events();
        assert_eq!(ev.len(), 1);
        let out = p.read();
        assert!(out
            .iter()
            .all(|o| o.kind == FrameKind::WindowUpdate && o.stream == 0));
        p.ok(&headers(1, ES | EH, &[("x-trailer", "1")]));
        assert!(p.read().is_empty());
        // Sending on it does nothing.
        p.conn.send_headers(1, 200, [], true);
        assert!(p.conn.output().is_empty());
    }

    #[test]
    fn go_away_graceful() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        p.ok(&headers(3, EH, GET));
        p.conn.go_away();
        let out = p.read();
        assert_eq!(
            (out[0].kind, out[0].u32_at(0), out[0].code()),
            (FrameKind::GoAway, 3, ErrorCode::NoError)
        );
        // A stream after it is not processed (its head still decoded).
        p.ok(&headers(5, ES | EH, GET));
        p.ok(&data(5, 0, b"x"));
        p.ok(&headers(7, ES | EH, GET));
        assert_eq!(p.events().len(), 2);
        assert!(!p.conn.is_finished());
        p.conn.send_headers(1, 204, [], true);
        p.conn.send_headers(3, 200, [], false);
        p.conn.send_data(3, b"", true);
        assert!(!p.conn.is_finished());
        p.ok(&data(3, ES, b""));
        p.read();
        assert!(p.conn.is_finished());
    }

    #[test]
    fn go_away_from_client() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        let mut g = 0u32.to_be_bytes().to_vec();
        g.extend(0u32.to_be_bytes());
        p.ok(&frame(7, 0, 0, &g));
        let ev = p.events();
        assert!(matches!(
            ev[1],
            Event::GoAway {
                code: ErrorCode::NoError
            }
        ));
        p.ok(&headers(3, ES | EH, GET));
        assert!(p.events().is_empty());
        p.conn.send_headers(1, 204, [], true);
        p.read();
        assert!(p.conn.is_finished());
    }

    #[test]
    fn connection_error_names_last_processed_stream() {
        let mut p = Peer::ready(Config::default());
        p.ok(&headers(1, ES | EH, GET));
        p.ok(&headers(3, ES | EH, GET));
        p.send(&headers(4, ES | EH, GET)).unwrap_err();
        let out = p.read();
        assert_eq!(out[0].u32_at(0), 3);
        assert_eq!(p.conn.open_streams(), 0);
        assert!(p.conn.is_finished());
        // Calls after the end do nothing.
        p.conn.send_headers(1, 200, [], true);
        p.conn.release(1, 10);
        p.conn.go_away();
        assert!(p.conn.output().is_empty());
    }

    #[test]
    fn any_split_gives_the_same_result() {
        let mut session = PREFACE.to_vec();
        session.extend(settings(&[(setting::INITIAL_WINDOW_SIZE, 10)]));
        session.extend(headers(1, EH, &with(&[("content-length", "4")])));
        session.extend(frame(0, flag::PADDED, 1, &[2, b'a', b'b', 0, 0]));
        session.extend(frame(6, 0, 0, b"12345678"));
        session.extend(data(1, ES, b"cd"));
        session.extend(headers(3, ES | EH, GET));
        session.extend(rst(3, 8));
        let run = |pieces: &[&[u8]]| {
            let mut p = Peer::new(Config::default());
            for piece in pieces {
                p.ok(piece);
            }
            let ev: Vec<String> = p.events().iter().map(|e| format!("{e:?}")).collect();
            (ev, p.read())
        };
        let whole = run(&[&session]);
        assert_eq!(whole.0.len(), 4, "{:?}", whole.0);
        for a in 0..session.len() {
            let b = (a + 13).min(session.len());
            assert_eq!(
                run(&[&session[..a], &session[a..b], &session[b..]]),
                whole,
                "split {a} {b}"
            );
        }
    }
}
