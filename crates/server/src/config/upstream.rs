//! `[[upstream]]`: a named group of servers the reverse proxy balances over (nginx's
//! `upstream` block); a `[[proxy]]` mount or a location names it as `upstream:NAME`.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de::{de_duration, ser_duration};

/// One `[[upstream]]` group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// What mounts call it (`upstream = "upstream:NAME"`), and the `Host` sent with
    /// `host = "upstream"` (nginx's `$proxy_host`).
    pub name: String,
    /// Its servers as nginx writes a `server` line: `ADDR [weight=N] [max_fails=N]
    /// [fail_timeout=DURATION] [backup]`, ADDR `HOST:PORT` or `unix:/PATH`.
    pub servers: Vec<String>,
    /// How a request picks a server: `round_robin` (weighted), `least_conn` (fewest requests
    /// in flight per weight), `ip_hash` (the client's address), or `hash $VAR` with `$uri`,
    /// `$request_uri`, `$remote_addr`, `$args` or `$http_NAME` (a consistent ring: adding a
    /// server moves about 1/N of the keys).
    pub policy: Policy,
    /// Failures within `fail_timeout` that mark a server down for `fail_timeout` (nginx
    /// `max_fails`, 1); 0: never marked down by failures. A `server` line may say its own.
    pub max_fails: u32,
    /// The window of `max_fails`, and how long a server stays down after it (nginx
    /// `fail_timeout`, 10 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub fail_timeout: Duration,
    /// What sends a request on to the next server (nginx `proxy_next_upstream`): `error`
    /// (connect refused or reset, a connection that died before any response byte), `timeout`
    /// (connecting, or waiting for the response head), `http_502`, `http_503`, `http_504`.
    /// Idempotent requests with no body or a buffered one only.
    pub retry_on: Vec<String>,
    /// Servers one request may try (nginx `proxy_next_upstream_tries`); 0: each once.
    pub tries: usize,
    /// How long a request may go on trying servers (nginx `proxy_next_upstream_timeout`);
    /// 0: no bound beyond each try's own timeouts.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub try_timeout: Duration,
    /// Idle keep-alive connections kept per server (nginx `keepalive`).
    pub max_idle: usize,
    /// An idle pooled connection older than this is closed rather than reused.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub idle_timeout: Duration,
    /// How often server names are resolved again, so a backend that moves (a Kubernetes
    /// Service, DNS failover) is followed without a reload (nginx Plus `resolve`); 0: only at
    /// start. Resolution runs on a thread of its own, never on a serving one.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub resolve_every: Duration,
    /// The servers speak TLS (nginx `proxy_pass https://NAME`), checked as a `[[proxy]]`
    /// mount's `https://` upstream is, with the `tls_*` keys below.
    pub tls: bool,
    /// As `[[proxy]] tls_ca`: the CAs the servers' certificates must chain to; none: the
    /// system's bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// As `[[proxy]] tls_verify`.
    pub tls_verify: bool,
    /// As `[[proxy]] tls_name`: SNI and the name checked; none: the first server's host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_name: Option<String>,
    /// As `[[proxy]] tls_cert`: a client certificate, with `tls_key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// As `[[proxy]] tls_key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Active health checks (nginx Plus `health_check`, HAProxy `check`); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthCheck>,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            name: String::new(),
            servers: Vec::new(),
            policy: Policy::RoundRobin,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            retry_on: vec!["error".into(), "timeout".into()],
            tries: 0,
            try_timeout: Duration::ZERO,
            max_idle: 32,
            idle_timeout: Duration::from_secs(30),
            resolve_every: Duration::from_secs(30),
            tls: false,
            tls_ca: None,
            tls_verify: true,
            tls_name: None,
            tls_cert: None,
            tls_key: None,
            health: None,
        }
    }
}

/// `[upstream.health]`: a request to every server every `interval`; `fall` failures in a row
/// mark it down (no new requests), `rise` successes in a row bring it back.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthCheck {
    /// The path asked for (`GET PATH HTTP/1.1`); any 2xx or 3xx answer passes.
    pub path: String,
    /// Between two checks of a server.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub interval: Duration,
    /// Longest wait for a check's connection and answer.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// Failed checks in a row that mark a server down.
    pub fall: u32,
    /// Passed checks in a row that bring it back.
    pub rise: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            path: "/".into(),
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            fall: 3,
            rise: 2,
        }
    }
}

/// `[[upstream]] policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Weighted round robin.
    RoundRobin,
    /// Fewest requests in flight per weight.
    LeastConn,
    /// A consistent hash of the client's address.
    IpHash,
    /// A consistent hash of a request variable.
    Hash(HashKey),
}

/// What `hash $VAR` hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// `$uri`: the path.
    Uri,
    /// `$request_uri`: the target as sent.
    RequestUri,
    /// `$remote_addr`: the client's address.
    RemoteAddr,
    /// `$args`: the query.
    Args,
    /// `$http_NAME`: a request header (`_` for `-`).
    Header(String),
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s.trim() {
            "round_robin" => return Ok(Policy::RoundRobin),
            "least_conn" => return Ok(Policy::LeastConn),
            "ip_hash" => return Ok(Policy::IpHash),
            _ => {}
        }
        let bad = || {
            format!(
                "upstream policy `{s}`: expected round_robin, least_conn, ip_hash or \"hash \
                 $VAR\" ($uri, $request_uri, $remote_addr, $args, $http_NAME)"
            )
        };
        let var = s.trim().strip_prefix("hash ").ok_or_else(bad)?.trim();
        let key = match var {
            "$uri" => HashKey::Uri,
            "$request_uri" => HashKey::RequestUri,
            "$remote_addr" => HashKey::RemoteAddr,
            "$args" | "$query_string" => HashKey::Args,
            v => {
                let name = v.strip_prefix("$http_").ok_or_else(bad)?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(bad());
                }
                HashKey::Header(name.replace('_', "-"))
            }
        };
        Ok(Policy::Hash(key))
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::RoundRobin => f.write_str("round_robin"),
            Policy::LeastConn => f.write_str("least_conn"),
            Policy::IpHash => f.write_str("ip_hash"),
            Policy::Hash(k) => match k {
                HashKey::Uri => f.write_str("hash $uri"),
                HashKey::RequestUri => f.write_str("hash $request_uri"),
                HashKey::RemoteAddr => f.write_str("hash $remote_addr"),
                HashKey::Args => f.write_str("hash $args"),
                HashKey::Header(h) => write!(f, "hash $http_{}", h.replace('-', "_")),
            },
        }
    }
}

impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One `server` line of a group, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// `HOST:PORT` or `unix:/PATH`.
    pub addr: String,
    /// Its share of the requests (1 to 1000).
    pub weight: u32,
    /// Its own `max_fails`, else the group's.
    pub max_fails: Option<u32>,
    /// Its own `fail_timeout`, else the group's.
    pub fail_timeout: Option<Duration>,
    /// Used only while every other server is down.
    pub backup: bool,
}

impl FromStr for ServerLine {
    type Err = String;
    fn from_str(s: &str) -> Result<ServerLine, String> {
        let mut words = s.split_whitespace();
        let addr = words
            .next()
            .ok_or_else(|| "an empty upstream server".to_string())?;
        let mut line = ServerLine {
            addr: addr.to_string(),
            weight: 1,
            max_fails: None,
            fail_timeout: None,
            backup: false,
        };
        for w in words {
            let bad = |why: &str| format!("upstream server `{s}`: `{w}`: {why}");
            match w.split_once('=') {
                Some(("weight", v)) => {
                    line.weight = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| bad("a weight from 1 to 1000"))?;
                }
                Some(("max_fails", v)) => {
                    line.max_fails = Some(v.parse().map_err(|_| bad("a count"))?);
                }
                Some(("fail_timeout", v)) => {
                    line.fail_timeout = Some(super::de::parse_duration(v).map_err(|e| bad(&e))?);
                }
                None if w == "backup" => line.backup = true,
                _ => {
                    return Err(bad(
                        "expected weight=N, max_fails=N, fail_timeout=DURATION or backup",
                    ))
                }
            }
        }
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lines_as_nginx_writes_them() {
        let l: ServerLine = "10.0.0.1:8000 weight=3 max_fails=2 fail_timeout=5s backup"
            .parse()
            .unwrap();
        assert_eq!(
            l,
            ServerLine {
                addr: "10.0.0.1:8000".into(),
                weight: 3,
                max_fails: Some(2),
                fail_timeout: Some(Duration::from_secs(5)),
                backup: true,
            }
        );
        let l: ServerLine = "unix:/run/app.sock".parse().unwrap();
        assert_eq!((l.weight, l.backup), (1, false));
        for bad in [
            "",
            "a:1 weight=0",
            "a:1 weight=x",
            "a:1 down",
            "a:1 fail_timeout=soon",
        ] {
            assert!(bad.parse::<ServerLine>().is_err(), "{bad}");
        }
    }

    #[test]
    fn policies_read_and_write_back() {
        for p in [
            "round_robin",
            "least_conn",
            "ip_hash",
            "hash $uri",
            "hash $request_uri",
            "hash $remote_addr",
            "hash $args",
            "hash $http_x_user",
        ] {
            assert_eq!(p.parse::<Policy>().unwrap().to_string(), p);
        }
        assert_eq!(
            "hash $http_x_user".parse::<Policy>().unwrap(),
            Policy::Hash(HashKey::Header("x-user".into()))
        );
        for bad in [
            "random",
            "hash",
            "hash $cookie_a",
            "hash $http_",
            "hash $http_a-b",
        ] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }
}
