#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::follow_joint_trajectory_goal(data));
