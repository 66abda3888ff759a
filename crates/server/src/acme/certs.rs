//! What an order needs made here: the new certificate's key and its CSR (RFC 8555 §7.4), and
//! the TLS-ALPN-01 challenge certificate (RFC 8737 §3): self-signed for the name being
//! validated, with the critical `acmeIdentifier` extension holding the SHA-256 of the key
//! authorization, served to a ClientHello that offers only the `acme-tls/1` protocol.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The ALPN protocol of TLS-ALPN-01.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A certificate's key (PEM, PKCS#8, P-256) and the DER of its CSR.
#[derive(Debug)]
pub struct Request {
    /// The private key, to store beside the certificate.
    pub key_pem: String,
    /// The CSR for finalize.
    pub csr_der: Vec<u8>,
}

/// A new P-256 key and a CSR naming every one of `names` (subjectAltName dNSName entries).
pub fn request(names: &[String]) -> Result<Request, String> {
    if names.is_empty() {
        return Err("a certificate request needs a name".into());
    }
    let key = rcgen::KeyPair::generate().map_err(|e| format!("new certificate key: {e}"))?;
    let params = rcgen::CertificateParams::new(names.to_vec())
        .map_err(|e| format!("certificate request for {}: {e}", names.join(", ")))?;
    let csr = params
        .serialize_request(&key)
        .map_err(|e| format!("certificate request for {}: {e}", names.join(", ")))?;
    Ok(Request {
        key_pem: key.serialize_pem(),
        csr_der: csr.der().to_vec(),
    })
}

/// The TLS-ALPN-01 certificate for `name` answering `key_authorization`, and its key.
pub fn alpn_certificate(
    name: &str,
    key_authorization: &str,
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), String> {
    let digest = ring::digest::digest(&ring::digest::SHA256, key_authorization.as_bytes());
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| format!("tls-alpn-01 certificate for {name}: {e}"))?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest.as_ref())];
    let key = rcgen::KeyPair::generate().map_err(|e| format!("tls-alpn-01 key: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("tls-alpn-01 certificate for {name}: {e}"))?;
    Ok((
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;

    fn has(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn a_request_names_every_name_with_a_p256_key() {
        let r = request(&["a.example".into(), "www.a.example".into()]).unwrap();
        assert!(r.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        // A PKCS#10 request: a SEQUENCE, the names as dNSName ([2] IMPLICIT IA5String).
        assert_eq!(r.csr_der[0], 0x30);
        assert!(has(&r.csr_der, b"\x82\x09a.example"));
        assert!(has(&r.csr_der, b"\x82\x0dwww.a.example"));
        // id-ecPublicKey and prime256v1.
        assert!(has(
            &r.csr_der,
            &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
        ));
        assert!(has(
            &r.csr_der,
            &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]
        ));
        // The key is loadable as the server loads keys.
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(r.key_pem.as_bytes());
        assert!(key.is_ok());
        assert!(request(&[]).is_err());
    }

    #[test]
    fn the_alpn_certificate_carries_the_key_authorizations_digest_critically() {
        let ka = "token-1.thumbprint";
        let (cert, key) = alpn_certificate("a.example", ka).unwrap();
        let der = cert.as_ref();
        let digest = ring::digest::digest(&ring::digest::SHA256, ka.as_bytes());
        // id-pe-acmeIdentifier (1.3.6.1.5.5.7.1.31), critical, an OCTET STRING holding the
        // 32-byte OCTET STRING of the digest (RFC 8737 §3).
        let mut ext = vec![0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        ext.extend([0x01, 0x01, 0xff, 0x04, 0x22, 0x04, 0x20]);
        ext.extend_from_slice(digest.as_ref());
        assert!(has(der, &ext), "the acmeIdentifier extension");
        assert!(has(der, b"\x82\x09a.example"), "the name in subjectAltName");
        assert!(weft_http::x509::names(der).is_ok());
        assert!(matches!(key, PrivateKeyDer::Pkcs8(_)));
        // Another key authorization, another digest.
        let (other, _) = alpn_certificate("a.example", "token-2.thumbprint").unwrap();
        assert!(!has(other.as_ref(), digest.as_ref()));
        assert_eq!(ACME_TLS_ALPN, b"acme-tls/1");
    }
}
