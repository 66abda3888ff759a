//! A server-certificate check that records the OCSP response the server stapled and then
//! checks the chain as usual, and a client configuration over it.

use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

#[derive(Debug)]
pub struct StapleSeen {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The last handshake's stapled response (empty: none); `None` before any.
    pub staple: Mutex<Option<Vec<u8>>>,
}

impl StapleSeen {
    /// A check against `roots`, and a client configuration that uses it.
    pub fn client(roots: RootCertStore) -> (Arc<StapleSeen>, Arc<ClientConfig>) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(StapleSeen {
            inner: rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .expect("a verifier"),
            staple: Mutex::new(None),
        });
        let cfg = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier.clone())
            .with_no_client_auth();
        (verifier, Arc::new(cfg))
    }
}

impl rustls::client::danger::ServerCertVerifier for StapleSeen {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        *self.staple.lock().unwrap() = Some(ocsp_response.to_vec());
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, &[], now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
