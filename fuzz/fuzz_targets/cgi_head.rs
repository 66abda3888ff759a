//! Arbitrary bytes as a CGI script's output into `weft_http::cgi` (see
//! `weft_fuzz::checks::cgi_head`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::cgi_head(data));
