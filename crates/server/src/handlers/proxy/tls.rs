//! `https://` upstreams: the rustls client configuration a mount makes once (its CA
//! certificates, its client certificate, the name it checks), shared by every connection of
//! the mount, so sessions resume across them (rustls's in-memory session cache).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// The `tls_*` keys of a `[[proxy]]` mount or an `[[upstream]]` group.
#[derive(Debug, Clone, Copy)]
pub(super) struct TlsKeys<'a> {
    pub(super) ca: Option<&'a Path>,
    pub(super) verify: bool,
    pub(super) name: Option<&'a str>,
    pub(super) cert: Option<&'a Path>,
    pub(super) key: Option<&'a Path>,
}

impl<'a> TlsKeys<'a> {
    pub(super) fn of_proxy(c: &'a crate::config::ProxyConfig) -> TlsKeys<'a> {
        TlsKeys {
            ca: c.tls_ca.as_deref(),
            verify: c.tls_verify,
            name: c.tls_name.as_deref(),
            cert: c.tls_cert.as_deref(),
            key: c.tls_key.as_deref(),
        }
    }

    pub(super) fn of_group(c: &'a crate::config::UpstreamConfig) -> TlsKeys<'a> {
        TlsKeys {
            ca: c.tls_ca.as_deref(),
            verify: c.tls_verify,
            name: c.tls_name.as_deref(),
            cert: c.tls_cert.as_deref(),
            key: c.tls_key.as_deref(),
        }
    }
}

/// A mount's TLS client: its configuration and the name it sends and checks.
#[derive(Debug, Clone)]
pub(super) struct UpstreamTls {
    pub(super) config: Arc<ClientConfig>,
    pub(super) name: ServerName<'static>,
}

impl UpstreamTls {
    /// The client `cfg` describes for an upstream at `host`. The error names the file and why.
    pub(super) fn new(cfg: TlsKeys<'_>, host: &str) -> Result<UpstreamTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("proxy TLS setup: {e}"))?;
        let builder = if cfg.verify {
            builder.with_root_certificates(roots(cfg.ca)?)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        };
        let mut config = match (cfg.cert, cfg.key) {
            (Some(cert), Some(key)) => {
                let (chain, key) = client_pair(cert, key)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("proxy tls_cert {}: {e}", cert.display()))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err("proxy: tls_cert and tls_key go together".into()),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = cfg.name.unwrap_or(host).to_string();
        let name = ServerName::try_from(name.clone())
            .map_err(|_| format!("proxy: `{name}` is not a name to send as SNI"))?;
        Ok(UpstreamTls {
            config: Arc::new(config),
            name,
        })
    }
}

/// The CA certificates of `file`, else of the first system bundle there is.
fn roots(file: Option<&Path>) -> Result<rustls::RootCertStore, String> {
    crate::roots::ca_roots(
        file,
        "proxy tls_ca",
        "proxy: an https:// upstream needs tls_ca",
    )
}

fn client_pair(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let text = std::fs::read(cert)
        .map_err(|e| format!("proxy tls_cert {}: cannot read: {e}", cert.display()))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("proxy tls_cert {}: not PEM: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("proxy tls_cert {}: no certificate", cert.display()));
    }
    let key_text = std::fs::read(key)
        .map_err(|e| format!("proxy tls_key {}: cannot read: {e}", key.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_text)
        .map_err(|e| format!("proxy tls_key {}: {e}", key.display()))?;
    Ok((chain, key))
}

/// `tls_verify = false`: any certificate, any name (nginx's default for upstreams). The
/// handshake's signatures are still checked, so the session is with the key the certificate
/// names.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

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
        rustls::crypto::verify_tls12_signature(
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
        rustls::crypto::verify_tls13_signature(
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
