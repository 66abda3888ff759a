//! HTTPS: the `[tls]` settings, the certificates (loaded and checked at start, chosen by SNI,
//! re-read on SIGHUP), and what a connection on a TLS listener needs from them.
//!
//! A TLS listener (`[[listen]] tls = true`, `weft serve --https ADDR`) runs the same
//! connection driver as a plain one: the model wraps its transport in `stream::TlsStream`
//! after `stream::handshake`, so `conn::serve` reads and writes plaintext and knows nothing
//! of records. rustls does the protocol; ring is its crypto provider (chosen by
//! `bench/spike/tls_provider`, ARCHITECTURE.md "Design choices").
//!
//! Promises:
//! - a certificate or key that does not load, a key that does not match its certificate, or a
//!   certificate without a name a client could check fails `weft serve` at start with the
//!   file's name and the reason (and a reload keeps the old certificates);
//! - TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1` (`ALPN`; `[[listen]] http2 = false` offers `http/1.1` only);
//! - session resumption by tickets (one key for the process, kept across reloads and
//!   inherited by the process model's children) and a bounded server-side cache
//!   (`[tls] session_cache` entries);
//! - certificates are re-read on SIGHUP: new connections get the new ones, open connections
//!   keep theirs (they hold their generation's `Tls`).

mod session;
pub(crate) mod stream;
mod ticketer;

use crate::acme::certs::ACME_TLS_ALPN;
pub(crate) use session::Session;
pub(crate) use stream::{pending, TlsStream};

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::config::Config;
pub use crate::request::TlsInfo;

/// Application protocols offered in ALPN, in preference order, on a listener with HTTP/2
/// (`[[listen]] http2`, the default); a connection's choice is in [`TlsInfo::alpn`].
pub(crate) const ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// ALPN on a listener with `http2 = false`.
pub(crate) const ALPN_H1: &[&[u8]] = &[b"http/1.1"];

/// One generation's TLS settings: the rustls configuration every new connection of every TLS
/// listener starts from.
pub(crate) struct Tls {
    /// Offering `h2` and `http/1.1` ([`ALPN`]).
    pub(crate) server: Arc<ServerConfig>,
    /// The same offering only `http/1.1` ([`ALPN_H1`]), for listeners with `http2 = false`.
    pub(crate) server_h1: Arc<ServerConfig>,
    /// `Strict-Transport-Security: ...\r\n`, or empty.
    pub(crate) hsts_line: Vec<u8>,
    /// Client certificates are asked for (`[tls] verify_client` is not `off`).
    pub(crate) asks_client: bool,
    /// What each certificate served is and when it expires (metrics, status page).
    pub(crate) certificates: Arc<Certificates>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("hsts", &String::from_utf8_lossy(&self.hsts_line))
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads the certificates of `cfg` if any listener serves TLS (`None` if none does).
    /// The error names the file and what is wrong with it.
    pub(crate) fn from_config(cfg: &Config) -> Result<Option<Arc<Tls>>, String> {
        let listeners = cfg.listeners();
        if !listeners.iter().any(|l| l.tls) {
            return Ok(None);
        }
        let t = &cfg.tls;
        let acme = cfg.acme.enabled;
        if let Some(p) = cfg.acme.problem() {
            return Err(p);
        }
        if t.cert.is_some() != t.key.is_some() || (t.cert.is_none() && !acme) {
            return Err(
                "a TLS listener needs a certificate and a key ([tls] cert and key, or \
                        --tls-cert and --tls-key), or [acme] enabled to obtain them"
                    .into(),
            );
        }
        if t.hsts.contains(['\r', '\n']) || !t.hsts.is_ascii() {
            return Err(format!("[tls] hsts {:?} is not a header value", t.hsts));
        }
        let provider = Arc::new(provider());
        let ips: Vec<std::net::IpAddr> = listeners
            .iter()
            .filter(|l| l.tls && !l.addr.ip().is_unspecified())
            .map(|l| l.addr.ip())
            .collect();
        let mut certificates = Vec::new();
        let default = match (&t.cert, &t.key) {
            (Some(cert), Some(key)) => {
                let ck = load_pair(cert, key, t.ocsp.as_deref(), &provider)?;
                check_usable(&ck, cert, &ips)?;
                certificates.push(Certificate::of(&ck, None, Source::File));
                Some(Arc::new(ck))
            }
            _ => None,
        };
        let mut resolver = SniResolver {
            default: default.clone(),
            exact: HashMap::new(),
            wildcard: Vec::new(),
            alpn: None,
            provider: provider.clone(),
        };
        for entry in &t.sni {
            if entry.names.is_empty() {
                return Err(format!(
                    "[[tls.sni]] for {} lists no names",
                    entry.cert.display()
                ));
            }
            let ck = Arc::new(load_pair(
                &entry.cert,
                &entry.key,
                entry.ocsp.as_deref(),
                &provider,
            )?);
            certificates.push(Certificate::of(&ck, entry.names.first(), Source::File));
            for name in &entry.names {
                let name = name.trim().to_ascii_lowercase();
                check_name(&ck, &entry.cert, &name)?;
                match name.strip_prefix("*.") {
                    Some(suffix) => resolver.wildcard.push((format!(".{suffix}"), ck.clone())),
                    None => {
                        resolver.exact.insert(name, ck.clone());
                    }
                }
            }
        }
        if acme {
            managed(cfg, &mut resolver, &mut certificates)?;
        }
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS setup: {e}"))?;
        let asks_client = t.verify_client != crate::config::VerifyClient::Off;
        let builder = if asks_client {
            builder.with_client_cert_verifier(client_verifier(t, provider)?)
        } else {
            builder.with_no_client_auth()
        };
        let alpn_challenge = resolver.alpn.is_some();
        let mut server = builder.with_cert_resolver(Arc::new(resolver));
        server.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        if alpn_challenge {
            server.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
        }
        let lifetime = u32::try_from(t.ticket_key_lifetime.as_secs()).unwrap_or(u32::MAX);
        let shared = shared_state(t.session_cache, lifetime)?;
        if t.session_tickets {
            server.ticketer = shared.ticketer.clone();
        }
        server.session_storage = shared.cache.clone();
        let hsts_line = if t.hsts.is_empty() {
            Vec::new()
        } else {
            format!("Strict-Transport-Security: {}\r\n", t.hsts).into_bytes()
        };
        let mut server_h1 = server.clone();
        server_h1.alpn_protocols = ALPN_H1.iter().map(|p| p.to_vec()).collect();
        if alpn_challenge {
            server_h1.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
        }
        Ok(Some(Arc::new(Tls {
            server: Arc::new(server),
            server_h1: Arc::new(server_h1),
            hsts_line,
            asks_client,
            certificates: Arc::new(Certificates(certificates)),
        })))
    }
}

impl Tls {
    /// The rustls configuration a new connection on `listener` starts from: with or without
    /// `h2` in ALPN.
    pub(crate) fn config_for(
        &self,
        listener: &crate::metrics::ListenerMetrics,
    ) -> Arc<ServerConfig> {
        if listener.http2() {
            self.server.clone()
        } else {
            self.server_h1.clone()
        }
    }
}

/// The verifier of client certificates for `[tls] verify_client`: chains to one of
/// `client_ca`'s certificates, valid now, for client authentication. A client may send none
/// (`on` is enforced per request, with 400, as nginx answers a missing certificate).
fn client_verifier(
    t: &crate::config::TlsConfig,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let Some(path) = &t.client_ca else {
        return Err(
            "[tls] verify_client needs client_ca: the CAs client certificates \
                    must chain to"
                .into(),
        );
    };
    let text = std::fs::read(path)
        .map_err(|e| format!("[tls] client_ca {}: cannot read: {e}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.map_err(|e| format!("[tls] client_ca {}: not PEM: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("[tls] client_ca {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "[tls] client_ca {}: no CERTIFICATE block in the file",
            path.display()
        ));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("[tls] client_ca {}: {e}", path.display()))
}

/// A verified client certificate's names and fingerprint (`None`, logged, for one that
/// cannot be read: rustls verified it, so that would be weft's limit, not the client's).
pub(crate) fn client_cert(der: &[u8]) -> Option<crate::request::ClientCert> {
    let names = weft_http::x509::names(der)
        .map_err(|e| log::warn!("client certificate: cannot read its names ({e})"))
        .ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
    Some(crate::request::ClientCert {
        subject: names.subject,
        issuer: names.issuer,
        serial: names.serial,
        fingerprint: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// The crypto provider: ring (BENCHMARKS.md, "TLS crypto provider").
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// What outlives a generation: the ticket key (so a ticket issued before a reload still
/// resumes after it) and the session cache.
struct Shared {
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
    cache: Arc<dyn StoresServerSessions>,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// The process's ticket keys and session cache, made on first use. The cache's size and the
/// keys' period are the first configuration's (a reload that changes them takes effect at the
/// next start). The keys' secret is the one an upgrade handed over, else a new one, and is
/// handed on at the next upgrade (`ticketer.rs`).
fn shared_state(cache_entries: usize, lifetime_secs: u32) -> Result<&'static Shared, String> {
    if let Some(s) = SHARED.get() {
        return Ok(s);
    }
    let carried = crate::activation::carried(ticketer::SECRET_VAR);
    let secret = ticketer::secret(carried.as_deref())?;
    crate::activation::carry(ticketer::SECRET_VAR, ticketer::to_hex(&secret));
    let ticketer = ticketer::derived(&secret, lifetime_secs);
    let cache: Arc<dyn StoresServerSessions> = if cache_entries == 0 {
        Arc::new(rustls::server::NoServerSessionStorage {})
    } else {
        rustls::server::ServerSessionMemoryCache::new(cache_entries)
    };
    Ok(SHARED.get_or_init(|| Shared { ticketer, cache }))
}

/// A server certificate that is a CA's (`basicConstraints` CA:TRUE) is refused by clients
/// (webpki: `CaUsedAsEndEntity`; browsers: `ERR_CERT_INVALID`). One issued by another is the
/// usual mistake of naming the CA's or an intermediate's file: refused here. A self-signed
/// one (`openssl req -x509` makes CA:TRUE by default) is what tests and `curl -k` use: served,
/// with a warning.
fn refuse_ca_leaf(file: &Path, leaf: &CertificateDer<'_>) -> Result<(), String> {
    if !weft_http::x509::is_ca(leaf).unwrap_or(false) {
        return Ok(());
    }
    let why = "clients refuse a CA certificate from a server (webpki: CaUsedAsEndEntity; \
               browsers: ERR_CERT_INVALID)";
    let names = weft_http::x509::names(leaf).unwrap_or_default();
    if names.subject == names.issuer {
        log::warn!(
            "TLS certificate {}: a self-signed CA certificate (basicConstraints CA:TRUE): {why}; \
             fine for testing with verification off",
            file.display()
        );
        return Ok(());
    }
    Err(format!(
        "TLS certificate {}: the first certificate ({}) is a CA certificate (basicConstraints \
         CA:TRUE), issued by {}: {why}. Name the server's own certificate first, then its \
         intermediates",
        file.display(),
        names.subject,
        names.issuer
    ))
}

/// Reads a PEM chain and its key and checks they belong together.
fn load_pair(
    cert: &Path,
    key: &Path,
    ocsp: Option<&Path>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let text = std::fs::read(cert)
        .map_err(|e| format!("TLS certificate {}: cannot read: {e}", cert.display()))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS certificate {}: not PEM: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "TLS certificate {}: no CERTIFICATE block in the file",
            cert.display()
        ));
    }
    refuse_ca_leaf(cert, &chain[0])?;
    let key_text =
        std::fs::read(key).map_err(|e| format!("TLS key {}: cannot read: {e}", key.display()))?;
    let der = PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| {
        format!(
            "TLS key {}: no PKCS#8, RSA or EC private key in the file: {e}",
            key.display()
        )
    })?;
    let mut ck = CertifiedKey::from_der(chain, der, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "TLS key {} does not match certificate {}",
            key.display(),
            cert.display()
        ),
        e => format!(
            "TLS certificate {} with key {}: {e}",
            cert.display(),
            key.display()
        ),
    })?;
    if let Some(path) = ocsp {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("OCSP response {}: cannot read: {e}", path.display()))?;
        if bytes.is_empty() {
            return Err(format!("OCSP response {} is empty", path.display()));
        }
        // Stapled as it is, so a file that is not a successful response would end the
        // handshake of every client that asks for the status (as browsers do).
        weft_http::ocsp::check(&bytes)
            .map_err(|p| format!("OCSP response {}: {p}", path.display()))?;
        ck.ocsp = Some(bytes);
    }
    Ok(ck)
}

/// Refuses a default certificate no client could accept by name: no DNS name in its
/// subjectAltName and not valid for any address a TLS listener binds.
fn check_usable(ck: &CertifiedKey, path: &Path, ips: &[std::net::IpAddr]) -> Result<(), String> {
    let leaf = leaf(ck, path)?;
    if leaf.valid_dns_names().next().is_some() {
        return Ok(());
    }
    let by_ip = ips.iter().any(|ip| {
        let name = ServerName::IpAddress((*ip).into());
        leaf.verify_is_valid_for_subject_name(&name).is_ok()
    });
    if by_ip {
        return Ok(());
    }
    Err(format!(
        "TLS certificate {} has no usable name: no DNS name in its subjectAltName (clients \
         check the host name against it; the Common Name is not used)",
        path.display()
    ))
}

/// Refuses an SNI name its certificate is not valid for.
fn check_name(ck: &CertifiedKey, path: &Path, name: &str) -> Result<(), String> {
    let leaf = leaf(ck, path)?;
    // A wildcard entry is checked with a name it would match.
    let probe = match name.strip_prefix("*.") {
        Some(suffix) => format!("weft-sni-check.{suffix}"),
        None => name.to_string(),
    };
    let server = ServerName::try_from(probe.as_str())
        .map_err(|_| format!("[[tls.sni]] name {name:?} is not a host name"))?;
    leaf.verify_is_valid_for_subject_name(&server)
        .map_err(|_| {
            format!(
                "TLS certificate {} is not valid for the name {name:?} it is listed for",
                path.display()
            )
        })
        .map(drop)
}

fn leaf<'a>(ck: &'a CertifiedKey, path: &Path) -> Result<webpki::EndEntityCert<'a>, String> {
    let der = ck
        .end_entity_cert()
        .map_err(|e| format!("TLS certificate {}: {e}", path.display()))?;
    webpki::EndEntityCert::try_from(der)
        .map_err(|e| format!("TLS certificate {}: cannot parse: {e:?}", path.display()))
}

/// Adds the certificates `[acme]` manages to `resolver`: for each name no configured
/// certificate covers, the one in the storage, else a self-signed placeholder until the
/// first is obtained (logged). The first managed name's becomes the default when `[tls]`
/// names none.
fn managed(
    cfg: &Config,
    resolver: &mut SniResolver,
    certificates: &mut Vec<Certificate>,
) -> Result<(), String> {
    use crate::acme::{serve, store::Store};
    // A name a configured certificate serves: an exact [[tls.sni]] name, a wildcard entry
    // that matches it (or is it), or the [tls] certificate's names.
    let names = serve::names(cfg, |name| {
        resolver.exact.contains_key(name)
            || resolver
                .wildcard
                .iter()
                .any(|(suffix, _)| name == format!("*{suffix}") || one_label_before(name, suffix))
            || resolver.default.as_ref().is_some_and(|ck| covers(ck, name))
    })?;
    if names.is_empty() && resolver.default.is_none() {
        return Err(
            "[acme] is enabled but no name needs a certificate: list the sites' \
                    names in [[site]] hosts or [acme] names"
                .into(),
        );
    }
    let store = Store::new(&cfg.acme);
    let provider = resolver.provider.clone();
    for name in &names {
        let (ck, source) = match store.certificate(name) {
            Ok(Some(stored)) => match stored_pair(&stored, &provider) {
                Ok(mut ck) => {
                    ck.ocsp = stored_staple(&store, name, &ck);
                    (ck, Source::Acme)
                }
                Err(e) => {
                    log::error!("[acme] {name}: the stored certificate does not load ({e}); serving a placeholder");
                    (serve::placeholder(name, &provider)?, Source::Placeholder)
                }
            },
            Ok(None) => {
                log::warn!(
                    "[acme] {name}: no certificate obtained yet; serving a self-signed \
                     placeholder until it arrives"
                );
                (serve::placeholder(name, &provider)?, Source::Placeholder)
            }
            Err(e) => {
                log::error!("[acme] {name}: {e}; serving a placeholder");
                (serve::placeholder(name, &provider)?, Source::Placeholder)
            }
        };
        certificates.push(Certificate::of(&ck, Some(name), source));
        let ck = Arc::new(ck);
        if resolver.default.is_none() {
            resolver.default = Some(ck.clone());
        }
        resolver.exact.insert(name.clone(), ck);
    }
    if cfg.acme.answers("tls-alpn-01") {
        resolver.alpn = Some(serve::AlpnAnswers::new(&store));
    }
    Ok(())
}

/// Whether a stored certificate and key load as rustls serves them (`Err`: why not).
pub(crate) fn loads(stored: &crate::acme::store::Stored) -> Result<(), String> {
    stored_pair(stored, &provider()).map(drop)
}

/// `name`'s stored OCSP response for `ck`, if it is one to staple now (for this
/// certificate, good, current, signed by its issuer).
fn stored_staple(
    store: &crate::acme::store::Store,
    name: &str,
    ck: &CertifiedKey,
) -> Option<Vec<u8>> {
    let der = store.ocsp(name)?;
    let [leaf, issuer, ..] = ck.cert.as_slice() else {
        return None;
    };
    let issuer = weft_http::x509::issuer_key(issuer).ok()?;
    match crate::acme::staple::check(&der, leaf, &issuer, unix_now()) {
        Ok(_) => Some(der),
        Err(e) => {
            log::info!("[acme] {name}: the stored OCSP response is not stapled: {e}");
            None
        }
    }
}

/// A stored certificate and key as rustls serves them.
fn stored_pair(
    stored: &crate::acme::store::Stored,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&stored.chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(&stored.key_pem).map_err(|e| format!("key: {e}"))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| e.to_string())
}

/// Whether `ck`'s leaf is valid for `name`.
fn covers(ck: &CertifiedKey, name: &str) -> bool {
    let Ok(der) = ck.end_entity_cert() else {
        return false;
    };
    let (Ok(leaf), Ok(server)) = (
        webpki::EndEntityCert::try_from(der),
        ServerName::try_from(name),
    ) else {
        return false;
    };
    leaf.verify_is_valid_for_subject_name(&server).is_ok()
}

/// Where a served certificate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A file the configuration names.
    File,
    /// Obtained by `[acme]`.
    Acme,
    /// `[acme]`'s self-signed stand-in until one is obtained.
    Placeholder,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Acme => "acme",
            Source::Placeholder => "placeholder",
        }
    }
}

/// A served certificate: the name it is served for, where it came from, when it expires.
#[derive(Debug, Clone)]
pub(crate) struct Certificate {
    pub(crate) name: String,
    pub(crate) source: Source,
    /// Seconds since the epoch (`None`: the leaf's validity does not read).
    pub(crate) not_after: Option<i64>,
    /// The stapled OCSP response's `nextUpdate` (`None`: no staple).
    pub(crate) staple_until: Option<i64>,
}

impl Certificate {
    /// `ck` served for `name` (`None`: its first DNS name, as the default certificate).
    fn of(ck: &CertifiedKey, name: Option<&String>, source: Source) -> Certificate {
        let der = ck.end_entity_cert().ok();
        let not_after = der
            .and_then(|d| weft_http::x509::validity(d).ok())
            .map(|v| v.1);
        let name = name.cloned().or_else(|| {
            let leaf = webpki::EndEntityCert::try_from(der?).ok()?;
            let first = leaf.valid_dns_names().next().map(str::to_string);
            first
        });
        let staple_until = ck
            .ocsp
            .as_deref()
            .and_then(|d| weft_http::ocsp::read(d).ok())
            .and_then(|b| {
                b.responses
                    .first()
                    .map(weft_http::ocsp::Single::holds_until)
            });
        Certificate {
            name: name.unwrap_or_else(|| "default".into()),
            source,
            not_after,
            staple_until,
        }
    }
}

/// The certificates of one generation, as metrics and the status page show them.
#[derive(Debug, Default)]
pub(crate) struct Certificates(pub(crate) Vec<Certificate>);

/// A Prometheus label value: `\\`, `"` and a line feed escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl crate::metrics::Exposed for Certificates {
    fn prometheus(&self, out: &mut String) {
        use std::fmt::Write;
        if self.0.is_empty() {
            return;
        }
        out.push_str(
            "# HELP weft_tls_certificate_expiry_seconds Seconds until a served certificate \
             expires (negative: expired).\n# TYPE weft_tls_certificate_expiry_seconds gauge\n",
        );
        let now = unix_now();
        for c in &self.0 {
            if let Some(at) = c.not_after {
                let _ = writeln!(
                    out,
                    "weft_tls_certificate_expiry_seconds{{name=\"{}\",source=\"{}\"}} {}",
                    label(&c.name),
                    c.source.as_str(),
                    at - now
                );
            }
        }
    }

    fn json(&self) -> serde_json::Value {
        let now = unix_now();
        serde_json::Value::Array(
            self.0
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "name": c.name,
                        "source": c.source.as_str(),
                        "not_after": c.not_after,
                        "expires_in_s": c.not_after.map(|a| a - now),
                        "ocsp_until": c.staple_until,
                    })
                })
                .collect(),
        )
    }
}

/// Picks the certificate for the name in the ClientHello: an exact name, else the longest
/// wildcard suffix, else the default.
#[derive(Debug)]
struct SniResolver {
    /// The `[tls]` certificate, else the first name `[acme]` manages.
    default: Option<Arc<CertifiedKey>>,
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// (".example.com", key) for `*.example.com`: matches exactly one more label.
    wildcard: Vec<(String, Arc<CertifiedKey>)>,
    /// TLS-ALPN-01 answers (`[acme]` with `tls-alpn-01`).
    alpn: Option<crate::acme::serve::AlpnAnswers>,
    provider: Arc<CryptoProvider>,
}

impl SniResolver {
    fn pick(&self, name: Option<&str>) -> Option<&Arc<CertifiedKey>> {
        let Some(name) = name else {
            return self.default.as_ref();
        };
        // rustls hands the name lower-cased and without a trailing dot.
        if let Some(ck) = self.exact.get(name) {
            return Some(ck);
        }
        self.wildcard
            .iter()
            .filter(|(suffix, _)| one_label_before(name, suffix))
            .max_by_key(|(suffix, _)| suffix.len())
            .map_or(self.default.as_ref(), |(_, ck)| Some(ck))
    }
}

/// Whether `name` is one label followed by `suffix` (".example.com"): what `*.example.com`
/// matches.
fn one_label_before(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix)
        .is_some_and(|label| !label.is_empty() && !label.contains('.'))
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        session::hello_name(hello.server_name());
        if let Some(alpn) = &self.alpn {
            // A CA's validator offers `acme-tls/1` alone (RFC 8737 §3).
            let mut offered = hello.alpn().into_iter().flatten();
            if offered.any(|p| p == ACME_TLS_ALPN) {
                return alpn.certificate(hello.server_name(), &self.provider);
            }
        }
        self.pick(hello.server_name()).cloned()
    }
}

#[cfg(test)]
mod tests;
