use super::*;

fn key(n: u8) -> Arc<CertifiedKey> {
    // The resolver only hands keys out; a chain of one fake certificate tells them apart.
    struct NoKey;
    impl fmt::Debug for NoKey {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("NoKey")
        }
    }
    impl rustls::sign::SigningKey for NoKey {
        fn choose_scheme(
            &self,
            _: &[rustls::SignatureScheme],
        ) -> Option<Box<dyn rustls::sign::Signer>> {
            None
        }
        fn algorithm(&self) -> rustls::SignatureAlgorithm {
            rustls::SignatureAlgorithm::ECDSA
        }
    }
    Arc::new(CertifiedKey::new(
        vec![CertificateDer::from(vec![n])],
        Arc::new(NoKey),
    ))
}

fn which(r: &SniResolver, name: Option<&str>) -> u8 {
    r.pick(name).expect("a certificate").cert[0].as_ref()[0]
}

#[test]
fn sni_exact_then_longest_wildcard_then_default() {
    let mut r = SniResolver {
        default: Some(key(0)),
        exact: HashMap::new(),
        wildcard: vec![
            (".example.com".into(), key(2)),
            (".a.example.com".into(), key(3)),
        ],
        alpn: None,
        provider: Arc::new(provider()),
    };
    r.exact.insert("www.example.com".into(), key(1));
    assert_eq!(which(&r, None), 0);
    assert_eq!(which(&r, Some("www.example.com")), 1);
    assert_eq!(which(&r, Some("api.example.com")), 2);
    assert_eq!(which(&r, Some("x.a.example.com")), 3);
    // A wildcard covers one label only, and not the bare domain.
    assert_eq!(which(&r, Some("example.com")), 0);
    assert_eq!(which(&r, Some("x.y.b.example.com")), 0);
    assert_eq!(which(&r, Some("other.org")), 0);
}

#[test]
fn tls_settings_parse_with_defaults() {
    let c = Config::from_toml(
        "[[listen]]\naddr = \"127.0.0.1:8443\"\ntls = true\n\
         [[listen]]\naddr = \"127.0.0.1:8080\"\nredirect_https = true\n\
         [timeouts]\ntls_handshake = \"3s\"\n\
         [tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\nhsts = \"max-age=1\"\n\
         [[tls.sni]]\nnames = [\"a.test\"]\ncert = \"a.pem\"\nkey = \"a.key\"\n",
    )
    .unwrap();
    assert!(c.listen[0].tls && !c.listen[0].redirect_https);
    assert!(!c.listen[1].tls && c.listen[1].redirect_https);
    assert_eq!(c.timeouts.tls_handshake, std::time::Duration::from_secs(3));
    assert_eq!(c.tls.cert.as_deref(), Some(Path::new("c.pem")));
    assert_eq!(c.tls.session_cache, crate::config::DEFAULT_SESSION_CACHE);
    assert!(c.tls.session_tickets);
    assert_eq!(c.tls.sni[0].names, ["a.test"]);
    // What `weft check` prints reads back to the same settings.
    assert_eq!(Config::from_toml(&c.to_toml().unwrap()).unwrap(), c);
    assert_eq!(
        Config::default().timeouts.tls_handshake,
        std::time::Duration::from_secs(10)
    );
    assert!(Config::from_toml("[tls]\nbogus = 1\n").is_err());
}

/// A CA (CA:TRUE) named `cn`, self-signed.
fn ca(cn: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap()
}

/// A CA's certificate named as the server's is refused with the reason clients give; a
/// server certificate it issued is taken, and so (with a warning) is a self-signed CA
/// certificate, what `openssl req -x509` makes for a test.
#[test]
fn a_ca_certificate_as_the_server_certificate_is_refused_unless_self_signed() {
    let root = ca("Root");
    let intermediate = {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Intermediate");
        params
            .signed_by(&rcgen::KeyPair::generate().unwrap(), &root)
            .unwrap()
    };
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&rcgen::KeyPair::generate().unwrap(), &root)
        .unwrap();
    let file = Path::new("chain.pem");
    assert!(weft_http::x509::is_ca(intermediate.der()).unwrap());
    assert!(weft_http::x509::is_ca(root.der()).unwrap());
    assert!(!weft_http::x509::is_ca(leaf.der()).unwrap());
    let err = refuse_ca_leaf(file, intermediate.der()).unwrap_err();
    assert!(
        err.contains("CN=Intermediate) is a CA certificate")
            && err.contains("issued by CN=Root")
            && err.contains("CaUsedAsEndEntity"),
        "{err}"
    );
    refuse_ca_leaf(file, leaf.der()).unwrap();
    refuse_ca_leaf(file, root.der()).unwrap();
    // Not a certificate at all: left to rustls to refuse.
    assert!(weft_http::x509::is_ca(b"\x30\x03\x02\x01\x01").is_err());
}

/// `[acme]` manages the sites' names no configured certificate serves: a `[[tls.sni]]`
/// wildcard covers a name under it; the rest get a placeholder until obtained, and the first
/// becomes the default when `[tls]` names no certificate.
#[test]
fn acme_manages_only_the_names_no_configured_certificate_serves() {
    let dir = std::env::temp_dir().join(format!("weft-tls-acme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["*.example.org".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("wild.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("wild.key"), key.serialize_pem()).unwrap();
    let cfg = Config::from_toml(&format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n\
         [acme]\nenabled = true\nstorage = \"{d}/acme\"\n\
         [[tls.sni]]\nnames = [\"*.example.org\"]\ncert = \"{d}/wild.pem\"\nkey = \"{d}/wild.key\"\n\
         [[site]]\nhosts = [\"www.example.org\", \"other.example\", \"*.example.org\"]\n",
        d = dir.display()
    ))
    .unwrap();
    let tls = Tls::from_config(&cfg).unwrap().unwrap();
    let got: Vec<(String, Source)> = tls
        .certificates
        .0
        .iter()
        .map(|c| (c.name.clone(), c.source))
        .collect();
    assert_eq!(
        got,
        [
            ("*.example.org".to_string(), Source::File),
            ("other.example".to_string(), Source::Placeholder)
        ]
    );
    // Nothing was written by loading.
    assert!(!dir.join("acme").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
