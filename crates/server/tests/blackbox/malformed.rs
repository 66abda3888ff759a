//! Malformed and over-limit requests: each gets its own status (and, where the connection can
//! no longer be trusted, `Connection: close`), and the server goes on serving fresh clients.

use std::time::{Duration, Instant};

use crate::common::{chunked, Builder, Model, Server};

per_model! {
    framing_errors_are_refused,
    syntax_errors_are_refused,
    size_limits_give_414_431_413,
    small_max_body_gives_413_for_length_and_chunked_bodies,
    malformed_chunked_bodies_give_400,
    unread_malformed_chunked_body_gives_400_not_the_handlers_status,
    a_chunk_size_over_max_body_is_refused_at_its_size_line,
    unread_chunked_body_over_max_body_gives_413,
    unknown_method_gives_501_and_post_to_a_file_gives_405_with_allow,
}

/// A request that must be refused with `status`. `closes`: the response must also close the
/// connection (the request's framing could not be trusted).
struct Case {
    name: &'static str,
    raw: Vec<u8>,
    status: u16,
    closes: bool,
}

fn case(name: &'static str, raw: impl Into<Vec<u8>>, status: u16) -> Case {
    Case {
        name,
        raw: raw.into(),
        status,
        closes: true,
    }
}

/// Sends each case on a fresh connection, checks its status, then checks that a new client is
/// still served.
fn run_cases(srv: &Server, cases: &[Case]) {
    for c in cases {
        let r = srv.send(&c.raw);
        assert_eq!(r.status, c.status, "{}: {r:?}", c.name);
        if c.closes {
            assert!(
                r.closes(),
                "{}: expected Connection: close, got {r:?}",
                c.name
            );
        }
        srv.assert_alive();
    }
}

/// `GET / HTTP/1.1` with `Host: x` and the extra header lines `extra` (each ending in CRLF).
fn get_with(extra: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: x\r\n{extra}\r\n").into_bytes()
}

fn post_echo_with(extra: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!("POST /echo HTTP/1.1\r\nHost: x\r\n{extra}\r\n").into_bytes();
    v.extend_from_slice(body);
    v
}

fn framing_errors_are_refused(model: Model) {
    let srv = Server::start(model, "framing");
    run_cases(
        &srv,
        &[
            case(
                "Content-Length with Transfer-Encoding",
                post_echo_with(
                    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                    b"0\r\n\r\n",
                ),
                400,
            ),
            case(
                "Transfer-Encoding with Content-Length",
                post_echo_with(
                    "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                    b"0\r\n\r\n",
                ),
                400,
            ),
            case(
                "differing duplicate Content-Length",
                post_echo_with("Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!"),
                400,
            ),
            case(
                "differing Content-Length list",
                post_echo_with("Content-Length: 5, 6\r\n", b"hello!"),
                400,
            ),
            case(
                "non-numeric Content-Length",
                post_echo_with("Content-Length: abc\r\n", b"hello"),
                400,
            ),
            case(
                "hex Content-Length",
                post_echo_with("Content-Length: 0x5\r\n", b"hello"),
                400,
            ),
            case(
                "negative Content-Length",
                post_echo_with("Content-Length: -5\r\n", b"hello"),
                400,
            ),
            case(
                "signed Content-Length",
                post_echo_with("Content-Length: +5\r\n", b"hello"),
                400,
            ),
            case(
                "empty Content-Length",
                post_echo_with("Content-Length:\r\n", b""),
                400,
            ),
            case(
                "overflowing Content-Length",
                post_echo_with("Content-Length: 100000000000000000000000\r\n", b""),
                400,
            ),
            case(
                "final transfer coding not chunked",
                post_echo_with("Transfer-Encoding: chunked, gzip\r\n", b"0\r\n\r\n"),
                400,
            ),
            case(
                "only a non-chunked transfer coding",
                post_echo_with("Transfer-Encoding: gzip\r\n", b"hello"),
                400,
            ),
            case(
                "chunked twice",
                post_echo_with("Transfer-Encoding: chunked, chunked\r\n", b"0\r\n\r\n"),
                400,
            ),
            case(
                "Transfer-Encoding in HTTP/1.0",
                b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "gzip, chunked is not implemented",
                post_echo_with("Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"),
                501,
            ),
        ],
    );
}

fn syntax_errors_are_refused(model: Model) {
    let srv = Server::start(model, "syntax");
    run_cases(
        &srv,
        &[
            case("obs-fold", get_with("X-A: one\r\n two\r\n"), 400),
            case("obs-fold with tab", get_with("X-A: one\r\n\ttwo\r\n"), 400),
            case("space before colon", get_with("X-A : one\r\n"), 400),
            case("tab before colon", get_with("X-A\t: one\r\n"), 400),
            case(
                "whitespace before first field",
                b"GET / HTTP/1.1\r\n Host: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "method with (",
                b"GE(T / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "method with @",
                b"GE@T / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "method with /",
                b"G/T / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case("field name with @", get_with("X@Y: z\r\n"), 400),
            case("field name with (", get_with("X(Y): z\r\n"), 400),
            case("field name with a space", get_with("X Y: z\r\n"), 400),
            case(
                "field name with a non-ASCII byte",
                get_with("X\u{e9}: z\r\n"),
                400,
            ),
            case("empty field name", get_with(": z\r\n"), 400),
            case("field line without colon", get_with("X-Nothing\r\n"), 400),
            case("NUL in field value", get_with("X-A: a\0b\r\n"), 400),
            case("SOH in field value", get_with("X-A: a\x01b\r\n"), 400),
            case("ESC in field value", get_with("X-A: a\x1bb\r\n"), 400),
            case("DEL in field value", get_with("X-A: a\x7fb\r\n"), 400),
            case("CR inside field value", get_with("X-A: a\rb\r\n"), 400),
            case(
                "HTTP/1.1 without Host",
                b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n".to_vec(),
                400,
            ),
            case("duplicate Host", get_with("Host: y\r\n"), 400),
            case("identical duplicate Host", get_with("Host: x\r\n"), 400),
            case(
                "invalid Host",
                b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "HTTP/2.0",
                b"GET / HTTP/2.0\r\nHost: x\r\n\r\n".to_vec(),
                505,
            ),
            case(
                "HTTP/3.0",
                b"GET / HTTP/3.0\r\nHost: x\r\n\r\n".to_vec(),
                505,
            ),
            case(
                "malformed version",
                b"GET / HTTP/1.10\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "lowercase version",
                b"GET / http/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "bare LF everywhere",
                b"GET / HTTP/1.1\nHost: x\n\n".to_vec(),
                400,
            ),
            case(
                "bare LF after a field",
                b"GET / HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "bare LF ending the head",
                b"GET / HTTP/1.1\r\nHost: x\r\n\n".to_vec(),
                400,
            ),
            case(
                "bare CR ending the request line",
                b"GET / HTTP/1.1\rHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "two spaces in the request line",
                b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "space in the target",
                b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "fragment in the target",
                b"GET /#frag HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "asterisk-form with GET",
                b"GET * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                400,
            ),
            case(
                "TLS client hello",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
                400,
            ),
        ],
    );
}

fn size_limits_give_414_431_413(model: Model) {
    let srv = Server::start(model, "limits");
    let long_target = format!("/{}", "a".repeat(9000));
    let big_fields: String = (0..40)
        .map(|i| format!("X-Big-{i}: {}\r\n", "b".repeat(1000)))
        .collect();
    let many_fields: String = (0..101).map(|i| format!("X-F{i}: v\r\n")).collect();
    let one_huge_field = format!("X-Huge: {}\r\n", "h".repeat(33 * 1024));
    run_cases(
        &srv,
        &[
            case(
                "request line over 8 KiB",
                format!("GET {long_target} HTTP/1.1\r\nHost: x\r\n\r\n"),
                414,
            ),
            case(
                "request line over 8 KiB, not yet terminated",
                format!("GET {long_target}"),
                414,
            ),
            case("header section over 32 KiB", get_with(&big_fields), 431),
            case("one field over 32 KiB", get_with(&one_huge_field), 431),
            case("101 header fields", get_with(&many_fields), 431),
            case(
                "Content-Length over 1 MiB",
                post_echo_with("Content-Length: 1048577\r\n", b""),
                413,
            ),
        ],
    );
    // Just inside the limits is fine.
    let target = format!("/{}", "a".repeat(8000));
    let r = srv
        .send(format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
    assert_eq!(r.status, 404, "{r:?}");
    let fields: String = (0..98).map(|i| format!("X-F{i}: v\r\n")).collect();
    let r = srv.send(&get_with(&format!("{fields}Connection: close\r\n")));
    assert_eq!(r.status, 200, "{r:?}");
    let body = vec![b'z'; 1024 * 1024];
    let mut raw = post_echo_with("Content-Length: 1048576\r\nConnection: close\r\n", b"");
    raw.extend_from_slice(&body);
    let r = srv.send(&raw);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
}

fn small_max_body_gives_413_for_length_and_chunked_bodies(model: Model) {
    let srv = Builder::new(model, "maxbody")
        .config("[limits]\nmax_body = 100\n")
        .start();
    run_cases(
        &srv,
        &[
            case(
                "Content-Length 101",
                post_echo_with("Content-Length: 101\r\n", &[b'x'; 101]),
                413,
            ),
            case(
                "chunked body of 200 bytes",
                post_echo_with("Transfer-Encoding: chunked\r\n", &chunked(&[b'y'; 200], 50)),
                413,
            ),
            case(
                "chunked body of one 101-byte chunk",
                post_echo_with(
                    "Transfer-Encoding: chunked\r\n",
                    &chunked(&[b'y'; 101], 101),
                ),
                413,
            ),
        ],
    );
    let r = srv.send(&post_echo_with(
        "Content-Length: 100\r\nConnection: close\r\n",
        &[b'x'; 100],
    ));
    assert_eq!((r.status, r.body.len()), (200, 100));
    let r = srv.send(&post_echo_with(
        "Transfer-Encoding: chunked\r\nConnection: close\r\n",
        &chunked(&[b'y'; 100], 30),
    ));
    assert_eq!((r.status, r.body.len()), (200, 100));
}

fn malformed_chunked_bodies_give_400(model: Model) {
    let srv = Server::start(model, "badchunk");
    let te = "Transfer-Encoding: chunked\r\n";
    run_cases(
        &srv,
        &[
            case(
                "non-hex size",
                post_echo_with(te, b"zz\r\nhello\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "data longer than size",
                post_echo_with(te, b"5\r\nhelloX\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "bare LF after size",
                post_echo_with(te, b"5\nhello\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "space in size",
                post_echo_with(te, b"5 5\r\nhello\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "negative size",
                post_echo_with(te, b"-5\r\nhello\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "size overflow",
                post_echo_with(te, b"ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
                400,
            ),
            case(
                "missing last chunk",
                post_echo_with(te, b"3\r\nfoo\r\n\r\n"),
                400,
            ),
        ],
    );
}

/// Regression: a handler that answers without reading the body (a GET of a static file, a
/// POST refused with 405) used to have its 200/405 sent even though the body it left unread
/// was malformed chunked data; the request is invalid and must get 400 (found by llhttp's
/// "Chunk data not terminated by CRLF" and "Chunk header not terminated by CRLF").
fn unread_malformed_chunked_body_gives_400_not_the_handlers_status(model: Model) {
    let srv = Server::start(model, "unread-badchunk");
    let te = "Transfer-Encoding: chunked\r\n";
    let get = |body: &[u8]| {
        let mut v = format!("GET / HTTP/1.1\r\nHost: x\r\n{te}\r\n").into_bytes();
        v.extend_from_slice(body);
        v
    };
    let post_file = |body: &[u8]| {
        let mut v = format!("POST /index.html HTTP/1.1\r\nHost: x\r\n{te}\r\n").into_bytes();
        v.extend_from_slice(body);
        v
    };
    run_cases(
        &srv,
        &[
            case(
                "GET, chunk data without CRLF",
                get(b"5\r\nABCDE0\r\n\r\n"),
                400,
            ),
            case(
                "GET, chunk size with bare CR",
                get(b"5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\n"),
                400,
            ),
            case("GET, non-hex chunk size", get(b"zz\r\n"), 400),
            case(
                "POST to a file, bad chunk",
                post_file(b"2 x\r\naa\r\n0\r\n\r\n"),
                400,
            ),
        ],
    );
    // A well-formed unread body still gets the handler's answer, on a kept connection.
    let mut c = srv.connect();
    c.send(&get(b"3\r\nabc\r\n0\r\n\r\n"));
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert!(!r.closes());
    c.send(&post_file(b"3\r\nabc\r\n0\r\n\r\n"));
    assert_eq!(c.read_response().unwrap().status, 405);
}

/// A chunk whose size line alone takes the body over `limits.max_body` is refused at that line
/// (as nginx does), not once the client has sent that much: a client announcing a huge chunk
/// and trickling it gets its 413 at once. Also when the chunks before it were within the limit.
fn a_chunk_size_over_max_body_is_refused_at_its_size_line(model: Model) {
    let srv = Builder::new(model, "chunk-size-over")
        .config("[limits]\nmax_body = 100\n")
        .start();
    for (what, body) in [
        ("one huge chunk", &b"1000000\r\nabc"[..]),
        ("the limit's worth, then more", &b"50\r\n"[..]),
    ] {
        let mut raw = post_echo_with("Transfer-Encoding: chunked\r\n", body);
        if what.starts_with("the limit") {
            // 0x50 = 80 bytes within the limit, then a chunk of 0x30 = 48 announced.
            raw.extend_from_slice(&[b'z'; 0x50]);
            raw.extend_from_slice(b"\r\n30\r\nab");
        }
        let mut c = srv.connect();
        c.send(&raw);
        let started = Instant::now();
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("{what}: no answer: {e:?}"));
        assert_eq!(r.status, 413, "{what}: {r:?}");
        assert!(r.closes(), "{what}: {r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{what}: answered late"
        );
    }
    // A body exactly at the limit, in chunks, is still taken.
    let mut raw = post_echo_with("Transfer-Encoding: chunked\r\nConnection: close\r\n", b"");
    raw.extend_from_slice(&chunked(&[b'y'; 100], 64));
    let r = srv.send(&raw);
    assert_eq!((r.status, r.body.len()), (200, 100), "{r:?}");
    srv.assert_alive();
}

/// The same for a body over `limits.max_body` that the handler did not read.
fn unread_chunked_body_over_max_body_gives_413(model: Model) {
    let srv = Builder::new(model, "unread-toolarge")
        .config("[limits]\nmax_body = 100\n")
        .start();
    let mut raw = b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    raw.extend_from_slice(&chunked(&[b'q'; 300], 64));
    let r = srv.send(&raw);
    assert_eq!(r.status, 413, "{r:?}");
    assert!(r.closes());
    srv.assert_alive();
}

fn unknown_method_gives_501_and_post_to_a_file_gives_405_with_allow(model: Model) {
    let srv = Server::start(model, "methods");
    let r = srv.send(b"FOO / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 501, "{r:?}");
    srv.assert_alive();
    let r = srv.send(b"POST /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(r.status, 405, "{r:?}");
    let allow = r.header("Allow").expect("405 without Allow");
    let methods: Vec<&str> = allow.split(',').map(str::trim).collect();
    assert!(
        methods.contains(&"GET") && methods.contains(&"HEAD"),
        "{allow}"
    );
    assert!(!methods.contains(&"POST"), "{allow}");
    srv.assert_alive();
    for m in ["PUT", "DELETE", "PATCH"] {
        let r = srv.send(format!("{m} /index.html HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r.status, 405, "{m}: {r:?}");
        assert!(r.header("Allow").is_some(), "{m}: {r:?}");
    }
    srv.assert_alive();
}
