//! Replays a committed corpus (`fuzz/corpus/<target>/`) through a target's check, for the
//! tests that include this file (`crates/http/tests/corpus.rs`, `crates/server/tests/
//! fuzz_corpus.rs`): every seed and saved finding stays a regression test without libFuzzer.

use std::path::{Path, PathBuf};

/// The corpus files of `target`, in name order.
pub fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every file of `target`'s corpus (there must be one), naming the file that
/// fails.
pub fn replay(target: &str, check: fn(&[u8])) {
    let files = corpus(target);
    assert!(!files.is_empty(), "no corpus for {target}");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            eprintln!("{} failed", file.display());
            std::panic::resume_unwind(panic);
        }
    }
}
