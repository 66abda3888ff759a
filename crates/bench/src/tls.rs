//! HTTPS for the load generator: a rustls client connection over weft-fiber's `TcpStream`.
//!
//! The TLS connection reads and writes its records through the fiber socket's
//! `read_deadline` / `write_deadline`, so a TLS exchange parks its fiber exactly where a plain
//! one would, bounded by the same deadlines. The handshake happens when the connection opens,
//! so a run with a new connection per request measures a handshake per request, and a
//! keep-alive run one per connection.
//!
//! Verification: by default the server's certificate must chain to the system's CA bundle;
//! `--cacert FILE` trusts the PEM certificates in FILE instead (a self-signed certificate is
//! its own CA), and `--insecure` accepts any certificate (the handshake's signature is still
//! checked, so the server's work is the same). Session resumption is off unless asked for
//! (`--tls-resume`): a new connection then costs a full handshake, the figure a benchmark of
//! handshake cost wants; with it, rustls resumes from its in-memory cache (TLS 1.3 tickets,
//! TLS 1.2 session IDs or tickets) as a browser would.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{self, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use weft_fiber::net::TcpStream;

use crate::target::BadInput;

/// Where the system's CA certificates usually are (Debian and derivatives first, then the Red
/// Hat family and Alpine); `SSL_CERT_FILE` takes precedence, as with OpenSSL.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// How the client verifies servers and whether it resumes sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Accept any certificate (curl's `--insecure`).
    pub insecure: bool,
    /// Trust only the PEM certificates in this file (curl's `--cacert`).
    pub cacert: Option<PathBuf>,
    /// Resume TLS sessions on new connections (off: every new connection is a full handshake).
    pub resume: bool,
}

/// The crypto provider of the client: ring, as the workspace's rustls is built with.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(crypto::ring::default_provider())
}

/// Reads every PEM certificate in `path`.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, BadInput> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(BadInput(format!(
            "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        )));
    }
    Ok(certs)
}

fn system_bundle() -> Option<PathBuf> {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// The roots a client trusts: `cacert`'s certificates, or the system bundle (empty when none
/// is installed: every certificate is then refused, with an error that says how to proceed).
fn roots(cacert: Option<&Path>) -> Result<RootCertStore, BadInput> {
    let mut store = RootCertStore::empty();
    let (path, explicit) = match cacert {
        Some(p) => (Some(p.to_path_buf()), true),
        None => (system_bundle(), false),
    };
    let Some(path) = path else {
        return Ok(store);
    };
    let certs = match read_certs(&path) {
        Ok(c) => c,
        Err(e) if explicit => return Err(e),
        Err(_) => return Ok(store),
    };
    let (added, ignored) = store.add_parsable_certificates(certs);
    if explicit && added == 0 {
        return Err(BadInput(format!(
            "{}: none of its {ignored} certificates can be a trust anchor",
            path.display()
        )));
    }
    Ok(store)
}

/// The client configuration for `o`: TLS 1.3 and 1.2 with rustls' default suites, ALPN
/// `http/1.1`.
pub fn client_config(o: &TlsOptions) -> Result<Arc<ClientConfig>, BadInput> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| BadInput(format!("TLS: {e}")))?;
    let mut config = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(o.cacert.as_deref())?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = if o.resume {
        Resumption::default()
    } else {
        Resumption::disabled()
    };
    Ok(Arc::new(config))
}

/// The configuration `https://` targets get when nobody chose one: the system's CAs, no
/// resumption. Built once.
pub fn default_config() -> Result<Arc<ClientConfig>, BadInput> {
    static DEFAULT: OnceLock<Result<Arc<ClientConfig>, BadInput>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| client_config(&TlsOptions::default()))
        .clone()
}

/// The name sent in SNI and checked against the certificate: `host` of the URL's authority
/// (brackets of an IPv6 literal removed). An IP address is checked against the certificate's
/// IP addresses and sends no SNI.
pub fn server_name(host: &str) -> Result<ServerName<'static>, BadInput> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(bare.to_string())
        .map_err(|e| BadInput(format!("{host}: not a name TLS can check ({e})")))
}

/// What an `https://` target needs to open its connections.
#[derive(Clone)]
pub struct TlsTarget {
    pub name: ServerName<'static>,
    pub config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTarget")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Reads of the fiber socket bounded by one deadline, as rustls' `read_tls` wants them.
struct Reader<'a> {
    s: &'a TcpStream,
    until: Instant,
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.read_deadline(buf, self.until)
    }
}

/// A client TLS connection over a fiber socket.
pub struct TlsStream {
    tcp: TcpStream,
    tls: ClientConnection,
    /// The records of one flight, sent in one write: rustls hands them over one by one, and
    /// a write each would put each in its own segment (and a small second segment behind
    /// Nagle's algorithm until the first is acknowledged).
    out: Vec<u8>,
}

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("tcp", &self.tcp)
            .field("version", &self.tls.protocol_version())
            .finish_non_exhaustive()
    }
}

/// A TLS error as an I/O error (`InvalidData`), its message rustls' own.
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsStream {
    /// Runs the handshake on `tcp` until `until`. With TLS 1.3 the client's Finished is still
    /// queued when this returns: it goes out in the same write as the first request, as
    /// browsers send it.
    pub fn handshake(tcp: TcpStream, t: &TlsTarget, until: Instant) -> io::Result<TlsStream> {
        let tls = ClientConnection::new(t.config.clone(), t.name.clone()).map_err(tls_error)?;
        let mut s = TlsStream {
            tcp,
            tls,
            out: Vec::new(),
        };
        while s.tls.is_handshaking() {
            s.flush(until)?;
            if !s.tls.is_handshaking() {
                break;
            }
            let n = s.tls.read_tls(&mut Reader { s: &s.tcp, until })?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
            if let Err(e) = s.tls.process_new_packets() {
                // Tell the server why (the alert rustls queued); the error is ours either way.
                let _ = s.flush(until);
                return Err(tls_error(e));
            }
        }
        Ok(s)
    }

    /// What the handshake agreed: protocol version, cipher suite and key exchange group, as
    /// rustls names them (`TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519`).
    pub fn negotiated(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = self.tls.protocol_version() {
            parts.push(format!("{v:?}"));
        }
        if let Some(s) = self.tls.negotiated_cipher_suite() {
            parts.push(format!("{:?}", s.suite()));
        }
        if let Some(g) = self.tls.negotiated_key_exchange_group() {
            parts.push(format!("{:?}", g.name()));
        }
        parts.join(" ")
    }

    /// Encrypts and sends all of `buf` (after anything still queued) before `until`.
    pub fn write_all_deadline(&mut self, buf: &[u8], until: Instant) -> io::Result<()> {
        self.tls.writer().write_all(buf)?;
        self.flush(until)
    }

    /// Reads decrypted bytes into `buf`, waiting for records until `until`. `Ok(0)` is the end
    /// of the stream: the server's `close_notify`, or its TCP close without one (which most
    /// HTTP/1.1 servers do after `Connection: close`; the HTTP framing tells a cut response).
    pub fn read_deadline(&mut self, buf: &mut [u8], until: Instant) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            self.tls.read_tls(&mut Reader {
                s: &self.tcp,
                until,
            })?;
            if let Err(e) = self.tls.process_new_packets() {
                let _ = self.flush(until);
                return Err(tls_error(e));
            }
            // A key update or an alert to answer.
            self.flush(until)?;
        }
    }

    /// Sends `close_notify` (best effort, no wait beyond `until`).
    pub fn close(&mut self, until: Instant) {
        self.tls.send_close_notify();
        let _ = self.flush(until);
    }

    /// Writes every TLS record rustls has queued, in one write where the socket takes it.
    fn flush(&mut self, until: Instant) -> io::Result<()> {
        while self.tls.wants_write() {
            self.tls.write_tls(&mut self.out)?;
        }
        let mut sent = 0;
        let r = loop {
            if sent == self.out.len() {
                break Ok(());
            }
            match self.tcp.write_deadline(&self.out[sent..], until) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.out.clear();
        r
    }
}

/// `--insecure`: any certificate is accepted, but the handshake signature is verified as
/// usual, so that the server does the same work either way.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Advice to add to a failed handshake's error: how to trust the server's certificate.
pub fn advice(e: &io::Error, o: &TlsOptions) -> &'static str {
    let text = e.to_string();
    if !text.contains("certificate") {
        ""
    } else if o.cacert.is_some() {
        " (the certificate does not chain to --cacert's certificates, or does not name this \
         host; --insecure skips the check)"
    } else {
        " (pass --cacert FILE with the certificate that issued it, or --insecure to skip the \
         check)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(matches!(
            server_name("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert_eq!(
            server_name("localhost").unwrap(),
            ServerName::try_from("localhost").unwrap()
        );
        assert!(server_name("bad name").is_err());
    }

    #[test]
    fn a_cacert_file_without_certificates_is_refused_with_its_name() {
        let p = std::env::temp_dir().join(format!("weft-bench-nocert-{}", std::process::id()));
        std::fs::write(&p, "not a certificate\n").unwrap();
        let e = client_config(&TlsOptions {
            cacert: Some(p.clone()),
            ..TlsOptions::default()
        })
        .unwrap_err();
        assert!(e.0.contains("no PEM certificate"), "{e}");
        assert!(e.0.contains(&p.display().to_string()), "{e}");
        let missing = client_config(&TlsOptions {
            cacert: Some(p.with_extension("missing")),
            ..TlsOptions::default()
        })
        .unwrap_err();
        assert!(missing.0.contains(".missing"), "{missing}");
        std::fs::remove_file(&p).unwrap();
    }
}
