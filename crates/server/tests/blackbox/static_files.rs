//! Static files: index, redirects, MIME types, validators and preconditions (304, 412,
//! If-Range, RFC 9110 §13), byte ranges, HEAD, 403/404.

use crate::common::{Builder, Model, Server, INDEX_HTML};

per_model! {
    index_redirect_and_missing,
    mime_types,
    validators_and_conditional_requests,
    byte_ranges,
    head_has_headers_but_no_body,
    options_lists_the_methods,
    if_match_and_if_unmodified_since_fail_with_412,
    preconditions_are_evaluated_in_rfc_order,
    if_range_needs_a_strong_tag_or_the_exact_date,
    preconditions_are_ignored_where_the_answer_is_not_2xx,
    a_directory_index_answers_preconditions,
    a_directory_listing_answers_preconditions,
    a_412_is_logged_once,
    the_directory_redirect_is_an_absolute_path,
    preconditions_from_the_response_cache,
}

const TEN: &[u8] = b"0123456789";
const SUB_INDEX: &[u8] = b"<p>sub index</p>\n";

fn site(model: Model) -> Server {
    site_builder(model).start()
}

fn site_builder(model: Model) -> Builder {
    Builder::new(model, "static")
        .file("ten.txt", TEN)
        .file("style.css", b"body{}\n")
        .file("app.js", b"1;\n")
        .file("data.json", b"{}\n")
        .file("pic.png", b"\x89PNG\r\n\x1a\n")
        .file("noext", b"raw\n")
        .file("thing.unknownext", b"?\n")
        .file("sub/index.html", SUB_INDEX)
        .mkdir("empty")
}

fn index_redirect_and_missing(model: Model) {
    let srv = site(model);
    let r = srv.get("/");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, INDEX_HTML);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.header("Content-Length"),
        Some(&*INDEX_HTML.len().to_string())
    );

    let r = srv.get("/sub");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("Location"), Some("/sub/"));
    let r = srv.get("/sub?a=1&b=2");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("Location"), Some("/sub/?a=1&b=2"));
    let r = srv.get("/sub/");
    assert_eq!((r.status, r.body.as_slice()), (200, SUB_INDEX));
    let r = srv.get("/sub/index.html");
    assert_eq!((r.status, r.body.as_slice()), (200, SUB_INDEX));

    assert_eq!(srv.get("/missing.html").status, 404);
    assert_eq!(srv.get("/sub/missing/").status, 404);
    assert_eq!(srv.get("/ten.txt/").status, 404);
    assert_eq!(srv.get("/empty/").status, 403, "directory without index");
    assert_eq!(srv.get("/empty").status, 301);
    // The query is not part of the file name.
    let r = srv.get("/ten.txt?x=1");
    assert_eq!((r.status, r.body.as_slice()), (200, TEN));
    // Percent-encoded names are decoded.
    let r = srv.get("/t%65n.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, TEN));
    srv.assert_alive();
}

fn mime_types(model: Model) {
    let srv = site(model);
    for (path, want) in [
        ("/index.html", &["text/html; charset=utf-8"][..]),
        ("/ten.txt", &["text/plain; charset=utf-8"]),
        ("/style.css", &["text/css; charset=utf-8"]),
        (
            "/app.js",
            &[
                "application/javascript; charset=utf-8",
                "text/javascript; charset=utf-8",
            ],
        ),
        ("/data.json", &["application/json; charset=utf-8"]),
        ("/pic.png", &["image/png"]),
        ("/noext", &["application/octet-stream"]),
        ("/thing.unknownext", &["application/octet-stream"]),
    ] {
        let r = srv.get(path);
        assert_eq!(r.status, 200, "{path}");
        let ct = r.header("Content-Type").unwrap_or("(none)");
        assert!(
            want.contains(&ct),
            "{path}: Content-Type {ct}, want one of {want:?}"
        );
    }
}

fn validators_and_conditional_requests(model: Model) {
    let srv = site(model);
    let r = srv.get("/ten.txt");
    assert_eq!(r.status, 200);
    let etag = r.header("ETag").expect("ETag").to_string();
    let last_modified = r
        .header("Last-Modified")
        .expect("Last-Modified")
        .to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert!(last_modified.ends_with(" GMT"), "{last_modified}");
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));

    // On one keep-alive connection: a 304 must carry no body, or the next response would be
    // read from the wrong place.
    let mut c = srv.connect();
    for cond in [
        format!("If-None-Match: {etag}"),
        format!("If-None-Match: \"nope\", {etag}"),
        format!("If-None-Match: W/{etag}"),
        "If-None-Match: *".to_string(),
        format!("If-Modified-Since: {last_modified}"),
        "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT".to_string(),
    ] {
        c.send(format!("GET /ten.txt HTTP/1.1\r\nHost: x\r\n{cond}\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 304, "{cond}: {r:?}");
        assert!(r.body.is_empty());
        assert_eq!(
            r.header("Content-Length"),
            None,
            "{cond}: 304 with Content-Length"
        );
        assert_eq!(r.header("ETag"), Some(etag.as_str()));
    }
    for cond in [
        "If-None-Match: \"other\"".to_string(),
        "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT".to_string(),
        "If-Modified-Since: not a date".to_string(),
        // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
        format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {last_modified}"),
    ] {
        c.send(format!("GET /ten.txt HTTP/1.1\r\nHost: x\r\n{cond}\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, TEN), "{cond}");
    }
}

fn byte_ranges(model: Model) {
    let srv = site(model);
    let mut c = srv.connect();
    let mut get = |range: &str| {
        c.send(format!("GET /ten.txt HTTP/1.1\r\nHost: x\r\nRange: {range}\r\n\r\n").as_bytes());
        c.read_response().unwrap()
    };
    for (range, bytes, content_range) in [
        ("bytes=2-5", &b"2345"[..], "bytes 2-5/10"),
        ("bytes=0-0", b"0", "bytes 0-0/10"),
        ("bytes=7-", b"789", "bytes 7-9/10"),
        ("bytes=-3", b"789", "bytes 7-9/10"),
        ("bytes=-30", TEN, "bytes 0-9/10"),
        ("bytes=8-100", b"89", "bytes 8-9/10"),
    ] {
        let r = get(range);
        assert_eq!(r.status, 206, "{range}: {r:?}");
        assert_eq!(r.body, bytes, "{range}");
        assert_eq!(r.header("Content-Range"), Some(content_range), "{range}");
        assert_eq!(r.header("Content-Length"), Some(&*bytes.len().to_string()));
    }
    for range in ["bytes=10-", "bytes=20-30", "bytes=-0"] {
        let r = get(range);
        assert_eq!(r.status, 416, "{range}: {r:?}");
        assert_eq!(r.header("Content-Range"), Some("bytes */10"), "{range}");
    }
    // Several ranges: multipart/byteranges (RFC 9110 §14.6), sorted, the overlapping merged.
    for (range, parts) in [
        (
            "bytes=0-1,4-5",
            &[("01", "bytes 0-1/10"), ("45", "bytes 4-5/10")][..],
        ),
        (
            "bytes=8-, 0-1",
            &[("01", "bytes 0-1/10"), ("89", "bytes 8-9/10")],
        ),
        (
            "bytes=0-1,1-2,6-6,-1",
            &[
                ("012", "bytes 0-2/10"),
                ("6", "bytes 6-6/10"),
                ("9", "bytes 9-9/10"),
            ],
        ),
    ] {
        let r = get(range);
        assert_eq!(r.status, 206, "{range}: {r:?}");
        let ct = r.header("Content-Type").unwrap().to_string();
        let boundary = ct
            .strip_prefix("multipart/byteranges; boundary=")
            .unwrap_or_else(|| panic!("{range}: {ct}"));
        assert_eq!(
            r.header("Content-Length"),
            Some(&*r.body.len().to_string()),
            "{range}"
        );
        let text = r.text();
        let mut want = String::new();
        for (bytes, content_range) in parts {
            want.push_str(&format!(
                "\r\n--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: {content_range}\r\n\r\n{bytes}"
            ));
        }
        want.push_str(&format!("\r\n--{boundary}--\r\n"));
        assert_eq!(text, want, "{range}");
    }
    // Ranges that merge into one: a plain 206.
    let r = get("bytes=0-4,5-9,2-3");
    assert_eq!((r.status, r.body.as_slice()), (206, TEN));
    assert_eq!(r.header("Content-Range"), Some("bytes 0-9/10"));
    // More than 16, or one that does not parse: the whole file with 200.
    let many = format!("bytes={}", vec!["0-0"; 17].join(","));
    for range in [many.as_str(), "bytes=5-2", "lines=1-2", "bytes=x"] {
        let r = get(range);
        assert_eq!((r.status, r.body.as_slice()), (200, TEN), "{range}");
    }
    // A HEAD ignores Range.
    c.send(b"HEAD /ten.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    // If-Range with a stale validator: the whole file.
    c.send(b"GET /ten.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nIf-Range: \"stale\"\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, TEN));
}

fn head_has_headers_but_no_body(model: Model) {
    let srv = site(model);
    let mut c = srv.connect();
    for (path, len) in [
        ("/", INDEX_HTML.len()),
        ("/ten.txt", TEN.len()),
        ("/sub/", SUB_INDEX.len()),
    ] {
        c.send(format!("HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        let r = c.read_head_response().unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(
            r.header("Content-Length"),
            Some(&*len.to_string()),
            "{path}"
        );
        assert!(r.header("ETag").is_some() && r.header("Last-Modified").is_some());
    }
    // Were any body bytes sent, this GET's response would not parse as the next response.
    c.send(b"GET /ten.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, TEN));
    assert!(c.closed_within(std::time::Duration::from_secs(5)));
    // HEAD of a missing file: 404 headers, no body.
    let mut c = srv.connect();
    c.send(b"HEAD /missing HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 404);
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
}

fn options_lists_the_methods(model: Model) {
    let srv = site(model);
    let r = srv.send(b"OPTIONS /ten.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 204, "{r:?}");
    assert!(r.header("Allow").is_some_and(|a| a.contains("GET")));
    srv.assert_alive();
}

/// Dates well before and after any file of the test (created just now).
const LONG_AGO: &str = "Thu, 01 Jan 1970 00:00:00 GMT";
const FAR_AHEAD: &str = "Fri, 01 Jan 2100 00:00:00 GMT";

/// `/ten.txt`'s ETag and Last-Modified.
fn validators(srv: &Server) -> (String, String) {
    let r = srv.get("/ten.txt");
    assert_eq!(r.status, 200, "{r:?}");
    (
        r.header("ETag").expect("ETag").to_string(),
        r.header("Last-Modified")
            .expect("Last-Modified")
            .to_string(),
    )
}

/// Sends each `(method, fields)` for `path` on one keep-alive connection and checks the status
/// (and for 200/206 the body; 304 and 412 must carry no body the next response would trip on).
fn expect_statuses(srv: &Server, path: &str, cases: &[(&str, String, u16)]) {
    let mut c = srv.connect();
    for (method, fields, want) in cases {
        let fields = if fields.is_empty() {
            String::new()
        } else {
            format!("{fields}\r\n")
        };
        let body_fields = if matches!(*method, "PUT" | "POST") {
            "Content-Length: 0\r\n"
        } else {
            ""
        };
        c.send(
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{body_fields}{fields}\r\n").as_bytes(),
        );
        let r = c
            .read_response_for(*method == "HEAD")
            .unwrap_or_else(|e| panic!("{method} {fields:?}: {e:?}"));
        assert_eq!(r.status, *want, "{method} {path} {fields:?}: {r:?}");
        match r.status {
            200 if *method == "GET" && path == "/ten.txt" => assert_eq!(r.body, TEN, "{fields}"),
            304 => assert!(r.body.is_empty() && r.header("Content-Length").is_none()),
            _ => {}
        }
    }
}

/// RFC 9110 §13.1.1 and §13.1.4: If-Match and If-Unmodified-Since fail with 412, for GET and
/// HEAD alike; If-Match compares strongly and `*` matches any current file.
fn if_match_and_if_unmodified_since_fail_with_412(model: Model) {
    let srv = site(model);
    let (etag, lm) = validators(&srv);
    let mut cases = Vec::new();
    for method in ["GET", "HEAD"] {
        for (fields, want) in [
            (format!("If-Match: {etag}"), 200),
            (format!("If-Match: \"nope\", {etag}"), 200),
            ("If-Match: *".to_string(), 200),
            ("If-Match: \"nope\"".to_string(), 412),
            (format!("If-Match: W/{etag}"), 412),
            // A list that does not parse matches nothing.
            (format!("If-Match: {etag} garbage"), 412),
            (format!("If-Unmodified-Since: {lm}"), 200),
            (format!("If-Unmodified-Since: {FAR_AHEAD}"), 200),
            (format!("If-Unmodified-Since: {LONG_AGO}"), 412),
            // Not a date: ignored (§13.1.4).
            ("If-Unmodified-Since: yesterday".to_string(), 200),
        ] {
            cases.push((method, fields, want));
        }
    }
    expect_statuses(&srv, "/ten.txt", &cases);

    // A 412 is an ordinary error response: the usual fields, an HTML page, and the connection
    // stays usable.
    let r = srv.send(b"GET /ten.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\n\r\n");
    assert_eq!(r.status, 412);
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    assert!(
        r.header("Date").is_some() && r.header("Server").is_some(),
        "{r:?}"
    );
    assert_eq!(r.header("Content-Length"), Some(&*r.body.len().to_string()));
    assert!(r.text().contains("412 Precondition Failed"), "{r:?}");
    assert!(r.header("ETag").is_none() && r.header("Content-Range").is_none());
    srv.assert_alive();
}

/// RFC 9110 §13.2.2: the order of evaluation decides which condition answers.
fn preconditions_are_evaluated_in_rfc_order(model: Model) {
    let srv = site(model);
    let (etag, lm) = validators(&srv);
    let cases: Vec<(&str, String, u16)> = vec![
        // Step 2 only without If-Match.
        (
            "GET",
            format!("If-Match: {etag}\r\nIf-Unmodified-Since: {LONG_AGO}"),
            200,
        ),
        (
            "GET",
            format!("If-Match: \"x\"\r\nIf-Unmodified-Since: {FAR_AHEAD}"),
            412,
        ),
        // Steps 1 and 2 come before 3 and 4: 412 over 304.
        (
            "GET",
            format!("If-Match: \"x\"\r\nIf-None-Match: {etag}"),
            412,
        ),
        (
            "GET",
            format!("If-Unmodified-Since: {LONG_AGO}\r\nIf-Modified-Since: {lm}"),
            412,
        ),
        // A passed step 1 goes on to step 3.
        (
            "GET",
            format!("If-Match: {etag}\r\nIf-None-Match: {etag}"),
            304,
        ),
        (
            "HEAD",
            format!("If-Match: *\r\nIf-Modified-Since: {lm}"),
            304,
        ),
        // Step 3 (weak comparison) decides alone; step 4 only without If-None-Match.
        ("GET", format!("If-None-Match: W/{etag}"), 304),
        (
            "GET",
            format!("If-None-Match: \"x\"\r\nIf-Modified-Since: {lm}"),
            200,
        ),
        (
            "GET",
            format!("If-None-Match: {etag}\r\nIf-Modified-Since: {LONG_AGO}"),
            304,
        ),
        // Step 5: a Range after the preconditions passed.
        (
            "GET",
            "Range: bytes=0-1\r\nIf-Match: \"x\"".to_string(),
            412,
        ),
        (
            "GET",
            format!("Range: bytes=0-1\r\nIf-None-Match: {etag}"),
            304,
        ),
        ("GET", format!("Range: bytes=0-1\r\nIf-Match: {etag}"), 206),
        (
            "GET",
            format!("Range: bytes=0-1\r\nIf-Range: \"x\"\r\nIf-Match: {etag}"),
            200,
        ),
        (
            "GET",
            format!("Range: bytes=99-\r\nIf-Unmodified-Since: {LONG_AGO}"),
            412,
        ),
    ];
    expect_statuses(&srv, "/ten.txt", &cases);
}

/// RFC 9110 §13.1.5: If-Range holds for the strong entity tag or the exact Last-Modified date;
/// otherwise the whole file is sent with 200.
fn if_range_needs_a_strong_tag_or_the_exact_date(model: Model) {
    let srv = site(model);
    let (etag, lm) = validators(&srv);
    let mut c = srv.connect();
    for (if_range, partial) in [
        (etag.clone(), true),
        (lm.clone(), true),
        (format!("W/{etag}"), false),
        ("\"stale\"".to_string(), false),
        (LONG_AGO.to_string(), false),
        (FAR_AHEAD.to_string(), false),
        ("garbage".to_string(), false),
    ] {
        c.send(
            format!("GET /ten.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=2-4\r\nIf-Range: {if_range}\r\n\r\n")
                .as_bytes(),
        );
        let r = c.read_response().unwrap();
        if partial {
            assert_eq!(
                (r.status, r.body.as_slice()),
                (206, &b"234"[..]),
                "{if_range}"
            );
        } else {
            assert_eq!((r.status, r.body.as_slice()), (200, TEN), "{if_range}");
        }
    }
}

/// RFC 9110 §13.2.1: preconditions count only where the answer would otherwise be 2xx. A
/// missing file stays 404, a directory without its slash 301, a method a file does not answer
/// 405 (an unknown one 501), and OPTIONS ignores them.
fn preconditions_are_ignored_where_the_answer_is_not_2xx(model: Model) {
    let srv = site(model);
    let conds = [
        "If-Match: \"nope\"".to_string(),
        "If-None-Match: *".to_string(),
        format!("If-Unmodified-Since: {LONG_AGO}"),
    ];
    let mut cases = Vec::new();
    for fields in &conds {
        for (method, want) in [
            ("PUT", 405),
            ("DELETE", 405),
            ("POST", 405),
            ("PATCH", 405),
            ("OPTIONS", 204),
        ] {
            cases.push((method, fields.clone(), want));
        }
    }
    expect_statuses(&srv, "/ten.txt", &cases);
    let r = srv.send(b"DELETE /ten.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\n\r\n");
    assert_eq!(r.header("Allow"), Some("GET, HEAD, OPTIONS"), "{r:?}");
    for fields in &conds {
        let mut cases = vec![("GET", fields.clone(), 404), ("HEAD", fields.clone(), 404)];
        cases.push(("BREW", fields.clone(), 501));
        expect_statuses(&srv, "/missing.txt", &cases);
        expect_statuses(&srv, "/sub", &[("GET", fields.clone(), 301)]);
        expect_statuses(&srv, "/empty/", &[("GET", fields.clone(), 403)]);
    }
}

/// A directory's index is a representation like any file.
fn a_directory_index_answers_preconditions(model: Model) {
    let srv = site(model);
    let r = srv.get("/sub/");
    assert_eq!(r.status, 200);
    let etag = r.header("ETag").expect("ETag").to_string();
    expect_statuses(
        &srv,
        "/sub/",
        &[
            ("GET", format!("If-None-Match: {etag}"), 304),
            ("GET", format!("If-Match: {etag}"), 200),
            ("GET", "If-Match: \"nope\"".to_string(), 412),
            ("HEAD", format!("If-Unmodified-Since: {LONG_AGO}"), 412),
        ],
    );
}

/// A directory listing has no validators: only `*` matches it.
fn a_directory_listing_answers_preconditions(model: Model) {
    let srv = site_builder(model)
        .config("[static_files]\nautoindex = true\n")
        .start();
    assert_eq!(srv.get("/empty/").status, 200);
    expect_statuses(
        &srv,
        "/empty/",
        &[
            ("GET", "If-Match: *".to_string(), 200),
            ("GET", "If-Match: \"x\"".to_string(), 412),
            ("GET", "If-None-Match: *".to_string(), 304),
            ("HEAD", "If-None-Match: \"x\"".to_string(), 200),
            ("GET", format!("If-Unmodified-Since: {LONG_AGO}"), 200),
        ],
    );
}

/// A 412 is one request in the access log, like any other answer.
fn a_412_is_logged_once(model: Model) {
    let b = site_builder(model);
    let log = b.dir().join("access.log");
    let mut srv = b.args(&["--access-log", log.to_str().unwrap()]).start();
    let mut c = srv.connect();
    c.send(b"GET /ten.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\n\r\nGET /ten.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (responses, _) = c.read_all_responses();
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [412, 200]);
    // The log is flushed at exit.
    srv.signal(libc::SIGTERM);
    assert!(srv.wait_exit(std::time::Duration::from_secs(10)).is_some());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("\"GET /ten.txt HTTP/1.1\" 412 "),
        "{text}"
    );
    assert!(
        lines[1].contains("\"GET /ten.txt HTTP/1.1\" 200 10 "),
        "{text}"
    );
    // A refused precondition is the client's business: nothing in the error log.
    assert!(!srv.log().contains("Precondition"), "{}", srv.log());
}

/// The redirect for a directory named without its slash: an absolute path built from the
/// normalised path, the query kept as sent.
fn the_directory_redirect_is_an_absolute_path(model: Model) {
    let srv = Builder::new(model, "static-redirect")
        .mkdir("sub/deeper")
        .mkdir("a b")
        .start();
    for (target, location) in [
        ("/sub", "/sub/"),
        ("/sub?x=1&y=%2F", "/sub/?x=1&y=%2F"),
        ("/sub/deeper", "/sub/deeper/"),
        // Never a network-path reference (`//sub/` would name the host "sub").
        ("//sub", "/sub/"),
        ("/./sub/../sub", "/sub/"),
        ("/s%75b", "/sub/"),
        ("/a%20b?q", "/a%20b/?q"),
        ("http://example.com/sub?q", "/sub/?q"),
    ] {
        let r = srv.send(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r.status, 301, "{target}: {r:?}");
        assert_eq!(r.header("Location"), Some(location), "{target}");
        assert_eq!(r.header_count("Location"), 1);
    }
}

/// The same preconditions answered from the response cache (every model but `process`, whose
/// connection processes do not fill it): a file is cached once it has settled (1 s), so the
/// test asks until it is, then checks the answers came from the cache.
fn preconditions_from_the_response_cache(model: Model) {
    let srv = site_builder(model).args(&["--status"]).start();
    let cached = model.name != "process" && !model.cache_off();
    if cached {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while srv.cache_counter("fills") == 0 {
            assert_eq!(srv.get("/ten.txt").body, TEN);
            assert!(
                std::time::Instant::now() < deadline,
                "/ten.txt never cached"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let (etag, lm) = validators(&srv);
    let hits = if cached { srv.cache_counter("hits") } else { 0 };
    let cases = vec![
        ("GET", "If-Match: \"nope\"".to_string(), 412),
        ("HEAD", format!("If-Unmodified-Since: {LONG_AGO}"), 412),
        ("GET", format!("If-Match: {etag}"), 200),
        ("GET", format!("If-None-Match: W/{etag}"), 304),
        ("GET", format!("If-Modified-Since: {lm}"), 304),
        (
            "GET",
            format!("If-Match: \"x\"\r\nIf-None-Match: {etag}"),
            412,
        ),
        ("GET", format!("Range: bytes=0-1\r\nIf-Range: {lm}"), 206),
        (
            "GET",
            format!("Range: bytes=0-1\r\nIf-Range: W/{etag}"),
            200,
        ),
    ];
    expect_statuses(&srv, "/ten.txt", &cases);
    if cached {
        assert!(
            srv.cache_counter("hits") >= hits + cases.len() as u64,
            "not answered from the cache"
        );
    }
}
