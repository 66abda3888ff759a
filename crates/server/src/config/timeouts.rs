//! `[timeouts]`: how long weft waits for a client, each named after its nginx counterpart.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, ser_duration};

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
    /// Least average rate at which a client takes a response, in bytes/s, counted over the
    /// time sends wait for it: sends may wait `min_rate_grace` plus a second per this many
    /// bytes the client's kernel acknowledged on the connection, in all; past it the response
    /// is cut (a reader of a few bytes every few seconds never trips `send`). 0: off. See
    /// `net::SendRate`.
    pub send_min_rate: u64,
    /// The time a head or body has before the minimum rates apply; every byte adds
    /// `1/rate` seconds to it (mod_reqtimeout's initial timeout, 20 s).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub min_rate_grace: Duration,
    /// A TLS handshake from the first byte to its end (10 s; nginx bounds it with
    /// `client_header_timeout`, Caddy `read_timeout`); past it the connection closes.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub tls_handshake: Duration,
    /// After a connection's last response, how long what the client still sends is read and
    /// dropped before the socket closes, so that unread data cannot make the kernel reset the
    /// response away (nginx `lingering_time`, 30 s there; 2 s here: the drain only has to
    /// outlast data already in flight).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub lingering_time: Duration,
    /// The longest a connection carries requests, from its accept: the response after it says
    /// `Connection: close`, an HTTP/2 connection sends GOAWAY (nginx `keepalive_time`, 1 h).
    /// 0: no bound.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub keepalive_time: Duration,
    /// At a drain (SIGTERM, SIGUSR2's upgrade): how long an idle keep-alive connection is
    /// still given for its next request, which is answered with `Connection: close` (HTTP/2:
    /// GOAWAY), before it is closed; a client sending just as an idle connection closes would
    /// otherwise see an error (Envoy's `drain_timeout`). 0: idle connections close at once.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub drain_idle: Duration,
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
            send_min_rate: 500,
            min_rate_grace: Duration::from_secs(20),
            tls_handshake: Duration::from_secs(10),
            lingering_time: Duration::from_secs(2),
            keepalive_time: Duration::from_secs(3600),
            drain_idle: Duration::from_secs(1),
        }
    }
}
