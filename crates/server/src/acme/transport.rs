//! The ACME client's HTTPS: a blocking request per connection (`Connection: close`), rustls
//! (ring, TLS 1.2 and 1.3) verifying the CA's server with the system's CA bundle or, for a
//! private CA such as pebble, the PEM file `[acme]` names; one timeout bounds the connect and
//! each read and write. It runs on the ACME thread, never on a serving one.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use super::client::{HttpResponse, Method, Transport};

/// The most a response may hold: a certificate chain is a few kilobytes.
const MAX_RESPONSE: usize = 1 << 20;

/// HTTPS to an ACME server.
#[derive(Debug, Clone)]
pub struct Https {
    config: Arc<ClientConfig>,
    timeout: Duration,
}

impl Https {
    /// Verifies servers with the certificates of `ca` (PEM), else the system's bundle.
    pub fn new(ca: Option<&Path>, timeout: Duration) -> Result<Https, String> {
        let roots = crate::roots::ca_roots(
            ca,
            "acme ca",
            "acme: no CA certificates to verify the ACME server with; name them in [acme] ca",
        )?;
        let config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .map_err(|e| format!("acme TLS setup: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        Ok(Https {
            config: Arc::new(config),
            timeout,
        })
    }
}

/// `https://HOST[:PORT]/PATH` split into its host, port and path (with the query).
pub(crate) fn split_url(url: &str) -> io::Result<(String, u16, String)> {
    split(url, "https", 443)
}

/// `http://HOST[:PORT]/PATH` (an OCSP responder's) split the same way.
pub(crate) fn split_http_url(url: &str) -> io::Result<(String, u16, String)> {
    split(url, "http", 80)
}

fn split(url: &str, scheme: &str, default_port: u16) -> io::Result<(String, u16, String)> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an {scheme} URL: {url}"),
        )
    };
    let rest = url
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix("://"))
        .ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let port_of = |p: &str| p.parse::<u16>().map_err(|_| bad());
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(bad)?;
        match after.strip_prefix(':') {
            Some(p) => (h, port_of(p)?),
            None if after.is_empty() => (h, default_port),
            None => return Err(bad()),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, port_of(p)?),
            None => (authority, default_port),
        }
    };
    if host.is_empty() || authority.contains('@') {
        return Err(bad());
    }
    Ok((host.to_string(), port, path.to_string()))
}

impl Transport for Https {
    fn request(
        &mut self,
        method: Method,
        url: &str,
        body: Option<&str>,
    ) -> io::Result<HttpResponse> {
        let (host, port, path) = split_url(url)?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"))
            })?;
        let tcp = TcpStream::connect_timeout(&addr, self.timeout)?;
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(self.timeout))?;
        let name = ServerName::try_from(host.clone()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host}: not a server name"),
            )
        })?;
        let conn = ClientConnection::new(self.config.clone(), name).map_err(io::Error::other)?;
        let mut tls = StreamOwned::new(conn, tcp);
        let verb = match method {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
        };
        let host_field = if port == 443 {
            host.clone()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut head = format!(
            "{verb} {path} HTTP/1.1\r\nHost: {host_field}\r\nUser-Agent: weft/{}\r\n\
             Accept: */*\r\nConnection: close\r\n",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/jose+json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        tls.write_all(head.as_bytes())?;
        if let Some(b) = body {
            tls.write_all(b.as_bytes())?;
        }
        tls.flush()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match tls.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.len() > MAX_RESPONSE {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "an ACME response over 1 MiB",
                        ));
                    }
                }
                // A server that closes without close_notify after a whole response.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !buf.is_empty() => break,
                Err(e) => return Err(e),
            }
        }
        parse_response(&buf, method == Method::Head)
    }
}

/// A whole response as read to the connection's end: status, fields, and the body by
/// `Content-Length`, chunked, or to the end (none for HEAD).
pub(crate) fn parse_response(buf: &[u8], head_only: bool) -> io::Result<HttpResponse> {
    let bad =
        |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ACME response: {why}"));
    let end = find(buf, b"\r\n\r\n").ok_or_else(|| bad("no end of head"))?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("a head that is not text"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next().unwrap_or("").starts_with("HTTP/1.") {
        return Err(bad("no HTTP/1 status line"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| (100..600).contains(s))
        .ok_or_else(|| bad("no status code"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| bad("a field without a colon"))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let field = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let rest = &buf[end + 4..];
    let body = if head_only || status == 204 || status == 304 {
        Vec::new()
    } else if field("Transfer-Encoding").is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        dechunk(rest).ok_or_else(|| bad("a chunked body cut short"))?
    } else if let Some(n) = field("Content-Length") {
        let n: usize = n
            .parse()
            .map_err(|_| bad("Content-Length is not a number"))?;
        rest.get(..n)
            .ok_or_else(|| bad("a body shorter than its Content-Length"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Where `needle` first starts in `hay`.
pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A chunked body's data; `None` where it stops before its last chunk.
fn dechunk(mut s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(s, b"\r\n")?;
        let line = std::str::from_utf8(&s[..line_end]).ok()?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        s = &s[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(s.get(..size)?);
        s = s.get(size..)?.strip_prefix(b"\r\n")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use std::net::TcpListener;

    #[test]
    fn urls_split_into_host_port_and_path() {
        let s = split_url;
        assert_eq!(
            s("https://ca.test/dir").unwrap(),
            ("ca.test".into(), 443, "/dir".into())
        );
        assert_eq!(
            s("https://localhost:14000/order/1?x=1").unwrap(),
            ("localhost".into(), 14000, "/order/1?x=1".into())
        );
        assert_eq!(
            s("https://ca.test").unwrap(),
            ("ca.test".into(), 443, "/".into())
        );
        assert_eq!(
            s("https://[::1]:8443/d").unwrap(),
            ("::1".into(), 8443, "/d".into())
        );
        assert_eq!(
            s("https://[::1]/d").unwrap(),
            ("::1".into(), 443, "/d".into())
        );
        for bad in [
            "http://ca.test/",
            "https://",
            "https://h:port/",
            "https://u@h/",
            "https://[::1/",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_parse_by_length_by_chunks_and_without_a_body() {
        let r = parse_response(
            b"HTTP/1.1 201 Created\r\nLocation: /a\r\nContent-Length: 2\r\n\r\n{}extra",
            false,
        )
        .unwrap();
        assert_eq!(
            (r.status, r.header("location"), &r.body[..]),
            (201, Some("/a"), &b"{}"[..])
        );
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nReplay-Nonce: n1\r\nContent-Length: 9\r\n\r\n",
            true,
        )
        .unwrap();
        assert_eq!((r.header("Replay-Nonce"), r.body.len()), (Some("n1"), 0));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n", false).is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", false).is_err());
        assert!(parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            false
        )
        .is_err());
        assert!(parse_response(b"SMTP 200 OK\r\n\r\n", false).is_err());
    }

    /// A TLS server on loopback with a certificate for `localhost`: answers one request with
    /// `reply`, and hands back what it read.
    fn one_shot_server(
        reply: &'static [u8],
    ) -> (u16, std::path::PathBuf, std::thread::JoinHandle<Vec<u8>>) {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "weft-acme-https-{}-{}",
            std::process::id(),
            reply.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ck.cert.pem()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(ck.cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der())),
        )
        .unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (tcp, _) = l.accept().unwrap();
            let conn = rustls::ServerConnection::new(Arc::new(config)).unwrap();
            let mut s = StreamOwned::new(conn, tcp);
            let mut got = Vec::new();
            let mut b = [0u8; 4096];
            // Reads until `enough` holds; false where the client gave up first (a refused
            // certificate ends the exchange early).
            let mut read_until = |got: &mut Vec<u8>, enough: &dyn Fn(&[u8]) -> bool| {
                while !enough(got) {
                    match s.read(&mut b) {
                        Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                        _ => return false,
                    }
                }
                true
            };
            if !read_until(&mut got, &|g| find(g, b"\r\n\r\n").is_some()) {
                return got;
            }
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(len) = text
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                let head = find(&got, b"\r\n\r\n").unwrap() + 4;
                if !read_until(&mut got, &|g| g.len() >= head + len) {
                    return got;
                }
            }
            s.write_all(reply).unwrap();
            s.conn.send_close_notify();
            s.flush().unwrap();
            got
        });
        (port, ca, t)
    }

    #[test]
    fn a_request_goes_over_tls_verified_with_the_named_ca() {
        let (port, ca, server) =
            one_shot_server(b"HTTP/1.1 201 Created\r\nReplay-Nonce: abc\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
        let mut https = Https::new(Some(&ca), Duration::from_secs(5)).unwrap();
        let r = https
            .request(
                Method::Post,
                &format!("https://localhost:{port}/new-acct"),
                Some("{\"a\":1}"),
            )
            .unwrap();
        assert_eq!(
            (r.status, r.header("Replay-Nonce"), &r.body[..]),
            (201, Some("abc"), &b"{}"[..])
        );
        let got = String::from_utf8(server.join().unwrap()).unwrap();
        assert!(got.starts_with("POST /new-acct HTTP/1.1\r\n"), "{got}");
        assert!(
            got.contains(&format!("Host: localhost:{port}\r\n")),
            "{got}"
        );
        assert!(
            got.contains("Content-Type: application/jose+json\r\n"),
            "{got}"
        );
        assert!(got.ends_with("\r\n\r\n{\"a\":1}"), "{got}");
        std::fs::remove_dir_all(ca.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_server_the_ca_does_not_vouch_for_is_refused() {
        let (port, ca, server) = one_shot_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        // Another CA's certificate: the server's does not chain to it.
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let other_ca = ca.with_file_name("other.pem");
        std::fs::write(&other_ca, other.cert.pem()).unwrap();
        let mut https = Https::new(Some(&other_ca), Duration::from_secs(5)).unwrap();
        let err = https
            .request(Method::Get, &format!("https://localhost:{port}/dir"), None)
            .unwrap_err();
        assert!(
            err.to_string().to_lowercase().contains("certificate"),
            "{err}"
        );
        assert!(server.join().unwrap().is_empty(), "no request went out");
        std::fs::remove_dir_all(ca.parent().unwrap()).unwrap();
        assert!(Https::new(
            Some(Path::new("/nonexistent/ca.pem")),
            Duration::from_secs(1)
        )
        .unwrap_err()
        .contains("acme ca /nonexistent/ca.pem: cannot read"));
    }
}
