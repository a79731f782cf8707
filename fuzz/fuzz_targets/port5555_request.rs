#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::port5555_request(data));
