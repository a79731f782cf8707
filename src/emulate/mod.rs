//! Device emulators on pseudo-terminals, for tests, demos and users without hardware.

pub mod rdscom;
pub mod rig;
pub mod stm32;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock [ns since the Unix epoch]: when an emulator saw a command, comparable with
/// the times a node logs.
fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64)
}

/// Hands `value` to the emulator's readers in `shared`. In the emulator's loop (`last` false) it
/// never waits: a reader (a thread of normal priority, below the emulator's) preempted while it
/// holds the lock would hold the emulated device with it; the next pass hands the value on.
/// The last, as the emulator stops, waits.
fn publish<T>(shared: &Mutex<T>, value: T, last: bool) {
    let slot = match last {
        true => shared.lock().ok(),
        false => shared.try_lock().ok(),
    };
    if let Some(mut slot) = slot {
        *slot = value;
    }
}

/// An emulator's thread: it runs until its stop flag is set, which happens when the worker is
/// stopped or dropped.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Runs `body` on a thread named `name`, at [`crate::hil::realtime::EMULATOR_PRIORITY`];
    /// `body` returns when the flag it gets turns true.
    fn spawn(name: &str, body: impl FnOnce(&AtomicBool) + Send + 'static) -> std::io::Result<Worker> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            crate::hil::realtime::prepare_device_thread(crate::hil::realtime::EMULATOR_PRIORITY);
            body(&flag)
        })?;
        Ok(Worker { stop, thread: Some(thread) })
    }

    /// Stops the thread and waits for it.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}
