//! Exact-byte tests of the request-head parser against the rules of RFC 9112 (message syntax
//! and framing) and RFC 9110 (fields, Host, Expect). Each test names the rule it checks; the
//! expected status is the one `Error::status` maps to.

use weft_http::{BodyFraming, ChunkedDecoder, Error, Expect, Limits, Method, Parser};
use weft_http::{RequestHead, Span, TargetForm, Version};

/// Parses `req`, which must hold one complete head (possibly followed by more bytes).
fn parse(req: &[u8]) -> Result<RequestHead, Error> {
    parse_with(Limits::default(), req)
}

fn parse_with(limits: Limits, req: &[u8]) -> Result<RequestHead, Error> {
    let mut p = Parser::new(limits);
    match p.parse(req)? {
        Some(n) => {
            assert_eq!(n, p.head().len());
            Ok(p.take_head())
        }
        None => panic!("incomplete: {:?}", String::from_utf8_lossy(req)),
    }
}

fn ok(req: &[u8]) -> RequestHead {
    match parse(req) {
        Ok(h) => h,
        Err(e) => panic!("{:?} refused: {e}", String::from_utf8_lossy(req)),
    }
}

/// The status a refused request gets.
fn status(req: &[u8]) -> u16 {
    match parse(req) {
        Ok(_) => panic!("{:?} accepted", String::from_utf8_lossy(req)),
        Err(e) => e.status(),
    }
}

fn status_with(limits: Limits, req: &[u8]) -> u16 {
    match parse_with(limits, req) {
        Ok(_) => panic!("{:?} accepted", String::from_utf8_lossy(req)),
        Err(e) => e.status(),
    }
}

/// `GET / HTTP/1.1`, `Host: x`, then `fields` (each a full line with CRLF), then the empty line.
fn get_with(fields: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n").into_bytes()
}

fn post_with(fields: &str) -> Vec<u8> {
    format!("POST /p HTTP/1.1\r\nHost: x\r\n{fields}\r\n").into_bytes()
}

// ---- The happy path, byte for byte -------------------------------------------------------

#[test]
fn spans_point_at_the_exact_bytes() {
    let req = b"POST /cgi-bin/Echo2?a=b HTTP/1.1\r\nHost: example.com:8080\r\nX-Pad:  \t spaced value \t \r\nEmpty:\r\nContent-Length: 5\r\n\r\nhello";
    let head = ok(req);
    assert_eq!(head.len(), req.len() - 5);
    assert_eq!(head.method(), Method::Post);
    assert_eq!(head.method_str(req), "POST");
    assert_eq!(head.target(req), "/cgi-bin/Echo2?a=b");
    assert_eq!(head.path(req), "/cgi-bin/Echo2?a=b");
    assert_eq!(head.target_form(), TargetForm::Origin);
    assert_eq!(head.version(), Version::Http11);
    assert_eq!(head.framing(), BodyFraming::Length(5));
    assert_eq!(head.expect(), Expect::None);
    assert!(head.keep_alive());
    let fields: Vec<(&[u8], &[u8])> = head
        .headers()
        .iter()
        .map(|h| (h.name.get(req), h.value.get(req)))
        .collect();
    assert_eq!(
        fields,
        [
            (&b"Host"[..], &b"example.com:8080"[..]),
            (b"X-Pad", b"spaced value"),
            (b"Empty", b""),
            (b"Content-Length", b"5"),
        ]
    );
    // Offsets, not just contents.
    let host = head.headers()[0];
    assert_eq!(host.name, Span { start: 34, end: 38 });
    assert_eq!(host.value, Span { start: 40, end: 56 });
    assert_eq!(head.host_span(), Some(host.value));
    assert_eq!(head.header(req, "content-LENGTH"), Some(&b"5"[..]));
    assert_eq!(head.header(req, "missing"), None);
}

#[test]
fn methods_are_tokens_and_known_ones_are_named() {
    for (m, want) in [
        ("GET", Method::Get),
        ("HEAD", Method::Head),
        ("POST", Method::Post),
        ("PUT", Method::Put),
        ("DELETE", Method::Delete),
        ("OPTIONS", Method::Options),
        ("TRACE", Method::Trace),
        ("PATCH", Method::Patch),
        // Methods are case-sensitive (RFC 9110 §9.1): `get` is an unknown token, for the
        // server to answer 501.
        ("get", Method::Other),
        ("ECHO", Method::Other),
        ("M-SEARCH", Method::Other),
        ("X!#$%&'*+-.^_`|~9", Method::Other),
    ] {
        let req = format!("{m} /x HTTP/1.1\r\nHost: x\r\n\r\n");
        let head = ok(req.as_bytes());
        assert_eq!(head.method(), want, "{m}");
        assert_eq!(head.method_str(req.as_bytes()), m);
    }
}

#[test]
fn invalid_method_characters_are_400() {
    for req in [
        &b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"G/T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"G\x7fT / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"G\xc3\xa9T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b" GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        assert_eq!(status(req), 400, "{:?}", String::from_utf8_lossy(req));
    }
}

#[test]
fn request_target_rules() {
    // A fragment is never sent (RFC 9112 §3.2); controls, spaces and non-ASCII are not URI
    // characters.
    for req in [
        &b"GET /a#frag HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /\xce\xb4 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET  HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1 x\r\nHost: x\r\n\r\n",
        // HTTP/0.9 simple requests (no version) are not supported.
        b"GET /\r\n\r\n",
    ] {
        assert_eq!(status(req), 400, "{:?}", String::from_utf8_lossy(req));
    }
    let req = b"GET /with_\"quotes\"?q=\\x|y HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(ok(req).target(req), "/with_\"quotes\"?q=\\x|y");
}

#[test]
fn absolute_form_targets_expose_their_origin_form_path() {
    let req = b"GET http://example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.target_form(), TargetForm::Absolute);
    assert_eq!(head.target(req), "http://example.com:8080/a/b?c=d");
    assert_eq!(head.path(req), "/a/b?c=d");
    assert_eq!(head.path_span().get(req), b"/a/b?c=d");

    // An empty path is "/" (RFC 9112 §3.2.1); the scheme is case-insensitive.
    let req = b"GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.target_form(), TargetForm::Absolute);
    assert_eq!(head.path(req), "/");
    assert!(head.path_span().is_empty());

    // The Host field of an absolute-form request need not match its authority (RFC 9112
    // §3.2.2: the target's authority wins), but it is still required in HTTP/1.1.
    let req = b"GET http://[::1]:81/x HTTP/1.0\r\nHost: other\r\n\r\n";
    assert_eq!(ok(req).path(req), "/x");
    assert_eq!(
        ok(req).effective_host_span().map(|s| s.get(req)),
        Some(&b"[::1]:81"[..])
    );
    assert_eq!(status(b"GET http://a/ HTTP/1.1\r\n\r\n"), 400);

    for req in [
        // userinfo (RFC 9110 §4.2.4: treat as an error).
        &b"GET http://u:p@example.com/ HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET http:///nohost HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET ftp://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        // A numeric host that is not a plain dotted quad.
        b"GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET http://localhost:80:80/ HTTP/1.1\r\nHost: x\r\n\r\n",
        // Deliberate: a query with an empty path has no origin-form span ("/?q" is not in
        // the buffer); see tests/vectors.rs.
        b"GET http://example.com?q=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        assert_eq!(status(req), 400, "{:?}", String::from_utf8_lossy(req));
    }
}

#[test]
fn asterisk_form_only_with_options() {
    let req = b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.target_form(), TargetForm::Asterisk);
    assert_eq!(head.target(req), "*");
    assert_eq!(head.path(req), "");
    assert_eq!(status(b"GET * HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_eq!(status(b"M-SEARCH * HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
}

#[test]
fn authority_form_only_with_connect() {
    let req = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.method(), Method::Connect);
    assert_eq!(head.target_form(), TargetForm::Authority);
    assert_eq!(head.target(req), "example.com:443");
    assert_eq!(head.path(req), "");
    for req in [
        &b"CONNECT / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"CONNECT http://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"CONNECT user@example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        assert_eq!(status(req), 400, "{:?}", String::from_utf8_lossy(req));
    }
}

// ---- Version -------------------------------------------------------------------------------

#[test]
fn versions() {
    assert_eq!(ok(b"GET / HTTP/1.0\r\n\r\n").version(), Version::Http10);
    assert_eq!(
        ok(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").version(),
        Version::Http11
    );
    // A higher minor version is answered as the highest we speak (RFC 9110 §6.2).
    assert_eq!(
        ok(b"GET / HTTP/1.2\r\nHost: x\r\n\r\n").version(),
        Version::Http11
    );
    // Another major version, spelled correctly: 505.
    for v in ["HTTP/2.0", "HTTP/0.9", "HTTP/3.0", "HTTP/9.9"] {
        let req = format!("GET / {v}\r\nHost: x\r\n\r\n");
        assert_eq!(status(req.as_bytes()), 505, "{v}");
    }
    // Not HTTP-version syntax at all: 400.
    for v in [
        "HTTP/1.11",
        "HTTP/10.0",
        "HTTP/1",
        "HTTP/",
        "http/1.1",
        "HTTP/1.x",
        "HTT/1.1",
        "ICE/1.0",
        "RTSP/1.0",
    ] {
        let req = format!("GET / {v}\r\nHost: x\r\n\r\n");
        assert_eq!(status(req.as_bytes()), 400, "{v}");
    }
}

// ---- Line endings and whitespace ----------------------------------------------------------

#[test]
fn bare_lf_is_400() {
    for req in [
        &b"GET / HTTP/1.1\nHost: x\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\n",
        b"GET / HTTP/1.0\n\n",
        b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nA: b\nC: d\r\n\r\n",
    ] {
        assert_eq!(status(req), 400, "{:?}", String::from_utf8_lossy(req));
    }
}

#[test]
fn bare_cr_is_400_without_waiting_for_more() {
    let mut p = Parser::new(Limits::default());
    assert!(p.parse(b"GET / HTTP/1.0\r\r").is_err());
    for req in [
        &b"GET / HTTP/1.0\r\r"[..],
        b"GET\r/ HTTP/1.0\r\n\r\n",
        b"\r\rGET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nFoo: 1\rBar: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nFoo: bar\r\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\rX",
        b"GET / HTTP/1.1\r\nHost: x\r\nF\ro: bar\r\n\r\n",
    ] {
        let mut p = Parser::new(Limits::default());
        assert_eq!(
            p.parse(req).map_err(|e| e.status()),
            Err(400),
            "{:?}",
            String::from_utf8_lossy(req)
        );
    }
}

#[test]
fn obs_fold_is_400() {
    // RFC 9112 §5.2: a server MUST reject obs-fold (or replace it); weft rejects.
    assert_eq!(status(&get_with("A: b\r\n  c\r\n")), 400);
    assert_eq!(status(&get_with("A: b\r\n\tc\r\n")), 400);
    // Whitespace before the first field is the same thing in disguise (RFC 9112 §2.2).
    assert_eq!(status(b"GET / HTTP/1.1\r\n Host: x\r\n\r\n"), 400);
}

#[test]
fn whitespace_before_colon_is_400() {
    // RFC 9112 §5.1: MUST be rejected with 400.
    assert_eq!(status(&get_with("Foo : bar\r\n")), 400);
    assert_eq!(status(&get_with("Foo\t: bar\r\n")), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);
    assert_eq!(status(&post_with("Content-Length : 4\r\n")), 400);
}

#[test]
fn invalid_field_names_are_400() {
    for f in [
        "Fo@: x\r\n",
        "Fo o: x\r\n",
        ": x\r\n",
        "Foo\r\n",
        "Foo bar:baz\r\n",
        "F(o): x\r\n",
        "F\x01o: x\r\n",
        "F\x7fo: x\r\n",
        "Fö: x\r\n",
        "\"F\": x\r\n",
    ] {
        assert_eq!(status(&get_with(f)), 400, "{f:?}");
    }
    // Every tchar is allowed.
    let req = get_with("!#$%&'*+-.^_`|~09azAZ: x\r\n");
    assert_eq!(
        ok(&req).headers()[1].name.get(&req),
        b"!#$%&'*+-.^_`|~09azAZ"
    );
}

#[test]
fn controls_in_field_values_are_400() {
    for v in [
        &b"b\x00ar"[..],
        b"b\x01ar",
        b"\x0c",
        b"b\x1bar",
        b"b\x7far",
        b"b\rar",
        b"b\nar",
        b"bar\x00",
    ] {
        let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nFoo: ".to_vec();
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&req), 400, "{:?}", String::from_utf8_lossy(v));
    }
    // HTAB and obs-text are field content (RFC 9110 §5.5); a value may be long enough to take
    // the eight-bytes-at-a-time path, with a control anywhere in it.
    let req = b"GET / HTTP/1.1\r\nHost: x\r\nFoo: a\tb \xff\xe9 D\xc3\xbcsseldorf\r\n\r\n";
    assert_eq!(
        ok(req).header(req, "foo"),
        Some(&b"a\tb \xff\xe9 D\xc3\xbcsseldorf"[..])
    );
    for at in 0..40 {
        let mut value = vec![b'v'; 40];
        value[at] = 0x01;
        let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nFoo: ".to_vec();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&req), 400, "control at {at}");
        if at == 0 || at == 39 {
            // A tab there is OWS, not content.
            continue;
        }
        value[at] = b'\t';
        let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nFoo: ".to_vec();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            ok(&req).header(&req, "foo").unwrap().len(),
            40,
            "tab at {at}"
        );
    }
}

#[test]
fn leading_empty_lines_are_tolerated_within_a_bound() {
    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request line.
    let req = b"\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.target(req), "/x");
    assert_eq!(head.len(), req.len());
    let mut many = b"\r\n".repeat(4);
    many.extend_from_slice(b"GET / HTTP/1.0\r\n\r\n");
    assert!(parse(&many).is_ok());
    let mut too_many = b"\r\n".repeat(5);
    too_many.extend_from_slice(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(status(&too_many), 400);
}

// ---- Host ------------------------------------------------------------------------------------

#[test]
fn host_rules() {
    // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, or with more than one.
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    // HTTP/1.0 needs none; an empty value is allowed.
    assert_eq!(ok(b"GET / HTTP/1.0\r\n\r\n").host_span(), None);
    let req = b"GET / HTTP/1.1\r\nHost:\r\n\r\n";
    assert_eq!(ok(req).host_span().map(|s| s.get(req)), Some(&b""[..]));
    for bad in [
        "localhost:80 x",
        "a b",
        "foo@bar",
        "x:99999",
        "127.01.0.1",
        "abc\\foo",
        "[::1",
    ] {
        let req = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
        assert_eq!(status(req.as_bytes()), 400, "{bad}");
    }
    // An invalid Host is refused as soon as its line is complete, before the head ends.
    let mut p = Parser::new(Limits::default());
    assert!(p
        .parse(b"GET / HTTP/1.0\r\nHost: localhost:80 x\r\n\r")
        .is_err());
}

// ---- Message body length (RFC 9112 §6) ----------------------------------------------------

#[test]
fn content_length_framing() {
    assert_eq!(
        ok(&post_with("Content-Length: 42\r\n")).framing(),
        BodyFraming::Length(42)
    );
    assert_eq!(
        ok(&post_with("Content-Length: 0\r\n")).framing(),
        BodyFraming::None
    );
    assert_eq!(ok(&post_with("")).framing(), BodyFraming::None);
    assert_eq!(
        ok(&post_with("content-length: 007\r\n")).framing(),
        BodyFraming::Length(7)
    );
    assert_eq!(
        ok(&post_with("Content-Length: \t 42 \t\r\n")).framing(),
        BodyFraming::Length(42)
    );
    assert_eq!(
        ok(&post_with("Content-Length: 9999999999999999999\r\n")).framing(),
        BodyFraming::Length(9_999_999_999_999_999_999)
    );
}

#[test]
fn identical_content_lengths_are_one_length() {
    // RFC 9110 §8.6: a list of identical values may be taken as that one value.
    for f in [
        "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5, 5\r\n",
        "Content-Length: 5,5,5\r\n",
        "Content-Length: 5, 005\r\n",
    ] {
        assert_eq!(ok(&post_with(f)).framing(), BodyFraming::Length(5), "{f:?}");
    }
}

#[test]
fn differing_content_lengths_are_400() {
    for f in [
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 5, 6\r\n",
        "Content-Length: 1\r\nContent-Length: 2\r\n",
    ] {
        assert_eq!(status(&post_with(f)), 400, "{f:?}");
    }
}

#[test]
fn invalid_content_length_is_400() {
    for v in [
        "-1",
        "+5",
        "0x10",
        "abc",
        "4 2",
        "13 37",
        "",
        "5,",
        ",5",
        "5;",
        "1.0",
        "1e3",
        // Overflow (more than 19 digits).
        "100000000000000000000",
        "1000000000000000000000",
    ] {
        let f = format!("Content-Length: {v}\r\n");
        assert_eq!(status(&post_with(&f)), 400, "{v:?}");
    }
}

#[test]
fn chunked_framing() {
    assert_eq!(
        ok(&post_with("Transfer-Encoding: chunked\r\n")).framing(),
        BodyFraming::Chunked
    );
    assert_eq!(
        ok(&post_with("transfer-encoding: Chunked\r\n")).framing(),
        BodyFraming::Chunked
    );
    assert_eq!(
        ok(&post_with("Transfer-Encoding: chunked \t\r\n")).framing(),
        BodyFraming::Chunked
    );
}

#[test]
fn transfer_encoding_with_content_length_is_400() {
    // RFC 9112 §6.1: MAY reject; a request with both is a smuggling attempt until proven
    // otherwise. Order does not matter, and neither do the codings.
    for f in [
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 1\r\nTransfer-Encoding: identity\r\n",
        "Content-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n",
    ] {
        assert_eq!(status(&post_with(f)), 400, "{f:?}");
    }
}

#[test]
fn final_coding_not_chunked_is_400() {
    // RFC 9112 §6.3: a request whose final coding is not chunked has no determinable length.
    for f in [
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: identity\r\n",
        "Transfer-Encoding: chunked, gzip\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunkedchunked\r\n",
        "Transfer-Encoding: pigeons\r\n",
        "Transfer-Encoding:\r\n",
        "Transfer-Encoding: ,\r\n",
        "Transfer-Encoding: chunked,\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked;q=1\r\n",
        "Transfer-Encoding: \"chunked\"\r\n",
    ] {
        assert_eq!(status(&post_with(f)), 400, "{f:?}");
    }
}

#[test]
fn other_codings_before_chunked_are_501() {
    // Well-formed, but weft decodes only chunked (RFC 9112 §6.1: 501 for an unknown coding).
    for f in [
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: x-custom;p=1, chunked\r\n",
    ] {
        assert_eq!(status(&post_with(f)), 501, "{f:?}");
    }
}

#[test]
fn transfer_encoding_in_http10_is_400() {
    // RFC 9112 §6.1: a server MUST treat TE in an HTTP/1.0 message as faulty framing.
    assert_eq!(
        status(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        400
    );
}

// ---- Connection management ----------------------------------------------------------------

#[test]
fn keep_alive_rules() {
    // RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
    let cases: [(&[u8], bool); 10] = [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: CLOSE\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade, close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: closed\r\n\r\n",
            true,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: foo, ,keep-alive\t\r\n\r\n",
            true,
        ),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            false,
        ),
    ];
    for (req, want) in cases {
        assert_eq!(
            ok(req).keep_alive(),
            want,
            "{:?}",
            String::from_utf8_lossy(req)
        );
    }
}

#[test]
fn expect_100_continue() {
    assert_eq!(ok(&post_with("")).expect(), Expect::None);
    assert_eq!(
        ok(&post_with("Expect: 100-continue\r\nContent-Length: 3\r\n")).expect(),
        Expect::Continue
    );
    assert_eq!(
        ok(&post_with("Expect: 100-Continue\r\n")).expect(),
        Expect::Continue
    );
    assert_eq!(
        ok(&post_with("Expect: something-else\r\n")).expect(),
        Expect::Unsupported
    );
    // RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored.
    assert_eq!(
        ok(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n").expect(),
        Expect::None
    );
}

// ---- Limits -----------------------------------------------------------------------------------

fn small_limits() -> Limits {
    Limits {
        max_request_line: 64,
        max_head_bytes: 256,
        max_headers: 4,
        ..Limits::default()
    }
}

#[test]
fn request_line_over_the_limit_is_414() {
    // 64 bytes including CRLF is the most allowed.
    let fits = format!("GET /{} HTTP/1.0\r\n\r\n", "a".repeat(64 - 16));
    assert_eq!(fits.find('\n'), Some(63));
    assert!(parse_with(small_limits(), fits.as_bytes()).is_ok());
    let over = format!("GET /{} HTTP/1.0\r\n\r\n", "a".repeat(64 - 15));
    assert_eq!(status_with(small_limits(), over.as_bytes()), 414);
    assert_eq!(
        Parser::new(small_limits()).parse(over.as_bytes()),
        Err(Error::UriTooLong)
    );
    // Without a line end in sight, as soon as the limit is reached.
    let endless = format!("GET /{}", "a".repeat(100));
    let mut p = Parser::new(small_limits());
    assert_eq!(p.parse(&endless.as_bytes()[..63]), Ok(None));
    assert_eq!(p.parse(endless.as_bytes()), Err(Error::UriTooLong));
    // The default limit is 8 KiB.
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    assert_eq!(status(long.as_bytes()), 414);
}

/// Found by fuzzing: a CR in the last byte the limit allows got 400 or 414 depending on
/// whether the byte after it had arrived yet.
#[test]
fn regression_cr_at_the_request_line_limit_is_414_however_split() {
    let mut req = b"O".repeat(63);
    req.extend_from_slice(b"\r-rest");
    let whole = Parser::new(small_limits()).parse(&req);
    assert_eq!(whole, Err(Error::UriTooLong));
    let mut p = Parser::new(small_limits());
    assert_eq!(p.parse(&req[..64]), Err(Error::UriTooLong));
}

#[test]
fn header_section_over_the_limit_is_431() {
    let mut req = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    req.extend_from_slice(format!("Big: {}\r\n\r\n", "v".repeat(250)).as_bytes());
    assert_eq!(status_with(small_limits(), &req), 431);
    assert_eq!(
        Parser::new(small_limits()).parse(&req),
        Err(Error::HeadersTooLarge)
    );
    // Exactly at the limit is fine: the limit counts the final CRLF too.
    let mut exact = b"GET / HTTP/1.1\r\nHost: x\r\nBig: ".to_vec();
    let pad = 256 - exact.len() - 4;
    exact.resize(exact.len() + pad, b'v');
    exact.extend_from_slice(b"\r\n\r\n");
    assert_eq!(exact.len(), 256);
    assert!(parse_with(small_limits(), &exact).is_ok());
    let mut over = exact.clone();
    over.insert(30, b'v');
    assert_eq!(status_with(small_limits(), &over), 431);
    // The default limit is 32 KiB.
    let mut big = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..40 {
        big.extend_from_slice(format!("X-{i}: {}\r\n", "v".repeat(1000)).as_bytes());
    }
    big.extend_from_slice(b"\r\n");
    assert_eq!(status(&big), 431);
}

#[test]
fn too_many_fields_is_431() {
    let four = b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert!(parse_with(small_limits(), four).is_ok());
    let five = b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    assert_eq!(status_with(small_limits(), five), 431);
    let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..101 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(status(&many), 431);
}

// ---- Incremental parsing and pipelining ---------------------------------------------------

/// Everything a head says, in comparable form.
fn summary(head: &RequestHead, buf: &[u8]) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {} {} {:?} {:?}",
        head.method(),
        head.method_str(buf),
        head.target(buf),
        head.path(buf),
        head.target_form(),
        head.version(),
        head.framing(),
        head.keep_alive(),
        head.len(),
        head.expect(),
        head.headers()
            .iter()
            .map(|h| (h.name, h.value))
            .collect::<Vec<_>>(),
    )
}

const SAMPLES: [&[u8]; 5] = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\r\n\r\nPOST /cgi-bin/Echo2 HTTP/1.0\r\nAccept: */*; q=0.300\r\nFrom: nje@socrates.ansa.co.uk\r\nContent-length: 542\r\n\r\n",
    b"PUT /u HTTP/1.1\r\nHost: [::1]:80\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Long: 0123456789abcdef\t0123456789abcdef \xff\r\nConnection: close\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\nEmpty:\r\nSpaces:    \r\n\r\n",
    b"GET http://example.com:8080?q HTTP/1.1\r\nHost: x\r\n\r\n",
];

#[test]
fn byte_at_a_time_gives_the_same_head() {
    for req in SAMPLES {
        let whole = parse(req);
        let mut p = Parser::new(Limits::default());
        let mut verdict = Ok(None);
        for end in 1..=req.len() {
            verdict = p.parse(&req[..end]);
            match verdict {
                Ok(None) if end < req.len() => {}
                _ => break,
            }
        }
        match (whole, verdict) {
            (Ok(w), Ok(Some(n))) => {
                assert_eq!(n, req.len());
                assert_eq!(summary(&w, req), summary(p.head(), req));
            }
            (Err(a), Err(b)) => assert_eq!(a.status(), b.status()),
            (w, v) => panic!(
                "{:?}: whole {:?}, byte at a time {:?}",
                String::from_utf8_lossy(req),
                w.map(|h| h.len()),
                v
            ),
        }
    }
}

#[test]
fn incomplete_heads_ask_for_more() {
    let req = SAMPLES[2];
    for end in 0..req.len() {
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.parse(&req[..end]), Ok(None), "{end}");
        assert_eq!(p.in_progress(), end > 0);
    }
}

#[test]
fn pipelined_requests() {
    let buf = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloPUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\nGET /d HT";
    let mut p = Parser::new(Limits::default());
    let mut at = 0;
    let mut seen = Vec::new();
    loop {
        let rest = &buf[at..];
        let Some(n) = p.parse(rest).unwrap() else {
            break;
        };
        let head = p.head();
        seen.push(head.target(rest).to_string());
        at += n;
        match head.framing() {
            BodyFraming::None => {}
            BodyFraming::Length(len) => at += len as usize,
            BodyFraming::Chunked => {
                let mut d = ChunkedDecoder::new(p.limits());
                let mut body = Vec::new();
                while !d.is_done() {
                    let step = d.decode(&buf[at..]).unwrap();
                    body.extend_from_slice(&buf[at + step.data.0..at + step.data.1]);
                    at += step.consumed;
                }
                assert_eq!(body, b"abc");
            }
        }
        p.reset();
        assert!(!p.in_progress());
    }
    assert_eq!(seen, ["/a", "/b", "/c"]);
    assert_eq!(&buf[at..], b"GET /d HT");
    assert!(p.in_progress());
}

#[test]
fn a_completed_parser_keeps_its_verdict_until_reset() {
    let req = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\nextra";
    let mut p = Parser::new(Limits::default());
    assert_eq!(p.parse(req), Ok(Some(req.len() - 5)));
    assert_eq!(p.parse(req), Ok(Some(req.len() - 5)));
    assert!(!p.in_progress());
    let head = p.take_head();
    assert_eq!(head.target(req), "/x");
    assert!(p.head().is_empty());
    assert_eq!(p.parse(b"GET /y HTTP/1.0\r\n\r\n"), Ok(Some(19)));
}

/// A reset right after another (or after `take_head`) changes nothing, and a reset after a
/// partial or an empty parse leaves a parser that reads the next request as a fresh one would.
#[test]
fn resets_in_a_row_and_after_partial_heads_leave_a_fresh_parser() {
    // Straight after take_head (no reset), the next head is what a fresh parser makes of it.
    let first = b"POST /x?y HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
    let second = b"GET /z HTTP/1.0\r\nHost: b\r\n\r\n";
    let mut reused = Parser::new(Limits::default());
    assert!(reused.parse(first).unwrap().is_some());
    let _ = reused.take_head();
    assert!(reused.parse(second).unwrap().is_some());
    let mut fresh = Parser::new(Limits::default());
    assert!(fresh.parse(second).unwrap().is_some());
    assert_eq!(
        format!("{:?}", reused.head()),
        format!("{:?}", fresh.head())
    );

    // A complete head not taken, then a reset: the next head is a fresh parser's.
    let mut kept = Parser::new(Limits::default());
    assert!(kept.parse(first).unwrap().is_some());
    kept.reset();
    assert!(kept.parse(second).unwrap().is_some());
    assert_eq!(format!("{:?}", kept.head()), format!("{:?}", fresh.head()));

    let mut p = Parser::new(Limits::default());
    let full =
        b"POST /a?q HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
    assert_eq!(p.parse(full), Ok(Some(full.len())));
    let first = p.take_head();
    assert_eq!(first.framing(), BodyFraming::Length(3));
    p.reset();
    p.reset();
    assert_eq!(p.parse(b""), Ok(None));
    assert!(!p.in_progress());
    p.reset();
    let next = b"GET /b HTTP/1.0\r\n\r\n";
    assert_eq!(p.parse(next), Ok(Some(next.len())));
    assert_eq!(p.head().framing(), BodyFraming::None);
    assert_eq!(p.head().expect(), Expect::None);
    assert_eq!(p.head().host_span(), None);
    assert_eq!(p.head().path(next), "/b");
    // Cut in the middle of a field line, then reset: nothing of it survives.
    p.reset();
    assert_eq!(
        p.parse(b"GET /c HTTP/1.1\r\nHost: x\r\nTransfer-Enc"),
        Ok(None)
    );
    assert!(p.in_progress());
    p.reset();
    assert!(!p.in_progress());
    let last = b"GET /d HTTP/1.1\r\nHost: y\r\n\r\n";
    assert_eq!(p.parse(last), Ok(Some(last.len())));
    assert_eq!(p.head().framing(), BodyFraming::None);
    assert_eq!(p.head().headers().len(), 1);
    assert!(p.head().keep_alive());
}

/// One parser reused over a connection's requests remembers the last valid Host (so it is not
/// validated again); an invalid Host after it is still refused, and a changed valid one taken.
#[test]
fn a_reused_parser_still_refuses_an_invalid_host_after_a_valid_one() {
    let mut p = Parser::new(Limits::default());
    let mut one = |host: &str| {
        p.reset();
        let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        p.parse(req.as_bytes()).map(|r| r.is_some())
    };
    assert_eq!(one("example.com:8080"), Ok(true));
    assert_eq!(one("example.com:8080"), Ok(true));
    assert!(one("0x7f.1").is_err(), "a hex IPv4 host");
    assert!(
        one("example.com:8080x").is_err(),
        "a bad port after the same name"
    );
    assert!(one("example.com:80800").is_err(), "a port out of range");
    assert_eq!(one("example.org"), Ok(true));
    assert_eq!(one("example.com:8080"), Ok(true));
}

#[test]
fn an_absolute_form_authority_replaces_host() {
    // RFC 9112 §3.2.2: the target's authority is the request's host whatever Host says.
    let req = b"GET http://other/x HTTP/1.1\r\nHost: a\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.host_span().map(|s| s.get(req)), Some(&b"a"[..]));
    assert_eq!(
        head.authority_span().map(|s| s.get(req)),
        Some(&b"other"[..])
    );
    assert_eq!(
        head.effective_host_span().map(|s| s.get(req)),
        Some(&b"other"[..])
    );
    // https, a port, no path.
    let req = b"GET HTTPS://b.example:8443 HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(
        ok(req).effective_host_span().map(|s| s.get(req)),
        Some(&b"b.example:8443"[..])
    );
    // Origin-form: the Host field, and no authority.
    let req = b"GET /x HTTP/1.1\r\nHost: a:81\r\n\r\n";
    let head = ok(req);
    assert_eq!(head.authority_span(), None);
    assert_eq!(
        head.effective_host_span().map(|s| s.get(req)),
        Some(&b"a:81"[..])
    );
    // HTTP/1.0 without Host: the authority alone.
    let req = b"GET http://c/ HTTP/1.0\r\n\r\n";
    assert_eq!(
        ok(req).effective_host_span().map(|s| s.get(req)),
        Some(&b"c"[..])
    );
    // A parser reused for an origin-form request forgets the previous authority.
    let mut p = Parser::new(Limits::default());
    let first = b"GET http://other/ HTTP/1.1\r\nHost: a\r\n\r\n";
    assert!(p.parse(first).unwrap().is_some());
    let head = p.take_head();
    p.recycle(head);
    p.reset();
    let second = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert!(p.parse(second).unwrap().is_some());
    assert_eq!(
        p.head().effective_host_span().map(|s| s.get(second)),
        Some(&b"a"[..])
    );
}

/// `query_at` is the first `?` of the path (or the path's end), found while the target is
/// checked eight bytes at a time: every position, in and after the first word and in the
/// tail, a second `?` after the first, origin- and absolute-form, and a request line that
/// arrives in two pieces (the general path rather than the one-pass split). The filler `>`
/// is one bit from `?` (0x3e against 0x3f), the byte the word test must not take for it.
#[test]
fn query_at_is_the_first_question_mark_of_the_path() {
    for (fill, len, q) in [b'a', b'>']
        .into_iter()
        .flat_map(|f| (1..=24).flat_map(move |len| (1..=len).map(move |q| (f, len, q))))
    {
        {
            let mut path = vec![fill; len];
            path[0] = b'/';
            if q < len {
                path[q] = b'?';
                if q + 2 < len {
                    path[q + 2] = b'?';
                }
            }
            let target = String::from_utf8(path).unwrap();
            let want = target.find('?').unwrap_or(target.len()) as u32;
            for line in [
                format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n"),
                format!("GET http://h{target} HTTP/1.1\r\nHost: h\r\n\r\n"),
            ] {
                let head = ok(line.as_bytes());
                let span = head.path_span();
                assert_eq!(head.query_at() - span.start, want, "{line:?}");
                // In two pieces, cut inside the target.
                let cut = line.find(' ').unwrap() + 2;
                let mut p = Parser::new(Limits::default());
                assert_eq!(p.parse(&line.as_bytes()[..cut]), Ok(None));
                assert!(p.parse(line.as_bytes()).unwrap().is_some());
                assert_eq!(p.head().query_at() - span.start, want, "{line:?} in pieces");
            }
        }
    }
    for line in [
        &b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"[..],
        b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET http://h HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        let head = ok(line);
        assert_eq!(head.query_at(), head.path_span().end, "{line:?}");
    }
}

/// The remembered Host only spares validating the same bytes again: a host of the same
/// length that differs in any one byte is validated (and refused when invalid), at every
/// length the memo holds and around its word boundaries.
#[test]
fn the_host_memo_matches_only_the_same_bytes() {
    for n in 1..=48 {
        let good = "a".repeat(n);
        for at in 0..n {
            let mut p = Parser::new(Limits::default());
            let req = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
            assert!(p.parse(req.as_bytes()).unwrap().is_some());
            p.reset();
            let mut bad = good.clone().into_bytes();
            bad[at] = b'<';
            let bad = String::from_utf8(bad).unwrap();
            let req = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
            assert!(p.parse(req.as_bytes()).is_err(), "{bad:?} after {good:?}");
            p.reset();
            let req = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
            assert!(p.parse(req.as_bytes()).unwrap().is_some());
        }
    }
}

/// `same_bytes` is `==`: equal strings of every length up to 40, one byte changed at every
/// position (word boundaries and the overlapping last word), and different lengths.
#[test]
fn same_bytes_is_slice_equality() {
    for n in 0..=40usize {
        let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
        assert!(weft_http::same_bytes(&a, &a.clone()), "{n}");
        for at in 0..n {
            let mut b = a.clone();
            b[at] ^= 0x20;
            assert!(!weft_http::same_bytes(&a, &b), "{n} at {at}");
        }
        let mut longer = a.clone();
        longer.push(b'z');
        assert!(!weft_http::same_bytes(&a, &longer), "{n} against {}", n + 1);
    }
}

/// A head's field storage given back with `recycle_fields` is what the next `take_head`
/// hands out (no allocation per request), emptied.
#[test]
fn recycled_field_storage_serves_the_next_head() {
    let req = b"GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
    let mut p = Parser::new(Limits::default());
    assert!(p.parse(req).unwrap().is_some());
    let mut head = p.take_head();
    let fields = head.take_fields();
    assert_eq!(fields.len(), 2);
    assert!(head.headers().is_empty());
    let storage = fields.as_ptr();
    // The head taken above replaced it with a fresh one of its own storage: parse into that,
    // then give the first storage back; the head after next uses it.
    p.recycle_fields(fields);
    assert!(p.parse(req).unwrap().is_some());
    let _second = p.take_head();
    assert!(p.parse(req).unwrap().is_some());
    let third = p.take_head();
    assert_eq!(third.headers().as_ptr(), storage);
    assert_eq!(third.headers().len(), 2);
}

/// `take_head_into` hands the parsed head over and takes the finished one back, emptied, as
/// the head it fills next: each head parsed through it is whole and nothing of the one before
/// shows, and the two heads' field storage is all that is used (no allocation per request).
#[test]
fn heads_taken_into_a_request_change_places_with_its_finished_one() {
    let a = b"GET /a?q HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nX-Two: 2\r\n\r\n";
    let b = b"POST /b HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
    let mut p = Parser::new(Limits::default());
    let mut dst = RequestHead::default();
    let mut storage = vec![dst.headers().as_ptr()];
    for round in 0..3 {
        assert_eq!(p.parse(a).unwrap(), Some(a.len()));
        storage.push(p.head().headers().as_ptr());
        p.take_head_into(&mut dst);
        assert_eq!(
            p.head().headers().len(),
            0,
            "round {round}: the parser's head is not empty"
        );
        assert_eq!(dst.path(a), "/a?q");
        assert_eq!(dst.query_at() as usize, 6);
        assert_eq!(dst.host_span().map(|s| s.get(a)), Some(&b"a"[..]));
        assert_eq!(dst.headers().len(), 3);
        assert_eq!(dst.header(a, "x-two"), Some(&b"2"[..]));
        assert!(dst.keep_alive());
        assert_eq!(dst.framing(), BodyFraming::None);

        assert_eq!(p.parse(b).unwrap(), Some(b.len()));
        storage.push(p.head().headers().as_ptr());
        p.take_head_into(&mut dst);
        assert_eq!(dst.method(), Method::Post);
        assert_eq!(dst.path(b), "/b");
        assert_eq!(dst.version(), Version::Http10);
        assert_eq!(dst.headers().len(), 2);
        assert_eq!(dst.host_span(), None);
        assert_eq!(dst.framing(), BodyFraming::Length(3));
        assert_eq!(dst.expect(), Expect::None); // ignored in HTTP/1.0
        assert!(!dst.keep_alive());
    }
    storage.sort();
    storage.dedup();
    assert_eq!(storage.len(), 2, "field storage was allocated anew");
}

/// `Host` is recognised in any case and no other four-byte name is taken for it: every byte at
/// every position of the name, against the comparison the RFC asks for.
#[test]
fn host_field_name_matches_exactly_its_case_variants() {
    for pos in 0..4 {
        for b in 0..=255u8 {
            let mut name = *b"Host";
            name[pos] = b;
            // tchar (RFC 9110 §5.6.2); other bytes are refused in any field name.
            if !(b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
                continue;
            }
            let mut req = b"GET / HTTP/1.1\r\n".to_vec();
            req.extend_from_slice(&name);
            req.extend_from_slice(b": a\r\nHost: b\r\n\r\n");
            let mut p = Parser::new(Limits::default());
            let r = p.parse(&req);
            if name.eq_ignore_ascii_case(b"host") {
                // Two Host fields.
                assert!(r.is_err(), "{:?}", String::from_utf8_lossy(&name));
            } else {
                assert_eq!(
                    r,
                    Ok(Some(req.len())),
                    "{:?}",
                    String::from_utf8_lossy(&name)
                );
                let host = p.head().host_span().expect("host");
                assert_eq!(host.get(&req), b"b");
            }
        }
    }
}

/// The one-pass request line (`GET ` and `HTTP/1.x` compared as words) and the general path
/// agree on every method spelling near `GET` and every version spelling near `HTTP/1.1`.
#[test]
fn request_line_fast_path_agrees_with_the_general_path() {
    // Each method with what follows it up to the target.
    let methods = [
        "GET ", "GET\t", "GET  ", "GETX ", "GE ", "get ", "PUT ", "G T ", "GET\r",
    ];
    let versions = [
        "HTTP/1.1",
        "HTTP/1.0",
        "HTTP/1.2",
        "HTTP/2.0",
        "http/1.1",
        "HTTP/1.1 ",
        "HTTP/1.",
    ];
    let lines: Vec<Vec<u8>> = methods
        .iter()
        .flat_map(|m| {
            versions
                .iter()
                .map(move |v| format!("{m}/x?y {v}\r\nHost: a\r\n\r\n").into_bytes())
        })
        .collect();
    for line in &lines {
        let mut whole = Parser::new(Limits::default());
        let w = whole.parse(line);
        // Byte by byte, the fast path never sees a complete line.
        let mut pieces = Parser::new(Limits::default());
        let mut s = Ok(None);
        for n in 1..=line.len() {
            s = pieces.parse(&line[..n]);
            if !matches!(s, Ok(None)) {
                break;
            }
        }
        assert_eq!(w, s, "{:?}", String::from_utf8_lossy(line));
        if let Ok(Some(_)) = w {
            let (a, b) = (whole.head(), pieces.head());
            assert_eq!(
                (a.method(), a.target_span(), a.query_at(), a.version()),
                (b.method(), b.target_span(), b.query_at(), b.version())
            );
        }
    }
}

#[test]
fn precondition_fields_are_noted_as_they_are_read() {
    for field in [
        "If-Match: \"a\"",
        "if-none-match: *",
        "IF-MODIFIED-SINCE: Sun, 06 Nov 1994 08:49:37 GMT",
        "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
        "If-Range: \"a\"",
    ] {
        let head = ok(&get_with(&format!("{field}\r\n")));
        assert!(head.has_preconditions(), "{field}");
    }
    for field in [
        "If-Matches: x",
        "If: x",
        "Ifx-Match: x",
        "X-If-Match: x",
        "Accept: */*",
    ] {
        let head = ok(&get_with(&format!("{field}\r\n")));
        assert!(!head.has_preconditions(), "{field}");
    }
    assert!(!ok(&get_with("")).has_preconditions());
    // A head parsed after a conditional one in the same parser starts without the flag.
    let mut p = Parser::new(Limits::default());
    let first = get_with("If-None-Match: *\r\n");
    assert!(p.parse(&first).unwrap().is_some());
    let mut done = RequestHead::default();
    p.take_head_into(&mut done);
    assert!(done.has_preconditions());
    let second = get_with("");
    assert!(p.parse(&second).unwrap().is_some());
    assert!(!p.head().has_preconditions());
}
