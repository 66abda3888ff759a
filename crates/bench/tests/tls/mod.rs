//! A small HTTPS/1.1 server for the tests: rustls on std threads, a certificate made by rcgen,
//! keep-alive unless the request asks for `Connection: close`. It counts completed handshakes
//! and resumed ones, so a test can compare them with what the client reports.

#![allow(dead_code)]
// The server runs on plain threads, never on a fiber: std's Mutex cannot block a worker here.
#![allow(clippy::disallowed_types)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// The body every request gets.
pub const BODY: &[u8] = b"hello over tls\n";

/// A self-signed P-256 certificate for `names`, written as PEM under `dir`.
pub struct Cert {
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
    pub der: CertificateDer<'static>,
    pub key: Vec<u8>,
}

impl Cert {
    pub fn new(dir: &Path, stem: &str, names: &[&str]) -> Cert {
        std::fs::create_dir_all(dir).unwrap();
        let ck = rcgen::generate_simple_self_signed(
            names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        let cert_pem = dir.join(format!("{stem}.crt"));
        let key_pem = dir.join(format!("{stem}.key"));
        std::fs::write(&cert_pem, ck.cert.pem()).unwrap();
        std::fs::write(&key_pem, ck.signing_key.serialize_pem()).unwrap();
        Cert {
            cert_pem,
            key_pem,
            der: ck.cert.der().clone(),
            key: ck.signing_key.serialize_der(),
        }
    }
}

/// The server; stopped on drop.
pub struct TlsServer {
    pub addr: SocketAddr,
    pub handshakes: Arc<AtomicU64>,
    pub resumed: Arc<AtomicU64>,
    /// Plain bytes of every request received, in order (for the shim's test).
    pub requests: Arc<std::sync::Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TlsServer {
    pub fn start(cert: &Cert) -> TlsServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.clone())),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handshakes = Arc::new(AtomicU64::new(0));
        let resumed = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, r, q, st) = (
            handshakes.clone(),
            resumed.clone(),
            requests.clone(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            for s in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                let (config, h, r, q) = (config.clone(), h.clone(), r.clone(), q.clone());
                std::thread::spawn(move || serve(s, config, &h, &r, &q));
            }
        });
        TlsServer {
            addr,
            handshakes,
            resumed,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.addr.port())
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    tcp: TcpStream,
    config: Arc<ServerConfig>,
    handshakes: &AtomicU64,
    resumed: &AtomicU64,
    requests: &std::sync::Mutex<Vec<u8>>,
) {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = ServerConnection::new(config).unwrap();
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        if s.conn.complete_io(&mut s.sock).is_err() {
            return;
        }
    }
    handshakes.fetch_add(1, Ordering::SeqCst);
    if s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
        resumed.fetch_add(1, Ordering::SeqCst);
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head: Vec<u8> = buf.drain(..end + 4).collect();
        requests.lock().unwrap().extend_from_slice(&head);
        let close = String::from_utf8_lossy(&head)
            .to_ascii_lowercase()
            .contains("connection: close");
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n",
            BODY.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        let mut out = response.into_bytes();
        out.extend_from_slice(BODY);
        if s.write_all(&out).and_then(|()| s.flush()).is_err() {
            return;
        }
        if close {
            s.conn.send_close_notify();
            let _ = s.flush();
            return;
        }
    }
}
