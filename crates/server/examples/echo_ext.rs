//! The CGI paper's proposal (Edwards, "Performance of HTTP and CGI" §1.3): instead of forking
//! a CGI program for every POST, define an extension HTTP method and run it inside the server, on
//! the connection's own fiber or thread. This is its echo service as the `ECHO` method (and as
//! `POST`, for clients that cannot send extension methods) at `/echo-ext`: the request body
//! comes back byte for byte with its Content-Type.
//!
//! ```text
//! cargo run --release -p weft --example echo_ext -- 127.0.0.1:8080 fiber
//! curl -X ECHO --data 'ECHO_ARG=hello%20world' http://127.0.0.1:8080/echo-ext
//! ```
//!
//! A method nobody registered still gets 501, and `ECHO` on another path too.

use weft::{Model, Request, RequestBody, Response, Server, ServerBuilder};

/// Where the service is mounted.
pub const PATH: &str = "/echo-ext";

/// The echo service: answers the request body with its Content-Type.
pub fn echo(req: &Request, body: &mut RequestBody<'_>) -> Response {
    match body.read_all() {
        Ok(data) => {
            let ct = req
                .header("Content-Type")
                .map_or(b"application/octet-stream".to_vec(), <[u8]>::to_vec);
            Response::new(200).header("Content-Type", ct).body(data)
        }
        // The connection driver answers the body's own error (400, 408, 413).
        Err(_) => Response::error(400),
    }
}

/// Mounts the service on `builder` for the `ECHO` extension method and for `POST`.
pub fn echo_service(builder: ServerBuilder) -> ServerBuilder {
    builder.route("ECHO", PATH, echo).route("POST", PATH, echo)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let model: Model = args
        .next()
        .unwrap_or_else(|| "fiber".into())
        .parse()
        .map_err(std::io::Error::other)?;
    let mut cfg = weft::Config::default();
    cfg.static_files.enabled = false;
    let server = echo_service(Server::builder().config(cfg))
        .listen(addr.parse().map_err(std::io::Error::other)?, model)
        .build()?;
    for (addr, model) in server.local_addrs() {
        println!("echo_ext: ECHO http://{addr}{PATH} (model: {model})");
    }
    weft::server::shutdown_on_signals(server.shutdown_handle())?;
    server.run()
}
