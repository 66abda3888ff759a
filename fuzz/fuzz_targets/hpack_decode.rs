//! Arbitrary bytes into the HPACK decoder as two header blocks of one connection: no panic, a
//! table within its size, and decoded fields that the encoder writes back to the same list
//! (see `weft_fuzz::checks::hpack_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::hpack_decode(data));
