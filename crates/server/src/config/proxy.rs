//! `[[proxy]]`: reverse-proxy mounts.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, ser_duration};

/// One reverse-proxy mount (see `handlers/proxy/`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Requests whose path starts with this (and still does once normalised) are forwarded;
    /// empty for a fallback-only entry.
    pub prefix: String,
    /// `http://HOST[:PORT]` or `https://HOST[:PORT]`, resolved once at start, or
    /// `upstream:NAME`, an `[[upstream]]` group.
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
    /// Longest time a tunnel (a WebSocket, or any `Upgrade` the upstream answered with
    /// `101`) stays open with no byte moving either way (nginx: `proxy_read_timeout`, which
    /// closes an idle WebSocket after 60 s unless raised; 1 h here, as WebSockets often idle
    /// between messages).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub tunnel_idle: Duration,
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
    /// Forward request header fields whose names contain `_` (nginx
    /// `underscores_in_headers`). Off by default: an upstream that reads `_` as `-` would take
    /// `Transfer_Encoding` or `X_Forwarded_For` for the field a proxy in front set or framed
    /// the request by (a second request smuggled in its body), so such fields are dropped.
    pub underscores_in_headers: bool,
    /// How often the URL's host name is resolved again (0: only at start); see
    /// `[[upstream]] resolve_every`.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub resolve_every: Duration,
    /// An `https://` upstream's certificate is checked against these PEM CA certificates
    /// (nginx `proxy_ssl_trusted_certificate`); none: the system's CA bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Check an `https://` upstream's certificate and name (nginx `proxy_ssl_verify`, off
    /// there by default; on here). Off: any certificate is taken, as nginx's default.
    pub tls_verify: bool,
    /// The name sent as SNI and checked in the certificate (nginx `proxy_ssl_name`); none: the
    /// URL's host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_name: Option<String>,
    /// A client certificate (PEM chain) for upstreams that ask for one (nginx
    /// `proxy_ssl_certificate`), with `tls_key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// Its private key (nginx `proxy_ssl_certificate_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
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
            tunnel_idle: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(30),
            max_idle: 32,
            request_buffering: true,
            underscores_in_headers: false,
            resolve_every: Duration::from_secs(30),
            tls_ca: None,
            tls_verify: true,
            tls_name: None,
            tls_cert: None,
            tls_key: None,
        }
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
