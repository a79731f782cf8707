#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::bag_info(data));
