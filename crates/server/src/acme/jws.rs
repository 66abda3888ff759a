//! The account key and the JSON Web Signatures an ACME server takes (RFC 8555 §6.2, RFC 7515):
//! ES256 (ECDSA P-256 with SHA-256, the signature as r || s), the public key as a JWK
//! (RFC 7517) in the first request and by account URL (`kid`) after, and the key's
//! thumbprint (RFC 7638) that every challenge's key authorization ends with.

use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// base64url without padding (RFC 4648 §5, as JOSE writes it).
pub fn b64u(data: &[u8]) -> String {
    weft_http::auth::base64_encode(data)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// Decodes base64url with or without padding; `None` for anything else.
pub fn b64u_decode(s: &str) -> Option<Vec<u8>> {
    // The standard alphabet's own characters are not base64url.
    if s.contains(['+', '/']) {
        return None;
    }
    let mut std: String = s
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !std.len().is_multiple_of(4) {
        std.push('=');
    }
    weft_http::auth::base64_decode(std.as_bytes())
}

/// An ACME account key: ECDSA P-256, kept as PKCS#8.
#[derive(Debug)]
pub struct AccountKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    rng: SystemRandom,
}

/// Why a key could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError(pub String);

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

impl AccountKey {
    /// A new key from the system's random source.
    pub fn generate() -> Result<AccountKey, KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| KeyError("could not generate a P-256 key".into()))?;
        AccountKey::from_pkcs8(pkcs8.as_ref())
    }

    /// The key in `pkcs8` (DER), as [`AccountKey::pkcs8`] gives it.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<AccountKey, KeyError> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| KeyError(format!("not a P-256 PKCS#8 key: {e}")))?;
        Ok(AccountKey {
            pair,
            pkcs8: pkcs8.to_vec(),
            rng,
        })
    }

    /// The key as PKCS#8 DER (to store it).
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public key as a JWK, its members in the lexicographic order RFC 7638 hashes them
    /// in (so the same text serves as `jwk` and as the thumbprint's input).
    pub fn jwk(&self) -> String {
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let p = self.pair.public_key().as_ref();
        format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            b64u(&p[1..33]),
            b64u(&p[33..65])
        )
    }

    /// The JWK thumbprint (RFC 7638): base64url of the SHA-256 of the JWK's canonical form.
    pub fn thumbprint(&self) -> String {
        b64u(ring::digest::digest(&ring::digest::SHA256, self.jwk().as_bytes()).as_ref())
    }

    /// A challenge's key authorization (RFC 8555 §8.1): the token, a dot, the thumbprint.
    pub fn key_authorization(&self, token: &str) -> String {
        format!("{token}.{}", self.thumbprint())
    }

    /// A flattened JWS (RFC 8555 §6.2) of `payload` (`None`: the empty payload of a
    /// POST-as-GET) for `url`, with `nonce`, naming the key by `kid` (the account URL) or, for
    /// a new account, by its JWK.
    pub fn sign(
        &self,
        url: &str,
        nonce: &str,
        kid: Option<&str>,
        payload: Option<&str>,
    ) -> Result<String, KeyError> {
        let key = match kid {
            Some(k) => format!(r#""kid":{}"#, json_string(k)),
            None => format!(r#""jwk":{}"#, self.jwk()),
        };
        let protected = b64u(
            format!(
                r#"{{"alg":"ES256",{key},"nonce":{},"url":{}}}"#,
                json_string(nonce),
                json_string(url)
            )
            .as_bytes(),
        );
        let payload = payload.map_or_else(String::new, |p| b64u(p.as_bytes()));
        let input = format!("{protected}.{payload}");
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| KeyError("signing failed".into()))?;
        Ok(format!(
            r#"{{"protected":"{protected}","payload":"{payload}","signature":"{}"}}"#,
            b64u(sig.as_ref())
        ))
    }
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    #[test]
    fn base64url_is_unpadded_and_url_safe_and_round_trips() {
        assert_eq!(b64u(b""), "");
        assert_eq!(b64u(b"f"), "Zg");
        assert_eq!(b64u(&[0xfb, 0xff]), "-_8");
        for n in 0..40u8 {
            let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            assert_eq!(b64u_decode(&b64u(&data)).unwrap(), data);
        }
        assert_eq!(b64u_decode("Zg==").unwrap(), b"f");
        assert!(
            b64u_decode("+/8").is_none(),
            "the standard alphabet is refused"
        );
        assert!(b64u_decode("Z").is_none());
        assert!(b64u_decode("Zg!").is_none());
    }

    /// RFC 7638 §3.1's example is RSA; for EC the canonical form is checked instead, and the
    /// thumbprint is the SHA-256 of exactly that text.
    #[test]
    fn the_jwk_is_canonical_and_the_thumbprint_hashes_it() {
        let key = AccountKey::generate().unwrap();
        let jwk = key.jwk();
        let v: serde_json::Value = serde_json::from_str(&jwk).unwrap();
        assert_eq!(v["kty"], "EC");
        assert_eq!(v["crv"], "P-256");
        assert_eq!(b64u_decode(v["x"].as_str().unwrap()).unwrap().len(), 32);
        assert_eq!(b64u_decode(v["y"].as_str().unwrap()).unwrap().len(), 32);
        assert!(jwk.find("\"crv\"") < jwk.find("\"kty\"") && jwk.find("\"x\"") < jwk.find("\"y\""));
        assert!(!jwk.contains(' '));
        let tp = b64u_decode(&key.thumbprint()).unwrap();
        assert_eq!(
            tp,
            ring::digest::digest(&ring::digest::SHA256, jwk.as_bytes()).as_ref()
        );
        assert_eq!(
            key.key_authorization("tok-1"),
            format!("tok-1.{}", key.thumbprint())
        );
        // The key survives storage.
        let again = AccountKey::from_pkcs8(key.pkcs8()).unwrap();
        assert_eq!(again.jwk(), jwk);
        assert!(AccountKey::from_pkcs8(b"not a key").is_err());
    }

    #[test]
    fn a_jws_carries_the_header_acme_asks_for_and_verifies_with_the_public_key() {
        let key = AccountKey::generate().unwrap();
        let public = key.pair.public_key().as_ref().to_vec();
        for (kid, payload) in [
            (None, Some(r#"{"termsOfServiceAgreed":true}"#)),
            (Some("https://ca/acct/1"), None),
        ] {
            let jws = key
                .sign("https://ca/new-acct", "nonce-\"1\"", kid, payload)
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&jws).unwrap();
            let protected = v["protected"].as_str().unwrap();
            let header: serde_json::Value =
                serde_json::from_slice(&b64u_decode(protected).unwrap()).unwrap();
            assert_eq!(header["alg"], "ES256");
            assert_eq!(header["nonce"], "nonce-\"1\"");
            assert_eq!(header["url"], "https://ca/new-acct");
            match kid {
                Some(k) => {
                    assert_eq!(header["kid"], k);
                    assert!(header.get("jwk").is_none());
                }
                None => {
                    assert_eq!(header["jwk"]["kty"], "EC");
                    assert!(header.get("kid").is_none());
                }
            }
            let body = v["payload"].as_str().unwrap();
            assert_eq!(b64u_decode(body).unwrap(), payload.unwrap_or("").as_bytes());
            let sig = b64u_decode(v["signature"].as_str().unwrap()).unwrap();
            assert_eq!(sig.len(), 64, "r || s, 32 bytes each");
            let input = format!("{protected}.{body}");
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
                .verify(input.as_bytes(), &sig)
                .unwrap();
            // A changed payload does not verify.
            assert!(UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
                .verify(format!("{protected}.x").as_bytes(), &sig)
                .is_err());
        }
    }
}
