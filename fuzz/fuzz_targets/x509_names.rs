//! Arbitrary bytes as a certificate into `weft_http::x509`'s readers (`names`, `validity`,
//! `serial_and_authority_key_id`, `ocsp_url`, `issuer_key`) and as RFC 3339 text (see `weft_fuzz::checks::x509_names`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::x509_names(data));
