//! What the listeners do for ACME: which names weft obtains certificates for, the certificate a
//! name is served with before its own arrives, and the answers to the CA's challenges
//! (TLS-ALPN-01 in the certificate resolver, HTTP-01 ahead of every other handling of a
//! request). Answers are read from the storage (`store.rs`), not from memory: the
//! `process` model's master and connection processes, a new process after an upgrade and
//! another instance sharing the storage behind one balancer all answer the same.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;

use super::store::{self, valid_name, Store};
use crate::config::Config;

/// The path prefix of HTTP-01 (RFC 8555 §8.3).
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// The names `[acme]` obtains certificates for: every `[[site]] hosts` entry and every
/// `[acme] names` entry, lower-cased, once each, in order, leaving out those `covered` says a
/// configured certificate (`[tls] cert`, `[[tls.sni]]`) already serves. A wildcard, an address
/// or anything that is not a host name, and not covered, is refused with the reason.
pub fn names(cfg: &Config, covered: impl Fn(&str) -> bool) -> Result<Vec<String>, String> {
    let wanted = cfg
        .site
        .iter()
        .flat_map(|s| s.hosts.iter())
        .chain(cfg.acme.names.iter());
    let mut out: Vec<String> = Vec::new();
    for raw in wanted {
        let name = raw.trim().trim_end_matches('.').to_ascii_lowercase();
        if out.contains(&name) || covered(&name) {
            continue;
        }
        if name.starts_with("*.") {
            return Err(format!(
                "[acme]: {raw:?} is a wildcard: a CA issues one only through the dns-01 \
                 challenge, which weft does not answer. Give it a certificate of your own \
                 ([[tls.sni]] names = [{raw:?}]) or name its hosts one by one"
            ));
        }
        if name.parse::<std::net::IpAddr>().is_ok() {
            return Err(format!(
                "[acme]: {raw:?} is an address: weft obtains certificates for host names \
                 only. Give it a certificate of your own ([[tls.sni]] or [tls] cert)"
            ));
        }
        if !valid_name(&name) {
            return Err(format!(
                "[acme]: {raw:?} is not a host name a certificate can be obtained for \
                 (letters, digits and hyphens in dot-separated labels)"
            ));
        }
        out.push(name);
    }
    Ok(out)
}

/// The certificate `name` is served with until its own arrives: self-signed, valid for the
/// name, clearly not trusted (a browser shows its warning rather than a refused connection,
/// and the TLS listener can answer the CA's TLS-ALPN-01 challenge at all).
pub fn placeholder(name: &str, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| format!("placeholder key: {e}"))?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| format!("placeholder for {name}: {e}"))?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("weft placeholder for {name} (no certificate obtained yet)"),
    );
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("placeholder for {name}: {e}"))?;
    certified(cert.der().clone(), key.serialize_der(), provider)
}

fn certified(
    cert: rustls::pki_types::CertificateDer<'static>,
    pkcs8: Vec<u8>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pkcs8.into());
    CertifiedKey::from_der(vec![cert], key, provider).map_err(|e| e.to_string())
}

/// The TLS-ALPN-01 answers of one generation's TLS listeners: for a ClientHello offering
/// `acme-tls/1` for a name with an answer in the storage, the challenge certificate (made on
/// the first such handshake and kept for the next ones: a CA validates from several places).
#[derive(Debug)]
pub struct AlpnAnswers {
    dir: PathBuf,
    made: Mutex<HashMap<(String, String), Arc<CertifiedKey>>>,
}

impl AlpnAnswers {
    /// Answers from `store`'s tls-alpn-01 folder.
    pub fn new(store: &Store) -> AlpnAnswers {
        AlpnAnswers {
            dir: store.challenges("tls-alpn-01"),
            made: Mutex::new(HashMap::new()),
        }
    }

    /// The challenge certificate for `name`, if an answer waits for it.
    pub fn certificate(
        &self,
        name: Option<&str>,
        provider: &CryptoProvider,
    ) -> Option<Arc<CertifiedKey>> {
        let name = name?;
        let Some(ka) = store::answer(&self.dir, name) else {
            log::info!("TLS-ALPN-01 handshake for {name}: no challenge is pending for it");
            return None;
        };
        let key = (name.to_string(), ka);
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ck) = made.get(&key) {
            return Some(ck.clone());
        }
        let made_now = super::certs::alpn_certificate(name, &key.1)
            .and_then(|(cert, k)| {
                let pkcs8 = match k {
                    rustls::pki_types::PrivateKeyDer::Pkcs8(p) => p.secret_pkcs8_der().to_vec(),
                    _ => return Err("not a PKCS#8 key".to_string()),
                };
                // Not `CertifiedKey::from_der`: its check of the pair parses the certificate,
                // and webpki refuses the critical acmeIdentifier extension it does not know.
                let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pkcs8.into());
                let signer = provider
                    .key_provider
                    .load_private_key(key)
                    .map_err(|e| e.to_string())?;
                Ok(CertifiedKey::new(vec![cert], signer))
            })
            .map_err(|e| log::error!("TLS-ALPN-01 for {name}: {e}"))
            .ok()?;
        let ck = Arc::new(made_now);
        if made.len() >= 16 {
            made.clear();
        }
        made.insert(key, ck.clone());
        log::info!("TLS-ALPN-01 handshake for {name}: answered");
        Some(ck)
    }
}

/// The HTTP-01 answers: where they are kept, for a request under [`HTTP01_PREFIX`].
#[derive(Debug, Clone)]
pub struct HttpAnswers {
    dir: PathBuf,
}

impl HttpAnswers {
    /// Answers from `store`'s http-01 folder.
    pub fn new(store: &Store) -> HttpAnswers {
        HttpAnswers {
            dir: store.challenges("http-01"),
        }
    }

    /// The key authorization for a request of `path`, if it is a challenge's and one waits.
    pub fn answer(&self, path: &str) -> Option<String> {
        let token = path.strip_prefix(HTTP01_PREFIX)?;
        store::answer(Path::new(&self.dir), token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(toml: &str) -> Config {
        Config::from_toml(toml).unwrap()
    }

    #[test]
    fn names_come_from_the_sites_and_the_list_once_each_less_those_covered() {
        let c = cfg("[acme]\nnames = [\"Extra.Example\", \"a.example\"]\n\
                     [[site]]\nhosts = [\"a.example\", \"b.example.\"]\n\
                     [[site]]\nhosts = [\"own.example\"]\n");
        let got = names(&c, |n| n == "own.example").unwrap();
        assert_eq!(got, ["a.example", "b.example", "extra.example"]);
    }

    #[test]
    fn wildcards_and_addresses_are_refused_unless_covered() {
        let c = cfg("[[site]]\nhosts = [\"*.example.org\"]\n");
        let e = names(&c, |_| false).unwrap_err();
        assert!(e.contains("wildcard") && e.contains("dns-01"), "{e}");
        assert!(names(&c, |n| n == "*.example.org").unwrap().is_empty());
        let c = cfg("[acme]\nnames = [\"192.0.2.1\"]\n");
        assert!(names(&c, |_| false).unwrap_err().contains("address"));
        let c = cfg("[acme]\nnames = [\"a_b.example\"]\n");
        assert!(names(&c, |_| false)
            .unwrap_err()
            .contains("not a host name"));
    }

    #[test]
    fn a_placeholder_is_self_signed_for_its_name() {
        let provider = rustls::crypto::ring::default_provider();
        let ck = placeholder("a.example", &provider).unwrap();
        let der = ck.end_entity_cert().unwrap();
        let n = weft_http::x509::names(der).unwrap();
        assert_eq!(n.subject, n.issuer);
        assert!(n.subject.contains("placeholder"), "{}", n.subject);
        let leaf = webpki::EndEntityCert::try_from(der).unwrap();
        let name = rustls::pki_types::ServerName::try_from("a.example").unwrap();
        assert!(leaf.verify_is_valid_for_subject_name(&name).is_ok());
    }

    #[test]
    fn challenge_answers_are_read_from_the_storage() {
        let storage = std::env::temp_dir().join(format!("weft-acme-serve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&storage);
        let store = Store::new(&crate::config::AcmeConfig {
            storage: storage.clone(),
            ..Default::default()
        });
        let http = HttpAnswers::new(&store);
        assert_eq!(http.answer("/.well-known/acme-challenge/tok"), None);
        store.write_answer("http-01", "tok", "tok.print").unwrap();
        assert_eq!(
            http.answer("/.well-known/acme-challenge/tok").as_deref(),
            Some("tok.print")
        );
        assert_eq!(http.answer("/tok"), None);
        assert_eq!(http.answer("/.well-known/acme-challenge/../tok"), None);

        let provider = rustls::crypto::ring::default_provider();
        let alpn = AlpnAnswers::new(&store);
        assert!(alpn.certificate(Some("a.example"), &provider).is_none());
        store
            .write_answer("tls-alpn-01", "a.example", "tok.print")
            .unwrap();
        let first = alpn.certificate(Some("a.example"), &provider).unwrap();
        let again = alpn.certificate(Some("a.example"), &provider).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "made once per answer");
        assert!(alpn.certificate(None, &provider).is_none());
        let _ = std::fs::remove_dir_all(storage);
    }
}
