//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the same checks the
//! fuzz targets run, so every seed and every saved finding stays a regression test without
//! libFuzzer or a nightly toolchain.

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;
use replay::replay;

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
