//! Arbitrary bytes into `weft_http::range` (see `weft_fuzz::checks::range`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::range(data));
