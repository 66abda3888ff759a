//! The cost of the password check per request (`[site.auth]`, `auth::BasicAuth::verdict`):
//! a browser's later requests, whose credential passed once and is remembered, and a request
//! without credentials (answered 401). Issue 54's target: at most 300 ns each. The first check
//! of a bcrypt credential costs milliseconds by design and is not what a request pays after.
//!
//! Run: `cargo bench -p weft --bench auth -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use weft::auth::{BasicAuth, Verdict};
use weft::config::AuthConfig;

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("weft-bench-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = dir.join("htpasswd");
    // `htpasswd -nbB -C 5 bob 'secret two'`.
    std::fs::write(
        &users,
        "bob:$2y$05$aY5IS5QAeTuIMKHDMxSMG.d5ejFSdDcYcENNvP1uMChqU7e2psQ56\n",
    )
    .unwrap();
    let auth = BasicAuth::load(&AuthConfig {
        users: users.clone(),
        ..AuthConfig::default()
    })
    .unwrap();
    let field = format!(
        "Basic {}",
        weft_http::auth::base64_encode(b"bob:secret two")
    );
    assert_eq!(auth.verdict(Some(field.as_bytes()), true), Verdict::Pass);
    let mut g = c.benchmark_group("auth");
    g.bench_function("remembered", |b| {
        b.iter(|| black_box(auth.verdict(Some(black_box(field.as_bytes())), true)))
    });
    g.bench_function("missing", |b| {
        b.iter(|| black_box(auth.verdict(black_box(None), true)))
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
