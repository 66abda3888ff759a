//! Logging: the error log (the `log` facade to stderr, level from `WEFT_LOG`) and the access
//! log in Combined Log Format, buffered and flushed once a second and at exit.
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

use crate::config::AccessLogTarget;

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
    /// Opens the log; `None` when it is off. A file is appended to.
    pub fn open(target: &AccessLogTarget) -> io::Result<Option<AccessLog>> {
        let Some(w) = writer(target)? else {
            return Ok(None);
        };
        Ok(Some(AccessLog {
            out: Arc::new(Mutex::new(BufWriter::with_capacity(BUFFER, w))),
            flusher: Arc::new(std::sync::Once::new()),
            target: target.clone(),
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
        format_entry(e, SystemTime::now(), &mut line);
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
        RequestLine::Raw(received) => {
            let end = received
                .iter()
                .position(|&b| b == b'\n')
                .unwrap_or(received.len())
                .min(RAW_LINE_MAX);
            let line = received[..end]
                .strip_suffix(b"\r")
                .unwrap_or(&received[..end]);
            escape(if line.is_empty() { b"-" } else { line }, out);
        }
    }
    let _ = write!(out, "\" {} {} \"", e.status, e.body_bytes);
    escape(e.referer.unwrap_or(b"-"), out);
    out.extend_from_slice(b"\" \"");
    escape(e.user_agent.unwrap_or(b"-"), out);
    out.extend_from_slice(b"\"\n");
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

/// `10/Oct/2000:13:55:36 +0000` in UTC.
fn clf_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
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
