#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::console_command(data));
