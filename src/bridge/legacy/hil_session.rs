//! A port-5555 `H` session: the HIL loop on the rig, on a thread of its own, its frames streamed
//! to the client; and what ends that loop when the server shuts down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{write_chunk, Observed, SessionError, SessionReport, Shared};
use crate::control::Trajectory;
use crate::drivers::{open_hardware, RigDevices, RigKind, RigSettings};
use crate::hil::exit::SetOnDrop;
use crate::hil::{feed_trajectory, FrameSink, HilConfig, HilLoop};
use crate::protocol::legacy::{encode_frame, end_marker, FRAME_BYTES};
use crate::sim::Frame;

/// What `H` sessions run on.
#[derive(Debug, Clone)]
pub struct HilSetup {
    pub kind: RigKind,
    pub hil: HilConfig,
    pub settings: RigSettings,
}

/// A HIL session's loop, as the server's closer sees it.
#[derive(Clone)]
pub(super) struct RunningLoop {
    /// Ends the loop (with its safe stop) when set.
    pub(super) stop: Arc<AtomicBool>,
    /// Set once the loop has ended and released the rig.
    pub(super) released: Arc<AtomicBool>,
}

/// Ends the server's HIL session, for a server that is shutting down: see
/// [`super::LegacyServer::serve_until_exit`].
pub(super) struct ServerCloser(pub(super) Arc<Shared>);

impl ServerCloser {
    /// Refuses HIL sessions from now on and ends the running one's loop, which stops the rig as
    /// every loop's end does; returns once the loop has released the rig (true), or after
    /// `within` (false).
    pub(super) async fn close(&self, within: Duration) -> bool {
        let shared = &self.0;
        shared.closing.store(true, Ordering::SeqCst);
        let running = shared.hil_loop.lock().ok().and_then(|running| running.clone());
        let Some(running) = running else { return true };
        running.stop.store(true, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + within;
        while !running.released.load(Ordering::SeqCst) {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        true
    }
}

/// Holds the HIL slot for one session and frees it when dropped.
pub(super) struct HilSlot<'a>(&'a AtomicBool);

impl<'a> HilSlot<'a> {
    pub(super) fn take(running: &'a AtomicBool) -> Option<HilSlot<'a>> {
        running.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| HilSlot(running))
    }
}

impl Drop for HilSlot<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Hands the HIL loop's frames to the session's writer; a full channel drops the frame.
struct ChannelSink(mpsc::Sender<Frame>);

impl FrameSink for ChannelSink {
    fn offer(&mut self, frame: &Frame) -> bool {
        self.0.try_send(*frame).is_ok()
    }
}

/// Frames in flight from the HIL loop to one client: 1 s at 1 kHz.
const HIL_FRAMES_IN_FLIGHT: usize = 1000;

/// Streams a HIL run: a frame per loop cycle (the estimate and the commanded torque), the end
/// marker, then shuts down writing. No header: the lab's client reads frames from the first byte
/// in HIL mode (docs/port5555.md). The loop never waits for the client: frames it cannot hand
/// over are dropped and counted. A client that leaves stops the run (with a safe stop).
pub(super) async fn stream_hil(
    shared: &Shared,
    setup: &HilSetup,
    mut stream: TcpStream,
    trajectory: Arc<Trajectory>,
    devices: RigDevices,
    observer: Option<Observed>,
) -> Result<SessionReport, SessionError> {
    let stall = Duration::from_secs_f64(shared.config.write_stall_timeout_s);
    let end_time = trajectory.end_time();
    let start = trajectory.waypoints()[0];
    let (frames, mut received) = mpsc::channel::<Frame>(HIL_FRAMES_IN_FLIGHT);
    let running = RunningLoop { stop: Arc::new(AtomicBool::new(false)), released: Arc::new(AtomicBool::new(false)) };
    // Seen by the closer before the rig is opened; a close that came before this is seen here.
    if let Ok(mut hil_loop) = shared.hil_loop.lock() {
        *hil_loop = Some(running.clone());
    }
    if shared.closing.load(Ordering::SeqCst) {
        running.stop.store(true, Ordering::SeqCst);
    }
    let stop = running.stop.clone();
    let run = {
        let (sil, setup, trajectory, running) = (shared.sil.clone(), setup.clone(), trajectory.clone(), running);
        tokio::task::spawn_blocking(move || -> Result<_, SessionError> {
            // Once the loop has ended with its safe stop and dropped the rig (or never opened it,
            // or panicked: the rig stopped as it unwound).
            let _released = SetOnDrop(running.released.clone());
            let hardware = open_hardware(setup.kind, &devices, &setup.settings, &sil, &start, trajectory.elbow())?;
            let feed = feed_trajectory(trajectory.clone());
            let (elbow, l_arm) = (trajectory.elbow(), trajectory.l_arm());
            let hil = HilLoop::new(setup.hil, &sil, elbow, l_arm, hardware, feed, running.stop.clone())?;
            Ok(hil.with_frames(Box::new(ChannelSink(frames))).run())
        })
    };
    let mut last = Frame { t: start.t, x: start.x, x_dot: start.xd, ..Frame::default() };
    let mut sent = 0;
    let mut buf = Vec::with_capacity(FRAME_BYTES);
    let mut written = Ok(());
    while let Some(frame) = received.recv().await {
        last = frame;
        if let Some(observed) = &observer {
            observed.frame(&frame);
        }
        // The end marker is the only frame at or after end_time.
        if frame.t >= end_time || written.is_err() {
            continue;
        }
        buf.clear();
        encode_frame(&frame, &mut buf);
        written = write_chunk(&mut stream, &buf, stall).await;
        match written {
            Ok(()) => sent += 1,
            Err(_) => stop.store(true, Ordering::Relaxed),
        }
    }
    let report = run.await.map_err(|error| std::io::Error::other(error.to_string()));
    if let Ok(mut hil_loop) = shared.hil_loop.lock() {
        *hil_loop = None;
    }
    let report = report??;
    written?;
    buf.clear();
    encode_frame(&end_marker(&last, end_time), &mut buf);
    write_chunk(&mut stream, &buf, stall).await?;
    stream.shutdown().await?;
    if report.stats.frames_dropped > 0 {
        log::warn!("HIL session dropped {} frames the client did not read in time", report.stats.frames_dropped);
    }
    report.outcome?;
    Ok(SessionReport { waypoints: trajectory.waypoints().len(), frames: sent, capped: false })
}
