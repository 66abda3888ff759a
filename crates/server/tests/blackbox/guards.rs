//! Per-client limits on every model: `limits.conn_per_ip` answers 503 to a connection past the
//! limit from one address (the socket's, or the PROXY header's) and serves other addresses;
//! `[rate_limit]` answers 429 with `Retry-After` past `burst + 1` requests from one client
//! address (the real one behind a trusted proxy), never to the health check; both are counted
//! in `/_weft/metrics`.

use crate::common::{Builder, Conn, Model, Server};

per_model! {
    except fiber_nocache:
    conn_per_ip_answers_503_past_the_limit_and_frees_on_close,
    conn_per_ip_counts_the_proxy_header_address,
    rate_limit_answers_429_with_retry_after_per_real_client,
    a_site_with_its_own_rate_counts_apart_and_off_exempts_it,
    a_listener_with_its_own_conn_per_ip_limits_its_connections,
}

const ECHO: &[u8] = b"GET /echo HTTP/1.1\r\nHost: test\r\n\r\n";

/// A keep-alive connection that has been served once (the server holds it open).
fn served(c: &mut Conn) {
    c.send(ECHO);
    assert_eq!(c.read_response().expect("echo response").status, 200);
}

/// A connection to `srv` from `local` (another loopback address is another client).
pub fn connect_from(srv: &Server, local: &str) -> Conn {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let from: std::net::SocketAddr = format!("{local}:0").parse().unwrap();
    s.bind(&from.into()).unwrap();
    s.connect(&srv.addr.into()).unwrap();
    Conn::from_stream(s.into())
}

/// The value of the un-labelled metric `name` in `/_weft/metrics`, asked from 127.0.0.9 (a
/// client of its own, whatever the test's clients hold).
fn metric(srv: &Server, name: &str) -> u64 {
    let mut c = connect_from(srv, "127.0.0.9");
    c.send(b"GET /_weft/metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    let r = c.read_response().expect("metrics");
    assert_eq!(r.status, 200);
    let text = r.text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics:\n{text}"))
}

fn conn_per_ip_answers_503_past_the_limit_and_frees_on_close(model: Model) {
    let b = Builder::new(model, "guards-conn");
    let access = b.dir().join("access.log");
    let srv = b
        .args(&["--conn-per-ip", "2", "--status", "--access-log"])
        .args(&[access.to_str().unwrap()])
        .start();
    let mut a = srv.connect();
    served(&mut a);
    let mut b = srv.connect();
    served(&mut b);
    let mut third = srv.connect();
    third.send(ECHO);
    let r = third.read_response().expect("an answer past the limit");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.closes(), "a refused connection is closed: {r:?}");
    // The same answer as every other error of every model: dated, with a page.
    assert!(r.header("Date").is_some() && !r.body.is_empty(), "{r:?}");
    // The two held connections are still served.
    served(&mut a);
    served(&mut b);
    drop(b);
    // Once one closes, a new connection fits (the close reaches the server a little later).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut c = srv.connect();
        c.send(ECHO);
        let status = c.read_response().map(|r| r.status);
        if status.as_ref().is_ok_and(|&s| s == 200) {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "still refused after a connection closed: {status:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Another address is another client: served while 127.0.0.1 is at its limit.
    let mut other = connect_from(&srv, "127.0.0.2");
    served(&mut other);
    assert!(metric(&srv, "weft_limit_conn_rejected_total") >= 1);
    assert!(srv.log().contains("503 more than limits.conn_per_ip = 2"));
    // And an access-log line (flushed within a second).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !std::fs::read_to_string(&access)
        .unwrap_or_default()
        .contains(" 503 ")
    {
        assert!(
            std::time::Instant::now() < end,
            "no 503 in the access log: {}",
            std::fs::read_to_string(&access).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Behind a balancer with the PROXY protocol the count is per client, not per balancer.
fn conn_per_ip_counts_the_proxy_header_address(model: Model) {
    let srv = Builder::new(model, "guards-conn-proxy")
        .args(&["--conn-per-ip", "1", "--proxy-protocol"])
        .start();
    let proxied = |client: &str| {
        let mut c = srv.connect();
        c.send(format!("PROXY TCP4 {client} 192.0.2.1 5000 80\r\n").as_bytes());
        c.send(ECHO);
        (c.read_response().expect("an answer").status, c)
    };
    let (first, _held) = proxied("203.0.113.1");
    assert_eq!(first, 200);
    let (again, _) = proxied("203.0.113.1");
    assert_eq!(
        again, 503,
        "a second connection of 203.0.113.1 past conn_per_ip = 1"
    );
    let (other, _held2) = proxied("203.0.113.2");
    assert_eq!(
        other, 200,
        "another client behind the same balancer is served"
    );
}

fn rate_limit_answers_429_with_retry_after_per_real_client(model: Model) {
    let srv = Builder::new(model, "guards-rate")
        .args(&[
            "--rate-limit",
            "1r/m",
            "--rate-burst",
            "2",
            "--real-ip-from",
            "127.0.0.1/32",
            "--health",
            "/healthz",
            "--status",
        ])
        .start();
    let from = |client: &str, path: &str| {
        srv.send(
            format!(
                "GET {path} HTTP/1.1\r\nHost: test\r\nX-Forwarded-For: {client}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    for _ in 0..3 {
        assert_eq!(from("198.51.100.1", "/").status, 200);
    }
    let r = from("198.51.100.1", "/");
    assert_eq!(r.status, 429, "{r:?}");
    let retry: u64 = r
        .header("Retry-After")
        .expect("Retry-After on 429")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "Retry-After {retry} at 1r/m");
    // Pipelined on one keep-alive connection: each request counts.
    let mut c = srv.connect();
    c.send(
        b"GET / HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.1\r\n\r\n\
          GET / HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.3\r\n\r\n",
    );
    assert_eq!(c.read_response().unwrap().status, 429);
    assert_eq!(c.read_response().unwrap().status, 200);
    // Another client behind the same proxy has its own bucket; the health check is never
    // limited.
    assert_eq!(from("198.51.100.2", "/").status, 200);
    for _ in 0..5 {
        assert_eq!(from("198.51.100.1", "/healthz").status, 200);
    }
    assert_eq!(metric(&srv, "weft_limit_req_rejected_total"), 2);
    assert!(metric(&srv, "weft_limit_zone_slots") >= 65_536);
    assert!(srv
        .log()
        .contains("198.51.100.1: 429 over rate_limit 1r/m (burst 2)"));
}

/// `[site.rate_limit]`: a site's own rate counts its requests apart from the server's
/// `[rate_limit]` (each zone gives the client its own burst), and `rate = "off"` exempts a site.
fn a_site_with_its_own_rate_counts_apart_and_off_exempts_it(model: Model) {
    let srv = Builder::new(model, "guards-site-rate")
        .config(
            "[rate_limit]\nrate = \"1r/m\"\nburst = 1\n\
             [[site]]\nhosts = [\"api.test\"]\n[site.rate_limit]\nrate = \"1r/m\"\nburst = 0\n\
             [[site]]\nhosts = [\"open.test\"]\n[site.rate_limit]\nrate = \"off\"\n",
        )
        .start();
    let get = |host: &str| {
        srv.send(
            format!("GET /echo HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .status
    };
    // The site's own: burst 0, one request and then 429.
    assert_eq!(get("api.test"), 200);
    assert_eq!(get("api.test"), 429);
    // The server's zone did not pay for them: burst 1 lets two through, hosts no site names.
    assert_eq!(get("test"), 200);
    assert_eq!(get("elsewhere.test"), 200);
    assert_eq!(get("test"), 429);
    // The exempt site is not limited at all.
    for _ in 0..6 {
        assert_eq!(get("open.test"), 200);
    }
    let log = srv.log();
    assert!(
        log.contains("429 over its site's rate_limit 1r/m (burst 0)"),
        "{log}"
    );
    assert!(log.contains("429 over rate_limit 1r/m (burst 1)"), "{log}");
}

/// `[[listen]] conn_per_ip` limits its own listener, whatever `limits.conn_per_ip` says (here
/// nothing: no limit elsewhere).
fn a_listener_with_its_own_conn_per_ip_limits_its_connections(model: Model) {
    let srv = Builder::new(model, "guards-listen-conn")
        .listen_from_config()
        .config(&format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{}\"\nconn_per_ip = 1\n",
            model.name
        ))
        .start();
    let mut a = srv.connect();
    served(&mut a);
    let mut b = srv.connect();
    b.send(ECHO);
    let r = b
        .read_response()
        .expect("an answer past the listener's limit");
    assert_eq!(r.status, 503, "{r:?}");
    served(&mut a);
    let mut other = connect_from(&srv, "127.0.0.2");
    served(&mut other);
    let log = srv.log();
    assert!(
        log.contains("503 more than [[listen]] conn_per_ip = 1 connections open"),
        "{log}"
    );
}
