#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::live_client_message(data));
