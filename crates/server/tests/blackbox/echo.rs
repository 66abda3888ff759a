//! The echo function: `GET` answers `echo`, `POST` answers its body byte for byte (with either
//! framing), including the request of the CGI paper; the mount point comes from the config.

use crate::common::{chunked, Builder, Model, Server};

per_model! {
    get_echo_answers_echo,
    post_echo_returns_the_body,
    cgi_paper_request_is_echoed,
    echo_path_comes_from_the_config,
    echo_reflects_no_client_content_type,
    echo_is_not_mounted_on_a_users_root_unless_configured,
    echo_refuses_other_methods_with_allow,
    echo_evaluates_preconditions,
}

fn get_echo_answers_echo(model: Model) {
    let srv = Server::start(model, "echo-get");
    let r = srv.get("/echo");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
    assert_eq!(r.header("Content-Length"), Some("4"));
    // The query is not part of the path.
    let r = srv.get("/echo?x=1");
    assert_eq!(r.body, b"echo");
}

fn post_echo_returns_the_body(model: Model) {
    let srv = Server::start(model, "echo-post");
    let mut c = srv.connect();
    // Every byte value, with Content-Length.
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let mut raw = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-test\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    c.send(&raw);
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    // Never the client's type: a posted text/html page must not come back as one.
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));

    // Chunked, in pieces of several sizes, with an extension and a trailer.
    for piece in [1, 7, 1000, 5000] {
        let mut raw =
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        raw.extend_from_slice(&chunked(&body, piece));
        c.send(&raw);
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200, "piece {piece}");
        assert_eq!(r.body, body, "piece {piece}");
    }
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n");
    assert_eq!(c.read_response().unwrap().body, b"hello");

    // Empty bodies.
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0));
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0));

    // A large body, written while the server already answers.
    let big: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut raw = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        big.len()
    )
    .into_bytes();
    raw.extend_from_slice(&big);
    let mut c2 = srv.connect();
    let mut writer = c2.stream.try_clone().unwrap();
    let t = std::thread::spawn(move || std::io::Write::write_all(&mut writer, &raw));
    let r = c2.read_response().unwrap();
    t.join().unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == big, "large body differs");
}

/// The 542-byte urlencoded body of the CGI paper's Echo2 request (its content is not given;
/// this is a form of the same size and encoding).
fn paper_body() -> Vec<u8> {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 500 {
        s.push_str(&format!("field{i}=value+number+{i}%2C+url%2Dencoded&"));
        i += 1;
    }
    s.push_str("pad=");
    while s.len() < 542 {
        s.push('x');
    }
    s.truncate(542);
    assert_eq!(s.len(), 542);
    s.into_bytes()
}

fn cgi_paper_request_is_echoed(model: Model) {
    let srv = Server::start(model, "echo-paper");
    let body = paper_body();
    // Edwards, "Performance of HTTP and CGI" §1.2.3, sent to the echo function.
    let mut raw = b"POST /echo HTTP/1.0\r\n\
Accept: application/x-corba\r\n\
Accept: */*; q=0.300\r\n\
Accept: application/octet-stream; q=0.100\r\n\
Accept: text/plain\r\n\
Accept: text/html\r\n\
From: nje@socrates.ansa.co.uk\r\n\
User-Agent: Echo client/0 libwww/2.17\r\n\
Content-length: 542\r\n\
Content-type: application/x-www-form-urlencoded\r\n\
\r\n"
        .to_vec();
    // libwww wrote the head and the body with two calls (§1.2.7); so does this client.
    let mut c = srv.connect();
    c.send(&raw);
    c.send(&body);
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body.len(), 542);
    assert_eq!(r.body, body);
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert!(r.closes(), "HTTP/1.0 without keep-alive must close: {r:?}");
    assert!(c.closed_within(std::time::Duration::from_secs(5)));
    // In one write as well.
    raw.extend_from_slice(&body);
    let r = srv.send(&raw);
    assert_eq!(r.body, body);
}

fn echo_path_comes_from_the_config(model: Model) {
    let off = Builder::new(model, "echo-off")
        .config("[echo]\npath = \"\"\n")
        .start();
    assert_eq!(off.get("/echo").status, 404);
    off.assert_alive();

    let moved = Builder::new(model, "echo-moved")
        .config("[echo]\npath = \"/e2\"\n")
        .start();
    let r = moved.get("/e2");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
    let r = moved
        .send(b"POST /e2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
    assert_eq!(moved.get("/echo").status, 404);
}

fn echo_reflects_no_client_content_type(model: Model) {
    let srv = Server::start(model, "echo-xss");
    let page = b"<script>alert(document.cookie)</script>";
    let mut raw = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
        page.len()
    )
    .into_bytes();
    raw.extend_from_slice(page);
    let r = srv.send(&raw);
    assert_eq!((r.status, r.body.as_slice()), (200, &page[..]));
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
}

fn echo_is_not_mounted_on_a_users_root_unless_configured(model: Model) {
    let srv = Builder::new(model, "echo-default").no_echo().start();
    assert_eq!(srv.get("/echo").status, 404);
    let r = srv.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    assert_ne!(r.status, 200, "{r:?}");
}

fn echo_refuses_other_methods_with_allow(model: Model) {
    let srv = Server::start(model, "echo-methods");
    let r = srv.send(b"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(r.status, 405, "{r:?}");
    assert!(
        r.header("Allow").is_some_and(|a| a.contains("POST")),
        "{r:?}"
    );
    srv.assert_alive();
}

/// RFC 9110 §13.2.2 where weft answers itself without validators: only `*` matches, and the
/// preconditions are decided before a POST's body is read (the connection stays in sync).
fn echo_evaluates_preconditions(model: Model) {
    let srv = Server::start(model, "echo-preconditions");
    let mut c = srv.connect();
    for (method, fields, want) in [
        ("GET", "If-Match: *", 200),
        ("GET", "If-Match: \"x\"", 412),
        ("HEAD", "If-Match: \"x\"", 412),
        ("GET", "If-None-Match: *", 304),
        ("GET", "If-None-Match: \"x\"", 200),
        // No modification date: the date conditions are ignored.
        (
            "GET",
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT",
            200,
        ),
        (
            "GET",
            "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT",
            200,
        ),
        ("POST", "If-Match: \"x\"", 412),
        ("POST", "If-None-Match: *", 412),
        ("POST", "If-Match: *", 200),
        // 405 is not 2xx: preconditions are ignored (§13.2.1).
        ("PUT", "If-Match: \"x\"", 405),
    ] {
        c.send(
            format!(
                "{method} /echo HTTP/1.1\r\nHost: x\r\n{fields}\r\nContent-Length: 5\r\n\r\nhello"
            )
            .as_bytes(),
        );
        let r = c.read_response_for(method == "HEAD").unwrap();
        assert_eq!(r.status, want, "{method} {fields}: {r:?}");
        if method == "POST" && want == 200 {
            assert_eq!(r.body, b"hello");
        }
    }
    // The connection is still in step: the unread bodies were discarded.
    c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().unwrap().body, b"echo");
}
