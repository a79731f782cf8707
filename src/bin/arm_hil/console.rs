//! What the commands share: a line of output as JSON or text, and the interactive console loop.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use arm_hil::outputs::{wall_clock_ns, Outputs, Publisher, PublisherThread, SinkError};

use crate::outputs::{OutputArgs, RunSinks};

/// Prints `value` as one JSON object on a line with `json`, else `text()`.
pub(crate) fn print_line(value: &impl Serialize, text: impl FnOnce() -> String, json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut stdout, value)?;
        writeln!(stdout)?;
    } else {
        writeln!(stdout, "{}", text())?;
    }
    Ok(())
}

/// A device session published as its node publishes it, into a bag and/or a live view, on
/// wall-clock time.
pub(crate) type DevicePublisher<E> = PublisherThread<E, RunSinks>;

/// Starts publishing a device session as `node` publishes it, into the bag and/or the live view
/// `outputs` asks for, its topics set up by `advertise` (see [`PublisherThread::spawn`]); None
/// when neither is asked for.
pub(crate) fn start_recording<T, A>(
    outputs: &OutputArgs,
    node: &str,
    advertise: A,
) -> anyhow::Result<Option<DevicePublisher<T::Event>>>
where
    T: Publisher,
    T::Event: Send + 'static,
    A: FnOnce(&mut Outputs<RunSinks>) -> Result<T, SinkError> + Send + 'static,
{
    let Some(sinks) = outputs.sinks(node)? else { return Ok(None) };
    Ok(Some(PublisherThread::spawn(sinks, node, advertise).context("cannot record the session")?))
}

/// Finishes the bag and the live view of a device session, where there are.
pub(crate) fn finish_recording<E: Send + 'static>(recorder: Option<DevicePublisher<E>>) -> anyhow::Result<()> {
    if let Some(recorder) = recorder {
        let (bag, _live) = recorder.finish(wall_clock_ns()).context("the bag or the live view is incomplete")?;
        if let Some(stats) = bag {
            log::info!("bag {}: {} messages", stats.dir.display(), stats.messages);
        }
    }
    Ok(())
}

/// Until Ctrl-C or the end of the driver: every non-empty line typed on stdin goes to
/// `on_line`, every event of the driver to `on_event`.
pub(crate) fn run<E>(
    events: &Receiver<E>,
    mut on_line: impl FnMut(&str) -> anyhow::Result<()>,
    mut on_event: impl FnMut(&E) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let stop_on_signal = stop.clone();
    ctrlc::set_handler(move || stop_on_signal.store(true, Ordering::Relaxed)).context("cannot handle Ctrl-C")?;
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    while !stop.load(Ordering::Relaxed) {
        while let Ok(input) = lines.try_recv() {
            if !input.trim().is_empty() {
                on_line(input.trim())?;
            }
        }
        match events.recv_timeout(Duration::from_millis(50)) {
            Ok(event) => on_event(&event)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the driver stopped"),
        }
    }
    Ok(())
}
