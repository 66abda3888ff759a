//! `[tls]`: the certificates of the HTTPS listeners and their sessions (`crate::tls` loads
//! and serves them).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, ser_duration};

/// Default entries of the server-side session cache (nginx's `ssl_session_cache
/// shared:SSL:1m` holds about 4,000 sessions; an entry here is a few hundred bytes).
pub const DEFAULT_SESSION_CACHE: usize = 4096;

/// The `[tls]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first (nginx `ssl_certificate`): the default certificate,
    /// served when no `[[tls.sni]]` entry matches the name the client asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// PEM private key: PKCS#8, RSA (PKCS#1) or EC (SEC1) (nginx `ssl_certificate_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// A DER OCSP response stapled to the default certificate's handshakes (nginx
    /// `ssl_stapling_file`); re-read on SIGHUP like the certificates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ocsp: Option<PathBuf>,
    /// The `Strict-Transport-Security` value sent on every response over TLS, e.g.
    /// `"max-age=63072000"`; empty (the default): none.
    pub hsts: String,
    /// Session tickets (stateless resumption; nginx `ssl_session_tickets on`).
    pub session_tickets: bool,
    /// Entries of the server-side session cache (stateful resumption; nginx
    /// `ssl_session_cache`); 0 turns it off.
    pub session_cache: usize,
    /// How long a session-ticket key encrypts new tickets before the next one takes over;
    /// tickets are accepted for twice this (rustls' rotation, 6 h by default; nginx rotates only
    /// the keys an operator puts in `ssl_session_ticket_key`). Read at start.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub ticket_key_lifetime: Duration,
    /// More certificates, chosen by the name the client sends (SNI).
    pub sni: Vec<SniCert>,
    /// PEM certificates of the CAs a client certificate must chain to (nginx
    /// `ssl_client_certificate`); needed when `verify_client` is not `off`. Re-read on SIGHUP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
    /// Client certificates (mutual TLS; nginx `ssl_verify_client`): `off` asks for none;
    /// `optional` asks, and a client may send none; `on` asks, and a request over a
    /// connection without one gets 400. A certificate that does not verify against
    /// `client_ca` ends the handshake either way.
    pub verify_client: VerifyClient,
}

/// `[tls] verify_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyClient {
    /// No certificate asked for (the default).
    #[default]
    Off,
    /// Asked for; a client may send none.
    Optional,
    /// Asked for; requests on a connection without one get 400.
    On,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            cert: None,
            key: None,
            ocsp: None,
            hsts: String::new(),
            session_tickets: true,
            session_cache: DEFAULT_SESSION_CACHE,
            ticket_key_lifetime: Duration::from_secs(6 * 60 * 60),
            sni: Vec::new(),
            client_ca: None,
            verify_client: VerifyClient::Off,
        }
    }
}

/// One `[[tls.sni]]` entry: a certificate for the names listed (nginx: a `server` block's
/// `server_name` with its own `ssl_certificate`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SniCert {
    /// Host names, exact (`www.example.com`) or one leading wildcard label (`*.example.com`).
    pub names: Vec<String>,
    /// PEM certificate chain for these names, leaf first.
    pub cert: PathBuf,
    /// PEM private key of the certificate.
    pub key: PathBuf,
    /// A DER OCSP response stapled to this certificate's handshakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocsp: Option<PathBuf>,
}
