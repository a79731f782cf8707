//! A device node's topics recorded as the node publishes them: its driver's events are handed to
//! a thread of their own, stamped with the wall clock when they came, and the node's topic set
//! ([`EventTopics`]) publishes them into the bag there.

use std::time::Instant;

use super::writer::BagWriter;
use super::{wall_clock_ns, Recorder, RecordingError};
use crate::nodes::topics::{EventTopics, NodeName, Outputs, Recording, SinkError};

/// An event as it came: wall-clock and monotonic time, and the event (none: only time passed).
#[derive(Debug)]
struct Received<E> {
    time_ns: u64,
    at: Instant,
    event: Option<E>,
}

/// A device node's recording (into a bag by default).
#[derive(Debug)]
pub struct DeviceRecorder<E, R: Recording = BagWriter> {
    recorder: Recorder<Received<E>, R>,
}

impl<E: Send + 'static, R: Recording> DeviceRecorder<E, R> {
    /// Records `node`'s topics into `sink` on a thread of its own: `advertise` sets the topics
    /// up there.
    pub fn spawn<T, A>(sink: R, node: &str, advertise: A) -> Result<DeviceRecorder<E, R>, RecordingError>
    where
        T: EventTopics<Event = E>,
        A: FnOnce(&mut Outputs<R>) -> Result<T, SinkError> + Send + 'static,
    {
        let recorder = Recorder::spawn(sink, NodeName::new(node), move |out| {
            let mut topics = advertise(out)?;
            Ok(move |out: &mut Outputs<R>, received: Received<E>| match received.event {
                Some(event) => topics.event(out, received.time_ns, received.at, Some(&event)),
                None => topics.finish(out, received.time_ns),
            })
        })?;
        Ok(DeviceRecorder { recorder })
    }

    /// Records `event`, received now. False once the recording has stopped.
    pub fn event(&mut self, event: E) -> bool {
        self.recorder.record(Received { time_ns: wall_clock_ns(), at: Instant::now(), event: Some(event) })
    }

    /// Records the node's last status and finishes the sink.
    pub fn finish(mut self) -> Result<R::Finished, RecordingError> {
        self.recorder.record(Received { time_ns: wall_clock_ns(), at: Instant::now(), event: None });
        self.recorder.finish()
    }
}
