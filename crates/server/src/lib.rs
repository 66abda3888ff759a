//! weft: a web server and an embeddable server library whose concurrency model is chosen per
//! listening port. All models share one HTTP core ([`weft_http`]), one connection driver and
//! the same handlers; a model decides only who runs which piece of work when (ARCHITECTURE.md
//! in the repository walks through them).
//!
//! The public API is what an embedder needs: [`Server`] and its [`ServerBuilder`], [`Config`]
//! and [`Model`], handlers over [`Request`], [`RequestBody`] and [`Response`], the
//! [`blocking`] calls that suit every model, [`metrics`], and the pieces of the `weft` binary's
//! commands ([`check`], [`calibrate`], [`fileset`], [`activation`], [`log`]). The connection
//! driver, the models, the cache and the system-call layer are private.
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
pub(crate) mod app;
pub(crate) mod body;
pub(crate) mod cache;
pub mod calibrate;
pub mod check;
pub mod compress;
pub mod config;
pub(crate) mod conn;
pub mod fileset;
mod gather;
pub mod handlers;
pub mod limits_ip;
pub mod log;
pub mod metrics;
pub(crate) mod minrate;
pub(crate) mod models;
pub(crate) mod net;
pub mod privdrop;
pub(crate) mod realip;
pub(crate) mod request;
pub(crate) mod response;
pub mod server;
pub(crate) mod shutdown;
pub mod sites;
pub(crate) mod sys;
pub mod tls;
// Fork, wait and signals, for the test harness too (its process-model and upgrade tests fork
// and reap); not part of the library API.
#[doc(hidden)]
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
/// Raises the soft open-file limit to the hard one (a server holding many connections wants
/// it; `weft serve` does it at start) and returns the new limit.
pub use sys::raise_nofile_limit;
