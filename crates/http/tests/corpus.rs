//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the same checks the
//! fuzz targets run, so every seed and every saved finding stays a regression test without
//! libFuzzer or a nightly toolchain.

use std::path::{Path, PathBuf};

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

fn corpus(target: &str) -> Vec<PathBuf> {
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

fn replay(target: &str, check: fn(&[u8])) {
    let files = corpus(target);
    assert!(!files.is_empty(), "no corpus for {target}");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        let name = file.display().to_string();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            eprintln!("{name} failed");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn request_head_corpus() {
    replay("request_head", checks::request_head);
}

#[test]
fn chunked_corpus() {
    replay("chunked", checks::chunked);
}

#[test]
fn range_corpus() {
    replay("range", checks::range);
}

#[test]
fn path_corpus() {
    replay("path", checks::path);
}

#[test]
fn response_head_corpus() {
    replay("response_head", checks::response_head);
}

#[test]
fn cgi_head_corpus() {
    replay("cgi_head", checks::cgi_head);
}

#[test]
fn conditional_corpus() {
    replay("conditional", checks::conditional);
}

#[test]
fn proxy_protocol_corpus() {
    replay("proxy_protocol", checks::proxy_protocol);
}

#[test]
fn site_name_corpus() {
    replay("site_name", checks::site_name);
}

#[test]
fn accept_encoding_corpus() {
    replay("accept_encoding", checks::accept_encoding);
}

#[test]
fn ocsp_corpus() {
    replay("ocsp", checks::ocsp);
}

#[test]
fn hpack_decode_corpus() {
    replay("hpack_decode", checks::hpack_decode);
}

#[test]
fn h2_connection_corpus() {
    replay("h2_connection", checks::h2_connection);
}

#[test]
fn fastcgi_records_corpus() {
    replay("fastcgi_records", checks::fastcgi_records);
}

#[test]
fn basic_auth_corpus() {
    replay("basic_auth", checks::basic_auth);
}

#[test]
fn x509_names_corpus() {
    replay("x509_names", checks::x509_names);
}
