//! `peer-may-minihttp ADDR WORKERS`: /plaintext and /json as the TechEmpower tests ask.

use bytes::BufMut;
use may_minihttp::{HttpServer, HttpService, Request, Response};
use std::io;

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        match req.path() {
            "/plaintext" => {
                rsp.header("Content-Type: text/plain").body("Hello, World!");
            }
            "/json" => {
                rsp.header("Content-Type: application/json");
                let msg = Message {
                    message: "Hello, World!",
                };
                serde_json::to_writer(rsp.body_mut().writer(), &msg)?;
            }
            _ => {
                rsp.status_code(404, "Not Found");
            }
        }
        Ok(())
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let workers: usize = args.next().map_or(1, |w| w.parse().expect("WORKERS"));
    may::config().set_workers(workers);
    let server = HttpServer(Hello).start(&addr).expect("bind");
    server.wait();
}
