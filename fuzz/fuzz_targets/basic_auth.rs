//! Arbitrary bytes as an `Authorization` value into `weft_http::auth` (see
//! `weft_fuzz::checks::basic_auth`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::basic_auth(data));
