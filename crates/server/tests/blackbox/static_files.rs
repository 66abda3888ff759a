//! Static files: index, redirects, MIME types, validators and 304, byte ranges, HEAD, 403/404.

use crate::common::{Builder, Server, INDEX_HTML};

const TEN: &[u8] = b"0123456789";
const SUB_INDEX: &[u8] = b"<p>sub index</p>\n";

fn site() -> Server {
    Builder::new("static")
        .file("ten.txt", TEN)
        .file("style.css", b"body{}\n")
        .file("app.js", b"1;\n")
        .file("data.json", b"{}\n")
        .file("pic.png", b"\x89PNG\r\n\x1a\n")
        .file("noext", b"raw\n")
        .file("thing.unknownext", b"?\n")
        .file("sub/index.html", SUB_INDEX)
        .mkdir("empty")
        .start()
}

#[test]
fn index_redirect_and_missing() {
    let srv = site();
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

#[test]
fn mime_types() {
    let srv = site();
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

#[test]
fn validators_and_conditional_requests() {
    let srv = site();
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

#[test]
fn byte_ranges() {
    let srv = site();
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
    // Several ranges, or one that does not parse: the whole file with 200.
    for range in [
        "bytes=0-1,4-5",
        "bytes=0-1, 8-",
        "bytes=5-2",
        "lines=1-2",
        "bytes=x",
    ] {
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

#[test]
fn head_has_headers_but_no_body() {
    let srv = site();
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

#[test]
fn options_lists_the_methods() {
    let srv = site();
    let r = srv.send(b"OPTIONS /ten.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 204, "{r:?}");
    assert!(r.header("Allow").is_some_and(|a| a.contains("GET")));
    srv.assert_alive();
}
