//! The registry of device stops that every exit path runs (src/hil/exit.rs), in a test process of
//! its own: the signal handler and the panic hook it installs hold the whole process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use arm_hil::hil::{exit, feed_trajectory, HilConfig, HilLoop, SimulatedRig};
use arm_hil::model::Robot;
use arm_hil::nodes::load_trajectory;
use arm_hil::sim::SilConfig;

/// The process's signal handler and panic hook, installed once, held by one test at a time: a
/// request to end is the whole process's, and a device registered while one is under way would
/// be stopped, the process with it, by its grace.
fn the_process() -> MutexGuard<'static, ()> {
    static HANDLED: OnceLock<()> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let process = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    HANDLED.get_or_init(|| exit::handle_signals().expect("the process's signal handler and panic hook"));
    process
}

#[test]
fn a_stop_that_panics_is_reported_and_the_stops_after_it_still_run_as_at_the_end_of_main() {
    let _process = the_process();
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

/// The HIL loop ends on the process's request to end (a signal here) in its own thread, though
/// nothing sets its own stop: a node's loop stops its motors whatever the thread that would
/// ask it is busy with (docs/safety.md, "Exit paths").
#[test]
fn a_hil_loop_ends_when_the_process_is_asked_to_end_though_its_own_stop_is_never_set() {
    let _process = the_process();
    let sil = SilConfig::default();
    let robot = Robot::new(sil.robot.clone()).unwrap();
    let trajectory = load_trajectory(None, &robot).unwrap();
    let (start, length_s) = (trajectory.waypoints()[0], trajectory.end_time());
    let rig = SimulatedRig::new(robot.clone(), &sil, &start, robot.elbow()).unwrap();
    let config = HilConfig { realtime_priority: None, ..HilConfig::default() };
    let never = Arc::new(AtomicBool::new(false));
    let feed = feed_trajectory(Arc::new(trajectory));
    let hil = HilLoop::new(config, &sil, robot.elbow(), 0.45, Box::new(rig), feed, never).unwrap();
    let (reports, report) = sync_channel(1);
    std::thread::spawn(move || {
        let _ = reports.send(hil.run());
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!exit::requested(), "the process was asked to end before the test asked it");
    // SAFETY: raise(3) has no preconditions; the handler installed above takes the signal.
    assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
    let report = report.recv_timeout(Duration::from_secs(5)).expect("the loop ran on after the request to end");
    report.outcome.expect("a run that the request to end stopped");
    assert!(report.duration_s < length_s / 2.0, "ran {} s of {length_s} s", report.duration_s);
    // Past the grace that the request started: no device was held, so it ends nothing.
    std::thread::sleep(exit::GRACE + Duration::from_millis(300));
}
