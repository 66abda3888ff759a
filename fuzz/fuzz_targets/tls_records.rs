//! Arbitrary bytes as a TLS client's into weft's server session (see
//! `weft_fuzz::server_checks::tls_records`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::server_checks::tls_records(data));
