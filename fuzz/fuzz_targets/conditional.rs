//! Arbitrary bytes into `weft_http::conditional` (see `weft_fuzz::checks::conditional`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::conditional(data));
