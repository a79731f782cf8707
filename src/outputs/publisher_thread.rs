//! A node's publisher run on a recording thread of its own: the run hands over its events,
//! stamped on the run's time axis, and goes on; the publisher decides and writes beside it.

use super::fanout::Recording;
use super::publisher::Publisher;
use super::recorder::{Recorder, RecordingError};
use super::sink::{NodeName, Outputs, SinkError};

/// An event as it came, at `time_ns` (none: only time passed; the end: the node's last word).
#[derive(Debug)]
enum Stamped<E> {
    Event(u64, Option<E>),
    Finish(u64),
}

/// A node's publisher on a thread of its own, writing into a recording sink (a bag, a live
/// view, both).
#[derive(Debug)]
pub struct PublisherThread<E, R: Recording> {
    recorder: Recorder<Stamped<E>, R>,
}

impl<E: Send + 'static, R: Recording> PublisherThread<E, R> {
    /// Runs `node`'s publisher into `sink` on a thread of its own: `advertise` sets it up there
    /// (advertising its topics and publishing what is latched from the start).
    pub fn spawn<P, A>(sink: R, node: &str, advertise: A) -> Result<PublisherThread<E, R>, RecordingError>
    where
        P: Publisher<Event = E>,
        A: FnOnce(&mut Outputs<R>) -> Result<P, SinkError> + Send + 'static,
    {
        let recorder = Recorder::spawn(sink, NodeName::new(node), move |out| {
            let mut publisher = advertise(out)?;
            Ok(move |out: &mut Outputs<R>, stamped: Stamped<E>| match stamped {
                Stamped::Event(time_ns, event) => publisher.event(out, time_ns, event.as_ref()),
                Stamped::Finish(time_ns) => publisher.finish(out, time_ns),
            })
        })?;
        Ok(PublisherThread { recorder })
    }

    /// Hands `event`, which came at `time_ns`, to the publisher. False once the recording has
    /// stopped.
    pub fn event(&mut self, time_ns: u64, event: E) -> bool {
        self.recorder.record(Stamped::Event(time_ns, Some(event)))
    }

    /// Tells the publisher that time has passed to `time_ns` (periodic topics, /diagnostics).
    pub fn tick(&mut self, time_ns: u64) -> bool {
        self.recorder.record(Stamped::Event(time_ns, None))
    }

    /// Hands over what is queued now: a run's start, whose messages take the writer longest, is
    /// worked on while the run goes on.
    pub fn flush(&mut self) -> bool {
        self.recorder.flush()
    }

    /// The node's last word at `time_ns`, then the sink is finished.
    pub fn finish(mut self, time_ns: u64) -> Result<R::Finished, RecordingError> {
        self.recorder.record(Stamped::Finish(time_ns));
        self.recorder.finish()
    }
}
