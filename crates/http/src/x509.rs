//! What weft tells of a client certificate (mutual TLS): its subject and issuer as RFC 4514
//! strings (`CN=alice,O=Example`, nginx's `$ssl_client_s_dn`, Apache's `SSL_CLIENT_S_DN` in
//! RFC 2253 form) and its serial number in hex. The certificate has been verified against the
//! configured CAs before this reads it, but its bytes are still the client's: anything not
//! shaped as below is refused, never trusted.
//!
//! ```text
//! Certificate  ::= SEQUENCE { tbsCertificate TBSCertificate, signatureAlgorithm, signature }
//! TBSCertificate ::= SEQUENCE { version [0] EXPLICIT OPTIONAL, serialNumber INTEGER,
//!                               signature AlgorithmIdentifier, issuer Name, validity,
//!                               subject Name, ... }
//! Name ::= SEQUENCE OF RelativeDistinguishedName    -- SET OF AttributeTypeAndValue
//! AttributeTypeAndValue ::= SEQUENCE { type OBJECT IDENTIFIER, value ANY }
//! ```

use crate::der::{any, element, whole};

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
/// `[0]`, constructed: the version.
const CONTEXT_0: u8 = 0xa0;

/// A client certificate's names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CertNames {
    /// The subject, RFC 4514 (the last RDN first).
    pub subject: String,
    /// The issuer, RFC 4514.
    pub issuer: String,
    /// The serial number, upper-case hex without leading zero octets (nginx
    /// `$ssl_client_serial`, Apache `SSL_CLIENT_M_SERIAL`).
    pub serial: String,
}

/// Reads the names of the DER certificate `der`; `Err` says what was not where expected.
pub fn names(der: &[u8]) -> Result<CertNames, &'static str> {
    let cert = whole(der, SEQUENCE, "a Certificate SEQUENCE")?;
    let (tbs, _) = element(cert, SEQUENCE, "a TBSCertificate SEQUENCE")?;
    let tbs = match element(tbs, CONTEXT_0, "") {
        Ok((_, rest)) => rest,
        Err(_) => tbs,
    };
    let (serial, rest) = element(tbs, INTEGER, "a serialNumber INTEGER")?;
    let (_, rest) = element(rest, SEQUENCE, "a signature AlgorithmIdentifier")?;
    let (issuer, rest) = element(rest, SEQUENCE, "an issuer Name")?;
    let (_, rest) = element(rest, SEQUENCE, "a validity SEQUENCE")?;
    let (subject, _) = element(rest, SEQUENCE, "a subject Name")?;
    Ok(CertNames {
        subject: name(subject)?,
        issuer: name(issuer)?,
        serial: hex_upper(strip_sign(serial)),
    })
}

/// A DER element: its tag, its content, and the whole element.
type Field<'a> = (u8, &'a [u8], &'a [u8]);

/// The fields of a TBSCertificate after its optional version: serialNumber, signature,
/// issuer, validity, subject, subjectPublicKeyInfo, then the optional unique IDs and
/// extensions, each as (tag, content, the whole element).
fn tbs_fields(der: &[u8]) -> Result<Vec<Field<'_>>, &'static str> {
    let cert = whole(der, SEQUENCE, "a Certificate SEQUENCE")?;
    let (tbs, _) = element(cert, SEQUENCE, "a TBSCertificate SEQUENCE")?;
    let mut rest = match element(tbs, CONTEXT_0, "") {
        Ok((_, rest)) => rest,
        Err(_) => tbs,
    };
    let mut fields = Vec::new();
    while !rest.is_empty() {
        let (tag, content, next) = any(rest, "a TBSCertificate field")?;
        fields.push((tag, content, &rest[..rest.len() - next.len()]));
        rest = next;
    }
    let shape = [INTEGER, SEQUENCE, SEQUENCE, SEQUENCE, SEQUENCE, SEQUENCE];
    if fields.len() < shape.len() || fields.iter().zip(shape).any(|(f, t)| f.0 != t) {
        return Err("a TBSCertificate's fields");
    }
    Ok(fields)
}

/// The value (the extnValue OCTET STRING's content) of the extension `oid`, if the
/// certificate has it.
fn extension<'a>(der: &'a [u8], oid: &[u8]) -> Result<Option<&'a [u8]>, &'static str> {
    const CONTEXT_3: u8 = 0xa3;
    const BOOLEAN: u8 = 0x01;
    const OCTET_STRING: u8 = 0x04;
    for (tag, content, _) in tbs_fields(der)?.into_iter().skip(6) {
        if tag != CONTEXT_3 {
            continue;
        }
        let mut exts = whole(content, SEQUENCE, "an Extensions SEQUENCE")?;
        while !exts.is_empty() {
            let (ext, next) = element(exts, SEQUENCE, "an Extension SEQUENCE")?;
            exts = next;
            let (id, mut ext) = element(ext, OID, "an extnID")?;
            if id != oid {
                continue;
            }
            if let Ok((_, after)) = element(ext, BOOLEAN, "") {
                ext = after;
            }
            return whole(ext, OCTET_STRING, "an extnValue OCTET STRING").map(Some);
        }
    }
    Ok(None)
}

/// True if the DER certificate `der` says it is a CA (`basicConstraints` with `cA` TRUE,
/// RFC 5280 §4.2.1.9): clients refuse such a certificate from a server (webpki says
/// `CaUsedAsEndEntity`, browsers `ERR_CERT_INVALID`). `Err` says what was not where expected.
pub fn is_ca(der: &[u8]) -> Result<bool, &'static str> {
    const BOOLEAN: u8 = 0x01;
    let Some(value) = extension(der, &[0x55, 0x1d, 0x13])? else {
        return Ok(false);
    };
    let constraints = whole(value, SEQUENCE, "a BasicConstraints SEQUENCE")?;
    Ok(match element(constraints, BOOLEAN, "") {
        Ok((flag, _)) => flag.iter().any(|&b| b != 0),
        Err(_) => false,
    })
}

/// A certificate's validity, in seconds since the Unix epoch: `(notBefore, notAfter)`.
/// UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) and GeneralizedTime (`YYYYMMDDHHMMSSZ`) in
/// UTC, as RFC 5280 §4.1.2.5 has them; anything else is refused.
pub fn validity(der: &[u8]) -> Result<(i64, i64), &'static str> {
    let cert = whole(der, SEQUENCE, "a Certificate SEQUENCE")?;
    let (tbs, _) = element(cert, SEQUENCE, "a TBSCertificate SEQUENCE")?;
    let tbs = match element(tbs, CONTEXT_0, "") {
        Ok((_, rest)) => rest,
        Err(_) => tbs,
    };
    let (_, rest) = element(tbs, INTEGER, "a serialNumber INTEGER")?;
    let (_, rest) = element(rest, SEQUENCE, "a signature AlgorithmIdentifier")?;
    let (_, rest) = element(rest, SEQUENCE, "an issuer Name")?;
    let (validity, _) = element(rest, SEQUENCE, "a validity SEQUENCE")?;
    let (tag, before, rest) = any(validity, "a notBefore time")?;
    let not_before = time(tag, before)?;
    let (tag, after, rest) = any(rest, "a notAfter time")?;
    if !rest.is_empty() {
        return Err("a validity SEQUENCE");
    }
    Ok((not_before, time(tag, after)?))
}

/// A certificate's serial number (the INTEGER's content octets, sign octet kept) and its
/// authority key identifier (`authorityKeyIdentifier`'s `keyIdentifier`, RFC 5280
/// §4.2.1.1; `None` without one): what an ACME renewal-information request names it by
/// (RFC 9773 §4.1).
pub fn serial_and_authority_key_id(der: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), &'static str> {
    let serial = tbs_fields(der)?[0].1.to_vec();
    let Some(value) = extension(der, &[0x55, 0x1d, 0x23])? else {
        return Ok((serial, None));
    };
    let aki = whole(value, SEQUENCE, "an AuthorityKeyIdentifier SEQUENCE")?;
    // keyIdentifier [0] IMPLICIT OCTET STRING, optional and first.
    Ok(match element(aki, 0x80, "") {
        Ok((id, _)) => (serial, Some(id.to_vec())),
        Err(_) => (serial, None),
    })
}

/// The OCSP responder a certificate names (`authorityInfoAccess`, `id-ad-ocsp`, a URI), if
/// any (RFC 5280 §4.2.2.1).
pub fn ocsp_url(der: &[u8]) -> Result<Option<String>, &'static str> {
    const AIA: [u8; 8] = [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
    const OCSP: [u8; 8] = [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
    let Some(value) = extension(der, &AIA)? else {
        return Ok(None);
    };
    let mut list = whole(value, SEQUENCE, "an AuthorityInfoAccessSyntax SEQUENCE")?;
    while !list.is_empty() {
        let (desc, next) = element(list, SEQUENCE, "an AccessDescription SEQUENCE")?;
        list = next;
        let (method, location) = element(desc, OID, "an accessMethod")?;
        // uniformResourceIdentifier [6] IMPLICIT IA5String.
        if method == OCSP {
            if let Ok(uri) = whole(location, 0x86, "") {
                if uri.is_ascii() && !uri.iter().any(u8::is_ascii_control) {
                    return Ok(Some(String::from_utf8_lossy(uri).into_owned()));
                }
            }
        }
    }
    Ok(None)
}

/// What an OCSP request and the check of its response need of the issuer's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerKey {
    /// Its subject Name, the whole DER element (hashed as the CertID's `issuerNameHash`).
    pub subject: Vec<u8>,
    /// Its public key's algorithm (OID content octets: `id-ecPublicKey`, `rsaEncryption`).
    pub algorithm: Vec<u8>,
    /// The algorithm's parameter when it is an OID (an EC key's curve).
    pub curve: Option<Vec<u8>>,
    /// The subjectPublicKey BIT STRING's bits (hashed as `issuerKeyHash`; an EC point, or
    /// an RSAPublicKey).
    pub key: Vec<u8>,
}

/// The subject and public key of the certificate `der`.
pub fn issuer_key(der: &[u8]) -> Result<IssuerKey, &'static str> {
    const BIT_STRING: u8 = 0x03;
    let fields = tbs_fields(der)?;
    let subject = fields[4].2.to_vec();
    let spki = fields[5].1;
    let (alg, rest) = element(spki, SEQUENCE, "an AlgorithmIdentifier")?;
    let bits = whole(rest, BIT_STRING, "a subjectPublicKey BIT STRING")?;
    let (algorithm, params) = element(alg, OID, "an algorithm OID")?;
    let curve = whole(params, OID, "").ok().map(<[u8]>::to_vec);
    match bits {
        [0, key @ ..] if !key.is_empty() => Ok(IssuerKey {
            subject,
            algorithm: algorithm.to_vec(),
            curve,
            key: key.to_vec(),
        }),
        _ => Err("a subjectPublicKey BIT STRING"),
    }
}

/// A UTCTime (0x17) or GeneralizedTime (0x18) ending in `Z`, whole seconds, in seconds since
/// the Unix epoch.
pub(crate) fn time(tag: u8, t: &[u8]) -> Result<i64, &'static str> {
    let bad = "a validity time";
    let (year, rest) = match (tag, t.len()) {
        (0x17, 13) => {
            let yy = digits(&t[..2]).ok_or(bad)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &t[2..])
        }
        (0x18, 15) => (digits(&t[..4]).ok_or(bad)?, &t[4..]),
        _ => return Err(bad),
    };
    if rest[10] != b'Z' {
        return Err(bad);
    }
    let field = |i: usize| digits(&rest[i..i + 2]).ok_or(bad);
    let (month, day, hour, min, sec) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    crate::timestamp::utc(year, month, day, hour, min, sec).ok_or(bad)
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
    })
}

/// An INTEGER's content without the zero octet that only keeps it positive.
fn strip_sign(int: &[u8]) -> &[u8] {
    match int {
        [0, rest @ ..] if !rest.is_empty() => rest,
        _ => int,
    }
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A Name's content as RFC 4514: its RDNs in reverse, joined by `,`; the attributes of one
/// RDN by `+`.
fn name(mut seq: &[u8]) -> Result<String, &'static str> {
    let mut rdns: Vec<String> = Vec::new();
    while !seq.is_empty() {
        let (mut set, rest) = element(seq, SET, "a RelativeDistinguishedName SET")?;
        seq = rest;
        let mut attrs: Vec<String> = Vec::new();
        while !set.is_empty() {
            let (atv, rest) = element(set, SEQUENCE, "an AttributeTypeAndValue")?;
            set = rest;
            let (oid, value) = element(atv, OID, "an attribute type OID")?;
            let (tag, content, after) = any(value, "an attribute value")?;
            if !after.is_empty() {
                return Err("an attribute value");
            }
            let mut out = String::new();
            match short_name(oid) {
                Some(n) => out.push_str(n),
                None => out.push_str(&dotted(oid)?),
            }
            out.push('=');
            match (short_name(oid), text(tag, content)) {
                (Some(_), Some(s)) => escape(&s, &mut out),
                // An unknown type, or a value that is not a string: `#` and the DER in hex
                // (RFC 4514 §2.4).
                _ => {
                    out.push('#');
                    out.push_str(&hex_lower(value));
                }
            }
            attrs.push(out);
        }
        rdns.push(attrs.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The short names RFC 4514 §3 lists, and those OpenSSL (so nginx and Apache) print.
fn short_name(oid: &[u8]) -> Option<&'static str> {
    // 2.5.4.x: id-at.
    if let [0x55, 0x04, x] = oid {
        return match x {
            3 => Some("CN"),
            4 => Some("SN"),
            5 => Some("serialNumber"),
            6 => Some("C"),
            7 => Some("L"),
            8 => Some("ST"),
            9 => Some("STREET"),
            10 => Some("O"),
            11 => Some("OU"),
            12 => Some("title"),
            42 => Some("GN"),
            _ => None,
        };
    }
    match oid {
        // 1.2.840.113549.1.9.1
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => Some("emailAddress"),
        // 0.9.2342.19200300.100.1.25 and .1
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    }
}

/// An OID's content octets in dotted decimal.
fn dotted(oid: &[u8]) -> Result<String, &'static str> {
    let bad = "an attribute type OID";
    let (&first, rest) = oid.split_first().ok_or(bad)?;
    let mut parts: Vec<u64> = Vec::new();
    let mut n: u64 = 0;
    let mut arcs = vec![first];
    arcs.extend_from_slice(rest);
    for (i, &b) in arcs.iter().enumerate() {
        if n > u64::MAX >> 7 {
            return Err(bad);
        }
        n = (n << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                // The first subidentifier holds the first two arcs.
                let (a, b) = match n {
                    0..=39 => (0, n),
                    40..=79 => (1, n - 40),
                    _ => (2, n - 80),
                };
                parts.extend([a, b]);
            } else {
                parts.push(n);
            }
            n = 0;
        } else if i == arcs.len() - 1 {
            return Err(bad);
        }
    }
    Ok(parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("."))
}

/// A directory string's text: UTF8String, PrintableString, IA5String, TeletexString (taken
/// as Latin-1), BMPString (UTF-16BE), UniversalString (UTF-32BE); `None` for other tags or
/// text that does not decode.
fn text(tag: u8, content: &[u8]) -> Option<String> {
    match tag {
        0x0c | 0x13 | 0x16 => std::str::from_utf8(content).ok().map(str::to_string),
        0x14 => Some(content.iter().map(|&b| char::from(b)).collect()),
        0x1e => {
            if !content.len().is_multiple_of(2) {
                return None;
            }
            let units = content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
        }
        0x1c => {
            if !content.len().is_multiple_of(4) {
                return None;
            }
            content
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        }
        _ => None,
    }
}

/// Appends `value` escaped as RFC 4514 §2.4 says: `"+,;<>\` with a backslash, a leading `#`
/// or space and a trailing space too, and control characters (and NUL) as `\XX`, so the
/// string can be logged and passed in a CGI variable or a header as it is.
fn escape(value: &str, out: &mut String) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '#' | ' ' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            ' ' if i == last => out.push_str("\\ "),
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::der::tlv;

    fn atv(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        tlv(
            SET,
            &tlv(SEQUENCE, &[tlv(OID, oid), tlv(tag, value)].concat()),
        )
    }

    fn cert(serial: &[u8], issuer: &[u8], subject: &[u8]) -> Vec<u8> {
        let tbs = tlv(
            SEQUENCE,
            &[
                tlv(CONTEXT_0, &tlv(INTEGER, &[2])),
                tlv(INTEGER, serial),
                tlv(
                    SEQUENCE,
                    &tlv(OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
                ),
                tlv(SEQUENCE, issuer),
                tlv(SEQUENCE, &[]),
                tlv(SEQUENCE, subject),
                tlv(SEQUENCE, &[]),
            ]
            .concat(),
        );
        tlv(
            SEQUENCE,
            &[tbs, tlv(SEQUENCE, &[]), tlv(0x03, &[0])].concat(),
        )
    }

    #[test]
    fn subject_issuer_and_serial_as_nginx_prints_them() {
        let issuer = [
            atv(&[0x55, 0x04, 0x06], 0x13, b"FR"),
            atv(&[0x55, 0x04, 0x0a], 0x0c, b"Example CA"),
        ]
        .concat();
        let subject = [
            atv(&[0x55, 0x04, 0x0a], 0x0c, b"Example, Inc."),
            atv(&[0x55, 0x04, 0x03], 0x0c, "alice é".as_bytes()),
        ]
        .concat();
        let n = names(&cert(&[0x00, 0x9a, 0x01], &issuer, &subject)).unwrap();
        assert_eq!(n.subject, r"CN=alice é,O=Example\, Inc.");
        assert_eq!(n.issuer, "O=Example CA,C=FR");
        assert_eq!(n.serial, "9A01");
    }

    #[test]
    fn escapes_unknown_types_and_odd_strings() {
        let subject = [
            atv(&[0x55, 0x04, 0x03], 0x0c, b" #a+b\n "),
            // 1.2.3.4, an unknown type: its value as hex DER.
            atv(&[0x2a, 0x03, 0x04], 0x0c, b"x"),
            atv(&[0x55, 0x04, 0x03], 0x1e, &[0, b'h', 0, b'i']),
            // A known type whose value is not a string: hex too.
            atv(&[0x55, 0x04, 0x0b], 0x02, &[5]),
        ]
        .concat();
        let n = names(&cert(&[1], &[], &subject)).unwrap();
        assert_eq!(
            n.subject,
            r"OU=#020105,CN=hi,1.2.3.4=#0c0178,CN=\ #a\+b\0A\ "
        );
        assert_eq!(n.issuer, "");
        assert_eq!(n.serial, "01");
    }

    #[test]
    fn validity_times_read_as_unix_seconds() {
        assert_eq!(time(0x17, b"700101000000Z"), Ok(0));
        assert_eq!(time(0x17, b"491231235959Z"), Ok(2_524_607_999));
        assert_eq!(time(0x18, b"20000229120000Z"), Ok(951_825_600));
        assert_eq!(time(0x18, b"19691231235959Z"), Ok(-1));
        for bad in [
            &b"7001010000Z"[..],
            b"700101000000+",
            b"701301000000Z",
            b"70010100000aZ",
        ] {
            assert!(time(0x17, bad).is_err(), "{bad:?}");
        }
        assert!(time(0x04, b"700101000000Z").is_err());
    }

    #[test]
    fn anything_else_is_refused() {
        let good = cert(&[1], &[], &atv(&[0x55, 0x04, 0x03], 0x0c, b"a"));
        assert!(names(&good).is_ok());
        for cut in 0..good.len() {
            assert!(names(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(names(&trailing).is_err());
        assert!(names(&cert(&[1], &[], &tlv(SEQUENCE, &[]))).is_err());
        assert_eq!(dotted(&[0x2a, 0x86]), Err("an attribute type OID"));
        assert_eq!(dotted(&[0x2a, 0x86, 0x48]).unwrap(), "1.2.840");
        assert!(text(0x1e, &[0xd8, 0x00]).is_none());
    }
}
#[cfg(test)]
mod openssl_seeds {
    /// The corpus's certificates made by OpenSSL, read as `openssl x509 -noout -subject
    /// -serial -nameopt RFC2253` prints them.
    #[test]
    fn names_agree_with_openssl() {
        let read = |f: &str| {
            let p = format!(
                "{}/../../fuzz/corpus/x509_names/{f}",
                env!("CARGO_MANIFEST_DIR")
            );
            super::names(&std::fs::read(p).unwrap()).unwrap()
        };
        let ec = read("openssl_ec");
        let dn = r"emailAddress=alice@example.com,OU=R,O=Example\, Inc.,C=FR";
        assert_eq!((ec.subject.as_str(), ec.issuer.as_str()), (dn, dn));
        assert_eq!(ec.serial, "3A9EC912E7C18E85468CE531167162FA81638CCF");
        let rsa = read("openssl_rsa_dc");
        assert_eq!(rsa.subject, r"CN=\#bob\ ,UID=bob,DC=example,DC=com");
        assert_eq!(rsa.serial, "FF01");
    }

    /// A certificate naming an OCSP responder, and its issuer's subject and key, as
    /// `openssl x509 -text` prints them (`tests/data/ocsp-leaf.der`, `ocsp-ca.der`).
    #[test]
    fn ocsp_responder_and_issuer_key() {
        let data = |f: &str| {
            std::fs::read(format!("{}/tests/data/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap()
        };
        let (leaf, ca) = (data("ocsp-leaf.der"), data("ocsp-ca.der"));
        assert_eq!(
            super::ocsp_url(&leaf).unwrap().as_deref(),
            Some("http://127.0.0.1:8888/ocsp")
        );
        assert_eq!(super::ocsp_url(&ca).unwrap(), None);
        let k = super::issuer_key(&ca).unwrap();
        // id-ecPublicKey, prime256v1, an uncompressed point.
        assert_eq!(k.algorithm, [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]);
        assert_eq!(
            k.curve.as_deref(),
            Some(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07][..])
        );
        assert_eq!((k.key.len(), k.key[0]), (65, 0x04));
        // CN=ca, the whole Name element.
        assert_eq!(
            k.subject,
            [
                0x30, 0x0d, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x02, b'c',
                b'a'
            ]
        );
        assert!(super::is_ca(&ca).unwrap());
        assert!(!super::is_ca(&leaf).unwrap());
    }

    /// Their validity and authority key identifier, as `openssl x509 -dates -ext
    /// authorityKeyIdentifier` prints them.
    #[test]
    fn validity_and_key_id_agree_with_openssl() {
        let der = std::fs::read(format!(
            "{}/../../fuzz/corpus/x509_names/openssl_ec",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        // Dec  6 19:48:36 2026 GMT, Jan  5 19:48:36 2027 GMT.
        assert_eq!(super::validity(&der), Ok((1_796_586_516, 1_799_178_516)));
        let (serial, aki) = super::serial_and_authority_key_id(&der).unwrap();
        assert_eq!(
            super::hex_upper(&serial),
            "3A9EC912E7C18E85468CE531167162FA81638CCF"
        );
        assert_eq!(
            super::hex_upper(&aki.unwrap()),
            "96A286EB90DC48E06D924E93377778D6C23A105A"
        );
    }
}
