//! Arbitrary bytes into the request-head parser, whole and in two pieces: no panic, and the
//! same verdict either way (see `weft_fuzz::checks::request_head`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::request_head(data));
