//! The README's embedding example: two routes beside the static files of `www/`.
//!
//! `cargo run --release -p weft --example hello` then `curl http://127.0.0.1:8080/hello`.
//! `/slow` sleeps 100 ms: on the fiber model only that request's fiber waits, so
//! `ab -n 100 -c 100 http://127.0.0.1:8080/slow` takes about 0.2 s (measured), not 10 s.

use std::time::Duration;

use weft::{Model, Response, Server};

fn main() -> std::io::Result<()> {
    Server::builder()
        .root("www")
        .route("GET", "/hello", |_req, _body| {
            Response::text(200, "hello\n")
        })
        .route("GET", "/slow", |_req, _body| {
            weft::blocking::sleep(Duration::from_millis(100));
            Response::text(200, "slept 100 ms\n")
        })
        .route("POST", "/upper", |_req, body| {
            let data = body.read_all().unwrap_or_default();
            Response::text(200, data.to_ascii_uppercase())
        })
        .listen("127.0.0.1:8080".parse().unwrap(), Model::Fiber)
        .build()?
        .run()
}
