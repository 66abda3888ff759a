//! Arbitrary bytes into `weft_http::site_name`, the virtual-host name of a `Host` value (see
//! `weft_fuzz::checks::site_name`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::site_name(data));
