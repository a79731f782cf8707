//! What the commands share: a line of output as JSON or text, and the interactive console loop.

use std::io::{BufRead, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use arm_hil::hil::exit;
use serde::Serialize;

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

/// Until Ctrl-C (or another signal, [`exit::requested`]) or the end of the driver: every
/// non-empty line typed on stdin goes to `on_line`, every event of the driver to `on_event`,
/// and `on_quiet` runs after 10 ms without one (a guard that watches for silence).
pub(crate) fn run<E>(
    events: &Receiver<E>,
    mut on_line: impl FnMut(&str) -> anyhow::Result<()>,
    mut on_event: impl FnMut(&E) -> anyhow::Result<()>,
    mut on_quiet: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    while !exit::requested() {
        while let Ok(input) = lines.try_recv() {
            if !input.trim().is_empty() {
                on_line(input.trim())?;
            }
        }
        match events.recv_timeout(Duration::from_millis(10)) {
            Ok(event) => on_event(&event)?,
            Err(RecvTimeoutError::Timeout) => on_quiet()?,
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the driver stopped"),
        }
    }
    Ok(())
}
