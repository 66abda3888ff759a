//! The request-head parser: request line and header section, parsed incrementally and
//! validated strictly (RFC 9112 §2-§7, RFC 9110 §5).
//!
//! The parser resumes where it stopped: bytes already checked are not checked again when more
//! arrive, so a client that sends one byte at a time costs linear, not quadratic, work, and
//! the verdict on a byte stream never depends on how it was split (property-tested and
//! fuzzed). Header names and values are [`Span`]s into the caller's buffer; nothing is copied.
//!
//! The hot loops look at eight bytes at a time (field values, the request target) with the
//! classic SWAR "has a byte less than n" tests; `benches/parse.rs` measures them against
//! httparse.

use crate::host::{valid_authority, valid_host};
use crate::{Error, Limits};

/// A byte range into the buffer the head was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    pub(crate) fn new(start: usize, end: usize) -> Span {
        // Heads are bounded by `Limits::max_head_bytes`, far below u32::MAX.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The bytes of this span in `buf`.
    pub fn get<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start as usize..self.end as usize]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True if the span is empty.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// The request method. Methods outside RFC 9110 and PATCH are [`Method::Other`]; their text is
/// [`RequestHead::method_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
    Other,
}

impl Method {
    /// The method named `m` (case-sensitive, as methods are); [`Method::Other`] for any name
    /// the parser does not know.
    #[inline]
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }

    /// The registered method `m` spells in other letter case (`get`, `Post`), which is not
    /// that method: method names are case-sensitive (RFC 9110 §9.1). `None` for a method as
    /// registered, and for an extension method of another name.
    pub fn miscased(m: &[u8]) -> Option<&'static str> {
        if Method::from_bytes(m) != Method::Other {
            return None;
        }
        const KNOWN: [&str; 9] = [
            "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
        ];
        KNOWN
            .into_iter()
            .find(|k| k.as_bytes().eq_ignore_ascii_case(m))
    }

    /// The name of a method the parser knows (`"GET"`, ...); `None` for an extension method.
    pub fn known_name(self) -> Option<&'static str> {
        Some(match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Connect => "CONNECT",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Patch => "PATCH",
            Method::Other => return None,
        })
    }
}

/// The protocol version of a request. `HTTP/1.x` with x > 1 is treated as HTTP/1.1
/// (RFC 9110 §6.2: a server answers with the highest minor version it supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// HTTP/2 (RFC 9113): never parsed from a request line; a server that carries an HTTP/2
    /// request through this crate's head marks it so ([`RequestHead::set_version`]).
    Http2,
}

/// One header field: name and value (value without surrounding whitespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub name: Span,
    pub value: Span,
}

/// How the length of the request body is determined (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows the head.
    Chunked,
}

/// What the `Expect` field asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    None,
    /// `100-continue`: the client waits for an interim 100 before it sends the body.
    Continue,
    /// Any other expectation: the server answers 417.
    Unsupported,
}

/// The form of the request target (RFC 9112 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`
    Origin,
    /// `http://authority/path?query`; [`RequestHead::path_span`] is the origin-form part.
    Absolute,
    /// `host:port`, only with CONNECT.
    Authority,
    /// `*`, only with OPTIONS.
    Asterisk,
}

/// A parsed and validated request head. Spans refer to the buffer given to [`Parser::parse`].
#[derive(Debug, Clone)]
pub struct RequestHead {
    method: Method,
    method_span: Span,
    target: Span,
    path: Span,
    form: TargetForm,
    version: Version,
    headers: Vec<Header>,
    host: Option<Span>,
    /// The authority of an absolute-form target.
    authority: Option<Span>,
    framing: BodyFraming,
    expect: Expect,
    keep_alive: bool,
    len: usize,
    /// Where the path ends in the buffer: the `?` that starts the query, or the end of the
    /// path span (found while the target was checked, so nobody scans it again).
    query_at: u32,
    /// A precondition field came (`If-Match`, `If-None-Match`, `If-Modified-Since`,
    /// `If-Unmodified-Since`, `If-Range`): noted as the fields are read, so that a handler
    /// does not scan them again to learn that none did.
    preconditions: bool,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead::with_headers(Vec::with_capacity(16))
    }
}

impl RequestHead {
    /// Empties the head in place, keeping its field storage.
    fn clear(&mut self) {
        let headers = std::mem::take(&mut self.headers);
        *self = RequestHead::with_headers(headers);
    }

    /// An empty head that will store its fields in `headers` (cleared).
    fn with_headers(mut headers: Vec<Header>) -> RequestHead {
        headers.clear();
        RequestHead {
            method: Method::Get,
            method_span: Span::default(),
            target: Span::default(),
            path: Span::default(),
            form: TargetForm::Origin,
            version: Version::Http11,
            headers,
            host: None,
            authority: None,
            framing: BodyFraming::None,
            expect: Expect::None,
            keep_alive: true,
            len: 0,
            query_at: 0,
            preconditions: false,
        }
    }
}

/// A 400 for the parser's error paths, out of line and cold: a branch that reaches a call of
/// a cold function is laid out away from the path a well-formed head takes, so that path runs
/// from fewer code cache lines (`scripts/perf/code_lines.py`).
#[cold]
#[inline(never)]
fn bad(why: &'static str) -> Error {
    Error::BadRequest(why)
}

fn ascii(b: &[u8]) -> &str {
    // Request lines are validated to visible ASCII, so this never falls back.
    std::str::from_utf8(b).unwrap_or("")
}

impl RequestHead {
    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }
    /// The method's text, e.g. `"GET"` or an extension method such as `"ECHO"`.
    pub fn method_str<'a>(&self, buf: &'a [u8]) -> &'a str {
        // A known method's name is the text it was parsed from (methods are case-sensitive).
        if let Some(name) = self.method.known_name() {
            return name;
        }
        ascii(self.method_span.get(buf))
    }
    /// The request target as sent (any form).
    pub fn target<'a>(&self, buf: &'a [u8]) -> &'a str {
        ascii(self.target.get(buf))
    }
    /// The origin-form part of the target: path and query (for absolute-form, what follows the
    /// authority; `/` if that is empty). Empty for authority- and asterisk-form.
    pub fn path<'a>(&self, buf: &'a [u8]) -> &'a str {
        if self.form == TargetForm::Absolute && self.path.is_empty() {
            return "/";
        }
        ascii(self.path.get(buf))
    }
    /// Span of [`RequestHead::target`].
    pub fn target_span(&self) -> Span {
        self.target
    }
    /// Span of [`RequestHead::path`] (empty for an absolute-form target with no path).
    pub fn path_span(&self) -> Span {
        self.path
    }
    /// Where the path without its query ends, as an offset in the parsed buffer (like a
    /// [`Span`]'s): the `?` that starts the query, or [`RequestHead::path_span`]'s end when
    /// there is no query.
    pub fn query_at(&self) -> u32 {
        self.query_at
    }
    /// The form of the target.
    pub fn target_form(&self) -> TargetForm {
        self.form
    }
    /// The protocol version.
    pub fn version(&self) -> Version {
        self.version
    }
    /// Marks the version the request really came in: an HTTP/2 request written out as an
    /// HTTP/1.1 head to be parsed by these rules is [`Version::Http2`] (keep-alive and
    /// `Expect` do not apply to it; its body is framed by its stream).
    pub fn set_version(&mut self, version: Version) {
        self.version = version;
    }
    /// Takes the field list out (for [`Parser::recycle_fields`]), leaving the head without
    /// fields.
    #[inline]
    pub fn take_fields(&mut self) -> Vec<Header> {
        std::mem::take(&mut self.headers)
    }

    /// All header fields in the order received.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }
    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.get(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.get(buf))
    }
    /// The Host field's value, if any.
    pub fn host_span(&self) -> Option<Span> {
        self.host
    }
    /// The authority of an absolute-form target (`other:8080` of `http://other:8080/x`).
    pub fn authority_span(&self) -> Option<Span> {
        self.authority
    }
    /// The host the request is for: an absolute-form target's authority, which replaces the
    /// Host field (RFC 9112 §3.2.2: a server MUST ignore Host then), else the Host field.
    pub fn effective_host_span(&self) -> Option<Span> {
        self.authority.or(self.host)
    }
    /// How the body is framed.
    pub fn framing(&self) -> BodyFraming {
        self.framing
    }
    /// What `Expect` asked for.
    pub fn expect(&self) -> Expect {
        self.expect
    }
    /// True if a precondition field came (`If-Match`, `If-None-Match`, `If-Modified-Since`,
    /// `If-Unmodified-Since` or `If-Range`, any case): without one, a request is
    /// unconditional (RFC 9110 §13) and its conditions need not be read.
    pub fn has_preconditions(&self) -> bool {
        self.preconditions
    }
    /// True if the connection may stay open after this exchange (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
    /// Length of the head in bytes (request line through the empty line).
    pub fn len(&self) -> usize {
        self.len
    }
    /// True before a head has been parsed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    RequestLine,
    Headers,
    Done,
}

/// Field-level facts gathered while the header lines go by, checked once the head is complete.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    hosts: u32,
    content_length: Option<u64>,
    transfer_encoding: bool,
    te_last_chunked: bool,
    te_chunked_seen: bool,
    te_other_coding: bool,
    conn_close: bool,
    conn_keep_alive: bool,
}

/// Incremental request-head parser. Feed it the same growing buffer until it returns
/// `Ok(Some(head_len))`; then [`Parser::head`] describes the request and [`Parser::reset`]
/// prepares for the next one (the next request starts at `head_len` plus the body).
///
/// A verdict depends only on the bytes, never on how they were split across calls: an error
/// is reported at the first offending byte, whether it arrived alone or with the whole head.
#[derive(Debug, Clone)]
pub struct Parser {
    limits: Limits,
    state: State,
    /// Start of the first line not yet parsed. In `RequestLine` it only moves over leading
    /// empty lines, so `pos / 2` is how many were skipped.
    pos: usize,
    /// The incomplete line at `pos` has been checked up to this offset; parsing resumes here
    /// when more bytes arrive, so a client that sends one byte at a time costs linear, not
    /// quadratic, work, and a verdict never depends on where the input was split.
    scan: usize,
    /// Offset of the colon of the incomplete field line at `pos`, once seen (0 before).
    colon: usize,
    /// The method of the incomplete request line was seen to end with SP.
    method_checked: bool,
    /// Some byte has been given since the last reset.
    started: bool,
    /// `parse` was called since the last reset or `take_head`: otherwise the parser is
    /// already as a reset leaves it and `reset` has nothing to do.
    used: bool,
    seen: Seen,
    head: RequestHead,
    /// Field storage for the next head, handed back by [`Parser::recycle`], so a connection
    /// that takes a head per request allocates none.
    spare: Vec<Header>,
    /// The last `Host` value found valid: a keep-alive client repeats it in every request.
    host_memo: HostMemo,
}

/// A `Host` value already validated, kept inline (longer values are simply validated again).
#[derive(Debug, Clone, Copy)]
struct HostMemo {
    len: u8,
    bytes: [u8; HostMemo::CAP],
}

impl HostMemo {
    const CAP: usize = 48;
    const EMPTY: HostMemo = HostMemo {
        len: 0,
        bytes: [0; HostMemo::CAP],
    };

    fn holds(&self, v: &[u8]) -> bool {
        self.len > 0 && same_bytes(&self.bytes[..usize::from(self.len)], v)
    }

    fn remember(&mut self, v: &[u8]) {
        if !v.is_empty() && v.len() <= Self::CAP {
            self.bytes[..v.len()].copy_from_slice(v);
            self.len = v.len() as u8;
        }
    }
}

/// `a == b` for short strings (a host, a path, a method), eight bytes per step and the last
/// eight overlapping, without the call a slice comparison makes.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).fold(true, |same, (x, y)| same & (x == y));
    }
    let word =
        |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// True if `b` is a `tchar` (RFC 9110 §5.6.2): the one token check of the crate.
pub(crate) fn is_tchar(b: u8) -> bool {
    TOKEN[b as usize]
}

/// The first byte at or after `i` that is not a `tchar`, or `None` if `w` ends first. Field
/// names are letters, digits and `-` almost always: eight bytes are tested for those at once,
/// and only a byte outside them is looked up in the table (a `tchar` such as `_` goes on).
#[inline]
pub(crate) fn token_end(w: &[u8], i: usize) -> Option<usize> {
    first_not_in(w, i, not_alnum_or_dash, &TOKEN)
}

/// The first byte at or after `i` that `keep` does not hold, or `None` if `w` ends first,
/// eight bytes per step: `marks(x)` sets the high bit of at least every such byte of the
/// little-endian word `x`, and its lowest set bit marks a byte exactly; a marked byte that
/// `keep` holds after all is passed over.
#[inline(always)]
fn first_not_in(
    w: &[u8],
    mut i: usize,
    marks: impl Fn(u64) -> u64,
    keep: &[bool; 256],
) -> Option<usize> {
    while let Some(word) = w.get(i..i + 8) {
        let m = marks(u64::from_le_bytes(word.try_into().expect("eight bytes")));
        if m == 0 {
            i += 8;
            continue;
        }
        i += (m.trailing_zeros() / 8) as usize;
        if !keep[w[i] as usize] {
            return Some(i);
        }
        i += 1;
    }
    w[i.min(w.len())..]
        .iter()
        .position(|&b| !keep[b as usize])
        .map(|n| i + n)
}

/// A mask with the high bit set in each byte of `x` (little-endian) that is not an ASCII
/// letter, digit or `-`, and possibly in bytes above the first one of 0x80 or more: the
/// lowest set bit marks the first such byte exactly. Each range test adds a constant that
/// carries a byte in range into its high bit; below 0x80 no addition carries into the next
/// byte, and a byte of 0x80 or more is flagged itself, so whatever it carries upward lies above
/// the first flagged byte.
#[inline(always)]
fn not_alnum_or_dash(x: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Bytes in lo..=hi (each below 0x80) get their high bit set.
    let within = |v: u64, lo: u64, hi: u64| {
        v.wrapping_add(ONES * (0x80 - lo)) & !v.wrapping_add(ONES * (0x7f - hi))
    };
    // Setting bit 5 maps exactly the letters, and only them, onto a..=z.
    let letter = within(x | (ONES * 0x20), u64::from(b'a'), u64::from(b'z'));
    let digit = within(x, u64::from(b'0'), u64::from(b'9'));
    let dash = within(x, u64::from(b'-'), u64::from(b'-'));
    !((letter | digit | dash) & !x) & HIGH
}

/// `tchar` of RFC 9110 §5.6.2.
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

/// `field-vchar`, SP and HTAB (RFC 9110 §5.5): everything but CTLs and DEL. obs-text allowed.
pub(crate) static FIELD_VALUE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i == 0x09 || (i >= 0x20 && i != 0x7f);
        i += 1;
    }
    t
};

/// Request-target bytes: visible ASCII except `#` (a fragment is never sent, RFC 9112 §3.2).
static TARGET: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0x21;
    while i < 0x7f {
        t[i] = i != b'#' as usize;
        i += 1;
    }
    t
};

/// Leading empty lines a server ignores before a request line (RFC 9112 §2.2), bounded.
const MAX_LEADING_EMPTY_LINES: usize = 4;

impl Parser {
    /// A parser that enforces `limits`.
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            state: State::RequestLine,
            pos: 0,
            scan: 0,
            colon: 0,
            method_checked: false,
            started: false,
            used: false,
            seen: Seen::default(),
            head: RequestHead::default(),
            spare: Vec::new(),
            host_memo: HostMemo::EMPTY,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Forget the previous request; keeps allocations.
    pub fn reset(&mut self) {
        if !self.used {
            // Nothing parsed since the last reset or `take_head`, which left a fresh head.
            return;
        }
        self.reset_scan();
        self.head.clear();
    }

    /// The part of [`Parser::reset`] that is not the head.
    fn reset_scan(&mut self) {
        self.state = State::RequestLine;
        self.pos = 0;
        self.scan = 0;
        self.colon = 0;
        self.method_checked = false;
        self.started = false;
        self.used = false;
        self.seen = Seen::default();
    }

    /// True if some bytes of a request have been given but the head is not complete (so a
    /// connection closed or timed out now cut a request short).
    pub fn in_progress(&self) -> bool {
        self.started && self.state != State::Done
    }

    /// The head parsed by the last call that returned `Ok(Some(_))`.
    pub fn head(&self) -> &RequestHead {
        &self.head
    }

    /// Take the parsed head, leaving the parser reset.
    pub fn take_head(&mut self) -> RequestHead {
        let spare = match std::mem::take(&mut self.spare) {
            v if v.capacity() > 0 => v,
            _ => Vec::with_capacity(16),
        };
        let head = std::mem::replace(&mut self.head, RequestHead::with_headers(spare));
        // The head is already a fresh one.
        self.reset_scan();
        head
    }

    /// Moves the parsed head into `dst`, and `dst`'s previous head (a finished request's)
    /// into the parser, cleared, to parse the next one into: the head and its field storage
    /// change places instead of a fresh head being built and then moved twice. Leaves the
    /// parser reset, as [`Parser::take_head`] does.
    pub fn take_head_into(&mut self, dst: &mut RequestHead) {
        std::mem::swap(&mut self.head, dst);
        self.head.clear();
        self.reset_scan();
    }

    /// Gives back a head taken with [`Parser::take_head`] once its request is done, so its
    /// field storage serves the next one.
    #[inline]
    pub fn recycle(&mut self, head: RequestHead) {
        self.recycle_fields(head.headers);
    }

    /// As [`Parser::recycle`], with the field storage alone ([`RequestHead::take_fields`]).
    #[inline]
    pub fn recycle_fields(&mut self, fields: Vec<Header>) {
        if fields.capacity() > self.spare.capacity() {
            self.spare = fields;
        }
    }

    /// Parse `buf`, which starts at the first byte of the request and holds every byte given
    /// to previous calls since the last [`Parser::reset`]. Returns `Ok(None)` if more bytes are
    /// needed, `Ok(Some(n))` when the head is complete and `n` bytes long.
    ///
    /// Any bytes give a verdict and never a panic; a buffer shorter than one given before
    /// (without a reset in between) breaks the contract above and may panic.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, Error> {
        self.used = true;
        self.started |= !buf.is_empty();
        loop {
            match self.state {
                State::RequestLine => {
                    if !self.request_line(buf)? {
                        return Ok(None);
                    }
                }
                State::Headers => {
                    if !self.header_lines(buf)? {
                        return Ok(None);
                    }
                    self.finish()?;
                    self.state = State::Done;
                    return Ok(Some(self.head.len));
                }
                State::Done => return Ok(Some(self.head.len)),
            }
        }
    }

    fn request_line(&mut self, buf: &[u8]) -> Result<bool, Error> {
        let mut start = self.pos;
        // Leading empty lines are rare: one byte tells.
        while buf.get(start) == Some(&b'\r') && buf.get(start + 1) == Some(&b'\n') {
            start += 2;
            if start / 2 > MAX_LEADING_EMPTY_LINES {
                return Err(bad("too many empty lines before request line"));
            }
        }
        if start != self.pos {
            self.pos = start;
            self.scan = start;
        }
        let limit = start + self.limits.max_request_line;
        let window_end = buf.len().min(limit);
        if self.scan <= start {
            // First look at this line: a complete, well-formed one is split in a single pass,
            // without first searching for its end. Anything else takes the general path,
            // which reaches the same verdict.
            if let Some((method, m_end, t_end, q_end, version)) =
                split_request_line(&buf[start..window_end])
            {
                self.head.version = version;
                self.record_request_line(buf, start, method, m_end, t_end, q_end)?;
                self.pos = start + t_end + 11;
                self.scan = self.pos;
                self.state = State::Headers;
                return Ok(true);
            }
        }
        let from = self.scan.max(start);
        let fresh = buf.get(from..window_end).unwrap_or(&[]);
        // In a request line a CR may only end it, so the first CR or LF decides.
        let Some(i) = memchr::memchr2(b'\r', b'\n', fresh) else {
            self.precheck_method(buf, start, from, window_end)?;
            if buf.len() >= limit {
                return Err(Error::UriTooLong);
            }
            self.scan = window_end;
            return Ok(false);
        };
        let cr = from + i;
        if buf[cr] == b'\n' {
            return Err(bad("request line not terminated by CRLF"));
        }
        if cr + 1 >= limit {
            // No room for the LF, whatever follows (and the method is checked first, as a
            // client sending the line in pieces would have been told).
            self.precheck_method(buf, start, from, cr)?;
            return Err(Error::UriTooLong);
        }
        match buf.get(cr + 1) {
            Some(b'\n') => {}
            Some(_) => return Err(bad("CR not followed by LF")),
            None => {
                self.precheck_method(buf, start, from, cr)?;
                self.scan = cr;
                return Ok(false);
            }
        }
        self.parse_request_line(buf, start, cr)?;
        self.pos = cr + 2;
        self.scan = self.pos;
        self.state = State::Headers;
        Ok(true)
    }

    /// Rejects an incomplete request line as soon as its method shows it cannot be valid, so
    /// a client sending garbage (a TLS hello, say) is answered without waiting for a line end.
    /// Looks only at bytes `from..to` not checked before.
    fn precheck_method(
        &mut self,
        buf: &[u8],
        start: usize,
        from: usize,
        to: usize,
    ) -> Result<(), Error> {
        if self.method_checked {
            return Ok(());
        }
        for (i, &b) in buf.iter().enumerate().take(to).skip(from) {
            if TOKEN[b as usize] {
                continue;
            }
            if b == b' ' && i > start {
                self.method_checked = true;
                return Ok(());
            }
            return Err(if i == start {
                bad("empty or invalid method")
            } else {
                bad("invalid character in method")
            });
        }
        Ok(())
    }

    fn parse_request_line(&mut self, buf: &[u8], start: usize, end: usize) -> Result<(), Error> {
        let line = &buf[start..end];
        // method SP request-target SP HTTP-version, single spaces (RFC 9112 §3).
        let m_end = line
            .iter()
            .position(|&b| !TOKEN[b as usize])
            .unwrap_or(line.len());
        if m_end == 0 {
            return Err(bad("empty or invalid method"));
        }
        if line.get(m_end) != Some(&b' ') {
            return Err(bad("invalid character in method"));
        }
        let t_start = m_end + 1;
        let (len, query) = target_len(&line[t_start..]);
        let t_end = t_start + len;
        if t_end == t_start {
            return Err(bad("empty or invalid request target"));
        }
        match line.get(t_end) {
            Some(b' ') => {}
            None => return Err(bad("no HTTP version (HTTP/0.9 is not supported)")),
            Some(_) => return Err(bad("invalid character in request target")),
        }
        self.head.version = parse_version(&line[t_end + 1..])?;
        let method = Method::from_bytes(&line[..m_end]);
        self.record_request_line(buf, start, method, m_end, t_end, t_start + query)
    }

    /// Records method and target of the request line at `start`, whose method (`method`)
    /// ends at `m_end` and target at `t_end` (offsets into the line, both already checked);
    /// the target's first `?` is at `q_end` (`t_end` if it has none).
    #[inline]
    fn record_request_line(
        &mut self,
        buf: &[u8],
        start: usize,
        method: Method,
        m_end: usize,
        t_end: usize,
        q_end: usize,
    ) -> Result<(), Error> {
        let t_start = m_end + 1;
        self.head.method = method;
        self.head.method_span = Span::new(start, start + m_end);
        let target = Span::new(start + t_start, start + t_end);
        self.head.target = target;
        if method != Method::Connect && buf[start + t_start] == b'/' {
            // Origin-form, as nearly every request's (and the only form told here: the others
            // go to `classify_other_target`): the path is the whole target, and the first `?`
            // (or the target's end) ends it; no authority.
            self.head.form = TargetForm::Origin;
            self.head.path = target;
            self.head.query_at = (start + q_end) as u32;
            self.head.authority = None;
            return Ok(());
        }
        self.record_other_target(buf, start, method, t_start, t_end, q_end)
    }

    /// The rest of [`Parser::record_request_line`]: a target of another form (absolute,
    /// authority, asterisk) or a refused one, out of line.
    #[inline(never)]
    fn record_other_target(
        &mut self,
        buf: &[u8],
        start: usize,
        method: Method,
        t_start: usize,
        t_end: usize,
        q_end: usize,
    ) -> Result<(), Error> {
        let target = &buf[start + t_start..start + t_end];
        let (form, path) = classify_other_target(method, target)?;
        self.head.form = form;
        self.head.path = Span::new(start + t_start + path.0, start + t_start + path.1);
        // The target's first `?` starts the query (an absolute-form authority ends at a `?`, and
        // one right after it is refused). CONNECT and asterisk-form targets have an empty path
        // span, so no `?` lies inside it; neither does one when there is none.
        let q = (start + q_end) as u32;
        let p = self.head.path;
        self.head.query_at = if p.start <= q && q < p.end { q } else { p.end };
        self.head.authority = (form == TargetForm::Absolute).then(|| {
            // Between "http://" or "https://" (checked by classify_other_target) and the path.
            let scheme = if target[4] == b':' { 7 } else { 8 };
            Span::new(start + t_start + scheme, start + t_start + path.0)
        });
        Ok(())
    }

    /// Parses header lines; true once the empty line ending the head has been seen.
    fn header_lines(&mut self, buf: &[u8]) -> Result<bool, Error> {
        let max = self.limits.max_head_bytes;
        // The head, its final CRLF included, must fit in `max` bytes: look no further.
        let w = &buf[..buf.len().min(max)];
        loop {
            let pos = self.pos;
            if self.scan <= pos {
                // Nothing of this line has been checked yet.
                match w.get(pos) {
                    None => return self.need_more(buf),
                    Some(b'\r') => match w.get(pos + 1) {
                        None => return self.need_more(buf),
                        Some(b'\n') => {
                            self.head.len = pos + 2;
                            return Ok(true);
                        }
                        Some(_) => return Err(bad("CR not followed by LF")),
                    },
                    Some(b' ' | b'\t') => {
                        return Err(bad("obsolete line folding or whitespace before a field"))
                    }
                    Some(_) => {}
                }
                if self.head.headers.len() >= self.limits.max_headers {
                    return Err(Error::HeadersTooLarge);
                }
            }
            if !self.header_line(w, pos)? {
                return self.need_more(buf);
            }
        }
    }

    /// The head is incomplete: an error if the limit leaves no room for its end.
    fn need_more(&self, buf: &[u8]) -> Result<bool, Error> {
        if buf.len() >= self.limits.max_head_bytes {
            Err(Error::HeadersTooLarge)
        } else {
            Ok(false)
        }
    }

    /// Parses (or goes on parsing) the field line starting at `start`. True once the line is
    /// complete and recorded; false if `w` ends first, with `scan`/`colon` saying where to
    /// resume.
    fn header_line(&mut self, w: &[u8], start: usize) -> Result<bool, Error> {
        let (colon, resume) = if self.colon != 0 {
            (self.colon, self.scan)
        } else {
            let from = self.scan.max(start);
            let Some(colon) = token_end(w, from) else {
                self.scan = w.len();
                return Ok(false);
            };
            match w[colon] {
                b':' if colon > start => {}
                b':' => return Err(bad("empty field name")),
                b' ' | b'\t' => return Err(bad("whitespace in or after field name")),
                b'\r' | b'\n' => return Err(bad("field line without colon")),
                _ => return Err(bad("invalid character in field name")),
            }
            (colon, colon + 1)
        };
        let cr = field_value_end(w, resume);
        let complete = match (w.get(cr), w.get(cr + 1)) {
            (Some(b'\r'), Some(b'\n')) => true,
            (Some(b'\r'), Some(_)) => return Err(bad("CR not followed by LF")),
            (Some(b'\r'), None) | (None, _) => false,
            (Some(b'\n'), _) => return Err(bad("header line not terminated by CRLF")),
            (Some(_), _) => return Err(bad("invalid character in field value")),
        };
        if !complete {
            self.colon = colon;
            self.scan = cr;
            return Ok(false);
        }
        let mut v_start = colon + 1;
        while let Some(b' ' | b'\t') = w.get(v_start) {
            v_start += 1;
        }
        let mut v_end = cr.max(v_start);
        while v_end > v_start && matches!(w[v_end - 1], b' ' | b'\t') {
            v_end -= 1;
        }
        let value = Span::new(v_start, v_end);
        self.note_field(&w[start..colon], &w[v_start..v_end], value)?;
        self.head.headers.push(Header {
            name: Span::new(start, colon),
            value,
        });
        self.pos = cr + 2;
        self.scan = self.pos;
        self.colon = 0;
        Ok(true)
    }

    /// Record what framing, connection management and routing need from a field.
    fn note_field(&mut self, name: &[u8], value: &[u8], value_span: Span) -> Result<(), Error> {
        let s = &mut self.seen;
        // Length and first letter rule out almost every other field before a full comparison.
        let first = name.first().map_or(0, |b| b | 0x20);
        match (name.len(), first) {
            (4, b'h') if is_host_name(name) => {
                s.hosts += 1;
                if s.hosts > 1 {
                    return Err(bad("more than one Host field"));
                }
                if !self.host_memo.holds(value) {
                    if !valid_host(value) {
                        return Err(bad("invalid Host"));
                    }
                    self.host_memo.remember(value);
                }
                self.head.host = Some(value_span);
            }
            (_, b'i') if crate::conditional::is_precondition_name(name) => {
                self.head.preconditions = true;
            }
            (6, b'e') if name.eq_ignore_ascii_case(b"expect") => {
                self.head.expect = if value.eq_ignore_ascii_case(b"100-continue") {
                    Expect::Continue
                } else {
                    Expect::Unsupported
                };
            }
            (10, b'c') if name.eq_ignore_ascii_case(b"connection") => {
                for token in list_elements(value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        s.conn_close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        s.conn_keep_alive = true;
                    }
                }
            }
            (14, b'c') if name.eq_ignore_ascii_case(b"content-length") => {
                // A list of identical values ("5, 5") is one length (RFC 9110 §8.6).
                for element in value.split(|&b| b == b',') {
                    let n = parse_decimal(trim_ows(element))
                        .ok_or_else(|| bad("invalid Content-Length"))?;
                    match s.content_length {
                        Some(prev) if prev != n => {
                            return Err(bad("conflicting Content-Length values"))
                        }
                        _ => s.content_length = Some(n),
                    }
                }
            }
            (17, b't') if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                s.transfer_encoding = true;
                for element in value.split(|&b| b == b',') {
                    let coding = trim_ows(element);
                    // Parameters (`;q=...`) are not allowed on chunked and mean nothing here.
                    let name = coding
                        .split(|&b| b == b';')
                        .next()
                        .map(trim_ows)
                        .unwrap_or(coding);
                    if name.is_empty() {
                        return Err(bad("empty transfer coding"));
                    }
                    if !name.iter().all(|&b| TOKEN[b as usize]) {
                        return Err(bad("invalid transfer coding"));
                    }
                    if name.eq_ignore_ascii_case(b"chunked") {
                        if s.te_chunked_seen || coding.len() != name.len() {
                            return Err(bad("chunked applied twice or with parameters"));
                        }
                        s.te_chunked_seen = true;
                        s.te_last_chunked = true;
                    } else {
                        s.te_last_chunked = false;
                        s.te_other_coding = true;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks that need the whole head: Host, framing, keep-alive.
    fn finish(&mut self) -> Result<(), Error> {
        let s = self.seen;
        let head = &mut self.head;
        if head.version == Version::Http11 && s.hosts == 0 {
            return Err(bad("HTTP/1.1 request without Host"));
        }
        head.framing = if s.transfer_encoding {
            // RFC 9112 §6.1-6.3: TE with CL, TE in HTTP/1.0, or a final coding other than
            // chunked leave the body length undeterminable: refuse rather than guess.
            if s.content_length.is_some() {
                return Err(bad("both Transfer-Encoding and Content-Length"));
            }
            if head.version == Version::Http10 {
                return Err(bad("Transfer-Encoding in an HTTP/1.0 request"));
            }
            if !s.te_last_chunked {
                return Err(bad("final transfer coding is not chunked"));
            }
            if s.te_other_coding {
                return Err(Error::NotImplemented("transfer coding other than chunked"));
            }
            BodyFraming::Chunked
        } else {
            match s.content_length {
                None | Some(0) => BodyFraming::None,
                Some(n) => BodyFraming::Length(n),
            }
        };
        // RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored.
        if head.version == Version::Http10 && head.expect == Expect::Continue {
            head.expect = Expect::None;
        }
        head.keep_alive = match head.version {
            Version::Http11 | Version::Http2 => !s.conn_close,
            Version::Http10 => s.conn_keep_alive && !s.conn_close,
        };
        Ok(())
    }
}

/// True if the four bytes of `name` spell `Host` in any case, one word compared: setting
/// bit 5 of each byte maps `H`/`h` to `h`, and so on, and no other byte onto a letter's lower
/// case.
#[inline(always)]
fn is_host_name(name: &[u8]) -> bool {
    name.first_chunk::<4>()
        .is_some_and(|w| u32::from_le_bytes(*w) | 0x2020_2020 == u32::from_le_bytes(*b"host"))
}

/// The first byte at or after `i` that is not `field-vchar`, SP or HTAB (so a CTL, usually
/// the CR ending the line, or DEL), or `w.len()`. Field values are most of a head's bytes, so
/// this looks at eight at a time.
pub(crate) fn field_value_end(w: &[u8], i: usize) -> usize {
    // A CTL or DEL is marked; of them only HTAB belongs to a value.
    first_not_in(w, i, ctl_or_del, &FIELD_VALUE).unwrap_or(w.len())
}

/// A mask with the high bit set in each byte of `x` (little-endian) that is below 0x20 or
/// equal to 0x7f, and possibly in bytes above such a byte: the classic "has less than" and
/// "has zero" word tests. A borrow only travels towards higher bytes, so the lowest set bit
/// always marks the first such byte exactly.
#[inline(always)]
fn ctl_or_del(x: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let ctl = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let y = x ^ (ONES * 0x7f);
    let del = y.wrapping_sub(ONES) & !y & HIGH;
    ctl | del
}

/// Splits a complete request line with the usual shape, `token SP target SP HTTP/1.x CRLF`
/// (x being 0 or 1), at the start of `line`: the method, the offsets of its end, the target's
/// end and the target's first `?`, and the version. `None` for anything else, including valid
/// lines of a rarer shape.
fn split_request_line(line: &[u8]) -> Option<(Method, usize, usize, usize, Version)> {
    // `GET ` is one word compare; any other method is scanned.
    let (method, m_end) = if line.first_chunk::<4>() == Some(b"GET ") {
        (Method::Get, 3)
    } else {
        let m_end = line.iter().position(|&b| !TOKEN[b as usize])?;
        if m_end == 0 || line[m_end] != b' ' {
            return None;
        }
        (Method::from_bytes(&line[..m_end]), m_end)
    };
    let t_start = m_end + 1;
    let (len, query) = target_len(&line[t_start..]);
    let t_end = t_start + len;
    if t_end == t_start || line.get(t_end) != Some(&b' ') {
        return None;
    }
    // `HTTP/1.x\r\n` as a word and a half-word.
    let v = line.get(t_end + 1..)?.first_chunk::<10>()?;
    let (name, crlf) = v.split_at(8);
    if crlf != b"\r\n" {
        return None;
    }
    let version = match u64::from_le_bytes(name.try_into().ok()?) {
        w if w == u64::from_le_bytes(*b"HTTP/1.1") => Version::Http11,
        w if w == u64::from_le_bytes(*b"HTTP/1.0") => Version::Http10,
        _ => return None,
    };
    Some((method, m_end, t_end, t_start + query, version))
}

/// Length of the run of request-target bytes at the start of `t`, and the offset of the first
/// `?` in that run (the length if there is none), eight bytes per step.
#[inline]
fn target_len(t: &[u8]) -> (usize, usize) {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut i = 0;
    let mut query = usize::MAX;
    while let Some(word) = t.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // Below 0x21 (CTL, SP), 0x7f and above, or '#': as in `ctl_or_del`, a carry or borrow
        // only travels towards higher bytes, so the lowest set bit is exact.
        let low = x.wrapping_sub(ONES * 0x21) & !x & HIGH;
        let high = (x.wrapping_add(ONES) | x) & HIGH;
        let y = x ^ (ONES * u64::from(b'#'));
        let hash = y.wrapping_sub(ONES) & !y & HIGH;
        if query == usize::MAX {
            // The same test for '?': exact for the lowest one, and none without one.
            let z = x ^ (ONES * u64::from(b'?'));
            let q = z.wrapping_sub(ONES) & !z & HIGH;
            if q != 0 {
                query = i + (q.trailing_zeros() / 8) as usize;
            }
        }
        let mask = low | high | hash;
        if mask != 0 {
            let len = i + (mask.trailing_zeros() / 8) as usize;
            return (len, query.min(len));
        }
        i += 8;
    }
    let len = i + t[i..]
        .iter()
        .position(|&b| !TARGET[b as usize])
        .unwrap_or(t.len() - i);
    if query == usize::MAX {
        query = t[i..len]
            .iter()
            .position(|&b| b == b'?')
            .map_or(len, |k| i + k);
    }
    (len, query.min(len))
}

fn parse_version(v: &[u8]) -> Result<Version, Error> {
    match v {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            if *major == b'1' {
                Ok(Version::Http11)
            } else {
                Err(Error::VersionNotSupported)
            }
        }
        _ => Err(bad("malformed HTTP version")),
    }
}

/// Returns the form and the byte range of the origin-form part of a target that is not in
/// origin-form, or is a CONNECT's (`Parser::record_request_line` records an origin-form target
/// itself), or the error that refuses it.
fn classify_other_target(method: Method, t: &[u8]) -> Result<(TargetForm, (usize, usize)), Error> {
    // CONNECT takes only the authority-form (RFC 9110 §9.3.6), and only CONNECT takes it.
    if method == Method::Connect {
        return if valid_authority(t) {
            Ok((TargetForm::Authority, (0, 0)))
        } else {
            Err(bad("invalid CONNECT authority"))
        };
    }
    debug_assert!(
        t[0] != b'/',
        "an origin-form target is recorded by the caller"
    );
    if t == b"*" {
        return if method == Method::Options {
            Ok((TargetForm::Asterisk, (0, 0)))
        } else {
            Err(bad("asterisk-form target with a method other than OPTIONS"))
        };
    }
    let scheme_len = if t.len() >= 7 && t[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if t.len() >= 8 && t[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return Err(bad("request target is not origin-form or an http(s) URI"));
    };
    let rest = &t[scheme_len..];
    let a_len = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    if !valid_authority(&rest[..a_len]) {
        return Err(bad("invalid authority in absolute-form target"));
    }
    let p_start = scheme_len + a_len;
    if t.get(p_start) == Some(&b'?') {
        // "http://host?q" has an empty path; origin-form needs "/?q" (not representable as a span).
        return Err(bad("absolute-form target with a query but no path"));
    }
    Ok((TargetForm::Absolute, (p_start, t.len())))
}

pub(crate) fn trim_ows(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

/// Non-empty elements of a comma-separated list, whitespace trimmed.
pub(crate) fn list_elements(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// `1*DIGIT` into a u64; `None` on anything else or overflow.
pub(crate) fn parse_decimal(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in d {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_method_in_other_case_is_named_and_extension_methods_are_not() {
        assert_eq!(Method::miscased(b"get"), Some("GET"));
        assert_eq!(Method::miscased(b"Post"), Some("POST"));
        assert_eq!(Method::miscased(b"pAtCh"), Some("PATCH"));
        assert_eq!(Method::miscased(b"GET"), None);
        assert_eq!(Method::miscased(b"PURGE"), None);
        assert_eq!(Method::miscased(b"purge"), None);
        assert_eq!(Method::miscased(b"GETS"), None);
        assert_eq!(Method::miscased(b""), None);
    }

    /// The table lookup byte by byte that `token_end` must agree with.
    fn token_end_by_table(w: &[u8], i: usize) -> Option<usize> {
        w[i..]
            .iter()
            .position(|&b| !TOKEN[b as usize])
            .map(|n| i + n)
    }

    /// Every pair of neighbouring bytes at every position of a word (so a carry or borrow out
    /// of one byte into the next would show), inside a name of tchars, with and without
    /// bytes after the word, from every start.
    #[test]
    fn token_end_agrees_with_the_table_for_every_byte_pair() {
        for pos in 0..9 {
            for a in 0..=255u8 {
                for b in 0..=255u8 {
                    let mut w = *b"Accept-Encoding: x";
                    w[pos] = a;
                    w[pos + 1] = b;
                    for end in [w.len(), pos + 2, 8, 9] {
                        let w = &w[..end.max(pos + 2)];
                        for from in [0, 1, pos] {
                            assert_eq!(
                                token_end(w, from),
                                token_end_by_table(w, from),
                                "{w:?} from {from}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A `,` after a `-` ends a name: an equality test by borrow (the "has zero byte" trick)
    /// would let the borrow out of the `-` mark the `,` as one too.
    #[test]
    fn a_comma_after_a_dash_ends_the_name() {
        assert_eq!(token_end(b"ab-,cdefgh:", 0), Some(3));
        assert_eq!(token_end(b"Host_x.y!z:", 0), Some(10));
        assert_eq!(token_end(b"ab", 0), None);
        assert_eq!(token_end(b"abcdefghij", 3), None);
    }
}
