//! Recording on a thread of its own: the run hands over small events and goes on; building the
//! messages, CDR and the file writes happen beside it, on the other core.

use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::writer::{BagError, BagStats, BagWriter};
use crate::nodes::topics::{NodeName, Outputs, SinkError};

/// Batches waiting for the writer thread; a full queue holds the run back (memory stays flat).
const QUEUE_DEPTH: usize = 16;

/// Events handed over at once: waking the writer thread for each would cost the run more than
/// the event itself.
const BATCH: usize = 64;

/// The longest an event waits in a batch that is not full [s].
const BATCH_AGE: Duration = Duration::from_millis(100);

/// How often the bag is made readable up to the present, for runs that are killed [s].
const CHECKPOINT_PERIOD: Duration = Duration::from_secs(1);

/// A bag written on a background thread from events of type `E`.
#[derive(Debug)]
pub struct Recorder<E> {
    events: Option<SyncSender<Vec<E>>>,
    pending: Vec<E>,
    pending_since: Instant,
    thread: Option<JoinHandle<Result<BagStats, BagError>>>,
}

impl<E: Send + 'static> Recorder<E> {
    /// Starts the thread, which first runs `setup` (advertising `node`'s topics and writing
    /// what is known before the run, off the run's thread) to get `record`; then each event goes
    /// to `record`, which publishes it into the bag. The first error stops the recording (it is
    /// logged at once and returned by [`Recorder::finish`]); the bag keeps what was written
    /// before it.
    pub fn spawn<S, F>(bag: BagWriter, node: NodeName, setup: S) -> Result<Recorder<E>, BagError>
    where
        S: FnOnce(&mut Outputs<BagWriter>) -> Result<F, SinkError> + Send + 'static,
        F: FnMut(&mut Outputs<BagWriter>, E) -> Result<(), SinkError>,
    {
        let (events, queue) = sync_channel::<Vec<E>>(QUEUE_DEPTH);
        let thread = std::thread::Builder::new().name("bag".into()).spawn(move || {
            // On a machine with few cores the run and the recorder share one; the run goes first.
            if let Err(error) = crate::hil::realtime::run_in_background() {
                log::debug!("the bag thread runs at normal priority: {error}");
            }
            let mut out = Outputs::new(node, bag);
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
                        Ok(out.sink_mut().checkpoint()?)
                    }
                    false => Ok(()),
                });
                if let Err(error) = written {
                    break Err(error);
                }
            });
            let bag = out.into_sink();
            match result {
                Ok(()) => bag.finish(),
                Err(error) => {
                    log::error!("recording to {} stopped: {error}", bag.dir().display());
                    Err(BagError::Recording(error))
                }
            }
        });
        let thread = thread.map_err(BagError::Thread)?;
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

    /// Writes what is queued and finishes the bag.
    pub fn finish(mut self) -> Result<BagStats, BagError> {
        self.hand_over();
        self.events = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => Err(BagError::Panicked),
        }
    }
}

impl<E> Drop for Recorder<E> {
    fn drop(&mut self) {
        if let Some(events) = self.events.take() {
            let _ = events.send(std::mem::take(&mut self.pending));
        }
        if let Some(thread) = self.thread.take() {
            match thread.join() {
                Ok(Ok(stats)) => log::info!("bag {}: {} messages", stats.dir.display(), stats.messages),
                Ok(Err(_)) => {} // logged by the thread
                Err(_) => log::error!("the bag thread panicked"),
            }
        }
    }
}
