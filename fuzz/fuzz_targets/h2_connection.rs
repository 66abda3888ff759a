//! The client preface and arbitrary bytes, in pieces, into an HTTP/2 server connection that
//! answers every request (see `weft_fuzz::checks::h2_connection`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weft_fuzz::checks::h2_connection(data));
