//! The invariants of the fuzz targets over the server crate (weft): its TLS session wrapper,
//! the client address behind trusted proxies, and the site router. `crates/server/tests/
//! fuzz_corpus.rs` replays the committed corpora through these same functions.

use std::path::PathBuf;
use std::sync::OnceLock;

use weft::sites::{LocationConfig, Router, SiteConfig};

/// Arbitrary bytes as a TLS client's into a server session (`weft::fuzzing::tls_records`).
pub fn tls_records(data: &[u8]) {
    weft::fuzzing::tls_records(data);
}

/// Arbitrary `X-Forwarded-For` values behind a trusted peer (`weft::fuzzing::real_ip`).
pub fn real_ip(data: &[u8]) {
    weft::fuzzing::real_ip(data);
}

/// A fixed table of sites and locations (exact, wildcard and default hosts; exact, prefix
/// and regex locations).
fn router() -> &'static (Router, Vec<SiteConfig>) {
    static R: OnceLock<(Router, Vec<SiteConfig>)> = OnceLock::new();
    R.get_or_init(|| {
        let loc = |prefix: Option<&str>, path: Option<&str>, regex: Option<&str>| LocationConfig {
            prefix: prefix.map(Into::into),
            path: path.map(Into::into),
            regex: regex.map(Into::into),
            ..LocationConfig::default()
        };
        let sites = vec![
            SiteConfig {
                hosts: vec!["example.test".into(), "*.example.test".into()],
                root: Some(PathBuf::from("/srv/a")),
                location: vec![
                    loc(Some("/"), None, None),
                    loc(Some("/admin/"), None, None),
                    loc(None, Some("/exact"), None),
                    loc(None, None, Some(r"(?i)\.(gif|jpe?g)$")),
                    loc(None, None, Some(r"^/u/(\d+)$")),
                ],
                ..SiteConfig::default()
            },
            SiteConfig {
                hosts: vec!["[::1]".into(), "b.test".into()],
                root: Some(PathBuf::from("/srv/b")),
                location: vec![loc(Some("/api/"), None, None)],
                ..SiteConfig::default()
            },
            SiteConfig {
                default: true,
                root: Some(PathBuf::from("/srv/default")),
                ..SiteConfig::default()
            },
        ];
        (Router::new(&sites).expect("valid sites"), sites)
    })
}

/// A request's host (up to the first newline) and path (the rest, as UTF-8) through the
/// router: the answer is the same twice, names a site and a location that exist, and every
/// host gets a site (there is a default one).
pub fn site_router(data: &[u8]) {
    let (router, sites) = router();
    let (host, path) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"/"[..]),
    };
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    let got = router.route(host, path);
    assert_eq!(got, router.route(host, path));
    let (site, location) = got.expect("the default site answers what no other does");
    assert!(site < sites.len());
    if let Some(l) = location {
        assert!(l < sites[site].location.len());
    }
}
