//! Entry points for the fuzz targets over what the server crate parses from untrusted bytes
//! (`fuzz/fuzz_targets/`; their corpora are replayed by `tests/fuzz_corpus.rs`). Not library
//! API: each takes the fuzzer's bytes and panics only on a broken invariant.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::Cidr;
use crate::tls::Session;

/// A self-signed P-256 certificate for `fuzz.test` (valid to 2126) and its key: the TLS
/// target's server needs one; nothing trusts it.
const CERT: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBlTCCATugAwIBAgIUQKIYaMDVJiRgL00Qkc4KKTaqSMQwCgYIKoZIzj0EAwIw\n\
FDESMBAGA1UEAwwJZnV6ei50ZXN0MCAXDTI2MTIwNjIyNTMzMFoYDzIxMjYxMTEy\n\
MjI1MzMwWjAUMRIwEAYDVQQDDAlmdXp6LnRlc3QwWTATBgcqhkjOPQIBBggqhkjO\n\
PQMBBwNCAARozUntXwwWEbln/wTbsOn8WIpqxVHL687cMXDdAgGjUAuH2NolE8Cx\n\
m46dGzL1gmVdQs+0JJlvQDHidhVmOPvzo2kwZzAdBgNVHQ4EFgQUchfQopFDOc0n\n\
D6dyjwz8fjJZWL8wHwYDVR0jBBgwFoAUchfQopFDOc0nD6dyjwz8fjJZWL8wDwYD\n\
VR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglmdXp6LnRlc3QwCgYIKoZIzj0EAwID\n\
SAAwRQIgR0/tFgerWtHERZEvg5Jere6pCuXXxBzOZ1SoSFl181MCIQD7wGMh3enF\n\
/4JEABCTiDF7o3UKaIWq9H+dDkcGy/DWVg==\n\
-----END CERTIFICATE-----";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgB51iGDOrGghqV+kU\n\
JzWcQSYjErFmrxPYLaJyTw5/VgihRANCAARozUntXwwWEbln/wTbsOn8WIpqxVHL\n\
687cMXDdAgGjUAuH2NolE8Cxm46dGzL1gmVdQs+0JJlvQDHidhVmOPvz\n\
-----END PRIVATE KEY-----";

fn server_config() -> Arc<rustls::ServerConfig> {
    static CONFIG: OnceLock<Arc<rustls::ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(CERT.as_bytes())
                    .map(|c| c.expect("the embedded certificate"))
                    .collect();
            let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).expect("the embedded key");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("protocol versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("the embedded pair");
            cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Arc::new(cfg)
        })
        .clone()
}

/// A TLS server session fed `data` as a client's bytes: the first byte sets how many arrive
/// per read (1 to 256), as a socket may split them; after each read the session runs, its
/// plaintext is read and its records are written out. No input may panic, and a read never
/// takes more than it was offered.
pub fn tls_records(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split) + 1;
    let mut s = Session::new(server_config()).expect("a session");
    let mut plain = [0u8; 4096];
    let mut out = Vec::new();
    for piece in rest.chunks(chunk) {
        let mut rd = piece;
        while !rd.is_empty() {
            let before = rd.len();
            match s.read_tls(&mut rd) {
                Ok(n) => assert_eq!(before - rd.len(), n, "read_tls says what it took"),
                Err(_) => return,
            }
            if s.process_new_packets().is_err() {
                // The alert it queued goes out; then the connection is over.
                let _ = s.write_tls(&mut out);
                return;
            }
            while let Some(n) = s.read_plain(&mut plain) {
                assert!(n <= plain.len());
                if n == 0 {
                    break;
                }
            }
            while s.wants_write() {
                if s.write_tls(&mut out).is_err() {
                    return;
                }
            }
        }
    }
    if !s.is_handshaking() {
        let _ = s.write_plain(b"HTTP/1.1 200 OK\r\n\r\n");
    }
    s.send_close_notify();
    let _ = s.write_tls(&mut out);
}

/// `X-Forwarded-For` values from `data` (split at newlines) behind a peer in a trusted range:
/// the client `realip` names is the peer, or an address one of the values holds, never
/// anything else.
pub fn real_ip(data: &[u8]) {
    static FROM: OnceLock<Vec<Cidr>> = OnceLock::new();
    let from = FROM.get_or_init(|| {
        ["10.0.0.0/8", "192.168.0.0/16", "::1/128", "fd00::/8"]
            .iter()
            .map(|c| c.parse().expect("a valid range"))
            .collect()
    });
    let peer = SocketAddr::from(([10, 1, 2, 3], 443));
    let values = data.split(|&b| b == b'\n');
    let got = crate::realip::real_ip(peer, from, values.clone());
    if got == peer {
        return;
    }
    let named = values
        .flat_map(|v| v.split(|&b| b == b','))
        .filter_map(|e| std::str::from_utf8(e).ok()?.trim().parse::<IpAddr>().ok())
        .any(|ip| ip == got.ip());
    assert!(named, "{got} is neither the peer nor in the header");
}
