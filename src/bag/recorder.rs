//! Recording on a thread of its own: the run hands over small events and goes on; building the
//! messages, CDR and the file writes happen beside it, on the other core.

use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::writer::{BagError, BagStats, BagWriter};

/// Events waiting for the writer thread; a full queue holds the run back (memory stays flat).
const QUEUE_DEPTH: usize = 1024;

/// How often the bag is made readable up to the present, for runs that are killed [s].
const CHECKPOINT_PERIOD: Duration = Duration::from_secs(1);

/// A bag written on a background thread from events of type `E`.
#[derive(Debug)]
pub struct Recorder<E> {
    events: Option<SyncSender<E>>,
    thread: Option<JoinHandle<Result<BagStats, BagError>>>,
}

impl<E: Send + 'static> Recorder<E> {
    /// Starts the thread: each event goes to `record`, which writes it to the bag. The first
    /// error stops the recording (it is logged at once and returned by [`Recorder::finish`]);
    /// the bag keeps what was written before it.
    pub fn spawn<F>(mut bag: BagWriter, mut record: F) -> std::io::Result<Recorder<E>>
    where
        F: FnMut(&mut BagWriter, E) -> Result<(), BagError> + Send + 'static,
    {
        let (events, queue) = sync_channel::<E>(QUEUE_DEPTH);
        let thread = std::thread::Builder::new().name("bag".into()).spawn(move || {
            let mut checkpoint = Instant::now();
            let result = loop {
                let written = match queue.recv_timeout(CHECKPOINT_PERIOD) {
                    Ok(event) => record(&mut bag, event),
                    Err(RecvTimeoutError::Timeout) => Ok(()),
                    Err(RecvTimeoutError::Disconnected) => break Ok(()),
                };
                let written = written.and_then(|()| match checkpoint.elapsed() >= CHECKPOINT_PERIOD {
                    true => {
                        checkpoint = Instant::now();
                        bag.checkpoint()
                    }
                    false => Ok(()),
                });
                if let Err(error) = written {
                    break Err(error);
                }
            };
            match result {
                Ok(()) => bag.finish(),
                Err(error) => {
                    log::error!("recording to {} stopped: {error}", bag.dir().display());
                    Err(error)
                }
            }
        })?;
        Ok(Recorder { events: Some(events), thread: Some(thread) })
    }

    /// Queues `event`, waiting while the queue is full. False once the recording has stopped.
    pub fn record(&self, event: E) -> bool {
        self.events.as_ref().is_some_and(|events| events.send(event).is_ok())
    }

    /// Queues `event` without waiting (for fixed-rate loops): false when the queue is full and
    /// the event is dropped, or the recording has stopped.
    pub fn try_record(&self, event: E) -> bool {
        match self.events.as_ref().map(|events| events.try_send(event)) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => false,
        }
    }

    /// Writes what is queued and finishes the bag.
    pub fn finish(mut self) -> Result<BagStats, BagError> {
        self.events = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => Err(BagError::Panicked),
        }
    }
}

impl<E> Drop for Recorder<E> {
    fn drop(&mut self) {
        self.events = None;
        if let Some(thread) = self.thread.take() {
            match thread.join() {
                Ok(Ok(stats)) => log::info!("bag {}: {} messages", stats.dir.display(), stats.messages),
                Ok(Err(_)) => {} // logged by the thread
                Err(_) => log::error!("the bag thread panicked"),
            }
        }
    }
}
