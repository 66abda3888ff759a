//! Upstream groups (`[[upstream]]`): three weft servers behind one, balanced in turn; one
//! killed under a stream of requests costs no failed request (the try goes to the next server
//! and the dead one is marked down); health checks take a server that fails them out before a
//! request meets it; the metrics say which servers are up.

use std::time::{Duration, Instant};

use crate::common::{Builder, Model, Server};

per_model! {
    except fiber_nocache:
    requests_go_round_the_group_and_a_killed_server_costs_no_failed_request,
    health_checks_take_a_failing_server_out_before_a_request_meets_it,
    an_answer_retry_on_names_goes_to_the_next_server,
    early_hints_from_the_upstream_reach_an_http11_client,
    a_backend_that_moves_in_dns_is_followed_without_a_reload,
}

/// A weft server whose `/who.txt` answers `name`, with `/healthz` answering 200 when `healthy`.
fn backend(model: Model, name: &str, healthy: bool) -> Server {
    let mut b = Builder::new(model, &format!("up-{name}")).file("who.txt", name.as_bytes());
    if healthy {
        b = b.args(&["--health", "/healthz"]);
    }
    b.start()
}

/// The server in front: `/who.txt` forwarded to the group `app` of `servers`.
fn front(model: Model, servers: &[&Server], extra: &str) -> Server {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
    Builder::new(model, "up-front")
        .config(&format!(
            "[[upstream]]\nname = \"app\"\nservers = [{}]\n{extra}\n\
             [[proxy]]\nprefix = \"/who.txt\"\nupstream = \"upstream:app\"\n",
            list.join(", ")
        ))
        .args(&["--status"])
        .start()
}

/// `weft_upstream_up` of each server, in the order of the metrics.
fn up_flags(front: &Server) -> Vec<(String, u64)> {
    let m = front.get("/_weft/metrics");
    String::from_utf8_lossy(&m.body)
        .lines()
        .filter_map(|l| l.strip_prefix("weft_upstream_up{"))
        .filter_map(|l| {
            let (labels, v) = l.split_once("} ")?;
            let server = labels.split("server=\"").nth(1)?.trim_end_matches('"');
            Some((server.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn requests_go_round_the_group_and_a_killed_server_costs_no_failed_request(model: Model) {
    let a = backend(model, "a", true);
    let b = backend(model, "b", true);
    let c = backend(model, "c", true);
    let f = front(model, &[&a, &b, &c], "");
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..30 {
        let r = f.get("/who.txt");
        assert_eq!(r.status, 200, "{r:?}");
        *seen
            .entry(String::from_utf8_lossy(&r.body).to_string())
            .or_insert(0) += 1;
    }
    let counts: Vec<u32> = seen.values().copied().collect();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(counts.iter().all(|&n| n == 10), "round robin: {seen:?}");
    // One killed: every request still answered, by the other two.
    let b_addr = b.addr.to_string();
    drop(b);
    let mut failed = 0;
    let mut by: std::collections::BTreeMap<String, u32> = Default::default();
    for _ in 0..40 {
        let r = f.get("/who.txt");
        if r.status == 200 {
            *by.entry(String::from_utf8_lossy(&r.body).to_string())
                .or_insert(0) += 1;
        } else {
            failed += 1;
        }
    }
    assert_eq!(failed, 0, "{by:?}\n{}", f.log());
    assert!(!by.contains_key("b"), "{by:?}");
    assert!(
        f.log().contains("not used for"),
        "the dead server is not marked down:\n{}",
        f.log()
    );
    let flags = up_flags(&f);
    assert!(flags.contains(&(b_addr, 0)), "{flags:?}");
    assert_eq!(
        flags.iter().filter(|(_, v)| *v == 1).count(),
        2,
        "{flags:?}"
    );
    drop((a, c));
}

fn health_checks_take_a_failing_server_out_before_a_request_meets_it(model: Model) {
    let a = backend(model, "a", true);
    // No health path: its checks get 404.
    let sick = backend(model, "sick", false);
    let f = front(
        model,
        &[&a, &sick],
        "[upstream.health]\npath = \"/healthz\"\ninterval = \"100ms\"\nfall = 2\nrise = 2\n",
    );
    let sick_addr = sick.addr.to_string();
    let end = Instant::now() + Duration::from_secs(10);
    while !up_flags(&f).contains(&(sick_addr.clone(), 0)) {
        assert!(
            Instant::now() < end,
            "never marked down: {:?}",
            up_flags(&f)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..20 {
        let r = f.get("/who.txt");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"a"[..]));
    }
    assert!(f.log().contains("health checks failed"), "{}", f.log());
    let json = f.get("/_weft/status.json");
    let v: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    let servers = &v["upstreams"][0]["servers"];
    assert_eq!(v["upstreams"][0]["name"], "app", "{v}");
    assert_eq!(servers[1]["up"], false, "{v}");
    assert_eq!(servers[0]["requests"], 20, "{v}");
    // Every answer's time is in the server's histogram; the sick one answered none.
    assert_eq!(servers[0]["response_ms"]["count"], 20, "{v}");
    assert!(
        servers[0]["response_ms"]["p99"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert_eq!(servers[1]["response_ms"]["count"], 0, "{v}");
    let m = String::from_utf8_lossy(&f.get("/_weft/metrics").body).to_string();
    let a_addr = a.addr.to_string();
    let count = format!(
        "weft_upstream_response_seconds_count{{upstream=\"app\",server=\"{a_addr}\"}} 20\n"
    );
    assert!(m.contains(&count), "{m}");
    let page = String::from_utf8_lossy(&f.get("/_weft/status").body).to_string();
    let row = format!("<tr><td>app</td><td>{sick_addr}</td><td>down</td>");
    assert!(page.contains(&row), "{page}");
}

/// A server that answers every request (keep-alive) with `answer`, on threads until the test
/// ends.
fn canned(answer: &'static [u8]) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if s.write_all(answer).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A server that answers every request 503.
fn always_503() -> std::net::SocketAddr {
    canned(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
}

/// `retry_on = [..., "http_503"]`: a server's 503 is dropped for the next server's answer
/// (and counts against it); without it, the 503 is the answer.
fn an_answer_retry_on_names_goes_to_the_next_server(model: Model) {
    let busy = always_503();
    let a = backend(model, "a", true);
    let group = |name: &str, retry: &str| {
        Builder::new(model, name)
            .config(&format!(
                "[[upstream]]\nname = \"app\"\nservers = [\"{busy}\", \"{}\"]\n\
                 max_fails = 0\nretry_on = {retry}\n\
                 [[proxy]]\nprefix = \"/who.txt\"\nupstream = \"upstream:app\"\n",
                a.addr
            ))
            .start()
    };
    let f = group("up-retry503", "[\"error\", \"timeout\", \"http_503\"]");
    for _ in 0..10 {
        let r = f.get("/who.txt");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"a"[..]),
            "{}",
            f.log()
        );
    }
    let plain = group("up-no503", "[\"error\", \"timeout\"]");
    let statuses: Vec<u16> = (0..10).map(|_| plain.get("/who.txt").status).collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 503).count(),
        5,
        "{statuses:?}"
    );
}

/// An upstream that answers each request with `103 Early Hints` (a `Link` field and a
/// `Connection` field that must not pass), then `200 ok`.
fn hinting_upstream() -> std::net::SocketAddr {
    canned(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\
          Connection: x-hint\r\nX-Hint: drop\r\n\r\n\
          HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    )
}

/// A `103 Early Hints` from the upstream goes on to an HTTP/1.1 client before the final
/// answer (less the hop-by-hop fields it names); an HTTP/1.0 client gets the final only.
fn early_hints_from_the_upstream_reach_an_http11_client(model: Model) {
    use std::io::{Read, Write};
    let up = hinting_upstream();
    let f = Builder::new(model, "up-hints")
        .config(&format!(
            "[[proxy]]\nprefix = \"/app/\"\nupstream = \"http://{up}\"\n"
        ))
        .start();
    let ask = |req: &[u8]| -> String {
        let mut s = std::net::TcpStream::connect(f.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).to_string()
    };
    let got = ask(b"GET /app/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(
        got.starts_with("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"),
        "{got:?}"
    );
    assert!(!got.contains("X-Hint"), "{got:?}");
    let last = got.rfind("HTTP/1.1 200 OK").expect("the final answer");
    assert!(got[last..].ends_with("\r\n\r\nok"), "{got:?}");
    let old = ask(b"GET /app/ HTTP/1.0\r\nHost: x\r\n\r\n");
    assert!(old.starts_with("HTTP/1.1 200 OK"), "{old:?}");
}

/// A plain HTTP server on `ip:port` answering every request with `name` (port 0: any).
fn named_backend(ip: &str, port: u16, name: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind((ip, port)).unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                loop {
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    got.drain(..end);
                    let r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{name}",
                        name.len()
                    );
                    if s.write_all(r.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `[[upstream]] servers = ["backend.test:PORT"]` with `resolve_every = "200ms"`, the front run
/// in a mount namespace of its own whose `/etc/hosts` the test rewrites: the name moves from
/// 127.0.0.2 to 127.0.0.3 and new requests follow it, without a reload, and the log says so.
/// Needs `unshare -m` (root, or a kernel that lets the user make mount namespaces); where it
/// is refused the test says so and checks nothing.
fn a_backend_that_moves_in_dns_is_followed_without_a_reload(model: Model) {
    let can = std::process::Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !can {
        eprintln!("skipped: `unshare -m` is not permitted here (needs a mount namespace)");
        return;
    }
    let port = named_backend("127.0.0.2", 0, "old");
    named_backend("127.0.0.3", port, "new");
    let b = Builder::new(model, "up-dns");
    let hosts = b.dir().join("hosts");
    std::fs::write(&hosts, "127.0.0.2 backend.test\n").unwrap();
    let wrapper = b.dir().join("in-namespace.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare -m sh -c 'mount --bind \"$0\" /etc/hosts && exec \"$@\"' {} \"$@\"\n",
            hosts.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let f = b
        .wrapped(&wrapper)
        .config(&format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"backend.test:{port}\"]\n\
             resolve_every = \"200ms\"\n\
             [[proxy]]\nprefix = \"/who\"\nupstream = \"upstream:app\"\nmax_idle = 0\n"
        ))
        .start();
    for _ in 0..3 {
        let r = f.get("/who");
        assert_eq!((r.status, &r.body[..]), (200, &b"old"[..]), "{}", f.log());
    }
    // The same file, rewritten in place: the bind mount shows the new contents.
    std::fs::write(&hosts, "127.0.0.3 backend.test\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut failed = 0;
    loop {
        let r = f.get("/who");
        match (r.status, &r.body[..]) {
            (200, b"new") => break,
            (200, b"old") => {}
            _ => failed += 1,
        }
        assert!(Instant::now() < deadline, "still not followed: {}", f.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(failed, 0, "{}", f.log());
    assert!(f.log().contains("127.0.0.3"), "{}", f.log());
}
