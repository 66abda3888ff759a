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
//! does. What the response says (for which certificate, until when) is not looked at; its
//! signature is the client's to check.

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
    Ok(())
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
