//! A node's publisher: the one place that decides what the node publishes and when, fed events
//! by whoever owns the node's clock and threads (the r2r node, a command's recording thread),
//! so ROS, a bag and a live view get the same messages.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use super::sink::{Outputs, Sink, SinkError};

/// A node's publisher: what each event of its source (a run, a loop, a device driver, a
/// network link) publishes, and the passing of time (periodic topics, /diagnostics), on the
/// time axis the caller stamps it with.
pub trait Publisher {
    type Event;

    /// Publishes what `event` (or, with `None`, the passing of time) makes due at `time_ns`.
    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&Self::Event>,
    ) -> Result<(), SinkError>;

    /// The node stops: what it says last (a device node's last status). Nothing by default:
    /// the arm nodes' last events have said it.
    fn finish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        let _ = (out, time_ns);
        Ok(())
    }
}

/// Publishes a node's `publisher` from its source's `events` until `stop` is set or the source
/// ends: each event as it comes (after `log` has seen it), and the passage of time at least
/// every 100 ms, stamped `now_ns()` (the node's clock). Gives the publisher back.
pub fn pump_events<P: Publisher, S: Sink>(
    events: &Receiver<P::Event>,
    stop: &AtomicBool,
    mut publisher: P,
    mut out: Outputs<S>,
    now_ns: &dyn Fn() -> u64,
    mut log: impl FnMut(&P::Event),
) -> (P, Outputs<S>) {
    while !stop.load(Ordering::Relaxed) {
        let event = match events.recv_timeout(Duration::from_millis(100)) {
            Ok(event) => Some(event),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if let Some(event) = &event {
            log(event);
        }
        if let Err(error) = publisher.event(&mut out, now_ns(), event.as_ref()) {
            log::warn!("publishing failed: {error}");
        }
    }
    if let Err(error) = publisher.finish(&mut out, now_ns()) {
        log::warn!("publishing failed: {error}");
    }
    (publisher, out)
}
