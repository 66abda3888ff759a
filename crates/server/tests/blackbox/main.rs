//! Black-box tests: each starts the real `weft` binary on 127.0.0.1 with a free port and a
//! temporary document root, and speaks raw HTTP/1.1 to it (see `../common/mod.rs`).
//!
//! The suite runs once per model, and once more on the fiber model with the response cache
//! off (every file read from disk and sent with sendfile), in this one binary: each test of
//! `FILE.rs` here is a `fn TEST(model: Model)`, and the file's `per_model!` list (the macro
//! of `../common/mod.rs`) makes it the tests `FILE::MODEL::TEST`, so that a failure names its
//! model and one test runs alone:
//! `cargo test -p weft --test blackbox static_files::fiber::index_redirect_and_missing`, or
//! every test of one model with `::fiber::`.
//!
//! One test binary on purpose: Cargo runs test binaries one after another but the tests of one
//! binary in parallel, and each test runs its own server, so the whole suite overlaps.

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

mod access_log;
mod cgi;
mod compression;
mod connection;
mod echo;
mod fastcgi;
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
mod slow_readers;
mod stall;
mod static_files;
mod status;
mod timing;
mod traversal;
mod tunnel;
mod upstream;
mod vectors;
