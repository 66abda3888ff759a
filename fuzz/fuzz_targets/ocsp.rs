//! Arbitrary bytes into `weft_http::ocsp::check`, the check of an OCSP response file to staple
//! (see `weft_fuzz::checks::ocsp`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::ocsp(data));
