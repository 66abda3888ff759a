//! Logging: the error log (the `log` facade to stderr, level from `WEFT_LOG`) and the access
//! log (Combined Log Format, JSON, or a template of nginx's variables: `access_log_format`),
//! buffered and flushed once a second and at exit.
//!
//! Warnings and errors are bounded per call site ([`Limiter`]): a client that can make weft
//! (or a library in it: rustls warns about an IP address sent as SNI) write a WARN line per
//! connection gets [`BURST`] lines per [`WINDOW_MS`] from each site, the rest are counted
//! (`weft_log_lines_suppressed_total`) and summed up in one line when the site writes again.

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::{AccessLogFormat, AccessLogTarget};
use crate::config::{LogPiece as Piece, LogVar as Var};

struct StderrLogger {
    level: log::LevelFilter,
    limiter: &'static Limiter,
}

/// Lines at WARN or ERROR one call site writes per window before the rest are only counted.
pub(crate) const BURST: u64 = 10;
/// The window of [`BURST`], in milliseconds of the monotonic clock.
pub(crate) const WINDOW_MS: u64 = 10_000;
/// Call sites told apart (by a hash of the file and line; two sharing a slot share a budget).
const SITES: usize = 64;

/// Per call site, in memory shared with the process model's connection processes (made before
/// any fork, so a flood through one child per connection is bounded too): the window's start
/// (ms, high 40 bits) and the lines written in it (low 24 bits); then each site's lines
/// suppressed since it last wrote; then the total suppressed.
pub(crate) struct Limiter {
    cells: weft_sys::shm::Shared<[AtomicU64; 2 * SITES + 1]>,
}

/// What [`Limiter::admit`] says of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Write it; `suppressed` lines of this site were dropped before it (write that too).
    Write { suppressed: u64 },
    /// Count it and drop it.
    Drop,
}

impl Limiter {
    pub(crate) fn new() -> Limiter {
        Limiter {
            cells: weft_sys::shm::Shared::new(),
        }
    }

    /// Whether a line of call site `site` may be written at `now_ms`.
    pub(crate) fn admit(&self, site: u64, now_ms: u64) -> Admit {
        let cells = &*self.cells;
        let i = (site % SITES as u64) as usize;
        let slot = &cells[i];
        let mut cur = slot.load(Relaxed);
        loop {
            let (start, n) = (cur >> 24, cur & 0xff_ffff);
            // The clock's low 40 bits of ms: 34 years; a wrap only opens a window early.
            let now = now_ms & ((1 << 40) - 1);
            let (next, admit) = if cur == 0 || now.wrapping_sub(start) >= WINDOW_MS {
                ((now << 24) | 1, true)
            } else if n < BURST {
                (cur + 1, true)
            } else {
                (cur, false)
            };
            if !admit {
                cells[SITES + i].fetch_add(1, Relaxed);
                cells[2 * SITES].fetch_add(1, Relaxed);
                return Admit::Drop;
            }
            match slot.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                Ok(_) => {
                    let suppressed = if next & 0xff_ffff == 1 {
                        cells[SITES + i].swap(0, Relaxed)
                    } else {
                        0
                    };
                    return Admit::Write { suppressed };
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Lines dropped so far, in every process.
    pub(crate) fn suppressed(&self) -> u64 {
        self.cells[2 * SITES].load(Relaxed)
    }
}

/// The call site of `r`, as a number: its file and line.
fn site_of(r: &log::Record<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: every process must put a site in the same slot.
    let mut h = std::hash::BuildHasher::build_hasher(&std::hash::BuildHasherDefault::<
        std::collections::hash_map::DefaultHasher,
    >::default());
    r.file().unwrap_or(r.target()).hash(&mut h);
    r.line().hash(&mut h);
    h.finish()
}

/// Lines at WARN or ERROR the error log has dropped so far (every process), for
/// `weft_log_lines_suppressed_total`; 0 before the logger is installed.
pub fn suppressed_lines() -> u64 {
    LIMITER.get().map_or(0, |l| l.suppressed())
}

/// The installed logger's limiter (set once by [`init_error_log`]).
static LIMITER: std::sync::OnceLock<&'static Limiter> = std::sync::OnceLock::new();

impl log::Log for StderrLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.level
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let suppressed = if r.level() <= log::Level::Warn {
            let now = weft_sys::clock::coarse_monotonic_ms();
            match self.limiter.admit(site_of(r), now) {
                Admit::Write { suppressed } => suppressed,
                Admit::Drop => return,
            }
        } else {
            0
        };
        let date = weft_http::date::now();
        let date = std::str::from_utf8(&date).unwrap_or("");
        // One write(2) per line: the process model's connection processes share stderr,
        // and a line written in pieces could be interleaved with another process's
        // (writes up to PIPE_BUF to a pipe, and any write to an O_APPEND file, land whole).
        let mut line = Vec::with_capacity(160);
        if suppressed > 0 {
            let _ = writeln!(
                line,
                "{date} [{}] {suppressed} more lines like the next one were not written \
                 (more than {BURST} in {} s from one place)",
                r.level(),
                WINDOW_MS / 1000
            );
        }
        let _ = writeln!(line, "{date} [{}] {}", r.level(), r.args());
        let _ = io::stderr().lock().write_all(&line);
    }
    fn flush(&self) {}
}

/// Installs the error logger once (later calls do nothing). Level: `WEFT_LOG`
/// (error, warn, info, debug, trace), default `info`.
pub fn init_error_log() {
    let level = std::env::var("WEFT_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    // Made once, before any fork: the process model's children share its counters.
    let limiter: &'static Limiter = Box::leak(Box::new(Limiter::new()));
    let logger = StderrLogger { level, limiter };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        let _ = LIMITER.set(limiter);
        log::set_max_level(level);
    }
}

/// The access log: one Combined Log Format line per response.
#[derive(Clone)]
pub(crate) struct AccessLog {
    out: Arc<Mutex<BufWriter<Box<dyn Write + Send>>>>,
    flusher: Arc<std::sync::Once>,
    /// Where it goes, to open it again on [`AccessLog::reopen`].
    target: AccessLogTarget,
    /// What a line holds.
    format: Arc<AccessLogFormat>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessLog")
    }
}

/// The fields of one access-log line.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub peer: std::net::IpAddr,
    pub request: RequestLine<'a>,
    pub status: u16,
    pub body_bytes: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// The request, where one was read (for the other variables of a template or JSON).
    pub req: Option<&'a crate::Request>,
}

/// What the line's `"request"` field holds.
#[derive(Debug)]
pub(crate) enum RequestLine<'a> {
    /// A request that was read: its method, target and version.
    Read {
        method: &'a str,
        target: &'a str,
        version: &'a str,
    },
    /// A head refused before it was read whole: the bytes of its first line as received (up
    /// to [`RAW_LINE_MAX`]; none: `-`), as nginx logs `$request` for a bad request.
    Raw(&'a [u8]),
}

/// The most bytes of a refused head's first line an access-log line holds.
pub(crate) const RAW_LINE_MAX: usize = 1024;

impl AccessLog {
    /// Whether its lines need the time a request arrived ([`AccessLogFormat::needs_arrival`]).
    #[inline]
    pub(crate) fn needs_arrival(&self) -> bool {
        self.format.needs_arrival()
    }

    /// Opens the log; `None` when it is off. A file is appended to.
    pub fn open(
        target: &AccessLogTarget,
        format: &AccessLogFormat,
    ) -> io::Result<Option<AccessLog>> {
        let Some(w) = writer(target)? else {
            return Ok(None);
        };
        Ok(Some(AccessLog {
            out: Arc::new(Mutex::new(BufWriter::with_capacity(BUFFER, w))),
            flusher: Arc::new(std::sync::Once::new()),
            target: target.clone(),
            format: Arc::new(format.clone()),
        }))
    }

    /// Opens the file at the configured path again (SIGUSR1, as nginx: logrotate renames the
    /// file, then signals, and the next lines go to a new file at the path). Buffered lines
    /// go to the old file first. On an error the old file stays in use.
    pub fn reopen(&self) -> io::Result<()> {
        let AccessLogTarget::File(_) = &self.target else {
            return Ok(());
        };
        let w = writer(&self.target)?.expect("a file target opens a writer");
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()?;
        *out = BufWriter::with_capacity(BUFFER, w);
        Ok(())
    }

    /// Starts the thread that flushes the log once a second (once; later calls do nothing).
    /// Not started by `open`, so a server can still fork a single-threaded process after
    /// opening its log (the `process` model).
    pub fn start_flusher(&self) -> io::Result<()> {
        let mut result = Ok(());
        self.flusher.call_once(|| {
            let flusher = Arc::downgrade(&self.out);
            result = std::thread::Builder::new()
                .name("weft-log-flush".into())
                .spawn(move || {
                    while let Some(out) = flusher.upgrade() {
                        let _ = out.lock().unwrap_or_else(|e| e.into_inner()).flush();
                        drop(out);
                        std::thread::sleep(Duration::from_secs(1));
                    }
                })
                .map(drop);
        });
        result
    }

    /// Appends one line.
    pub fn write(&self, e: &Entry<'_>) {
        let mut line = Vec::with_capacity(256);
        let now = SystemTime::now();
        match &*self.format {
            AccessLogFormat::Combined => format_entry(e, now, &mut line),
            AccessLogFormat::Json => format_json(e, now, &mut line),
            AccessLogFormat::Template(pieces) => format_template(pieces, e, now, &mut line),
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = out.write_all(&line) {
            log::warn!("access log write failed: {err}");
        }
    }

    /// Writes buffered lines out.
    pub fn flush(&self) {
        let _ = self.out.lock().unwrap_or_else(|e| e.into_inner()).flush();
    }
}

/// Bytes of access-log lines buffered before a write (and at most a second's worth).
const BUFFER: usize = 64 * 1024;

/// The writer for `target`; `None` when it is off. A file is appended to, created if missing.
fn writer(target: &AccessLogTarget) -> io::Result<Option<Box<dyn Write + Send>>> {
    Ok(match target {
        AccessLogTarget::Off => None,
        AccessLogTarget::Stdout => Some(Box::new(io::stdout())),
        AccessLogTarget::File(p) => Some(Box::new(
            OpenOptions::new().create(true).append(true).open(p)?,
        )),
    })
}

/// `ip - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 2326 "referer" "agent"\n`
pub(crate) fn format_entry(e: &Entry<'_>, now: SystemTime, out: &mut Vec<u8>) {
    let _ = write!(out, "{} - - [{}] \"", e.peer, clf_time(now));
    match e.request {
        RequestLine::Read {
            method,
            target,
            version,
        } => {
            escape(method.as_bytes(), out);
            out.push(b' ');
            escape(target.as_bytes(), out);
            out.push(b' ');
            escape(version.as_bytes(), out);
        }
        RequestLine::Raw(received) => escape(first_line(received), out),
    }
    let _ = write!(out, "\" {} {} \"", e.status, e.body_bytes);
    escape(e.referer.unwrap_or(b"-"), out);
    out.extend_from_slice(b"\" \"");
    escape(e.user_agent.unwrap_or(b"-"), out);
    out.extend_from_slice(b"\"\n");
}

/// The request line as the log shows it: `METHOD TARGET VERSION`, or a refused head's first
/// line as received (`-` for none), unescaped.
fn request_line<'a>(r: &RequestLine<'a>) -> std::borrow::Cow<'a, [u8]> {
    match *r {
        RequestLine::Read {
            method,
            target,
            version,
        } => format!("{method} {target} {version}").into_bytes().into(),
        RequestLine::Raw(received) => first_line(received).into(),
    }
}

/// A refused head's first line as received (at most [`RAW_LINE_MAX`] bytes, without its
/// CR LF), `-` for none.
fn first_line(received: &[u8]) -> &[u8] {
    let end = received
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(received.len())
        .min(RAW_LINE_MAX);
    let line = received[..end]
        .strip_suffix(b"\r")
        .unwrap_or(&received[..end]);
    if line.is_empty() {
        b"-"
    } else {
        line
    }
}

/// The value of `var` for entry `e` at `now`, unescaped; `None` where it has none (`-`).
fn value<'a>(var: &Var, e: &Entry<'a>, now: SystemTime) -> Option<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    let owned = |s: String| Some(Cow::Owned(s.into_bytes()));
    let read = match &e.request {
        RequestLine::Read {
            method,
            target,
            version,
        } => Some((*method, *target, *version)),
        RequestLine::Raw(_) => None,
    };
    match var {
        Var::RemoteAddr => owned(e.peer.to_string()),
        Var::RemoteUser => None,
        Var::TimeLocal => owned(clf_time(now)),
        Var::TimeIso8601 => owned(iso8601(now)),
        Var::Msec => {
            let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
            owned(format!("{}.{:03}", d.as_secs(), d.subsec_millis()))
        }
        Var::Request => Some(request_line(&e.request)),
        Var::RequestMethod => read.map(|r| Cow::Borrowed(r.0.as_bytes())),
        Var::RequestUri => read.map(|r| Cow::Borrowed(r.1.as_bytes())),
        Var::Uri => e.req.map(|r| Cow::Borrowed(r.path().as_bytes())),
        Var::Args => e
            .req
            .and_then(|r| r.query())
            .filter(|q| !q.is_empty())
            .map(|q| Cow::Borrowed(q.as_bytes())),
        Var::ServerProtocol => read.map(|r| Cow::Borrowed(r.2.as_bytes())),
        Var::Status => owned(e.status.to_string()),
        Var::BodyBytesSent => owned(e.body_bytes.to_string()),
        Var::Host => e
            .req
            .and_then(|r| r.host())
            .map(|h| Cow::Borrowed(h.as_bytes())),
        Var::Scheme => e.req.map(|r| {
            Cow::Borrowed(if r.is_https() {
                &b"https"[..]
            } else {
                &b"http"[..]
            })
        }),
        Var::SslProtocol => e
            .req
            .and_then(|r| r.tls())
            .map(|t| Cow::Borrowed(t.version.as_bytes())),
        Var::RequestTime => e.req.and_then(crate::Request::elapsed).map(seconds),
        Var::UpstreamResponseTime => e.req.and_then(crate::Request::upstream_time).map(seconds),
        Var::SslClientVerify => e
            .req
            .and_then(|r| r.tls())
            .and_then(|t| t.client.verify())
            .map(|v| Cow::Borrowed(v.as_bytes())),
        Var::SslClientSDn
        | Var::SslClientIDn
        | Var::SslClientSerial
        | Var::SslClientFingerprint => {
            let c = e.req.and_then(|r| r.tls()).and_then(|t| t.client.cert())?;
            let v = match var {
                Var::SslClientSDn => &c.subject,
                Var::SslClientIDn => &c.issuer,
                Var::SslClientSerial => &c.serial,
                _ => &c.fingerprint,
            };
            Some(Cow::Borrowed(v.as_bytes()))
        }
        Var::Http(name) => {
            if name.eq_ignore_ascii_case("referer") {
                return e.referer.map(Cow::Borrowed);
            }
            if name.eq_ignore_ascii_case("user-agent") {
                return e.user_agent.map(Cow::Borrowed);
            }
            e.req.and_then(|r| r.header(name)).map(Cow::Borrowed)
        }
    }
}

/// A template line: its text as written, each variable's value escaped as nginx escapes it
/// (`-` for none).
pub(crate) fn format_template(pieces: &[Piece], e: &Entry<'_>, now: SystemTime, out: &mut Vec<u8>) {
    for p in pieces {
        match p {
            Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
            Piece::Var(v) => match value(v, e, now) {
                Some(v) => escape(&v, out),
                None => out.push(b'-'),
            },
        }
    }
    out.push(b'\n');
}

/// One JSON object: the combined fields and a few more; a field with no value is `null`.
pub(crate) fn format_json(e: &Entry<'_>, now: SystemTime, out: &mut Vec<u8>) {
    const FIELDS: &[(&str, Var)] = &[
        ("time", Var::TimeIso8601),
        ("remote_addr", Var::RemoteAddr),
        ("request", Var::Request),
        ("status", Var::Status),
        ("body_bytes_sent", Var::BodyBytesSent),
        ("request_method", Var::RequestMethod),
        ("request_uri", Var::RequestUri),
        ("server_protocol", Var::ServerProtocol),
        ("host", Var::Host),
        ("scheme", Var::Scheme),
        ("ssl_protocol", Var::SslProtocol),
        ("request_time", Var::RequestTime),
        ("upstream_response_time", Var::UpstreamResponseTime),
    ];
    let headers = [
        ("http_referer", e.referer),
        ("http_user_agent", e.user_agent),
    ];
    out.push(b'{');
    let values = FIELDS
        .iter()
        .map(|(name, var)| {
            let number = matches!(
                var,
                Var::Status | Var::BodyBytesSent | Var::RequestTime | Var::UpstreamResponseTime
            );
            (*name, value(var, e, now), number)
        })
        .chain(
            headers
                .iter()
                .map(|&(name, v)| (name, v.map(Into::into), false)),
        );
    for (i, (name, v, number)) in values.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        match v {
            None => out.extend_from_slice(b"null"),
            Some(v) if number => out.extend_from_slice(&v),
            Some(v) => {
                out.push(b'"');
                json_escape(&v, out);
                out.push(b'"');
            }
        }
    }
    out.extend_from_slice(b"}\n");
}

/// Writes `v` as the inside of a JSON string that is valid UTF-8 whatever `v` holds: text as
/// it is, `"` `\` and control characters escaped as JSON says, and each byte that is not
/// part of valid UTF-8 as the four characters `\xHH` (so the value is kept, not replaced).
fn json_escape(v: &[u8], out: &mut Vec<u8>) {
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => {
                    let mut b = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        for &b in chunk.invalid() {
            let _ = write!(out, "\\\\x{b:02X}");
        }
    }
}

/// `2000-10-10T13:42:16+00:00` in UTC (nginx's `$time_iso8601`).
fn iso8601(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = utc(t);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}+00:00")
}

/// Year, month, day, hour, minute and second of `t` in UTC.
fn utc(t: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Escapes `"`, `\`, control and non-ASCII bytes as `\xHH` (as nginx does), so a log line can
/// never be split or forged by a client.
fn escape(v: &[u8], out: &mut Vec<u8>) {
    for &b in v {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b);
        }
    }
}

/// A duration as nginx writes `$request_time`: seconds with milliseconds (`0.042`).
fn seconds(d: std::time::Duration) -> std::borrow::Cow<'static, [u8]> {
    std::borrow::Cow::Owned(format!("{}.{:03}", d.as_secs(), d.subsec_millis()).into_bytes())
}

/// `10/Oct/2000:13:55:36 +0000` in UTC.
fn clf_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, hh, mm, ss) = utc(t);
    format!(
        "{d:02}/{}/{y}:{hh:02}:{mm:02}:{ss:02} +0000",
        MONTHS[(m - 1) as usize]
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_log_format_line() {
        let e = Entry {
            peer: "127.0.0.1".parse().unwrap(),
            request: RequestLine::Read {
                method: "GET",
                target: "/a\"b",
                version: "HTTP/1.1",
            },
            status: 200,
            body_bytes: 2326,
            referer: None,
            user_agent: Some(b"curl/8 \"evil\"\nx"),
            req: None,
        };
        let mut out = Vec::new();
        format_entry(&e, UNIX_EPOCH + Duration::from_secs(971_185_336), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "127.0.0.1 - - [10/Oct/2000:13:42:16 +0000] \"GET /a\\x22b HTTP/1.1\" 200 2326 \"-\" \"curl/8 \\x22evil\\x22\\x0Ax\"\n"
        );
    }

    #[test]
    fn a_refused_head_logs_its_first_line_as_received() {
        let line = |received: &[u8]| {
            let e = Entry {
                peer: "::1".parse().unwrap(),
                request: RequestLine::Raw(received),
                status: 400,
                body_bytes: 150,
                referer: None,
                user_agent: None,
                req: None,
            };
            let mut out = Vec::new();
            format_entry(&e, UNIX_EPOCH, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            line(b"GET /t.txt HTTP/1.1\r\nHost\0: x\r\n\r\n"),
            "::1 - - [01/Jan/1970:00:00:00 +0000] \"GET /t.txt HTTP/1.1\" 400 150 \"-\" \"-\"\n"
        );
        // Bytes that are not text, a bare LF, nothing at all.
        assert!(line(b"\x16\x03\x01\x02\x00").contains("\"\\x16\\x03\\x01\\x02\\x00\" 400"));
        assert!(line(b"GET / HTTP/1.1\nHost: x\n\n").contains("\"GET / HTTP/1.1\" 400"));
        assert!(line(b"").contains("] \"-\" 400"));
        // A long line (a 414's) is cut.
        let long = [b"GET /".as_slice(), &[b'a'; 5000]].concat();
        let l = line(&long);
        assert!(
            l.contains(&format!("\"GET /{}\" 400", "a".repeat(RAW_LINE_MAX - 5))),
            "{l}"
        );
    }

    /// Every byte 0..=255 in the target and the User-Agent: a JSON line is valid JSON and
    /// valid UTF-8 and gives the bytes back (text as text, the rest as `\xHH`); a template
    /// line is one line of printable ASCII.
    #[test]
    fn json_and_template_lines_hold_any_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        let target = String::from_utf8_lossy(&all).into_owned();
        let e = Entry {
            peer: "192.0.2.7".parse().unwrap(),
            request: RequestLine::Read {
                method: "GET",
                target: &target,
                version: "HTTP/1.1",
            },
            status: 404,
            body_bytes: 150,
            referer: Some(b"https://example.test/"),
            user_agent: Some(&all),
            req: None,
        };
        let mut out = Vec::new();
        format_json(&e, UNIX_EPOCH + Duration::from_secs(971_185_336), &mut out);
        let text = String::from_utf8(out).expect("valid UTF-8");
        assert!(
            text.ends_with("}\n") && text.matches('\n').count() == 1,
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(v["time"], "2000-10-10T13:42:16+00:00");
        assert_eq!(v["remote_addr"], "192.0.2.7");
        assert_eq!(v["status"], 404);
        assert_eq!(v["body_bytes_sent"], 150);
        assert_eq!(v["request_uri"], target.as_str());
        assert_eq!(v["http_referer"], "https://example.test/");
        assert_eq!(v["host"], serde_json::Value::Null);
        let ua = v["http_user_agent"].as_str().unwrap();
        let ascii: String = (0..0x80u8).map(char::from).collect();
        let rest: String = (0x80..=0xffu8).map(|b| format!("\\x{b:02X}")).collect();
        assert_eq!(ua, format!("{ascii}{rest}"));
        // A template: nginx's default escaping, one line.
        let format: crate::config::AccessLogFormat =
            "$remote_addr [$time_local] \"$request\" $status $body_bytes_sent \"$http_user_agent\" $host"
                .parse()
                .unwrap();
        let crate::config::AccessLogFormat::Template(pieces) = format else {
            panic!("a template");
        };
        let mut out = Vec::new();
        format_template(&pieces, &e, UNIX_EPOCH, &mut out);
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(out[..out.len() - 1]
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b)));
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.starts_with("192.0.2.7 [01/Jan/1970:00:00:00 +0000] \"GET "),
            "{line}"
        );
        assert!(line.contains(" 404 150 \"\\x00\\x01\\x02"), "{line}");
        assert!(
            line.contains("\\x22") && line.contains("\\xFF\" -"),
            "{line}"
        );
        assert!(line.trim_end().ends_with(" -"), "no host: {line}");
    }

    /// `$request_time` from the request's arrival, `$upstream_response_time` as a proxy or
    /// FastCGI recorded it, in seconds with milliseconds; `-` (JSON: null) where none.
    #[test]
    fn request_and_upstream_times() {
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        let raw = b"GET /app HTTP/1.1\r\nHost: t\r\n\r\n";
        p.parse(raw).unwrap().expect("a head");
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let req = crate::Request::new(raw.to_vec(), p.take_head(), addr, addr);
        let format: crate::config::AccessLogFormat =
            "$request_time $upstream_response_time".parse().unwrap();
        assert!(format.needs_arrival());
        let crate::config::AccessLogFormat::Template(pieces) = format else {
            panic!("a template");
        };
        let entry = |req| Entry {
            peer: addr.ip(),
            request: RequestLine::Raw(b""),
            status: 200,
            body_bytes: 0,
            referer: None,
            user_agent: None,
            req: Some(req),
        };
        let line = |req| {
            let mut out = Vec::new();
            format_template(&pieces, &entry(req), UNIX_EPOCH, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(line(&req), "- -\n");
        req.mark_arrival();
        req.set_upstream_time(Duration::from_micros(42_400));
        std::thread::sleep(Duration::from_millis(20));
        let l = line(&req);
        let (t, up) = l.trim_end().split_once(' ').unwrap();
        let t: f64 = t.parse().unwrap();
        assert!((0.020..5.0).contains(&t), "{l}");
        assert_eq!(up, "0.042");
        let mut out = Vec::new();
        format_json(&entry(&req), UNIX_EPOCH, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["upstream_response_time"], 0.042);
        assert!(v["request_time"].as_f64().unwrap() >= 0.020);
        assert!(!"combined"
            .parse::<crate::config::AccessLogFormat>()
            .unwrap()
            .needs_arrival());
    }

    #[test]
    fn templates_name_only_known_variables() {
        use crate::config::{AccessLogFormat, LogPiece, LogVar};
        let f: AccessLogFormat = "${remote_addr}-$http_x_request_id $args".parse().unwrap();
        assert_eq!(
            f,
            AccessLogFormat::Template(vec![
                LogPiece::Var(LogVar::RemoteAddr),
                LogPiece::Text("-".into()),
                LogPiece::Var(LogVar::Http("x-request-id".into())),
                LogPiece::Text(" ".into()),
                LogPiece::Var(LogVar::Args),
            ])
        );
        assert_eq!(f.to_string().parse::<AccessLogFormat>().unwrap(), f);
        for bad in ["$nope", "${remote_addr", "$http_", "$"] {
            assert!(bad.parse::<AccessLogFormat>().is_err(), "{bad}");
        }
        assert_eq!(
            "json".parse::<AccessLogFormat>().unwrap(),
            AccessLogFormat::Json
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}

#[cfg(test)]
mod limiter_tests {
    use super::*;

    /// A call site gets BURST lines a window; the rest are counted, reported with the site's
    /// next line once a window has passed, and in the total; other sites keep their own budget.
    #[test]
    fn a_site_writes_a_burst_a_window_and_the_rest_are_counted() {
        let l = Limiter::new();
        let t0 = 1_000_000;
        let written = (0..100).filter(|_| l.admit(7, t0) != Admit::Drop).count() as u64;
        assert_eq!(written, BURST);
        assert_eq!(l.suppressed(), 100 - BURST);
        // Another site is not held back by this one's flood.
        assert_eq!(l.admit(8, t0), Admit::Write { suppressed: 0 });
        // Within the window still dropped; past it, written with the count of what was not.
        assert_eq!(l.admit(7, t0 + WINDOW_MS - 1), Admit::Drop);
        assert_eq!(
            l.admit(7, t0 + WINDOW_MS),
            Admit::Write {
                suppressed: 100 - BURST + 1
            }
        );
        assert_eq!(l.admit(7, t0 + WINDOW_MS), Admit::Write { suppressed: 0 });
        assert_eq!(l.suppressed(), 100 - BURST + 1);
    }
}
