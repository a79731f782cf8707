//! Publishes a node's [`Status`] on /diagnostics on its [`Schedule`]: once a second from a
//! thread of its own, and at once from [`Reporter::update`] when the level or message changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use r2r::diagnostic_msgs::msg::{DiagnosticArray, DiagnosticStatus, KeyValue};
use r2r::{Publisher, QosProfile};

use super::{header, now};
use crate::nodes::diagnostics::{Schedule, Status};

pub struct Reporter {
    clock: Arc<Mutex<r2r::Clock>>,
    /// r2r publishers are Send but not Sync: the publisher is used under the lock.
    state: Mutex<State>,
}

struct State {
    status: Status,
    schedule: Schedule,
    publisher: Publisher<DiagnosticArray>,
}

impl Reporter {
    /// A reporter of the status `name` ("node: what") of `hardware_id`.
    pub fn new(node: &mut r2r::Node, name: &str, hardware_id: &str) -> anyhow::Result<Arc<Reporter>> {
        Ok(Arc::new(Reporter {
            clock: node.get_ros_clock(),
            state: Mutex::new(State {
                status: Status::new(name, hardware_id),
                schedule: Schedule::every_second(),
                publisher: node.create_publisher("/diagnostics", QosProfile::default().keep_last(10))?,
            }),
        }))
    }

    /// Changes the status; publishes it at once when its level or message changed.
    pub fn update(&self, change: impl FnOnce(&mut Status)) {
        let Ok(mut state) = self.state.lock() else { return };
        change(&mut state.status);
        self.publish_if_due(&mut state);
    }

    fn publish_if_due(&self, state: &mut State) {
        let State { status, schedule, publisher } = state;
        if !schedule.due(status, Instant::now()) {
            return;
        }
        let message = DiagnosticArray {
            header: header(now(&self.clock), ""),
            status: vec![DiagnosticStatus {
                level: status.level as u8,
                name: status.name.clone(),
                message: status.message.clone(),
                hardware_id: status.hardware_id.clone(),
                values: status
                    .values
                    .iter()
                    .map(|(key, value)| KeyValue { key: key.clone(), value: value.clone() })
                    .collect(),
            }],
        };
        if let Err(error) = publisher.publish(&message) {
            log::warn!("publishing /diagnostics failed: {error}");
        }
    }

    /// Publishes the status once a second until `stop` is set.
    pub fn spawn_periodic(self: &Arc<Reporter>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        let reporter = self.clone();
        std::thread::Builder::new().name("diagnostics".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(mut state) = reporter.state.lock() {
                    reporter.publish_if_due(&mut state);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    }
}
