//! Arbitrary bytes into `weft_http::path` (see `weft_fuzz::checks::path`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::path(data));
