//! Arbitrary bytes into the proxy's response-head parser, whole and in two pieces: no panic,
//! the same verdict either way, a framing that agrees with the fields (see
//! `weft_fuzz::checks::response_head`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::response_head(data));
