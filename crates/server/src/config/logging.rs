//! The access log's target and format, and `[timing]`.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// No access log (`"off"`, the default).
    Off,
    /// Lines to standard output (`"stdout"` or `"-"`).
    Stdout,
    /// Lines appended to this file, reopened on SIGUSR1.
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

/// What an access-log line holds (`access_log_format`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AccessLogFormat {
    /// Apache's and nginx's Combined Log Format (`"combined"`, the default).
    #[default]
    Combined,
    /// One JSON object a line (`"json"`): nginx's combined fields and a few more, valid UTF-8
    /// and valid JSON whatever bytes the client sent.
    Json,
    /// A line of text with nginx's variables (`"$remote_addr \"$request\" $status"`), each
    /// value escaped as nginx's default escaping does.
    Template(Vec<Piece>),
}

impl AccessLogFormat {
    /// Whether a line needs the time a request arrived (`$request_time`; the JSON format
    /// has it): then the application reads the clock per request for it.
    pub fn needs_arrival(&self) -> bool {
        match self {
            AccessLogFormat::Combined => false,
            AccessLogFormat::Json => true,
            AccessLogFormat::Template(pieces) => pieces
                .iter()
                .any(|p| matches!(p, Piece::Var(Var::RequestTime))),
        }
    }
}

/// A piece of an access-log template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Written as it is.
    Text(String),
    /// Replaced by its value, escaped (`-` for none).
    Var(Var),
}

/// The variables a template may use (nginx's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// `$remote_addr`: the client (after PROXY protocol and `real_ip_from`).
    RemoteAddr,
    /// `$remote_user`: always `-` (the user of Basic authentication is not logged).
    RemoteUser,
    /// `$time_local`: `10/Oct/2000:13:55:36 +0000` (UTC).
    TimeLocal,
    /// `$time_iso8601`: `2000-10-10T13:55:36+00:00`.
    TimeIso8601,
    /// `$msec`: seconds since the epoch with milliseconds.
    Msec,
    /// `$request`: the request line.
    Request,
    /// `$request_method`.
    RequestMethod,
    /// `$request_uri`: the target as sent.
    RequestUri,
    /// `$uri`: the path, without the query.
    Uri,
    /// `$args` (or `$query_string`): the query.
    Args,
    /// `$server_protocol`: `HTTP/1.1`, `HTTP/2.0`.
    ServerProtocol,
    /// `$status`.
    Status,
    /// `$body_bytes_sent`.
    BodyBytesSent,
    /// `$host`: the request's host.
    Host,
    /// `$scheme`: `http` or `https`.
    Scheme,
    /// `$ssl_protocol`: `TLSv1.3`, `TLSv1.2`.
    SslProtocol,
    /// `$request_time`: seconds, with milliseconds, from the application taking the request
    /// (its head read) to the line being written.
    RequestTime,
    /// `$upstream_response_time`: seconds, with milliseconds, from weft opening its request
    /// to a proxied server or FastCGI application to that one's response head (`-` for none).
    UpstreamResponseTime,
    /// `$ssl_client_verify`: `SUCCESS` or `NONE` (`[tls] verify_client`).
    SslClientVerify,
    /// `$ssl_client_s_dn`: the client certificate's subject, RFC 4514.
    SslClientSDn,
    /// `$ssl_client_i_dn`: its issuer, RFC 4514.
    SslClientIDn,
    /// `$ssl_client_serial`: its serial number in hex.
    SslClientSerial,
    /// `$ssl_client_fingerprint`: the SHA-1 of its DER in hex.
    SslClientFingerprint,
    /// `$http_NAME`: the request header NAME (`_` for `-`).
    Http(String),
}

/// The variables [`Var`] names, as a template writes them (for the error message).
pub const VARIABLES: &str = "$remote_addr $remote_user $time_local $time_iso8601 $msec $request \
    $request_method $request_uri $uri $args $query_string $server_protocol $status \
    $body_bytes_sent $request_time $upstream_response_time $host $scheme $ssl_protocol \
    $ssl_client_verify $ssl_client_s_dn \
    $ssl_client_i_dn $ssl_client_serial $ssl_client_fingerprint $http_NAME ($http_referer, $http_user_agent, ...)";

impl Var {
    fn named(name: &str) -> Option<Var> {
        Some(match name {
            "remote_addr" => Var::RemoteAddr,
            "remote_user" => Var::RemoteUser,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "msec" => Var::Msec,
            "request" => Var::Request,
            "request_method" => Var::RequestMethod,
            "request_uri" => Var::RequestUri,
            "uri" => Var::Uri,
            "args" | "query_string" => Var::Args,
            "server_protocol" => Var::ServerProtocol,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "host" => Var::Host,
            "scheme" => Var::Scheme,
            "ssl_protocol" => Var::SslProtocol,
            "request_time" => Var::RequestTime,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "ssl_client_verify" => Var::SslClientVerify,
            "ssl_client_s_dn" => Var::SslClientSDn,
            "ssl_client_i_dn" => Var::SslClientIDn,
            "ssl_client_serial" => Var::SslClientSerial,
            "ssl_client_fingerprint" => Var::SslClientFingerprint,
            n => {
                let h = n.strip_prefix("http_")?;
                if h.is_empty() || !h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    return None;
                }
                Var::Http(h.replace('_', "-"))
            }
        })
    }

    fn name(&self) -> String {
        match self {
            Var::RemoteAddr => "remote_addr".into(),
            Var::RemoteUser => "remote_user".into(),
            Var::TimeLocal => "time_local".into(),
            Var::TimeIso8601 => "time_iso8601".into(),
            Var::Msec => "msec".into(),
            Var::Request => "request".into(),
            Var::RequestMethod => "request_method".into(),
            Var::RequestUri => "request_uri".into(),
            Var::Uri => "uri".into(),
            Var::Args => "args".into(),
            Var::ServerProtocol => "server_protocol".into(),
            Var::Status => "status".into(),
            Var::BodyBytesSent => "body_bytes_sent".into(),
            Var::Host => "host".into(),
            Var::Scheme => "scheme".into(),
            Var::SslProtocol => "ssl_protocol".into(),
            Var::RequestTime => "request_time".into(),
            Var::UpstreamResponseTime => "upstream_response_time".into(),
            Var::SslClientVerify => "ssl_client_verify".into(),
            Var::SslClientSDn => "ssl_client_s_dn".into(),
            Var::SslClientIDn => "ssl_client_i_dn".into(),
            Var::SslClientSerial => "ssl_client_serial".into(),
            Var::SslClientFingerprint => "ssl_client_fingerprint".into(),
            Var::Http(h) => format!("http_{}", h.replace('-', "_")),
        }
    }
}

impl FromStr for AccessLogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "combined" | "" => return Ok(AccessLogFormat::Combined),
            "json" => return Ok(AccessLogFormat::Json),
            _ => {}
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            text.push_str(&rest[..i]);
            rest = &rest[i + 1..];
            let (name, after) = if let Some(r) = rest.strip_prefix('{') {
                let end = r.find('}').ok_or(format!("`{s}`: `${{` without `}}`"))?;
                (&r[..end], &r[end + 1..])
            } else {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            };
            let var = Var::named(name).ok_or(format!(
                "access_log_format: unknown variable `${name}`; known: {VARIABLES}"
            ))?;
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Var(var));
            rest = after;
        }
        text.push_str(rest);
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(AccessLogFormat::Template(pieces))
    }
}

impl std::fmt::Display for AccessLogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessLogFormat::Combined => f.write_str("combined"),
            AccessLogFormat::Json => f.write_str("json"),
            AccessLogFormat::Template(pieces) => {
                for p in pieces {
                    match p {
                        Piece::Text(t) => f.write_str(t)?,
                        Piece::Var(v) => write!(f, "${{{}}}", v.name())?,
                    }
                }
                Ok(())
            }
        }
    }
}

impl Serialize for AccessLogFormat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AccessLogFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
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
