//! The black-box suite of `blackbox/` run against the `process` model (one forked child per
//! connection).

/// The model every server of this binary is started with.
const MODEL: &str = "process";

#[path = "blackbox/access_log.rs"]
mod access_log;
#[path = "blackbox/cgi.rs"]
mod cgi;
#[path = "common/mod.rs"]
mod common;
#[path = "blackbox/compression.rs"]
mod compression;
#[path = "blackbox/connection.rs"]
mod connection;
#[path = "blackbox/echo.rs"]
mod echo;
#[path = "blackbox/guards.rs"]
mod guards;
#[path = "blackbox/limits.rs"]
mod limits;
#[path = "blackbox/malformed.rs"]
mod malformed;
#[path = "blackbox/nodelay.rs"]
mod nodelay;
#[path = "blackbox/ops.rs"]
mod ops;
#[path = "blackbox/proxy.rs"]
mod proxy;
#[path = "blackbox/realip.rs"]
mod realip;
#[path = "blackbox/reload.rs"]
mod reload;
#[path = "blackbox/shutdown.rs"]
mod shutdown;
#[path = "blackbox/sites.rs"]
mod sites;
#[path = "blackbox/slow_clients.rs"]
mod slow_clients;
#[path = "blackbox/stall.rs"]
mod stall;
#[path = "blackbox/static_files.rs"]
mod static_files;
#[path = "blackbox/status.rs"]
mod status;
#[path = "blackbox/timing.rs"]
mod timing;
#[path = "blackbox/traversal.rs"]
mod traversal;
#[path = "blackbox/vectors.rs"]
mod vectors;
