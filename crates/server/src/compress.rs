//! Content codings for responses (`[compression]`): gzip, brotli and zstd, chosen per request
//! from `Accept-Encoding` (`weft_http::encoding`).
//!
//! Three ways a response gets a coding:
//! - a static file's precompressed sibling (`file.br`, `file.zst`, `file.gz`), as nginx's
//!   `gzip_static` and Caddy's `precompressed` (`handlers/static_files.rs`);
//! - a static file compressed once, from its response-cache entry, into a variant kept in the
//!   cache beside the identity entry, so a hot file is compressed once and not per request
//!   (`cache.rs`); a file the cache does not hold is compressed per request as it is sent, as
//!   nginx's `gzip on` does, through `Encoder`;
//! - a CGI or proxied response (`Compression::dynamic`), through `Encoder` as it streams.
//!
//! [`CompressionConfig`] is a plain struct so that a part of the site (a virtual host, a
//! location) can carry its own copy; `Compression` is the checked form handlers use.
//!
//! Server preference among codings the client rates equally: `br`, then `zstd`, then `gzip`
//! (`encodings` changes it). Brotli first because a variant is compressed once and served many
//! times: at the default levels it makes the smallest text bodies of the three (and
//! browsers only send `br` over HTTPS, where it is the usual choice); zstd next, as it beats
//! gzip in size at a lower CPU cost; gzip last, the coding every client has.

use std::io::{self, Read, Write};

use weft_http::encoding::{AcceptEncoding, Coding};

pub(crate) use crate::config::compression::CompressionConfig;
use crate::Request;

/// The checked settings: what handlers consult.
#[derive(Debug, Clone)]
pub(crate) struct Compression {
    /// Codings in the order of preference.
    codings: Vec<Coding>,
    /// Lower-case types; an entry ending in `/*` matches the whole top-level type.
    types: Vec<String>,
    min_length: u64,
    precompressed: bool,
    dynamic: bool,
    gzip_level: u32,
    brotli_level: u32,
    zstd_level: i32,
}

/// Bytes read from a streamed body per step of [`Encoder`].
const STREAM_PIECE: usize = 32 * 1024;
/// Brotli's window (log2): its default, 4 MiB.
const BROTLI_LGWIN: u32 = 22;

impl Compression {
    /// The settings of `cfg`, or why they are wrong; `None` when compression is off.
    pub fn new(cfg: &CompressionConfig) -> Result<Option<Compression>, String> {
        if !cfg.enabled {
            return Ok(None);
        }
        let mut codings = Vec::new();
        for name in &cfg.encodings {
            match Coding::from_token(name.as_bytes()) {
                Some(Coding::Identity) | None => {
                    return Err(format!(
                        "[compression] encodings: `{name}` is not one of \"br\", \"zstd\", \"gzip\""
                    ))
                }
                Some(c) if codings.contains(&c) => {
                    return Err(format!("[compression] encodings: `{name}` twice"))
                }
                Some(c) => codings.push(c),
            }
        }
        if !(1..=9).contains(&cfg.gzip_level) {
            return Err("[compression] gzip_level must be 1 to 9".into());
        }
        if cfg.brotli_level > 11 {
            return Err("[compression] brotli_level must be 0 to 11".into());
        }
        if !(1..=19).contains(&cfg.zstd_level) {
            return Err("[compression] zstd_level must be 1 to 19".into());
        }
        for t in &cfg.types {
            let ok = t.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty() && !b.is_empty() && !t.contains([';', ' ', ','])
            });
            if !ok {
                return Err(format!(
                    "[compression] types: `{t}` is not a MIME type like \"text/html\" or \"text/*\""
                ));
            }
        }
        Ok(Some(Compression {
            codings,
            types: cfg.types.iter().map(|t| t.to_ascii_lowercase()).collect(),
            min_length: cfg.min_length,
            precompressed: cfg.precompressed,
            dynamic: cfg.dynamic,
            gzip_level: cfg.gzip_level,
            brotli_level: cfg.brotli_level,
            zstd_level: cfg.zstd_level,
        }))
    }

    /// The codings weft produces, in its order of preference.
    pub fn codings(&self) -> &[Coding] {
        &self.codings
    }

    /// Whether precompressed siblings are served.
    pub fn precompressed(&self) -> bool {
        self.precompressed
    }

    /// The smallest body compressed on the fly.
    pub fn min_length(&self) -> u64 {
        self.min_length
    }

    /// The client's `Accept-Encoding`, or `None` if it sent none (it then gets identity).
    pub fn accepted(&self, req: &Request) -> Option<AcceptEncoding> {
        let mut values = req
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("accept-encoding"))
            .map(|(_, v)| v)
            .peekable();
        values.peek()?;
        Some(AcceptEncoding::parse(values))
    }

    /// True if a body of `content_type` (parameters allowed) is compressed on the fly.
    pub fn compressible(&self, content_type: &[u8]) -> bool {
        let essence = content_type
            .split(|&b| b == b';')
            .next()
            .unwrap_or(b"")
            .trim_ascii();
        let Some(slash) = essence.iter().position(|&b| b == b'/') else {
            return false;
        };
        self.types.iter().any(|t| match t.strip_suffix("/*") {
            Some(top) => essence[..slash].eq_ignore_ascii_case(top.as_bytes()),
            None => essence.eq_ignore_ascii_case(t.as_bytes()),
        })
    }

    /// `data` compressed whole with `coding` (identity: copied), off the fiber stack (see
    /// [`off_fiber`]).
    pub fn compress(&self, coding: Coding, data: bytes::Bytes) -> io::Result<Vec<u8>> {
        let mut enc = self.sink(coding, Vec::with_capacity(data.len() / 3 + 64));
        let input = data.len() as u64;
        let out = off_fiber(move || {
            enc.write_all(&data)?;
            enc.finish()
        });
        if let Ok(z) = &out {
            crate::metrics::count_compression(input, z.len() as u64);
        }
        out
    }

    /// A reader of `inner`'s bytes compressed with `coding`.
    pub fn encoder<R: Read>(&self, coding: Coding, inner: R) -> Encoder<R> {
        Encoder {
            inner,
            sink: Some(self.sink(coding, Vec::new())),
            out: Vec::new(),
            pos: 0,
            piece: vec![0u8; STREAM_PIECE].into_boxed_slice(),
        }
    }

    fn sink(&self, coding: Coding, out: Vec<u8>) -> Sink {
        match coding {
            Coding::Identity => Sink::Identity(out),
            Coding::Gzip => Sink::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::new(self.gzip_level),
            )),
            Coding::Br => Sink::Br(Box::new(brotli::CompressorWriter::new(
                out,
                4096,
                self.brotli_level,
                BROTLI_LGWIN,
            ))),
            Coding::Zstd => Sink::Zstd(
                zstd::stream::write::Encoder::new(out, self.zstd_level)
                    .expect("a level in 1..=19 is valid"),
            ),
        }
    }

    /// A CGI or proxied response, compressed for `req` where `[compression] dynamic` allows,
    /// the client accepts a coding, the response has a compressible type, no
    /// `Content-Encoding` and no `Cache-Control: no-transform` (RFC 9110 §7.7), and a body
    /// worth compressing; otherwise `resp` as it was. As nginx's gzip filter: only 200, 403 and
    /// 404 answers, never a range (206) or HEAD; a strong `ETag` becomes weak (the compressed
    /// bytes are not the upstream's), `Content-Length` goes (the body is streamed chunked)
    /// and `Vary: Accept-Encoding` is added.
    pub fn dynamic(&self, req: &Request, mut resp: crate::Response) -> crate::Response {
        use crate::response::{Body, BodyStream};
        if !self.dynamic
            || req.method() != weft_http::Method::Get
            || !matches!(resp.status, 200 | 403 | 404)
        {
            return resp;
        }
        let Some(ct) = resp.get_header("Content-Type") else {
            return resp;
        };
        if !self.compressible(ct)
            || resp.get_header("Content-Encoding").is_some()
            || resp.get_header("Content-Range").is_some()
            || resp
                .get_header("Cache-Control")
                .is_some_and(|v| contains_token(v, b"no-transform"))
        {
            return resp;
        }
        // The response depends on Accept-Encoding whether or not this one is compressed.
        add_vary(&mut resp);
        let worth = match &resp.body {
            Body::Bytes(b) => b.len() as u64 >= self.min_length,
            Body::Stream(s) => s.known_len().is_none_or(|n| n >= self.min_length),
            Body::Empty | Body::File { .. } | Body::Prepared(_) | Body::Tunnel(_) => false,
        };
        if !worth {
            return resp;
        }
        let coding = match self.accepted(req) {
            Some(ae) => ae.choose(&self.codings),
            None => Coding::Identity,
        };
        if coding == Coding::Identity {
            return resp;
        }
        let body = match std::mem::take(&mut resp.body) {
            Body::Bytes(b) => match self.compress(coding, b.clone()) {
                Ok(z) => Body::Bytes(z.into()),
                Err(e) => {
                    log::error!("{}: compressing a response failed: {e}", req.peer_addr());
                    resp.body = Body::Bytes(b);
                    return resp;
                }
            },
            Body::Stream(s) => Body::Stream(BodyStream::new(self.encoder(coding, s.into_reader()))),
            other => other,
        };
        resp.headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("accept-ranges")
        });
        for (n, v) in resp.headers.iter_mut() {
            if n.eq_ignore_ascii_case("etag") && !v.starts_with(b"W/") {
                let mut weak = b"W/".to_vec();
                weak.extend_from_slice(v);
                *v = weak.into();
            }
        }
        resp.body = body;
        resp.header("Content-Encoding", coding.token())
    }
}

/// Adds `Accept-Encoding` to the response's `Vary` (or adds the field).
fn add_vary(resp: &mut crate::Response) {
    for (n, v) in resp.headers.iter_mut() {
        if n.eq_ignore_ascii_case("vary") {
            if !contains_token(v, b"accept-encoding") && !contains_token(v, b"*") {
                let mut joined = v.to_vec();
                joined.extend_from_slice(b", Accept-Encoding");
                *v = joined.into();
            }
            return;
        }
    }
    resp.headers
        .push(("Vary".into(), b"Accept-Encoding"[..].into()));
}

/// True if the comma-separated list `value` has `token` (case-insensitive; parameters after
/// `=` ignored).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|item| {
        let name = item
            .split(|&b| b == b'=')
            .next()
            .unwrap_or(b"")
            .trim_ascii();
        name.eq_ignore_ascii_case(token)
    })
}

/// `etag` (a quoted entity-tag, possibly weak) for the variant in `coding`: the coding's name
/// added inside the quotes, so each variant has its own tag (RFC 9110 §8.8.3: a strong tag
/// names one sequence of bytes).
pub(crate) fn variant_etag(etag: &str, coding: Coding) -> String {
    match etag.strip_suffix('"') {
        Some(open) => format!("{open}-{}\"", coding.token()),
        None => etag.to_string(),
    }
}

/// Runs `f`, a compressor's step, on a helper thread when called on a connection's fiber, and
/// in place otherwise (the thread, process and pipeline models' threads have room). The codecs
/// keep large locals on the stack (zlib-rs and brotli need more than the 64 KiB of a default
/// `fiber.stack_size` in a debug build), and an overflow there aborts the process; the hop to a
/// helper thread costs a few microseconds, once per cached variant or per piece of a stream.
fn off_fiber<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    weft_fiber::spawn_blocking(f)
}

/// A compressor writing into memory.
enum Sink {
    Identity(Vec<u8>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Sink {
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Sink::Identity(v) => {
                v.extend_from_slice(data);
                Ok(())
            }
            Sink::Gzip(e) => e.write_all(data),
            Sink::Br(e) => e.write_all(data),
            Sink::Zstd(e) => e.write_all(data),
        }
    }

    /// Pushes out what the compressor holds so far (a sync flush: the client can decode
    /// every byte received up to here).
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Identity(_) => Ok(()),
            Sink::Gzip(e) => e.flush(),
            Sink::Br(e) => e.flush(),
            Sink::Zstd(e) => e.flush(),
        }
    }

    /// The output so far, taken out of the compressor.
    fn take(&mut self) -> Vec<u8> {
        let v = match self {
            Sink::Identity(v) => v,
            Sink::Gzip(e) => e.get_mut(),
            Sink::Br(e) => e.get_mut(),
            Sink::Zstd(e) => e.get_mut(),
        };
        std::mem::take(v)
    }

    /// Ends the stream and returns the rest of the output.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Sink::Identity(v) => Ok(v),
            Sink::Gzip(e) => e.finish(),
            // Brotli's writer ends the stream in into_inner (writing into memory cannot fail).
            Sink::Br(e) => Ok(e.into_inner()),
            Sink::Zstd(e) => e.finish(),
        }
    }
}

/// A reader of another reader's bytes, compressed. Each read of the inner reader (a pipe from
/// a CGI script, an upstream socket, a file) is compressed and flushed before it is handed on,
/// so a body that arrives slowly is not held back until a compressor's buffer fills; the
/// cost is a few bytes per flush, at most one per `STREAM_PIECE` bytes of a fast source.
pub(crate) struct Encoder<R> {
    inner: R,
    /// `None` once the stream has ended.
    sink: Option<Sink>,
    out: Vec<u8>,
    pos: usize,
    piece: Box<[u8]>,
}

impl<R> std::fmt::Debug for Encoder<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("pending", &(self.out.len() - self.pos))
            .field("done", &self.sink.is_none())
            .finish()
    }
}

impl<R: Read> Read for Encoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.out.len() {
                let n = buf.len().min(self.out.len() - self.pos);
                buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.sink.is_none() {
                return Ok(0);
            }
            let n = match self.inner.read(&mut self.piece) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let mut sink = self.sink.take().expect("checked above");
            let piece = std::mem::take(&mut self.piece);
            let (sink, piece, out) = off_fiber(move || {
                if n == 0 {
                    return (None, piece, sink.finish());
                }
                let out = sink
                    .write_all(&piece[..n])
                    .and_then(|()| sink.flush())
                    .map(|()| sink.take());
                (Some(sink), piece, out)
            });
            self.sink = sink;
            self.piece = piece;
            self.out = match out {
                Ok(out) => {
                    crate::metrics::count_compression(n as u64, out.len() as u64);
                    out
                }
                Err(e) => {
                    // A compressor that failed once is not fed again.
                    self.sink = None;
                    return Err(e);
                }
            };
            self.pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Compression {
        Compression::new(&CompressionConfig {
            enabled: true,
            ..CompressionConfig::default()
        })
        .unwrap()
        .unwrap()
    }

    pub(crate) fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Identity => out.extend_from_slice(data),
            Coding::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(data, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => {
                zstd::stream::read::Decoder::new(data)
                    .unwrap()
                    .read_to_end(&mut out)
                    .unwrap();
            }
        }
        out
    }

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| format!("line {i} of some text that repeats\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn every_coding_round_trips_whole_and_streamed() {
        let c = on();
        let data = text(5000);
        for coding in Coding::ALL {
            let whole = c.compress(coding, data.clone().into()).unwrap();
            assert_eq!(decode(coding, &whole), data, "{coding:?}");
            if coding != Coding::Identity {
                assert!(whole.len() < data.len() / 4, "{coding:?}: {}", whole.len());
            }
            // Streamed through a reader that hands over odd-sized pieces.
            let src = Trickle(&data, 0);
            let mut streamed = Vec::new();
            c.encoder(coding, src).read_to_end(&mut streamed).unwrap();
            assert_eq!(decode(coding, &streamed), data, "{coding:?} streamed");
        }
        let mut empty = Vec::new();
        c.encoder(Coding::Gzip, &b""[..])
            .read_to_end(&mut empty)
            .unwrap();
        assert_eq!(decode(Coding::Gzip, &empty), b"");
    }

    /// A reader that returns 1000 bytes at most per read, like a pipe written in pieces.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(1000).min(self.0.len() - self.1);
            buf[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn each_piece_is_decodable_when_it_is_handed_on() {
        // What was read from the source so far can be decoded from what came out so far:
        // a slow CGI script's output is not held back.
        let c = on();
        let first = b"<html><body>first part of the page</body>";
        let mut enc = c.encoder(Coding::Gzip, Trickle(first, 0));
        let mut out = vec![0u8; 4096];
        let n = enc.read(&mut out).unwrap();
        let mut dec = flate2::write::GzDecoder::new(Vec::new());
        dec.write_all(&out[..n]).unwrap();
        dec.flush().unwrap();
        assert_eq!(dec.get_ref().as_slice(), first);
    }

    #[test]
    fn types_match_by_essence_and_wildcard() {
        let c = on();
        for yes in [
            &b"text/html"[..],
            b"text/html; charset=utf-8",
            b"TEXT/Plain",
            b"application/json",
            b"image/svg+xml;charset=utf-8",
        ] {
            assert!(c.compressible(yes), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"image/png"[..],
            b"application/octet-stream",
            b"texthtml",
            b"",
            b"application/jsonx",
        ] {
            assert!(!c.compressible(no), "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn settings_are_checked() {
        let base = CompressionConfig {
            enabled: true,
            ..CompressionConfig::default()
        };
        assert!(Compression::new(&CompressionConfig::default())
            .unwrap()
            .is_none());
        for (bad, what) in [
            (
                CompressionConfig {
                    encodings: vec!["deflate".into()],
                    ..base.clone()
                },
                "deflate",
            ),
            (
                CompressionConfig {
                    encodings: vec!["gzip".into(), "x-gzip".into()],
                    ..base.clone()
                },
                "twice",
            ),
            (
                CompressionConfig {
                    gzip_level: 0,
                    ..base.clone()
                },
                "gzip_level",
            ),
            (
                CompressionConfig {
                    brotli_level: 12,
                    ..base.clone()
                },
                "brotli_level",
            ),
            (
                CompressionConfig {
                    zstd_level: 20,
                    ..base.clone()
                },
                "zstd_level",
            ),
            (
                CompressionConfig {
                    types: vec!["html".into()],
                    ..base.clone()
                },
                "html",
            ),
        ] {
            let err = Compression::new(&bad).unwrap_err();
            assert!(err.contains(what), "{err}");
        }
        let c = Compression::new(&CompressionConfig {
            encodings: vec!["gzip".into(), "BR".into()],
            ..base
        })
        .unwrap()
        .unwrap();
        assert_eq!(c.codings(), [Coding::Gzip, Coding::Br]);
    }

    #[test]
    fn variant_tags() {
        assert_eq!(variant_etag("\"1.2-3\"", Coding::Br), "\"1.2-3-br\"");
        assert_eq!(variant_etag("W/\"x\"", Coding::Gzip), "W/\"x-gzip\"");
    }

    #[test]
    fn vary_is_added_once() {
        let mut r = crate::Response::new(200);
        add_vary(&mut r);
        add_vary(&mut r);
        assert_eq!(r.get_header("Vary"), Some(&b"Accept-Encoding"[..]));
        let mut r = crate::Response::new(200).header("Vary", "Cookie");
        add_vary(&mut r);
        assert_eq!(r.get_header("Vary"), Some(&b"Cookie, Accept-Encoding"[..]));
        let mut r = crate::Response::new(200).header("Vary", "*");
        add_vary(&mut r);
        assert_eq!(r.get_header("Vary"), Some(&b"*"[..]));
    }
}
