//! The port-5555 server's sessions recorded as legacy_bridge publishes them (joint states with
//! the passive joints, end effector, /tf, /diagnostics), stamped with the wall clock: one bag
//! per session, in a directory named by its start and peer ([`SessionBags`]), or every session
//! into one recording, such as a live view ([`AllSessions`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::arm::{spawn_arm_recorder, ArmEvent};
use super::metadata::BagDistro;
use super::{wall_clock_ns, BagWriter, Recorder};
use crate::bridge::legacy::{SessionError, SessionObserver, SessionReport};
use crate::control::Trajectory;
use crate::model::Robot;
use crate::nodes::diagnostics::{Level, Status};
use crate::nodes::topics::arm::ArmTopicSet;
use crate::nodes::topics::Recording;
use crate::nodes::Decimator;
use crate::sim::Frame;

/// legacy_bridge's name, which its private topics are under.
const NODE: &str = "legacy_bridge";

/// Records every session the server runs into a bag of its own under `dir`.
pub struct SessionBags {
    dir: PathBuf,
    distro: BagDistro,
    robot: Robot,
    rate_hz: f64,
    /// The server's address: the hardware id of its status.
    listening: String,
    sessions: Mutex<HashMap<SocketAddr, (Recorder<ArmEvent>, Decimator)>>,
    /// Bags of ended sessions being finished, waited for when the server goes.
    finishing: Mutex<Vec<JoinHandle<()>>>,
}

/// The directory of a session's bag: its start (UTC, as rosbag2 names its bags) and its peer.
pub fn session_bag_name(start_ns: u64, peer: SocketAddr) -> String {
    let start = chrono::DateTime::from_timestamp_nanos(start_ns as i64).format("%Y_%m_%d-%H_%M_%S");
    let peer = format!("{}-{}", peer.ip(), peer.port()).replace(':', ".");
    format!("session_{start}_{peer}")
}

impl SessionBags {
    /// Sessions are recorded at `rate_hz` samples per second of session time (legacy_bridge's
    /// publish_rate_hz); `dir` is made if it is missing.
    pub fn new(
        dir: &Path,
        distro: BagDistro,
        robot: Robot,
        rate_hz: f64,
        listening: SocketAddr,
    ) -> std::io::Result<Arc<SessionBags>> {
        std::fs::create_dir_all(dir)?;
        Ok(Arc::new(SessionBags {
            dir: dir.to_owned(),
            distro,
            robot,
            rate_hz,
            listening: listening.to_string(),
            sessions: Mutex::new(HashMap::new()),
            finishing: Mutex::new(Vec::new()),
        }))
    }
}

/// legacy_bridge's server status, its hardware id the server's address `listening`.
fn server_status(listening: &str, message: String) -> Status {
    let mut status = Status::new("legacy_bridge: server", listening);
    status.set(Level::Ok, message, Vec::new());
    status
}

/// What the server status says when the session with `peer` starts.
fn started_message(peer: SocketAddr, hil: bool, trajectory: &Trajectory) -> String {
    let mode = if hil { "HIL" } else { "SIL" };
    format!("{peer}: {mode} session of {} waypoints", trajectory.waypoints().len())
}

/// What the server status says when the session with `peer` ends.
fn ended_message(peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) -> String {
    match outcome {
        Ok(report) => format!("{peer}: complete, {} frames", report.frames),
        Err(error) => format!("{peer}: stopped: {error}"),
    }
}

impl SessionObserver for SessionBags {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        let start_ns = wall_clock_ns();
        let dir = self.dir.join(session_bag_name(start_ns, peer));
        let recorder = BagWriter::create(&dir, self.distro).map_err(anyhow::Error::from).and_then(|bag| {
            Ok(spawn_arm_recorder(bag, self.robot.clone(), NODE, ArmTopicSet::LEGACY_BRIDGE, start_ns)?)
        });
        let mut recorder = match recorder {
            Ok(recorder) => recorder,
            Err(error) => {
                log::error!("{peer}: the session is not recorded: {error:#}");
                return;
            }
        };
        recorder.record(ArmEvent::Run { time_ns: start_ns, trajectory: Arc::new(trajectory.clone()) });
        let status = server_status(&self.listening, started_message(peer, hil, trajectory));
        recorder.record(ArmEvent::Status { time_ns: start_ns, status });
        recorder.flush();
        log::info!("{peer}: recording the session to {}", dir.display());
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(peer, (recorder, Decimator::new(self.rate_hz)));
        }
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        let Ok(mut sessions) = self.sessions.lock() else { return };
        if let Some((recorder, samples)) = sessions.get_mut(&peer) {
            if samples.due(frame.t) {
                recorder.record(ArmEvent::Frame { time_ns: wall_clock_ns(), frame: *frame });
            }
        }
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        let Some((mut recorder, _)) = self.sessions.lock().ok().and_then(|mut sessions| sessions.remove(&peer)) else {
            return;
        };
        let status = server_status(&self.listening, ended_message(peer, outcome));
        recorder.record(ArmEvent::Status { time_ns: wall_clock_ns(), status });
        // Finishing waits for the writer: not on the server's threads.
        let finishing = std::thread::Builder::new().name("bag-finish".into()).spawn(move || match recorder.finish() {
            Ok(stats) => log::info!("{peer}: bag {}: {} messages", stats.dir.display(), stats.messages),
            Err(error) => log::error!("{peer}: the session's bag is incomplete: {error}"),
        });
        match (finishing, self.finishing.lock()) {
            (Ok(thread), Ok(mut finishing)) => {
                finishing.retain(|thread| !thread.is_finished());
                finishing.push(thread);
            }
            (Ok(_), Err(_)) => {}
            (Err(error), _) => log::error!("{peer}: cannot finish the session's bag: {error}"),
        }
    }
}

/// Every session the server runs, recorded into one sink (the live view of `arm_hil serve`), as
/// legacy_bridge publishes them all on its topics: each session's frames at `rate_hz` samples
/// per second of its own time, its start (its path, latched) and its end on /diagnostics.
pub struct AllSessions<R: Recording> {
    rate_hz: f64,
    listening: String,
    recorder: Mutex<Option<Recorder<ArmEvent, R>>>,
    samples: Mutex<HashMap<SocketAddr, Decimator>>,
}

impl<R: Recording> AllSessions<R> {
    /// Starts recording into `sink`; `listening` is the server's address (its status's id).
    pub fn start(sink: R, robot: Robot, rate_hz: f64, listening: SocketAddr) -> anyhow::Result<Arc<AllSessions<R>>> {
        let recorder = spawn_arm_recorder(sink, robot, NODE, ArmTopicSet::LEGACY_BRIDGE, wall_clock_ns())?;
        let sessions = AllSessions {
            rate_hz,
            listening: listening.to_string(),
            recorder: Mutex::new(Some(recorder)),
            samples: Mutex::new(HashMap::new()),
        };
        sessions.status(format!("listening on {listening}"));
        Ok(Arc::new(sessions))
    }

    fn record(&self, event: ArmEvent, flush: bool) {
        let Ok(mut recorder) = self.recorder.lock() else { return };
        if let Some(recorder) = recorder.as_mut() {
            recorder.record(event);
            if flush {
                recorder.flush();
            }
        }
    }

    fn status(&self, message: String) {
        let status = server_status(&self.listening, message);
        self.record(ArmEvent::Status { time_ns: wall_clock_ns(), status }, true);
    }

    /// Ends the recording (sessions still running are recorded no further).
    pub fn finish(&self) -> Option<Result<R::Finished, super::RecordingError>> {
        let recorder = self.recorder.lock().ok()?.take()?;
        Some(recorder.finish())
    }
}

impl<R: Recording> SessionObserver for AllSessions<R> {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        if let Ok(mut samples) = self.samples.lock() {
            samples.insert(peer, Decimator::new(self.rate_hz));
        }
        self.record(ArmEvent::Run { time_ns: wall_clock_ns(), trajectory: Arc::new(trajectory.clone()) }, false);
        self.status(started_message(peer, hil, trajectory));
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        let due = self.samples.lock().ok().and_then(|mut samples| samples.get_mut(&peer).map(|s| s.due(frame.t)));
        if due == Some(true) {
            self.record(ArmEvent::Frame { time_ns: wall_clock_ns(), frame: *frame }, false);
        }
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        let Some(_) = self.samples.lock().ok().and_then(|mut samples| samples.remove(&peer)) else { return };
        self.status(ended_message(peer, outcome));
    }
}

impl Drop for SessionBags {
    /// The server is going: sessions still running keep what they recorded (their recorders
    /// finish as they drop), and bags being finished are waited for.
    fn drop(&mut self) {
        if let Ok(sessions) = self.sessions.get_mut() {
            sessions.clear();
        }
        if let Ok(finishing) = self.finishing.get_mut() {
            for thread in finishing.drain(..) {
                let _ = thread.join();
            }
        }
    }
}
