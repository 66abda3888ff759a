//! Configuration: every timeout and limit has a name, an nginx-like default and a TOML key.
//! The command line overrides the file; `weft serve` with neither serves `www/` on
//! 127.0.0.1:8080 with the default model.
//!
//! ```toml
//! root = "www"
//! threads = 2                 # fiber workers (default: one per core)
//! access_log = "off"          # "off", "stdout" or a file path
//! access_log_format = "combined"  # "json", or nginx variables: "$remote_addr \"$request\" $status"
//! real_ip_from = []           # trusted proxies (CIDRs) whose X-Forwarded-For names the client
//! # access = ["allow 10.0.0.0/8", "deny all"]  # nginx allow/deny, in order; refused: 403
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
//! http2 = true                # TLS: ALPN offers h2, then http/1.1 (nginx http2 on)
//! h2c = false                 # plain: HTTP/2 with prior knowledge beside HTTP/1.1
//! backlog = 4096              # connections the kernel queues before accept (nginx backlog=)
//! # conn_per_ip = 16          # this listener's own connections per client (default: limits')
//! # congestion = "reno"       # TCP congestion control of its connections (default: the system's)
//!
//! [timeouts]                  # "60s", "500ms", "2m" or a number of seconds
//! header_read = "60s"         # nginx client_header_timeout
//! body_read = "60s"           # nginx client_body_timeout
//! keepalive = "75s"           # nginx keepalive_timeout
//! send = "60s"                # nginx send_timeout
//! shutdown_grace = "10s"
//! header_min_rate = 500       # bytes/s a head must average after min_rate_grace; 408 (0: off)
//! body_min_rate = 500         # bytes/s a body must average after min_rate_grace; 408 (0: off)
//! send_min_rate = 500         # bytes/s a client must take responses at; cut (0: off)
//! min_rate_grace = "20s"      # Apache RequestReadTimeout header=20-60,MinRate=500
//! tls_handshake = "10s"       # a TLS handshake from its first byte
//! lingering_time = "2s"       # draining unread input after the last response (nginx's name)
//! keepalive_time = "1h"       # a connection's longest life; then Connection: close (nginx's)
//! drain_idle = "1s"           # at a drain, idle connections' last chance for a request
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
//! max_internal_redirects = 10 # CGI local redirects and try_files URIs in a row; 500 past it
//!                             # (Apache LimitInternalRecursion)
//! max_discard_body = 65536    # an unread body dropped to keep the connection; longer: close
//! keepalive_requests = 1000   # requests a connection carries, then Connection: close; 0: any
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
//! [thread]                    # thread-model connection threads and pipeline stage threads
//! stack_size = 262144         # bytes (Apache ThreadStackSize)
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
//! write_completion = true     # a slow reader's rest is sent by the master, not a child
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
//! max_header_bytes = 32768    # a script's header section; 502 past it (fastcgi_buffer_size)
//! output_buffer = 65536       # output read with the header: a finished script's gets a length
//! max_stderr_line = 4096      # longer stderr lines are logged in pieces
//! stderr_settle = "200ms"     # a finished script's last stderr lines may take this long
//!
//! [[proxy]]                   # reverse proxy (see handlers/proxy/); may repeat
//! prefix = "/api/"            # requests whose path starts with this go upstream
//! upstream = "http://127.0.0.1:9000"
//! fallback = false            # true: also everything that is not a file (static 404s and
//!                             # methods other than GET/HEAD); at most one entry
//! host = "client"             # Host sent upstream: the client's, or "upstream" (its authority)
//! connect_timeout = "5s"      # nginx proxy_connect_timeout; past it 504
//! read_timeout = "60s"        # nginx proxy_read_timeout, between two reads (and writes); 504
//! tunnel_idle = "1h"          # a WebSocket (any Upgrade answered 101) closes after this
//!                             # with no byte either way
//! idle_timeout = "30s"        # an idle pooled upstream connection older than this is closed
//! max_idle = 32               # idle keep-alive connections kept per upstream
//! request_buffering = true    # nginx proxy_request_buffering: the whole body (at most
//!                             # limits.max_body) is read before anything goes upstream
//! underscores_in_headers = false  # nginx underscores_in_headers: fields named with `_`
//!                             # are not forwarded (X_Forwarded_For is no X-Forwarded-For)
//! resolve_every = "30s"       # the URL's host name resolved again this often; 0: at start
//! tls_verify = true           # https:// upstreams: check the certificate (proxy_ssl_verify)
//! # tls_ca = "ca.pem"         # the CAs it checks against; default: the system's bundle
//! # tls_name = "api.internal" # SNI and the name checked; default: the URL's host
//! # tls_cert = "client.pem"   # a client certificate for upstreams that ask (with tls_key)
//! # tls_key = "client.key"
//!
//! [[upstream]]                # a group a proxy names as upstream = "upstream:app"; may repeat
//! name = "app"
//! servers = ["127.0.0.1:9001 weight=2", "127.0.0.1:9002", "unix:/run/app.sock backup"]
//!                             # nginx server lines: weight=N max_fails=N fail_timeout=T backup
//! policy = "round_robin"      # least_conn, ip_hash, "hash $uri", "hash $http_x_user", ...
//! max_fails = 1               # nginx max_fails: failures within fail_timeout mark it down
//! fail_timeout = "10s"        # nginx fail_timeout: the window, and how long it stays down
//! retry_on = ["error", "timeout"]  # nginx proxy_next_upstream (http_502/503/504 too)
//! tries = 0                   # nginx proxy_next_upstream_tries; 0: each server once
//! try_timeout = "0s"          # nginx proxy_next_upstream_timeout; 0: no bound
//! max_idle = 32               # nginx keepalive: idle connections kept per server
//! idle_timeout = "30s"        # an idle pooled connection older than this is closed
//! resolve_every = "30s"       # names resolved again this often (on a thread); 0: at start
//! tls = false                 # the servers speak TLS (proxy_pass https://app)
//! tls_verify = true           # and the tls_* keys as [[proxy]]'s:
//! # tls_ca = "ca.pem"
//! # tls_name = "app.internal"
//! # tls_cert = "client.pem"
//! # tls_key = "client.key"
//! [upstream.health]           # active checks; none without this table
//! path = "/"                  # GET it; a 2xx or 3xx passes
//! interval = "2s"
//! timeout = "1s"
//! fall = 3                    # failed checks in a row that mark a server down
//! rise = 2                    # passed checks in a row that bring it back
//!
//! [[fastcgi]]                 # FastCGI applications: php-fpm (see handlers/fastcgi/); may repeat
//! prefix = "/"                # requests under this may go to the application
//! server = "unix:/run/php/php-fpm.sock"  # or "127.0.0.1:9000"
//! # root = "/srv/www"         # SCRIPT_FILENAME = root + script path; default: the document root
//! php = true                  # Caddy's php_fastcgi: .php scripts, PATH_INFO, index.php, front
//!                             # controller, .php never served as source; false: all to the app
//! split_path = [".php"]       # the endings that make a file a script
//! index = "index.php"         # directory index, and the front controller under the prefix
//! front_controller = true     # a path that names no file goes to PREFIX + index (else 404)
//! # params = { PHP_VALUE = "upload_max_filesize=64M" }  # nginx fastcgi_param
//! connect_timeout = "5s"      # nginx fastcgi_connect_timeout; past it 504
//! read_timeout = "60s"        # nginx fastcgi_read_timeout, between two reads (and writes); 504
//! idle_timeout = "30s"        # a kept connection idle longer than this is closed
//! max_conns = 0               # > 0: at most this many kept open and reused (fastcgi_keep_conn
//!                             # on); no more than php-fpm's pm.max_children. 0: one per request
//! request_buffering = true    # nginx fastcgi_request_buffering: the whole body first
//! max_header_bytes = 32768    # the application's header section; 502 past it
//! output_buffer = 65536       # a response that ends within this gets a Content-Length
//!
//! [tls]                       # HTTPS listeners: [[listen]] tls = true (see crate::tls)
//! cert = "cert.pem"           # nginx ssl_certificate (PEM chain, leaf first)
//! key = "key.pem"             # nginx ssl_certificate_key (PKCS#8, RSA or EC)
//! # ocsp = "cert.ocsp"        # nginx ssl_stapling_file (DER OCSP response)
//! hsts = ""                   # e.g. "max-age=63072000": Strict-Transport-Security
//! session_tickets = true      # nginx ssl_session_tickets
//! session_cache = 4096        # server-side sessions kept (0: none)
//! ticket_key_lifetime = "6h"  # a ticket key encrypts this long; tickets open for twice it
//! # client_ca = "clients.pem" # nginx ssl_client_certificate: CAs client certificates chain to
//! verify_client = "off"       # nginx ssl_verify_client: off, optional or on (400 without one)
//!
//! [[tls.sni]]                 # more certificates, chosen by the name the client sends
//! names = ["example.org", "*.example.org"]
//! cert = "org.pem"
//! key = "org.key"
//! # ocsp = "org.ocsp"
//!
//! [acme]                      # automatic HTTPS: certificates for the sites' names (see acme/)
//! enabled = false
//! directory = "letsencrypt"   # or "letsencrypt-staging", or a CA's directory URL
//! email = ""                  # the account's contact (empty: none)
//! storage = "/var/lib/weft/acme"  # account, certificates, keys (0700; keys 0600)
//! challenges = ["tls-alpn-01", "http-01"]  # answered, preferred first
//! renew_before = "0s"         # 0: as the CA's ARI suggests, else with a third of the lifetime left
//! # ca = "acme-ca.pem"        # CAs the ACME server's HTTPS is checked against (a private CA)
//! names = []                  # names besides the [[site]] hosts
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
//! min_length = 256            # smaller bodies are not compressed on the fly (gzip_min_length)
//! precompressed = false       # serve file.br / file.zst / file.gz beside file (nginx gzip_static)
//! dynamic = true              # CGI and proxied responses too (nginx gzip_proxied any)
//! gzip_level = 6              # 1-9
//! brotli_level = 6            # 0-11
//! zstd_level = 3              # 1-19
//!
//! # [[site]]                  # virtual hosts and their locations: see sites.rs, docs/sites.md
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod acme;
mod builtin;
mod cache;
mod cgi;
mod cidr;
pub(crate) mod compression;
mod de;
mod error;
mod fastcgi;
mod fiber;
mod limits;
mod listen;
mod logging;
mod pipeline;
mod process;
mod proxy;
pub(crate) mod rate_limit;
pub(crate) mod sites;
mod static_files;
mod thread;
mod timeouts;
pub(crate) mod tls;
mod upstream;

pub use acme::{AcmeConfig, LETSENCRYPT, LETSENCRYPT_STAGING};
pub use builtin::{EchoConfig, HealthConfig, StatusConfig, DEFAULT_ECHO_PATH};
pub use cache::CacheConfig;
pub use cgi::CgiConfig;
pub use cidr::{AccessRule, Cidr};
pub use compression::{CompressionConfig, DEFAULT_TYPES};
pub(crate) use de::de_size;
use de::de_threads;
pub use de::{format_duration, parse_duration, parse_size};
pub use error::ConfigError;
pub use fastcgi::FastcgiConfig;
pub use fiber::{AcceptMode, FiberConfig};
pub use limits::LimitsConfig;
pub(crate) use listen::default_backlog;
pub use listen::{parse_listen_addr, Listen, Model};
pub use logging::{
    AccessLogFormat, AccessLogTarget, Piece as LogPiece, TimingConfig, Var as LogVar,
};
pub use pipeline::{PipelineConfig, PipelineError};
pub use process::ProcessConfig;
pub use proxy::{ProxyConfig, ProxyHost};
pub use rate_limit::{Rate, RateLimitConfig, DEFAULT_ZONE};
pub use sites::{AuthConfig, LocationConfig, SiteConfig};
pub use static_files::StaticConfig;
pub use thread::ThreadConfig;
pub use timeouts::Timeouts;
pub use tls::{SniCert, TlsConfig, VerifyClient, DEFAULT_SESSION_CACHE};
pub use upstream::{HashKey, HealthCheck, Policy, ServerLine, UpstreamConfig};

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
    /// Who may be answered (nginx `allow`/`deny` in the `http` block): `["allow 10.0.0.0/8",
    /// "deny all"]`, read in order against the real client address; refused: 403. A site or a
    /// location with rules of its own uses those instead. Empty: everyone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<AccessRule>,
    /// Worker threads for models that use a fixed number (default: one per core; at least 1).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_threads"
    )]
    pub threads: Option<usize>,
    /// Combined Log Format access log.
    pub access_log: AccessLogTarget,
    /// What its lines hold (nginx `log_format`): `"combined"`, `"json"`, or a template of
    /// nginx's variables.
    pub access_log_format: AccessLogFormat,
    /// `[timeouts]`: how long each phase of a connection may take.
    pub timeouts: Timeouts,
    /// `[limits]`: sizes and counts past which a request or client is refused.
    pub limits: LimitsConfig,
    /// `[static_files]`: how files under `root` are served.
    pub static_files: StaticConfig,
    /// `[echo]`: the fibers paper's echo function and where it is mounted.
    pub echo: EchoConfig,
    /// `[health]`: the health check a load balancer polls.
    pub health: HealthConfig,
    /// `[status]`: the status page and metrics, and who may read them.
    pub status: StatusConfig,
    /// `[fiber]`: the fiber model's stacks, lingering and accept strategy.
    pub fiber: FiberConfig,
    /// `[cache]`: the response cache of static files.
    pub cache: CacheConfig,
    /// `[process]`: the process model's children.
    pub process: ProcessConfig,
    /// `[cgi]`: CGI scripts, their mount and their limits.
    pub cgi: CgiConfig,
    /// Reverse-proxy mounts (`[[proxy]]`, or `--proxy /PREFIX=URL`).
    pub proxy: Vec<ProxyConfig>,
    /// Groups of upstream servers a proxy mount names as `upstream:NAME` (`[[upstream]]`).
    pub upstream: Vec<UpstreamConfig>,
    /// FastCGI mounts (`[[fastcgi]]`, or `--fastcgi /PREFIX=unix:/PATH`): php-fpm and the like.
    pub fastcgi: Vec<FastcgiConfig>,
    /// `[timing]`: per-request phase timing (`--timing`).
    pub timing: TimingConfig,
    /// `[pipeline]`: the pipeline model's stages and controller.
    pub pipeline: PipelineConfig,
    /// Serve as this user (`NAME` or `NAME:GROUP`) once the listeners are bound, when started
    /// as root (nginx `user`). See `privdrop`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Started as root without `user`: serve as root anyway (otherwise refused on addresses
    /// other hosts can reach).
    pub allow_root: bool,
    /// Requests per client address (nginx `limit_req`).
    pub rate_limit: rate_limit::RateLimitConfig,
    /// Virtual hosts (`[[site]]`, see `sites.rs`); none: the settings above serve every host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub site: Vec<sites::SiteConfig>,
    /// Content codings (`[compression]`, see `compress.rs`).
    pub compression: compression::CompressionConfig,
    /// Certificates and settings of the TLS listeners (`[tls]`, `crate::tls`).
    pub tls: tls::TlsConfig,
    /// Certificates obtained and renewed by weft (`[acme]`, `crate::acme`).
    pub acme: AcmeConfig,
    /// The thread and pipeline models' threads.
    pub thread: ThreadConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("www"),
            listen: Vec::new(),
            real_ip_from: Vec::new(),
            access: Vec::new(),
            threads: None,
            access_log: AccessLogTarget::Off,
            access_log_format: AccessLogFormat::Combined,
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
            upstream: Vec::new(),
            fastcgi: Vec::new(),
            timing: TimingConfig::default(),
            pipeline: PipelineConfig::default(),
            user: None,
            allow_root: false,
            rate_limit: Default::default(),
            site: Vec::new(),
            compression: Default::default(),
            tls: tls::TlsConfig::default(),
            acme: AcmeConfig::default(),
            thread: ThreadConfig::default(),
        }
    }
}

/// The address served when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

impl Config {
    /// Parses a TOML configuration's syntax and types; [`Config::from_toml`] (in
    /// `crate::sites`, whose rules a configuration's sites must also pass) is the whole check.
    pub(crate) fn parse_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let mut first = toml_error(text, &e);
            first.more = further_errors(text, &first).into();
            first
        })
    }

    /// The configuration as a TOML file that `from_toml` reads back to the same value
    /// (`weft check` prints it).
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| e.to_string())
    }

    /// Whether a proxy mount (top level, a site's, a location's) talks TLS to its upstream
    /// (the fiber model then gives fibers the stack a TLS handshake needs).
    pub fn proxies_to_https(&self) -> bool {
        let https = |u: &str| u.starts_with("https://");
        self.upstream.iter().any(|u| u.tls)
            || self.proxy.iter().any(|p| https(&p.upstream))
            || self.site.iter().any(|s| {
                s.proxy.iter().any(|p| https(&p.upstream))
                    || s.location
                        .iter()
                        .any(|l| l.proxy.as_deref().is_some_and(https))
            })
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

/// Refuses two listeners that cannot both bind: the same address and port, or a wildcard
/// address (`0.0.0.0`, `[::]`) and another address of its family on the same port (the
/// kernel refuses the second bind either way; said here, `weft check` finds it too, and the
/// error names both listeners instead of "another process"). Port 0 never conflicts.
pub fn listen_conflicts(listeners: &[Listen]) -> Result<(), String> {
    for (i, a) in listeners.iter().enumerate() {
        for (j, b) in listeners.iter().enumerate().skip(i + 1) {
            let (x, y) = (a.addr, b.addr);
            if x.port() == 0 || x.port() != y.port() || x.is_ipv4() != y.is_ipv4() {
                continue;
            }
            if x.ip() == y.ip() {
                return Err(format!(
                    "listen address {x} is configured twice (listeners {} and {})",
                    i + 1,
                    j + 1
                ));
            }
            if x.ip().is_unspecified() || y.ip().is_unspecified() {
                return Err(format!(
                    "listen addresses {x} and {y} overlap (listeners {} and {}): the wildcard \
                     address already takes port {} on every address; keep one of them",
                    i + 1,
                    j + 1,
                    x.port()
                ));
            }
        }
    }
    Ok(())
}

/// The [`ConfigError`] of a TOML error: its line and column, and the key as a dotted path
/// (`[[listen]]` entries and array elements as `[i]`), found by walking the document's spans.
fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let mut message = e.message().trim_end().to_string();
    if let Some(hint) = unknown_key_hint(&message) {
        message.push_str("; ");
        message.push_str(&hint);
    }
    let err = ConfigError::new(message);
    let Some(at) = e.span().map(|s| s.start) else {
        return err;
    };
    let mut path = String::new();
    let found =
        toml_edit::ImDocument::parse(text).is_ok_and(|doc| key_at(doc.as_table(), at, &mut path));
    let err = err.at(text, at);
    if found {
        err.key(path)
    } else {
        err
    }
}

/// At most this many problems are reported for one configuration.
const MAX_PROBLEMS: usize = 20;

/// The problems after `first` in `text`: each found by leaving out the setting of the one
/// before (its key) and reading the rest again, until it reads or a problem names no key it
/// can leave out (a syntax error stops it).
fn further_errors(text: &str, first: &ConfigError) -> Vec<ConfigError> {
    let mut more: Vec<ConfigError> = Vec::new();
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else {
        return more;
    };
    let mut key = first.key.clone();
    while more.len() + 1 < MAX_PROBLEMS {
        let Some(k) = key.take() else { break };
        if !remove_key(doc.as_item_mut(), &k) {
            break;
        }
        let rest = doc.to_string();
        let Err(e) = toml::from_str::<Config>(&rest) else {
            break;
        };
        // Positions are in `rest`; the setting's line in `text` is found by its key.
        let found = toml_error(&rest, &e);
        let mut err = ConfigError::new(found.message);
        if let Some(k) = &found.key {
            if let Some(at) = key_span(text, k) {
                err = err.at(text, at);
            }
            err = err.key(k.clone());
        }
        if more
            .iter()
            .chain([first])
            .any(|m| m.key == err.key && m.message == err.message)
        {
            break;
        }
        key = err.key.clone();
        more.push(err);
    }
    more
}

/// The segments of a dotted key as errors name it: `site[1].hosts[0]` is `site`, `1`,
/// `hosts`, `0` (indexes as numbers).
fn key_segments(key: &str) -> Vec<Result<&str, usize>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, idx) = part.split_once('[').map_or((part, ""), |(n, i)| (n, i));
        if !name.is_empty() {
            out.push(Ok(name));
        }
        for i in idx.split('[').filter(|i| !i.is_empty()) {
            if let Ok(n) = i.trim_end_matches(']').parse() {
                out.push(Err(n));
            }
        }
    }
    out
}

/// Removes the setting named `key` (as [`key_segments`] reads it) from `root`; false if there
/// is none.
fn remove_key(root: &mut toml_edit::Item, key: &str) -> bool {
    let segs = key_segments(key);
    let Some((last, path)) = segs.split_last() else {
        return false;
    };
    let mut item = root;
    for seg in path {
        let next = match *seg {
            Ok(name) => item.get_mut(name),
            Err(i) => item.get_mut(i),
        };
        match next {
            Some(n) => item = n,
            None => return false,
        }
    }
    match *last {
        Ok(name) => item
            .as_table_like_mut()
            .is_some_and(|t| t.remove(name).is_some()),
        Err(i) => {
            if let Some(a) = item.as_array_of_tables_mut() {
                if i < a.len() {
                    a.remove(i);
                    return true;
                }
            } else if let Some(a) = item.as_array_mut() {
                if i < a.len() {
                    a.remove(i);
                    return true;
                }
            }
            false
        }
    }
}

/// The byte offset of the setting `key` in `text` (its key, or its value for an array
/// element), if it is there.
fn key_span(text: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let segs = key_segments(key);
    let (last, path) = segs.split_last()?;
    let mut item = doc.as_item();
    for seg in path {
        item = match *seg {
            Ok(name) => item.get(name)?,
            Err(i) => item.get(i)?,
        };
    }
    match *last {
        Ok(name) => item.as_table_like()?.key(name)?.span().map(|s| s.start),
        Err(i) => item.get(i)?.span().map(|s| s.start),
    }
}

/// nginx directives and the weft key that does their job (docs/configuration.md has every
/// key with its nginx analogue): said when one is written as a weft key.
const NGINX_NAMES: &[(&str, &str)] = &[
    ("worker_processes", "threads"),
    ("worker_connections", "limits.max_connections"),
    ("keepalive_timeout", "timeouts.keepalive"),
    ("keepalive_requests", "limits.keepalive_requests"),
    ("keepalive_time", "timeouts.keepalive_time"),
    ("client_header_timeout", "timeouts.header_read"),
    ("client_body_timeout", "timeouts.body_read"),
    ("send_timeout", "timeouts.send"),
    ("worker_shutdown_timeout", "timeouts.shutdown_grace"),
    ("client_max_body_size", "limits.max_body"),
    ("client_body_buffer_size", "limits.client_body_buffer"),
    ("large_client_header_buffers", "limits.max_head_bytes"),
    ("log_format", "access_log_format"),
    ("set_real_ip_from", "real_ip_from"),
    ("server_name", "site.hosts"),
    ("ssl_certificate", "tls.cert"),
    ("ssl_certificate_key", "tls.key"),
    ("ssl_client_certificate", "tls.client_ca"),
    ("ssl_verify_client", "tls.verify_client"),
    ("ssl_session_tickets", "tls.session_tickets"),
    ("ssl_stapling_file", "tls.ocsp"),
    ("open_file_cache", "cache.enabled"),
    ("gzip", "compression.enabled"),
    ("gzip_types", "compression.types"),
    ("gzip_min_length", "compression.min_length"),
    ("gzip_comp_level", "compression.gzip_level"),
    ("gzip_static", "compression.precompressed"),
    ("autoindex", "static_files.autoindex"),
    ("index", "static_files.index"),
    ("charset", "static_files.charset"),
    ("stub_status", "status.enabled"),
    ("proxy_pass", "proxy.upstream"),
    ("proxy_connect_timeout", "proxy.connect_timeout"),
    ("proxy_read_timeout", "proxy.read_timeout"),
    ("proxy_request_buffering", "proxy.request_buffering"),
    ("underscores_in_headers", "proxy.underscores_in_headers"),
    ("fastcgi_pass", "fastcgi.server"),
    ("fastcgi_index", "fastcgi.index"),
    ("fastcgi_param", "fastcgi.params"),
    ("fastcgi_read_timeout", "fastcgi.read_timeout"),
    ("error_page", "site.errors"),
    ("try_files", "site.location.try_files"),
    ("auth_basic_user_file", "site.auth.users"),
    ("limit_conn", "limits.conn_per_ip"),
    ("limit_req", "rate_limit.rate"),
    ("allow", "access"),
    ("deny", "access"),
];

/// For serde's "unknown field `X`, expected one of `a`, `b`": what the writer likely meant, an
/// nginx directive's weft key or an expected key within two edits of `X`.
fn unknown_key_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    if let Some((_, key)) = NGINX_NAMES.iter().find(|(n, _)| *n == field) {
        return Some(format!(
            "`{field}` is nginx's name: weft's is `{key}` (docs/configuration.md)"
        ));
    }
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let (best, d) = candidates
        .iter()
        .map(|c| (*c, edit_distance(field, c)))
        .min_by_key(|&(_, d)| d)?;
    (d <= 2 && d < field.len()).then(|| format!("did you mean `{best}`?"))
}

/// Levenshtein distance between `a` and `b` (bytes: keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
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
mod tests;
