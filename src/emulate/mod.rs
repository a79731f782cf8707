//! Device emulators on pseudo-terminals, for tests, demos and users without hardware.

pub mod rdscom;
pub mod rig;
pub mod stm32;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock [ns since the Unix epoch]: when an emulator saw a command, comparable with
/// the times a node logs.
fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64)
}

/// An emulator's thread: it runs until its stop flag is set, which happens when the worker is
/// stopped or dropped.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Runs `body` on a thread named `name`; `body` returns when the flag it gets turns true.
    /// The thread stands in for hardware that runs on its own clock: it is scheduled ahead of
    /// the PC's ordinary work where the process may ask for it, so that a busy machine does not
    /// slow the device it emulates (a test's stamps are then the device's, not the load's).
    fn spawn(name: &str, body: impl FnOnce(&AtomicBool) + Send + 'static) -> std::io::Result<Worker> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            for problem in crate::hil::realtime::prepare_thread(Some(crate::hil::realtime::EMULATOR_PRIORITY)) {
                log::debug!("{} runs without {problem}", std::thread::current().name().unwrap_or("an emulator"));
            }
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
