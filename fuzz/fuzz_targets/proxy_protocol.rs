//! Arbitrary bytes into `weft_http::proxy_protocol` (see `weft_fuzz::checks::proxy_protocol`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::proxy_protocol(data));
