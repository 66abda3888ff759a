//! The black-box suite of `blackbox/` run against the `fiber` model with the response cache off
//! (every file read from disk and sent with sendfile).

/// The model every server of this binary is started with.
const MODEL: &str = "fiber --cache off";

#[path = "blackbox/access_log.rs"]
mod access_log;
#[path = "common/mod.rs"]
mod common;
#[path = "blackbox/compression.rs"]
mod compression;
#[path = "blackbox/connection.rs"]
mod connection;
#[path = "blackbox/echo.rs"]
mod echo;
#[path = "blackbox/limits.rs"]
mod limits;
#[path = "blackbox/malformed.rs"]
mod malformed;
#[path = "blackbox/reload.rs"]
mod reload;
#[path = "blackbox/shutdown.rs"]
mod shutdown;
#[path = "blackbox/sites.rs"]
mod sites;
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
