//! Replays the committed fuzz corpora of the targets over the server crate
//! (`fuzz/corpus/{tls_records,real_ip,site_router}/`) through the checks the targets run
//! (`fuzz/src/server_checks.rs`), so every seed and saved finding stays a regression test
//! without libFuzzer (`crates/http/tests/corpus.rs` does the same for weft-http's targets).

#[path = "../../../fuzz/src/server_checks.rs"]
mod server_checks;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;
use replay::replay;

#[test]
fn tls_records_corpus() {
    replay("tls_records", server_checks::tls_records);
}

#[test]
fn real_ip_corpus() {
    replay("real_ip", server_checks::real_ip);
}

#[test]
fn site_router_corpus() {
    replay("site_router", server_checks::site_router);
}
