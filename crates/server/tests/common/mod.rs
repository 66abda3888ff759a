//! Test harness for the black-box tests: starts the real `weft` binary on 127.0.0.1 with a
//! free port and a private temporary directory, and speaks raw HTTP/1.1 to it over
//! `std::net::TcpStream`.
//!
//! Every read has a timeout and every response read has an overall deadline, so a test that
//! meets a server that stopped answering fails instead of hanging. The server is killed and its
//! directory removed when the [`Server`] drops (the directory is kept, and its path printed,
//! when the test panicked, so the server's error log can be read).

// Each test file compiles this module on its own and uses a different part of it.
#![allow(dead_code)]

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for one read of a socket.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a whole response.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);
/// Longest wait for the server to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The file every test root has; `GET /` answers it.
pub const INDEX_HTML: &[u8] = b"<!DOCTYPE html>\n<title>weft test</title>\n<p>index</p>\n";
/// A file outside the document root that no request may ever read.
pub const SECRET: &[u8] = b"TOP-SECRET-7f3a9c1e: this file lies outside the document root\n";

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, unique to this process and call.
pub fn unique_dir(name: &str) -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("weft-test-{}-{name}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// How to start a server.
#[derive(Debug)]
pub struct Builder {
    dir: PathBuf,
    config: Option<String>,
    args: Vec<String>,
    /// RLIMIT_NOFILE (soft and hard) for the server process.
    nofile: Option<u64>,
    /// Mount `/echo` (`--echo /echo`): test roots are not the sample site, where it is the
    /// default. Off when the test's config has an `[echo]` section, or with `no_echo`.
    echo: bool,
    /// Pass `--listen 127.0.0.1:0=MODEL` (off: the test's config has its own `[[listen]]`,
    /// on 127.0.0.1 port 0, with the binary's model).
    listen: bool,
}

impl Builder {
    /// A server with its own directory: `root/` (with `index.html`) is the document root,
    /// `secret.txt` lies beside it, outside the root.
    pub fn new(name: &str) -> Builder {
        let dir = unique_dir(name);
        fs::create_dir(dir.join("root")).expect("create root");
        fs::write(dir.join("root/index.html"), INDEX_HTML).expect("write index");
        fs::write(dir.join("secret.txt"), SECRET).expect("write secret");
        Builder {
            dir,
            config: None,
            args: Vec::new(),
            nofile: None,
            echo: true,
            listen: true,
        }
    }

    /// Starts the server with the listener of its config (which must listen on 127.0.0.1,
    /// port 0, with [`model_name`]) instead of `--listen`.
    pub fn listen_from_config(mut self) -> Builder {
        self.listen = false;
        self
    }

    /// Starts the server without `--echo /echo` (the default a user's root gets).
    pub fn no_echo(mut self) -> Builder {
        self.echo = false;
        self
    }

    /// The test directory (the root is `dir()/root`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `contents` at `rel` under the document root, creating directories.
    pub fn file(self, rel: &str, contents: &[u8]) -> Builder {
        let p = self.dir.join("root").join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create parent");
        }
        fs::write(p, contents).expect("write file");
        self
    }

    /// Creates an empty directory `rel` under the document root.
    pub fn mkdir(self, rel: &str) -> Builder {
        fs::create_dir_all(self.dir.join("root").join(rel)).expect("mkdir");
        self
    }

    /// Creates a symlink `rel` under the root pointing at `target` (taken as is).
    pub fn symlink(self, rel: &str, target: impl AsRef<Path>) -> Builder {
        std::os::unix::fs::symlink(target, self.dir.join("root").join(rel)).expect("symlink");
        self
    }

    /// Uses `toml` as the configuration file (`--root` and `--listen` still come from the
    /// command line).
    pub fn config(mut self, toml: &str) -> Builder {
        self.config = Some(toml.to_string());
        self
    }

    /// Starts the server with at most `n` open descriptors (soft and hard limit, so the
    /// server cannot raise it).
    pub fn nofile(mut self, n: u64) -> Builder {
        self.nofile = Some(n);
        self
    }

    /// Adds command-line arguments after `serve`.
    pub fn args(mut self, args: &[&str]) -> Builder {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Starts the server and waits until it prints its address.
    pub fn start(self) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
        cmd.arg("serve");
        if self.listen {
            cmd.arg("--listen")
                .arg(format!("127.0.0.1:0={}", model_name()));
        }
        cmd.arg("--root")
            .arg(self.dir.join("root"))
            .args(crate::MODEL.split_ascii_whitespace().skip(1));
        if let Some(cfg) = &self.config {
            let path = self.dir.join("weft.toml");
            fs::write(&path, cfg).expect("write config");
            cmd.arg("--config").arg(path);
        }
        let configures_echo = self.config.as_deref().is_some_and(|c| c.contains("[echo]"))
            || self.args.iter().any(|a| a == "--echo");
        if self.echo && !configures_echo {
            cmd.args(["--echo", "/echo"]);
        }
        cmd.args(&self.args);
        let log = fs::File::create(self.dir.join("server.log")).expect("create server log");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .env("WEFT_LOG", "debug");
        if let Some(n) = self.nofile {
            use std::os::unix::process::CommandExt;
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: runs in the forked child before exec; setrlimit is async-signal-safe and
            // reads only `lim`, a plain value copied into the closure.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn weft");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        // The reader thread keeps draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = parse_serving_line(&line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                panic!("weft did not print its address; its log:\n{log}");
            }
        };
        Server {
            child: Some(child),
            addr,
            dir: self.dir,
        }
    }
}

/// The model of this test binary's servers: the first word of `crate::MODEL` (the words after
/// it are options every server of the binary gets, e.g. `"fiber --cache off"`).
pub fn model_name() -> &'static str {
    crate::MODEL.split_ascii_whitespace().next().unwrap_or("")
}

/// `weft: serving <root> on http://127.0.0.1:PORT/ (model: thread)` → the address.
fn parse_serving_line(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("weft: serving ")?;
    let url = &rest[rest.rfind(" on http://")? + " on http://".len()..];
    let hostport = &url[..url.find('/')?];
    hostport.parse().ok()
}

/// A running `weft` process, killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Server {
    /// Starts a server with the default configuration and the standard root.
    pub fn start(name: &str) -> Server {
        Builder::new(name).start()
    }

    /// The test directory; the document root is `dir().join("root")`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// A new connection to the server.
    pub fn connect(&self) -> Conn {
        Conn::connect(self.addr)
    }

    /// Sends `raw` on a new connection and reads one response (for a request other than HEAD).
    pub fn send(&self, raw: &[u8]) -> Response {
        let mut c = self.connect();
        c.send(raw);
        c.read_response()
            .unwrap_or_else(|e| panic!("no response to {:?}: {e:?}", String::from_utf8_lossy(raw)))
    }

    /// `GET path` with `Connection: close` on a new connection.
    pub fn get(&self, path: &str) -> Response {
        self.send(
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    }

    /// Asserts the server still answers a fresh client: `GET /` gives 200 and the index.
    #[track_caller]
    pub fn assert_alive(&self) {
        let r = self.get("/");
        assert_eq!(r.status, 200, "server no longer serves GET /: {r:?}");
        assert_eq!(r.body, INDEX_HTML);
    }

    /// Sends `sig` to the server.
    pub fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits");
        // SAFETY: kill takes no pointers; `pid` is our own child, which we have not reaped.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill: {}", io::Error::last_os_error());
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut().expect("running");
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's error log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "test failed; the server's files and error log are kept in {}",
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// One parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was framed by the connection closing (no Content-Length, not chunked).
    pub until_close: bool,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many fields named `name` there are.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// True if the response says the connection closes after it.
    pub fn closes(&self) -> bool {
        self.header("Connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Why no response could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The server closed (or reset) the connection before sending any byte of a response.
    Closed,
    /// No complete response before the deadline; the bytes received so far.
    Timeout(Vec<u8>),
    /// The connection ended in the middle of a response; the bytes received so far.
    Truncated(Vec<u8>),
    /// Bytes that are not an HTTP/1.x response.
    Malformed(String),
    /// Another socket error.
    Io(io::Error),
}

/// A client connection that reads responses with correct framing.
#[derive(Debug)]
pub struct Conn {
    pub stream: TcpStream,
    /// Received bytes not yet consumed by a response.
    buf: Vec<u8>,
    eof: bool,
}

impl Conn {
    /// Connects to `addr` with read and write timeouts set.
    pub fn connect(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Conn::from_stream(stream)
    }

    /// Wraps an already connected stream, with read and write timeouts set.
    pub fn from_stream(stream: TcpStream) -> Conn {
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
            eof: false,
        }
    }

    /// Writes all of `bytes`; panics on failure.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Writes all of `bytes`; an error (the server already closed) is returned, not fatal.
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Half-closes: the server reads end-of-file after what was sent.
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Reads one response to a request other than HEAD.
    pub fn read_response(&mut self) -> Result<Response, ReadError> {
        self.read_response_for(false)
    }

    /// Reads one response to a HEAD request (no body whatever the headers say).
    pub fn read_head_response(&mut self) -> Result<Response, ReadError> {
        self.read_response_for(true)
    }

    /// Reads one response; `head` if it answers a HEAD request. A 1xx interim response is
    /// returned like any other (read again for the final one).
    pub fn read_response_for(&mut self, head: bool) -> Result<Response, ReadError> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if self.eof {
                return Err(if self.buf.is_empty() {
                    ReadError::Closed
                } else {
                    ReadError::Truncated(std::mem::take(&mut self.buf))
                });
            }
            self.fill(deadline)?;
        };
        let head_text = String::from_utf8(self.buf[..head_end - 4].to_vec())
            .map_err(|_| ReadError::Malformed("response head is not UTF-8".into()))?;
        let mut lines = head_text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status: u16 = parts
            .next()
            .and_then(|s| (s.len() == 3).then_some(s))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ReadError::Malformed(format!("status line {status_line:?}")))?;
        if !version.starts_with("HTTP/1.") {
            return Err(ReadError::Malformed(format!("status line {status_line:?}")));
        }
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for line in lines {
            let (n, v) = line
                .split_once(':')
                .ok_or_else(|| ReadError::Malformed(format!("header line {line:?}")))?;
            if n.is_empty() || n.contains([' ', '\t']) {
                return Err(ReadError::Malformed(format!("header name in {line:?}")));
            }
            headers.push((n.to_string(), v.trim().to_string()));
        }
        self.buf.drain(..head_end);
        let mut resp = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            until_close: false,
        };
        if head || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        let chunked = resp
            .header("Transfer-Encoding")
            .is_some_and(|te| te.to_ascii_lowercase().trim().ends_with("chunked"));
        if chunked {
            resp.body = self.read_chunked(deadline)?;
        } else if let Some(cl) = resp.header("Content-Length") {
            let n: usize = cl
                .parse()
                .map_err(|_| ReadError::Malformed(format!("Content-Length {cl:?}")))?;
            while self.buf.len() < n {
                if self.eof {
                    return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
                }
                self.fill(deadline)?;
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            while !self.eof {
                self.fill(deadline)?;
            }
            resp.body = std::mem::take(&mut self.buf);
            resp.until_close = true;
        }
        Ok(resp)
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        loop {
            let line_end = self.read_line(deadline)?;
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            self.buf.drain(..line_end + 2);
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| ReadError::Malformed(format!("chunk size line {line:?}")))?;
            if size == 0 {
                // Trailer fields, then the empty line.
                loop {
                    let end = self.read_line(deadline)?;
                    self.buf.drain(..end + 2);
                    if end == 0 {
                        return Ok(body);
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if self.eof {
                    return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
                }
                self.fill(deadline)?;
            }
            body.extend_from_slice(&self.buf[..size]);
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(ReadError::Malformed(
                    "chunk data not followed by CRLF".into(),
                ));
            }
            self.buf.drain(..size + 2);
        }
    }

    /// Offset of the next CRLF in the buffer, reading until there is one.
    fn read_line(&mut self, deadline: Instant) -> Result<usize, ReadError> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                return Ok(i);
            }
            if self.eof {
                return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
            }
            self.fill(deadline)?;
        }
    }

    /// Reads more bytes into the buffer (sets `eof` at end of stream or on a reset).
    fn fill(&mut self, deadline: Instant) -> Result<(), ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Timeout(self.buf.clone()));
        }
        self.stream
            .set_read_timeout(Some(left.min(READ_TIMEOUT)))
            .map_err(ReadError::Io)?;
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => self.eof = true,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadError::Timeout(self.buf.clone()))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                self.eof = true
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
        Ok(())
    }

    /// Waits up to `timeout` for the server to close the connection; true if it did, without
    /// sending anything more. Panics if bytes arrive.
    #[track_caller]
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes before close: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let deadline = Instant::now() + timeout;
        while !self.eof {
            match self.fill(deadline) {
                Ok(()) => {}
                Err(ReadError::Timeout(_)) => return false,
                Err(e) => panic!("waiting for close: {e:?}"),
            }
            assert!(
                self.buf.is_empty(),
                "unexpected bytes instead of close: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
        true
    }

    /// Reads responses until the server closes the connection (or a read fails); returns
    /// them and how reading ended (`None`: a clean close).
    pub fn read_all_responses(&mut self) -> (Vec<Response>, Option<ReadError>) {
        let mut out = Vec::new();
        loop {
            match self.read_response() {
                Ok(r) => out.push(r),
                Err(ReadError::Closed) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// True if nothing is buffered and the connection has ended.
    pub fn at_eof(&self) -> bool {
        self.eof && self.buf.is_empty()
    }
}

/// Offset of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Encodes `body` as one chunk per `piece` bytes plus the last chunk.
pub fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(piece.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// Every process on the machine as `/proc/*/stat` shows it: (pid, parent pid, state).
pub fn processes() -> Vec<(u32, u32, char)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: the fields after it follow the
        // last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if let Some(ppid) = f.next().and_then(|p| p.parse().ok()) {
            out.push((pid, ppid, state));
        }
    }
    out
}

/// Every process below `root` (pid → state), from `/proc/*/stat`.
pub fn descendants(root: u32) -> std::collections::HashMap<u32, String> {
    let parent: std::collections::HashMap<u32, (u32, char)> = processes()
        .into_iter()
        .map(|(pid, ppid, state)| (pid, (ppid, state)))
        .collect();
    let mut out = std::collections::HashMap::new();
    for (&pid, &(_, state)) in &parent {
        let mut p = pid;
        while let Some((pp, _)) = parent.get(&p) {
            if *pp == root {
                out.insert(pid, state.to_string());
                break;
            }
            p = *pp;
        }
    }
    out
}

/// Counts with `switches` over windows of `window` until one sees none or `within` has passed;
/// the count of each window tried (the last one 0 if a quiet window came). A server that
/// wakes on a timer shorter than the window never has a quiet one; one that sleeps has one
/// once what the test did has settled.
pub fn quiet_window(
    switches: impl Fn() -> u64,
    window: std::time::Duration,
    within: std::time::Duration,
) -> Vec<u64> {
    let end = std::time::Instant::now() + within;
    let mut windows = Vec::new();
    while std::time::Instant::now() < end && windows.last() != Some(&0) {
        let before = switches();
        std::thread::sleep(window);
        // Fewer than before: a thread or process ended in the window, so it was not quiet.
        windows.push(switches().checked_sub(before).unwrap_or(1));
    }
    windows
}

/// Context switches so far of every thread of process `pid` (0 once it is gone: a process or
/// thread that just ended counts nothing).
pub fn thread_switches(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .sum()
}
