//! `[[listen]]`: addresses and the concurrency model that serves each.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

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
    /// The architecture that serves this listener's connections (`fiber` by default).
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
    /// On a TLS listener, offer HTTP/2 in ALPN (`h2`, then `http/1.1`); false: HTTP/1.1
    /// only (nginx `listen ... ssl` without `http2 on`).
    #[serde(default = "yes")]
    pub http2: bool,
    /// On a plain listener, take HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3): a
    /// connection that begins with the HTTP/2 preface speaks HTTP/2, any other HTTP/1.1.
    #[serde(default)]
    pub h2c: bool,
    /// Pending connections the kernel queues for this listener before weft accepts them
    /// (nginx `listen ... backlog=`, 511 there; the kernel caps it at `net.core.somaxconn`).
    #[serde(default = "default_backlog")]
    pub backlog: u32,
    /// Connections per client address on this listener, counted apart from the other
    /// listeners (overrides `limits.conn_per_ip` for it; 0: no limit here). Not set: the
    /// server's `limits.conn_per_ip`, one count per address across every listener without
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_per_ip: Option<u32>,
    /// TCP congestion control for this listener's connections (`TCP_CONGESTION` on the
    /// listening socket, which accepted connections inherit; HAProxy's `bind ... cc`), e.g.
    /// `"reno"`, `"cubic"` or `"bbr"`: one the kernel has (`net.ipv4.tcp_available_congestion_control`;
    /// unprivileged, one in `tcp_allowed_congestion_control`). Not set: the system's
    /// default (`net.ipv4.tcp_congestion_control`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
}

fn yes() -> bool {
    true
}

fn default_model() -> Model {
    Model::DEFAULT
}

/// A burst of new connections (a load balancer's reconnect, a benchmark's start) waits in
/// the kernel's queue instead of being refused while the acceptors catch up.
pub(crate) fn default_backlog() -> u32 {
    4096
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
            http2: true,
            h2c: false,
            backlog: default_backlog(),
            conn_per_ip: None,
            congestion: None,
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
