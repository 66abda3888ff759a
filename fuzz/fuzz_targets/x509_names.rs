//! Arbitrary bytes as a client certificate into `weft_http::x509::names` (see
//! `weft_fuzz::checks::x509_names`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::x509_names(data));
