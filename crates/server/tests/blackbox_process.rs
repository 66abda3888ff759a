//! The black-box suite of `blackbox/` run against the `process` model (one forked child per
//! connection).

/// The model every server of this binary is started with.
const MODEL: &str = "process";

#[path = "blackbox/access_log.rs"]
mod access_log;
#[path = "common/mod.rs"]
mod common;
#[path = "blackbox/connection.rs"]
mod connection;
#[path = "blackbox/echo.rs"]
mod echo;
#[path = "blackbox/malformed.rs"]
mod malformed;
#[path = "blackbox/shutdown.rs"]
mod shutdown;
#[path = "blackbox/stall.rs"]
mod stall;
#[path = "blackbox/static_files.rs"]
mod static_files;
#[path = "blackbox/status.rs"]
mod status;
#[path = "blackbox/traversal.rs"]
mod traversal;
#[path = "blackbox/vectors.rs"]
mod vectors;
