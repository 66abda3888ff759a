//! weft: a web server and an embeddable server library whose concurrency model is chosen per
//! listening port. All models share one HTTP core ([`weft_http`]), one connection driver
//! ([`conn::serve`]) and the same handlers; a model decides only who runs which piece of work
//! when.
//!
//! Embedding: handlers are plain blocking functions.
//!
//! ```no_run
//! use weft::{Model, Response, Server};
//! Server::builder()
//!     .route("GET", "/hello", |_req, _body| Response::text(200, "hello\n"))
//!     .listen("127.0.0.1:8080".parse().unwrap(), Model::Fiber)
//!     .build()
//!     .expect("bind")
//!     .run()
//!     .expect("serve");
//! ```

pub mod activation;
pub mod app;
pub mod body;
pub mod cache;
pub mod calibrate;
pub mod check;
pub mod config;
pub mod conn;
pub mod fileset;
mod gather;
pub mod handlers;
pub mod log;
pub mod metrics;
pub mod models;
pub mod net;
pub mod realip;
pub mod request;
pub mod response;
pub mod server;
pub mod shutdown;
pub mod sys;
pub mod sys_process;

/// Blocking calls for handlers that cost a parked fiber on the fiber model and a blocked
/// thread on the thread model, so one handler runs unchanged on both: sleep, run a blocking
/// call (disk, DNS, a C library) on a helper thread, talk to an upstream over TCP.
pub mod blocking {
    pub use weft_fiber::net::TcpStream;
    pub use weft_fiber::{sleep, spawn_blocking};
}

pub use app::{App, Handler, Route};
pub use body::RequestBody;
pub use config::{Config, Model};
pub use request::Request;
pub use response::{Body, Response};
pub use server::{Server, ServerBuilder, ShutdownHandle};
