//! `[compression]`: Accept-Encoding negotiation, on-the-fly gzip/brotli/zstd of static files
//! (bodies decoded here with the same crates and compared to the file), precompressed
//! siblings, `Vary`, per-variant ETags, 304, HEAD, ranges on identity only, a hot file
//! compressed once (cache counters), CGI and proxied responses.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;

use crate::common::{Builder, Model, Response, Server};

per_model! {
    every_coding_decodes_to_the_file_and_negotiation_follows_q_values,
    head_304_and_ranges_stay_right,
    precompressed_siblings_are_preferred,
    a_hot_file_is_compressed_once,
    cgi_responses_are_compressed_when_allowed,
    proxied_responses_are_compressed_when_allowed,
}

const ON: &str = "[compression]\nenabled = true\n";

/// True when this binary's servers fill no response cache (every variant is then compressed
/// as it is sent): with it off, and in the `process` model, whose connection processes do
/// not fill it (`ResponseCache::set_fills`).
fn no_cache(model: Model) -> bool {
    model.cache_off() || model.name == "process"
}

/// About 10 KB of HTML, the size the benchmarks use.
fn page() -> Vec<u8> {
    let mut p = b"<!doctype html>\n<html><body>\n".to_vec();
    for i in 0..200 {
        p.extend_from_slice(
            format!("<p class=\"line\">Paragraph {i} of the page.</p>\n").as_bytes(),
        );
    }
    p.extend_from_slice(b"</body></html>\n");
    p
}

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .map(drop),
        "br" => brotli::Decompressor::new(data, 4096)
            .read_to_end(&mut out)
            .map(drop),
        "zstd" => zstd::stream::read::Decoder::new(data)
            .and_then(|mut d| d.read_to_end(&mut out))
            .map(drop),
        other => panic!("unexpected coding {other}"),
    }
    .unwrap_or_else(|e| panic!("{coding} body does not decode: {e}"));
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut e = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        e.write_all(data).unwrap();
    }
    out
}

fn get(srv: &Server, path: &str, fields: &str) -> Response {
    srv.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{fields}\r\n").as_bytes())
}

fn site(model: Model, extra: &str) -> Server {
    Builder::new(model, "compress")
        .config(&format!("{ON}{extra}"))
        .args(&["--status"])
        .file("page.html", &page())
        .file("small.txt", b"short\n")
        .file("pic.png", &[0x89; 4000])
        .start()
}

fn cache_counter(srv: &Server, name: &str) -> u64 {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    v["cache"][name].as_u64().unwrap_or(0)
}

fn every_coding_decodes_to_the_file_and_negotiation_follows_q_values(model: Model) {
    let srv = site(model, "");
    let identity = get(&srv, "/page.html", "");
    assert_eq!(identity.status, 200, "{identity:?}");
    assert_eq!(identity.body, page());
    assert_eq!(identity.header("Content-Encoding"), None);
    assert_eq!(identity.header("Vary"), Some("Accept-Encoding"));
    assert_eq!(identity.header("Accept-Ranges"), Some("bytes"));
    let id_tag = identity.header("ETag").expect("ETag").to_string();

    let mut tags = vec![id_tag.clone()];
    for coding in ["gzip", "br", "zstd"] {
        let r = get(
            &srv,
            "/page.html",
            &format!("Accept-Encoding: {coding}\r\n"),
        );
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("Content-Encoding"), Some(coding), "{r:?}");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
        assert_eq!(r.header("Content-Type"), identity.header("Content-Type"));
        assert_eq!(
            r.header("Accept-Ranges"),
            None,
            "{coding}: no ranges of a variant"
        );
        assert!(
            r.body.len() < page().len() / 2,
            "{coding}: {}",
            r.body.len()
        );
        assert_eq!(decode(coding, &r.body), page(), "{coding}");
        let tag = r.header("ETag").expect("ETag").to_string();
        assert!(!tags.contains(&tag), "{coding}: {tag} is not distinct");
        tags.push(tag);
        // The same variant again: the same tag (from the cache, or made the same way).
        let again = get(
            &srv,
            "/page.html",
            &format!("Accept-Encoding: {coding}\r\n"),
        );
        assert_eq!(again.header("ETag"), tags.last().map(|t| t.as_str()));
        assert_eq!(decode(coding, &again.body), page());
    }

    for (ae, want) in [
        // Server preference on a tie: br, zstd, gzip.
        ("gzip, zstd, br", Some("br")),
        ("*", Some("br")),
        ("gzip;q=0.5, zstd;q=0.8", Some("zstd")),
        ("br;q=0, *", Some("zstd")),
        ("X-GZIP", Some("gzip")),
        ("gzip;q=0", None),
        ("identity", None),
        ("deflate, compress", None),
        ("gzip;q=nonsense", None),
        ("", None),
    ] {
        let r = get(&srv, "/page.html", &format!("Accept-Encoding: {ae}\r\n"));
        assert_eq!(r.status, 200, "{ae}: {r:?}");
        assert_eq!(r.header("Content-Encoding"), want, "{ae}");
        match want {
            Some(c) => assert_eq!(decode(c, &r.body), page(), "{ae}"),
            None => assert_eq!(r.body, page(), "{ae}"),
        }
    }

    // Below min_length, or not a compressible type: identity, and no Vary for them.
    for path in ["/small.txt", "/pic.png"] {
        let r = get(&srv, path, "Accept-Encoding: gzip, br, zstd\r\n");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("Content-Encoding"), None, "{path}");
        assert_eq!(r.header("Vary"), None, "{path}");
    }
    srv.assert_alive();
}

fn head_304_and_ranges_stay_right(model: Model) {
    let srv = site(model, "");
    let g = get(&srv, "/page.html", "Accept-Encoding: gzip\r\n");
    assert_eq!(g.header("Content-Encoding"), Some("gzip"));
    let tag = g.header("ETag").unwrap().to_string();

    let mut c = srv.connect();
    c.send(b"HEAD /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
    let h = c.read_head_response().expect("HEAD response");
    assert_eq!(h.status, 200, "{h:?}");
    assert!(h.body.is_empty());
    assert_eq!(h.header("Content-Encoding"), Some("gzip"));
    assert_eq!(h.header("Vary"), Some("Accept-Encoding"));
    // The same tag, but for its weakness: a file that settled in between is served from the
    // cache with a strong one.
    let strong = |t: &str| t.trim_start_matches("W/").to_string();
    assert_eq!(h.header("ETag").map(strong), Some(strong(&tag)));

    // The variant's tag revalidates the variant...
    let r = get(
        &srv,
        "/page.html",
        &format!("Accept-Encoding: gzip\r\nIf-None-Match: {tag}\r\n"),
    );
    assert_eq!(r.status, 304, "{r:?}");
    assert_eq!(r.header("ETag"), Some(tag.as_str()));
    assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    assert!(r.body.is_empty());
    // ... and not the identity response, nor another coding's variant.
    for ae in ["", "Accept-Encoding: br\r\n"] {
        let r = get(&srv, "/page.html", &format!("{ae}If-None-Match: {tag}\r\n"));
        assert_eq!(r.status, 200, "{ae}: {r:?}");
        assert_ne!(r.header("ETag"), Some(tag.as_str()));
    }

    // A range is always of the identity bytes.
    let r = get(
        &srv,
        "/page.html",
        "Accept-Encoding: gzip\r\nRange: bytes=0-14\r\n",
    );
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("Content-Encoding"), None);
    assert_eq!(r.body, &page()[..15]);
    srv.assert_alive();
}

fn precompressed_siblings_are_preferred(model: Model) {
    // The siblings hold other text than the file: what comes back shows which was sent.
    let from_gz = b"<p>from the .gz sibling</p>\n".repeat(20);
    let from_br = b"<p>from the .br sibling</p>\n".repeat(20);
    let srv = Builder::new(model, "compress-static")
        .config(&format!("{ON}precompressed = true\n"))
        .file("page.html", &page())
        .file("page.html.gz", &gzip(&from_gz))
        .file("page.html.br", &brotli(&from_br))
        .file("font.bin", b"binary, not a compressible type")
        .file("font.bin.gz", &gzip(b"font from its sibling"))
        .start();
    let r = get(&srv, "/page.html", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Encoding"), Some("gzip"));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    assert_eq!(decode("gzip", &r.body), from_gz);
    let gz_tag = r.header("ETag").unwrap().to_string();

    let r = get(&srv, "/page.html", "Accept-Encoding: gzip, br\r\n");
    assert_eq!(r.header("Content-Encoding"), Some("br"));
    assert_eq!(decode("br", &r.body), from_br);
    assert_ne!(r.header("ETag"), Some(gz_tag.as_str()));

    // No .zst sibling: zstd is made from the file itself.
    let r = get(&srv, "/page.html", "Accept-Encoding: zstd\r\n");
    assert_eq!(r.header("Content-Encoding"), Some("zstd"));
    assert_eq!(decode("zstd", &r.body), page());

    // A sibling is served whatever the original's type.
    let r = get(&srv, "/font.bin", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(decode("gzip", &r.body), b"font from its sibling");

    let r = get(
        &srv,
        "/page.html",
        &format!("Accept-Encoding: gzip\r\nIf-None-Match: {gz_tag}\r\n"),
    );
    assert_eq!(r.status, 304, "{r:?}");

    // A client that takes no coding gets the file.
    let r = get(&srv, "/page.html", "");
    assert_eq!(r.body, page());
    assert_eq!(r.header("Content-Encoding"), None);
    srv.assert_alive();
}

fn a_hot_file_is_compressed_once(model: Model) {
    let srv = site(model, "");
    // The cache takes a file only once its ctime is a second old (`cache::SETTLE`).
    std::thread::sleep(std::time::Duration::from_millis(1300));
    // Pipelined on one connection: in the process model one child, with its own cache,
    // answers them all.
    let mut c = srv.connect();
    c.send(&b"GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n".repeat(6));
    for _ in 0..6 {
        let r = c.read_response().expect("response");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        assert_eq!(decode("gzip", &r.body), page());
    }
    let (fills, compressions, variant_hits) = (
        cache_counter(&srv, "fills"),
        cache_counter(&srv, "compressions"),
        cache_counter(&srv, "variant_hits"),
    );
    if no_cache(model) {
        assert_eq!((fills, compressions, variant_hits), (0, 0, 0));
    } else {
        // The first request read the file into the cache and made the variant; the other
        // five were answered from it.
        assert_eq!(fills, 1);
        assert_eq!(compressions, 1, "compressed once, not per request");
        assert_eq!(variant_hits, 5);
    }
}

/// `[cgi] extensions` scripts under the root, compressed on their way out (chunked).
fn cgi_responses_are_compressed_when_allowed(model: Model) {
    let b = Builder::new(model, "compress-cgi")
        .config(&format!("{ON}[cgi]\nextensions = [\".cgi\"]\n"));
    let root = b.dir().join("root");
    let text = "line of script output that compresses well\n".repeat(100);
    for (name, head) in [
        ("text.cgi", "Content-Type: text/plain"),
        (
            "coded.cgi",
            "Content-Type: text/plain\\nContent-Encoding: gzip",
        ),
        ("image.cgi", "Content-Type: image/png"),
        (
            "keep.cgi",
            "Content-Type: text/plain\\nCache-Control: no-transform",
        ),
    ] {
        let p = root.join(name);
        fs::write(
            &p,
            format!("#!/bin/sh\nprintf '{head}\\n\\n'\ni=0\nwhile [ $i -lt 100 ]; do echo 'line of script output that compresses well'; i=$((i+1)); done\n"),
        )
        .unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let srv = b.start();
    for coding in ["gzip", "br", "zstd"] {
        let r = get(&srv, "/text.cgi", &format!("Accept-Encoding: {coding}\r\n"));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("Content-Encoding"), Some(coding), "{r:?}");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
        assert_eq!(decode(coding, &r.body), text.as_bytes(), "{coding}");
    }
    let r = get(&srv, "/text.cgi", "");
    assert_eq!(r.header("Content-Encoding"), None);
    assert_eq!(r.body, text.as_bytes());
    for path in ["/coded.cgi", "/image.cgi", "/keep.cgi"] {
        let r = get(&srv, path, "Accept-Encoding: br, gzip\r\n");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, text.as_bytes(), "{path}: passed through as it was");
    }
    let r = get(&srv, "/coded.cgi", "Accept-Encoding: br, gzip\r\n");
    assert_eq!(
        r.header("Content-Encoding"),
        Some("gzip"),
        "the script's own"
    );
    srv.assert_alive();
}

/// An upstream that answers every request with `response`, on one connection at a time.
fn upstream(response: Vec<u8>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            let _ = s.write_all(&response);
        }
    });
    addr
}

fn proxied_responses_are_compressed_when_allowed(model: Model) {
    let body = b"{\"key\": \"a value that repeats\"}\n".repeat(64);
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nETag: \"up1\"\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    resp.extend_from_slice(&body);
    let up = upstream(resp);
    let srv = Builder::new(model, "compress-proxy")
        .config(&format!(
            "{ON}[[proxy]]\nprefix = \"/up/\"\nupstream = \"http://{up}\"\n"
        ))
        .start();
    let r = get(&srv, "/up/data", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{r:?}");
    assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    // The upstream's strong tag named its own bytes.
    assert_eq!(r.header("ETag"), Some("W/\"up1\""));
    assert_eq!(decode("gzip", &r.body), body);
    let r = get(&srv, "/up/data", "");
    assert_eq!(r.header("Content-Encoding"), None);
    assert_eq!(r.header("ETag"), Some("\"up1\""));
    assert_eq!(r.body, body);
    srv.assert_alive();
}
