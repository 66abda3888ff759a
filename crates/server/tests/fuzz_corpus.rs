//! Replays the committed fuzz corpora of the targets over the server crate
//! (`fuzz/corpus/{tls_records,real_ip,site_router}/`) through the checks the targets run
//! (`fuzz/src/server_checks.rs`), so every seed and saved finding stays a regression test
//! without libFuzzer (`crates/http/tests/corpus.rs` does the same for weft-http's targets).

use std::path::{Path, PathBuf};

#[path = "../../../fuzz/src/server_checks.rs"]
mod server_checks;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus for {target}");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            eprintln!("{} failed", file.display());
            std::panic::resume_unwind(panic);
        }
    }
}

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
