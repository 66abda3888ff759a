//! Black-box tests: each starts the real `weft` binary on 127.0.0.1 with a free port and a
//! temporary document root, and speaks raw HTTP/1.1 to it (see `../common/mod.rs`).
//!
//! One test binary on purpose: Cargo runs test binaries one after another but the tests of one
//! binary in parallel, and each test runs its own server, so the whole suite overlaps.
//!
//! The same suite runs once per model: this binary against `thread`, `blackbox_fiber`
//! (`../blackbox_fiber.rs`) against `fiber`.

/// The model every server of this binary is started with.
const MODEL: &str = "thread";

#[path = "../common/mod.rs"]
mod common;

mod access_log;
mod cgi;
mod compression;
mod connection;
mod echo;
mod guards;
mod limits;
mod malformed;
mod nodelay;
mod ops;
mod proxy;
mod realip;
mod reload;
mod shutdown;
mod sites;
mod slow_clients;
mod stall;
mod static_files;
mod status;
mod timing;
mod traversal;
mod vectors;
