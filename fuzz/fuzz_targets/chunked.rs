//! Arbitrary bytes into the chunked decoder, whole and in pieces: no panic, and the same data
//! and verdict either way (see `weft_fuzz::checks::chunked`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::chunked(data));
