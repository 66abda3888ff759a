//! Arbitrary `X-Forwarded-For` values behind a trusted proxy (see
//! `weft_fuzz::server_checks::real_ip`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::server_checks::real_ip(data));
