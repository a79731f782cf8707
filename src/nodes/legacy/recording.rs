//! The port-5555 server's sessions recorded as legacy_bridge publishes them, stamped with the
//! wall clock: one bag per session, in a directory named by its start and peer
//! ([`SessionBags`]), or every session into one recording, such as a live view
//! ([`AllSessions`]). Either way [`LegacyPublisher`] decides what goes in.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::publisher::{LegacyEvent, LegacyPublisher, SessionEvents};
use super::{LegacyBridgeSettings, NODE};
use crate::bag::metadata::BagDistro;
use crate::bag::BagWriter;
use crate::bridge::legacy::SessionObserver;
use crate::model::Robot;
use crate::nodes::robot_state::{Urdf, UrdfError, ARM_URDF};
use crate::outputs::{wall_clock_ns, PublisherThread, Recording, RecordingError};

/// Why a recording of the sessions could not start.
#[derive(Debug, thiserror::Error)]
pub enum SessionRecordingError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error("urdf/arm_hil.urdf")]
    Urdf(#[from] UrdfError),
    #[error(transparent)]
    Bag(#[from] crate::bag::BagError),
}

/// legacy_bridge's publisher on its own thread, writing into `sink` with robot_state_publisher's
/// topics beside (no robot_state_publisher runs there).
fn spawn_publisher<R: Recording>(
    sink: R,
    robot: Robot,
    settings: &LegacyBridgeSettings,
    listening: SocketAddr,
    start_ns: u64,
) -> Result<PublisherThread<LegacyEvent, R>, SessionRecordingError> {
    let urdf = Urdf::parse(ARM_URDF)?;
    let (frame_id, rate_hz) = (settings.frame_id.clone(), settings.publish_rate_hz);
    Ok(PublisherThread::spawn(sink, NODE, move |out| {
        LegacyPublisher::advertise(out, robot, &frame_id, rate_hz, listening, Some(&urdf), start_ns)
    })?)
}

/// The directory of a session's bag: its start (UTC, as rosbag2 names its bags) and its peer.
pub fn session_bag_name(start_ns: u64, peer: SocketAddr) -> String {
    let start = chrono::DateTime::from_timestamp_nanos(start_ns as i64).format("%Y_%m_%d-%H_%M_%S");
    let peer = format!("{}-{}", peer.ip(), peer.port()).replace(':', ".");
    format!("session_{start}_{peer}")
}

/// Records every session the server runs into a bag of its own under a directory.
pub struct SessionBags {
    dir: PathBuf,
    distro: BagDistro,
    robot: Robot,
    settings: LegacyBridgeSettings,
    listening: SocketAddr,
    sessions: Mutex<HashMap<SocketAddr, PublisherThread<LegacyEvent, BagWriter>>>,
    /// Bags of ended sessions being finished, waited for when the server goes.
    finishing: Mutex<Vec<JoinHandle<()>>>,
}

impl SessionBags {
    /// Sessions of the server `listening` there are recorded into bags under `dir` (made if it
    /// is missing), as legacy_bridge with `settings` publishes them: the observer to give the
    /// server.
    pub fn observer(
        dir: &Path,
        distro: BagDistro,
        robot: Robot,
        settings: LegacyBridgeSettings,
        listening: SocketAddr,
    ) -> std::io::Result<Arc<dyn SessionObserver>> {
        std::fs::create_dir_all(dir)?;
        let bags = SessionBags {
            dir: dir.to_owned(),
            distro,
            robot,
            settings,
            listening,
            sessions: Mutex::new(HashMap::new()),
            finishing: Mutex::new(Vec::new()),
        };
        Ok(Arc::new(SessionEvents(move |event| bags.record(event))))
    }

    /// Records `event` in its session's bag: a session's start opens one, its end finishes it.
    fn record(&self, event: LegacyEvent) {
        match event {
            LegacyEvent::Started { peer, .. } => self.open(peer, event),
            LegacyEvent::Frame { peer, .. } => {
                let Ok(mut sessions) = self.sessions.lock() else { return };
                if let Some(session) = sessions.get_mut(&peer) {
                    session.event(wall_clock_ns(), event);
                }
            }
            LegacyEvent::Ended { peer, .. } => self.close(peer, event),
        }
    }

    /// A bag for `peer`'s session, which `started` begins.
    fn open(&self, peer: SocketAddr, started: LegacyEvent) {
        let start_ns = wall_clock_ns();
        let dir = self.dir.join(session_bag_name(start_ns, peer));
        let publisher = BagWriter::create(&dir, self.distro)
            .map_err(SessionRecordingError::from)
            .and_then(|bag| spawn_publisher(bag, self.robot.clone(), &self.settings, self.listening, start_ns));
        let mut publisher = match publisher {
            Ok(publisher) => publisher,
            Err(error) => {
                log::error!("{peer}: the session is not recorded: {error}");
                return;
            }
        };
        log::info!("{peer}: recording the session to {}", dir.display());
        publisher.event(start_ns, started);
        publisher.flush();
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(peer, publisher);
        }
    }

    /// `peer`'s session is over (`ended`): its bag is finished, off the server's threads (it
    /// waits for the writer).
    fn close(&self, peer: SocketAddr, ended: LegacyEvent) {
        let Some(mut publisher) = self.sessions.lock().ok().and_then(|mut sessions| sessions.remove(&peer)) else {
            return;
        };
        publisher.event(wall_clock_ns(), ended);
        let finishing = std::thread::Builder::new().name("bag-finish".into()).spawn(move || {
            match publisher.finish(wall_clock_ns()) {
                Ok(stats) => log::info!("{peer}: bag {}: {} messages", stats.dir.display(), stats.messages),
                Err(error) => log::error!("{peer}: the session's bag is incomplete: {error}"),
            }
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

/// Every session the server runs, recorded into one sink (the live view of `arm_hil serve`), as
/// legacy_bridge publishes them all on its topics.
pub struct AllSessions<R: Recording> {
    publisher: Arc<Mutex<Option<PublisherThread<LegacyEvent, R>>>>,
}

impl<R: Recording> AllSessions<R> {
    /// Starts recording the sessions of the server `listening` there into `sink`, as
    /// legacy_bridge with `settings` publishes them; the observer to give the server comes
    /// with it.
    pub fn start(
        sink: R,
        robot: Robot,
        settings: &LegacyBridgeSettings,
        listening: SocketAddr,
    ) -> Result<(AllSessions<R>, Arc<dyn SessionObserver>), SessionRecordingError> {
        let publisher = spawn_publisher(sink, robot, settings, listening, wall_clock_ns())?;
        let publisher = Arc::new(Mutex::new(Some(publisher)));
        let feed = publisher.clone();
        let observer = SessionEvents(move |event| {
            if let Ok(mut publisher) = feed.lock() {
                if let Some(publisher) = publisher.as_mut() {
                    // A session's start and end go to the view at once; frames in batches.
                    let news = !matches!(event, LegacyEvent::Frame { .. });
                    publisher.event(wall_clock_ns(), event);
                    if news {
                        publisher.flush();
                    }
                }
            }
        });
        Ok((AllSessions { publisher }, Arc::new(observer)))
    }

    /// Ends the recording (sessions still running are recorded no further).
    pub fn finish(&self) -> Option<Result<R::Finished, RecordingError>> {
        let publisher = self.publisher.lock().ok()?.take()?;
        Some(publisher.finish(wall_clock_ns()))
    }
}
