use super::*;

fn cfg(text: &str) -> Result<Config, String> {
    Config::from_toml(text).map_err(|e| e.to_string())
}

fn router(text: &str) -> Router {
    Router::new(&cfg(text).expect("valid").site).expect("compiles")
}

const HOSTS: &str = r#"
[[site]]
hosts = ["example.test", "www.example.test"]
root = "/srv/a"
[[site]]
hosts = ["*.example.test"]
root = "/srv/b"
[[site]]
hosts = ["*.deep.example.test", "Other.TEST"]
root = "/srv/c"
"#;

#[test]
fn hosts_exact_then_longest_wildcard_then_default() {
    let r = router(HOSTS);
    assert_eq!(r.site(b"example.test"), Some(0));
    assert_eq!(r.site(b"WWW.Example.Test:8080"), Some(0));
    assert_eq!(r.site(b"example.test."), Some(0));
    assert_eq!(r.site(b"a.example.test"), Some(1));
    assert_eq!(r.site(b"a.b.example.test"), Some(1));
    assert_eq!(r.site(b"x.deep.example.test"), Some(2), "longest wildcard");
    assert_eq!(r.site(b"deep.example.test"), Some(1));
    assert_eq!(r.site(b"other.test"), Some(2));
    // No default site: the top-level settings.
    assert_eq!(r.site(b"unknown.test"), None);
    assert_eq!(r.site(b"example.test.evil"), None);
    assert_eq!(r.site(b""), None);
    let with_default = router(&format!(
        "{HOSTS}[[site]]\ndefault = true\nroot = \"/srv/d\"\n"
    ));
    assert_eq!(with_default.site(b"unknown.test"), Some(3));
    assert_eq!(with_default.site(b""), Some(3));
    assert_eq!(with_default.site(b"example.test"), Some(0));
}

#[test]
fn misdirected_as_nginx() {
    let r = router(&format!(
        "{HOSTS}[[site]]\ndefault = true\nroot = \"/srv/d\"\n"
    ));
    assert!(!r.misdirected(None, b"other.test"), "no SNI, no check");
    assert!(!r.misdirected(Some(b"example.test"), b"www.example.test:443"));
    assert!(!r.misdirected(Some(b"a.example.test"), b"b.example.test"));
    assert!(r.misdirected(Some(b"example.test"), b"other.test"));
    assert!(r.misdirected(Some(b"example.test"), b"nobody.test"));
    assert!(
        !r.misdirected(Some(b"nobody.test"), b"elsewhere.test"),
        "both default"
    );
}

const LOCATIONS: &str = r#"
[[site]]
hosts = ["example.test"]
root = "/srv/a"
[[site.location]]
prefix = "/"
[[site.location]]
prefix = "/admin/"
deny = true
[[site.location]]
prefix = "/admin/public/"
[[site.location]]
path = "/admin/"
headers = { "X-Exact" = "1" }
[[site.location]]
prefix = "/app"
"#;

#[test]
fn exact_beats_prefix_and_the_longest_prefix_wins() {
    let r = router(LOCATIONS);
    let loc = |p: &str| r.route(b"example.test", p).expect("site").1;
    assert_eq!(loc("/"), Some(0));
    assert_eq!(loc("/index.html"), Some(0));
    assert_eq!(loc("/admin/x"), Some(1));
    assert_eq!(loc("/admin/public/x"), Some(2));
    assert_eq!(loc("/admin/"), Some(3), "exact path beats every prefix");
    assert_eq!(loc("/admin"), Some(0));
    assert_eq!(loc("/apple"), Some(4));
    // Matched on the normal form: escapes and dot segments cannot dodge a location.
    assert_eq!(loc("/%61dmin/x"), Some(1));
    assert_eq!(loc("/x/../admin/y"), Some(1));
    assert_eq!(loc("//admin/y"), Some(1));
    assert_eq!(loc("/admin/./public/z"), Some(2));
    // A path that does not normalise has no location (the handlers refuse it as before).
    assert_eq!(loc("/../etc/passwd"), None);
    assert_eq!(loc("*"), None);
}

#[test]
fn templates_fill_path_and_query() {
    let t = Template::parse("https://example.test$path?$query").unwrap();
    assert_eq!(
        t.render("/a/b", Some("x=1")),
        "https://example.test/a/b?x=1"
    );
    assert_eq!(t.render("/a/b", None), "https://example.test/a/b");
    assert_eq!(t.render("/a/b", Some("")), "https://example.test/a/b");
    let t = Template::parse("/new$path.html").unwrap();
    assert_eq!(t.render("/p", Some("q")), "/new/p.html");
    assert!(Template::parse("/x$uri").is_err());
    assert!(Template::parse("/x$").is_err());
    assert_eq!(
        Template::parse("/plain").unwrap().render("/p", None),
        "/plain"
    );
}

#[test]
fn redirects_and_try_files_parse() {
    let r = router(
        r#"
[[site]]
hosts = ["a.test"]
root = "/srv/a"
[[site.location]]
prefix = "/old/"
redirect = "308 https://new.test$path?$query"
[[site.location]]
prefix = "/"
try_files = ["$path", "$path.html", "/index.html"]
[[site.location]]
prefix = "/strict/"
try_files = ["$path", "=410"]
"#,
    );
    let rules = &r.sites[0].rules;
    assert!(matches!(
        rules[0].action,
        Action::Redirect { status: 308, .. }
    ));
    match &rules[1].action {
        Action::TryFiles { files, last } => {
            assert_eq!(files.len(), 2);
            assert!(matches!(last, Last::Uri(_)));
        }
        other => panic!("{other:?}"),
    }
    match &rules[2].action {
        Action::TryFiles { last, .. } => assert_eq!(last, &Last::Status(410)),
        other => panic!("{other:?}"),
    }
}

/// A configuration with `site` after a first line, so every error's line is known.
fn refused(site: &str) -> String {
    cfg(&format!("root = \"www\"\n{site}")).expect_err("refused")
}

#[test]
fn bad_sites_are_refused_with_their_line_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site]]\nhosts = [\"b.test\", \"A.test\"]\n",
            "line 5, column 20: site[1].hosts[1]: overlapping hosts: `A.test` is also a host of site[0]",
        ),
        (
            "[[site]]\nhosts = [\"*.a.test\"]\n[[site]]\nhosts = [\"*.a.test\"]\n",
            "line 5, column 10: site[1].hosts[0]: overlapping hosts: `*.a.test` is also a host of site[0]",
        ),
        (
            "[[site]]\ndefault = true\n[[site]]\ndefault = true\n",
            "line 5, column 11: site[1].default: site[0] is already the default site",
        ),
        (
            "[[site]]\nhosts = [\"a.test:8080\"]\n",
            "line 3, column 10: site[0].hosts[0]: `a.test:8080` is not a host name (a name like `example.test`, or `*.example.test`; no port)",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.location]]\nprefix = \"/x/\"\n",
            "line 5, column 10: site[0].location[0].prefix: this location serves files but its site has no `root`",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\nheaders = { \"Content-Length\" = \"3\" }\n",
            "line 7, column 13: site[0].location[0].headers.Content-Length: `Content-Length` is set by the server for each response; a location cannot set it",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\nheaders = { \"Bad Name\" = \"3\" }\n",
            "line 7, column 13: site[0].location[0].headers.Bad Name: `Bad Name` is not a header field name",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.location]]\nprefix = \"/x/\"\nredirect = \"305 /y\"\n",
            "line 6, column 12: site[0].location[0].redirect: status 305: a redirect is 301, 302, 303, 307 or 308",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[[site.location]]\nprefix = \"/x/\"\nredirect = \"301 /y$host\"\n",
            "line 6, column 12: site[0].location[0].redirect: unknown variable `$host` (use $path, $query, or $1 to $9 in a regex location)",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\ntry_files = [\"$path\", \"=200\"]\n",
            "line 7, column 23: site[0].location[0].try_files[1]: `=200`: expected =CODE with an error status (400 to 599)",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\ndeny = true\nproxy = \"http://127.0.0.1:1\"\n",
            "line 8, column 9: site[0].location[0].proxy: a location does one thing; this one has deny and proxy",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/../y/\"\n",
            "line 6, column 10: site[0].location[0].prefix: `/x/../y/` must be a path in normal form (starting with `/`, no `%`, `.` or `..` segments, no `//`)",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\nprefix = \"/x/\"\n[[site.location]]\nprefix = \"/x/\"\n",
            "line 8, column 10: site[0].location[1].prefix: another location of this site has prefix /x/",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\n[site.errors]\n404 = \"/404.html\"\n",
            "line 5, column 1: site[0].errors.404: error pages are files: the site needs a `root`",
        ),
        (
            "[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[site.errors]\n302 = \"/x.html\"\n",
            "line 6, column 1: site[0].errors.302: `302` is not an error status (400 to 599)",
        ),
        (
            "[[site]]\nroot = \"/srv\"\n",
            "line 2, column 1: site[0]: a site needs `hosts` or `default = true`",
        ),
    ];
    let mut wrong = Vec::new();
    for (site, want) in cases {
        let got = refused(site);
        if &got != want {
            wrong.push(format!("{site}\n  got:  {got}\n  want: {want}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Unknown keys are serde's refusal, with the same position rules as every section.
    let err = refused(
        "[[site]]\nhosts = [\"a.test\"]\n[[site.location]]\nprefix = \"/\"\nallow = true\n",
    );
    assert!(
        err.starts_with("line 6, column 1: site.location.allow: unknown field `allow`")
            || err
                .starts_with("line 6, column 1: site[0].location[0].allow: unknown field `allow`"),
        "{err}"
    );
}

#[test]
fn a_config_with_sites_reads_back_the_same() {
    let c = cfg(r#"
root = "www"
[[site]]
hosts = ["a.test", "*.a.test"]
root = "/srv/a"
[site.static_files]
autoindex = true
[[site.proxy]]
prefix = "/api/"
upstream = "http://127.0.0.1:9000"
[[site.location]]
prefix = "/assets/"
headers = { "Cache-Control" = "max-age=3600" }
[[site.location]]
path = "/old"
redirect = "301 /new$path?$query"
[site.errors]
404 = "/404.html"
[[site]]
default = true
root = "/srv/d"
"#)
    .unwrap();
    assert_eq!(c.site.len(), 2);
    assert!(c.site[0].static_files.as_ref().unwrap().autoindex);
    assert_eq!(c.site[0].errors["404"], "/404.html");
    let text = c.to_toml().unwrap();
    assert_eq!(cfg(&text).unwrap(), c, "{text}");
    assert!(!Config::default().to_toml().unwrap().contains("site"));
}

#[test]
fn builtin_error_pages_are_recognised() {
    for status in [400, 403, 404, 405, 421, 500, 502] {
        assert!(is_builtin_error(&Response::error(status)), "{status}");
    }
    assert!(!is_builtin_error(&Response::text(404, "upstream says no")));
}

fn request(raw: &str) -> Request {
    let mut p = Parser::new(weft_http::Limits::default());
    let n = p.parse(raw.as_bytes()).unwrap().expect("complete");
    assert_eq!(n, raw.len());
    let addr = "127.0.0.1:1".parse().unwrap();
    Request::new(raw.as_bytes().to_vec(), p.take_head(), addr, addr)
}

#[test]
fn the_host_is_the_absolute_targets_authority_else_the_host_field() {
    let r = request("GET /x HTTP/1.1\r\nHost: a.test:8080\r\n\r\n");
    assert_eq!(request_host(&r), b"a.test:8080");
    let r = request("GET http://b.test/x?y HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(request_host(&r), b"b.test");
    let r = request("GET http://c.test:81 HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(request_host(&r), b"c.test:81");
    let r = request("GET /x HTTP/1.0\r\n\r\n");
    assert_eq!(request_host(&r), b"");
}

#[test]
fn an_internal_redirect_keeps_method_and_fields() {
    let r = request("POST /app/x?q HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n");
    let next = internal_request(&r, "/index.html", weft_http::Limits::default()).unwrap();
    assert_eq!(next.method_str(), "POST");
    assert_eq!(next.path(), "/index.html");
    assert_eq!(next.header_str("host"), Some("a.test"));
    assert!(internal_request(&r, "no space allowed ", weft_http::Limits::default()).is_none());
}

#[test]
fn headers_replace_and_add() {
    let resp = Response::new(200)
        .header("Cache-Control", "no-store")
        .header("X-Keep", "1");
    let out = with_headers(
        resp,
        &[
            ("cache-control".into(), "max-age=60".into()),
            ("X-New".into(), "2".into()),
        ],
    );
    assert_eq!(out.get_header("Cache-Control"), Some(&b"max-age=60"[..]));
    assert_eq!(out.get_header("X-Keep"), Some(&b"1"[..]));
    assert_eq!(out.get_header("X-New"), Some(&b"2"[..]));
    assert_eq!(
        out.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
            .count(),
        1
    );
}

/// The example in `deploy/` is a configuration weft reads, routed as its comments say.
#[test]
fn the_deploy_example_reads_and_routes_as_documented() {
    let text = include_str!("../../../../../deploy/sites.toml");
    let c = cfg(text).expect("deploy/sites.toml is valid");
    assert_eq!(c.site.len(), 3);
    let r = Router::new(&c.site).expect("compiles");
    let route = |host: &str, path: &str| r.route(host.as_bytes(), path);
    let loc = |site: usize, k: usize| &c.site[site].location[k];
    let (s, l) = route("www.example.test", "/assets/app.css").unwrap();
    assert_eq!(s, 0);
    assert!(loc(s, l.unwrap()).headers.contains_key("Cache-Control"));
    let (s, l) = route("example.test", "/old").unwrap();
    assert!(loc(s, l.unwrap()).redirect.is_some());
    let (s, l) = route("example.test", "/app/settings/").unwrap();
    assert!(!loc(s, l.unwrap()).try_files.is_empty());
    let (s, l) = route("example.test", "/%70rivate/key").unwrap();
    assert!(loc(s, l.unwrap()).deny);
    assert_eq!(route("example.test", "/about.html"), Some((0, None)));
    let (s, l) = route("a.blog.test", "/cgi-bin/feed").unwrap();
    assert_eq!(s, 1);
    assert!(loc(s, l.unwrap()).cgi.is_some());
    assert_eq!(route("blog.test", "/"), Some((1, None)));
    let (s, l) = route("unknown.test", "/x").unwrap();
    assert_eq!(s, 2);
    assert!(loc(s, l.unwrap()).redirect.is_some());
    assert_eq!(r.site(b"example.test"), Some(0));
}

/// docs/sites.md's example is a configuration weft reads.
#[test]
fn the_docs_sites_example_reads() {
    let section = include_str!("../../../../../docs/sites.md");
    let start = section.find("```toml\n").expect("its TOML block") + "```toml\n".len();
    let len = section[start..].find("```").unwrap();
    let c = cfg(&section[start..start + len]).unwrap_or_else(|e| panic!("docs/sites.md: {e}"));
    assert_eq!(c.site.len(), 2);
    assert!(c.site[1].default);
    let r = Router::new(&c.site).expect("compiles");
    assert_eq!(
        r.route(b"a.example.test", "/assets/x.css"),
        Some((0, Some(0)))
    );
    assert_eq!(r.route(b"elsewhere.test", "/"), Some((1, None)));
}

/// nginx's order (its documentation's example of `location =`, `^~`, `~*` and a prefix):
/// an exact path, else the longest prefix if it says `skip_regex` (`^~`), else the first
/// regex in the file's order, else the longest prefix.
const REGEXES: &str = r#"
[[site]]
hosts = ["example.test"]
root = "/srv/a"
[[site.location]]
path = "/"
[[site.location]]
prefix = "/"
[[site.location]]
prefix = "/documents/"
[[site.location]]
prefix = "/images/"
skip_regex = true
[[site.location]]
regex = '(?i)\.(gif|jpg|jpeg)$'
[[site.location]]
regex = '\.php$'
[[site.location]]
regex = '^/old/(.*)$'
redirect = "301 /new/$1"
"#;

#[test]
fn regex_locations_in_nginx_order() {
    let r = router(REGEXES);
    let loc = |p: &str| r.route(b"example.test", p).expect("site").1;
    // nginx's documented outcomes: / -> A, /index.html -> B, /documents/document.html -> C,
    // /images/1.gif -> D (^~), /documents/1.jpg -> E (the regex beats the prefix).
    assert_eq!(loc("/"), Some(0));
    assert_eq!(loc("/index.html"), Some(1));
    assert_eq!(loc("/documents/document.html"), Some(2));
    assert_eq!(loc("/images/1.gif"), Some(3));
    assert_eq!(loc("/documents/1.jpg"), Some(4));
    assert_eq!(loc("/documents/1.JPG"), Some(4), "(?i): location ~*");
    assert_eq!(loc("/a/b.php"), Some(5));
    // The first regex in order wins where two match.
    assert_eq!(loc("/old/x.gif"), Some(4));
    assert_eq!(loc("/old/x.txt"), Some(6));
    // Matched on the decoded, normalised path.
    assert_eq!(loc("/x/%2E%2E/a.php"), Some(5));
    assert_eq!(loc("/a%2Ephp"), Some(5));
}

#[test]
fn captures_fill_redirects_and_bad_regexes_are_refused() {
    let r = router(REGEXES);
    let rules = &r.sites[0].rules[6];
    let caps: Vec<String> = rules
        .regex
        .as_ref()
        .unwrap()
        .captures(b"/old/a/b.html")
        .unwrap()
        .iter()
        .map(|m| String::from_utf8_lossy(m.unwrap().as_bytes()).into_owned())
        .collect();
    let Action::Redirect { target, .. } = &rules.action else {
        panic!("a redirect");
    };
    assert_eq!(
        target.render_with("/old/a/b.html", None, &caps),
        "/new/a/b.html"
    );
    for (bad, why) in [
        ("regex = '(unclosed'", "regex"),
        ("regex = '^/a$'\nprefix = \"/a\"", "exactly one"),
        ("prefix = \"/x/\"\nredirect = \"301 /y/$1\"", "group"),
        ("regex = '^/a/(.*)$'\nredirect = \"301 /y/$2\"", "group"),
        ("regex = '^/a$'\nskip_regex = true", "skip_regex"),
        ("regex = '^/a$'\nrewrite = \"nope\"", "rewrite"),
    ] {
        let text =
            format!("[[site]]\nhosts = [\"a.test\"]\nroot = \"/srv\"\n[[site.location]]\n{bad}\n");
        let e = cfg(&text).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}
