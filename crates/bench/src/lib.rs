//! weft-bench: weft's load generator. It measures any HTTP/1.1 server at a URL.
//!
//! * `weft-bench load URL...` — closed-loop load like wrk/ab (`-c` connections, `-n` requests
//!   or `-d` duration, keep-alive or a connection per request), or open-loop at a fixed rate
//!   like wrk2 (`--rate`, latency from intended send times). Latency percentiles from an HDR
//!   histogram, errors by kind, requests and bytes per second; `--server-pid` adds the
//!   server's CPU per request from `/proc`.
//! * `weft-bench groups URL` — the client of "Threaded vs Process-driven HTTP server":
//!   simultaneous clients, each running sequential groups of concurrent GETs on fresh
//!   connections; average request completion time.
//! * `weft-bench specweb URL` — a SPECweb99-like static load ([`specweb`]): paced keep-alive
//!   connections of 5 requests over a Zipf-distributed file set (`fileset-specweb` writes
//!   it); conforming connections, mean response time, weighted bandwidth; `--step` for
//!   controller studies; `--dynamic PCT` sends that share to a dynamic path, which
//!   `weft-bench backend` (an application server that answers after a delay) can serve
//!   behind the server's reverse proxy.
//! * `weft-bench experiment NAME` — one paper's experiment ([`experiment`]): starts weft's
//!   models and the installed peers, pins and alternates them, writes CSV, charts ([`plot`])
//!   and a report with the paper's numbers beside ours.
//!
//! * `weft-bench tls-shim --listen ADDR --connect HOST:PORT` — plain TCP in, TLS out
//!   ([`shim`]), so that a plain-HTTP tool can probe an HTTPS server.
//!
//! `load` and `groups` take `https://` URLs ([`tls`]: rustls over the fiber socket,
//! `--cacert`, `--insecure`, `--tls-resume`).
//!
//! Connections are fibers of weft's own runtime ([`weft_fiber`]): one fiber per connection on
//! `-t` worker threads, each with a reused buffer and response parser, so that the client
//! keeps up with wrk on the same core (BENCHMARKS.md has the comparison).
//!
//! The modules are public for the tests and for the experiments to come; the command line
//! ([`cli`]) is the supported interface.
//!
//! Every system call it makes beyond the standard library's goes through `weft-sys`; the
//! crate itself holds no `unsafe` code.

#![forbid(unsafe_code)]

pub mod backend;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod experiment;
pub mod groups;
pub mod link;
pub mod load;
pub mod netns;
pub mod plot;
pub mod procstat;
pub mod report;
pub mod response;
pub mod schedule;
pub mod shim;
pub mod specweb;
pub mod stats;
pub mod target;
pub mod tls;
