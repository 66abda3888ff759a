//! The invariants the fuzz targets check. They live in `checks.rs` so that
//! `crates/http/tests/corpus.rs` replays the committed corpus through the very same code.

#[path = "checks.rs"]
pub mod checks;

#[path = "server_checks.rs"]
pub mod server_checks;
