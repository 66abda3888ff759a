//! OCSP stapling of obtained certificates: the response fetched from the responder the
//! certificate names (RFC 6960, over plain HTTP as RFC 5019 has it), checked before it is
//! kept (for this certificate, `good`, current, signed by the issuer's key), refreshed at half
//! its validity, and dropped once it expires when the responder stays down (served without a
//! staple rather than with a stale one, which a client would refuse).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use ring::signature::{self, UnparsedPublicKey};
use rustls::pki_types::CertificateDer;
use weft_http::ocsp::{self, CertStatus};
use weft_http::x509::{self, IssuerKey};

/// How a check of a response that says the certificate is revoked ends.
pub const REVOKED: &str = "the certificate is REVOKED";

/// The largest response taken from a responder.
const MAX_RESPONSE: usize = 64 * 1024;

/// What a checked response says of its certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// When the responder knew the status (seconds since the epoch).
    pub this_update: i64,
    /// When it stops holding (a response without one is taken to hold a day).
    pub next_update: i64,
}

impl Validity {
    /// When a new response is due: half way through this one's validity.
    pub fn refresh_at(&self) -> i64 {
        self.this_update + (self.next_update - self.this_update) / 2
    }
}

/// The responder `chain`'s leaf names, if any (`None`: nothing to staple).
pub fn responder(chain: &[CertificateDer<'_>]) -> Option<String> {
    x509::ocsp_url(chain.first()?).ok().flatten()
}

/// A CertID's parts: SHA-1 of the issuer's Name, of its key, and the certificate's serial.
type CertId = ([u8; 20], [u8; 20], Vec<u8>);

/// The request's CertID parts for `leaf` issued by `issuer`.
fn cert_id(leaf: &[u8], issuer: &IssuerKey) -> Result<CertId, String> {
    let sha1 = |b: &[u8]| {
        let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, b);
        let mut out = [0u8; 20];
        out.copy_from_slice(d.as_ref());
        out
    };
    let (serial, _) =
        x509::serial_and_authority_key_id(leaf).map_err(|e| format!("the certificate: {e}"))?;
    Ok((sha1(&issuer.subject), sha1(&issuer.key), serial))
}

/// Fetches, checks and returns the OCSP response for `chain` (leaf, then its issuer) from
/// the responder the leaf names, within `timeout`.
pub fn fetch(
    chain: &[CertificateDer<'_>],
    now: i64,
    timeout: Duration,
) -> Result<(Vec<u8>, Validity), String> {
    let (leaf, issuer) = match chain {
        [leaf, issuer, ..] => (leaf, issuer),
        _ => return Err("the chain holds no issuer to ask about the certificate with".into()),
    };
    let url = responder(chain).ok_or("the certificate names no OCSP responder")?;
    let issuer = x509::issuer_key(issuer).map_err(|e| format!("the issuer: {e}"))?;
    let (name_hash, key_hash, serial) = cert_id(leaf, &issuer)?;
    let body = post(
        &url,
        &ocsp::request(&name_hash, &key_hash, &serial),
        timeout,
    )
    .map_err(|e| format!("OCSP responder {url}: {e}"))?;
    let validity =
        check(&body, leaf, &issuer, now).map_err(|e| format!("OCSP responder {url}: {e}"))?;
    Ok((body, validity))
}

/// Checks that `der` is a response about `leaf` (issued by `issuer`): `good`, current at
/// `now`, and signed with the issuer's key (a delegated responder's is not taken).
pub fn check(der: &[u8], leaf: &[u8], issuer: &IssuerKey, now: i64) -> Result<Validity, String> {
    let (name_hash, key_hash, serial) = cert_id(leaf, issuer)?;
    let basic = ocsp::read(der).map_err(|e| e.to_string())?;
    let single = basic
        .responses
        .iter()
        .find(|r| {
            r.hash_algorithm == ocsp::SHA1
                && r.name_hash == name_hash
                && r.key_hash == key_hash
                && r.serial == serial.as_slice()
        })
        .ok_or("a response about another certificate")?;
    match single.status {
        CertStatus::Good => {}
        CertStatus::Revoked => return Err(REVOKED.into()),
        CertStatus::Unknown => return Err("the responder does not know the certificate".into()),
    }
    let next_update = single.holds_until();
    // Five minutes for clocks that differ.
    if single.this_update > now + 300 {
        return Err("a response from the future (thisUpdate)".into());
    }
    if next_update <= now {
        return Err("an expired response (nextUpdate has passed)".into());
    }
    let alg = algorithm(basic.signature_algorithm, issuer)
        .ok_or("a signature algorithm weft does not check with this issuer's key")?;
    UnparsedPublicKey::new(alg, &issuer.key)
        .verify(basic.tbs, basic.signature)
        .map_err(|_| {
            if basic.has_certs {
                "not signed by the issuer's key (a delegated responder: not taken)".to_string()
            } else {
                "a signature that does not verify with the issuer's key".to_string()
            }
        })?;
    Ok(Validity {
        this_update: single.this_update,
        next_update,
    })
}

/// ring's verification algorithm for signature algorithm `sig` (OID content) with `issuer`'s
/// key: ECDSA over P-256 or P-384 with SHA-256 or SHA-384, RSA PKCS#1 with SHA-256/384/512.
fn algorithm(
    sig: &[u8],
    issuer: &IssuerKey,
) -> Option<&'static dyn signature::VerificationAlgorithm> {
    const EC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
    const RSA_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
    const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
    const RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
    const RSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c];
    const RSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
    let key = issuer.algorithm.as_slice();
    let curve = issuer.curve.as_deref();
    Some(match (key, curve, sig) {
        (EC_KEY, Some(P256), ECDSA_SHA256) => &signature::ECDSA_P256_SHA256_ASN1,
        (EC_KEY, Some(P256), ECDSA_SHA384) => &signature::ECDSA_P256_SHA384_ASN1,
        (EC_KEY, Some(P384), ECDSA_SHA256) => &signature::ECDSA_P384_SHA256_ASN1,
        (EC_KEY, Some(P384), ECDSA_SHA384) => &signature::ECDSA_P384_SHA384_ASN1,
        (RSA_KEY, _, RSA_SHA256) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (RSA_KEY, _, RSA_SHA384) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (RSA_KEY, _, RSA_SHA512) => &signature::RSA_PKCS1_2048_8192_SHA512,
        _ => return None,
    })
}

/// POSTs an OCSP request to `url` (plain HTTP) and returns the response's body.
fn post(url: &str, request: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let (host, port, path) = super::transport::split_http_url(url)?;
    let addr = (host.as_str(), port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address"))?;
    let mut sock = TcpStream::connect_timeout(&addr, timeout)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    let host_field = if port == 80 {
        host.clone()
    } else {
        format!("{host}:{port}")
    };
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: {host_field}\r\nContent-Type: application/ocsp-request\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        request.len()
    )
    .into_bytes();
    out.extend_from_slice(request);
    sock.write_all(&out)?;
    let mut buf = Vec::new();
    sock.take(MAX_RESPONSE as u64 + 4096)
        .read_to_end(&mut buf)?;
    let r = super::transport::parse_response(&buf, false)?;
    if r.status != 200 {
        return Err(io::Error::other(format!("answered {}", r.status)));
    }
    Ok(r.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(f: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/../http/tests/data/{f}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    /// openssl's response for the test leaf (`weft-http/tests/data`), made 2026-12-07
    /// 10:25:57 UTC for a day, signed by the CA's P-256 key.
    #[test]
    fn a_response_for_the_certificate_signed_by_its_issuer_is_taken() {
        let (leaf, ca, resp) = (
            data("ocsp-leaf.der"),
            data("ocsp-ca.der"),
            data("ocsp-resp.der"),
        );
        let issuer = x509::issuer_key(&ca).unwrap();
        let at = 1_796_639_157; // its thisUpdate
        let v = check(&resp, &leaf, &issuer, at + 60).unwrap();
        assert_eq!((v.this_update, v.next_update), (at, at + 86_400));
        assert_eq!(v.refresh_at(), at + 43_200);
        // Expired, or from the future.
        assert!(check(&resp, &leaf, &issuer, at + 86_400)
            .unwrap_err()
            .contains("expired"));
        assert!(check(&resp, &leaf, &issuer, at - 3_600)
            .unwrap_err()
            .contains("future"));
        // Another issuer's key: the hashes differ.
        let other = x509::issuer_key(&data("ocsp-leaf.der")).unwrap();
        assert!(check(&resp, &leaf, &other, at)
            .unwrap_err()
            .contains("another certificate"));
        // A flipped bit in the signed part.
        let mut bad = resp.clone();
        let b = ocsp::read(&resp).unwrap();
        let at_tbs = resp.windows(b.tbs.len()).position(|w| w == b.tbs).unwrap();
        bad[at_tbs + b.tbs.len() - 1] ^= 1;
        assert!(check(&bad, &leaf, &issuer, at + 60).is_err());
    }

    #[test]
    fn the_responder_comes_from_the_leaf() {
        let chain = [
            CertificateDer::from(data("ocsp-leaf.der")),
            CertificateDer::from(data("ocsp-ca.der")),
        ];
        assert_eq!(
            responder(&chain).as_deref(),
            Some("http://127.0.0.1:8888/ocsp")
        );
        assert_eq!(responder(&chain[1..]), None);
        assert!(fetch(&chain[..1], 0, Duration::from_secs(1))
            .unwrap_err()
            .contains("no issuer"));
    }
}
