//! The TechEmpower "plaintext" and "json" tests on weft's library API, for comparing weft as
//! an embedded server with other Rust servers (`scripts/peers/rust_peers.sh` runs this beside
//! may_minihttp's and actix-web's hello-world servers).
//!
//! `cargo run --release -p weft --example techempower -- [ADDR] [THREADS]` (default
//! 127.0.0.1:8080, one worker per core), then
//! `curl http://127.0.0.1:8080/plaintext` and `curl http://127.0.0.1:8080/json`.
//!
//! Both handlers are plain blocking closures on the fiber model: the responses' `Date` and
//! `Server` headers come from weft's response encoder, as the test rules ask.

use weft::{Config, Model, Response, Server};

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let threads = args.next().map(|t| t.parse().expect("THREADS: a number"));
    let addr = addr.parse().expect("ADDR: IP:PORT");
    let mut cfg = Config {
        threads,
        // Nothing but the two routes: no static files under this root are reachable.
        root: std::env::temp_dir(),
        ..Config::default()
    };
    // Connections unbounded, as the peers it is measured against keep theirs (the default
    // closes one after 1,000 requests, as nginx's `keepalive_requests`).
    cfg.limits.keepalive_requests = 0;
    println!("techempower: http://{addr}/plaintext and /json");
    Server::builder()
        .config(cfg)
        .route("GET", "/plaintext", |_req, _body| {
            Response::new(200)
                .header("Content-Type", "text/plain")
                .body("Hello, World!")
        })
        .route("GET", "/json", |_req, _body| {
            // Serialized per request, as the test requires.
            let body = serde_json::to_vec(&Message {
                message: "Hello, World!",
            })
            .expect("a struct of strings serializes");
            Response::new(200)
                .header("Content-Type", "application/json")
                .body(body)
        })
        .listen(addr, Model::Fiber)
        .build()?
        .run()
}
