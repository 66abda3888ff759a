//! Arbitrary bytes into `weft_http::encoding` (see `weft_fuzz::checks::accept_encoding`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::accept_encoding(data));
