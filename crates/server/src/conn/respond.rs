//! Responses on the wire: [`encode_response`] encodes without I/O (head, small body copied
//! after it, or what follows it: shared bytes, a file range, a stream), and [`write_encoded`]
//! writes that on a blocking transport.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use weft_http::date::DATE_LEN;
use weft_http::response::{self as enc, status_has_no_body};
use weft_http::{Method, Version};

use crate::net::Transport;
use crate::response::{Body, BodyStream, HeaderPair, Response};
use crate::Request;

/// Largest body copied into the head buffer to go out in one write; larger bodies go out as
/// a vectored write of head and body.
const COALESCE_BODY: usize = 2048;

/// Encodes and writes a response; returns the bytes written and the body bytes among them.
/// `req` is `None` for a response to a request that could not be parsed.
pub(super) fn write_response<T: Transport>(
    stream: &mut T,
    wbuf: &mut Vec<u8>,
    resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> io::Result<(u64, u64)> {
    let out = encode_response(wbuf, resp, req, keep_alive, extra);
    write_encoded(stream, wbuf, out)
}

/// Writes a response [`encode_response`] left in `wbuf` and `out`, blocking until it is all
/// out; returns the bytes written and the body bytes among them.
pub(crate) fn write_encoded<T: Transport>(
    stream: &mut T,
    wbuf: &[u8],
    out: Encoded,
) -> io::Result<(u64, u64)> {
    match out.tail {
        Tail::None => stream.write_all(wbuf)?,
        Tail::Bytes(b) => stream.write_all_vectored2(wbuf, &b)?,
        Tail::File { file, offset, len } => {
            stream.write_head(wbuf)?;
            stream.send_file(&file, offset, len)?;
        }
        Tail::Stream { mut body, chunked } => {
            stream.write_all(wbuf)?;
            let n = send_stream(stream, &mut body, chunked)?;
            // `out.bytes` is the head's length (`wbuf` may hold gathered responses before it).
            return Ok((out.bytes + n, n));
        }
        Tail::Tunnel(mut t) => {
            stream.write_all(wbuf)?;
            stream.flush()?;
            let relayed = relay_tunnel(stream, &mut t);
            // What went to the client counts as the response's body.
            return Ok((out.bytes + relayed.down, relayed.down));
        }
    }
    Ok((out.bytes, out.body_len))
}

/// What goes out after the bytes [`encode_response`] left in the write buffer.
#[derive(Debug)]
pub(crate) enum Tail {
    /// Nothing: the buffer holds the whole response.
    None,
    /// Body bytes in memory (shared, not copied), sent with the head in one vectored write.
    Bytes(Bytes),
    /// `len` bytes of `file` from `offset`, sent with `sendfile(2)` after the head.
    File {
        file: Arc<std::fs::File>,
        offset: u64,
        len: u64,
    },
    /// A body read while it is sent ([`send_stream`]), chunked or not.
    Stream { body: BodyStream, chunked: bool },
    /// A `101`'s tunnel, relayed once the head is out ([`relay_tunnel`]).
    Tunnel(Box<crate::tunnel::Tunnel>),
}

/// Relays a tunnel over `stream` whose `101` head went out, until it ends; logs how it ended
/// and runs its end hook.
pub(crate) fn relay_tunnel<T: Transport>(
    stream: &mut T,
    t: &mut crate::tunnel::Tunnel,
) -> crate::tunnel::Relayed {
    let relayed = match stream.tunnel_end() {
        Some(mut end) => crate::tunnel::relay(&mut *end, t),
        None => crate::tunnel::Relayed {
            up: 0,
            down: 0,
            ended: crate::tunnel::Ended::Failed(io::ErrorKind::Unsupported),
        },
    };
    log::debug!(
        "tunnel ended ({}): {} bytes up, {} down",
        relayed.ended,
        relayed.up,
        relayed.down
    );
    if let Some(f) = t.on_end.take() {
        f(&relayed);
    }
    relayed
}

/// A response encoded for the wire: the head (with a small body copied after it) is in the
/// write buffer and `tail` follows it; `bytes` is the length of the whole and `body_len` of
/// the body (for a stream: of the head only and 0, as the rest is known once it is sent).
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) tail: Tail,
    pub(crate) bytes: u64,
    pub(crate) body_len: u64,
}

/// Encodes `resp` for the wire into `wbuf` (cleared first), without any I/O: every model
/// writes what this returns, a blocking one at once ([`write_encoded`]), the pipeline's send
/// stage piece by piece. `req` is `None` for a response to a request that could not be
/// parsed; `extra` is header lines to add (`Server-Timing`).
pub(crate) fn encode_response(
    wbuf: &mut Vec<u8>,
    resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Encoded {
    wbuf.clear();
    encode_append(wbuf, resp, req, keep_alive, extra)
}

/// As [`encode_response`], appending to what `wbuf` holds (responses gathered before this
/// one); the lengths in the result are this response's own.
pub(crate) fn encode_append(
    wbuf: &mut Vec<u8>,
    mut resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Encoded {
    let start = wbuf.len();
    if let Body::Prepared(entry) = &resp.body {
        return encode_prepared(wbuf, entry, req, keep_alive, extra);
    }
    // Replaced in place on the rare error, so the usual path does not move the response.
    if let Err(bad) = encode_head(wbuf, &resp, req, keep_alive, extra) {
        log::error!("handler produced an invalid header {bad:?}; answering 500");
        let mut r = Response::error(500);
        r.close = !keep_alive;
        wbuf.truncate(start);
        encode_head(wbuf, &r, req, keep_alive, extra).expect("built-in headers are valid");
        resp = r;
    }
    crate::response::recycle_headers(std::mem::take(&mut resp.headers));
    let head_only =
        req.is_some_and(|r| r.method() == Method::Head) || status_has_no_body(resp.status);
    let head_len = (wbuf.len() - start) as u64;
    if head_only && !matches!(resp.body, Body::Tunnel(_)) {
        return Encoded {
            tail: Tail::None,
            bytes: head_len,
            body_len: 0,
        };
    }
    let body_len = resp.body.len();
    let tail = match resp.body {
        Body::Empty => Tail::None,
        Body::Bytes(b) if b.len() <= COALESCE_BODY => {
            wbuf.extend_from_slice(&b);
            Tail::None
        }
        Body::Bytes(b) => Tail::Bytes(b),
        Body::File { file, offset, len } => Tail::File { file, offset, len },
        Body::Stream(body) => {
            let chunked =
                body.known_len().is_none() && req.is_some_and(|r| r.version() == Version::Http11);
            return Encoded {
                tail: Tail::Stream { body, chunked },
                bytes: head_len,
                body_len: 0,
            };
        }
        Body::Prepared(_) => unreachable!("encoded by encode_prepared"),
        Body::Tunnel(t) => {
            return Encoded {
                tail: Tail::Tunnel(t),
                bytes: head_len,
                body_len: 0,
            }
        }
    };
    Encoded {
        tail,
        bytes: head_len + body_len,
        body_len,
    }
}

/// Sends a streamed body as it is read: exactly its length if known, else chunked (HTTP/1.1)
/// or raw until the reader ends (HTTP/1.0, the connection closes after it). Returns the body
/// bytes sent. A read error, or a reader that ends before its length, is an error: the
/// connection ends without the last chunk, so the client sees the body is incomplete.
fn send_stream<T: Transport>(
    stream: &mut T,
    body: &mut BodyStream,
    chunked: bool,
) -> io::Result<u64> {
    /// Bytes read per write (one chunk each).
    const PIECE: usize = 16 * 1024;
    /// Room before the data for the chunk-size line.
    const PAD: usize = 18;
    let mut buf = vec![0u8; PAD + PIECE + 2];
    let limit = body.known_len();
    let mut sent = 0u64;
    loop {
        let want = limit.map_or(PIECE, |l| {
            usize::try_from(l - sent).unwrap_or(PIECE).min(PIECE)
        });
        if want == 0 {
            return Ok(sent);
        }
        let n = match body.reader().read(&mut buf[PAD..PAD + want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The body's source failed (an upstream that closed or timed out, a script
            // killed): the response ends cut, with what went out noted for the log.
            Err(e) => return Err(crate::net::cut(sent, e)),
        };
        let written = if chunked {
            let mut line = [0u8; 18];
            let k = weft_http::chunked::encode_size_line(n, &mut line);
            buf[PAD - k..PAD].copy_from_slice(&line[..k]);
            buf[PAD + n..PAD + n + 2].copy_from_slice(weft_http::chunked::CHUNK_END);
            stream.write_all(&buf[PAD - k..PAD + n + 2])
        } else {
            stream.write_all(&buf[PAD..PAD + n])
        };
        written.map_err(|e| crate::net::cut(sent, e))?;
        sent += n as u64;
    }
    if limit.is_some_and(|l| sent < l) {
        let e = io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "streamed body shorter than its length",
        );
        return Err(crate::net::cut(sent, e));
    }
    if chunked {
        stream
            .write_all(weft_http::chunked::LAST_CHUNK)
            .map_err(|e| crate::net::cut(sent, e))?;
    }
    Ok(sent)
}

/// Encodes a cached response: its pre-encoded head with `Date` and `Connection` spliced in,
/// and its shared body (copied after the head when small, so it goes out in one write).
fn encode_prepared(
    wbuf: &mut Vec<u8>,
    entry: &crate::cache::Entry,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Encoded {
    let start = wbuf.len();
    write_head_200(wbuf);
    wbuf.extend_from_slice(entry.fields());
    wbuf.extend_from_slice(extra);
    if !keep_alive {
        wbuf.extend_from_slice(b"Connection: close\r\n");
    } else if req.is_some_and(|r| r.version() == Version::Http10) {
        wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    wbuf.extend_from_slice(b"\r\n");
    let head_len = (wbuf.len() - start) as u64;
    let body = entry.body();
    if req.is_some_and(|r| r.method() == Method::Head) {
        return Encoded {
            tail: Tail::None,
            bytes: head_len,
            body_len: 0,
        };
    }
    let tail = if body.len() <= COALESCE_BODY {
        wbuf.extend_from_slice(body);
        Tail::None
    } else {
        Tail::Bytes(body.clone())
    };
    Encoded {
        tail,
        bytes: head_len + body.len() as u64,
        body_len: body.len() as u64,
    }
}

/// Appends the head of `resp` to `wbuf`; on an invalid handler header returns its name.
fn encode_head(
    wbuf: &mut Vec<u8>,
    resp: &Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Result<(), String> {
    let http10 = req.is_some_and(|r| r.version() == Version::Http10);
    // Past `extra`, the head is a function of the handler's headers and of `memo`; before it,
    // of the status and the second (`Date`).
    let memo = match &resp.body {
        Body::Stream(_) | Body::Tunnel(_) => None,
        body => Some([
            body.len(),
            u64::from(resp.status) | u64::from(keep_alive) << 16 | u64::from(http10) << 17,
        ]),
    };
    if let Some(tail) = memo {
        if memo_copy(wbuf, &resp.headers, tail, extra) {
            return Ok(());
        }
    }
    let head_start = wbuf.len();
    // One reading of the clock for the `Date` written and the second the memo files it under.
    let (secs, date) = weft_http::date::now_stamped();
    if resp.status == 200 {
        write_head_200_at(wbuf, secs, &date);
    } else {
        enc::write_status_line(resp.status, wbuf);
        wbuf.extend_from_slice(SERVER);
        wbuf.extend_from_slice(b"Date: ");
        wbuf.extend_from_slice(&date);
        wbuf.extend_from_slice(b"\r\n");
    }
    let prefix_end = wbuf.len();
    wbuf.extend_from_slice(extra);
    let start = wbuf.len();
    write_header_lines(wbuf, &resp.headers)?;
    if !(100..200).contains(&resp.status) && resp.status != 204 && resp.status != 304 {
        match &resp.body {
            Body::Stream(s) if s.known_len().is_none() => {
                if req.is_some_and(|r| r.version() == Version::Http11) {
                    wbuf.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                }
            }
            body => enc::write_content_length(body.len(), wbuf),
        }
    }
    if matches!(resp.body, Body::Tunnel(_)) {
        // The protocol switch itself (its `Upgrade` is among the handler's headers).
        wbuf.extend_from_slice(b"Connection: upgrade\r\n");
    } else if !keep_alive {
        wbuf.extend_from_slice(b"Connection: close\r\n");
    } else if http10 {
        wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    wbuf.extend_from_slice(b"\r\n");
    if let Some(tail) = memo {
        memo_store(
            &resp.headers,
            tail,
            secs,
            &wbuf[head_start..prefix_end],
            &wbuf[start..],
        );
    }
    Ok(())
}

/// The `Server` field of every response.
const SERVER: &[u8] = b"Server: weft\r\n";

/// Length of `HTTP/1.1 200 OK\r\nServer: weft\r\nDate: <IMF-fixdate>\r\n`.
const HEAD_200_LEN: usize = enc::STATUS_200.len() + SERVER.len() + 6 + DATE_LEN + 2;

thread_local! {
    /// This thread's [`HEAD_200_LEN`] bytes and the second of their `Date`.
    static HEAD_200: Cell<(u64, [u8; HEAD_200_LEN])> =
        const { Cell::new((u64::MAX, [0; HEAD_200_LEN])) };
}

/// Appends the status line of a 200, `Server` and `Date` as one copy of bytes rebuilt once a
/// second (the same bytes `write_status_line`, [`SERVER`] and `write_date` would write).
fn write_head_200(wbuf: &mut Vec<u8>) {
    let (secs, date) = weft_http::date::now_stamped();
    write_head_200_at(wbuf, secs, &date);
}

/// [`write_head_200`] for second `secs`, whose `Date` is `date`.
fn write_head_200_at(wbuf: &mut Vec<u8>, secs: u64, date: &[u8; DATE_LEN]) {
    let (at, mut head) = HEAD_200.with(Cell::get);
    if at != secs {
        let (status, rest) = head.split_at_mut(enc::STATUS_200.len());
        status.copy_from_slice(enc::STATUS_200);
        let (server, rest) = rest.split_at_mut(SERVER.len());
        server.copy_from_slice(SERVER);
        rest[..6].copy_from_slice(b"Date: ");
        rest[6..6 + DATE_LEN].copy_from_slice(date);
        rest[6 + DATE_LEN..].copy_from_slice(b"\r\n");
        HEAD_200.with(|c| c.set((secs, head)));
    }
    wbuf.extend_from_slice(&head);
}

/// The handler's header lines (checked; [`MANAGED`] ones dropped); on an invalid one returns
/// its name.
fn write_header_lines(wbuf: &mut Vec<u8>, headers: &[HeaderPair]) -> Result<(), String> {
    for (name, value) in headers {
        if is_managed(name) {
            continue;
        }
        enc::write_header(name, value, wbuf).map_err(|_| name.to_string())?;
    }
    Ok(())
}

// Heads remembered per thread. A head is the status line, `Server` and `Date` (the prefix),
// then what the caller adds (`extra`, not remembered), then the rest: the handler's header
// lines, `Content-Length`, `Connection` and the blank line. Prefix and rest depend only on the
// handler's headers and on the body's length, the status, keep-alive and HTTP/1.0 (the "tail"
// words), and the prefix on the second too (its `Date` is rewritten in place when the second
// changes). Where every name and value is `&'static` (the usual `.header("Content-Type",
// "text/plain")`) the bytes are encoded once and then copied: a `'static` string never changes
// or moves, so its address and length name its bytes for the life of the process.

/// Most handler headers one memo entry stands for.
const MEMO_HEADERS: usize = 4;
/// Most bytes one memo entry holds (prefix and rest).
const MEMO_BYTES: usize = 320;
/// Entries per thread (replaced in turn).
const MEMO_ENTRIES: usize = 4;

/// One remembered head, without its `extra`.
struct MemoEntry {
    /// Handler headers; `usize::MAX` for an unused entry.
    n: usize,
    /// Address and length of each name and value.
    keys: [[usize; 4]; MEMO_HEADERS],
    /// Body length, and status | keep-alive << 16 | HTTP/1.0 << 17.
    tail: [u64; 2],
    /// The second the prefix's `Date` stands for.
    secs: u64,
    /// Where the prefix ends (it ends with `Date: <date>\r\n`) and the rest begins.
    prefix: usize,
    len: usize,
    bytes: [u8; MEMO_BYTES],
}

struct HeadMemo {
    entries: [MemoEntry; MEMO_ENTRIES],
    next: usize,
}

const UNUSED_ENTRY: MemoEntry = MemoEntry {
    n: usize::MAX,
    keys: [[0; 4]; MEMO_HEADERS],
    tail: [0; 2],
    secs: 0,
    prefix: 0,
    len: 0,
    bytes: [0; MEMO_BYTES],
};

thread_local! {
    static HEAD_MEMO: RefCell<HeadMemo> = const {
        RefCell::new(HeadMemo {
            entries: [UNUSED_ENTRY; MEMO_ENTRIES],
            next: 0,
        })
    };
}

/// The address and length of a header's name and value if both are `&'static`.
#[inline]
fn static_key(h: &HeaderPair) -> Option<[usize; 4]> {
    match h {
        (Cow::Borrowed(name), Cow::Borrowed(value)) => Some([
            name.as_ptr() as usize,
            name.len(),
            value.as_ptr() as usize,
            value.len(),
        ]),
        _ => None,
    }
}

/// Appends the remembered head for `headers` and `tail`, with `extra` after its prefix; false
/// if there is none.
#[inline]
fn memo_copy(wbuf: &mut Vec<u8>, headers: &[HeaderPair], tail: [u64; 2], extra: &[u8]) -> bool {
    if headers.len() > MEMO_HEADERS {
        return false;
    }
    let (secs, date) = weft_http::date::now_stamped();
    HEAD_MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let hit = m.entries.iter_mut().find(|e| {
            e.n == headers.len()
                && e.tail == tail
                && e.keys
                    .iter()
                    .zip(headers)
                    .all(|(k, h)| static_key(h).is_some_and(|key| key == *k))
        });
        let Some(e) = hit else {
            return false;
        };
        if e.secs != secs {
            let at = e.prefix - 2 - DATE_LEN;
            e.bytes[at..at + DATE_LEN].copy_from_slice(&date);
            e.secs = secs;
        }
        if extra.is_empty() {
            wbuf.extend_from_slice(&e.bytes[..e.len]);
        } else {
            wbuf.extend_from_slice(&e.bytes[..e.prefix]);
            wbuf.extend_from_slice(extra);
            wbuf.extend_from_slice(&e.bytes[e.prefix..e.len]);
        }
        true
    })
}

/// Remembers `prefix` and `rest` as the head for `headers` and `tail`, if every header is
/// `&'static` and they fit. `prefix` ends with the `Date` line of second `secs`.
fn memo_store(headers: &[HeaderPair], tail: [u64; 2], secs: u64, prefix: &[u8], rest: &[u8]) {
    let len = prefix.len() + rest.len();
    if headers.len() > MEMO_HEADERS || len > MEMO_BYTES {
        return;
    }
    debug_assert!(
        prefix.ends_with(b"\r\n") && prefix[..prefix.len() - 2 - DATE_LEN].ends_with(b"Date: ")
    );
    let mut keys = [[0; 4]; MEMO_HEADERS];
    for (k, h) in keys.iter_mut().zip(headers) {
        match static_key(h) {
            Some(key) => *k = key,
            None => return,
        }
    }
    HEAD_MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let slot = m.next;
        m.next = (slot + 1) % MEMO_ENTRIES;
        let e = &mut m.entries[slot];
        e.n = headers.len();
        e.keys = keys;
        e.tail = tail;
        e.secs = secs;
        e.prefix = prefix.len();
        e.len = len;
        e.bytes[..prefix.len()].copy_from_slice(prefix);
        e.bytes[prefix.len()..len].copy_from_slice(rest);
    });
}

/// Headers the driver writes itself; a handler's copy is dropped.
const MANAGED: [&str; 6] = [
    "content-length",
    "connection",
    "date",
    "server",
    "transfer-encoding",
    "keep-alive",
];

/// Whether `name` is one of [`MANAGED`] (any case).
fn is_managed(name: &str) -> bool {
    // The names' lengths first: most of a handler's headers have none of them
    // (`managed_names_pass_the_length_filter` keeps this list in step with MANAGED).
    if !matches!(name.len(), 4 | 6 | 10 | 14 | 17) {
        return false;
    }
    MANAGED.iter().any(|m| name.eq_ignore_ascii_case(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_names_pass_the_length_filter() {
        for name in MANAGED {
            assert!(is_managed(name), "{name}");
            assert!(is_managed(&name.to_uppercase()), "{name}");
        }
        for name in ["Content-Type", "Location", "Dates", "X-Server", "Connectio"] {
            assert!(!is_managed(name), "{name}");
        }
    }

    /// What follows `Date` in the encoding of `resp` (body included).
    fn after_date(resp: Response, keep_alive: bool) -> String {
        let mut w = b"earlier response".to_vec();
        let _ = encode_append(&mut w, resp, None, keep_alive, b"");
        let s = String::from_utf8(w).unwrap();
        let at = s.find(" GMT\r\n").expect("a Date field") + 6;
        s[at..].to_string()
    }

    #[test]
    fn remembered_heads_are_the_heads_the_general_path_writes() {
        let text = || Response::new(200).header("Content-Type", "text/plain");
        // Each shape three times: encoded, then copied from the memo twice.
        for _ in 0..3 {
            assert_eq!(
                after_date(text().body("hello"), true),
                "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
            );
            // The same headers with another length, without keep-alive, another status.
            assert_eq!(
                after_date(text().body("hi!"), true),
                "Content-Type: text/plain\r\nContent-Length: 3\r\n\r\nhi!"
            );
            assert_eq!(
                after_date(text().body("hello"), false),
                "Content-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
            );
            let mut r = text();
            r.status = 204;
            assert_eq!(after_date(r, true), "Content-Type: text/plain\r\n\r\n");
            // A managed name the handler set is dropped on every path.
            assert_eq!(
                after_date(Response::new(200).header("Server", "other").body("x"), true),
                "Content-Length: 1\r\n\r\nx"
            );
            // No handler headers at all.
            assert_eq!(
                after_date(Response::new(200).body("x"), true),
                "Content-Length: 1\r\n\r\nx"
            );
        }
    }

    #[test]
    fn heads_with_owned_or_many_headers_are_encoded_each_time() {
        for i in 0..3 {
            // An owned value is not remembered: each response carries its own.
            let owned = Response::new(200)
                .header("Content-Type", "text/plain")
                .header("X-N", i.to_string())
                .body("x");
            assert_eq!(
                after_date(owned, true),
                format!("Content-Type: text/plain\r\nX-N: {i}\r\nContent-Length: 1\r\n\r\nx")
            );
            // More headers than an entry stands for.
            let mut many = Response::new(200);
            for name in ["A", "B", "C", "D", "E"] {
                many = many.header(name, "v");
            }
            assert_eq!(
                after_date(many.body("x"), true),
                "A: v\r\nB: v\r\nC: v\r\nD: v\r\nE: v\r\nContent-Length: 1\r\n\r\nx"
            );
        }
    }

    #[test]
    fn an_invalid_static_header_is_a_500_every_time() {
        for _ in 0..3 {
            let mut w = Vec::new();
            let r = Response::new(200).header("X-Bad", "a\r\nInjected: 1");
            let _ = encode_response(&mut w, r, None, true, b"");
            let s = String::from_utf8(w).unwrap();
            assert!(s.starts_with("HTTP/1.1 500 "), "{s}");
            assert!(!s.contains("Injected"), "{s}");
        }
    }

    #[test]
    fn more_header_lists_than_entries_replace_each_other_correctly() {
        const VALUES: [&str; 6] = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"];
        for _ in 0..3 {
            for v in VALUES {
                assert_eq!(
                    after_date(Response::new(200).header("X-V", v).body(""), true),
                    format!("X-V: {v}\r\nContent-Length: 0\r\n\r\n")
                );
            }
        }
    }

    /// `resp` encoded with `extra`, its `Date` value replaced by `<date>` (and that value).
    fn with_date_masked(resp: Response, extra: &[u8]) -> (String, String) {
        let mut w = Vec::new();
        let _ = encode_append(&mut w, resp, None, true, extra);
        let s = String::from_utf8(w).unwrap();
        let from = s.find("\r\nDate: ").expect("a Date field") + 8;
        let to = from + DATE_LEN;
        let date = s[from..to].to_string();
        (format!("{}<date>{}", &s[..from], &s[to..]), date)
    }

    #[test]
    fn remembered_heads_put_extra_fields_after_the_date() {
        // Two shapes, each encoded, then copied from the memo twice, with and without extra
        // fields (the memo keeps the head without them and splices them in).
        let hsts: &[u8] = b"Strict-Transport-Security: max-age=60\r\n";
        for _ in 0..3 {
            for (status, body) in [(200, "hello"), (404, "gone")] {
                let resp = || {
                    let mut r = Response::new(200)
                        .header("Content-Type", "text/plain")
                        .body(body);
                    r.status = status;
                    r
                };
                let reason = if status == 200 { "OK" } else { "Not Found" };
                let fields = format!(
                    "Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                assert_eq!(
                    with_date_masked(resp(), hsts).0,
                    format!(
                        "HTTP/1.1 {status} {reason}\r\nServer: weft\r\nDate: <date>\r\n\
                         Strict-Transport-Security: max-age=60\r\n{fields}"
                    )
                );
                assert_eq!(
                    with_date_masked(resp(), b"").0,
                    format!(
                        "HTTP/1.1 {status} {reason}\r\nServer: weft\r\nDate: <date>\r\n{fields}"
                    )
                );
            }
        }
    }

    #[test]
    fn a_remembered_head_of_an_earlier_second_gets_the_current_date() {
        let resp = || {
            Response::new(200)
                .header("Content-Type", "text/plain")
                .body("x")
        };
        let (first, _) = with_date_masked(resp(), b"");
        // Every entry as if filed a second long gone, its date spoiled: a copy must not show it.
        HEAD_MEMO.with(|m| {
            for e in m
                .borrow_mut()
                .entries
                .iter_mut()
                .filter(|e| e.n != usize::MAX)
            {
                e.secs = 1;
                let at = e.prefix - 2 - DATE_LEN;
                e.bytes[at..at + DATE_LEN].fill(b'!');
            }
        });
        let mut seen = false;
        for _ in 0..5 {
            let (again, date) = with_date_masked(resp(), b"");
            assert_eq!(again, first);
            assert!(!date.contains('!'), "a stale Date was copied: {date}");
            // The date written is the current one (a second boundary in between: try again).
            if date.as_bytes() == weft_http::date::now() {
                seen = true;
                break;
            }
        }
        assert!(seen, "the copied Date is not the current one");
    }

    #[test]
    fn the_cached_200_prefix_is_what_the_general_path_writes() {
        // Twice in one thread: built, then taken from the cache. A second boundary between
        // the two writes changes the date; such a pair is tried again.
        for _ in 0..2 {
            let mut same = false;
            for _ in 0..5 {
                let mut fast = b"x".to_vec();
                write_head_200(&mut fast);
                let mut general = b"x".to_vec();
                enc::write_status_line(200, &mut general);
                general.extend_from_slice(SERVER);
                enc::write_date(&mut general);
                if fast == general {
                    same = true;
                    break;
                }
            }
            assert!(same, "write_head_200 differs from the general encoding");
        }
        // A stale entry (another second) is rebuilt, not reused.
        HEAD_200.with(|c| c.set((0, [b'!'; HEAD_200_LEN])));
        let mut fast = Vec::new();
        write_head_200(&mut fast);
        assert!(fast.starts_with(b"HTTP/1.1 200 OK\r\nServer: weft\r\nDate: "));
        assert!(fast.ends_with(b" GMT\r\n") && !fast.contains(&b'!'));
    }
}
