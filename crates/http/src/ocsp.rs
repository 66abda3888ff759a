//! The shape of an OCSP response to staple (RFC 6960 §4.2.1), checked when a certificate's
//! `ocsp` file is loaded: a file that is not one would be sent to every client that asks for
//! the certificate's status, and a client that cannot parse it ends the handshake.
//!
//! ```text
//! OCSPResponse ::= SEQUENCE {
//!    responseStatus  ENUMERATED,                   -- 0: successful
//!    responseBytes   [0] EXPLICIT SEQUENCE {
//!       responseType OBJECT IDENTIFIER,            -- id-pkix-ocsp-basic
//!       response     OCTET STRING } }              -- a BasicOCSPResponse:
//! BasicOCSPResponse ::= SEQUENCE { tbsResponseData SEQUENCE, signatureAlgorithm SEQUENCE,
//!                                  signature BIT STRING, certs [0] EXPLICIT ... OPTIONAL }
//! ```
//!
//! DER only: definite lengths in their shortest form, every element ending where its parent
//! does. [`check`] looks at the shape only (a file an operator names); [`read`] also takes
//! the response apart (for which certificate, its status, until when, the signed bytes), for
//! the responses weft fetches itself, and [`request`] makes the request it sends
//! (RFC 6960 §4.1):
//!
//! ```text
//! OCSPRequest ::= SEQUENCE { tbsRequest SEQUENCE { requestList SEQUENCE OF
//!                             SEQUENCE { reqCert CertID } } }
//! CertID ::= SEQUENCE { hashAlgorithm AlgorithmIdentifier, issuerNameHash OCTET STRING,
//!                       issuerKeyHash OCTET STRING, serialNumber INTEGER }
//! ResponseData ::= SEQUENCE { version [0] EXPLICIT OPTIONAL, responderID [1] or [2],
//!                             producedAt GeneralizedTime, responses SEQUENCE OF
//!                             SingleResponse, responseExtensions [1] EXPLICIT OPTIONAL }
//! SingleResponse ::= SEQUENCE { certID CertID, certStatus good [0] | revoked [1] |
//!                               unknown [2], thisUpdate GeneralizedTime,
//!                               nextUpdate [0] EXPLICIT GeneralizedTime OPTIONAL, ... }
//! ```

/// id-pkix-ocsp-basic, 1.3.6.1.5.5.7.48.1.1, as DER content octets.
const BASIC: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];

const SEQUENCE: u8 = 0x30;
const ENUMERATED: u8 = 0x0a;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const BIT_STRING: u8 = 0x03;
/// `[0]`, constructed.
const CONTEXT_0: u8 = 0xa0;

/// Why a file is not an OCSP response to staple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not DER, or not shaped as an OCSP response; what was expected where.
    Malformed(&'static str),
    /// A well-formed response whose status is not `successful` (the status's name).
    Status(&'static str),
    /// A successful response of a type other than the basic one.
    NotBasic,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Malformed(what) => write!(f, "not a DER OCSP response ({what})"),
            Problem::Status(s) => write!(f, "an OCSP response with status {s}, not successful"),
            Problem::NotBasic => write!(f, "not a basic OCSP response"),
        }
    }
}

/// Checks that `der` is a whole DER OCSP response with status successful and a basic
/// response inside.
pub fn check(der: &[u8]) -> Result<(), Problem> {
    basic(der).map(drop)
}

/// A certificate's status in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertStatus {
    /// Not revoked.
    Good,
    /// Revoked.
    Revoked,
    /// The responder does not know the certificate.
    Unknown,
}

/// One certificate's answer in a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Single<'a> {
    /// The CertID's hash algorithm (OID content octets; SHA-1 is `2b 0e 03 02 1a`).
    pub hash_algorithm: &'a [u8],
    /// The hash of the issuer's subject Name.
    pub name_hash: &'a [u8],
    /// The hash of the issuer's public key.
    pub key_hash: &'a [u8],
    /// The certificate's serial number (the INTEGER's content octets).
    pub serial: &'a [u8],
    /// Its status.
    pub status: CertStatus,
    /// When the responder knew the status to be so (seconds since the epoch).
    pub this_update: i64,
    /// When newer information will be there, if the responder says.
    pub next_update: Option<i64>,
}

impl Single<'_> {
    /// Until when the answer holds: its `nextUpdate`, or a day after `thisUpdate` for one
    /// that names none.
    pub fn holds_until(&self) -> i64 {
        self.next_update.unwrap_or(self.this_update + 86_400)
    }
}

/// A basic OCSP response taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Basic<'a> {
    /// The signed bytes: the whole `tbsResponseData` element.
    pub tbs: &'a [u8],
    /// The signature algorithm (OID content octets).
    pub signature_algorithm: &'a [u8],
    /// The signature (the BIT STRING's bits).
    pub signature: &'a [u8],
    /// The answers.
    pub responses: Vec<Single<'a>>,
    /// The responder sent certificates (a delegated responder's).
    pub has_certs: bool,
}

/// SHA-1's OID (content octets): the CertID hash responders expect.
pub const SHA1: &[u8] = &[0x2b, 0x0e, 0x03, 0x02, 0x1a];

/// An OCSP request for one certificate: SHA-1 hashes of its issuer's Name and public key, and
/// its serial number (the INTEGER's content octets), as responders expect (RFC 5019 §2.1.1).
pub fn request(name_hash: &[u8], key_hash: &[u8], serial: &[u8]) -> Vec<u8> {
    use crate::der::tlv;
    let alg = tlv(SEQUENCE, &[tlv(OID, SHA1), vec![0x05, 0x00]].concat());
    let cert_id = tlv(
        SEQUENCE,
        &[
            alg,
            tlv(OCTET_STRING, name_hash),
            tlv(OCTET_STRING, key_hash),
            tlv(0x02, serial),
        ]
        .concat(),
    );
    let request = tlv(SEQUENCE, &cert_id);
    let list = tlv(SEQUENCE, &request);
    tlv(SEQUENCE, &tlv(SEQUENCE, &list))
}

/// Takes a successful basic response apart (what [`check`] refuses, this refuses too).
pub fn read(der: &[u8]) -> Result<Basic<'_>, Problem> {
    let (basic, _) = basic(der)?;
    let (tbs_content, rest) = element(basic, SEQUENCE, "tbsResponseData")?;
    let tbs = &basic[..basic.len() - rest.len()];
    let (alg, rest) = element(rest, SEQUENCE, "a signatureAlgorithm")?;
    let (signature_algorithm, _) = element(alg, OID, "a signature algorithm OID")?;
    let (bits, rest) = element(rest, BIT_STRING, "a signature BIT STRING")?;
    let signature = match bits {
        [0, sig @ ..] => sig,
        _ => return Err(Problem::Malformed("a signature BIT STRING")),
    };
    // version [0], responderID [1] or [2], producedAt, responses.
    let mut data = tbs_content;
    if let Ok((_, after)) = element(data, CONTEXT_0, "") {
        data = after;
    }
    let (tag, _, after) = crate::der::any(data, "a responderID").map_err(Problem::Malformed)?;
    if tag != 0xa1 && tag != 0xa2 {
        return Err(Problem::Malformed("a responderID"));
    }
    let (_, after) = element(after, GENERALIZED_TIME, "a producedAt time")?;
    let (mut list, _) = element(after, SEQUENCE, "a responses SEQUENCE")?;
    let mut responses = Vec::new();
    while !list.is_empty() {
        let (single, next) = element(list, SEQUENCE, "a SingleResponse")?;
        list = next;
        responses.push(single_response(single)?);
    }
    Ok(Basic {
        tbs,
        signature_algorithm,
        signature,
        responses,
        has_certs: !rest.is_empty(),
    })
}

const GENERALIZED_TIME: u8 = 0x18;

fn single_response(single: &[u8]) -> Result<Single<'_>, Problem> {
    let (cert_id, rest) = element(single, SEQUENCE, "a CertID")?;
    let (alg, id) = element(cert_id, SEQUENCE, "a hashAlgorithm")?;
    let (hash_algorithm, _) = element(alg, OID, "a hash algorithm OID")?;
    let (name_hash, id) = element(id, OCTET_STRING, "an issuerNameHash")?;
    let (key_hash, id) = element(id, OCTET_STRING, "an issuerKeyHash")?;
    let serial = whole(id, 0x02, "a serialNumber")?;
    let (tag, _, rest) = crate::der::any(rest, "a certStatus").map_err(Problem::Malformed)?;
    let status = match tag {
        0x80 => CertStatus::Good,
        0xa1 => CertStatus::Revoked,
        0x82 => CertStatus::Unknown,
        _ => return Err(Problem::Malformed("a certStatus")),
    };
    let (this, rest) = element(rest, GENERALIZED_TIME, "a thisUpdate time")?;
    let this_update = crate::x509::time(GENERALIZED_TIME, this)
        .map_err(|_| Problem::Malformed("a thisUpdate time"))?;
    let next_update = match element(rest, CONTEXT_0, "") {
        Ok((next, _)) => {
            let t = whole(next, GENERALIZED_TIME, "a nextUpdate time")?;
            Some(
                crate::x509::time(GENERALIZED_TIME, t)
                    .map_err(|_| Problem::Malformed("a nextUpdate time"))?,
            )
        }
        Err(_) => None,
    };
    Ok(Single {
        hash_algorithm,
        name_hash,
        key_hash,
        serial,
        status,
        this_update,
        next_update,
    })
}

/// The BasicOCSPResponse's content of a successful response, and the response type.
fn basic(der: &[u8]) -> Result<(&[u8], ()), Problem> {
    let response = whole(der, SEQUENCE, "an OCSPResponse SEQUENCE")?;
    let (status, rest) = element(response, ENUMERATED, "a responseStatus ENUMERATED")?;
    let status = match status {
        [0] => None,
        [1] => Some("malformedRequest"),
        [2] => Some("internalError"),
        [3] => Some("tryLater"),
        [5] => Some("sigRequired"),
        [6] => Some("unauthorized"),
        _ => return Err(Problem::Malformed("an unknown responseStatus")),
    };
    if let Some(s) = status {
        return Err(Problem::Status(s));
    }
    let bytes = whole(rest, CONTEXT_0, "responseBytes [0]")?;
    let bytes = whole(bytes, SEQUENCE, "a ResponseBytes SEQUENCE")?;
    let (kind, rest) = element(bytes, OID, "a responseType OBJECT IDENTIFIER")?;
    let inner = whole(rest, OCTET_STRING, "a response OCTET STRING")?;
    if kind != BASIC {
        return Err(Problem::NotBasic);
    }
    let basic = whole(inner, SEQUENCE, "a BasicOCSPResponse SEQUENCE")?;
    let (_, rest) = element(basic, SEQUENCE, "tbsResponseData")?;
    let (_, rest) = element(rest, SEQUENCE, "a signatureAlgorithm")?;
    let (_, rest) = element(rest, BIT_STRING, "a signature BIT STRING")?;
    if !rest.is_empty() {
        whole(rest, CONTEXT_0, "certs [0] or the end")?;
    }
    Ok((basic, ()))
}

/// The content of `bytes`, which must be exactly one element with tag `tag`.
fn whole<'a>(bytes: &'a [u8], tag: u8, what: &'static str) -> Result<&'a [u8], Problem> {
    crate::der::whole(bytes, tag, what).map_err(Problem::Malformed)
}

/// The content of the element `bytes` starts with, which must have tag `tag`, and the bytes
/// after it.
fn element<'a>(
    bytes: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), Problem> {
    crate::der::element(bytes, tag, what).map_err(Problem::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::der::tlv;

    fn response(status: u8, kind: &[u8], basic: &[u8]) -> Vec<u8> {
        let bytes = tlv(
            SEQUENCE,
            &[tlv(OID, kind), tlv(OCTET_STRING, basic)].concat(),
        );
        tlv(
            SEQUENCE,
            &[tlv(ENUMERATED, &[status]), tlv(CONTEXT_0, &bytes)].concat(),
        )
    }

    fn basic(extra: &[u8]) -> Vec<u8> {
        let tbs = tlv(SEQUENCE, &[0x02, 0x01, 0x00].repeat(50));
        let alg = tlv(SEQUENCE, &tlv(OID, &[0x2a, 0x86, 0x48]));
        let sig = tlv(BIT_STRING, &[0x00, 0xab, 0xcd]);
        tlv(SEQUENCE, &[tbs, alg, sig, extra.to_vec()].concat())
    }

    #[test]
    fn a_successful_basic_response_passes_and_each_flaw_is_named() {
        let good = response(0, BASIC, &basic(&[]));
        assert_eq!(check(&good), Ok(()));
        assert_eq!(
            check(&response(0, BASIC, &basic(&tlv(CONTEXT_0, &[])))),
            Ok(())
        );
        assert_eq!(
            check(&response(3, BASIC, &basic(&[]))),
            Err(Problem::Status("tryLater"))
        );
        assert_eq!(
            check(&response(1, BASIC, &[])),
            Err(Problem::Status("malformedRequest"))
        );
        assert_eq!(
            check(&response(0, &[0x2b, 0x06], &basic(&[]))),
            Err(Problem::NotBasic)
        );
        assert!(matches!(check(b"garbage\n"), Err(Problem::Malformed(_))));
        assert!(matches!(check(&[]), Err(Problem::Malformed(_))));
        // Cut anywhere, or followed by anything, it is not one response.
        for cut in 0..good.len() {
            assert!(check(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert!(check(&[good.clone(), vec![0]].concat()).is_err());
        // A signature that is not a BIT STRING; something after the certs.
        assert!(check(&response(0, BASIC, &basic(&[0x05, 0x00]))).is_err());
        assert!(check(&response(4, BASIC, &basic(&[])))
            .is_err_and(|p| p == Problem::Malformed("an unknown responseStatus")));
    }

    /// A response `openssl ocsp` made (`-index` of one good certificate, signed by its CA).
    #[test]
    fn a_response_from_openssl_passes() {
        let der = include_bytes!("../tests/data/ocsp-good.der");
        assert_eq!(check(der), Ok(()));
        assert!(check(&der[..der.len() - 1]).is_err());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The same response read as `openssl ocsp -resp_text` prints it.
    #[test]
    fn a_response_from_openssl_reads_as_openssl_prints_it() {
        let der = include_bytes!("../tests/data/ocsp-good.der");
        let b = read(der).unwrap();
        assert_eq!(b.responses.len(), 1);
        let r = &b.responses[0];
        assert_eq!(r.hash_algorithm, SHA1);
        assert_eq!(r.name_hash, hex("11048CD20CB3592307D019FD0889562B62D36492"));
        assert_eq!(r.key_hash, hex("F0ACF7C6290D71307B7724F40E488EEDCD9CBF05"));
        assert_eq!(r.serial, hex("45E3BABFC5237B34A46147E3290C0914697B4693"));
        assert_eq!(r.status, CertStatus::Good);
        // Nov 28 21:10:52 2026 GMT, a day later.
        assert_eq!(r.this_update, 1_795_900_252);
        assert_eq!(r.next_update, Some(1_795_986_652));
        // ecdsa-with-SHA256, a DER ECDSA signature (30 44 ...).
        assert_eq!(
            b.signature_algorithm,
            [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]
        );
        assert_eq!(&b.signature[..2], [0x30, 0x44]);
        assert!(b.tbs.starts_with(&[SEQUENCE]) && der.windows(b.tbs.len()).any(|w| w == b.tbs));
        assert!(b.has_certs);
        for cut in [1, der.len() / 2, der.len() - 1] {
            assert!(read(&der[..cut]).is_err());
        }
    }

    /// The request `openssl ocsp -issuer ocsp-ca.der -cert ocsp-leaf.der -no_nonce -reqout`
    /// made, from the hashes it printed.
    #[test]
    fn a_request_is_the_one_openssl_makes() {
        let req = request(
            &hex("11048CD20CB3592307D019FD0889562B62D36492"),
            &hex("0CCFB622AAEEF527654D3AD229055EEDBF3D3D2C"),
            &hex("45E3BABFC5237B34A46147E3290C0914697B4693"),
        );
        assert_eq!(req, include_bytes!("../tests/data/ocsp-req.der"));
    }

    #[test]
    fn lengths_must_be_definite_and_shortest() {
        // The same ENUMERATED with its length in long form (0x81 0x01): not DER.
        let long = [SEQUENCE, 0x04, ENUMERATED, 0x81, 0x01, 0x00];
        assert!(matches!(check(&long), Err(Problem::Malformed(_))));
        // Indefinite length.
        assert!(matches!(
            check(&[SEQUENCE, 0x80, 0x00, 0x00]),
            Err(Problem::Malformed(_))
        ));
        // A length larger than what follows.
        assert!(matches!(
            check(&[SEQUENCE, 0x82, 0xff, 0xff, 0x0a]),
            Err(Problem::Malformed(_))
        ));
        // A long form with a leading zero octet.
        assert!(matches!(
            check(&[SEQUENCE, 0x82, 0x00, 0x81]),
            Err(Problem::Malformed(_))
        ));
    }
}
