//! The cost of choosing a site and a location per request (`sites::Router::route`, what
//! `[[site]]` adds to `App::handle`): one site with one location against 50 sites with 10
//! locations each (issue 23's target: at most 100 ns more per request).
//!
//! Cases, each a request's host and path:
//! * `exact`: a host named exactly (a site in the middle of the table), a path under its
//!   longest matching prefix;
//! * `wildcard`: a host two labels below a `*.` name;
//! * `default`: a host no site names (the default site);
//! * `escaped`: a path that needs normalising (`%2F`, `..`) before the locations see it.
//!
//! And 50 regex locations (`regex50`): a path none matches, and one that one matches.
//!
//! Run: `cargo bench -p weft --bench sites -- --warm-up-time 1 --measurement-time 3`

use std::path::PathBuf;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use weft::sites::{LocationConfig, Router, SiteConfig};

fn location(prefix: String) -> LocationConfig {
    LocationConfig {
        prefix: Some(prefix),
        ..LocationConfig::default()
    }
}

/// `n` sites with `locations` locations each, and a default site.
fn sites(n: usize, locations: usize) -> Vec<SiteConfig> {
    let mut out: Vec<SiteConfig> = (0..n)
        .map(|i| {
            let mut loc: Vec<LocationConfig> = (0..locations)
                .map(|k| location(format!("/section{k}/part/")))
                .collect();
            loc[0] = location("/".into());
            if locations > 2 {
                loc[1] = LocationConfig {
                    path: Some("/exact".into()),
                    ..LocationConfig::default()
                };
            }
            SiteConfig {
                hosts: vec![
                    format!("site{i}.example.test"),
                    format!("*.site{i}.example.test"),
                ],
                root: Some(PathBuf::from("/srv/www")),
                location: loc,
                ..SiteConfig::default()
            }
        })
        .collect();
    out.push(SiteConfig {
        default: true,
        root: Some(PathBuf::from("/srv/default")),
        location: vec![location("/".into())],
        ..SiteConfig::default()
    });
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    for (label, n, locs) in [("1x1", 1, 1), ("50x10", 50, 10)] {
        let router = Router::new(&sites(n, locs)).expect("valid sites");
        let mid = n / 2;
        let exact_host = format!("site{mid}.example.test:8080");
        let wild_host = format!("a.b.site{mid}.example.test");
        // The same path for both tables: under `/section7/part/` with ten locations, under
        // `/` alone with one, so the difference is the tables' alone.
        let deep = "/section7/part/assets/app.js".to_string();
        let cases: [(&str, &[u8], String); 4] = [
            ("exact", exact_host.as_bytes(), deep.clone()),
            ("wildcard", wild_host.as_bytes(), deep.clone()),
            ("default", b"unknown.test", "/index.html".into()),
            (
                "escaped",
                exact_host.as_bytes(),
                format!("/x/..{}%2Ejs", &deep[..deep.len() - 3]),
            ),
        ];
        for (name, host, path) in &cases {
            assert!(router.route(host, path).is_some(), "{label} {name}");
            g.bench_with_input(
                BenchmarkId::new(*name, label),
                &(host, path),
                |b, (h, p)| b.iter(|| black_box(router.route(black_box(h), black_box(p)))),
            );
        }
    }
    g.finish();
    // 50 regex locations beside a `/` prefix (issue 54's target: at most 300 ns per request):
    // a path none matches (every expression tried, as one set) and one the 26th matches.
    let regexes: Vec<LocationConfig> = std::iter::once(location("/".into()))
        .chain((0..50).map(|k| LocationConfig {
            regex: Some(format!(r"^/api/v{k}/items/([0-9]+)\.json$")),
            ..LocationConfig::default()
        }))
        .collect();
    let router = Router::new(&[SiteConfig {
        hosts: vec!["regex.example.test".into()],
        root: Some(PathBuf::from("/srv/www")),
        location: regexes,
        ..SiteConfig::default()
    }])
    .expect("valid regexes");
    let mut g = c.benchmark_group("regex50");
    for (name, path) in [
        ("none", "/static/css/site.css"),
        ("match", "/api/v25/items/1234.json"),
    ] {
        let host: &[u8] = b"regex.example.test";
        let want = if name == "none" { Some(0) } else { Some(26) };
        assert_eq!(router.route(host, path).map(|r| r.1), Some(want), "{name}");
        g.bench_function(name, |b| {
            b.iter(|| black_box(router.route(black_box(host), black_box(path))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
