//! A minimal HTTP/2-only server on hyper 1.x, the peer that stands for "the `h2` crate behind
//! an adapter" in scripts/peers/h2_vs_peers.sh. One current-thread tokio runtime (one worker,
//! as weft's `--threads 1`), hyper's `server::conn::http2::Builder` over hyper-util's
//! `TokioIo`, TLS from tokio-rustls on rustls' ring provider with ALPN `h2` only, or plain h2c
//! (prior knowledge) without a certificate.
//!
//!     peer-hyper-h2 ADDR WWW_DIR [CERT.pem KEY.pem]
//!
//! It answers two paths, with the bytes weft answers them with:
//! - `/echo`: 200, `content-type: text/plain`, the 4-byte body `echo`;
//! - `/haewelmann.html`: 200, `content-type: text/html`, the page read once from WWW_DIR at
//!   start and held in memory (hyper has no file serving or file cache of its own: this is
//!   the cheapest a hyper server can serve a file, with no open, stat or read per request).
//!
//! and 404 to anything else. The page's headers are weft's: `content-type: text/html;
//! charset=utf-8`, `last-modified`, `etag` (weft's form: mtime s.ns-size in hex) and
//! `accept-ranges: bytes`, made once at start (no conditional requests or ranges are served:
//! h2load sends none). Every answer has `server: hyper`, as weft's have `server: weft`; hyper
//! adds `date` and `content-length`. The h2 settings are hyper's defaults. Every accepted
//! socket gets TCP_NODELAY, as weft's do.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT_RANGES, CONTENT_TYPE, ETAG, LAST_MODIFIED, SERVER,
};
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

const PAGE: &str = "haewelmann.html";

/// The page's bytes and its headers, made once.
struct Page {
    body: Bytes,
    headers: HeaderMap,
}

impl Page {
    fn load(www: &str) -> Page {
        use std::os::unix::fs::MetadataExt;
        let path = std::path::Path::new(www).join(PAGE);
        let body = Bytes::from(std::fs::read(&path).expect("the page"));
        let meta = std::fs::metadata(&path).expect("the page's metadata");
        let mtime = meta.modified().expect("mtime");
        let mut headers = HeaderMap::new();
        headers.insert(SERVER, HeaderValue::from_static("hyper"));
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        let lm = httpdate::fmt_http_date(mtime);
        headers.insert(LAST_MODIFIED, HeaderValue::from_str(&lm).expect("date"));
        let etag = format!(
            "\"{:x}.{:x}-{:x}\"",
            meta.mtime(),
            meta.mtime_nsec(),
            meta.size()
        );
        headers.insert(ETAG, HeaderValue::from_str(&etag).expect("etag"));
        headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        Page { body, headers }
    }
}

fn answer(req: &Request<Incoming>, page: &Page) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match req.uri().path() {
        "/echo" => (StatusCode::OK, "text/plain", Bytes::from_static(b"echo")),
        p if p.strip_prefix('/') == Some(PAGE) => {
            let mut res = Response::new(Full::new(page.body.clone()));
            *res.headers_mut() = page.headers.clone();
            return res;
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found\n"),
        ),
    };
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("hyper"));
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    res
}

fn tls_config(cert: &str, key: &str) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .expect("certificate file")
        .collect::<Result<_, _>>()
        .expect("certificate PEM");
    let key = PrivateKeyDer::from_pem_file(key).expect("private key PEM");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("certificate and key");
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(cfg)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 && args.len() != 5 {
        eprintln!("usage: peer-hyper-h2 ADDR WWW_DIR [CERT.pem KEY.pem]");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[1].parse().expect("ADDR as host:port");
    let page = Arc::new(Page::load(&args[2]));
    let tls =
        (args.len() == 5).then(|| tokio_rustls::TlsAcceptor::from(tls_config(&args[3], &args[4])));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await.expect("bind");
        eprintln!(
            "peer-hyper-h2 listening on {addr} ({})",
            if tls.is_some() { "TLS, ALPN h2" } else { "h2c" }
        );
        let builder = http2::Builder::new(TokioExecutor::new());
        loop {
            let (sock, _) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: keep serving the connections already open.
                    eprintln!("accept: {e}");
                    tokio::task::yield_now().await;
                    continue;
                }
            };
            let _ = sock.set_nodelay(true);
            let page = page.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let res = answer(&req, &page);
                async move { Ok::<_, Infallible>(res) }
            });
            let builder = builder.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                // A failed handshake or connection just ends its task.
                match tls {
                    Some(acc) => {
                        if let Ok(s) = acc.accept(sock).await {
                            let _ = builder.serve_connection(TokioIo::new(s), svc).await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(sock), svc).await;
                    }
                }
            });
        }
    });
}
