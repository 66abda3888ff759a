//! Configuration: every timeout and limit has a name, an nginx-like default and a TOML key.
//! The command line overrides the file; `weft serve` with neither serves `www/` on
//! 127.0.0.1:8080 with the default model.
//!
//! ```toml
//! root = "www"
//! threads = 2                 # fiber workers (default: one per core)
//! access_log = "off"          # "off", "stdout" or a file path
//! real_ip_from = []           # trusted proxies (CIDRs) whose X-Forwarded-For names the client
//! # user = "www-data"         # started as root: serve as this user once bound (NAME[:GROUP])
//! allow_root = false          # started as root without `user`: serve as root anyway
//!
//! [[listen]]
//! addr = "127.0.0.1:8080"
//! model = "fiber"             # or "thread", "process", "pipeline"
//! # name = "http"             # take the socket systemd hands over under this name
//! proxy_protocol = false      # every connection starts with a PROXY v1/v2 header
//! tls = false                 # HTTPS (nginx listen 443 ssl); certificates in [tls]
//! redirect_https = false      # every request gets a 308 to the same URL over https
//!
//! [timeouts]                  # "60s", "500ms", "2m" or a number of seconds
//! header_read = "60s"         # nginx client_header_timeout
//! body_read = "60s"           # nginx client_body_timeout
//! keepalive = "75s"           # nginx keepalive_timeout
//! send = "60s"                # nginx send_timeout
//! shutdown_grace = "10s"
//! header_min_rate = 500       # bytes/s a head must average after min_rate_grace; 408 (0: off)
//! body_min_rate = 500         # bytes/s a body must average after min_rate_grace; 408 (0: off)
//! min_rate_grace = "20s"      # Apache RequestReadTimeout header=20-60,MinRate=500
//! tls_handshake = "10s"       # a TLS handshake from its first byte
//!
//! [limits]                    # sizes in bytes, or "64k", "1m", "1g"
//! max_connections = 10000
//! max_request_line = 8192     # 414 past it
//! max_head_bytes = 32768      # 431 past it
//! max_headers = 100           # 431 past it
//! max_body = 1048576          # 413 past it (nginx client_max_body_size 1m)
//! max_chunk_line = 1024       # chunk-size line with extensions; 400 past it
//! max_trailer_bytes = 8192    # chunked trailer section; 400 past it
//! client_body_buffer = 16384  # bodies up to this are read whole before a process-model
//!                             # child or pipeline process thread is given (nginx
//!                             # client_body_buffer_size)
//! conn_per_ip = 0             # open connections per client address, 0: no limit; 503 past it
//! client_zone = 65536         # slots of the per-client table (conn_per_ip, rate_limit)
//!
//! [rate_limit]                # requests per client address (nginx limit_req ... nodelay)
//! rate = "off"                # e.g. "100r/s" or "30r/m"; 429 with Retry-After past it
//! burst = 0                   # requests over the rate let through at once
//!
//! [static_files]
//! enabled = true
//! index = "index.html"
//! dotfiles = false
//! symlinks_outside_root = false
//! autoindex = false
//! charset = "utf-8"           # on text types' Content-Type; "" for none
//!
//! [echo]
//! path = "/echo"              # "" unmounts it; not set: /echo on the sample site (www/) only
//!
//! [health]
//! path = ""                   # e.g. "/healthz": 200 ok while serving, 503 once draining
//! log = false                 # its requests in the access log
//!
//! [fiber]
//! stack_size = 65536          # bytes per connection fiber
//! park_idle = true            # idle keep-alive connections hold no fiber
//! linger = "100ms"            # ...once quiet this long (a busy one keeps its fiber)
//! linger_max = 64             # fibers lingering per worker at most; others park at once
//! accept = "reuseport"        # or "dispatch": one acceptor fiber feeding all workers
//!
//! [cache]                     # response cache of static files
//! enabled = true
//! max_bytes = 67108864        # all entries together
//! max_object_bytes = 4194304  # larger files are sent from disk with sendfile
//! revalidate = "1s"           # a changed file is served stale at most this long
//!
//! [process]
//! max_children = 256          # live connection processes per process listener (idle
//!                             # connections wait in the master and hold none)
//!
//! [pipeline]                  # the pipeline model
//! threads_total = 16          # M: all stages together
//! accept = 1                  # initial threads per stage (default: 1, 1, and a quarter
//! receive = 1                 #   of threads_total for process and send, at most 4 each)
//! process = 4
//! send = 4
//! queue = 1024                # capacity of each stage's queue
//! period = "250ms"            # load monitor and controller period
//! controller = true           # false: keep the initial allocation
//! c1 = 1.5e-5                 # U = c1*W + c2*R (W requests/s, R bytes/s); `weft calibrate`
//! c2 = 1.5e-10
//! min_idle_cpu = 0.1          # grow a stage only with this much CPU idle
//!
//! [status]
//! enabled = false
//! allow = ["127.0.0.0/8", "::1/128"]
//!
//! [cgi]                       # CGI/1.1 scripts; off unless `dir` or `extensions` is set
//! dir = "cgi-bin"             # the scripts' directory
//! prefix = "/cgi-bin/"        # the URL path they are mounted at
//! timeout = "60s"             # a script still running after this is killed: 504
//! extensions = []             # e.g. [".cgi"]: executable files with it under the root are scripts
//!
//! [[proxy]]                   # reverse proxy (see handlers/proxy.rs); may repeat
//! prefix = "/api/"            # requests whose path starts with this go upstream
//! upstream = "http://127.0.0.1:9000"
//! fallback = false            # true: also everything that is not a file (static 404s and
//!                             # methods other than GET/HEAD); at most one entry
//! host = "client"             # Host sent upstream: the client's, or "upstream" (its authority)
//! connect_timeout = "5s"      # nginx proxy_connect_timeout; past it 504
//! read_timeout = "60s"        # nginx proxy_read_timeout, between two reads (and writes); 504
//! idle_timeout = "30s"        # an idle pooled upstream connection older than this is closed
//! max_idle = 32               # idle keep-alive connections kept per upstream
//! request_buffering = true    # nginx proxy_request_buffering: the whole body (at most
//!                             # limits.max_body) is read before anything goes upstream
//!
//! [tls]                       # HTTPS listeners: [[listen]] tls = true (see crate::tls)
//! cert = "cert.pem"           # nginx ssl_certificate (PEM chain, leaf first)
//! key = "key.pem"             # nginx ssl_certificate_key (PKCS#8, RSA or EC)
//! # ocsp = "cert.ocsp"        # nginx ssl_stapling_file (DER OCSP response)
//! hsts = ""                   # e.g. "max-age=63072000": Strict-Transport-Security
//! session_tickets = true      # nginx ssl_session_tickets
//! session_cache = 4096        # server-side sessions kept (0: none)
//!
//! [[tls.sni]]                 # more certificates, chosen by the name the client sends
//! names = ["example.org", "*.example.org"]
//! cert = "org.pem"
//! key = "org.key"
//! # ocsp = "org.ocsp"
//!
//! [timing]                    # where a request's time goes (off: no clock reads)
//! phases = false              # per-phase histograms in the status JSON and metrics
//! server_timing = false       # a Server-Timing header with the request's phases
//!
//! [compression]               # content codings (see compress.rs)
//! enabled = false
//! encodings = ["br", "zstd", "gzip"]  # in order of preference on a q-value tie
//! types = ["text/*", "application/javascript", "application/x-javascript", "application/json",
//!          "application/ld+json", "application/manifest+json", "application/xml",
//!          "application/rss+xml", "application/atom+xml", "application/xhtml+xml",
//!          "application/wasm", "image/svg+xml", "image/x-icon", "font/ttf", "font/otf"]
//! min_length = 256            # smaller bodies are not compressed on the fly (nginx gzip_min_length)
//! precompressed = false       # serve file.br / file.zst / file.gz beside file (nginx gzip_static)
//! dynamic = true              # CGI and proxied responses too (nginx gzip_proxied any)
//! gzip_level = 6              # 1-9
//! brotli_level = 6            # 0-11
//! zstd_level = 3              # 1-19
//!
//! # [[site]]                  # virtual hosts and their locations: see sites.rs, README "Sites"
//! ```

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A concurrency model: who runs which piece of a request's work, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// Every connection a stackful fiber, M:N on one worker thread per core.
    Fiber,
    /// One OS thread per connection, blocking I/O (the fibers paper's baseline).
    Thread,
    /// One forked process per connection (the threads-vs-processes paper).
    Process,
    /// Four stages (accept, receive, process, send), each a thread pool with a bounded queue,
    /// and a controller that moves threads between them (the pipeline paper).
    Pipeline,
}

impl Model {
    /// The model `weft serve` uses when none is named.
    pub const DEFAULT: Model = Model::Fiber;

    /// The model's name as written in `--listen ADDR=MODEL` and the config.
    pub fn name(self) -> &'static str {
        match self {
            Model::Fiber => "fiber",
            Model::Thread => "thread",
            Model::Process => "process",
            Model::Pipeline => "pipeline",
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Model, String> {
        match s {
            "fiber" => Ok(Model::Fiber),
            "thread" => Ok(Model::Thread),
            "process" => Ok(Model::Process),
            "pipeline" => Ok(Model::Pipeline),
            _ => Err(format!(
                "unknown model `{s}` (expected fiber, thread, process or pipeline)"
            )),
        }
    }
}

impl Serialize for Model {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Model {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Model, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One listening address and the model that serves it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// `IP:PORT`, `[IPv6]:PORT` (IPv6 only, as nginx's `ipv6only=on`), `:PORT` or `PORT` (every
    /// IPv4 address, as nginx's `listen PORT`), or `localhost:PORT` (127.0.0.1).
    #[serde(deserialize_with = "de_listen_addr")]
    pub addr: SocketAddr,
    #[serde(default = "default_model")]
    pub model: Model,
    /// Takes a socket handed over under this name (systemd's `FileDescriptorName=`), whatever
    /// its address; unnamed, a handed-over socket is matched by address.
    #[serde(default)]
    pub name: Option<String>,
    /// Each connection starts with a PROXY protocol header (v1 or v2, from a load balancer
    /// such as HAProxy or AWS NLB) giving the client's address; one without is closed.
    #[serde(default)]
    pub proxy_protocol: bool,
    /// HTTPS: connections start with a TLS handshake (`[tls]` has the certificates; nginx
    /// `listen 443 ssl`).
    #[serde(default)]
    pub tls: bool,
    /// Answer every plain-HTTP request with a 308 to the same URL over https (nginx
    /// `return 308 https://$host$request_uri`).
    #[serde(default)]
    pub redirect_https: bool,
}

fn default_model() -> Model {
    Model::DEFAULT
}

impl FromStr for Listen {
    type Err = String;
    /// `ADDR` or `ADDR=MODEL`.
    fn from_str(s: &str) -> Result<Listen, String> {
        let (addr, model) = match s.split_once('=') {
            Some((a, m)) => (a, m.parse()?),
            None => (s, Model::DEFAULT),
        };
        let addr = parse_listen_addr(addr)?;
        Ok(Listen {
            addr,
            model,
            name: None,
            proxy_protocol: false,
            tls: false,
            redirect_https: false,
        })
    }
}

/// Parses a listening address: `IP:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (0.0.0.0), or
/// `localhost:PORT` (127.0.0.1; one address per listener, so not ::1 as well).
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "bad listen address `{s}`: expected IP:PORT, [IPv6]:PORT, :PORT, PORT or localhost:PORT"
        )
    };
    let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
    if let Some(p) = s.strip_prefix(':') {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port(p)?)));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port(s)?)));
    }
    if let Some(p) = s.strip_prefix("localhost:") {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port(p)?)));
    }
    s.parse().map_err(|_| bad())
}

fn de_listen_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    parse_listen_addr(&text).map_err(serde::de::Error::custom)
}

fn de_threads<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    const THREADS: &str = "a number of worker threads >= 1";
    match scalar(d, THREADS)? {
        Scalar::Int(n) if n >= 1 => usize::try_from(n).map(Some).map_err(|_| wrong(THREADS, n)),
        other => Err(wrong(THREADS, other)),
    }
}

/// Timeouts, each named after its nginx counterpart.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Whole request head, from its first byte (nginx `client_header_timeout`, 60 s); 408.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub header_read: Duration,
    /// Between two reads of a request body (nginx `client_body_timeout`, 60 s); 408.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub body_read: Duration,
    /// Idle keep-alive connection waiting for its next request (nginx `keepalive_timeout`, 75 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub keepalive: Duration,
    /// Between two writes to a client that stopped reading (nginx `send_timeout`, 60 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub send: Duration,
    /// How long SIGTERM waits for in-flight requests before exiting.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub shutdown_grace: Duration,
    /// Least average rate of a request head, in bytes/s, after `min_rate_grace` (Apache
    /// mod_reqtimeout `header=20-40,MinRate=500`); 408 below it; 0: off. See `minrate.rs`.
    pub header_min_rate: u64,
    /// Least average rate of a request body, in bytes/s, after `min_rate_grace` (mod_reqtimeout
    /// `body=20,MinRate=500`); 408 below it; 0: off.
    pub body_min_rate: u64,
    /// The time a head or body has before the minimum rates apply; every byte adds
    /// `1/rate` seconds to it (mod_reqtimeout's initial timeout, 20 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub min_rate_grace: Duration,
    /// A TLS handshake from the first byte to its end (10 s; nginx bounds it with
    /// `client_header_timeout`, Caddy `read_timeout`); past it the connection closes.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub tls_handshake: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_read: Duration::from_secs(60),
            body_read: Duration::from_secs(60),
            keepalive: Duration::from_secs(75),
            send: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            // mod_reqtimeout's defaults: 500 bytes/s is 4 kbit/s, below any real client's
            // link (a GPRS phone sends ten times that), far above a slowloris's byte every few
            // seconds; 20 s covers a client's start (TCP slow start, a TLS handshake ahead).
            header_min_rate: 500,
            body_min_rate: 500,
            min_rate_grace: Duration::from_secs(20),
            tls_handshake: Duration::from_secs(10),
        }
    }
}

/// Limits on connections and request sizes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Open connections per listener; past it the listener stops accepting until one closes.
    pub max_connections: usize,
    /// Longest request line (414).
    #[serde(deserialize_with = "de_size")]
    pub max_request_line: usize,
    /// Largest request head (431).
    #[serde(deserialize_with = "de_size")]
    pub max_head_bytes: usize,
    /// Most header fields (431).
    pub max_headers: usize,
    /// Largest request body (413).
    #[serde(deserialize_with = "de_size")]
    pub max_body: u64,
    /// Longest chunk-size line with extensions (400).
    #[serde(deserialize_with = "de_size")]
    pub max_chunk_line: usize,
    /// Largest chunked trailer section (400).
    #[serde(deserialize_with = "de_size")]
    pub max_trailer_bytes: usize,
    /// Request bodies up to this size are read whole before the process model's master gives
    /// the request a child, or the pipeline's receive stage a process thread (nginx
    /// `client_body_buffer_size`, 16k): a slow body holds neither (issue 24).
    #[serde(deserialize_with = "de_size")]
    pub client_body_buffer: usize,
    /// Open connections per client address (nginx `limit_conn`); past it 503 and close.
    /// 0 (default): no limit. See `limits_ip`.
    pub conn_per_ip: usize,
    /// Slots of the per-client table behind `conn_per_ip` and `[rate_limit]` (nginx's zone
    /// size); a fixed amount of memory, 16 bytes a slot, however many addresses appear.
    pub client_zone: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let h = weft_http::Limits::default();
        LimitsConfig {
            max_connections: 10_000,
            max_request_line: h.max_request_line,
            max_head_bytes: h.max_head_bytes,
            max_headers: h.max_headers,
            max_body: 1024 * 1024,
            max_chunk_line: h.max_chunk_line,
            max_trailer_bytes: h.max_trailer_bytes,
            client_body_buffer: 16 * 1024,
            conn_per_ip: 0,
            client_zone: crate::limits_ip::DEFAULT_ZONE,
        }
    }
}

impl LimitsConfig {
    /// The parser's share of the limits.
    pub fn http(&self) -> weft_http::Limits {
        weft_http::Limits {
            max_request_line: self.max_request_line,
            max_head_bytes: self.max_head_bytes,
            max_headers: self.max_headers,
            max_chunk_line: self.max_chunk_line,
            max_trailer_bytes: self.max_trailer_bytes,
        }
    }
}

/// The static-file handler.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StaticConfig {
    /// Serve files from the root at all.
    pub enabled: bool,
    /// File served for a directory.
    pub index: String,
    /// Serve names starting with `.` (refused with 403 by default).
    pub dotfiles: bool,
    /// Follow symlinks that point outside the root (refused with 403 by default).
    pub symlinks_outside_root: bool,
    /// List a directory without an index file (403 by default).
    pub autoindex: bool,
    /// The charset text types are declared with (nginx `charset`; see
    /// `static_files::with_charset` for the types): `"utf-8"` (the default) or `""` (none).
    /// weft does not read files to guess: a site in another encoding sets `""`.
    pub charset: String,
}

impl Default for StaticConfig {
    fn default() -> Self {
        StaticConfig {
            enabled: true,
            index: "index.html".into(),
            dotfiles: false,
            symlinks_outside_root: false,
            autoindex: false,
            charset: "utf-8".into(),
        }
    }
}

/// The fiber model's runtime.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FiberConfig {
    /// Usable stack bytes per connection fiber (pages are touched lazily). The built-in
    /// handlers need far less than the default (see BENCHMARKS.md); handlers that recurse
    /// deeply or keep large buffers on the stack need more. An overflow aborts the process
    /// with a message naming the fiber, never corrupts memory.
    #[serde(deserialize_with = "de_size")]
    pub stack_size: usize,
    /// Between requests, hold a keep-alive connection in the reactor as its socket and a few
    /// hundred bytes, without a fiber or buffers; it gets a pooled fiber when bytes arrive.
    /// `false`: the connection's fiber stays parked in its read.
    pub park_idle: bool,
    /// With `park_idle`: how long a connection's fiber waits for the next request before
    /// the connection is parked without it (at most half the keep-alive timeout). A busy
    /// connection keeps its fiber and buffers from one request to the next; one quiet for
    /// this long gives them back. `"0s"` parks at once.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub linger: Duration,
    /// Most fibers lingering at once per worker; an idle connection beyond them is parked
    /// without a fiber at once. A lingering fiber keeps its stack, which its connection's next
    /// request finds warm only while few connections share the core; with many busy ones a
    /// woken connection runs on the one warm stack the previous gave back instead (fewer
    /// cache misses per request: BENCHMARKS.md, "How many fibers linger").
    pub linger_max: usize,
    /// How connections reach the workers.
    pub accept: AcceptMode,
}

impl Default for FiberConfig {
    fn default() -> Self {
        FiberConfig {
            stack_size: weft_fiber::DEFAULT_STACK_SIZE,
            park_idle: true,
            linger: Duration::from_millis(100),
            linger_max: 64,
            accept: AcceptMode::Reuseport,
        }
    }
}

/// How the fiber model accepts (both measured in BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AcceptMode {
    /// Each worker accepts on its own `SO_REUSEPORT` socket; the kernel spreads connections
    /// and a connection stays on the worker that accepted it.
    Reuseport,
    /// One acceptor fiber on worker 0 hands connections to the workers in turn.
    Dispatch,
}

/// The built-in echo function of the fibers paper.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EchoConfig {
    /// Where it is mounted; empty unmounts it. Not set: at [`DEFAULT_ECHO_PATH`] on the
    /// repository's sample site only (a root with the marker file of `fileset::is_sample_site`),
    /// so a user's site does not answer arbitrary bytes from its origin unless asked to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where the echo function is mounted on the sample site.
pub const DEFAULT_ECHO_PATH: &str = "/echo";

impl EchoConfig {
    /// The path echo is mounted at for document root `root`; `None`: not mounted.
    pub fn mount_path(&self, root: &std::path::Path) -> Option<&str> {
        match self.path.as_deref() {
            Some("") => None,
            Some(p) => Some(p),
            None => crate::fileset::is_sample_site(root).then_some(DEFAULT_ECHO_PATH),
        }
    }
}

/// The health check for load balancers and orchestrators (see `handlers/health.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Where it is mounted (e.g. `"/healthz"`); empty (the default): not mounted.
    pub path: String,
    /// Write its requests to the access log (off: probes every few seconds would bury the
    /// requests that matter).
    pub log: bool,
}

/// The response cache of static files (see `cache.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Keep whole responses of small files in memory.
    pub enabled: bool,
    /// Bytes all entries may take together (bodies, heads and keys).
    #[serde(deserialize_with = "de_size")]
    pub max_bytes: u64,
    /// Files larger than this are never cached (they go out with `sendfile`).
    #[serde(deserialize_with = "de_size")]
    pub max_object_bytes: u64,
    /// An entry older than this is checked against the file (inode, size, mtime, ctime)
    /// before it is served again: a changed file is served stale at most this long.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub revalidate: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            max_bytes: 64 * 1024 * 1024,
            max_object_bytes: 4 * 1024 * 1024,
            revalidate: Duration::from_secs(1),
        }
    }
}

/// The `process` model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessConfig {
    /// Live connection processes per process listener (Apache `MaxRequestWorkers`, default
    /// 256): children serving a request, or lingering for the next one while fewer than
    /// three quarters of them are live. Idle and half-sent connections are held by the
    /// master and count only against `limits.max_connections`; a whole request head that
    /// finds no child free waits in the master until one exits.
    pub max_children: usize,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig { max_children: 256 }
    }
}

/// CGI/1.1 scripts (RFC 3875, see `handlers/cgi.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CgiConfig {
    /// The directory the scripts live in; `None` (the default) turns CGI off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The URL path prefix the directory is mounted at (starts and ends with `/`).
    pub prefix: String,
    /// How long a script may run, from its start to the end of its output (nginx
    /// `fastcgi_read_timeout` is 60s); past it the script's process group is killed and the
    /// client gets 504 (or, once the response has begun, a closed connection).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// File name endings (e.g. `[".cgi"]`) that make an executable file anywhere under the
    /// document root a CGI script (Apache's `AddHandler cgi-script .cgi`); empty: off.
    pub extensions: Vec<String>,
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig {
            dir: None,
            prefix: "/cgi-bin/".into(),
            timeout: Duration::from_secs(60),
            extensions: Vec::new(),
        }
    }
}

/// The `pipeline` model: its stages' threads, queues and controller.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(from = "PipelineToml")]
pub struct PipelineConfig {
    /// Most threads of all four stages together (the paper's M). Every stage starts this many
    /// threads at once and parks those it is not allotted; none are created later.
    pub threads_total: usize,
    /// Threads the accept stage starts with (and returns to when the load falls).
    pub accept: usize,
    /// Threads the receive stage starts with.
    pub receive: usize,
    /// Threads the process stage starts with.
    pub process: usize,
    /// Threads the send stage starts with.
    pub send: usize,
    /// Capacity of each stage's task queue; a full queue makes the stage before it wait.
    pub queue: usize,
    /// How often the load monitor samples and the controller decides.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub period: Duration,
    /// Move threads between stages; `false` keeps the initial allocation.
    pub controller: bool,
    /// Seconds of server capacity one request costs, independent of its size (U = c1*W + c2*R).
    pub c1: f64,
    /// Seconds of server capacity one response byte costs.
    pub c2: f64,
    /// The controller grows a stage only while at least this fraction of the CPU it may run on
    /// is idle (0 disables the check): with the CPU saturated, more threads only contend.
    pub min_idle_cpu: f64,
}

impl Eq for PipelineConfig {}

impl Default for PipelineConfig {
    fn default() -> Self {
        let threads_total = 16;
        let [accept, receive, process, send] = PipelineConfig::default_initial(threads_total);
        PipelineConfig {
            threads_total,
            accept,
            receive,
            process,
            send,
            queue: 1024,
            period: Duration::from_millis(250),
            controller: true,
            // `weft calibrate` on the 2-core development machine (pipeline model, 1k to 1m
            // files, clients on the same machine; R^2 0.76): about 65,000 small responses/s
            // or 6.5 GB/s of large ones fill it. Run it on yours.
            c1: 1.5e-5,
            c2: 1.5e-10,
            min_idle_cpu: 0.1,
        }
    }
}

/// One reverse-proxy mount (see `handlers/proxy.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Requests whose path starts with this (and still does once normalised) are forwarded;
    /// empty for a fallback-only entry.
    pub prefix: String,
    /// `http://HOST[:PORT]`, resolved once at start.
    pub upstream: String,
    /// Also forward everything that is not a file: requests the static files answer 404, and
    /// methods other than GET and HEAD that no route took (as the pipeline paper hands
    /// dynamic requests to a server behind it). At most one entry may set it.
    pub fallback: bool,
    /// The `Host` sent upstream.
    pub host: ProxyHost,
    /// Longest wait for the TCP handshake with the upstream (nginx `proxy_connect_timeout`,
    /// 60 s there; 5 s here); past it, 504.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub connect_timeout: Duration,
    /// Longest wait between two reads from the upstream, and for each write to it (nginx
    /// `proxy_read_timeout`, 60 s); past it, 504, or a cut response once it has begun.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub read_timeout: Duration,
    /// An idle pooled connection older than this is closed rather than reused (upstreams
    /// close idle connections too: nginx after 75 s, Apache after 5 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub idle_timeout: Duration,
    /// Idle keep-alive connections kept per upstream (nginx `keepalive`); 0 disables reuse.
    pub max_idle: usize,
    /// Read the whole request body (at most `limits.max_body`), and check its framing, before
    /// anything goes upstream (nginx `proxy_request_buffering on`, its default): a malformed,
    /// oversized or slow body never reaches the upstream, and the body goes up with a
    /// `Content-Length`. `false`: the body streams upstream as it arrives.
    pub request_buffering: bool,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            prefix: String::new(),
            upstream: String::new(),
            fallback: false,
            host: ProxyHost::Client,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            max_idle: 32,
            request_buffering: true,
        }
    }
}

/// `[pipeline]` as written: a stage whose threads are not given gets its share of the default
/// initial allocation for the `threads_total` that is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PipelineToml {
    threads_total: usize,
    accept: Option<usize>,
    receive: Option<usize>,
    process: Option<usize>,
    send: Option<usize>,
    queue: usize,
    #[serde(deserialize_with = "de_duration")]
    period: Duration,
    controller: bool,
    #[serde(deserialize_with = "de_seconds_per")]
    c1: f64,
    #[serde(deserialize_with = "de_seconds_per")]
    c2: f64,
    #[serde(deserialize_with = "de_fraction")]
    min_idle_cpu: f64,
}

impl Default for PipelineToml {
    fn default() -> Self {
        let d = PipelineConfig::default();
        PipelineToml {
            threads_total: d.threads_total,
            accept: None,
            receive: None,
            process: None,
            send: None,
            queue: d.queue,
            period: d.period,
            controller: d.controller,
            c1: d.c1,
            c2: d.c2,
            min_idle_cpu: d.min_idle_cpu,
        }
    }
}

impl From<PipelineToml> for PipelineConfig {
    fn from(t: PipelineToml) -> Self {
        let [a, r, p, s] = PipelineConfig::default_initial(t.threads_total);
        PipelineConfig {
            threads_total: t.threads_total,
            accept: t.accept.unwrap_or(a),
            receive: t.receive.unwrap_or(r),
            process: t.process.unwrap_or(p),
            send: t.send.unwrap_or(s),
            queue: t.queue,
            period: t.period,
            controller: t.controller,
            c1: t.c1,
            c2: t.c2,
            min_idle_cpu: t.min_idle_cpu,
        }
    }
}

impl PipelineConfig {
    /// The default initial allocation for `total` threads: one accept and one receive thread,
    /// and process and send a quarter of the total each, at most 4 (1 1 4 4 at M = 16). The
    /// start is what a CPU-bound load keeps (the controller grows no stage without idle CPU),
    /// and under saturating static loads 1 2 2 2, the previous default, served 6-11% less than
    /// this start in all but one series point (BENCHMARKS.md, the pipeline's controller
    /// against fixed allocations);
    /// from it a blocking load still reaches 1 1 13 1 by growing process and borrowing send's
    /// idle threads.
    pub fn default_initial(total: usize) -> [usize; 4] {
        let later = (total.saturating_sub(2) / 2).clamp(1, 4);
        [1, 1, later, later]
    }

    /// The initial allocation in pipeline order: accept, receive, process, send.
    pub fn initial(&self) -> [usize; 4] {
        [self.accept, self.receive, self.process, self.send]
    }

    /// Checks that every stage starts with a thread and that they fit in `threads_total`.
    pub fn validate(&self) -> Result<(), String> {
        let init = self.initial();
        if init.contains(&0) {
            return Err("[pipeline] every stage needs at least one thread".into());
        }
        let sum: usize = init.iter().sum();
        if sum > self.threads_total {
            return Err(format!(
                "[pipeline] the initial threads ({sum}) exceed threads_total ({})",
                self.threads_total
            ));
        }
        if self.queue == 0 || self.period.is_zero() {
            return Err("[pipeline] queue and period must be positive".into());
        }
        if !(self.c1 >= 0.0 && self.c2 >= 0.0 && self.c1.is_finite() && self.c2.is_finite()) {
            return Err("[pipeline] c1 and c2 must be finite and non-negative".into());
        }
        if !(0.0..=1.0).contains(&self.min_idle_cpu) {
            return Err("[pipeline] min_idle_cpu must be between 0 and 1".into());
        }
        Ok(())
    }
}

impl FromStr for ProxyConfig {
    type Err = String;
    /// `/PREFIX=http://HOST:PORT`, or `*=http://HOST:PORT` for a fallback (everything that is
    /// not a file), as `--proxy` takes it.
    fn from_str(s: &str) -> Result<ProxyConfig, String> {
        let (prefix, upstream) = s
            .split_once('=')
            .ok_or(format!("`{s}`: expected /PREFIX=http://HOST:PORT"))?;
        let (prefix, fallback) = match prefix {
            "*" => (String::new(), true),
            p if p.starts_with('/') => (p.to_string(), false),
            p => {
                return Err(format!(
                    "proxy prefix `{p}` must start with `/` (or be `*`)"
                ))
            }
        };
        Ok(ProxyConfig {
            prefix,
            upstream: upstream.to_string(),
            fallback,
            ..ProxyConfig::default()
        })
    }
}

/// The `Host` a proxied request carries upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyHost {
    /// The client's `Host` (the upstream's authority if the client sent none): the upstream
    /// sees the name the client asked for, as Apache's `ProxyPreserveHost On` and HAProxy do.
    Client,
    /// The upstream's authority from its URL (nginx's default, `$proxy_host`).
    Upstream,
}

/// The status page and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusConfig {
    /// Mount `/_weft/status`, `/_weft/status.json` and `/_weft/metrics`.
    pub enabled: bool,
    /// Client networks allowed to read them.
    pub allow: Vec<Cidr>,
}

impl Default for StatusConfig {
    fn default() -> Self {
        StatusConfig {
            enabled: false,
            allow: vec![
                "127.0.0.0/8".parse().expect("valid"),
                "::1/128".parse().expect("valid"),
            ],
        }
    }
}

/// An IP network, `ADDR/PREFIX` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// True if `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, p) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a
            .parse()
            .map_err(|e| format!("bad address in `{s}`: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or(format!("bad prefix in `{s}`"))?,
            None => max,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cidr, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    Off,
    Stdout,
    File(PathBuf),
}

impl FromStr for AccessLogTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "off" | "" => AccessLogTarget::Off,
            "stdout" | "-" => AccessLogTarget::Stdout,
            path => AccessLogTarget::File(path.into()),
        })
    }
}

impl Serialize for AccessLogTarget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AccessLogTarget::Off => s.serialize_str("off"),
            AccessLogTarget::Stdout => s.serialize_str("stdout"),
            AccessLogTarget::File(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AccessLogTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Document root (`www` by default, relative to the working directory).
    pub root: PathBuf,
    /// Listening addresses; `127.0.0.1:8080` with the default model when empty.
    pub listen: Vec<Listen>,
    /// Proxies trusted to say who the client is: from these addresses, the right-most
    /// `X-Forwarded-For` entry that is not one of them is the client (nginx `real_ip_from`
    /// with `real_ip_recursive on`). Empty by default: the connection's address stands.
    pub real_ip_from: Vec<Cidr>,
    /// Worker threads for models that use a fixed number (default: one per core; at least 1).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_threads"
    )]
    pub threads: Option<usize>,
    /// Combined Log Format access log.
    pub access_log: AccessLogTarget,
    pub timeouts: Timeouts,
    pub limits: LimitsConfig,
    pub static_files: StaticConfig,
    pub echo: EchoConfig,
    pub health: HealthConfig,
    pub status: StatusConfig,
    pub fiber: FiberConfig,
    pub cache: CacheConfig,
    pub process: ProcessConfig,
    pub cgi: CgiConfig,
    /// Reverse-proxy mounts (`[[proxy]]`, or `--proxy /PREFIX=URL`).
    pub proxy: Vec<ProxyConfig>,
    pub timing: TimingConfig,
    pub pipeline: PipelineConfig,
    /// Serve as this user (`NAME` or `NAME:GROUP`) once the listeners are bound, when started
    /// as root (nginx `user`). See `privdrop`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Started as root without `user`: serve as root anyway (otherwise refused on addresses
    /// other hosts can reach).
    pub allow_root: bool,
    /// Requests per client address (nginx `limit_req`).
    pub rate_limit: crate::limits_ip::RateLimitConfig,
    /// Virtual hosts (`[[site]]`, see `sites.rs`); none: the settings above serve every host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub site: Vec<crate::sites::SiteConfig>,
    /// Content codings (`[compression]`, see `compress.rs`).
    pub compression: crate::compress::CompressionConfig,
    /// Certificates and settings of the TLS listeners (`[tls]`, `crate::tls`).
    pub tls: crate::tls::TlsConfig,
}

/// Per-request phase timings (the CGI paper's question: where does a request's time go?).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingConfig {
    /// Histograms of every phase of every request (a few clock reads per request).
    pub phases: bool,
    /// A `Server-Timing` header on each response with its accept, head, body and handler
    /// phases (implies measuring them).
    pub server_timing: bool,
}

impl TimingConfig {
    /// True if requests are timed at all.
    pub fn on(&self) -> bool {
        self.phases || self.server_timing
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("www"),
            listen: Vec::new(),
            real_ip_from: Vec::new(),
            threads: None,
            access_log: AccessLogTarget::Off,
            timeouts: Timeouts::default(),
            limits: LimitsConfig::default(),
            static_files: StaticConfig::default(),
            echo: EchoConfig::default(),
            health: HealthConfig::default(),
            status: StatusConfig::default(),
            fiber: FiberConfig::default(),
            cache: CacheConfig::default(),
            process: ProcessConfig::default(),
            cgi: CgiConfig::default(),
            proxy: Vec::new(),
            timing: TimingConfig::default(),
            pipeline: PipelineConfig::default(),
            user: None,
            allow_root: false,
            rate_limit: Default::default(),
            site: Vec::new(),
            compression: Default::default(),
            tls: crate::tls::TlsConfig::default(),
        }
    }
}

/// The address served when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

impl Config {
    /// Parses a TOML configuration.
    pub fn from_toml(text: &str) -> Result<Config, String> {
        let cfg: Config = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        crate::sites::check(text, &cfg.site)?;
        Ok(cfg)
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &std::path::Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The configuration as a TOML file that `from_toml` reads back to the same value
    /// (`weft check` prints it).
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| e.to_string())
    }

    /// The listeners to open: the configured ones, or the default address.
    pub fn listeners(&self) -> Vec<Listen> {
        if self.listen.is_empty() {
            vec![DEFAULT_LISTEN.parse().expect("valid default")]
        } else {
            self.listen.clone()
        }
    }
}

/// Parses `"60s"`, `"500ms"`, `"2m"`, `"1h"` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration `{s}`"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in `{s}` (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("bad duration `{s}`: {e}"))
}

/// Writes a duration as `parse_duration` reads it back: whole seconds as `"75s"`, else
/// milliseconds (`"250ms"`), else fractional seconds.
pub fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.subsec_nanos() % 1_000_000 == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}", d.as_secs_f64())
    }
}

fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// A setting's value as written, so that a value of the wrong type or range can be reported
/// in the user's terms ("expected a duration like ..., got -3") instead of serde's.
enum Scalar {
    Int(i128),
    Float(f64),
    Text(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(n) => write!(f, "{n}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// The error for a setting that is not `expected`; `from_toml` adds its key and position.
fn wrong<E: serde::de::Error>(expected: &str, got: impl fmt::Display) -> E {
    E::custom(format!("expected {expected}, got {got}"))
}

/// Reads a number or a string; anything else is refused as not `expected`.
fn scalar<'de, D: Deserializer<'de>>(d: D, expected: &'static str) -> Result<Scalar, D::Error> {
    struct V(&'static str);
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Scalar;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
            Ok(Scalar::Int(v.into()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
            Ok(Scalar::Int(v.into()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
            Ok(Scalar::Float(v))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
            Ok(Scalar::Text(v.to_string()))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
            Err(wrong(self.0, v))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<Scalar, A::Error> {
            Err(wrong(self.0, "an array"))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Scalar, A::Error> {
            Err(wrong(self.0, "a table"))
        }
    }
    d.deserialize_any(V(expected))
}

const DURATION: &str = "a duration like \"75s\" or a number of seconds >= 0";

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match scalar(d, DURATION)? {
        Scalar::Int(n) if n >= 0 => u64::try_from(n)
            .map(Duration::from_secs)
            .map_err(|_| wrong(DURATION, n)),
        Scalar::Float(x) if x >= 0.0 => {
            Duration::try_from_secs_f64(x).map_err(|_| wrong(DURATION, x))
        }
        Scalar::Text(t) => parse_duration(&t).map_err(|_| wrong(DURATION, Scalar::Text(t))),
        other => Err(wrong(DURATION, other)),
    }
}

const SIZE: &str = "a number of bytes >= 0 or a size like \"64k\" or \"1m\"";

/// Parses `"65536"`, `"64k"`, `"1m"` or `"1g"` (KiB, MiB, GiB, as nginx reads sizes).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

pub(crate) fn de_size<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    let v = scalar(d, SIZE)?;
    let bytes = match &v {
        Scalar::Int(n) => u64::try_from(*n).ok(),
        Scalar::Text(t) => parse_size(t),
        Scalar::Float(_) => None,
    };
    bytes
        .and_then(|b| T::try_from(b).ok())
        .ok_or_else(|| wrong(SIZE, v))
}

const SECONDS_PER: &str = "a number of seconds >= 0 like 1.5e-5";

/// A cost in seconds per request or per byte (`[pipeline] c1`, `c2`).
fn de_seconds_per<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match scalar(d, SECONDS_PER)? {
        Scalar::Int(n) if n >= 0 => Ok(n as f64),
        Scalar::Float(x) if x.is_finite() && x >= 0.0 => Ok(x),
        other => Err(wrong(SECONDS_PER, other)),
    }
}

const FRACTION: &str = "a fraction from 0 to 1 like 0.1";

fn de_fraction<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match scalar(d, FRACTION)? {
        Scalar::Int(n @ 0..=1) => Ok(n as f64),
        Scalar::Float(x) if (0.0..=1.0).contains(&x) => Ok(x),
        other => Err(wrong(FRACTION, other)),
    }
}

/// `line L, column C: KEY: MESSAGE` for a TOML error, the key as dotted path (`[[listen]]`
/// entries and array elements as `[i]`), found by walking the document's spans.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim_end();
    let Some(at) = e.span().map(|s| s.start) else {
        return msg.to_string();
    };
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let mut path = String::new();
    let found =
        toml_edit::ImDocument::parse(text).is_ok_and(|doc| key_at(doc.as_table(), at, &mut path));
    if found && !path.is_empty() {
        format!("line {line}, column {column}: {path}: {msg}")
    } else {
        format!("line {line}, column {column}: {msg}")
    }
}

/// Appends to `path` the keys down to the key or value that spans byte `at`.
fn key_at(table: &dyn toml_edit::TableLike, at: usize, path: &mut String) -> bool {
    let hit = |span: Option<std::ops::Range<usize>>| span.is_some_and(|s| s.contains(&at));
    for (k, item) in table.iter() {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k);
        let found = match item {
            toml_edit::Item::Table(t) => key_at(t, at, path),
            toml_edit::Item::ArrayOfTables(a) => a.iter().enumerate().any(|(i, t)| {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = key_at(t, at, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            toml_edit::Item::Value(v) => value_at(v, at, path),
            toml_edit::Item::None => false,
        };
        if found || hit(table.key(k).and_then(|k| k.span())) {
            return true;
        }
        path.truncate(len);
    }
    false
}

fn value_at(v: &toml_edit::Value, at: usize, path: &mut String) -> bool {
    match v {
        toml_edit::Value::InlineTable(t) => key_at(t, at, path),
        toml_edit::Value::Array(a) => {
            a.iter().enumerate().any(|(i, v)| {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = value_at(v, at, path);
                if !found {
                    path.truncate(len);
                }
                found
            }) || v.span().is_some_and(|s| s.contains(&at))
        }
        _ => v.span().is_some_and(|s| s.contains(&at)),
    }
}

#[cfg(test)]
mod doc_example;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fiber_linger_parses_and_is_capped_at_half_the_keepalive_timeout() {
        assert_eq!(Config::default().fiber.linger, Duration::from_millis(100));
        assert_eq!(Config::default().fiber.linger_max, 64);
        let c = Config::from_toml("[fiber]\nlinger_max = 5\n").unwrap();
        assert_eq!(c.fiber.linger_max, 5);
        let c = Config::from_toml("[fiber]\nlinger = \"250ms\"\n").unwrap();
        assert_eq!(c.fiber.linger, Duration::from_millis(250));
        assert_eq!(crate::conn::linger_period(&c), Duration::from_millis(250));
        let c = Config::from_toml("[fiber]\nlinger = \"2s\"\n[timeouts]\nkeepalive = 1\n").unwrap();
        assert_eq!(crate::conn::linger_period(&c), Duration::from_millis(500));
        let c = Config::from_toml("[fiber]\nlinger = \"0s\"\n").unwrap();
        assert!(crate::conn::linger_period(&c).is_zero());
    }

    #[test]
    fn parses_a_full_config() {
        let c = Config::from_toml(
            r#"
            root = "/srv/www"
            access_log = "stdout"
            [[listen]]
            addr = "127.0.0.1:9000"
            model = "thread"
            [timeouts]
            header_read = "5s"
            keepalive = 3
            send = "1500ms"
            [limits]
            max_body = 10
            [echo]
            path = ""
            [status]
            enabled = true
            allow = ["10.0.0.0/8"]
            "#,
        )
        .unwrap();
        assert_eq!(c.root, PathBuf::from("/srv/www"));
        assert_eq!(c.access_log, AccessLogTarget::Stdout);
        assert_eq!(c.listen[0].addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(c.timeouts.header_read, Duration::from_secs(5));
        assert_eq!(c.timeouts.keepalive, Duration::from_secs(3));
        assert_eq!(c.timeouts.send, Duration::from_millis(1500));
        assert_eq!(c.timeouts.body_read, Duration::from_secs(60));
        assert_eq!(c.limits.max_body, 10);
        assert_eq!(c.echo.path.as_deref(), Some(""));
        assert_eq!(c.echo.mount_path(&c.root), None);
        assert!(c.status.allow[0].contains("10.1.2.3".parse().unwrap()));
        assert!(!c.status.allow[0].contains("11.1.2.3".parse().unwrap()));
    }

    /// `[SECTION]` (or `[[SECTION]]`) with `key = value` on line 2 (plus what a proxy needs).
    fn one_setting(section: &str, key: &str, value: &str) -> String {
        match section {
            "proxy" => format!(
                "[[proxy]]\n{key} = {value}\nprefix = \"/a/\"\nupstream = \"http://127.0.0.1:1\"\n"
            ),
            _ => format!("[{section}]\n{key} = {value}\n"),
        }
    }

    #[test]
    fn every_duration_size_and_rate_setting_says_what_is_wrong_where() {
        let durations = [
            ("timeouts", "header_read"),
            ("timeouts", "body_read"),
            ("timeouts", "keepalive"),
            ("timeouts", "send"),
            ("timeouts", "shutdown_grace"),
            ("timeouts", "min_rate_grace"),
            ("fiber", "linger"),
            ("cache", "revalidate"),
            ("cgi", "timeout"),
            ("pipeline", "period"),
            ("proxy", "connect_timeout"),
            ("proxy", "read_timeout"),
            ("proxy", "idle_timeout"),
        ];
        let sizes = [
            ("limits", "max_request_line"),
            ("limits", "max_head_bytes"),
            ("limits", "max_body"),
            ("limits", "max_chunk_line"),
            ("limits", "max_trailer_bytes"),
            ("limits", "client_body_buffer"),
            ("fiber", "stack_size"),
            ("cache", "max_bytes"),
            ("cache", "max_object_bytes"),
        ];
        let rates = [
            ("pipeline", "c1"),
            ("pipeline", "c2"),
            ("pipeline", "min_idle_cpu"),
        ];
        let expected = |section: &str, key: &str| match (section, key) {
            (_, "c1" | "c2") => "a number of seconds >= 0 like 1.5e-5",
            (_, "min_idle_cpu") => "a fraction from 0 to 1 like 0.1",
            _ if durations.contains(&(section, key)) => {
                "a duration like \"75s\" or a number of seconds >= 0"
            }
            _ => "a number of bytes >= 0 or a size like \"64k\" or \"1m\"",
        };
        for (section, key) in durations.iter().chain(&sizes).chain(&rates) {
            let path = match *section {
                "proxy" => format!("proxy[0].{key}"),
                s => format!("{s}.{key}"),
            };
            // The value starts at column len(key) + 4 of line 2.
            let col = key.len() + 4;
            for (value, got) in [
                ("-3", "-3"),
                ("\"5 parsecs\"", "\"5 parsecs\""),
                ("true", "true"),
                ("[1]", "an array"),
            ] {
                let err = Config::from_toml(&one_setting(section, key, value)).unwrap_err();
                let want = format!(
                    "line 2, column {col}: {path}: expected {}, got {got}",
                    expected(section, key)
                );
                assert_eq!(err, want, "{section}.{key} = {value}");
            }
        }
        // What each kind does take.
        let c = Config::from_toml("[timeouts]\nkeepalive = 1.5\nsend = 3\n").unwrap();
        assert_eq!(c.timeouts.keepalive, Duration::from_millis(1500));
        assert_eq!(c.timeouts.send, Duration::from_secs(3));
        let c = Config::from_toml(
            "[limits]\nmax_body = \"1m\"\nmax_head_bytes = \"64k\"\nmax_headers = 7\n\
             [cache]\nmax_bytes = \"1G\"\nmax_object_bytes = 4096\n",
        )
        .unwrap();
        assert_eq!(c.limits.max_body, 1 << 20);
        assert_eq!(c.limits.max_head_bytes, 64 << 10);
        assert_eq!(c.cache.max_bytes, 1 << 30);
        assert_eq!(c.cache.max_object_bytes, 4096);
        let c = Config::from_toml("[pipeline]\nc1 = 0\nc2 = 2e-10\nmin_idle_cpu = 1\n").unwrap();
        assert_eq!((c.pipeline.c1, c.pipeline.c2), (0.0, 2e-10));
        assert_eq!(c.pipeline.min_idle_cpu, 1.0);
        for bad in ["\"1t\"", "1.5", "\"99999999999g\""] {
            let err = Config::from_toml(&format!("[limits]\nmax_body = {bad}\n")).unwrap_err();
            assert!(
                err.starts_with("line 2, column 12: limits.max_body: expected"),
                "{err}"
            );
        }
        let err = Config::from_toml("[pipeline]\nmin_idle_cpu = 1.5\n").unwrap_err();
        assert!(err.ends_with("got 1.5"), "{err}");
    }

    #[test]
    fn other_errors_name_their_line_column_and_key() {
        let err = Config::from_toml("root = \"www\"\n[timeouts]\nkeeplive = \"5s\"\n").unwrap_err();
        assert!(
            err.starts_with("line 3, column 1: timeouts.keeplive: unknown field `keeplive`"),
            "{err}"
        );
        let err = Config::from_toml("[[listen]]\naddr = \"127.0.0.1:1\"\nmodel = \"bogus\"\n")
            .unwrap_err();
        assert!(
            err.starts_with("line 3, column 9: listen[0].model: "),
            "{err}"
        );
        let err = Config::from_toml("[status]\nallow = [\"::1\", \"nonsense\"]\n").unwrap_err();
        // toml points at the whole array for a bad element.
        assert_eq!(
            err,
            "line 2, column 9: status.allow: bad address in `nonsense`: invalid IP address syntax"
        );
        // A file that is not TOML at all still gets its position.
        let err = Config::from_toml("[timeouts\n").unwrap_err();
        assert!(err.starts_with("line 1, column "), "{err}");
    }

    #[test]
    fn listener_name_proxy_protocol_and_real_ip_from() {
        let c = Config::from_toml(
            "real_ip_from = [\"10.0.0.0/8\", \"::1\"]\n\
             [[listen]]\naddr = \"127.0.0.1:1\"\nname = \"web\"\nproxy_protocol = true\n\
             [[listen]]\naddr = \"127.0.0.1:2\"\n",
        )
        .unwrap();
        assert_eq!(c.listen[0].name.as_deref(), Some("web"));
        assert!(c.listen[0].proxy_protocol);
        assert_eq!(c.listen[1].name, None);
        assert!(!c.listen[1].proxy_protocol);
        assert!(c.real_ip_from[0].contains("10.2.3.4".parse().unwrap()));
        assert!(c.real_ip_from[1].contains("::1".parse().unwrap()));
        assert!(Config::default().real_ip_from.is_empty());
        assert!(Config::from_toml("real_ip_from = [\"10.0.0.0/33\"]").is_err());
    }

    #[test]
    fn refuses_unknown_keys_and_models() {
        assert!(Config::from_toml("rot = \"x\"").is_err());
        assert!(
            Config::from_toml("[[listen]]\naddr = \"127.0.0.1:1\"\nmodel = \"bogus\"").is_err()
        );
        assert!(Config::from_toml("[timeouts]\nsend = \"5 parsecs\"").is_err());
    }

    #[test]
    fn listen_syntax() {
        let l: Listen = "127.0.0.1:8081=thread".parse().unwrap();
        assert_eq!(l.model, Model::Thread);
        assert!("127.0.0.1:8081=nope".parse::<Listen>().is_err());
        let p: Listen = "127.0.0.1:8082=process".parse().unwrap();
        assert_eq!(p.model, Model::Process);
        let p: Listen = "127.0.0.1:8083=pipeline".parse().unwrap();
        assert_eq!(p.model, Model::Pipeline);
        assert!("nothost".parse::<Listen>().is_err());
        assert_eq!(
            Config::default().listeners()[0].addr,
            "127.0.0.1:8080".parse().unwrap()
        );
    }

    #[test]
    fn cache_and_process_sections() {
        let c = Config::default();
        assert!(c.cache.enabled);
        assert_eq!(c.cache.revalidate, Duration::from_secs(1));
        let c = Config::from_toml(
            "[cache]\nenabled = false\nmax_bytes = 1000\nmax_object_bytes = 10\nrevalidate = \"250ms\"\n[process]\nmax_children = 3",
        )
        .unwrap();
        assert!(!c.cache.enabled);
        assert_eq!(c.cache.max_bytes, 1000);
        assert_eq!(c.cache.max_object_bytes, 10);
        assert_eq!(c.cache.revalidate, Duration::from_millis(250));
        assert_eq!(c.process.max_children, 3);
        assert!(Config::from_toml("[cache]\nsize = 1").is_err());
    }

    #[test]
    fn cgi_section() {
        let c = Config::default();
        assert_eq!(c.cgi.dir, None);
        assert_eq!(c.cgi.prefix, "/cgi-bin/");
        assert_eq!(c.cgi.timeout, Duration::from_secs(60));
        let c =
            Config::from_toml("[cgi]\ndir = \"/srv/cgi\"\nprefix = \"/run/\"\ntimeout = \"2s\"")
                .unwrap();
        assert_eq!(c.cgi.dir, Some(PathBuf::from("/srv/cgi")));
        assert_eq!(c.cgi.prefix, "/run/");
        assert_eq!(c.cgi.timeout, Duration::from_secs(2));
        assert!(Config::from_toml("[cgi]\nscripts = 1").is_err());
        let c = Config::from_toml("[cgi]\nextensions = [\".cgi\", \".pl\"]").unwrap();
        assert_eq!(c.cgi.extensions, [".cgi", ".pl"]);
        assert!(c.cgi.dir.is_none());
    }

    #[test]
    fn pipeline_section() {
        let c = Config::default();
        assert!(c.pipeline.validate().is_ok());
        assert_eq!(c.pipeline.period, Duration::from_millis(250));
        let c = Config::from_toml(
            "[pipeline]\nthreads_total = 8\naccept = 1\nreceive = 1\nprocess = 3\nsend = 3\nperiod = \"100ms\"\ncontroller = false\nc1 = 0.001\nc2 = 2e-9",
        )
        .unwrap();
        assert_eq!(c.pipeline.initial(), [1, 1, 3, 3]);
        assert!(!c.pipeline.controller);
        assert_eq!(c.pipeline.c1, 0.001);
        assert!(c.pipeline.validate().is_ok());
        let mut bad = c.pipeline.clone();
        bad.threads_total = 7;
        assert!(bad.validate().unwrap_err().contains("exceed"));
        bad.threads_total = 8;
        bad.accept = 0;
        assert!(bad.validate().is_err());
        assert!(Config::from_toml("[pipeline]\nstages = 4").is_err());
    }

    #[test]
    fn pipeline_stages_not_given_take_their_default_share_of_threads_total() {
        assert_eq!(PipelineConfig::default().initial(), [1, 1, 4, 4]);
        for (total, initial) in [(4, [1, 1, 1, 1]), (8, [1, 1, 3, 3]), (10, [1, 1, 4, 4])] {
            let c = Config::from_toml(&format!("[pipeline]\nthreads_total = {total}")).unwrap();
            assert_eq!(c.pipeline.initial(), initial, "threads_total = {total}");
            assert!(c.pipeline.validate().is_ok(), "threads_total = {total}");
        }
        let c = Config::from_toml("[pipeline]\nthreads_total = 12\nreceive = 3").unwrap();
        assert_eq!(c.pipeline.initial(), [1, 3, 4, 4]);
        let c = Config::from_toml("[pipeline]\nqueue = 7").unwrap();
        assert_eq!(c.pipeline.queue, 7);
        assert_eq!(c.pipeline.threads_total, 16);
        assert_eq!(c.pipeline.period, Duration::from_millis(250));
    }

    #[test]
    fn proxy_section_and_flag() {
        let c = Config::from_toml(
            "[[proxy]]\nprefix = \"/api/\"\nupstream = \"http://127.0.0.1:9000\"\n\
             read_timeout = \"2s\"\nhost = \"upstream\"\n\
             [[proxy]]\nupstream = \"http://127.0.0.1:9001\"\nfallback = true",
        )
        .unwrap();
        assert_eq!(c.proxy.len(), 2);
        assert_eq!(c.proxy[0].prefix, "/api/");
        assert_eq!(c.proxy[0].read_timeout, Duration::from_secs(2));
        assert_eq!(c.proxy[0].connect_timeout, Duration::from_secs(5));
        assert_eq!(c.proxy[0].host, ProxyHost::Upstream);
        assert!(c.proxy[1].fallback && c.proxy[1].host == ProxyHost::Client);
        assert!(Config::from_toml("[[proxy]]\nupstream = \"x\"\nretries = 3").is_err());
        let p: ProxyConfig = "/api/=http://127.0.0.1:9000".parse().unwrap();
        assert_eq!((p.prefix.as_str(), p.fallback), ("/api/", false));
        assert_eq!(p.upstream, "http://127.0.0.1:9000");
        let f: ProxyConfig = "*=http://backend:8000".parse().unwrap();
        assert!(f.fallback && f.prefix.is_empty());
        assert!("api=http://x".parse::<ProxyConfig>().is_err());
        assert!("/api".parse::<ProxyConfig>().is_err());
    }

    #[test]
    fn cidr_matching() {
        let lo: Cidr = "127.0.0.0/8".parse().unwrap();
        assert!(lo.contains("127.9.9.9".parse().unwrap()));
        assert!(lo.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!lo.contains("::1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!("1.2.3.4/33".parse::<Cidr>().is_err());
    }

    #[test]
    fn a_config_written_as_toml_reads_back_the_same() {
        let mut c = Config::from_toml(
            r#"
            root = "/srv/www"
            threads = 3
            access_log = "/var/log/weft/access.log"
            [[listen]]
            addr = "[::1]:9000"
            model = "pipeline"
            [timeouts]
            send = "1500ms"
            [echo]
            path = ""
            [status]
            allow = ["10.0.0.0/8", "::1"]
            [cgi]
            dir = "/srv/cgi"
            [pipeline]
            period = "100ms"
            c1 = 2e-5
            [[proxy]]
            prefix = "/api/"
            upstream = "http://127.0.0.1:9000"
            "#,
        )
        .unwrap();
        c.timeouts.body_read = Duration::from_micros(1500);
        let text = c.to_toml().unwrap();
        assert_eq!(Config::from_toml(&text).unwrap(), c, "{text}");
        let d = Config::default();
        assert_eq!(Config::from_toml(&d.to_toml().unwrap()).unwrap(), d);
        assert_eq!(format_duration(Duration::from_secs(75)), "75s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("75s").unwrap(), Duration::from_secs(75));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("s").is_err());
    }
}
