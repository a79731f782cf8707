//! The registry of device stops that every exit path runs (src/hil/exit.rs), in a test process of
//! its own: the signal handler and the panic hook it installs hold the whole process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arm_hil::hil::exit;

#[test]
fn a_stop_that_panics_is_reported_and_the_stops_after_it_still_run_as_at_the_end_of_main() {
    exit::handle_signals().expect("the process's signal handler and panic hook");
    let _failing = exit::on_exit("a device whose stop panics", || panic!("the device's port is gone"));
    let moving = Arc::new(AtomicBool::new(true));
    let stopped = moving.clone();
    let _other = exit::on_exit("the other device", move || stopped.store(false, Ordering::SeqCst));
    // Without the hook's guard, the panicking stop would run again inside the hook and abort
    // this process before the other device's stop.
    assert_eq!(exit::stop_devices("the end of main"), 2);
    assert!(!moving.load(Ordering::SeqCst), "the other device was left moving");

    moving.store(true, Ordering::SeqCst);
    drop(exit::ExitGuard);
    assert!(!moving.load(Ordering::SeqCst), "the end of main left a registered device moving");
}
