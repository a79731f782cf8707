//! Publishes a node's [`Status`] on /diagnostics for nodes whose status several threads change:
//! once a second from a thread of its own, and at once from [`Reporter::update`] when the level
//! or message changes ([`Diagnostics`]' schedule).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{now_ns, ros_outputs, RosSink};
use crate::nodes::diagnostics::Status;
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::nodes::topics::Outputs;

pub struct Reporter {
    clock: Arc<Mutex<r2r::Clock>>,
    /// The status and its publisher, used under the lock.
    state: Mutex<(Diagnostics, Outputs<RosSink>)>,
}

impl Reporter {
    /// A reporter of the status `name` ("node: what") of `hardware_id`.
    pub fn new(node: &mut r2r::Node, name: &str, hardware_id: &str) -> anyhow::Result<Arc<Reporter>> {
        let state = ros_outputs(node, |out| Diagnostics::advertise(out, Status::new(name, hardware_id)))?;
        Ok(Arc::new(Reporter { clock: node.get_ros_clock(), state: Mutex::new(state) }))
    }

    /// Changes the status; publishes it at once when its level or message changed.
    pub fn update(&self, change: impl FnOnce(&mut Status)) {
        let Ok(mut state) = self.state.lock() else { return };
        let (diagnostics, out) = &mut *state;
        if let Err(error) = diagnostics.update(out, now_ns(&self.clock), Instant::now(), change) {
            log::warn!("publishing /diagnostics failed: {error}");
        }
    }

    /// Publishes the status once a second until `stop` is set.
    pub fn spawn_periodic(self: &Arc<Reporter>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        let reporter = self.clone();
        std::thread::Builder::new().name("diagnostics".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                reporter.update(|_| {});
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    }
}
