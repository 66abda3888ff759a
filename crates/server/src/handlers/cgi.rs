//! CGI/1.1 (RFC 3875): runs the executable files of a configured directory, mounted at a URL
//! prefix (`/cgi-bin/` by default), as every model's handler.
//!
//! What it promises:
//! - **Path safety**: the path after the prefix is percent-decoded and normalised
//!   (`handlers/path.rs`); each segment is opened beneath the CGI directory with
//!   `openat2(RESOLVE_BENEATH)` until a regular file is found (the rest is `PATH_INFO`). A
//!   missing file or a dot segment is 404; a directory, a file that is not regular or not
//!   executable, or one that cannot be opened, is 403.
//! - **Environment**: the script gets only `PATH` and the meta-variables of RFC 3875 §4.1
//!   (plus `REQUEST_URI`, `SCRIPT_FILENAME`, `DOCUMENT_ROOT` and `SERVER_ADDR`, which most
//!   scripts expect), never the server's environment. Request headers become `HTTP_*`, except
//!   `Proxy` (httpoxy: `HTTP_PROXY` would set the script's outgoing proxy), credentials,
//!   hop-by-hop fields, those given as `CONTENT_*`, and names with `_` or other characters
//!   that would make two headers one variable (as nginx and Apache drop them).
//! - **Body**: a `Content-Length` body is streamed to the script's stdin as it arrives. A
//!   chunked body is de-chunked into memory first (bounded by `limits.max_body`), because
//!   RFC 3875 §4.2 wants `CONTENT_LENGTH` for every body. The body is written before the
//!   output is read (as Apache's mod_cgi does): a script must read its input before it writes
//!   more than a pipe's worth (64 KiB) of output.
//! - **Output**: the header section (LF or CRLF lines, at most `cgi.max_header_bytes`) is
//!   parsed; `Status` sets the status, `Location: /path` with no status is a local redirect
//!   (the app serves `GET /path` instead, RFC 3875 §6.2.2), any other `Location` a client
//!   redirect (302 unless `Status` says otherwise). The body is streamed back as it is
//!   read ([`Body::Stream`]: chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0 ones),
//!   or sent with its length when the script had already finished. stderr goes to the error
//!   log, a line at a time, prefixed with the script's name.
//! - **Failures**: no output, or a malformed header section, is 502 (with the exit status
//!   logged); a script still running [`crate::config::CgiConfig::timeout`] after it started
//!   is killed with its whole process group (it runs as a group leader) and answered 504, or,
//!   when the response has already begun, the connection ends without the last chunk.
//! - **No zombies**: every script is reaped, on every path (a [`Running`] kills and reaps its
//!   child when dropped: a client that went away, a HEAD request, a write error).
//! - **No blocked worker**: on the fiber model the pipes are weft-fiber pipes (a read that
//!   would block parks the fiber), the spawn runs on the blocking pool, and the wait for the
//!   exit polls `waitpid(WNOHANG)` with fiber sleeps. On the thread and process models the
//!   same calls block the connection's own thread, as everything there does.
//!
//! Known gaps: no `AUTH_TYPE`/`REMOTE_USER` (weft does no authentication), no command-line
//! arguments for `isindex` queries (RFC 3875 §4.4, a MAY), no NPH scripts. The script runs
//! from its path (the check and the exec are two lookups): only someone who can write the CGI
//! directory could swap it in between, and such a person can run code there anyway.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_fiber::io::{PipeReader, PipeWriter};
use weft_http::cgi::{find_blank_line, parse_head};
use weft_http::{BodyFraming, Method, Parser, Version};

use crate::body::RequestBody;
use crate::config::CgiConfig;
use crate::handlers::path::{normalize, PathError};
use crate::response::{Body, BodyStream, Response};
use crate::Request;
use weft_sys::errno::{ELOOP, ENOENT, ENOTDIR, EXDEV};
use weft_sys::fs::{open_beneath, Resolve};

/// `PATH` for scripts when the server has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Bytes per pipe read or write.
const PIECE: usize = 16 * 1024;
/// `SERVER_SOFTWARE`.
const SOFTWARE: &str = concat!("weft/", env!("CARGO_PKG_VERSION"));

/// The CGI mount: the scripts' directory, its URL prefix and the scripts' time limit.
#[derive(Debug)]
pub struct Cgi {
    /// Canonical path of the directory (scripts are executed by path below it).
    dir: PathBuf,
    /// The same directory, open: the base of `openat2(RESOLVE_BENEATH)`.
    dir_file: File,
    /// Starts and ends with `/`.
    prefix: String,
    timeout: Duration,
    /// For `PATH_TRANSLATED` and `DOCUMENT_ROOT`.
    doc_root: PathBuf,
    path_env: OsString,
    /// Empty for a directory mount; for an extension mount (the document root at `/`), the
    /// file name endings that make a file a script.
    extensions: Vec<String>,
    /// `cgi.max_header_bytes`, `output_buffer`, `max_stderr_line`, `stderr_settle`.
    limits: OutputLimits,
}

/// How much of a script's output is read, and how its stderr is logged.
#[derive(Debug, Clone, Copy)]
struct OutputLimits {
    max_header_bytes: usize,
    output_buffer: usize,
    max_stderr_line: usize,
    stderr_settle: Duration,
}

/// What a CGI request came to.
#[derive(Debug)]
pub enum Outcome {
    /// Send this.
    Response(Response),
    /// The script answered `Location: /local/path`: serve `GET` of that target instead.
    LocalRedirect(String),
}

/// Why `locate` found no script to run.
#[derive(Debug, PartialEq, Eq)]
enum Unlocated {
    /// An extension mount's path that names no script (a directory, or a file without a
    /// script ending below a directory whose name has one): the static files answer.
    NotScript,
    /// Refused with this status (400, 403, 404).
    Status(u16),
}

/// A script found for a request path.
#[derive(Debug, PartialEq, Eq)]
struct Located {
    /// Path of the script below the CGI directory (decoded, normalised).
    rel: Vec<u8>,
    /// The decoded path after the script (`""` or starting with `/`).
    path_info: Vec<u8>,
}

impl Cgi {
    /// The directory mount `cfg` describes; `None` if no directory is configured.
    pub fn new(cfg: &CgiConfig, doc_root: &Path) -> io::Result<Option<Cgi>> {
        let Some(dir) = &cfg.dir else {
            return Ok(None);
        };
        Cgi::mount(dir, &cfg.prefix, Vec::new(), cfg, doc_root).map(Some)
    }

    /// The extension mount `cfg` describes (executable files under the document root whose
    /// names end with one of `cfg.extensions`); `None` if no extension is configured.
    pub fn by_extension(cfg: &CgiConfig, doc_root: &Path) -> io::Result<Option<Cgi>> {
        if cfg.extensions.is_empty() {
            return Ok(None);
        }
        if let Some(bad) = cfg
            .extensions
            .iter()
            .find(|e| e.len() < 2 || !e.starts_with('.'))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cgi.extensions: `{bad}` must be a file ending such as `.cgi`"),
            ));
        }
        Cgi::mount(doc_root, "/", cfg.extensions.clone(), cfg, doc_root).map(Some)
    }

    fn mount(
        dir: &Path,
        prefix: &str,
        extensions: Vec<String>,
        cfg: &CgiConfig,
        doc_root: &Path,
    ) -> io::Result<Cgi> {
        let (canonical, dir_file) = crate::handlers::open_dir(dir, "CGI directory")?;
        let mut prefix = prefix.to_string();
        if !prefix.starts_with('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cgi.prefix `{prefix}` must start with `/`"),
            ));
        }
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(Cgi {
            dir: canonical,
            dir_file,
            prefix,
            timeout: cfg.timeout,
            doc_root: doc_root
                .canonicalize()
                .unwrap_or_else(|_| doc_root.to_path_buf()),
            path_env: std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
            extensions,
            limits: OutputLimits {
                max_header_bytes: cfg.max_header_bytes,
                output_buffer: cfg.output_buffer,
                max_stderr_line: cfg.max_stderr_line,
                stderr_settle: cfg.stderr_settle,
            },
        })
    }

    /// True if `path` (still percent-encoded) is under the prefix; for an extension mount, if
    /// a segment of the decoded path ends with a script ending (decoded, so `run%2Ecgi` is no
    /// way to read a script's source).
    pub fn matches(&self, path: &str) -> bool {
        if self.extensions.is_empty() {
            return path.starts_with(&self.prefix);
        }
        let Ok(norm) = normalize(path) else {
            return false;
        };
        norm.rel
            .split(|&b| b == b'/')
            .any(|seg| self.extensions.iter().any(|e| seg.ends_with(e.as_bytes())))
    }

    fn is_script_name(&self, rel: &[u8]) -> bool {
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.extensions.is_empty() || self.extensions.iter().any(|e| name.ends_with(e.as_bytes()))
    }

    /// Runs the script `req` names; `body` is the request body. `None`: an extension mount's
    /// path that names no script (a directory, or a file without a script ending below a
    /// directory whose name has one), for the static files to answer.
    pub fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Option<Outcome> {
        let answer = if req.method() == Method::Other {
            // An extension method is the application's (a registered route), never a script's.
            Err(501)
        } else {
            match self.locate(req.path()) {
                Ok(loc) => self.run(req, body, loc),
                Err(Unlocated::NotScript) => return None,
                Err(Unlocated::Status(status)) => Err(status),
            }
        };
        Some(answer.unwrap_or_else(|status| Outcome::Response(Response::error(status))))
    }

    fn run(&self, req: &Request, body: &mut RequestBody<'_>, loc: Located) -> Result<Outcome, u16> {
        let name = String::from_utf8_lossy(&loc.rel).into_owned();
        // RFC 3875 §4.2: the script gets CONTENT_LENGTH for every body, so a chunked one is
        // de-chunked first. A body error is the driver's to answer (400, 408, 413).
        let (content_length, buffered) = match req.head().framing() {
            BodyFraming::None => (None, None),
            BodyFraming::Length(n) => (Some(n), None),
            BodyFraming::Chunked => match body.read_all() {
                Ok(v) => (Some(v.len() as u64), Some(v)),
                Err(_) => return Err(400),
            },
        };
        let mut cmd = self.command(req, &loc, content_length);
        let started = Instant::now();
        let deadline = started + self.timeout;
        // fork/exec (or posix_spawn) waits until the exec is done: off the fiber worker.
        let child = weft_fiber::spawn_blocking(move || cmd.spawn()).map_err(|e| {
            log::error!("cgi {name}: cannot start: {e}");
            502u16
        })?;
        let mut script = Running::new(child, name, self.timeout, deadline, self.limits);
        let (stdin, stdout) = script.pipes().map_err(|e| {
            log::error!("cgi {}: pipes: {e}", script.name);
            500u16
        })?;
        match feed(&stdin, body, buffered.as_deref(), deadline) {
            Ok(()) => {}
            Err(Feed::Timeout) => return Err(script.timed_out("reading its input")),
            // The driver answers the body's error; the script is killed and reaped on drop.
            Err(Feed::ClientBody) => return Err(400),
        }
        drop(stdin);
        let head = match read_head(&stdout, deadline, &self.limits) {
            Ok(h) => h,
            Err(HeadError::Timeout) => return Err(script.timed_out("before its header")),
            Err(HeadError::Bad(why)) => {
                let exit = script.finish();
                log::error!(
                    "cgi {}: {why} (exit: {}); answering 502",
                    script.name,
                    exit.map_or("none".into(), describe)
                );
                return Err(502);
            }
        };
        let fields = parse_head(&head.buf[..head.head_len]).map_err(|why| {
            log::error!(
                "cgi {}: bad header section: {why}; answering 502",
                script.name
            );
            502u16
        })?;
        let mut rest = head.buf;
        rest.drain(..head.body_start);
        if let Some(target) = fields.local_redirect() {
            script.finish();
            return Ok(Outcome::LocalRedirect(target.to_string()));
        }
        let mut resp = Response::new(fields.status());
        for (n, v) in fields.headers {
            resp = resp.header(n, v);
        }
        if let Some(loc) = fields.location {
            resp = resp.header("Location", loc);
        }
        resp.body = if head.eof {
            script.finish();
            Body::Bytes(Bytes::from(rest))
        } else {
            let out = Output {
                pending: rest,
                pos: 0,
                stdout,
                script,
            };
            match fields.content_length {
                Some(n) => Body::Stream(BodyStream::with_len(out, n)),
                None => Body::Stream(BodyStream::new(out)),
            }
        };
        Ok(Outcome::Response(resp))
    }

    /// Finds the script for `path` (the request path, under the prefix).
    fn locate(&self, path: &str) -> Result<Located, Unlocated> {
        let below = &path[self.prefix.len() - 1..];
        let norm = normalize(below).map_err(|e| match e {
            PathError::AboveRoot => Unlocated::Status(404),
            _ => Unlocated::Status(400),
        })?;
        let segments: Vec<&[u8]> = norm.rel.split(|&b| b == b'/').collect();
        let mut rel: Vec<u8> = Vec::with_capacity(norm.rel.len());
        for (i, seg) in segments.iter().enumerate() {
            if seg.is_empty() {
                break; // the directory itself
            }
            if seg[0] == b'.' {
                return Err(Unlocated::Status(404));
            }
            if i > 0 {
                rel.push(b'/');
            }
            rel.extend_from_slice(seg);
            let file = match open_beneath(&self.dir_file, &rel, Resolve::Beneath) {
                Ok(f) => f,
                Err(e) => {
                    return Err(Unlocated::Status(match e.raw_os_error() {
                        Some(ENOENT | ENOTDIR | EXDEV | ELOOP) => 404,
                        _ => 403,
                    }))
                }
            };
            let meta = file.metadata().map_err(|_| Unlocated::Status(403))?;
            if meta.is_dir() {
                continue;
            }
            if !self.is_script_name(&rel) {
                return Err(Unlocated::NotScript);
            }
            if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                return Err(Unlocated::Status(403));
            }
            let path_info = crate::handlers::path_info(&segments, i, norm.trailing_slash);
            return Ok(Located { rel, path_info });
        }
        // A directory: the CGI directory itself is not listed; under the document root the
        // static files answer (its index, or 403).
        Err(if self.extensions.is_empty() {
            Unlocated::Status(403)
        } else {
            Unlocated::NotScript
        })
    }

    /// The command for the script at `loc`, with the RFC 3875 environment and nothing else.
    fn command(&self, req: &Request, loc: &Located, content_length: Option<u64>) -> Command {
        let path = self.dir.join(OsStr::from_bytes(&loc.rel));
        let mut cmd = Command::new(&path);
        cmd.env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills whatever the script started too.
            .process_group(0);
        if let Some(parent) = path.parent() {
            cmd.current_dir(parent);
        }
        let mut script_name = self.prefix.as_bytes().to_vec();
        script_name.extend_from_slice(&loc.rel);
        let mut filename = self.dir.as_os_str().as_bytes().to_vec();
        filename.push(b'/');
        filename.extend_from_slice(&loc.rel);
        for (k, v) in meta_variables(req, content_length, Credentials::Withheld) {
            cmd.env(k, v);
        }
        cmd.env("PATH", &self.path_env)
            .env("SCRIPT_NAME", OsStr::from_bytes(&script_name))
            .env("SCRIPT_FILENAME", OsStr::from_bytes(&filename))
            .env("DOCUMENT_ROOT", &self.doc_root);
        if !loc.path_info.is_empty() {
            let mut translated = self.doc_root.as_os_str().as_bytes().to_vec();
            translated.extend_from_slice(&loc.path_info);
            cmd.env("PATH_INFO", OsStr::from_bytes(&loc.path_info))
                .env("PATH_TRANSLATED", OsStr::from_bytes(&translated));
        }
        cmd
    }
}

/// Whether `HTTP_AUTHORIZATION` reaches the program: withheld from a CGI script (RFC 3875
/// §4.1.18: SHOULD), passed to a FastCGI application (the operator's own server process,
/// which PHP applications authenticate with, as nginx and Caddy pass it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credentials {
    Withheld,
    Passed,
}

/// The request's meta-variables (RFC 3875 §4.1) but for the script's names and paths.
pub(crate) fn meta_variables(
    req: &Request,
    content_length: Option<u64>,
    credentials: Credentials,
) -> Vec<(String, OsString)> {
    let text = |s: &str| OsString::from(s);
    let local = req.local_addr();
    let peer = req.peer_addr();
    let mut env = vec![
        ("GATEWAY_INTERFACE".to_string(), text("CGI/1.1")),
        ("SERVER_SOFTWARE".into(), text(SOFTWARE)),
        (
            "SERVER_PROTOCOL".into(),
            text(match req.version() {
                Version::Http10 => "HTTP/1.0",
                Version::Http11 => "HTTP/1.1",
                Version::Http2 => "HTTP/2.0",
            }),
        ),
        ("REQUEST_METHOD".into(), text(req.method_str())),
        ("QUERY_STRING".into(), text(req.query().unwrap_or(""))),
        ("REQUEST_URI".into(), text(req.target())),
        ("SERVER_NAME".into(), text(&server_name(req.host(), local))),
        ("SERVER_PORT".into(), text(&local.port().to_string())),
        ("SERVER_ADDR".into(), text(&local.ip().to_string())),
        ("REMOTE_ADDR".into(), text(&peer.ip().to_string())),
        ("REMOTE_HOST".into(), text(&peer.ip().to_string())),
        ("REMOTE_PORT".into(), text(&peer.port().to_string())),
        (
            "REQUEST_SCHEME".into(),
            text(if req.is_https() { "https" } else { "http" }),
        ),
    ];
    if req.is_https() {
        // As Apache's mod_ssl and nginx's fastcgi_params (`HTTPS $https if_not_empty`).
        env.push(("HTTPS".into(), text("on")));
    }
    // Mutual TLS (`[tls] verify_client`), as Apache's mod_ssl names them (nginx users pass
    // `$ssl_client_verify` and `$ssl_client_s_dn` under these names too).
    if let Some(client) = req.tls().map(|t| &t.client) {
        if let Some(v) = client.verify() {
            env.push(("SSL_CLIENT_VERIFY".into(), text(v)));
        }
        if let Some(c) = client.cert() {
            env.push(("SSL_CLIENT_S_DN".into(), text(&c.subject)));
            env.push(("SSL_CLIENT_I_DN".into(), text(&c.issuer)));
            env.push(("SSL_CLIENT_M_SERIAL".into(), text(&c.serial)));
        }
    }
    if let Some(n) = content_length {
        env.push(("CONTENT_LENGTH".into(), text(&n.to_string())));
    }
    if let Some(ct) = req.header("Content-Type") {
        env.push(("CONTENT_TYPE".into(), OsString::from_vec(ct.to_vec())));
    }
    let mut http: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, mut value) in req.headers() {
        let Some(var) = http_variable(name, credentials) else {
            continue;
        };
        // The request's host, which an absolute-form target's authority replaces
        // (RFC 9112 §3.2.2).
        if var == "HTTP_HOST" {
            value = req.host().unwrap_or_default().as_bytes();
        }
        match http.iter_mut().find(|(n, _)| *n == var) {
            // RFC 3875 §4.1.18: repeated fields are joined as one.
            Some((_, v)) => {
                v.extend_from_slice(b", ");
                v.extend_from_slice(value);
            }
            None => http.push((var, value.to_vec())),
        }
    }
    env.extend(http.into_iter().map(|(n, v)| (n, OsString::from_vec(v))));
    env
}

/// `HTTP_*` for header `name`, or `None` for a header the script must not see this way.
fn http_variable(name: &str, credentials: Credentials) -> Option<String> {
    const WITHHELD: &[&str] = &[
        // httpoxy (CVE-2016-5385): HTTP_PROXY is read as the outgoing proxy by many libraries.
        "proxy",
        // Credentials (RFC 3875 §4.1.18: SHOULD remove).
        "authorization",
        "proxy-authorization",
        // Given as CONTENT_LENGTH and CONTENT_TYPE; the body reaches the script de-chunked.
        "content-length",
        "content-type",
        "transfer-encoding",
        // Hop-by-hop: about the client's connection, not the request.
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "expect",
    ];
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        || WITHHELD.iter().any(|w| name.eq_ignore_ascii_case(w))
            && !(credentials == Credentials::Passed && name.eq_ignore_ascii_case("authorization"))
    {
        return None;
    }
    let mut var = String::with_capacity(5 + name.len());
    var.push_str("HTTP_");
    var.extend(name.chars().map(|c| {
        if c == '-' {
            '_'
        } else {
            c.to_ascii_uppercase()
        }
    }));
    Some(var)
}

/// `SERVER_NAME`: the host of the `Host` header (IPv6 literals keep their brackets), else the
/// address the request arrived on.
fn server_name(host: Option<&str>, local: SocketAddr) -> String {
    if let Some(h) = host.map(str::trim).filter(|h| !h.is_empty()) {
        if h.starts_with('[') {
            if let Some(end) = h.find(']') {
                return h[..=end].to_string();
            }
        }
        return h.rsplit_once(':').map_or(h, |(name, _)| name).to_string();
    }
    match local.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    }
}

/// A started script: kills (its whole group) and reaps it when dropped unless it was reaped.
struct Running {
    child: Option<Child>,
    name: String,
    deadline: Instant,
    /// The configured limit, for messages.
    timeout: Duration,
    /// Disconnects when the thread logging stderr is done (`None` on a fiber, whose logger
    /// needs no waiting for: the server process outlives it).
    stderr_done: Option<std::sync::mpsc::Receiver<()>>,
    /// Its stderr's line length and settling time.
    limits: OutputLimits,
}

impl Running {
    fn new(
        child: Child,
        name: String,
        timeout: Duration,
        deadline: Instant,
        limits: OutputLimits,
    ) -> Running {
        Running {
            child: Some(child),
            name,
            deadline,
            timeout,
            stderr_done: None,
            limits,
        }
    }

    /// The script's stdin and stdout as fiber-aware pipes; its stderr goes to the error log.
    fn pipes(&mut self) -> io::Result<(PipeWriter, PipeReader)> {
        let child = self.child.as_mut().expect("not reaped");
        let missing = || io::Error::other("child stdio missing");
        let stdin = PipeWriter::try_from(child.stdin.take().ok_or_else(missing)?)?;
        let stdout = PipeReader::try_from(child.stdout.take().ok_or_else(missing)?)?;
        let stderr = PipeReader::try_from(child.stderr.take().ok_or_else(missing)?)?;
        self.stderr_done = log_stderr(stderr, self.name.clone(), self.limits.max_stderr_line);
        Ok((stdin, stdout))
    }

    /// Waits (until the deadline) for the script to exit after its output ended, and reaps
    /// it; a script that lingers past the deadline is killed. Returns its exit status.
    fn finish(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let mut nap = Duration::from_millis(1);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        log::warn!("cgi {}: {}", self.name, describe(status));
                    }
                    return Some(status);
                }
                Ok(None) if Instant::now() < self.deadline => {
                    // Usually the exit follows the end of output within a tick or two.
                    weft_fiber::sleep(nap.min(self.deadline - Instant::now()));
                    nap = (nap * 2).min(Duration::from_millis(50));
                }
                Ok(None) => {
                    log::warn!(
                        "cgi {}: still running {:?} after it started; killed",
                        self.name,
                        self.timeout
                    );
                    kill_and_reap(child);
                    return None;
                }
                Err(e) => {
                    log::error!("cgi {}: waitpid: {e}", self.name);
                    kill_and_reap(child);
                    return None;
                }
            }
        }
    }

    /// Kills the script after its deadline passed; the status to answer.
    fn timed_out(&mut self, when: &str) -> u16 {
        log::warn!(
            "cgi {}: timed out {when} (cgi.timeout {:?}); killed",
            self.name,
            self.timeout
        );
        if let Some(child) = self.child.take() {
            kill_and_reap(child);
        }
        504
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            kill_and_reap(child);
        }
        // A process-model connection process exits soon after this: let the logging thread
        // write the script's last stderr lines first (at once, unless something the script
        // started still holds its stderr).
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(self.limits.stderr_settle);
        }
    }
}

/// SIGKILL to the child's process group, then waits for the child (a killed process exits at
/// once; the short wait goes to the blocking pool on a fiber). Called for a script given up on
/// (past its deadline, or its answer abandoned), never after a clean end of output: the group
/// dies even when the script itself has exited, since what it left running there (`cmd &`)
/// may be what holds the output open. Its group id stays taken while any member lives, so the
/// signal reaches nothing else.
fn kill_and_reap(mut child: Child) {
    let exited = !matches!(child.try_wait(), Ok(None));
    let pid = weft_sys::process::Pid::try_from(child.id()).unwrap_or(0);
    if let Err(e) = weft_sys::process::kill_group(pid, weft_sys::signal::SIGKILL) {
        log::error!("cgi: killing process group {pid}: {e}");
        let _ = child.kill();
    }
    if exited {
        return;
    }
    weft_fiber::spawn_blocking(move || {
        let _ = child.wait();
    });
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => format!("{status}"),
    }
}

/// Reads the script's stderr until it closes and logs it a line at a time, on its own fiber
/// (fiber model) or thread, so a script that writes much to stderr never blocks on it. For a
/// thread, returns a receiver that disconnects when it is done.
fn log_stderr(
    stderr: PipeReader,
    name: String,
    max_line: usize,
) -> Option<std::sync::mpsc::Receiver<()>> {
    let run = move || {
        let mut line: Vec<u8> = Vec::new();
        let mut buf = [0u8; 1024];
        let emit = |l: &[u8]| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            log::warn!("cgi {name}: stderr: {}", String::from_utf8_lossy(l));
        };
        loop {
            let n = match (&stderr).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            line.extend_from_slice(&buf[..n]);
            while let Some(i) = line.iter().position(|&b| b == b'\n') {
                emit(&line[..i]);
                line.drain(..=i);
            }
            if line.len() >= max_line {
                emit(&line);
                line.clear();
            }
        }
        if !line.is_empty() {
            emit(&line);
        }
    };
    if weft_fiber::current_id().is_some() {
        drop(weft_fiber::spawn(run));
        return None;
    }
    let (done, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("weft-cgi-stderr".into())
        .spawn(move || {
            run();
            drop(done);
        });
    match spawned {
        Ok(_) => Some(rx),
        Err(e) => {
            log::error!("cgi: cannot start a thread for a script's stderr: {e}");
            None
        }
    }
}

/// Why feeding the body stopped early.
enum Feed {
    Timeout,
    ClientBody,
}

/// Writes the request body to the script's stdin (the buffered de-chunked one, or the
/// `Content-Length` one as it arrives). A script that closes its stdin early just gets no more.
fn feed(
    stdin: &PipeWriter,
    body: &mut RequestBody<'_>,
    buffered: Option<&[u8]>,
    deadline: Instant,
) -> Result<(), Feed> {
    if let Some(data) = buffered {
        return write_all(stdin, data, deadline).map(drop);
    }
    let mut buf = vec![0u8; PIECE];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(_) => return Err(Feed::ClientBody),
        };
        if !write_all(stdin, &buf[..n], deadline)? {
            return Ok(());
        }
    }
}

/// Writes all of `data`; false if the script closed its stdin.
fn write_all(stdin: &PipeWriter, mut data: &[u8], deadline: Instant) -> Result<bool, Feed> {
    while !data.is_empty() {
        match stdin.write_deadline(data, deadline) {
            Ok(0) => return Ok(false),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(Feed::Timeout),
            // EPIPE: the script does not read its input (it may not need it).
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// The script's output up to the end of its header section, and what followed.
struct Head {
    buf: Vec<u8>,
    /// Bytes of the header lines (without the blank line).
    head_len: usize,
    /// Where the body starts.
    body_start: usize,
    /// The output ended (all of it is in `buf`).
    eof: bool,
}

enum HeadError {
    Timeout,
    Bad(&'static str),
}

fn read_head(
    stdout: &PipeReader,
    deadline: Instant,
    limits: &OutputLimits,
) -> Result<Head, HeadError> {
    let mut buf = Vec::with_capacity(PIECE);
    let mut piece = vec![0u8; PIECE];
    let (head_len, body_start) = loop {
        if let Some(found) = find_blank_line(&buf) {
            break found;
        }
        if buf.len() > limits.max_header_bytes {
            return Err(HeadError::Bad("header section too large"));
        }
        match stdout.read_deadline(&mut piece, deadline) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Bad("no output")),
            Ok(0) => return Err(HeadError::Bad("output ended inside the header section")),
            Ok(n) => buf.extend_from_slice(&piece[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(HeadError::Timeout),
            Err(_) => return Err(HeadError::Bad("reading its output failed")),
        }
    };
    // Take what is already there without waiting: a script that has finished is answered with
    // a Content-Length (and an HTTP/1.0 client keeps its connection).
    let mut eof = false;
    while buf.len() - body_start <= limits.output_buffer {
        match stdout.read_deadline(&mut piece, Instant::now()) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => buf.extend_from_slice(&piece[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Ok(Head {
        buf,
        head_len,
        body_start,
        eof,
    })
}

/// The rest of a script's output as a response body: what was read with the header first,
/// then the pipe, bounded by the script's deadline. At the end it reaps the script.
struct Output {
    pending: Vec<u8>,
    pos: usize,
    stdout: PipeReader,
    script: Running,
}

impl Read for Output {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.pending.len() {
            let n = buf.len().min(self.pending.len() - self.pos);
            buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        if self.script.child.is_none() {
            return Ok(0);
        }
        match self.stdout.read_deadline(buf, self.script.deadline) {
            Ok(0) => {
                self.script.finish();
                Ok(0)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                self.script.timed_out("in the middle of its output");
                Err(e)
            }
            r => r,
        }
    }
}

/// The request a local redirect serves: `GET target` with the original request's headers but
/// those of its body, on the same connection facts.
pub fn redirected_request(
    req: &Request,
    target: &str,
    limits: weft_http::Limits,
) -> Option<Request> {
    let version = match req.version() {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 | Version::Http2 => "HTTP/1.1",
    };
    let mut raw = format!("GET {target} {version}\r\n").into_bytes();
    for (name, value) in req.headers() {
        if [
            "content-length",
            "transfer-encoding",
            "content-type",
            "expect",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        raw.extend_from_slice(name.as_bytes());
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(value);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"\r\n");
    let mut parser = Parser::new(limits);
    match parser.parse(&raw) {
        Ok(Some(n)) if n == raw.len() => Some(req.derived(Bytes::from(raw), parser.take_head())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_names_no_script_is_told_apart_from_a_refusal() {
        let root = std::env::temp_dir().join(format!("weft-cgi-locate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("app/tools.cgi")).unwrap();
        std::fs::write(root.join("app/tools.cgi/readme.txt"), "text").unwrap();
        std::fs::write(root.join("app/run.cgi"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            root.join("app/run.cgi"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(root.join("app/source.cgi"), "#!/bin/sh\n").unwrap();
        let cfg = CgiConfig {
            extensions: vec![".cgi".into()],
            ..CgiConfig::default()
        };
        let ext = Cgi::by_extension(&cfg, &root).unwrap().unwrap();
        assert_eq!(
            ext.locate("/app/run.cgi/more"),
            Ok(Located {
                rel: b"app/run.cgi".to_vec(),
                path_info: b"/more".to_vec(),
            })
        );
        // Under an extension mount a directory, or a file without the ending below a
        // directory that has it, is the static files' to answer.
        assert_eq!(ext.locate("/app/tools.cgi/"), Err(Unlocated::NotScript));
        assert_eq!(
            ext.locate("/app/tools.cgi/readme.txt"),
            Err(Unlocated::NotScript)
        );
        assert_eq!(ext.locate("/app/source.cgi"), Err(Unlocated::Status(403)));
        assert_eq!(ext.locate("/app/missing.cgi"), Err(Unlocated::Status(404)));
        // A directory mount refuses a directory: nothing there is static.
        let cfg = CgiConfig {
            dir: Some(root.join("app")),
            ..CgiConfig::default()
        };
        let dir = Cgi::new(&cfg, &root).unwrap().unwrap();
        assert_eq!(
            dir.locate("/cgi-bin/tools.cgi/"),
            Err(Unlocated::Status(403))
        );
        assert_eq!(dir.locate("/cgi-bin/.x"), Err(Unlocated::Status(404)));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn header_variables_exclude_httpoxy_and_ambiguous_names() {
        let w = Credentials::Withheld;
        assert_eq!(
            http_variable("User-Agent", w).as_deref(),
            Some("HTTP_USER_AGENT")
        );
        assert_eq!(
            http_variable("x-custom-1", w).as_deref(),
            Some("HTTP_X_CUSTOM_1")
        );
        for withheld in [
            "Proxy",
            "PROXY",
            "Authorization",
            "Content-Length",
            "Content-Type",
            "Transfer-Encoding",
            "Connection",
            "X_Under",
            "X.Dot",
            "",
        ] {
            assert_eq!(http_variable(withheld, w), None, "{withheld}");
        }
        // A FastCGI application gets the credentials, and nothing else more.
        let p = Credentials::Passed;
        assert_eq!(
            http_variable("Authorization", p).as_deref(),
            Some("HTTP_AUTHORIZATION")
        );
        for withheld in ["Proxy", "Proxy-Authorization", "Content-Length", "X_Under"] {
            assert_eq!(http_variable(withheld, p), None, "{withheld}");
        }
    }

    #[test]
    fn an_absolute_form_authority_is_the_scripts_host() {
        // RFC 9112 §3.2.2: the target's authority replaces Host for the script as well.
        let raw = b"GET http://other.example:81/cgi-bin/x HTTP/1.1\r\nHost: a.example\r\n\r\n";
        let mut p = Parser::new(weft_http::Limits::default());
        assert_eq!(p.parse(raw).unwrap(), Some(raw.len()));
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let req = Request::new(raw.to_vec(), p.take_head(), local, local);
        assert_eq!(req.host(), Some("other.example:81"));
        let env = meta_variables(&req, None, Credentials::Withheld);
        let var = |name: &str| {
            env.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(var("SERVER_NAME").as_deref(), Some("other.example"));
        assert_eq!(var("HTTP_HOST").as_deref(), Some("other.example:81"));
    }

    #[test]
    fn server_name_from_host() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(server_name(Some("example.com:8080"), local), "example.com");
        assert_eq!(server_name(Some("example.com"), local), "example.com");
        assert_eq!(server_name(Some("[::1]:80"), local), "[::1]");
        assert_eq!(server_name(None, local), "127.0.0.1");
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(server_name(Some(""), v6), "[::1]");
    }
}
