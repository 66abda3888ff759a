//! Arbitrary bytes as a certificate into `weft_http::x509`'s readers: `names`, `validity`,
//! `serial_and_authority_key_id` (see `weft_fuzz::checks::x509_names`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::x509_names(data));
