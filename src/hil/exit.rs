//! What stops the devices when the software stops (docs/safety.md, "Exit paths").
//!
//! Every device that can move an arm registers how to stop it ([`on_exit`]) for as long as it is
//! open. A signal (SIGINT, SIGTERM, SIGHUP) asks the process to end ([`requested`]): commands and
//! nodes watch for it and end their runs, which stop their devices on the way out, as a run's end
//! always does. Should a device still be registered [`GRACE`] after the signal, or should a
//! second signal come (past [`SAME_INTERRUPT`]), the registered stops run on the signal thread and
//! the process exits at once. The end of `main` runs them too ([`ExitGuard`]), so a device that a
//! detached thread still holds is stopped before the process is gone; and so does a panic in any
//! thread ([`handle_signals`] installs the hook), which also asks the whole process to end, as a
//! first signal does: as an uncaught exception ends an rclcpp node, a panic ends ours, with its
//! devices stopped first.
//!
//! What no process can do for itself (SIGKILL, a power cut) is the hardware's: docs/safety.md.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a process that holds a device has between the first signal and its forced exit:
/// with the stops' own bound, the process is gone within 1 s of the signal.
pub const GRACE: Duration = Duration::from_millis(700);

/// The exit status of a forced exit after a signal (128 + SIGINT, as a shell reports Ctrl-C), of
/// whichever signal: the handler is not told which came.
pub const INTERRUPTED_STATUS: i32 = 130;

/// A second signal this soon after the first is the same request: `ros2 launch` forwards the
/// terminal's Ctrl-C that the node already had (`--noninteractive`), and shell wrappers do too.
pub const SAME_INTERRUPT: Duration = Duration::from_millis(200);

/// The exit status of a process that ended after a panic (what an uncaught panic gives).
pub const PANIC_STATUS: i32 = 101;

/// Set by the first signal or a panic; every run of the process ends when it is.
static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
/// Woken when [`REQUESTED`] is set, for async waiters.
static REQUESTED_NOTIFY: tokio::sync::Notify = tokio::sync::Notify::const_new();
/// When the process was first asked to end (a signal or a panic) [ns since its exit handling
/// started, at least 1]; 0 until then.
static FIRST_ASKED_NS: AtomicU64 = AtomicU64::new(0);
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);
static PANICKED: AtomicBool = AtomicBool::new(false);
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
static STOPS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

std::thread_local! {
    /// Set while this thread runs the stops: a stop that panics is then reported by the panic
    /// hook without running the stops again inside it (a second panic there aborts the process
    /// before the other stops run).
    static STOPPING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

type StopFn = Arc<dyn Fn() + Send + Sync>;

struct Registered {
    id: u64,
    name: String,
    stop: StopFn,
}

/// A device's stop, registered while it is open; dropping it unregisters the stop (the device's
/// own close stops it from then on).
#[derive(Debug)]
#[must_use = "the stop is unregistered when this is dropped"]
pub struct DeviceStop {
    id: u64,
}

impl Drop for DeviceStop {
    fn drop(&mut self) {
        stops().retain(|registered| registered.id != self.id);
    }
}

/// The registry even after a thread panicked while holding it: it holds plain data, which a
/// panic cannot leave half-written (a push or a retain).
fn stops() -> MutexGuard<'static, Vec<Registered>> {
    STOPS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers `stop`, which commands the device `name` to a stop or hold. It runs on whichever
/// thread ends the process: it must not wait on the device's owner for long (50 ms at most) and
/// must leave the device stopped whatever its owner does afterwards.
pub fn on_exit(name: impl Into<String>, stop: impl Fn() + Send + Sync + 'static) -> DeviceStop {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    stops().push(Registered { id, name: name.into(), stop: Arc::new(stop) });
    DeviceStop { id }
}

/// The names of the devices registered now.
fn devices() -> Vec<String> {
    stops().iter().map(|registered| registered.name.clone()).collect()
}

/// Runs every registered stop, saying why; returns how many ran. The registry is not held while
/// they run, so a stop may take its time within its bound without blocking registration; a stop
/// that panics is reported and the others still run (the signal thread that runs them must live).
pub fn stop_devices(why: &str) -> usize {
    let stopped = run_stops();
    stopped.log(why);
    stopped.0.len()
}

/// Each device whose stop ran, and whether it returned (it did not panic).
struct Stopped(Vec<(String, bool)>);

/// Runs every registered stop, logging nothing: every stop comes before any log, since a log
/// blocked on a full stderr pipe (or a terminal paused with Ctrl-S) must hold no stop.
fn run_stops() -> Stopped {
    let registered: Vec<(String, StopFn)> =
        stops().iter().map(|registered| (registered.name.clone(), registered.stop.clone())).collect();
    let was_stopping = STOPPING.replace(true);
    let stopped = registered
        .into_iter()
        .map(|(name, stop)| (name, std::panic::catch_unwind(AssertUnwindSafe(|| stop())).is_ok()))
        .collect();
    STOPPING.set(was_stopping);
    Stopped(stopped)
}

impl Stopped {
    fn log(&self, why: &str) {
        for (name, returned) in &self.0 {
            match returned {
                true => log::warn!("stopped {name}: {why}"),
                false => log::error!("the stop of {name} panicked"),
            }
        }
    }
}

/// True once the process was asked to end (a signal, a panic).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// The flag [`requested`] reads, for a loop that takes its stop as a flag (the HIL loop).
pub fn requested_flag() -> Arc<AtomicBool> {
    REQUESTED.clone()
}

/// Asks every run of the process to end, as a signal does.
fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
    REQUESTED_NOTIFY.notify_waiters();
}

/// Returns once the process was asked to end.
pub async fn wait_requested() {
    loop {
        let notified = REQUESTED_NOTIFY.notified();
        if requested() {
            return;
        }
        notified.await;
    }
}

/// True when a panic asked the process to end: its exit status should say so.
pub fn panicked() -> bool {
    PANICKED.load(Ordering::Relaxed)
}

/// The exit status `main` returns: `status`, or [`PANIC_STATUS`] where a panic ended the process.
pub fn status_of(status: std::process::ExitCode) -> std::process::ExitCode {
    if panicked() {
        std::process::ExitCode::from(PANIC_STATUS as u8)
    } else {
        status
    }
}

/// Catches SIGINT, SIGTERM and SIGHUP for the whole process, and panics in any thread.
///
/// The first signal asks the process to end ([`requested`]) and starts the grace: a device still
/// registered [`GRACE`] later is stopped and the process exits (status 130). A second signal
/// (past [`SAME_INTERRUPT`]) stops every registered device and exits at once. A panic stops every
/// registered device and asks the process to end as a first signal does; then it is reported by
/// the hook that was in place (the default one: its message, and a backtrace where asked for).
pub fn handle_signals() -> Result<(), ctrlc::Error> {
    LazyLock::force(&STARTED);
    ctrlc::set_handler(|| asked_to_end("interrupted", true))?;
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The devices first: the report can take a while (a backtrace is resolved for it).
        PANICKED.store(true, Ordering::Relaxed);
        if !STOPPING.get() {
            let stopped = run_stops();
            // The request and the grace before any log, as in a signal's.
            asked_to_end("a panic", false);
            let thread = std::thread::current();
            stopped.log(&format!("a panic in thread `{}`", thread.name().unwrap_or("unnamed")));
        }
        report(info);
    }));
    Ok(())
}

/// A signal (`by_signal`) or a panic (`what`): the first asks the process to end and starts the
/// grace; a signal more than [`SAME_INTERRUPT`] after it ends the process at once. A later panic
/// (one that the shutdown brings out in another thread, say) forces nothing: its report is kept.
fn asked_to_end(what: &str, by_signal: bool) {
    let now_ns = u64::try_from(STARTED.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
    let first = FIRST_ASKED_NS.compare_exchange(0, now_ns, Ordering::SeqCst, Ordering::SeqCst);
    if first.is_ok() {
        request();
        // The grace's watchdog before any log: a log blocked on a full stderr pipe (or a terminal
        // paused with Ctrl-S) must hold neither the grace nor the exit it forces.
        let watchdog = std::thread::Builder::new().name("exit-grace".into()).spawn(|| {
            std::thread::sleep(GRACE);
            let held = devices();
            if !held.is_empty() {
                exit_now(&format!("{} still held {GRACE:?} after the request to end", held.join(", ")));
            }
        });
        if watchdog.is_err() {
            exit_now("no thread for the exit's grace");
        }
        log::info!("{what}: stopping (interrupt again to stop the devices and exit at once)");
    } else if first
        .is_err_and(|first_ns| by_signal && now_ns.saturating_sub(first_ns) > SAME_INTERRUPT.as_nanos() as u64)
    {
        exit_now(&format!("{what} again"));
    }
}

/// The longest a forced exit waits for its logs to be written.
const EXIT_LOG_WAIT: Duration = Duration::from_millis(100);

/// Stops every registered device, then ends the process at once: `_exit`, not `exit`, since the
/// other threads still run (in a node, inside DDS, whose static destructors `exit` would run under
/// them).
fn exit_now(why: &str) -> ! {
    let stopped = run_stops();
    // The logs on a thread of their own, waited for a moment only: a blocked stderr must not
    // hold the exit.
    let (logged, wait) = std::sync::mpsc::channel();
    let why = why.to_owned();
    let logging = std::thread::Builder::new().name("exit-log".into()).spawn(move || {
        stopped.log(&why);
        log::logger().flush();
        let _ = logged.send(());
    });
    if logging.is_ok() {
        let _ = wait.recv_timeout(EXIT_LOG_WAIT);
    }
    // SAFETY: _exit only ends the process; it touches no memory of ours.
    unsafe { libc::_exit(if panicked() { PANIC_STATUS } else { INTERRUPTED_STATUS }) }
}

/// Stops every device still registered when dropped: hold one in `main`, so that the end of
/// `main` (its return, or a panic unwinding it) stops what a detached thread still holds before
/// the process is gone.
#[derive(Debug, Default)]
pub struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        stop_devices("the end of main");
    }
}

/// Sets its flag when dropped, however the scope that holds it ends (a panic too): how a device's
/// owner tells a stop waiting on it ([`wait_for`]) that it has let go.
pub struct SetOnDrop(pub Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Waits up to `timeout` for `done`, checking it every millisecond: the bound a stop keeps while
/// it waits for a device's owner to confirm.
pub fn wait_for(timeout: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn a_registered_stop_runs_until_it_is_dropped() {
        let calls = Arc::new(AtomicU32::new(0));
        let counted = calls.clone();
        let registration = on_exit("a test device", move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        assert!(devices().contains(&"a test device".to_owned()));
        stop_devices("a test");
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        drop(registration);
        stop_devices("a test");
        assert_eq!(calls.load(Ordering::Relaxed), 1, "an unregistered stop does not run");
    }
}
