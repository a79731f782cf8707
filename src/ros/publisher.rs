//! A node's publisher ([`crate::outputs::Publisher`]) on r2r: created on the node, shared by the
//! threads that feed it (a run, subscriptions, lifecycle transitions), stamped with the node's
//! ROS clock, and told every 100 ms that time passes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{now_ns, ros_outputs, RosSink};
use crate::outputs::{Outputs, Publisher, SinkError};

/// A node's publisher and its outputs on the node, with the node's clock.
pub struct NodePublisher<P> {
    clock: Arc<Mutex<r2r::Clock>>,
    /// r2r publishers are Send but not Sync: used under the lock.
    state: Mutex<(P, Outputs<RosSink>)>,
}

impl<P> NodePublisher<P> {
    /// The publisher `advertise` makes on `node`.
    pub fn new(
        node: &mut r2r::Node,
        advertise: impl FnOnce(&mut Outputs<RosSink>) -> Result<P, SinkError>,
    ) -> anyhow::Result<Arc<NodePublisher<P>>> {
        let state = ros_outputs(node, advertise)?;
        Ok(Arc::new(NodePublisher { clock: node.get_ros_clock(), state: Mutex::new(state) }))
    }

    /// Runs `publish` on the publisher now (on the node's clock [ns]); a failure is logged.
    pub fn with<T>(
        &self,
        publish: impl FnOnce(&mut P, &mut Outputs<RosSink>, u64) -> Result<T, SinkError>,
    ) -> Option<T> {
        let Ok(mut state) = self.state.lock() else { return None };
        let (publisher, out) = &mut *state;
        match publish(publisher, out, now_ns(&self.clock)) {
            Ok(value) => Some(value),
            Err(error) => {
                log::warn!("publishing failed: {error}");
                None
            }
        }
    }
}

impl<P: Publisher + Send + 'static> NodePublisher<P> {
    /// Hands `event` to the publisher now.
    pub fn event(&self, event: &P::Event) {
        self.with(|publisher, out, now| publisher.event(out, now, Some(event)));
    }

    /// Tells the publisher every 100 ms that time passes (its periodic topics, /diagnostics),
    /// until `stop` is set.
    pub fn spawn_ticks(self: &Arc<Self>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        let publisher = self.clone();
        std::thread::Builder::new().name("publish-ticks".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                publisher.with(|publisher, out, now| publisher.event(out, now, None));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    }
}
