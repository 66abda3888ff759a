//! Arbitrary bytes, in pieces, as a FastCGI application's answer into
//! `weft_http::fastcgi::Decoder` (see `weft_fuzz::checks::fastcgi_records`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::fastcgi_records(data));
