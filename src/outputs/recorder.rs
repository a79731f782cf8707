//! Recording on a thread of its own: the run hands over small events and goes on; building the
//! messages, CDR and the writes (a bag's file, a live view's clients) happen beside it, on the
//! other core.

use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::fanout::Recording;
use super::sink::{NodeName, Outputs, SinkError};

/// Why a recording did not end well.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot start the recording thread")]
    Thread(#[source] std::io::Error),
    #[error("the recording thread panicked")]
    Panicked,
    #[error("the recording stopped")]
    Stopped(#[source] SinkError),
}

/// Batches waiting for the writer thread; a full queue holds the run back (memory stays flat).
const QUEUE_DEPTH: usize = 16;

/// Events handed over at once: waking the writer thread for each would cost the run more than
/// the event itself.
const BATCH: usize = 64;

/// The longest an event waits in a batch that is not full [s].
const BATCH_AGE: Duration = Duration::from_millis(100);

/// How often a bag is made readable up to the present, for runs that are killed [s].
const CHECKPOINT_PERIOD: Duration = Duration::from_secs(1);

/// A recording sink written on a background thread from events of type `E`.
#[derive(Debug)]
pub struct Recorder<E, R: Recording> {
    events: Option<SyncSender<Vec<E>>>,
    pending: Vec<E>,
    pending_since: Instant,
    thread: Option<JoinHandle<Result<R::Finished, RecordingError>>>,
}

impl<E: Send + 'static, R: Recording> Recorder<E, R> {
    /// Starts the thread, which first runs `setup` (advertising `node`'s topics and writing
    /// what is known before the run, off the run's thread) to get `record`; then each event goes
    /// to `record`, which publishes it into `sink`. The first error stops the recording (it is
    /// logged at once and returned by [`Recorder::finish`]); a bag keeps what was written
    /// before it.
    pub fn spawn<S, F>(sink: R, node: NodeName, setup: S) -> Result<Recorder<E, R>, RecordingError>
    where
        S: FnOnce(&mut Outputs<R>) -> Result<F, SinkError> + Send + 'static,
        F: FnMut(&mut Outputs<R>, E) -> Result<(), SinkError>,
    {
        let (events, queue) = sync_channel::<Vec<E>>(QUEUE_DEPTH);
        let thread = std::thread::Builder::new().name("recording".into()).spawn(move || {
            // On a machine with few cores the run and the recorder share one; the run goes first.
            if let Err(error) = crate::hil::realtime::run_in_background() {
                log::debug!("the recording thread runs at normal priority: {error}");
            }
            let mut out = Outputs::new(node, sink);
            let mut checkpoint = Instant::now();
            let result = setup(&mut out).and_then(|mut record| loop {
                let written = match queue.recv_timeout(CHECKPOINT_PERIOD) {
                    Ok(batch) => batch.into_iter().try_for_each(|event| record(&mut out, event)),
                    Err(RecvTimeoutError::Timeout) => Ok(()),
                    Err(RecvTimeoutError::Disconnected) => break Ok(()),
                };
                let written = written.and_then(|()| match checkpoint.elapsed() >= CHECKPOINT_PERIOD {
                    true => {
                        checkpoint = Instant::now();
                        out.sink_mut().flush()
                    }
                    false => Ok(()),
                });
                if let Err(error) = written {
                    break Err(error);
                }
            });
            let sink = out.into_sink();
            match result {
                Ok(()) => {
                    let describe = sink.describe();
                    sink.finish().map_err(|error| {
                        log::error!("finishing {describe} failed: {error}");
                        RecordingError::Stopped(error)
                    })
                }
                Err(error) => {
                    log::error!("recording to {} stopped: {error}", sink.describe());
                    // What was written before the error is kept.
                    let _ = sink.finish();
                    Err(RecordingError::Stopped(error))
                }
            }
        });
        let thread = thread.map_err(RecordingError::Thread)?;
        Ok(Recorder {
            events: Some(events),
            pending: Vec::with_capacity(BATCH),
            pending_since: Instant::now(),
            thread: Some(thread),
        })
    }

    /// Queues `event`; it goes to the writer with a full batch, or when it has waited
    /// [`BATCH_AGE`]. Waits while the writer is [`QUEUE_DEPTH`] batches behind. False once the
    /// recording has stopped.
    pub fn record(&mut self, event: E) -> bool {
        if self.pending.is_empty() {
            self.pending_since = Instant::now();
        }
        self.pending.push(event);
        match self.pending.len() >= BATCH || self.pending_since.elapsed() >= BATCH_AGE {
            true => self.hand_over(),
            false => self.events.is_some(),
        }
    }

    /// Hands what is queued to the writer now, without waiting for a full batch: a run's start,
    /// whose messages take the writer longest, is worked on while the run goes on.
    pub fn flush(&mut self) -> bool {
        match self.pending.is_empty() {
            true => self.events.is_some(),
            false => self.hand_over(),
        }
    }

    fn hand_over(&mut self) -> bool {
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(BATCH));
        let sent = self.events.as_ref().is_some_and(|events| events.send(batch).is_ok());
        if !sent {
            self.events = None;
        }
        sent
    }

    /// Writes what is queued and finishes the sink.
    pub fn finish(mut self) -> Result<R::Finished, RecordingError> {
        self.hand_over();
        self.events = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => Err(RecordingError::Panicked),
        }
    }
}

impl<E, R: Recording> Drop for Recorder<E, R> {
    fn drop(&mut self) {
        if let Some(events) = self.events.take() {
            let _ = events.send(std::mem::take(&mut self.pending));
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::error!("the recording thread panicked");
            }
        }
    }
}
