//! weft: a web server and an embeddable server library whose concurrency model is chosen per
//! listening port. All models share one HTTP core ([`weft_http`]), one connection driver and
//! the same handlers; a model decides only who runs which piece of work when (ARCHITECTURE.md
//! in the repository walks through them).
//!
//! The public API is what an embedder needs: [`Server`] and its [`ServerBuilder`], [`Config`]
//! and [`Model`] (with every section's type in [`config`]), the errors ([`ConfigError`],
//! [`ReloadError`], [`UpgradeError`]), handlers over [`Request`], [`RequestBody`] and
//! [`Response`], the [`blocking`] calls that suit every model, [`metrics`] to read the
//! counters, [`activation`] for sockets handed over by systemd or an upgrade, and
//! [`log::init_error_log`]. The connection driver,
//! the models and the cache are private, and every system call goes through the `weft-sys`
//! crate; the modules the `weft` binary's own commands use (`calibrate`, `check`, `fileset`,
//! `privdrop`) are public but hidden from these documents, as is the process layer the tests
//! fork with (`sys_process`, weft-sys's `process`).
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
//!
//! A server on a free port, one request to it, and a clean stop (the shape of a test of an
//! embedding):
//!
//! ```
//! use std::io::{Read, Write};
//! use weft::{Model, Response, Server};
//!
//! let server = Server::builder()
//!     .root(std::env::temp_dir())
//!     .route("GET", "/hello", |req, _body| {
//!         Response::text(200, format!("hello {}\n", req.query().unwrap_or("world")))
//!     })
//!     .listen("127.0.0.1:0".parse().unwrap(), Model::Thread)
//!     .build()?;
//! let addr = server.local_addrs()[0].0;
//! let stop = server.shutdown_handle();
//! let serving = std::thread::spawn(move || server.run());
//!
//! let mut conn = std::net::TcpStream::connect(addr)?;
//! conn.write_all(b"GET /hello?weft HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
//! let mut reply = String::new();
//! conn.read_to_string(&mut reply)?;
//! assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
//! assert!(reply.ends_with("\r\n\r\nhello weft\n"), "{reply}");
//!
//! stop.shutdown();
//! serving.join().expect("the server thread")?;
//! # Ok::<(), std::io::Error>(())
//! ```

// The public surface is kept to what an embedder needs: every public item documented, and
// every type that appears in a public signature reachable by name.
#![warn(missing_docs, unnameable_types)]

pub mod acme;
pub mod activation;
#[doc(hidden)]
pub mod auth;
pub(crate) mod routing;
pub(crate) use routing::app;
pub(crate) mod body;
pub(crate) mod cache;
// `weft calibrate`, for the binary (src/main.rs, a crate of its own); not library API.
#[doc(hidden)]
pub mod calibrate;
// `weft check`, for the binary; not library API.
#[doc(hidden)]
pub mod check;
pub(crate) mod compress;
pub mod config;
pub(crate) mod conn;
// `weft fileset` and the sample site, for the binary and the sample-site test; not library API.
#[doc(hidden)]
pub mod fileset;
// Entry points for the fuzz targets (`fuzz/`); not library API.
#[doc(hidden)]
pub mod fuzzing;
pub mod handlers;
pub(crate) mod limits_ip;
pub mod log;
pub mod metrics;
pub(crate) mod minrate;
pub(crate) mod models;
pub(crate) mod net;
// The root policy `weft serve` checks before binding, for the binary; not library API.
#[doc(hidden)]
pub mod privdrop;
// `weft acme list` and `renew`, for the binary; the rest runs inside `Server::run`.
#[doc(hidden)]
pub mod keeper;
pub(crate) mod realip;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod roots;
pub mod server;
pub(crate) mod shutdown;
// The router, for its benchmark (`benches/sites.rs`); the sites' settings are `config`'s.
#[doc(hidden)]
pub use routing::sites;
pub(crate) mod tls;
pub(crate) mod tunnel;
// A `101` response's tunnel (`Body::Tunnel`), which only the reverse proxy builds.
#[doc(hidden)]
pub use tunnel::Tunnel;
// Fork, wait and signals (weft-sys's), for the test harness (its process-model and upgrade
// tests spawn, signal and reap weft); not part of the library API.
#[doc(hidden)]
pub use weft_sys::process as sys_process;

/// Blocking calls for handlers that cost a parked fiber on the fiber model and a blocked
/// thread on the thread model, so one handler runs unchanged on both: sleep, run a blocking
/// call (disk, DNS, a C library) on a helper thread, talk to an upstream over TCP.
pub mod blocking {
    pub use weft_fiber::net::TcpStream;
    pub use weft_fiber::{sleep, spawn_blocking};
}

pub use activation::UpgradeError;
pub use app::ReloadError;
pub use app::{App, Handler};
pub use body::{BodyError, RequestBody};
pub use config::{Config, ConfigError, Model};
pub use request::{ClientAuth, ClientCert, Request, TlsInfo};
pub use response::{Body, BodyStream, HeaderPair, HeaderValue, Response};
pub use server::{Server, ServerBuilder, ShutdownHandle};
/// Raises the soft open-file limit to the hard one (a server holding many connections wants
/// it; `weft serve` does it at start) and returns the new limit.
pub use weft_sys::resource::raise_nofile_limit;
