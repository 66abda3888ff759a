//! Black-box tests: each starts the real `weft` binary on 127.0.0.1 with a free port and a
//! temporary document root, and speaks raw HTTP/1.1 to it (see `../common/mod.rs`).
//!
//! The suite runs once per model, and once more on the fiber model with the response cache
//! off (every file read from disk and sent with sendfile), in this one binary: each test of
//! `FILE.rs` here is a `fn TEST(model: Model)`, and the file's `per_model!` list makes it
//! the tests `FILE::MODEL::TEST`, so that a failure names its model and one test runs alone:
//! `cargo test -p weft --test blackbox static_files::fiber::index_redirect_and_missing`, or
//! every test of one model with `::fiber::`.
//!
//! One test binary on purpose: Cargo runs test binaries one after another but the tests of one
//! binary in parallel, and each test runs its own server, so the whole suite overlaps.

#[path = "../common/mod.rs"]
mod common;

/// Makes each named test of a file of the suite, `fn TEST(model: Model)`, a test once per
/// model: `FILE::thread::TEST`, `FILE::fiber::TEST`, `FILE::pipeline::TEST`,
/// `FILE::process::TEST` and `FILE::fiber_nocache::TEST` (the fiber model with the response
/// cache off). `except fiber_nocache:` leaves that last run out.
macro_rules! per_model {
    (except fiber_nocache: $($test:ident),* $(,)?) => {
        per_model!(
            @models [thread = THREAD, fiber = FIBER, pipeline = PIPELINE, process = PROCESS]
            $($test),*
        );
    };
    (@models [] $($test:ident),*) => {};
    (@models [$module:ident = $model:ident $(, $modules:ident = $models:ident)*] $($test:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::common::Model::$model);
                }
            )*
        }
        per_model!(@models [$($modules = $models),*] $($test),*);
    };
    ($($test:ident),* $(,)?) => {
        per_model!(except fiber_nocache: $($test),*);
        per_model!(@models [fiber_nocache = FIBER_NOCACHE] $($test),*);
    };
}

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
