//! Virtual hosts and locations (`[[site]]`, `[[site.location]]`, `[site.errors]`): the site
//! chosen by `Host` (exact, wildcard, default, the top-level settings when none matches, the
//! authority of an absolute-form target), the location by exact path or longest prefix, and
//! what a location does: headers, redirects with `$path`/`$query`, try_files with an SPA
//! fallback, deny, proxy, CGI, custom error pages; static files of a site still answered from
//! the response cache.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{Builder, Model, ReadError, Response, Server, INDEX_HTML};

per_model! {
    the_host_picks_the_site,
    the_default_site_takes_unknown_hosts,
    locations_longest_prefix_exact_path_and_headers,
    redirects_substitute_path_and_query,
    try_files_falls_back_to_the_app,
    deny_refuses_with_403_whatever_the_spelling,
    access_rules_allow_and_deny_in_order_per_site_and_location,
    basic_auth_per_site_and_location_from_htpasswd_files,
    a_wrong_password_costs_five_requests_of_the_rate,
    regex_locations_redirects_and_rewrites,
    error_pages_keep_the_status,
    a_location_proxies_or_runs_cgi,
    sites_share_the_cache_without_sharing_entries,
    a_locations_headers_keep_a_cached_variants_encoding,
    the_request_vectors_answer_the_same_with_sites,
    sites_files_are_compressed_per_site,
}

/// A directory beside the test's document root, with `files` in it.
fn site_root(b: &Builder, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = b.dir().join(name);
    for (rel, body) in files {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn get_host(srv: &Server, host: &str, target: &str) -> Response {
    srv.send(
        format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn head_host(srv: &Server, host: &str, target: &str) -> Response {
    let mut c = srv.connect();
    c.send(
        format!("HEAD {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    c.read_head_response().expect("a response to HEAD")
}

fn toml_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

fn the_host_picks_the_site(model: Model) {
    let b = Builder::new(model, "sites-hosts").no_echo();
    let a = site_root(
        &b,
        "a",
        &[("index.html", b"site a\n"), ("only-a.txt", b"A\n")],
    );
    let w = site_root(&b, "w", &[("index.html", b"wildcard\n")]);
    let cfg = format!(
        "[[site]]\nhosts = [\"a.test\", \"www.a.test\"]\nroot = {}\n\
         [[site]]\nhosts = [\"*.w.test\"]\nroot = {}\n",
        toml_path(&a),
        toml_path(&w)
    );
    let srv = b.config(&cfg).start();
    assert_eq!(get_host(&srv, "a.test", "/").body, b"site a\n");
    assert_eq!(get_host(&srv, "WWW.A.Test:8080", "/").body, b"site a\n");
    assert_eq!(get_host(&srv, "a.test.", "/only-a.txt").body, b"A\n");
    assert_eq!(get_host(&srv, "x.w.test", "/").body, b"wildcard\n");
    assert_eq!(get_host(&srv, "x.y.w.test", "/").body, b"wildcard\n");
    // No site names it and none is the default: the top-level root answers.
    let r = get_host(&srv, "w.test", "/");
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    assert_eq!(get_host(&srv, "other.test", "/").body, INDEX_HTML);
    assert_eq!(get_host(&srv, "other.test", "/only-a.txt").status, 404);
    // HTTP/1.0 without Host: the top-level root too.
    let r = srv.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(r.body, INDEX_HTML);
    // An absolute-form target's authority wins over Host (RFC 9112 §3.2.2).
    let r = srv.send(
        b"GET http://a.test/only-a.txt HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((r.status, r.body.as_slice()), (200, &b"A\n"[..]));
    srv.assert_alive();
}

fn the_default_site_takes_unknown_hosts(model: Model) {
    let b = Builder::new(model, "sites-default").no_echo();
    let a = site_root(&b, "a", &[("index.html", b"site a\n")]);
    let d = site_root(&b, "d", &[("index.html", b"default site\n")]);
    let cfg = format!(
        "[[site]]\nhosts = [\"a.test\"]\nroot = {}\n[[site]]\ndefault = true\nroot = {}\n",
        toml_path(&a),
        toml_path(&d)
    );
    let srv = b.config(&cfg).start();
    assert_eq!(get_host(&srv, "a.test", "/").body, b"site a\n");
    assert_eq!(get_host(&srv, "b.test", "/").body, b"default site\n");
    assert_eq!(srv.send(b"GET / HTTP/1.0\r\n\r\n").body, b"default site\n");
}

const SPA_INDEX: &[u8] = b"<p>the app</p>\n";
const NOT_FOUND_PAGE: &[u8] = b"<p>custom 404</p>\n";

fn locations_server(model: Model) -> Server {
    let b = Builder::new(model, "sites-locations").no_echo();
    let root = site_root(
        &b,
        "app",
        &[
            ("index.html", SPA_INDEX),
            ("about.html", b"about\n"),
            ("assets/app.js", b"js\n"),
            ("docs/page.txt", b"page\n"),
            ("docs/exact.txt", b"exact\n"),
            ("private/key.txt", b"secret\n"),
            ("private/open/ok.txt", b"ok\n"),
            ("404.html", NOT_FOUND_PAGE),
        ],
    );
    let cfg = format!(
        r#"
[[site]]
hosts = ["app.test"]
root = {root}
[site.errors]
404 = "/404.html"
403 = "/missing-403.html"
[[site.location]]
prefix = "/"
try_files = ["$path", "$path.html", "/index.html"]
[[site.location]]
prefix = "/assets/"
headers = {{ "Cache-Control" = "public, max-age=31536000, immutable", "X-Site" = "app" }}
[[site.location]]
prefix = "/docs/"
headers = {{ "X-Where" = "docs" }}
[[site.location]]
path = "/docs/exact.txt"
headers = {{ "X-Where" = "exact" }}
[[site.location]]
prefix = "/old/"
redirect = "301 https://new.test$path?$query"
[[site.location]]
path = "/gone"
redirect = "308 /elsewhere"
[[site.location]]
prefix = "/private/"
deny = true
[[site.location]]
prefix = "/private/open/"
[[site.location]]
prefix = "/strict/"
try_files = ["$path", "=410"]
"#,
        root = toml_path(&root)
    );
    b.config(&cfg).start()
}

fn locations_longest_prefix_exact_path_and_headers(model: Model) {
    let srv = locations_server(model);
    let r = get_host(&srv, "app.test", "/assets/app.js");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"js\n"[..]));
    assert_eq!(
        r.header("Cache-Control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(r.header("X-Site"), Some("app"));
    assert!(r.header("ETag").is_some() && r.header("Last-Modified").is_some());
    assert_eq!(r.header_count("Cache-Control"), 1);
    // HEAD carries the same fields and length.
    let h = head_host(&srv, "app.test", "/assets/app.js");
    assert_eq!(h.header("Content-Length"), Some("3"));
    let r = get_host(&srv, "app.test", "/docs/page.txt");
    assert_eq!((r.status, r.header("X-Where")), (200, Some("docs")));
    let r = get_host(&srv, "app.test", "/docs/exact.txt");
    assert_eq!((r.status, r.header("X-Where")), (200, Some("exact")));
    // The headers are the location's: another location's answers have none.
    assert_eq!(get_host(&srv, "app.test", "/about").header("X-Where"), None);
    // Another host is not this site.
    assert_eq!(get_host(&srv, "other.test", "/assets/app.js").status, 404);
}

fn redirects_substitute_path_and_query(model: Model) {
    let srv = locations_server(model);
    let r = get_host(&srv, "app.test", "/old/a/b.html?x=1&y=2");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("Location"),
        Some("https://new.test/old/a/b.html?x=1&y=2")
    );
    let r = get_host(&srv, "app.test", "/old/plain");
    assert_eq!(r.header("Location"), Some("https://new.test/old/plain"));
    let r = get_host(&srv, "app.test", "/gone");
    assert_eq!((r.status, r.header("Location")), (308, Some("/elsewhere")));
}

fn try_files_falls_back_to_the_app(model: Model) {
    let srv = locations_server(model);
    // The file itself, then `$path.html`, then the SPA's index for any other path.
    assert_eq!(get_host(&srv, "app.test", "/about.html").body, b"about\n");
    assert_eq!(get_host(&srv, "app.test", "/about").body, b"about\n");
    let r = get_host(&srv, "app.test", "/users/42/settings?tab=1");
    assert_eq!((r.status, r.body.as_slice()), (200, SPA_INDEX));
    assert_eq!(get_host(&srv, "app.test", "/").body, SPA_INDEX);
    // Candidates stay under the root.
    let r = get_host(&srv, "app.test", "/../secret.txt");
    assert_ne!(r.status, 200);
    assert!(!r.text().contains("TOP-SECRET"));
    let r = get_host(&srv, "app.test", "/%2e%2e/secret.txt");
    assert!(!r.text().contains("TOP-SECRET"), "{r:?}");
    // `=410` when nothing is there; the file when it is.
    assert_eq!(get_host(&srv, "app.test", "/strict/nothing").status, 410);
    srv.assert_alive();
}

fn deny_refuses_with_403_whatever_the_spelling(model: Model) {
    let srv = locations_server(model);
    for target in [
        "/private/key.txt",
        "/%70rivate/key.txt",
        "/x/../private/key.txt",
        "//private/key.txt",
        "/private/",
    ] {
        let r = get_host(&srv, "app.test", target);
        assert_eq!(r.status, 403, "{target}");
        assert!(!r.text().contains("secret"), "{target}");
    }
    // A longer prefix under it that does not deny.
    assert_eq!(
        get_host(&srv, "app.test", "/private/open/ok.txt").body,
        b"ok\n"
    );
    assert!(srv.log().contains("denied by location prefix /private/"));
}

fn error_pages_keep_the_status(model: Model) {
    let srv = locations_server(model);
    // `/strict/` gives 410, which has no page: the built-in one.
    let r = get_host(&srv, "app.test", "/strict/x");
    assert_eq!(r.status, 410);
    assert!(r.text().contains("410"));
    // A 404 of the site gets its page, with status 404. Only the exact location and
    // `/docs/` have no try_files, so a missing file under /docs/ is a 404.
    let r = get_host(&srv, "app.test", "/docs/missing.txt");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, NOT_FOUND_PAGE);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.header("X-Where"),
        Some("docs"),
        "the location's headers too"
    );
    // HEAD: the page's length, no body.
    let h = head_host(&srv, "app.test", "/docs/missing.txt");
    assert_eq!(h.status, 404);
    assert_eq!(
        h.header("Content-Length"),
        Some(&*NOT_FOUND_PAGE.len().to_string())
    );
    // Conditions of the request do not apply to the page.
    let r = srv.send(b"GET /docs/missing.txt HTTP/1.1\r\nHost: app.test\r\nIf-None-Match: *\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (404, NOT_FOUND_PAGE));
    // The 403 page is missing: the built-in body, still 403.
    let r = get_host(&srv, "app.test", "/private/key.txt");
    assert_eq!(r.status, 403);
    assert!(r.text().contains("403 Forbidden"), "{r:?}");
}

fn a_location_proxies_or_runs_cgi(model: Model) {
    let upstream = Builder::new(model, "sites-upstream")
        .no_echo()
        .file("api/hello.txt", b"from upstream\n")
        .start();
    let b = Builder::new(model, "sites-mounts").no_echo();
    let root = site_root(&b, "s", &[("index.html", b"s\n")]);
    let scripts = b.dir().join("scripts");
    fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("hi.sh");
    fs::write(
        &script,
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho \"hi $QUERY_STRING\"\n",
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = format!(
        "[[site]]\nhosts = [\"s.test\"]\nroot = {}\n\
         [[site.location]]\nprefix = \"/api/\"\nproxy = \"http://{}\"\n\
         [[site.location]]\nprefix = \"/run/\"\ncgi = {}\n",
        toml_path(&root),
        upstream.addr,
        toml_path(&scripts)
    );
    let srv = b.config(&cfg).start();
    let r = get_host(&srv, "s.test", "/api/hello.txt");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"from upstream\n"[..])
    );
    let r = get_host(&srv, "s.test", "/run/hi.sh?there");
    assert_eq!((r.status, r.text().as_str()), (200, "hi there\n"));
    // Neither mount exists for another host.
    assert_eq!(get_host(&srv, "t.test", "/api/hello.txt").status, 404);
    assert_eq!(get_host(&srv, "t.test", "/run/hi.sh").status, 404);
}

/// Two sites with the same file name answer each their own file from the one response cache
/// (the key holds the site), and a location's headers ride on a cached answer.
fn sites_share_the_cache_without_sharing_entries(model: Model) {
    let b = Builder::new(model, "sites-cache")
        .no_echo()
        .args(&["--status"]);
    let a = site_root(&b, "a", &[("same.txt", b"from a\n")]);
    let c = site_root(&b, "c", &[("same.txt", b"from c\n")]);
    let cfg = format!(
        "[[site]]\nhosts = [\"a.test\"]\nroot = {}\n\
         [[site]]\nhosts = [\"c.test\"]\nroot = {}\n\
         [[site.location]]\nprefix = \"/\"\nheaders = {{ \"X-Site\" = \"c\" }}\n",
        toml_path(&a),
        toml_path(&c)
    );
    let srv = b.config(&cfg).start();
    let cached = model.name != "process" && !model.cache_off();
    if cached {
        // A file is cached once settled (cache.rs SETTLE): ask until both are.
        let deadline = Instant::now() + Duration::from_secs(10);
        while srv.cache_counter("fills") < 2 {
            assert_eq!(get_host(&srv, "a.test", "/same.txt").body, b"from a\n");
            assert_eq!(get_host(&srv, "c.test", "/same.txt").body, b"from c\n");
            assert!(Instant::now() < deadline, "never cached");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let hits = if cached { srv.cache_counter("hits") } else { 0 };
    for _ in 0..3 {
        let r = get_host(&srv, "a.test", "/same.txt");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"from a\n"[..]));
        assert_eq!(r.header("X-Site"), None);
        let r = get_host(&srv, "c.test", "/same.txt");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"from c\n"[..]));
        assert_eq!(r.header("X-Site"), Some("c"));
        assert!(r.header("ETag").is_some());
    }
    if cached {
        assert!(
            srv.cache_counter("hits") >= hits + 6,
            "not answered from the cache"
        );
    }
}

/// A location's headers on a cached compressed variant keep what the variant says of itself:
/// `Content-Encoding`, `Vary`, and no `Accept-Ranges` (a variant is never sent in ranges);
/// the identity answer keeps its `Vary` and `Accept-Ranges`. Both decode to the file.
fn a_locations_headers_keep_a_cached_variants_encoding(model: Model) {
    use std::io::Read;
    let b = Builder::new(model, "sites-loc-gzip")
        .no_echo()
        .args(&["--status"]);
    let css: Vec<u8> = (0..2000)
        .map(|i| format!(".c{i} {{ color: red; margin: {i}px }}\n"))
        .collect::<String>()
        .into_bytes();
    let root = site_root(&b, "a", &[("assets/site.css", &css)]);
    let cfg = format!(
        "[compression]\nenabled = true\n\
         [[site]]\nhosts = [\"a.test\"]\nroot = {}\n\
         [[site.location]]\nprefix = \"/assets/\"\n\
         headers = {{ \"Cache-Control\" = \"public, max-age=60\" }}\n",
        toml_path(&root)
    );
    let srv = b.config(&cfg).start();
    let cached = model.name != "process" && !model.cache_off();
    let get = |coding: &str| {
        srv.send(
            format!(
                "GET /assets/site.css HTTP/1.1\r\nHost: a.test\r\nAccept-Encoding: {coding}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    let check = |round: usize| {
        let r = get("gzip");
        assert_eq!(r.status, 200, "round {round}");
        assert_eq!(
            r.header("Content-Encoding"),
            Some("gzip"),
            "round {round}: {:?}",
            r.headers
        );
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "round {round}");
        assert_eq!(r.header("Cache-Control"), Some("public, max-age=60"));
        assert_eq!(
            r.header("Accept-Ranges"),
            None,
            "round {round}: a variant in ranges"
        );
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&r.body[..])
            .read_to_end(&mut out)
            .expect("the gzip body decodes");
        assert!(
            out == css,
            "round {round}: the decoded body is not the file"
        );
        let r = get("identity");
        assert_eq!(r.status, 200, "round {round}");
        assert_eq!(r.header("Content-Encoding"), None, "round {round}");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "round {round}");
        assert_eq!(r.header("Accept-Ranges"), Some("bytes"), "round {round}");
        assert_eq!(r.header("Cache-Control"), Some("public, max-age=60"));
        assert!(r.body == css, "round {round}: not the file");
    };
    check(0);
    if cached {
        // A file is cached once settled (cache.rs SETTLE): ask until both forms are.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut round = 1;
        while srv.cache_counter("fills") < 1 || srv.cache_counter("compressions") < 1 {
            check(round);
            round += 1;
            assert!(Instant::now() < deadline, "never cached");
            std::thread::sleep(Duration::from_millis(50));
        }
        let hits = srv.cache_counter("hits");
        let variant_hits = srv.cache_counter("variant_hits");
        check(round);
        assert!(
            srv.cache_counter("hits") >= hits + 2,
            "not answered from the cache"
        );
        assert!(
            srv.cache_counter("variant_hits") > variant_hits,
            "the variant was not answered from the cache"
        );
    }
}

/// Sends `raw` on a new connection, half-closes, and reads every response until the server
/// closes: their statuses, and how reading ended if not with a clean close.
fn exchange(srv: &Server, raw: &[u8]) -> (Vec<u16>, Option<String>) {
    let head = raw.starts_with(b"HEAD ");
    let mut c = srv.connect();
    // The server may refuse (and close) before reading everything: a failed write is fine.
    let _ = c.try_send(raw);
    c.shutdown_write();
    let mut statuses = Vec::new();
    loop {
        match c.read_response_for(head) {
            Ok(r) => statuses.push(r.status),
            Err(ReadError::Closed) => return (statuses, None),
            Err(e) => return (statuses, Some(format!("{e:?}"))),
        }
    }
}

/// The request vectors of `vectors.rs` (Apache's strict-mode rows and llhttp's requests) get
/// the same statuses from a server whose requests all go through a site and a location as from
/// one without sites: routing changes nothing of the protocol.
fn the_request_vectors_answer_the_same_with_sites(model: Model) {
    use serde_json::Value;
    let plain = Builder::new(model, "sites-vectors-plain").start();
    let b = Builder::new(model, "sites-vectors");
    let root = b.dir().join("root");
    let other = site_root(&b, "other", &[("index.html", b"other\n")]);
    let cfg = format!(
        "[[site]]\nhosts = [\"other.test\", \"*.other.test\"]\nroot = {}\n\
         [[site]]\ndefault = true\nroot = {}\n\
         [[site.location]]\nprefix = \"/\"\nheaders = {{ \"X-Site\" = \"default\" }}\n\
         [[site.location]]\npath = \"/exact\"\n",
        toml_path(&other),
        toml_path(&root)
    );
    let with_sites = b.config(&cfg).start();
    let latin1 = |s: &str| -> Vec<u8> {
        s.chars()
            .map(|c| u8::try_from(u32::from(c)).expect("latin-1 request"))
            .collect()
    };
    let mut requests: Vec<Vec<u8>> = Vec::new();
    let apache: Vec<Value> =
        serde_json::from_str(include_str!("../vectors/apache-httpd-http-strict.json")).unwrap();
    for row in &apache {
        let r = row["request_latin1"].as_str().unwrap();
        // Response lines for a CGI fixture, not requests (see vectors.rs).
        if !r.starts_with('R') {
            requests.push(latin1(r));
        }
    }
    let llhttp: Vec<Value> =
        serde_json::from_str(include_str!("../vectors/llhttp-request.json")).unwrap();
    for row in &llhttp {
        if row["type"] == "request" {
            requests.push(row["raw"].as_str().unwrap().as_bytes().to_vec());
        }
    }
    assert!(requests.len() > 200, "{}", requests.len());
    let mut differ = Vec::new();
    for raw in &requests {
        let want = exchange(&plain, raw);
        let got = exchange(&with_sites, raw);
        if want != got {
            differ.push(format!(
                "{:?}: without sites {want:?}, with sites {got:?}",
                String::from_utf8_lossy(raw)
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    with_sites.assert_alive();
}

/// `[compression]` reaches every site's files: each site's page comes back gzip'd with `Vary`,
/// decodes to that site's own bytes (never the other site's variant under the same path), and
/// a repeat request gets the same bytes.
fn sites_files_are_compressed_per_site(model: Model) {
    use std::io::Read;
    let b = Builder::new(model, "sites-compress").no_echo();
    let page = |tag: &str| -> Vec<u8> {
        (0..300)
            .map(|i| format!("<p>{tag} paragraph {i}</p>\n"))
            .collect::<String>()
            .into_bytes()
    };
    let (pa, pb) = (page("site a"), page("site b"));
    let a = site_root(&b, "a", &[("page.html", &pa)]);
    let bb = site_root(&b, "b", &[("page.html", &pb)]);
    let cfg = format!(
        "[compression]\nenabled = true\n\
         [[site]]\nhosts = [\"a.test\"]\nroot = {}\n\
         [[site]]\nhosts = [\"b.test\"]\nroot = {}\n",
        toml_path(&a),
        toml_path(&bb)
    );
    let srv = b.config(&cfg).start();
    for round in 0..2 {
        for (host, want) in [("a.test", &pa), ("b.test", &pb)] {
            let r = srv.send(
                format!(
                    "GET /page.html HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\n\
                     Connection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            assert_eq!(r.status, 200, "{host} round {round}");
            assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{host}");
            assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{host}");
            assert!(r.body.len() < want.len() / 2, "{host}: not compressed");
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&r.body[..])
                .read_to_end(&mut out)
                .expect("gzip body decodes");
            assert!(&out == want, "{host} round {round}: another site's bytes");
        }
    }
}

/// nginx's `allow`/`deny`: read in order, the first match deciding, against the client
/// `real_ip_from` names; a location's rules replace its site's, a site's the top level's.
fn access_rules_allow_and_deny_in_order_per_site_and_location(model: Model) {
    let b = Builder::new(model, "sites-access").no_echo();
    let root = site_root(
        &b,
        "a",
        &[
            ("index.html", b"site a"),
            ("open/x.txt", b"open"),
            ("closed/x.txt", b"closed"),
        ],
    );
    let srv = b
        .config(&format!(
            "real_ip_from = [\"127.0.0.1/32\"]\naccess = [\"deny 203.0.113.0/24\"]\n\
             [[site]]\nhosts = [\"a.test\"]\nroot = {root}\n\
             access = [\"allow 10.0.0.0/8\", \"deny all\"]\n\
             [[site.location]]\nprefix = \"/open/\"\naccess = [\"allow all\"]\n\
             [[site.location]]\nprefix = \"/closed/\"\n\
             access = [\"deny 10.9.0.0/16\", \"allow all\"]\n",
            root = toml_path(&root)
        ))
        .start();
    let from = |host: &str, path: &str, client: &str| {
        srv.send(
            format!(
                "GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Forwarded-For: {client}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .status
    };
    // No site: the top-level rules.
    assert_eq!(from("other.test", "/", "203.0.113.5"), 403);
    assert_eq!(from("other.test", "/", "198.51.100.1"), 200);
    // The site's own rules replace them.
    assert_eq!(from("a.test", "/", "10.1.2.3"), 200);
    assert_eq!(from("a.test", "/", "198.51.100.1"), 403);
    assert_eq!(from("a.test", "/", "203.0.113.5"), 403);
    // A location's own rules replace the site's.
    assert_eq!(from("a.test", "/open/x.txt", "198.51.100.1"), 200);
    assert_eq!(from("a.test", "/closed/x.txt", "10.9.1.1"), 403);
    assert_eq!(from("a.test", "/closed/x.txt", "198.51.100.1"), 200);
    // The same path spelled otherwise meets the same location.
    assert_eq!(from("a.test", "/%63losed/x.txt", "10.9.1.1"), 403);
    assert!(
        srv.log().contains("refused by the access rules"),
        "{}",
        srv.log()
    );
}

/// An htpasswd file as `htpasswd -nbm alice secret`, `-nbB -C 5 bob 'secret two'` and
/// `-nbs carol sécret3` write it.
const HTPASSWD: &str = "alice:$apr1$eseoq7.K$/R8ebXT1g.cdxguF6C3DI.\n\
    bob:$2y$05$aY5IS5QAeTuIMKHDMxSMG.d5ejFSdDcYcENNvP1uMChqU7e2psQ56\n\
    carol:{SHA}1kzdDlY3j+M4WdOmI2I50pZfKJ0=\n";

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        weft_http::auth::base64_encode(format!("{user}:{password}").as_bytes())
    )
}

/// nginx's auth_basic with auth_basic_user_file: 401 with the realm until a user of the file
/// gives the right password, whatever hash the file keeps; a location's file in place of the
/// site's; plain HTTP refused where allow_plain is off; the credentials never in a log.
fn basic_auth_per_site_and_location_from_htpasswd_files(model: Model) {
    let b = Builder::new(model, "sites-auth").no_echo();
    let root = site_root(
        &b,
        "a",
        &[("index.html", b"staff only"), ("admin/x.txt", b"admin")],
    );
    let users = b.dir().join("htpasswd");
    fs::write(&users, HTPASSWD).unwrap();
    let admins = b.dir().join("admins");
    fs::write(&admins, "carol:{SHA}1kzdDlY3j+M4WdOmI2I50pZfKJ0=\n").unwrap();
    let access_log = b.dir().join("access.log");
    let srv = b
        .config(&format!(
            "access_log = {log}\n\
             [[site]]\nhosts = [\"a.test\"]\nroot = {root}\n\
             [site.auth]\nrealm = \"Staff\"\nusers = {users}\nallow_plain = true\n\
             [[site.location]]\nprefix = \"/admin/\"\n\
             auth = {{ realm = \"Admins\", users = {admins}, allow_plain = true }}\n\
             [[site]]\nhosts = [\"tls-only.test\"]\nroot = {root}\n\
             [site.auth]\nusers = {users}\n",
            log = toml_path(&access_log),
            root = toml_path(&root),
            users = toml_path(&users),
            admins = toml_path(&admins),
        ))
        .start();
    let get = |host: &str, path: &str, auth: Option<&str>| {
        let field = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
        srv.send(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{field}Connection: close\r\n\r\n")
                .as_bytes(),
        )
    };
    let r = get("a.test", "/", None);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some("Basic realm=\"Staff\", charset=\"UTF-8\"")
    );
    for (user, pw) in [
        ("alice", "secret"),
        ("bob", "secret two"),
        ("carol", "sécret3"),
    ] {
        let r = get("a.test", "/", Some(&basic(user, pw)));
        assert_eq!((r.status, r.text().as_str()), (200, "staff only"), "{user}");
    }
    // Again: remembered, the same answer.
    assert_eq!(
        get("a.test", "/", Some(&basic("bob", "secret two"))).status,
        200
    );
    for (user, pw) in [
        ("alice", "Secret"),
        ("bob", "secret"),
        ("mallory", "secret"),
    ] {
        assert_eq!(
            get("a.test", "/", Some(&basic(user, pw))).status,
            401,
            "{user}"
        );
    }
    assert_eq!(get("a.test", "/", Some("Bearer abc")).status, 401);
    // The location's own file: alice is not in it.
    let r = get("a.test", "/admin/x.txt", Some(&basic("alice", "secret")));
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some("Basic realm=\"Admins\", charset=\"UTF-8\"")
    );
    let r = get("a.test", "/admin/x.txt", Some(&basic("carol", "sécret3")));
    assert_eq!((r.status, r.text().as_str()), (200, "admin"));
    // Without allow_plain, plain HTTP is refused before any password is asked for.
    let r = get("tls-only.test", "/", Some(&basic("alice", "secret")));
    assert_eq!(r.status, 403);
    assert_eq!(r.header("WWW-Authenticate"), None);
    let log = srv.log();
    assert!(log.contains("unknown user \"mallory\""), "{log}");
    assert!(log.contains("came over plain HTTP"), "{log}");
    let logs = format!(
        "{log}{}",
        fs::read_to_string(&access_log).unwrap_or_default()
    );
    for secret in ["secret", "Secret", &basic("alice", "secret")[6..]] {
        assert!(!logs.contains(secret), "{secret:?} logged:\n{logs}");
    }
}

/// A failed attempt counts as five requests against `[rate_limit]`: with a burst of 10, the
/// fourth wrong password meets 429, where eleven right ones would pass.
fn a_wrong_password_costs_five_requests_of_the_rate(model: Model) {
    let b = Builder::new(model, "sites-auth-rate").no_echo();
    let root = site_root(&b, "a", &[("index.html", b"staff only")]);
    let users = b.dir().join("htpasswd");
    fs::write(&users, HTPASSWD).unwrap();
    let srv = b
        .config(&format!(
            "[rate_limit]\nrate = \"1r/s\"\nburst = 10\n\
             [[site]]\nhosts = [\"a.test\"]\nroot = {root}\n\
             [site.auth]\nusers = {users}\nallow_plain = true\n",
            root = toml_path(&root),
            users = toml_path(&users),
        ))
        .start();
    let get = |auth: &str| {
        srv.send(
            format!("GET / HTTP/1.1\r\nHost: a.test\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .status
    };
    // The burst lets 11 requests through at once; three wrong passwords spend 15 of them.
    let wrong = basic("alice", "guess");
    let statuses: Vec<u16> = (0..4).map(|_| get(&wrong)).collect();
    assert_eq!(statuses, [401, 401, 401, 429]);
}

/// nginx's `location ~`, `^~`, `rewrite ... permanent` and `rewrite ... last`, translated.
fn regex_locations_redirects_and_rewrites(model: Model) {
    let b = Builder::new(model, "sites-regex").no_echo();
    let root = site_root(
        &b,
        "r",
        &[
            ("users.txt", b"users"),
            ("a.secret", b"hidden"),
            ("assets/x.secret", b"asset"),
        ],
    );
    let srv = b
        .config(&format!(
            "[[site]]\nhosts = [\"r.test\"]\nroot = {root}\n\
             [[site.location]]\nregex = '^/old/(.*)$'\nredirect = \"301 /new/$1\"\n\
             [[site.location]]\nregex = '^/u/([0-9]+)$'\nrewrite = \"/users.txt?id=$1\"\n\
             [[site.location]]\nregex = '(?i)\\.secret$'\ndeny = true\n\
             [[site.location]]\nprefix = \"/assets/\"\nskip_regex = true\n\
             [[site.location]]\nregex = '^/loop$'\nrewrite = \"/loop\"\n",
            root = toml_path(&root)
        ))
        .start();
    let r = get_host(&srv, "r.test", "/old/a/b.html?q=1");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("Location"), Some("/new/a/b.html"));
    let r = get_host(&srv, "r.test", "/u/42");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "users"),
        "an internal rewrite"
    );
    assert_eq!(
        get_host(&srv, "r.test", "/u/x").status,
        404,
        "no match: no rewrite"
    );
    assert_eq!(get_host(&srv, "r.test", "/a.secret").status, 403);
    assert_eq!(get_host(&srv, "r.test", "/A.SECRET").status, 403, "(?i)");
    assert_eq!(
        get_host(&srv, "r.test", "/%61.secret").status,
        403,
        "decoded first"
    );
    let r = get_host(&srv, "r.test", "/assets/x.secret");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "asset"),
        "skip_regex (^~)"
    );
    // A rewrite to itself ends at limits.max_internal_redirects with 500, not a hang.
    assert_eq!(get_host(&srv, "r.test", "/loop").status, 500);
    assert!(
        srv.log().contains("internal redirect to \"/loop\" refused"),
        "{}",
        srv.log()
    );
}
