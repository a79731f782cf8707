//! The loop thread's clock and scheduling: absolute deadlines on CLOCK_MONOTONIC, fine timer
//! slack, and SCHED_FIFO where the process may use it.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};

/// Now on the monotonic clock. CLOCK_MONOTONIC cannot fail on Linux.
pub(super) fn now() -> TimeSpec {
    clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap_or_else(|_| TimeSpec::new(0, 0))
}

/// Sleeps until the absolute monotonic time `deadline`, resuming after signals.
pub(super) fn sleep_until(deadline: &TimeSpec) {
    while let Err(nix::errno::Errno::EINTR) =
        clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, deadline)
    {}
}

/// Now on the monotonic clock [ns], the loop's own: a move planned elsewhere in the process
/// says when it starts on it ([`super::Withdrawals::request_continuing`]).
pub fn monotonic_ns() -> u64 {
    nanoseconds(now())
}

pub(super) fn nanoseconds(time: TimeSpec) -> u64 {
    (time.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(time.tv_nsec() as u64)
}

pub(super) fn seconds(span: TimeSpec) -> f64 {
    span.tv_sec() as f64 + span.tv_nsec() as f64 * 1e-9
}

pub(super) fn from_seconds(seconds: f64) -> TimeSpec {
    TimeSpec::from_duration(std::time::Duration::from_secs_f64(seconds))
}

/// SCHED_FIFO priority of the HIL loop's thread unless configured (`hil.realtime_priority`).
pub const LOOP_PRIORITY: i32 = 50;

/// SCHED_FIFO priority of the threads that carry a device's bytes (the rig's sensor and stepper
/// threads, the serial drivers' threads): just below the loop's, so that readings, commands and
/// a safe stop keep their pace on a busy machine.
pub const DEVICE_IO_PRIORITY: i32 = LOOP_PRIORITY - 1;

/// SCHED_FIFO priority of the device emulators' threads: they stand in for hardware that runs on
/// its own clock, which a busy PC does not slow; one step below the threads that talk to them.
pub const EMULATOR_PRIORITY: i32 = LOOP_PRIORITY - 2;

/// Prepares the calling thread, which carries a device's bytes or stands in for a device, at
/// SCHED_FIFO `priority`. It runs either way; what could not be set is a warning, once a process:
/// on a busy machine the thread may then lag (docs/robot-pc.md says how to allow it).
pub fn prepare_device_thread(priority: i32) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let problems = prepare_thread(Some(priority));
    if !problems.is_empty() && !WARNED.swap(true, Ordering::Relaxed) {
        let thread = std::thread::current();
        log::warn!(
            "{} runs without {}: on a busy machine it may lag (docs/robot-pc.md)",
            thread.name().unwrap_or("a device thread"),
            problems.join(", ")
        );
    }
}

/// The nice value of background threads: they get what the others leave.
const BACKGROUND_NICE: i32 = 19;

/// Makes the calling thread give way to the process's other threads when they compete for a
/// core (Linux keeps a nice value per thread). For work beside a run that must not slow it,
/// such as recording a bag: a bounded queue still holds the run back if that work falls behind.
pub fn run_in_background() -> std::io::Result<()> {
    // SAFETY: with PRIO_PROCESS and 0, setpriority changes only the calling thread's nice value.
    match unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Prepares the calling thread for timed work: fine timer slack and, with `priority`,
/// SCHED_FIFO. Returns what could not be set, for the log: the thread runs either way, with
/// more jitter. The loop uses it, and so do the threads that stand in for its devices' timing
/// (serial I/O, device emulators), one priority step below the loop.
pub fn prepare_thread(priority: Option<i32>) -> Vec<String> {
    let mut problems = Vec::new();
    // The default 50 us timer slack would be most of the jitter budget.
    if let Err(error) = nix::sys::prctl::set_timerslack(1) {
        problems.push(format!("timer slack: {error}"));
    }
    if let Some(priority) = priority {
        let param = libc::sched_param { sched_priority: priority };
        // SAFETY: sched_setscheduler reads `param` and changes only this thread's policy.
        let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        if result != 0 {
            problems.push(format!("SCHED_FIFO priority {priority}: {}", std::io::Error::last_os_error()));
        }
    }
    problems
}
