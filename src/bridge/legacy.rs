//! The port-5555 server: existing GUI clients drive the simulator and the HIL loop over TCP
//! (docs/port5555.md).
//!
//! Per connection: read the request in bounded chunks with an idle timeout, validate it, send
//! the 12-byte header (SIL only), stream frames as the engine produces them, the end marker, the
//! ideal blocks (SIL), then shut down the write side. Frames pass from a blocking producer thread to
//! the socket through a bounded channel, so a slow reader slows only its own session and memory
//! does not grow with the number of frames. A refused connection is logged with the peer and
//! the reason, and gets no bytes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use crate::control::{Trajectory, TrajectoryError, MAX_WAYPOINTS};
use crate::drivers::RigDevices;
use crate::hil::protection::PathStart;
use crate::hil::{exit, HardwareError, HilError};
use crate::model::Robot;
use crate::protocol::legacy::{
    encode_frame, encode_header, encode_ideal, end_marker, Mode, Request, RequestDecoder, RequestError, FRAME_BYTES,
};
use crate::sim::{Frame, IdealTorques, SilConfig, SimError, Simulation};

mod hil_session;
pub use hil_session::HilSetup;
use hil_session::{stream_hil, HilSlot, RunningLoop, ServerCloser};

/// How long a shutdown waits for the `H` session's loop to release the rig. It ends within a
/// cycle; past this, the process's exit stops the rig itself ([`exit`]).
const HIL_CLOSE_WAIT: Duration = Duration::from_millis(300);

/// Server settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LegacyServerConfig {
    /// Listening address. Default 127.0.0.1:5555 (loopback: expose it on purpose).
    pub bind: SocketAddr,
    /// Longest wait for the next bytes of a request [s]. Default 10.
    pub idle_timeout_s: f64,
    /// Longest a single write to a client may make no progress [s]. Default 30.
    pub write_stall_timeout_s: f64,
    /// Sessions served at once; more connections are refused. Default 64.
    pub max_sessions: usize,
    /// Largest trajectory accepted. Default 1 000 000 (docs/port5555.md).
    pub max_waypoints: usize,
    /// Device paths an `H` client may name (glob patterns). A network client never opens
    /// anything else. Default /dev/ttyUSB*, /dev/ttyACM*, /dev/serial/by-id/*, /dev/arm_hil_* (the
    /// names of udev/99-arm-hil.rules), auto.
    pub device_allow_list: Vec<String>,
}

impl Default for LegacyServerConfig {
    fn default() -> Self {
        LegacyServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 5555)),
            idle_timeout_s: 10.0,
            write_stall_timeout_s: 30.0,
            max_sessions: 64,
            max_waypoints: MAX_WAYPOINTS,
            device_allow_list: ["/dev/ttyUSB*", "/dev/ttyACM*", "/dev/serial/by-id/*", "/dev/arm_hil_*", "auto"]
                .map(String::from)
                .to_vec(),
        }
    }
}

impl LegacyServerConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in
            [("idle_timeout_s", self.idle_timeout_s), ("write_stall_timeout_s", self.write_stall_timeout_s)]
        {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("server.{name} must be finite and > 0, got {value}"));
            }
        }
        if self.max_sessions == 0 || !(1..=MAX_WAYPOINTS).contains(&self.max_waypoints) {
            return Err(format!(
                "server.max_sessions must be > 0 and server.max_waypoints in 1..={MAX_WAYPOINTS}, got {} and {}",
                self.max_sessions, self.max_waypoints
            ));
        }
        if let Some(bad) = self.device_allow_list.iter().find(|pattern| glob::Pattern::new(pattern).is_err()) {
            return Err(format!("server.device_allow_list has an invalid pattern `{bad}`"));
        }
        Ok(())
    }

    /// Whether an `H` client may name `device`: a path of plain components (no `.`, `..` or empty
    /// one, through which `/dev/serial/by-id/*` would reach any file) that a pattern of the
    /// allow-list matches, a `*` never crossing a `/`.
    pub fn allows_device(&self, device: &str) -> bool {
        let plain = device.strip_prefix('/').unwrap_or(device).split('/').all(|c| !matches!(c, "" | "." | ".."));
        let options = glob::MatchOptions { require_literal_separator: true, ..glob::MatchOptions::new() };
        plain
            && self
                .device_allow_list
                .iter()
                .filter_map(|pattern| glob::Pattern::new(pattern).ok())
                .any(|pattern| pattern.matches_with(device, options))
    }
}

/// Why a session ended early. Every variant is logged with the peer.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("too many sessions ({0} running)")]
    Busy(usize),
    #[error("no bytes for {0:?} while reading the request ({1} waypoints received)")]
    IdleTimeout(Duration, usize),
    #[error("the client closed the connection mid-request ({0} waypoints received)")]
    Truncated(usize),
    #[error("bad request: {0}")]
    Request(#[from] RequestError),
    #[error("bad trajectory: {0}")]
    Trajectory(#[from] TrajectoryError),
    #[error("device `{0}` is not on the allow-list")]
    DeviceNotAllowed(String),
    #[error("this server has no HIL hardware configured")]
    HilUnavailable,
    #[error("a HIL session is already running")]
    HilBusy,
    #[error("the server is shutting down")]
    Closing,
    #[error("the HIL hardware could not be opened: {0}")]
    Hardware(#[from] HardwareError),
    #[error("the HIL run stopped: {0}")]
    Hil(#[from] HilError),
    #[error("the trajectory is refused before anything moves: {0}")]
    Bounds(String),
    #[error("the client read nothing for {0:?}")]
    WriteStalled(Duration),
    #[error("the simulation stopped: {0}")]
    Simulation(#[from] SimError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a completed session sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionReport {
    pub waypoints: usize,
    /// Frames sent before the end marker.
    pub frames: u64,
    /// True when the frame cap ended the run early (the end marker was still sent).
    pub capped: bool,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    SilConfig(#[from] crate::sim::ConfigError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
}

/// Watches sessions, for example to republish their frames. Called from the sessions' threads;
/// calls must be quick.
pub trait SessionObserver: Send + Sync {
    /// A session's request was accepted: `hil` tells the mode.
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory);
    /// A frame the session streamed (every simulator step, or every loop cycle).
    fn frame(&self, peer: SocketAddr, frame: &Frame);
    /// The session ended; `outcome` is what the server logs.
    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>);
}

/// Several observers (a bag per session and a live view, say), each told everything in turn.
impl SessionObserver for Vec<Arc<dyn SessionObserver>> {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        self.iter().for_each(|observer| observer.started(peer, hil, trajectory));
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        self.iter().for_each(|observer| observer.frame(peer, frame));
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        self.iter().for_each(|observer| observer.ended(peer, outcome));
    }
}

struct Shared {
    config: LegacyServerConfig,
    sil: SilConfig,
    robot: Robot,
    sessions: Semaphore,
    hil: Option<HilSetup>,
    /// One set of hardware: one HIL session at a time.
    hil_running: AtomicBool,
    /// The HIL loop of the session that holds the hardware, from before the rig is opened until
    /// the loop has released it (stopped).
    hil_loop: Mutex<Option<RunningLoop>>,
    /// Set by [`ServerCloser::close`]: no HIL session starts any more.
    closing: AtomicBool,
    observer: Option<Arc<dyn SessionObserver>>,
}

/// A bound port-5555 server.
pub struct LegacyServer {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Frames per chunk handed from the simulation thread to the socket writer (64 KiB).
const CHUNK_FRAMES: usize = 512;
/// Chunks in flight per session: the whole per-session buffer is 4 x 64 KiB.
const CHUNKS_IN_FLIGHT: usize = 4;

impl LegacyServer {
    /// Validates the configuration and binds the listening socket. Without `hil`, `H` sessions
    /// are refused.
    pub async fn bind(
        config: LegacyServerConfig,
        sil: SilConfig,
        hil: Option<HilSetup>,
    ) -> Result<LegacyServer, ServerError> {
        config.validate().map_err(ServerError::Config)?;
        sil.validate()?;
        let robot = Robot::new(sil.robot.clone())?;
        let listener = TcpListener::bind(config.bind).await?;
        let sessions = Semaphore::new(config.max_sessions);
        if let Some(setup) = &hil {
            setup.hil.validate().map_err(ServerError::Config)?;
        }
        let shared = Arc::new(Shared {
            config,
            sil,
            robot,
            sessions,
            hil,
            hil_running: AtomicBool::new(false),
            hil_loop: Mutex::new(None),
            closing: AtomicBool::new(false),
            observer: None,
        });
        Ok(LegacyServer { listener, shared })
    }

    /// Reports every session to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn SessionObserver>) -> LegacyServer {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.observer = Some(observer);
        }
        self
    }

    /// Serves as [`LegacyServer::serve`] until the process is asked to end ([`exit::requested`]:
    /// a signal, a panic); then ends the `H` session's loop, which stops the rig (serving stops
    /// when its task is dropped, but the loop runs on a thread of its own and must be ended).
    pub async fn serve_until_exit(self) -> std::io::Result<()> {
        let closer = ServerCloser(self.shared.clone());
        tokio::select! {
            served = self.serve() => served,
            () = exit::wait_requested() => {
                log::info!("interrupted, shutting down");
                if !closer.close(HIL_CLOSE_WAIT).await {
                    log::error!("the HIL session's loop did not end within {HIL_CLOSE_WAIT:?}");
                }
                Ok(())
            }
        }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts clients until the task is dropped; each is served on its own task.
    pub async fn serve(self) -> std::io::Result<()> {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Running out of file descriptors must not end the server: wait and retry.
                    log::warn!("accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = self.shared.clone();
            tokio::spawn(async move {
                let outcome = serve_connection(&shared, stream, peer).await;
                if let Some(observer) = &shared.observer {
                    observer.ended(peer, &outcome);
                }
                match outcome {
                    Ok(report) => log::info!(
                        "{peer}: served {} waypoints, {} frames{}",
                        report.waypoints,
                        report.frames,
                        if report.capped { " (frame cap reached)" } else { "" }
                    ),
                    Err(error) => {
                        let index = match &error {
                            SessionError::Trajectory(trajectory) => trajectory.index(),
                            _ => None,
                        };
                        match index {
                            Some(index) => log::warn!("{peer}: refused: {error} (first bad index {index})"),
                            None => log::warn!("{peer}: refused: {error}"),
                        }
                    }
                }
            });
        }
    }
}

/// How far a HIL session's elbow, or its l_arm, may be from the rig's [m].
const FOREARM_TOLERANCE_M: f64 = 1e-3;

/// Why a HIL session's `trajectory` is not on the rig's forearm (`robot`'s), if it is not: the
/// loop would run it about the request's elbow and l_arm, and its path is checked against the
/// rig's sphere, to which the platform is held.
fn on_the_rigs_forearm(robot: &Robot, trajectory: &Trajectory) -> Result<(), String> {
    let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
    let (asked_elbow, asked_l_arm) = (trajectory.elbow(), trajectory.l_arm());
    if (asked_elbow - elbow).norm() <= FOREARM_TOLERANCE_M && (asked_l_arm - l_arm).abs() <= FOREARM_TOLERANCE_M {
        return Ok(());
    }
    Err(format!(
        "its forearm (elbow at ({:.3}, {:.3}, {:.3}) m, l_arm {asked_l_arm:.3} m) is not the rig's (elbow at \
         ({:.3}, {:.3}, {:.3}) m, l_arm {l_arm:.3} m)",
        asked_elbow.x, asked_elbow.y, asked_elbow.z, elbow.x, elbow.y, elbow.z
    ))
}

async fn serve_connection(
    shared: &Shared,
    mut stream: TcpStream,
    peer: SocketAddr,
) -> Result<SessionReport, SessionError> {
    let in_use = shared.config.max_sessions - shared.sessions.available_permits();
    let _permit = shared.sessions.try_acquire().map_err(|_| SessionError::Busy(in_use))?;
    stream.set_nodelay(true)?;
    let request = read_request(shared, &mut stream).await?;
    let devices = match request.mode {
        Mode::Sil => None,
        Mode::Hil { sensor, arduino } => {
            if let Some(device) = [&sensor, &arduino].into_iter().find(|device| !shared.config.allows_device(device)) {
                return Err(SessionError::DeviceNotAllowed(device.clone()));
            }
            Some(RigDevices { sensor, arduino })
        }
    };
    let trajectory = Arc::new(Trajectory::new(request.waypoints, request.elbow, request.l_arm, &shared.robot)?);
    let observer = shared.observer.clone().map(|observer| Observed { observer, peer });
    match devices {
        None => {
            if let Some(observed) = &observer {
                observed.observer.started(peer, false, &trajectory);
            }
            stream_sil(shared, stream, trajectory, observer).await
        }
        Some(devices) => {
            let setup = shared.hil.as_ref().ok_or(SessionError::HilUnavailable)?;
            if shared.closing.load(Ordering::SeqCst) {
                return Err(SessionError::Closing);
            }
            let _slot = HilSlot::take(&shared.hil_running).ok_or(SessionError::HilBusy)?;
            // Up to a million waypoints: checked beside the server's tasks, not on them.
            let (robot, bounds, checked) = (shared.robot.clone(), setup.hil.protection.clone(), trajectory.clone());
            tokio::task::spawn_blocking(move || {
                // The session runs from rest on the first waypoint to rest on the last.
                on_the_rigs_forearm(&robot, &checked)?;
                bounds.check_path(&robot, checked.waypoints(), PathStart::Requested)?;
                bounds.check_motion(&robot, checked.waypoints(), (true, true))
            })
            .await
            .map_err(|error| std::io::Error::other(error.to_string()))?
            .map_err(SessionError::Bounds)?;
            if let Some(observed) = &observer {
                observed.observer.started(peer, true, &trajectory);
            }
            stream_hil(shared, setup, stream, trajectory, devices, observer).await
        }
    }
}

/// A session's observer and the peer it reports.
#[derive(Clone)]
struct Observed {
    observer: Arc<dyn SessionObserver>,
    peer: SocketAddr,
}

impl Observed {
    fn frame(&self, frame: &Frame) {
        self.observer.frame(self.peer, frame);
    }
}

async fn read_request(shared: &Shared, stream: &mut TcpStream) -> Result<Request, SessionError> {
    let idle = Duration::from_secs_f64(shared.config.idle_timeout_s);
    let mut decoder = RequestDecoder::new(shared.config.max_waypoints);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::time::timeout(idle, stream.read(&mut buf))
            .await
            .map_err(|_| SessionError::IdleTimeout(idle, decoder.waypoints_received()))??;
        if read == 0 {
            return Err(SessionError::Truncated(decoder.waypoints_received()));
        }
        let (used, request) = decoder.decode(&buf[..read])?;
        if let Some(request) = request {
            if used < read {
                log::debug!("ignoring {} bytes after the request", read - used);
            }
            return Ok(request);
        }
    }
}

/// Streams a SIL run: header, frames, end marker, ideal blocks, then shuts down writing.
async fn stream_sil(
    shared: &Shared,
    mut stream: TcpStream,
    trajectory: Arc<Trajectory>,
    observer: Option<Observed>,
) -> Result<SessionReport, SessionError> {
    let stall = Duration::from_secs_f64(shared.config.write_stall_timeout_s);
    let count = trajectory.waypoints().len();
    let mut header = Vec::with_capacity(12);
    encode_header(trajectory.end_time(), count as i32, &mut header);
    write_chunk(&mut stream, &header, stall).await?;

    let (chunks, mut received) = mpsc::channel::<Vec<u8>>(CHUNKS_IN_FLIGHT);
    let (robot, config) = (shared.robot.clone(), shared.sil.clone());
    let producer = tokio::task::spawn_blocking(move || produce_sil(robot, trajectory, &config, chunks, observer));
    let mut written = Ok(());
    while let Some(chunk) = received.recv().await {
        written = write_chunk(&mut stream, &chunk, stall).await;
        if written.is_err() {
            // Dropping the receiver stops the producer at its next chunk.
            break;
        }
    }
    drop(received);
    let produced = producer.await.map_err(|error| std::io::Error::other(error.to_string()))?;
    written?;
    stream.shutdown().await?;
    let (report, simulation_error) = produced;
    match simulation_error {
        Some(error) => Err(error.into()),
        None => Ok(SessionReport { waypoints: count, ..report }),
    }
}

async fn write_chunk(stream: &mut TcpStream, bytes: &[u8], stall: Duration) -> Result<(), SessionError> {
    tokio::time::timeout(stall, stream.write_all(bytes)).await.map_err(|_| SessionError::WriteStalled(stall))??;
    Ok(())
}

/// Collects encoded bytes and hands them to the socket writer in chunks.
struct ChunkSender {
    chunks: mpsc::Sender<Vec<u8>>,
    chunk: Vec<u8>,
}

impl ChunkSender {
    const CHUNK_BYTES: usize = CHUNK_FRAMES * FRAME_BYTES;

    fn new(chunks: mpsc::Sender<Vec<u8>>) -> ChunkSender {
        ChunkSender { chunks, chunk: Vec::with_capacity(Self::CHUNK_BYTES) }
    }

    /// Sends the chunk once it is full; false when the writer is gone.
    fn send_when_full(&mut self) -> bool {
        self.chunk.len() < Self::CHUNK_BYTES || self.send()
    }

    /// Sends what is collected; false when the writer is gone.
    fn send(&mut self) -> bool {
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(Self::CHUNK_BYTES));
        self.chunks.blocking_send(full).is_ok()
    }
}

/// Runs the simulation on a blocking thread and sends the encoded response in chunks. A run that
/// fails mid-way still ends its stream with the end marker and the ideal blocks, so that clients
/// finish reading; the error is returned for the log. Stops early when the writer is gone.
fn produce_sil(
    robot: Robot,
    trajectory: Arc<Trajectory>,
    config: &SilConfig,
    chunks: mpsc::Sender<Vec<u8>>,
    observer: Option<Observed>,
) -> (SessionReport, Option<SimError>) {
    let mut report = SessionReport { waypoints: trajectory.waypoints().len(), frames: 0, capped: false };
    let mut out = ChunkSender::new(chunks);
    let mut simulation = match Simulation::new(robot.clone(), trajectory.clone(), config) {
        Ok(simulation) => simulation,
        Err(error) => return (report, Some(error)),
    };
    let start = trajectory.waypoints()[0];
    let mut last = Frame { t: start.t, x: start.x, x_dot: start.xd, ..Frame::default() };
    let mut failure = None;
    for frame in &mut simulation {
        if let (Ok(frame), Some(observed)) = (&frame, &observer) {
            observed.frame(frame);
        }
        match frame {
            // The run's last frame ends at end_time; the end marker carries that state instead,
            // because clients stop at the first frame with t >= end_time.
            Ok(frame) if frame.t >= trajectory.end_time() => last = frame,
            Ok(frame) => {
                encode_frame(&frame, &mut out.chunk);
                report.frames += 1;
                last = frame;
                if !out.send_when_full() {
                    return (report, None);
                }
            }
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    report.capped = simulation.stats().capped;
    encode_frame(&end_marker(&last, trajectory.end_time()), &mut out.chunk);
    for point in IdealTorques::new(&robot, &trajectory) {
        match point {
            Ok(point) => encode_ideal(&point, &mut out.chunk),
            Err(error) => {
                failure.get_or_insert(SimError::Model { t: trajectory.end_time(), error });
                break;
            }
        }
        if !out.send_when_full() {
            return (report, failure);
        }
    }
    out.send();
    (report, failure)
}
