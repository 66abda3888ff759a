//! Automatic HTTPS against a real ACME server: Debian's `pebble`, with `pebble-challtestsrv`
//! answering every name's DNS with 127.0.0.1, both on loopback ports of their own. The real
//! `weft` binary obtains certificates through TLS-ALPN-01 and HTTP-01, serves them on every
//! model (a rustls client checks them against pebble's root), renews when told to and when
//! due, keeps serving while the CA is down, and orders once between two instances sharing
//! the storage. Each test prints a line and skips where pebble is not installed (`.ci/run`
//! installs it).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::launch::RUN_LIMIT;
use common::{Launch, Weft};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use weft::acme::client::{Method, Transport};

/// The longest wait for a certificate to be obtained or swapped in.
const OBTAIN: Duration = Duration::from_secs(90);

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn skip_without_pebble(test: &str) -> bool {
    if have("pebble") && have("pebble-challtestsrv") {
        return false;
    }
    eprintln!("{test}: skipped: pebble and pebble-challtestsrv are not installed (apt-get install pebble)");
    true
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port()
}

/// A child process killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// pebble and its DNS, on ports of their own; the VA validates on `http_port` and `tls_port`.
struct Pebble {
    dir: PathBuf,
    /// The CA that signed pebble's own HTTPS certificate (`[acme] ca`).
    minica: PathBuf,
    port: u16,
    mgmt: u16,
    dns: Proc,
    ca: Option<Proc>,
}

impl Pebble {
    /// Starts both; `validity` is the certificates' lifetime in seconds (pebble's default,
    /// five years, when `None`).
    fn start(dir: &Path, http_port: u16, tls_port: u16, validity: Option<u64>) -> Pebble {
        Pebble::start_with(dir, http_port, tls_port, validity, "")
    }

    /// [`Pebble::start`] with `ocsp` as the responder URL its certificates name.
    fn start_with(
        dir: &Path,
        http_port: u16,
        tls_port: u16,
        validity: Option<u64>,
        ocsp: &str,
    ) -> Pebble {
        std::fs::create_dir_all(dir).unwrap();
        // pebble's HTTPS certificate, from a CA made here.
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "weft test minica");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let issuer =
            rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let minica = dir.join("minica.pem");
        std::fs::write(&minica, issuer.pem()).unwrap();
        std::fs::write(dir.join("pebble.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("pebble.key"), key.serialize_pem()).unwrap();
        let (port, mgmt, dns_port, dns_mgmt) = (
            free_tcp_port(),
            free_tcp_port(),
            free_udp_port(),
            free_tcp_port(),
        );
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{port}"),
                "managementListenAddress": format!("127.0.0.1:{mgmt}"),
                "certificate": dir.join("pebble.pem"),
                "privateKey": dir.join("pebble.key"),
                "httpPort": http_port,
                "tlsPort": tls_port,
                "ocspResponderURL": ocsp,
                "externalAccountBindingRequired": false,
                "certificateValidityPeriod": validity.unwrap_or(0),
            }
        });
        std::fs::write(dir.join("pebble.json"), config.to_string()).unwrap();
        let log = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
        let dns = Proc(
            Command::new("pebble-challtestsrv")
                .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
                .args(["-dns01", &format!("127.0.0.1:{dns_port}")])
                .args(["-management", &format!("127.0.0.1:{dns_mgmt}")])
                .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
                .stdout(log("challtestsrv.log"))
                .stderr(log("challtestsrv.err"))
                .spawn()
                .expect("start pebble-challtestsrv"),
        );
        let mut p = Pebble {
            dir: dir.to_path_buf(),
            minica,
            port,
            mgmt,
            dns,
            ca: None,
        };
        p.start_ca(dns_port);
        p
    }

    fn start_ca(&mut self, dns_port: u16) {
        let log = |name: &str| std::fs::File::create(self.dir.join(name)).unwrap();
        self.ca = Some(Proc(
            Command::new("pebble")
                .arg("-config")
                .arg(self.dir.join("pebble.json"))
                .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
                .env("PEBBLE_VA_NOSLEEP", "1")
                // Every order's authorizations are new, so each one is validated.
                .env("PEBBLE_AUTHZREUSE", "0")
                .stdout(log("pebble.log"))
                .stderr(log("pebble.err"))
                .spawn()
                .expect("start pebble"),
        ));
        let end = Instant::now() + Duration::from_secs(30);
        while self.get(&self.directory()).is_err() {
            assert!(
                Instant::now() < end,
                "pebble did not start: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stop_ca(&mut self) {
        self.ca = None;
    }

    fn directory(&self) -> String {
        format!("https://127.0.0.1:{}/dir", self.port)
    }

    fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        let mut t = weft::acme::transport::Https::new(Some(&self.minica), Duration::from_secs(5))?;
        let r = t
            .request(Method::Get, url, None)
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("{url}: {}", r.status));
        }
        Ok(r.body)
    }

    /// The root pebble issues under (made anew at each start).
    fn roots(&self) -> RootCertStore {
        let pem = self
            .get(&format!("https://127.0.0.1:{}/roots/0", self.mgmt))
            .expect("pebble's root");
        let mut store = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&pem) {
            store.add(c.unwrap()).unwrap();
        }
        store
    }

    /// The intermediate it issues with, and its key (PEM), for an OCSP responder to sign as.
    fn intermediate(&self) -> (Vec<u8>, Vec<u8>) {
        let get = |what: &str| {
            self.get(&format!("https://127.0.0.1:{}/{what}/0", self.mgmt))
                .unwrap_or_else(|e| panic!("pebble's {what}: {e}"))
        };
        (get("intermediates"), get("intermediate-keys"))
    }

    fn logs(&self) -> String {
        ["pebble.log", "pebble.err"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.ca = None;
        let _ = &self.dns;
    }
}

/// A GET of `path` over TLS to `addr` for `name` with the client configuration `cfg`: the
/// response as read to the end, and the certificate the server presented.
fn exchange(
    addr: SocketAddr,
    name: &str,
    path: &str,
    cfg: Arc<ClientConfig>,
) -> Result<(String, CertificateDer<'static>), String> {
    let server = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
    let conn = ClientConnection::new(cfg, server).map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    if !out.starts_with(b"HTTP/1.1 ") {
        return Err(format!("no response: {:?}", String::from_utf8_lossy(&out)));
    }
    let leaf = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no certificate")?
        .clone()
        .into_owned();
    Ok((String::from_utf8_lossy(&out).into_owned(), leaf))
}

/// A client configuration that trusts `roots` (pebble's).
fn trusting(roots: &RootCertStore) -> Arc<ClientConfig> {
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth(),
    )
}

/// The serial of the certificate `addr` serves for `name`, checked against `roots`; `Err`
/// says why not (a placeholder, a certificate of the wrong name, no answer).
fn served(addr: SocketAddr, name: &str, roots: &RootCertStore) -> Result<String, String> {
    let (_, leaf) = exchange(addr, name, "/", trusting(roots))?;
    Ok(weft_http::x509::names(&leaf)?.serial)
}

/// A GET over TLS to `addr` for `name` (pebble's root trusted): the response's text.
fn get_tls(addr: SocketAddr, name: &str, path: &str, roots: &RootCertStore) -> String {
    exchange(addr, name, path, trusting(roots))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .0
}

/// `promtool check metrics` passes the body of a `/_weft/metrics` response (said and skipped
/// without promtool).
fn promtool_accepts(response: &str) {
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        panic!("no body: {response}");
    };
    assert!(!head.contains("chunked"), "{head}");
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool: skipped: not installed");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `ok` holds, or panics with `what` and the server's log.
fn wait_for(what: &str, servers: &[&Weft], mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + OBTAIN;
    while !ok() {
        if Instant::now() >= end {
            let logs: Vec<String> = servers.iter().map(|s| s.log()).collect();
            panic!("{what}: not within {OBTAIN:?}\n{}", logs.join("\n----\n"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn acme_section(pebble: &Pebble, storage: &Path, challenges: &str) -> String {
    format!(
        "[acme]\nenabled = true\ndirectory = \"{}\"\nca = \"{}\"\nstorage = \"{}\"\n\
         email = \"ops@weft.test\"\nchallenges = {challenges}\n",
        pebble.directory(),
        pebble.minica.display(),
        storage.display()
    )
}

/// Two sites, a TLS listener on each model (the fiber one on the port pebble validates
/// TLS-ALPN-01 on), a plain listener that redirects to https on pebble's HTTP-01 port.
fn four_models_config(
    pebble: &Pebble,
    dir: &Path,
    http_port: u16,
    tls_port: u16,
    challenges: &str,
) -> String {
    format!(
        "root = \"{root}\"\n\
         [[listen]]\naddr = \"127.0.0.1:{tls_port}\"\nmodel = \"fiber\"\ntls = true\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"thread\"\ntls = true\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"process\"\ntls = true\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"pipeline\"\ntls = true\n\
         [[listen]]\naddr = \"127.0.0.1:{http_port}\"\nmodel = \"thread\"\nredirect_https = true\n\
         [status]\nenabled = true\n\
         {acme}\
         [[site]]\nhosts = [\"a.weft.test\"]\n\
         [[site]]\nhosts = [\"b.weft.test\"]\n",
        root = dir.join("root").display(),
        acme = acme_section(pebble, &dir.join("acme"), challenges),
    )
}

const NAMES: [&str; 2] = ["a.weft.test", "b.weft.test"];

/// Every TLS listener's serial for every name, when all are checked against `roots`.
fn serials(server: &Weft, roots: &RootCertStore) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for s in server.serving().iter().filter(|s| s.scheme == "https") {
        for name in NAMES {
            out.push(served(s.addr, name, roots).ok()?);
        }
    }
    Some(out)
}

#[test]
fn certificates_are_obtained_served_on_every_model_renewed_and_kept_while_the_ca_is_down() {
    if skip_without_pebble("acme") {
        return;
    }
    let dir = common::unique_dir("acme-models");
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), "hello\n").unwrap();
    let (http_port, tls_port) = (free_tcp_port(), free_tcp_port());
    let mut pebble = Pebble::start(&dir.join("pebble"), http_port, tls_port, None);
    let roots = pebble.roots();
    let config =
        |challenges: &str| four_models_config(&pebble, &dir, http_port, tls_port, challenges);
    let server = Launch::serve(&dir)
        .config(&config("[\"tls-alpn-01\"]"))
        .listeners(5)
        .start();
    let https: Vec<_> = server
        .serving()
        .iter()
        .filter(|s| s.scheme == "https")
        .map(|s| (s.addr, s.model.clone()))
        .collect();
    assert_eq!(https.len(), 4, "{:?}", server.serving());

    // Obtained through TLS-ALPN-01, and served by all four models.
    let mut first = Vec::new();
    wait_for(
        "both certificates served on every model",
        &[&server],
        || match serials(&server, &roots) {
            Some(s) => {
                first = s;
                true
            }
            None => false,
        },
    );
    let log = server.log();
    for name in NAMES {
        assert!(
            log.contains(&format!("TLS-ALPN-01 handshake for {name}: answered")),
            "{log}"
        );
    }
    assert!(!log.contains("HTTP-01 validation"), "{log}");
    // One certificate per name, the same on every listener.
    for (i, serial) in first.iter().enumerate() {
        assert_eq!(serial, &first[i % 2], "listener {} name {}", i / 2, i % 2);
    }
    assert_ne!(first[0], first[1]);
    // Its expiry in the metrics.
    let metrics = get_tls(https[0].0, "a.weft.test", "/_weft/metrics", &roots);
    assert!(
        metrics
            .contains("weft_tls_certificate_expiry_seconds{name=\"a.weft.test\",source=\"acme\"}"),
        "{metrics}"
    );
    promtool_accepts(&metrics);

    // Told to renew, through HTTP-01 now: the configuration changes by SIGHUP, the renewal
    // by `weft acme renew`, and every model serves the new certificates.
    std::fs::write(dir.join("weft.toml"), config("[\"http-01\"]")).unwrap();
    server.signal(libc::SIGHUP);
    wait_for("the reload", &[&server], || {
        server.log().contains("configuration reloaded")
    });
    let ran = Launch::new()
        .args(["acme", "renew", "--config"])
        .arg(dir.join("weft.toml"))
        .run(RUN_LIMIT);
    assert!(ran.success(), "{ran:?}");
    for name in NAMES {
        assert!(
            ran.stdout.contains(&format!("{name}: renewal asked")),
            "{ran:?}"
        );
    }
    let mut second = Vec::new();
    wait_for(
        "the renewed certificates on every model",
        &[&server],
        || match serials(&server, &roots) {
            Some(s) if s.iter().zip(&first).all(|(new, old)| new != old) => {
                second = s;
                true
            }
            _ => false,
        },
    );
    let log = server.log();
    assert!(
        log.contains("HTTP-01 validation of /.well-known/acme-challenge/"),
        "{log}"
    );
    let listed = Launch::new()
        .args(["acme", "list", "--config"])
        .arg(dir.join("weft.toml"))
        .run(RUN_LIMIT);
    assert!(listed.success(), "{listed:?}");
    assert!(listed.stdout.contains("a.weft.test"), "{listed:?}");

    // The CA goes away and a renewal fails: logged, and the server serves on with what it has.
    pebble.stop_ca();
    let ran = Launch::new()
        .args(["acme", "renew", "--config"])
        .arg(dir.join("weft.toml"))
        .args(["a.weft.test"])
        .run(RUN_LIMIT);
    assert!(ran.success(), "{ran:?}");
    wait_for("the failure logged", &[&server], || {
        server
            .log()
            .contains("a.weft.test: no certificate obtained")
    });
    assert_eq!(serials(&server, &roots), Some(second));
}

#[test]
fn instances_sharing_the_storage_order_once_and_renew_when_due() {
    if skip_without_pebble("acme") {
        return;
    }
    let dir = common::unique_dir("acme-shared");
    let (http_port, tls_port) = (free_tcp_port(), free_tcp_port());
    // 30 seconds: renewed with a third left, 20 s after it was issued.
    let pebble = Pebble::start(&dir.join("pebble"), http_port, tls_port, Some(30));
    let roots = pebble.roots();
    let storage = dir.join("shared-acme");
    let start = |name: &str, listen: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        Launch::serve(&d)
            .config(&format!(
                "root = \"{}\"\n{listen}{}[[site]]\nhosts = [\"c.weft.test\"]\n",
                d.display(),
                acme_section(&pebble, &storage, "[\"tls-alpn-01\", \"http-01\"]")
            ))
            .start()
    };
    // Only the first answers on pebble's ports: the second's orders are validated there too,
    // from the answers in the shared storage.
    let a = start(
        "a",
        &format!("[[listen]]\naddr = \"127.0.0.1:{tls_port}\"\nmodel = \"fiber\"\ntls = true\n"),
    );
    let b = start(
        "b",
        "[[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"thread\"\ntls = true\n",
    );
    let (a_addr, b_addr) = (a.addr_of("https"), b.addr_of("https"));
    let both = |a_s: &mut String| {
        let (Ok(x), Ok(y)) = (
            served(a_addr, "c.weft.test", &roots),
            served(b_addr, "c.weft.test", &roots),
        ) else {
            return false;
        };
        *a_s = x.clone();
        x == y
    };
    let orders = || {
        [&a, &b]
            .iter()
            .map(|s| {
                s.log()
                    .matches("c.weft.test: ordering a certificate")
                    .count()
            })
            .sum::<usize>()
    };
    let mut first = String::new();
    wait_for("one certificate served by both", &[&a, &b], || {
        both(&mut first)
    });
    assert_eq!(orders(), 1, "{}\n----\n{}", a.log(), b.log());
    let mut second = String::new();
    wait_for("the renewal when due, served by both", &[&a, &b], || {
        both(&mut second) && second != first
    });
    let n = orders();
    assert!(
        (2..=3).contains(&n),
        "one order per certificate (a 30 s certificate may roll once more): {n}\n{}\n----\n{}",
        a.log(),
        b.log()
    );
}

/// The OCSP response `addr` staples for `name` (empty: none), its certificate checked
/// against `roots`.
fn staple_of(addr: SocketAddr, name: &str, roots: &RootCertStore) -> Result<Vec<u8>, String> {
    let (seen, cfg) = common::staple::StapleSeen::client(roots.clone());
    exchange(addr, name, "/", cfg)?;
    let staple = seen.staple.lock().unwrap().clone();
    staple.ok_or_else(|| "no handshake".to_string())
}

/// Also: a SIGUSR2 upgrade's new process serves the same certificate and staple, read from the
/// storage.
#[test]
fn an_obtained_certificate_is_stapled_once_its_responder_answers() {
    if skip_without_pebble("acme") {
        return;
    }
    if !have("openssl") {
        eprintln!("acme ocsp: skipped: no openssl for the OCSP responder");
        return;
    }
    let dir = common::unique_dir("acme-ocsp");
    let (http_port, tls_port, ocsp_port) = (free_tcp_port(), free_tcp_port(), free_tcp_port());
    let pebble = Pebble::start_with(
        &dir.join("pebble"),
        http_port,
        tls_port,
        None,
        &format!("http://127.0.0.1:{ocsp_port}/"),
    );
    let roots = pebble.roots();
    common::handover::become_subreaper();
    let notify_path = dir.join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(common::handover::WAIT))
        .unwrap();
    let mut server = Launch::serve(&dir)
        .env("NOTIFY_SOCKET", &notify_path)
        .config(&format!(
            "root = \"{}\"\n[[listen]]\naddr = \"127.0.0.1:{tls_port}\"\nmodel = \"thread\"\n\
             tls = true\n{}[[site]]\nhosts = [\"d.weft.test\"]\n",
            dir.display(),
            acme_section(&pebble, &dir.join("acme"), "[\"tls-alpn-01\"]")
        ))
        .start();
    let addr = server.addr_of("https");
    let mut serial = String::new();
    wait_for("the certificate", &[&server], || {
        match served(addr, "d.weft.test", &roots) {
            Ok(s) => {
                serial = s;
                true
            }
            Err(_) => false,
        }
    });
    // The responder is not there yet: served without a staple, and said so.
    wait_for("the failed OCSP fetch logged", &[&server], || {
        server.log().contains("d.weft.test: no OCSP response")
    });
    assert_eq!(staple_of(addr, "d.weft.test", &roots), Ok(Vec::new()));

    // openssl's responder, signing as pebble's intermediate, knowing the certificate good.
    let (int_pem, int_key) = pebble.intermediate();
    let ocsp_dir = dir.join("ocsp");
    std::fs::create_dir_all(&ocsp_dir).unwrap();
    std::fs::write(ocsp_dir.join("int.pem"), int_pem).unwrap();
    std::fs::write(ocsp_dir.join("int.key"), int_key).unwrap();
    std::fs::write(
        ocsp_dir.join("index.txt"),
        format!("V\t491231235959Z\t\t{serial}\tunknown\t/CN=d.weft.test\n"),
    )
    .unwrap();
    let _responder = Proc(
        Command::new("openssl")
            .args(["ocsp", "-index", "index.txt", "-port"])
            .arg(ocsp_port.to_string())
            .args([
                "-rsigner", "int.pem", "-rkey", "int.key", "-CA", "int.pem", "-ndays", "1",
            ])
            .current_dir(&ocsp_dir)
            .stdout(std::fs::File::create(ocsp_dir.join("ocsp.log")).unwrap())
            .stderr(std::fs::File::create(ocsp_dir.join("ocsp.err")).unwrap())
            .spawn()
            .expect("openssl ocsp"),
    );
    let mut staple = Vec::new();
    wait_for("a stapled OCSP response", &[&server], || {
        match staple_of(addr, "d.weft.test", &roots) {
            Ok(s) if !s.is_empty() => {
                staple = s;
                true
            }
            _ => false,
        }
    });
    let basic = weft_http::ocsp::read(&staple).expect("a basic OCSP response");
    assert_eq!(basic.responses.len(), 1);
    let single = &basic.responses[0];
    assert_eq!(single.status, weft_http::ocsp::CertStatus::Good);
    let hex: String = single
        .serial
        .iter()
        .skip_while(|b| **b == 0)
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(hex, serial);
    assert!(
        server.log().contains("d.weft.test: OCSP response stapled"),
        "{}",
        server.log()
    );

    // Upgraded: the new process finds both in the storage.
    server.signal(libc::SIGUSR2);
    let mut new = None;
    for _ in 0..6 {
        let msg = common::handover::recv_notify(&notify, &server);
        if let Some(pid) = msg.trim().strip_prefix("MAINPID=") {
            new = Some(Weft::adopt(pid.parse().unwrap(), &dir));
            break;
        }
    }
    let new = new.unwrap_or_else(|| panic!("no MAINPID; log:\n{}", server.log()));
    assert_ne!(new.pid(), server.pid());
    assert!(
        server.wait_exit(Duration::from_secs(30)).is_some(),
        "the old process drained and exited"
    );
    assert_eq!(served(addr, "d.weft.test", &roots), Ok(serial));
    assert_eq!(staple_of(addr, "d.weft.test", &roots), Ok(staple));
}
