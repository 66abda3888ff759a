//! HTTPS listeners (`--https`, `[[listen]] tls = true`, `[tls]`): the real `weft` binary on
//! every model, certificates made here with rcgen (no files from outside, no network), and a
//! rustls client; curl, `openssl s_client` and Python's ssl module when installed (each test
//! that needs one prints a line and skips when it is missing).

mod common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::launch::RUN_LIMIT;
use common::{Launch, Weft};

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

const MODELS: &[&str] = &["fiber", "thread", "process", "pipeline"];
// Generous: the 10,000-abort test leaves the process model forking for a while, on a shared
// machine running debug builds.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const INDEX: &[u8] = b"<!DOCTYPE html>\n<title>weft tls test</title>\n";

/// A test directory with `root/index.html` ([`INDEX`]).
fn unique_dir(name: &str) -> PathBuf {
    let dir = common::unique_dir(&format!("tls-{name}"));
    std::fs::create_dir_all(dir.join("root")).expect("create test dir");
    std::fs::write(dir.join("root/index.html"), INDEX).expect("write index");
    dir
}

/// A certificate and its key, written as PEM files.
struct Cert {
    der: CertificateDer<'static>,
    cert: PathBuf,
    key: PathBuf,
}

/// A self-signed certificate for `names` (empty: no subjectAltName at all).
fn make_cert(dir: &Path, stem: &str, names: &[&str]) -> Cert {
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
    let cert = params.self_signed(&key).expect("self-signed");
    let cert_path = dir.join(format!("{stem}.pem"));
    let key_path = dir.join(format!("{stem}.key"));
    std::fs::write(&cert_path, cert.pem()).expect("write cert");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    Cert {
        der: cert.der().clone(),
        cert: cert_path,
        key: key_path,
    }
}

/// A running server with an https listener and a plain one, killed on drop.
struct Server {
    weft: Weft,
    https: SocketAddr,
    http: SocketAddr,
}

impl Server {
    /// Starts `weft serve` on `model` with `cert` and the extra `args`; `config` is written as
    /// the configuration file when given.
    fn start(model: &str, dir: &Path, cert: &Cert, config: &str, args: &[&str]) -> Server {
        let mut launch = Launch::serve(dir)
            .owns_dir()
            .arg("--root")
            .arg(dir.join("root"));
        // A configuration with its own listeners keeps them.
        if !config.contains("[[listen]]") {
            launch = launch
                .args(["--https", &format!("127.0.0.1:0={model}")])
                .args(["--listen", &format!("127.0.0.1:0={model}")]);
        }
        launch = launch
            .arg("--tls-cert")
            .arg(&cert.cert)
            .arg("--tls-key")
            .arg(&cert.key);
        if !config.is_empty() {
            launch = launch.config(config);
        }
        let weft = launch.args(args).listeners(2).start();
        Server {
            https: weft.addr_of("https"),
            http: weft.addr_of("http"),
            weft,
        }
    }

    fn log(&self) -> String {
        self.weft.log()
    }

    fn pid(&self) -> i32 {
        self.weft.pid() as i32
    }

    /// Descriptors the server process (the process model: its master) has open.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

fn client_config(roots: &[&CertificateDer<'static>]) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add((*r).clone()).expect("root");
    }
    let mut cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(store)
            .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn connect(addr: SocketAddr, cfg: &Arc<ClientConfig>, name: &str) -> Tls {
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    let conn = ClientConnection::new(cfg.clone(), ServerName::try_from(name.to_string()).unwrap())
        .expect("client");
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).expect("handshake");
    }
    s
}

/// One response: status, headers (lower-case names), body.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response framed by Content-Length from `s` (`buf` keeps what follows it).
fn read_response<S: Read>(s: &mut S, buf: &mut Vec<u8>) -> io::Result<Resp> {
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().unwrap_or("")[9..12].parse().expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().expect("length"));
    buf.drain(..head_end);
    while buf.len() < len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf.drain(..len).collect();
    Ok(Resp {
        status,
        headers,
        body,
    })
}

fn get<S: Read + Write>(s: &mut S, path: &str, close: bool) -> Resp {
    let conn = if close { "close" } else { "keep-alive" };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: {conn}\r\n\r\n"
    )
    .unwrap();
    s.flush().unwrap();
    read_response(s, &mut Vec::new()).expect("response")
}

/// True if the peer closed (or reset) within the read timeout, having sent nothing more.
fn closed<S: Read>(s: &mut S) -> bool {
    read_end(s).is_ok()
}

/// `Ok` when the peer has closed (end of stream or reset); else what the read gave and when,
/// for the failure message. A read interrupted by a signal is made again: a socket read with
/// a receive timeout fails with `EINTR` even with no handler when the process is stopped and
/// continued (signal(7)), and a CI run saw one 2.6 ms into this read.
fn read_end<S: Read>(s: &mut S) -> Result<(), String> {
    let start = std::time::Instant::now();
    let mut b = [0u8; 1];
    let read = loop {
        match s.read(&mut b) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => break r,
        }
    };
    match read {
        Ok(0) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
            ) =>
        {
            Ok(())
        }
        Ok(_) => Err(format!("byte {:#04x} after {:?}", b[0], start.elapsed())),
        Err(e) => Err(format!("{e} ({:?}) after {:?}", e.kind(), start.elapsed())),
    }
}

#[test]
fn https_serves_every_model_with_keepalive_and_alpn() {
    for model in MODELS {
        let dir = unique_dir("basic");
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.join("root/big.bin"), &big).unwrap();
        let cert = make_cert(&dir, "cert", &["localhost"]);
        // A short linger: the fiber model parks the idle connection (and its TLS session)
        // without its fiber between the two requests.
        let server = Server::start(
            model,
            &dir,
            &cert,
            "[fiber]\nlinger = \"10ms\"\n[cache]\nmax_object_bytes = 65536\n",
            &[],
        );
        let cfg = client_config(&[&cert.der]);
        let mut s = connect(server.https, &cfg, "localhost");
        assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]), "{model}");
        let r = get(&mut s, "/", false);
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX), "{model}");
        std::thread::sleep(Duration::from_millis(200));
        let r = get(&mut s, "/index.html", false);
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX), "{model}");
        // Larger than the cache takes: read from the file through the reused buffer.
        let r = get(&mut s, "/big.bin", false);
        assert_eq!(r.status, 200, "{model}");
        assert!(r.body == big, "{model}: big.bin differs over TLS");
        // Two pipelined requests in one write.
        s.write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\nGET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        for _ in 0..2 {
            let r = read_response(&mut s, &mut buf).expect("pipelined response");
            assert_eq!((r.status, r.body.as_slice()), (200, INDEX), "{model}");
        }
        // The plain listener beside it is unchanged.
        let mut plain = TcpStream::connect(server.http).unwrap();
        plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let r = get(&mut plain, "/", true);
        assert_eq!(r.status, 200, "{model}");
        assert!(
            !server.log().contains("panicked"),
            "{model}: {}",
            server.log()
        );
    }
}

#[test]
fn plain_http_to_the_tls_port_gets_400_and_garbage_is_closed() {
    for model in MODELS {
        let dir = unique_dir("plain");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &[]);
        let mut s = TcpStream::connect(server.https).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let r = get(&mut s, "/", false);
        assert_eq!(r.status, 400, "{model}");
        assert!(closed(&mut s), "{model}: open after the 400");
        let mut g = TcpStream::connect(server.https).unwrap();
        g.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        g.write_all(b"\x00\x01\x02garbage that is not TLS\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = g.read_to_end(&mut out);
        assert!(out.is_empty(), "{model}: answered garbage with {out:?}");
        // A ClientHello that breaks off in the middle, then a close: no answer either.
        let mut h = TcpStream::connect(server.https).unwrap();
        h.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        h.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
            .unwrap();
        h.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(closed(&mut h), "{model}");
        // Still serving.
        let cfg = client_config(&[&cert.der]);
        let mut ok = connect(server.https, &cfg, "localhost");
        assert_eq!(get(&mut ok, "/", true).status, 200, "{model}");
        let log = server.log();
        assert!(
            log.contains("400 plain HTTP request sent to the HTTPS port"),
            "{model}: {log}"
        );
        assert!(log.contains("not a TLS handshake"), "{model}: {log}");
    }
}

#[test]
fn a_handshake_that_stalls_is_closed_after_tls_handshake_timeout() {
    for model in MODELS {
        let dir = unique_dir("stall");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(
            model,
            &dir,
            &cert,
            "[timeouts]\ntls_handshake = \"300ms\"\n",
            &[],
        );
        // Half a record header: the handshake has begun and never goes on.
        let mut s = TcpStream::connect(server.https).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.write_all(&[0x16, 0x03]).unwrap();
        if let Err(what) = read_end(&mut s) {
            panic!(
                "{model}: a stalled handshake stays open (the read gave {what}); log:\n{}",
                server.log()
            );
        }
        let log = server.log();
        assert!(
            log.contains("TLS handshake not done within"),
            "{model}: {log}"
        );
    }
}

#[test]
fn sni_picks_the_certificate_and_the_default_serves_the_rest() {
    for model in MODELS {
        let dir = unique_dir("sni");
        let default = make_cert(&dir, "default", &["localhost"]);
        let a = make_cert(&dir, "a", &["a.test", "www.a.test"]);
        let b = make_cert(&dir, "b", &["*.b.test"]);
        let config = format!(
            "[[tls.sni]]\nnames = [\"a.test\", \"WWW.a.test\"]\ncert = {:?}\nkey = {:?}\n\
             [[tls.sni]]\nnames = [\"*.b.test\"]\ncert = {:?}\nkey = {:?}\n",
            a.cert, a.key, b.cert, b.key
        );
        let server = Server::start(model, &dir, &default, &config, &[]);
        let cfg = client_config(&[&default.der, &a.der, &b.der]);
        for (name, want) in [
            ("a.test", &a.der),
            ("www.a.test", &a.der),
            ("x.b.test", &b.der),
            ("localhost", &default.der),
        ] {
            let s = connect(server.https, &cfg, name);
            let got = &s.conn.peer_certificates().expect("certificates")[0];
            assert_eq!(got, want, "{model}: certificate for {name}");
        }
        // A name no entry has gets the default certificate (which the client then refuses).
        let tcp = TcpStream::connect(server.https).unwrap();
        tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let conn = ClientConnection::new(
            cfg.clone(),
            ServerName::try_from("other.test".to_string()).unwrap(),
        )
        .unwrap();
        let mut s = StreamOwned::new(conn, tcp);
        let err = s.conn.complete_io(&mut s.sock).and_then(|_| {
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock)?;
            }
            Ok((0, 0))
        });
        assert!(err.is_err(), "{model}: other.test accepted");
    }
}

#[test]
fn hsts_on_tls_responses_only_and_redirect_https_from_plain() {
    for model in MODELS {
        let dir = unique_dir("hsts");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(
            model,
            &dir,
            &cert,
            "[tls]\nhsts = \"max-age=63072000\"\n",
            &[],
        );
        let cfg = client_config(&[&cert.der]);
        let mut s = connect(server.https, &cfg, "localhost");
        let r = get(&mut s, "/", false);
        assert_eq!(
            r.header("strict-transport-security"),
            Some("max-age=63072000"),
            "{model}"
        );
        let r = get(&mut s, "/nothing-here", true);
        assert_eq!(r.status, 404, "{model}");
        assert!(r.header("strict-transport-security").is_some(), "{model}");
        let mut plain = TcpStream::connect(server.http).unwrap();
        plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let r = get(&mut plain, "/", true);
        assert_eq!(r.status, 200, "{model}");
        assert_eq!(r.header("strict-transport-security"), None, "{model}");
        drop(server);

        // A plain listener with redirect_https; the https listener comes from --https.
        let dir = unique_dir("redirect");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let config = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{model}\"\nredirect_https = true\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{model}\"\ntls = true\n"
        );
        let challenge = dir.join("root/.well-known/acme-challenge");
        std::fs::create_dir_all(&challenge).unwrap();
        std::fs::write(challenge.join("tok-1"), b"tok-1.key\n").unwrap();
        let cmd_server = Server::start(model, &dir, &cert, &config, &["--health", "/healthz"]);
        // The health check and ACME's HTTP-01 challenge are answered over plain HTTP.
        for (path, body) in [
            ("/healthz", &b"ok\n"[..]),
            ("/.well-known/acme-challenge/tok-1", b"tok-1.key\n"),
        ] {
            let mut s = TcpStream::connect(cmd_server.http).unwrap();
            s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            let r = get(&mut s, path, true);
            assert_eq!((r.status, r.body.as_slice()), (200, body), "{model} {path}");
        }
        let mut plain = TcpStream::connect(cmd_server.http).unwrap();
        plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        write!(
            plain,
            "GET /a/b?c=d HTTP/1.1\r\nHost: example.test:8080\r\n\r\n"
        )
        .unwrap();
        let r = read_response(&mut plain, &mut Vec::new()).unwrap();
        assert_eq!(r.status, 308, "{model}");
        let https_port = cmd_server.https.port();
        assert_eq!(
            r.header("location"),
            Some(format!("https://example.test:{https_port}/a/b?c=d").as_str()),
            "{model}"
        );
        // The connection stays open for the next request.
        let r = get(&mut plain, "/", true);
        assert_eq!(r.status, 308, "{model}");
        // An absolute-form target: its authority is the host (the Host field is ignored,
        // RFC 9112 §3.2.2), its path and query are kept.
        let mut plain = TcpStream::connect(cmd_server.http).unwrap();
        plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        write!(
            plain,
            "GET http://a.test:8080/deep/path?q=1 HTTP/1.1\r\nHost: other.test\r\n\r\n"
        )
        .unwrap();
        let r = read_response(&mut plain, &mut Vec::new()).unwrap();
        assert_eq!(r.status, 308, "{model}");
        assert_eq!(
            r.header("location"),
            Some(format!("https://a.test:{https_port}/deep/path?q=1").as_str()),
            "{model}"
        );
        drop(cmd_server);
    }
}

/// Request bodies are read through the TLS session on every model (the pipeline's process
/// stage, the process model's child), over TLS 1.2 as over 1.3, and the connection goes on.
#[test]
fn request_bodies_over_tls_1_2_and_1_3() {
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 253) as u8).collect();
    for model in MODELS {
        let dir = unique_dir("bodies");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &["--echo", "/echo"]);
        let mut roots = RootCertStore::empty();
        roots.add(cert.der.clone()).unwrap();
        let tls12 =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS12])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        for (cfg, version) in [
            (Arc::new(tls12), rustls::ProtocolVersion::TLSv1_2),
            (
                client_config(&[&cert.der]),
                rustls::ProtocolVersion::TLSv1_3,
            ),
        ] {
            let mut s = connect(server.https, &cfg, "localhost");
            assert_eq!(s.conn.protocol_version(), Some(version), "{model}");
            write!(
                s,
                "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .unwrap();
            s.write_all(&body).unwrap();
            s.flush().unwrap();
            let r = read_response(&mut s, &mut Vec::new()).expect("echo response");
            assert_eq!(r.status, 200, "{model} {version:?}");
            assert!(
                r.body == body,
                "{model} {version:?}: the echoed body differs"
            );
            let r = get(&mut s, "/", true);
            assert_eq!(
                (r.status, r.body.as_slice()),
                (200, INDEX),
                "{model} {version:?}"
            );
        }
    }
}

#[test]
fn sessions_resume_by_ticket() {
    for model in MODELS {
        let dir = unique_dir("resume");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &[]);
        let cfg = client_config(&[&cert.der]);
        for round in 0..2 {
            let mut s = connect(server.https, &cfg, "localhost");
            let r = get(&mut s, "/", true);
            assert_eq!(r.status, 200);
            // Reading to the end takes the tickets the server sent after the handshake.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            let kind = s.conn.handshake_kind();
            if round == 1 {
                assert_eq!(kind, Some(rustls::HandshakeKind::Resumed), "{model}");
            } else {
                assert_eq!(kind, Some(rustls::HandshakeKind::Full), "{model}");
            }
        }
    }
}

/// Tickets resume across a rotation of the ticket key on every model. On the process model
/// each connection is a process of its own: the master rotates the keys before each fork, so
/// a ticket one connection process made after a rotation opens in the next one (without it,
/// each would roll to a random key of its own and the second connection would not resume).
#[test]
fn tickets_resume_across_a_key_rotation_on_every_model() {
    for model in MODELS {
        let dir = unique_dir("rotation");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(
            model,
            &dir,
            &cert,
            "[tls]\nticket_key_lifetime = \"4s\"\n",
            &[],
        );
        // Past the first rotation (the key's clock starts with the server, in whole seconds),
        // with most of a period left for both connections (a busy machine is slow).
        std::thread::sleep(Duration::from_millis(4200));
        let cfg = client_config(&[&cert.der]);
        for round in 0..2 {
            let mut s = connect(server.https, &cfg, "localhost");
            assert_eq!(get(&mut s, "/", true).status, 200, "{model}");
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            let want = if round == 0 {
                rustls::HandshakeKind::Full
            } else {
                rustls::HandshakeKind::Resumed
            };
            assert_eq!(
                s.conn.handshake_kind(),
                Some(want),
                "{model}, connection {round}"
            );
        }
    }
}

#[test]
fn sighup_reloads_certificates_and_open_connections_stay() {
    for model in MODELS.iter().copied() {
        let dir = unique_dir("reload");
        let old = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &old, "", &[]);
        let cfg_old = client_config(&[&old.der]);
        let mut kept = connect(server.https, &cfg_old, "localhost");
        assert_eq!(get(&mut kept, "/", false).status, 200);
        // New files at the same paths.
        let new = make_cert(&dir, "cert", &["localhost"]);
        // SAFETY: kill takes no pointers; the pid is our child, not reaped.
        assert_eq!(unsafe { libc::kill(server.pid(), libc::SIGHUP) }, 0);
        let cfg_new = client_config(&[&new.der]);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let tcp = TcpStream::connect(server.https).unwrap();
            tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            let conn =
                ClientConnection::new(cfg_new.clone(), ServerName::try_from("localhost").unwrap())
                    .unwrap();
            let mut s = StreamOwned::new(conn, tcp);
            let mut ok = true;
            while s.conn.is_handshaking() {
                if s.conn.complete_io(&mut s.sock).is_err() {
                    ok = false;
                    break;
                }
            }
            if ok {
                assert_eq!(get(&mut s, "/", true).status, 200, "{model}");
                break;
            }
            assert!(
                Instant::now() < end,
                "{model}: new certificate never served"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The connection opened before the reload goes on with its session.
        assert_eq!(get(&mut kept, "/", true).status, 200, "{model}");
    }
}

/// SIGTERM with an idle keep-alive HTTPS connection open: every model closes it at once, well
/// before the keep-alive timeout, and the server exits 0 well within the grace period. On the
/// process model the connection waits in its child's read (a TLS connection stays with its
/// child), which shutdown must wake.
#[test]
fn sigterm_closes_an_idle_keepalive_connection_after_the_drain_window() {
    for model in MODELS {
        let dir = unique_dir("sigterm-idle");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let mut server = Server::start(
            model,
            &dir,
            &cert,
            "[timeouts]\nkeepalive = \"60s\"\nshutdown_grace = \"20s\"\n",
            &[],
        );
        let cfg = client_config(&[&cert.der]);
        let mut s = connect(server.https, &cfg, "localhost");
        let r = get(&mut s, "/", false);
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX), "{model}");
        // Idle in its wait for the next request (past the fiber model's linger, parked).
        std::thread::sleep(Duration::from_millis(300));
        s.sock
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let start = Instant::now();
        // SAFETY: kill takes no pointers; the pid is our child, not reaped.
        assert_eq!(unsafe { libc::kill(server.pid(), libc::SIGTERM) }, 0);
        let end = read_end(&mut s);
        let took = start.elapsed();
        assert!(
            end.is_ok(),
            "{model}: the idle connection is still open after SIGTERM: {end:?}\n{}",
            server.log()
        );
        assert!(
            took < Duration::from_secs(3),
            "{model}: closed after {took:?}"
        );
        let status = server.weft.exit_within(Duration::from_secs(10));
        assert!(status.success(), "{model}: {status:?}\n{}", server.log());
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{model}: exit took {:?}",
            start.elapsed()
        );
    }
}

/// Runs `weft serve` with TLS settings that must not start; returns its error output.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = Launch::new()
        .arg("serve")
        .arg("--root")
        .arg(dir.join("root"))
        .args(["--https", "127.0.0.1:0"])
        .args(args)
        .run(RUN_LIMIT);
    assert!(!out.success(), "started with {args:?}");
    out.stderr
}

#[test]
fn bad_certificates_are_refused_at_start_with_the_reason() {
    let dir = unique_dir("bad");
    let good = make_cert(&dir, "good", &["localhost"]);
    let other = make_cert(&dir, "other", &["localhost"]);
    let nameless = make_cert(&dir, "nameless", &[]);
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let missing = dir.join("missing.pem");
    let err = refused(
        &dir,
        &["--tls-cert", &s(&missing), "--tls-key", &s(&good.key)],
    );
    assert!(err.contains("missing.pem: cannot read"), "{err}");
    let err = refused(
        &dir,
        &["--tls-cert", &s(&good.cert), "--tls-key", &s(&other.key)],
    );
    assert!(err.contains("does not match certificate"), "{err}");
    let err = refused(
        &dir,
        &["--tls-cert", &s(&good.key), "--tls-key", &s(&good.key)],
    );
    assert!(err.contains("no CERTIFICATE block"), "{err}");
    let err = refused(
        &dir,
        &["--tls-cert", &s(&good.cert), "--tls-key", &s(&good.cert)],
    );
    assert!(err.contains("no PKCS#8, RSA or EC private key"), "{err}");
    let err = refused(
        &dir,
        &[
            "--tls-cert",
            &s(&nameless.cert),
            "--tls-key",
            &s(&nameless.key),
        ],
    );
    assert!(err.contains("has no usable name"), "{err}");
    let err = refused(&dir, &[]);
    assert!(err.contains("needs a certificate and a key"), "{err}");
    let cfg = dir.join("sni.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[tls.sni]]\nnames = [\"not-in-it.test\"]\ncert = {:?}\nkey = {:?}\n",
            other.cert, other.key
        ),
    )
    .unwrap();
    let err = refused(
        &dir,
        &[
            "--tls-cert",
            &s(&good.cert),
            "--tls-key",
            &s(&good.key),
            "--config",
            &s(&cfg),
        ],
    );
    assert!(
        err.contains("is not valid for the name \"not-in-it.test\""),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 10,000 handshakes broken off in every way a client can (close at once, half a record,
/// a whole ClientHello then a reset, plain garbage) leave no descriptor and no memory behind.
#[test]
fn ten_thousand_aborted_handshakes_leak_nothing() {
    const ABORTS: usize = 10_000;
    for model in MODELS {
        let dir = unique_dir("aborts");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &[]);
        let cfg = client_config(&[&cert.der]);
        // Warm up (worker stacks, pools, the session cache) before the baseline.
        for _ in 0..50 {
            let mut s = connect(server.https, &cfg, "localhost");
            let _ = get(&mut s, "/", true);
        }
        let hello = client_hello(&cfg);
        println!("{model}: aborting handshakes");
        // A first round fills what the allocator and the stack pool keep for the peak of
        // handshakes in flight; a leak grows again in the second, retention does not.
        abort_handshakes(&server, &hello, ABORTS / 5);
        let (fds0, rss0) = (server.open_fds(), server.rss_kib());
        abort_handshakes(&server, &hello, ABORTS);
        let (fds1, rss1) = (server.open_fds(), server.rss_kib());
        assert!(
            fds1 <= fds0,
            "{model}: {fds0} descriptors before, {fds1} after"
        );
        assert!(
            rss1 < rss0 + 16 * 1024,
            "{model}: resident {rss0} KiB before, {rss1} KiB after"
        );
        let mut s = connect(server.https, &cfg, "localhost");
        assert_eq!(get(&mut s, "/", true).status, 200, "{model}");
    }
}

/// Opens `count` connections to the TLS port and breaks each off in one of four ways, then
/// waits until the server has closed them all.
fn abort_handshakes(server: &Server, hello: &[u8], count: usize) {
    let fds0 = server.open_fds();
    for i in 0..count {
        let mut s = TcpStream::connect(server.https).expect("connect");
        match i % 4 {
            0 => {}
            1 => {
                let _ = s.write_all(&hello[..hello.len() / 2]);
            }
            2 => {
                let _ = s.write_all(hello);
                // RST instead of FIN.
                let _ = socket_linger_zero(&s);
            }
            _ => {
                let _ = s.write_all(b"\x80\x00garbage");
            }
        }
        drop(s);
    }
    // Every aborted connection ends (closed by its client); wait for the server to see it,
    // and for idle stacks to decay.
    let end = Instant::now() + Duration::from_secs(30);
    while server.open_fds() > fds0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
}

/// The first flight a rustls client sends for `cfg`.
fn client_hello(cfg: &Arc<ClientConfig>) -> Vec<u8> {
    let mut c =
        ClientConnection::new(cfg.clone(), ServerName::try_from("localhost").unwrap()).unwrap();
    let mut out = Vec::new();
    c.write_tls(&mut out).unwrap();
    out
}

fn socket_linger_zero(s: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `size_of::<linger>()` bytes from `l`, a live local value.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A program found on PATH, or a printed line saying the test skips without it.
fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: {program} is not installed");
    }
    found
}

#[test]
fn real_clients_curl_openssl_and_python() {
    for model in MODELS {
        let dir = unique_dir("clients");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &[]);
        let port = server.https.port();
        let url = format!("https://localhost:{port}/");
        let resolve = format!("localhost:{port}:127.0.0.1");
        let ca = cert.cert.to_str().unwrap();
        if have("curl") {
            for version in ["--tlsv1.2", "--tlsv1.3"] {
                let out = Command::new("curl")
                    .args([
                        "-sS",
                        "--max-time",
                        "10",
                        "--cacert",
                        ca,
                        "--resolve",
                        &resolve,
                    ])
                    .args([version, "--tls-max", &version[6..]])
                    .arg(&url)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{model} curl {version}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(out.stdout, INDEX, "{model} curl {version}");
            }
        }
        if have("openssl") {
            let mut child = Command::new("openssl")
                .args(["s_client", "-quiet", "-verify_return_error", "-CAfile", ca])
                .args(["-connect", &format!("127.0.0.1:{port}")])
                .args(["-servername", "localhost", "-alpn", "http/1.1"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{model}: {text}");
        }
        if have("python3") {
            let script = "import ssl, sys, urllib.request\n\
                          ctx = ssl.create_default_context(cafile=sys.argv[2])\n\
                          body = urllib.request.urlopen(sys.argv[1], context=ctx, timeout=10).read()\n\
                          sys.stdout.buffer.write(body)\n";
            // Python resolves localhost itself; the certificate names it.
            let out = Command::new("python3")
                .args(["-c", script, &url, ca])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{model} python: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.stdout, INDEX, "{model} python");
        }
    }
}

/// A TLS listener behind a TCP load balancer that sends a PROXY header before the
/// ClientHello (HAProxy `send-proxy` in TCP mode), on every model: the client address is the
/// header's, CGI sees `HTTPS=on` and `REQUEST_SCHEME=https` (plain: `http`, no `HTTPS`), and a
/// request whose Host names another site than the SNI name did gets 421.
#[test]
fn proxy_protocol_before_tls_sites_421_and_cgi_scheme() {
    use std::os::unix::fs::PermissionsExt;
    for model in MODELS {
        let dir = unique_dir("proxied");
        let cert = make_cert(&dir, "cert", &["localhost", "a.test", "b.test"]);
        let cgi = dir.join("cgi");
        std::fs::create_dir_all(&cgi).unwrap();
        let script = cgi.join("env.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
             echo \"addr=$REMOTE_ADDR https=$HTTPS scheme=$REQUEST_SCHEME\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        for site in ["a", "b"] {
            std::fs::create_dir_all(dir.join(site)).unwrap();
            std::fs::write(dir.join(site).join("index.html"), format!("site {site}\n")).unwrap();
        }
        let config = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{model}\"\ntls = true\n\
             proxy_protocol = true\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{model}\"\n\
             [[site]]\nhosts = [\"a.test\"]\nroot = {:?}\n\
             [[site]]\nhosts = [\"b.test\"]\nroot = {:?}\n",
            dir.join("a"),
            dir.join("b")
        );
        let cgi_arg = cgi.to_str().unwrap();
        let server = Server::start(model, &dir, &cert, &config, &["--cgi", cgi_arg]);
        let cfg = client_config(&[&cert.der]);
        let proxied = |name: &str| -> Tls {
            let mut tcp = TcpStream::connect(server.https).expect("connect");
            tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            tcp.write_all(b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n")
                .unwrap();
            let conn = ClientConnection::new(cfg.clone(), name.to_string().try_into().unwrap())
                .expect("client");
            let mut s = StreamOwned::new(conn, tcp);
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock).expect("handshake");
            }
            s
        };
        let ask = |s: &mut Tls, host: &str, path: &str| -> Resp {
            write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
            s.flush().unwrap();
            read_chunked_or_length(s)
        };
        let mut s = proxied("localhost");
        let r = ask(&mut s, "localhost", "/cgi-bin/env.sh");
        assert_eq!(r.status, 200, "{model}: {}", server.log());
        assert_eq!(
            String::from_utf8_lossy(&r.body).trim(),
            "addr=203.0.113.7 https=on scheme=https",
            "{model}"
        );
        let mut s = proxied("a.test");
        let r = ask(&mut s, "a.test", "/");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"site a\n"[..]),
            "{model}"
        );
        let r = ask(&mut s, "b.test", "/");
        assert_eq!(r.status, 421, "{model}: Host b.test on an a.test session");
        // Plain HTTP: no SNI, never 421; CGI sees http.
        let mut p = TcpStream::connect(server.http).unwrap();
        p.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let r = ask_plain(&mut p, "b.test", "/");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"site b\n"[..]),
            "{model}"
        );
        let r = ask_plain(&mut p, "localhost", "/cgi-bin/env.sh");
        assert_eq!(
            String::from_utf8_lossy(&r.body).trim(),
            "addr=127.0.0.1 https= scheme=http",
            "{model}"
        );
    }
}

fn ask_plain(s: &mut TcpStream, host: &str, path: &str) -> Resp {
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
    s.flush().unwrap();
    read_chunked_or_length(s)
}

/// One response framed by Content-Length or chunked (a CGI script's output is chunked).
fn read_chunked_or_length<S: Read>(s: &mut S) -> Resp {
    let mut buf = Vec::new();
    let mut r = read_response(s, &mut buf).expect("response");
    if r.header("transfer-encoding") == Some("chunked") {
        // The body is in `buf` and beyond: read to the last chunk.
        let mut chunk = [0u8; 4096];
        while !buf.ends_with(b"0\r\n\r\n") {
            let n = s.read(&mut chunk).expect("chunked body");
            assert!(n > 0, "closed inside a chunked body");
            buf.extend_from_slice(&chunk[..n]);
        }
        let mut body = Vec::new();
        let mut rest = &buf[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap().trim(), 16)
                    .unwrap();
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            body.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        r.body = body;
    }
    r
}

/// `limits.conn_per_ip` on an HTTPS listener: a second connection from the same address gets a
/// 503 through TLS after its handshake (fiber, thread, pipeline), or is closed before any
/// handshake in the process model, whose master counts connections and holds no session; the
/// first connection keeps being served.
#[test]
fn conn_per_ip_applies_to_https_connections() {
    for model in MODELS {
        let dir = unique_dir("conn-per-ip");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "[limits]\nconn_per_ip = 1\n", &[]);
        let cfg = client_config(&[&cert.der]);
        let mut first = connect(server.https, &cfg, "localhost");
        assert_eq!(get(&mut first, "/", false).status, 200, "{model}");
        let tcp = TcpStream::connect(server.https).unwrap();
        tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let conn = ClientConnection::new(cfg.clone(), "localhost".try_into().unwrap()).unwrap();
        let mut second = StreamOwned::new(conn, tcp);
        let handshake = (|| {
            while second.conn.is_handshaking() {
                second.conn.complete_io(&mut second.sock)?;
            }
            Ok::<_, io::Error>(())
        })();
        if *model == "process" {
            assert!(
                handshake.is_err(),
                "process: the over-limit handshake completed"
            );
        } else {
            handshake.unwrap_or_else(|e| panic!("{model}: handshake: {e}"));
            write!(second, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
            second.flush().unwrap();
            let r = read_response(&mut second, &mut Vec::new()).expect("a 503");
            assert_eq!(r.status, 503, "{model}");
        }
        assert_eq!(
            get(&mut first, "/", false).status,
            200,
            "{model}: the first one"
        );
        assert!(
            server.log().contains("conn_per_ip"),
            "{model}: no log line for the refusal"
        );
    }
}

/// Every response in `data`, in order: its status (a HEAD request's responses have no body).
fn statuses(data: &[u8], head: bool) -> Vec<u16> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
        let text = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        let Some(status) = text.get(9..12).and_then(|s| s.parse().ok()) else {
            break;
        };
        out.push(status);
        let len: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap_or(0));
        let body = if head || status == 304 || status < 200 {
            0
        } else {
            len
        };
        rest = &rest[(end + 4 + body).min(rest.len())..];
    }
    out
}

/// Reads until the peer ends the stream (a clean TLS close, a TCP close, or a reset).
fn read_to_end_lenient<S: Read>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Apache httpd's strict-mode request vectors (as `tests/blackbox/vectors.rs` sends them on
/// plain HTTP) get the same statuses through TLS as on the same server's plain port, on every
/// model: the parser and the driver see the same bytes whatever the transport.
#[test]
fn the_request_vectors_answer_the_same_over_tls() {
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("vectors/apache-httpd-http-strict.json")).unwrap();
    let requests: Vec<Vec<u8>> = rows
        .iter()
        .map(|r| r["request_latin1"].as_str().unwrap())
        // Response lines for a CGI fixture, not requests (see vectors.rs).
        .filter(|r| !r.starts_with('R'))
        .map(|r| r.chars().map(|c| u32::from(c) as u8).collect())
        .collect();
    assert!(requests.len() > 50, "the vectors did not load");
    for model in MODELS {
        let dir = unique_dir("vectors");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let server = Server::start(model, &dir, &cert, "", &[]);
        let cfg = client_config(&[&cert.der]);
        let mut differ = Vec::new();
        for raw in &requests {
            let head = raw.starts_with(b"HEAD ");
            let mut p = TcpStream::connect(server.http).unwrap();
            p.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            let _ = p.write_all(raw);
            let _ = p.shutdown(std::net::Shutdown::Write);
            let plain = statuses(&read_to_end_lenient(&mut p), head);
            let mut t = connect(server.https, &cfg, "localhost");
            let _ = t.write_all(raw);
            t.conn.send_close_notify();
            let _ = t.flush();
            let tls = statuses(&read_to_end_lenient(&mut t), head);
            assert!(
                !plain.is_empty() || raw.is_empty(),
                "{model}: no answer to {raw:?}"
            );
            if plain != tls {
                differ.push((String::from_utf8_lossy(raw).to_string(), plain, tls));
            }
        }
        assert!(differ.is_empty(), "{model}: plain vs TLS: {differ:#?}");
    }
}

/// `[tls] ocsp`: the file is stapled byte for byte to a client that asks for the status; a
/// file that is not a successful DER OCSP response is refused at start and by `weft check`
/// (stapled, it would end the handshake of every such client).
#[test]
fn a_stapled_ocsp_response_is_sent_and_a_malformed_one_refused() {
    let staple = include_bytes!("../../http/tests/data/ocsp-good.der");
    let dir = unique_dir("ocsp");
    let cert = make_cert(&dir, "cert", &["localhost"]);
    let ocsp = dir.join("cert.ocsp");
    std::fs::write(&ocsp, staple).unwrap();
    let config = format!("[tls]\nocsp = {:?}\n", ocsp.to_str().unwrap());
    let server = Server::start("fiber", &dir, &cert, &config, &[]);
    let mut roots = RootCertStore::empty();
    roots.add(cert.der.clone()).unwrap();
    let (verifier, cfg) = common::staple::StapleSeen::client(roots);
    let mut s = connect(server.https, &cfg, "localhost");
    assert_eq!(get(&mut s, "/", true).status, 200);
    assert_eq!(
        verifier.staple.lock().unwrap().as_deref(),
        Some(&staple[..]),
        "the staple is the file"
    );
    drop(server);

    let dir = unique_dir("ocsp-bad");
    let cert = make_cert(&dir, "cert", &["localhost"]);
    for (name, bytes, says) in [
        ("garbage", &b"garbage\n"[..], "not a DER OCSP response"),
        ("cut", &staple[..300], "not a DER OCSP response"),
        (
            "try-later",
            &[0x30, 0x03, 0x0a, 0x01, 0x03][..],
            "status tryLater",
        ),
    ] {
        let ocsp = dir.join(format!("{name}.ocsp"));
        std::fs::write(&ocsp, bytes).unwrap();
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!("[tls]\nocsp = {:?}\n", ocsp.to_str().unwrap()),
        )
        .unwrap();
        for cmd in ["check", "serve"] {
            let out = Launch::new()
                .args([cmd, "--allow-root", "--root"])
                .arg(dir.join("root"))
                .args(["--https", "127.0.0.1:0", "--tls-cert"])
                .arg(&cert.cert)
                .arg("--tls-key")
                .arg(&cert.key)
                .arg("--config")
                .arg(&config)
                .run(RUN_LIMIT);
            let err = &out.stderr;
            assert!(!out.success(), "{cmd} {name}: {err}");
            assert!(
                err.contains(&format!("OCSP response {}: ", ocsp.display())) && err.contains(says),
                "{cmd} {name}: {err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CA, and certificates it signs for a client.
struct ClientCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    pem: PathBuf,
}

impl ClientCa {
    fn new(dir: &Path, cn: &str) -> ClientCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .expect("CA");
        let pem = dir.join(format!("ca-{cn}.pem"));
        std::fs::write(&pem, issuer.pem()).unwrap();
        ClientCa { issuer, pem }
    }

    /// A client certificate with subject `CN=<cn>,O=Example\, Inc.` and serial 0x0b0c.
    fn client(
        &self,
        cn: &str,
    ) -> (
        Vec<CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example, Inc.");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.serial_number = Some(rcgen::SerialNumber::from(vec![0x0b, 0x0c]));
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).expect("client cert");
        let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        (vec![cert.der().clone()], key)
    }
}

/// `GET path` on `s`, the answer framed by length or chunks.
fn ask_tls(s: &mut Tls, path: &str) -> Resp {
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    s.flush().unwrap();
    read_chunked_or_length(s)
}

/// A client configuration presenting `cert` (or none).
fn client_config_with(
    roots: &[&CertificateDer<'static>],
    cert: Option<(
        Vec<CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    )>,
) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add((*r).clone()).expect("root");
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(store);
    let mut cfg = match cert {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Mutual TLS on every model: `verify_client = "on"` answers 400 to a client without a
/// certificate and ends the handshake of one whose certificate another CA signed; a verified
/// client's subject, issuer and serial reach CGI (`SSL_CLIENT_*`), an upstream through the
/// proxy (`X-SSL-Client-*`, a client's own dropped) and the access log; `optional` lets a
/// client without one through with `SSL_CLIENT_VERIFY=NONE`; a missing `client_ca` is refused
/// at start.
#[test]
fn client_certificates_are_verified_and_passed_on() {
    use std::os::unix::fs::PermissionsExt;
    for model in MODELS {
        let dir = unique_dir("mtls");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        // Outlives the first server's directory (the second server reads it too).
        let ca_dir = unique_dir("mtls-ca");
        let ca = ClientCa::new(&ca_dir, "Client CA");
        let other = ClientCa::new(&ca_dir, "Other CA");
        let cgi = dir.join("cgi");
        std::fs::create_dir_all(&cgi).unwrap();
        let script = cgi.join("env.sh");
        let write_script = |script: &Path| {
            std::fs::write(
                script,
                "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
                 echo \"verify=$SSL_CLIENT_VERIFY\"\necho \"s=$SSL_CLIENT_S_DN\"\n\
                 echo \"i=$SSL_CLIENT_I_DN\"\necho \"serial=$SSL_CLIENT_M_SERIAL\"\n\
                 echo \"hdr=$HTTP_X_SSL_CLIENT_VERIFY $HTTP_X_SSL_CLIENT_S_DN\"\n",
            )
            .unwrap();
            std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        write_script(&script);
        // The upstream: a plain weft whose CGI prints what the proxy sent.
        let up_dir = unique_dir("mtls-up");
        let upstream = Launch::serve(&up_dir)
            .owns_dir()
            .arg("--root")
            .arg(up_dir.join("root"))
            .args(["--listen", "127.0.0.1:0=thread"])
            .config(&format!("[cgi]\ndir = {cgi:?}\nprefix = \"/up/\"\n"))
            .listeners(1)
            .start();
        let up = upstream.addr_of("http");
        let log = dir.join("access.log");
        let config = format!(
            "access_log = {log:?}\n\
             access_log_format = \"$ssl_client_verify|$ssl_client_s_dn|$ssl_client_serial\"\n\
             [tls]\nclient_ca = {:?}\nverify_client = \"on\"\n",
            ca.pem
        );
        let proxy = format!("/up/=http://{up}");
        let server = Server::start(
            model,
            &dir,
            &cert,
            &config,
            &["--cgi", cgi.to_str().unwrap(), "--proxy", &proxy],
        );
        let verified = client_config_with(&[&cert.der], Some(ca.client("alice")));
        let mut s = connect(server.https, &verified, "localhost");
        let r = ask_tls(&mut s, "/cgi-bin/env.sh");
        let dn = r"CN=alice,O=Example\, Inc.";
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            format!("verify=SUCCESS\ns={dn}\ni=CN=Client CA\nserial=0B0C\nhdr= \n"),
            "{model}: {}",
            server.log()
        );
        // Through the proxy, with a forged field of the client's own dropped.
        write!(
            s,
            "GET /up/env.sh HTTP/1.1\r\nHost: localhost\r\nX-SSL-Client-Verify: FORGED\r\n\r\n"
        )
        .unwrap();
        s.flush().unwrap();
        let r = read_chunked_or_length(&mut s);
        assert_eq!(r.status, 200, "{model}: {}", server.log());
        let body = String::from_utf8_lossy(&r.body).to_string();
        assert!(
            body.ends_with(&format!("hdr=SUCCESS {dn}\n")),
            "{model}: {body}"
        );
        // No certificate: 400, as nginx answers `ssl_verify_client on`.
        let none = client_config_with(&[&cert.der], None);
        let mut s = connect(server.https, &none, "localhost");
        let r = get(&mut s, "/", false);
        assert_eq!(r.status, 400, "{model}");
        assert!(
            String::from_utf8_lossy(&r.body).contains("No required SSL certificate"),
            "{model}: {:?}",
            r.body
        );
        // Signed by a CA not in client_ca: the handshake fails.
        let foreign = client_config_with(&[&cert.der], Some(other.client("mallory")));
        let tcp = TcpStream::connect(server.https).unwrap();
        tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let conn =
            ClientConnection::new(foreign, ServerName::try_from("localhost").unwrap()).unwrap();
        let mut f = StreamOwned::new(conn, tcp);
        let outcome = write!(f, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .and_then(|()| f.flush())
            .and_then(|()| {
                let mut b = [0u8; 64];
                f.read(&mut b)
            });
        assert!(
            !matches!(outcome, Ok(n) if n > 0),
            "{model}: a foreign certificate was served: {outcome:?}"
        );
        // Stopped (the access log flushed) before the directory goes with the server.
        server.weft.signal(libc::SIGTERM);
        let mut server = server;
        server.weft.exit_within(Duration::from_secs(10));
        let lines = std::fs::read_to_string(&log).unwrap();
        drop(server);
        assert!(
            // The log escapes `\` as nginx's `escape=default` does.
            lines
                .lines()
                .any(|l| l == format!("SUCCESS|{}|0B0C", dn.replace('\\', "\\x5C"))),
            "{model}: {lines}"
        );
        assert!(lines.lines().any(|l| l == "NONE|-|-"), "{model}: {lines}");

        // optional: a client without one is served, and told NONE.
        let config = format!(
            "[tls]\nclient_ca = {:?}\nverify_client = \"optional\"\n",
            ca.pem
        );
        let dir2 = unique_dir("mtls-optional");
        let cert2 = make_cert(&dir2, "cert", &["localhost"]);
        let cgi2 = dir2.join("cgi");
        std::fs::create_dir_all(&cgi2).unwrap();
        write_script(&cgi2.join("env.sh"));
        let server = Server::start(
            model,
            &dir2,
            &cert2,
            &config,
            &["--cgi", cgi2.to_str().unwrap()],
        );
        let none = client_config_with(&[&cert2.der], None);
        let mut s = connect(server.https, &none, "localhost");
        let r = ask_tls(&mut s, "/cgi-bin/env.sh");
        assert!(
            String::from_utf8_lossy(&r.body).starts_with("verify=NONE\ns=\n"),
            "{model}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
        drop(upstream);
        drop(server);
        let _ = std::fs::remove_dir_all(&ca_dir);
    }
    let dir = unique_dir("mtls-refused");
    let cert = make_cert(&dir, "cert", &["localhost"]);
    let conf = dir.join("weft.toml");
    std::fs::write(&conf, "[tls]\nverify_client = \"on\"\n").unwrap();
    let err = refused(
        &dir,
        &[
            "--tls-cert",
            cert.cert.to_str().unwrap(),
            "--tls-key",
            cert.key.to_str().unwrap(),
            "--config",
            conf.to_str().unwrap(),
        ],
    );
    assert!(err.contains("verify_client needs client_ca"), "{err}");
}

/// An `https://` upstream on every model: verified against `tls_ca` (its certificate names
/// `localhost`, which the URL names), refused with 502 and the reason when the system's CAs
/// do not know it, taken as it is with `tls_verify = false`.
#[test]
fn an_https_upstream_is_verified_and_an_unknown_certificate_is_502() {
    let dir = unique_dir("https-upstream");
    let cert = make_cert(&dir, "cert", &["localhost"]);
    let upstream = Server::start("thread", &dir, &cert, "", &[]);
    let port = upstream.https.port();
    for model in MODELS {
        let front = |name: &str, extra: &str| -> Weft {
            let fdir = unique_dir(name);
            Launch::serve(&fdir)
                .owns_dir()
                .arg("--root")
                .arg(fdir.join("root"))
                .args(["--listen", &format!("127.0.0.1:0={model}")])
                .config(&format!(
                    "[[proxy]]\nprefix = \"/up/\"\nupstream = \"https://localhost:{port}\"\n{extra}"
                ))
                .listeners(1)
                .start()
        };
        let ask = |w: &Weft| -> Resp {
            let mut s = TcpStream::connect(w.addr_of("http")).unwrap();
            s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            s.write_all(b"GET /up/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .unwrap();
            read_chunked_or_length(&mut s)
        };
        // The upstream has no /up/: its 404 page, over TLS, is the answer that went through.
        let trusted = front("https-up-ca", &format!("tls_ca = {:?}\n", cert.cert));
        for _ in 0..3 {
            let r = ask(&trusted);
            assert_eq!(r.status, 404, "{model}: {}", trusted.log());
            assert_eq!(r.header("via"), Some("1.1 weft"), "{model}: {r:?}");
        }
        let unknown = front("https-up-system", "");
        let r = ask(&unknown);
        assert_eq!(r.status, 502, "{model}");
        assert!(
            unknown.log().contains("TLS handshake") && unknown.log().contains("certificate"),
            "{model}: {}",
            unknown.log()
        );
        let blind = front("https-up-noverify", "tls_verify = false\n");
        assert_eq!(ask(&blind).status, 404, "{model}: {}", blind.log());
        // A group of TLS servers (`tls = true`), health-checked over TLS: up, and answering.
        let gdir = unique_dir("https-up-group");
        let group = Launch::serve(&gdir)
            .owns_dir()
            .arg("--root")
            .arg(gdir.join("root"))
            .args(["--listen", &format!("127.0.0.1:0={model}"), "--status"])
            .config(&format!(
                "[[upstream]]\nname = \"app\"\nservers = [\"localhost:{port}\"]\ntls = true\n\
                 tls_ca = {:?}\n[upstream.health]\npath = \"/\"\ninterval = \"100ms\"\n\
                 [[proxy]]\nprefix = \"/up/\"\nupstream = \"upstream:app\"\n",
                cert.cert
            ))
            .listeners(1)
            .start();
        for _ in 0..3 {
            assert_eq!(ask(&group).status, 404, "{model}: {}", group.log());
        }
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            !group.log().contains("health checks failed"),
            "{model}: {}",
            group.log()
        );
    }
    drop(upstream);
}

/// A plain test upstream that answers an upgrade with `101` and echoes every byte after it,
/// ending its side when the client ends its own.
fn echo_101_upstream() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let _ = s.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\n",
                );
                let mut buf = vec![0u8; 32 * 1024];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                let _ = s.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr
}

/// A tunnel with TLS on both of weft's sides, on every model: the client speaks plain HTTP to
/// a front whose mount is an `https://` upstream (a rustls client session as the tunnel's
/// far side), which is a weft HTTPS listener (a server session as the near side) proxying to
/// a plain echo. 2 MiB go up while the echo comes down, then the client's end is passed on
/// through both sessions (close_notify) and the far end's comes back.
#[test]
fn a_tunnel_runs_over_tls_on_both_sides() {
    let echo = echo_101_upstream();
    for model in MODELS {
        let dir = unique_dir("tunnel-tls");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let middle = Server::start(
            model,
            &dir,
            &cert,
            &format!("[[proxy]]\nprefix = \"/ws/\"\nupstream = \"http://{echo}\"\n"),
            &[],
        );
        let fdir = unique_dir("tunnel-tls-front");
        let front = Launch::serve(&fdir)
            .owns_dir()
            .arg("--root")
            .arg(fdir.join("root"))
            .args(["--listen", &format!("127.0.0.1:0={model}")])
            .config(&format!(
                "[[proxy]]\nprefix = \"/ws/\"\nupstream = \"https://localhost:{}\"\ntls_ca = {:?}\n",
                middle.https.port(),
                cert.cert
            ))
            .listeners(1)
            .start();
        let mut s = TcpStream::connect(front.addr_of("http")).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.write_all(
            b"GET /ws/ HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut b).unwrap(), 1, "{model}: {}", front.log());
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).to_string();
        assert!(
            head.starts_with("HTTP/1.1 101 "),
            "{model}: {head:?} {}",
            front.log()
        );
        let data: Vec<u8> = (0..2u32 << 20).map(|i| (i % 253) as u8).collect();
        let mut w = s.try_clone().unwrap();
        let up = data.clone();
        let writer = std::thread::spawn(move || {
            for c in up.chunks(50_000) {
                w.write_all(c).unwrap();
            }
            w.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert_eq!(back.len(), data.len(), "{model}: {}", front.log());
        assert!(back == data, "{model}: the echo differs");
    }
}

/// A ticket made before `SIGUSR2` resumes with the server the upgrade started, on every model:
/// the old server hands its ticket secret on, so the new one derives the same keys. Without
/// it the second connection would be a full handshake.
#[test]
fn tickets_resume_across_an_upgrade() {
    common::handover::become_subreaper();
    for model in MODELS {
        let dir = unique_dir("ticket-upgrade");
        let cert = make_cert(&dir, "cert", &["localhost"]);
        let notify_path = dir.join("notify.sock");
        let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
        notify.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut old = Launch::serve(&dir)
            .arg("--root")
            .arg(dir.join("root"))
            .args(["--https", &format!("127.0.0.1:0={model}")])
            .arg("--tls-cert")
            .arg(&cert.cert)
            .arg("--tls-key")
            .arg(&cert.key)
            .env("NOTIFY_SOCKET", &notify_path)
            .start();
        let https = old.addr_of("https");
        assert_eq!(
            common::handover::recv_notify(&notify, &old).trim(),
            "READY=1"
        );
        let cfg = client_config(&[&cert.der]);
        let mut s = connect(https, &cfg, "localhost");
        assert_eq!(get(&mut s, "/", true).status, 200, "{model}");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Full));
        old.signal(libc::SIGUSR2);
        let mut new = None;
        for _ in 0..4 {
            let msg = common::handover::recv_notify(&notify, &old);
            if let Some(pid) = msg.trim().strip_prefix("MAINPID=") {
                new = Some(Weft::adopt(pid.parse().unwrap(), &dir));
                break;
            }
        }
        let new = new.unwrap_or_else(|| panic!("{model}: no successor; {}", old.log()));
        assert!(
            old.wait_exit(Duration::from_secs(10)).is_some(),
            "{model}: the old server did not exit"
        );
        let mut s = connect(https, &cfg, "localhost");
        assert_eq!(get(&mut s, "/", true).status, 200, "{model}");
        let _ = s.read_to_end(&mut rest);
        assert_eq!(
            s.conn.handshake_kind(),
            Some(rustls::HandshakeKind::Resumed),
            "{model}: {}",
            new.log()
        );
        drop(new);
    }
}
