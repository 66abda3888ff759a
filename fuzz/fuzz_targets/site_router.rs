//! Arbitrary hosts and paths through the site router (see
//! `weft_fuzz::server_checks::site_router`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::server_checks::site_router(data));
