//! What legacy_bridge publishes, and when: every port-5555 session's frames on the arm's topics
//! at the publish rate of the session's own time, each session's joints worked out with its own
//! elbow, and the server's status on /diagnostics (sessions running, complete, refused or
//! stopped, the last one's news) once a second and at once when it changes. The r2r node, the
//! live view and the per-session bags of `arm_hil serve` only feed it [`LegacyEvent`]s, through
//! [`SessionEvents`].

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::bridge::legacy::{SessionError, SessionObserver, SessionReport};
use crate::control::Trajectory;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::robot_state::Urdf;
use crate::nodes::status::{Level, Status};
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::nodes::Decimator;
use crate::outputs::{Outputs, Publisher, Sink, SinkError};
use crate::sim::Frame;

/// legacy_bridge's status on /diagnostics.
pub const STATUS_NAME: &str = "legacy_bridge: server";

/// What happens on the port-5555 server that legacy_bridge publishes.
#[derive(Debug, Clone)]
pub enum LegacyEvent {
    /// A session's request was accepted (`hil`: in HIL mode) with a trajectory of `waypoints`
    /// for a forearm pivoting at `elbow` [m].
    Started { peer: SocketAddr, hil: bool, waypoints: usize, elbow: Vec3 },
    /// A frame the session streamed.
    Frame { peer: SocketAddr, frame: Frame },
    /// The session ended: its frames, or why it was refused or stopped.
    Ended { peer: SocketAddr, outcome: Result<u64, String> },
}

/// A running session: its samples and its elbow [m].
#[derive(Debug)]
struct Session {
    samples: Decimator,
    elbow: Vec3,
}

/// legacy_bridge's publisher.
#[derive(Debug)]
pub struct LegacyPublisher {
    arm: ArmTopics,
    rate_hz: f64,
    sessions: HashMap<SocketAddr, Session>,
    diagnostics: Diagnostics,
    listening: SocketAddr,
    complete: u64,
    refused: u64,
    last: String,
}

impl LegacyPublisher {
    /// Advertises legacy_bridge's topics for the server `listening` there, points in
    /// `frame_id`, sessions sampled at `publish_rate_hz`; with `robot_state`,
    /// robot_state_publisher's too (where none runs beside), latched at `start_ns`.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        robot: Robot,
        frame_id: &str,
        publish_rate_hz: f64,
        listening: SocketAddr,
        robot_state: Option<&Urdf>,
        start_ns: u64,
    ) -> Result<LegacyPublisher, SinkError> {
        let mut arm = ArmTopics::advertise(out, robot, ArmTopicSet::LEGACY_BRIDGE, frame_id, robot_state)?;
        let diagnostics = Diagnostics::advertise(out, Status::new(STATUS_NAME, &listening.to_string()))?;
        // Every topic is advertised before anything is published.
        arm.start(out, start_ns)?;
        let mut publisher = LegacyPublisher {
            arm,
            rate_hz: publish_rate_hz,
            sessions: HashMap::new(),
            diagnostics,
            listening,
            complete: 0,
            refused: 0,
            last: String::new(),
        };
        // Out with the first event or tick: nothing is published while topics are advertised.
        publisher.report();
        Ok(publisher)
    }

    /// The server's status: OK while it serves, whatever its clients send (a refused client
    /// is counted and named, not an error of the server).
    fn report(&mut self) {
        let running = self.sessions.len();
        let message = format!("listening on {}; {running} sessions running", self.listening);
        let values = vec![
            ("sessions_running", running.to_string()),
            ("sessions_complete", self.complete.to_string()),
            ("sessions_refused", self.refused.to_string()),
            ("last_session", self.last.clone()),
        ];
        self.diagnostics.set(|status| status.set(Level::Ok, message, values));
    }
}

impl Publisher for LegacyPublisher {
    type Event = LegacyEvent;

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&LegacyEvent>,
    ) -> Result<(), SinkError> {
        match event {
            Some(LegacyEvent::Started { peer, hil, waypoints, elbow }) => {
                self.sessions.insert(*peer, Session { samples: Decimator::new(self.rate_hz), elbow: *elbow });
                let mode = if *hil { "HIL" } else { "SIL" };
                self.last = format!("{peer}: {mode} session of {waypoints} waypoints started");
                self.report();
            }
            Some(LegacyEvent::Frame { peer, frame }) => {
                if let Some(session) = self.sessions.get_mut(peer) {
                    if session.samples.due(frame.t) {
                        self.arm.sample(out, time_ns, frame, &session.elbow)?;
                    }
                }
            }
            Some(LegacyEvent::Ended { peer, outcome }) => {
                self.sessions.remove(peer);
                match outcome {
                    Ok(frames) => {
                        self.complete += 1;
                        self.last = format!("{peer}: complete, {frames} frames");
                    }
                    Err(reason) => {
                        self.refused += 1;
                        self.last = format!("{peer}: refused or stopped: {reason}");
                    }
                }
                self.report();
            }
            None => {}
        }
        self.diagnostics.publish_due(out, time_ns)
    }

    /// The server's last status.
    fn finish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        self.diagnostics.publish(out, time_ns)
    }
}

/// The server's sessions as [`LegacyEvent`]s, handed to `F` (which stamps and publishes them).
pub struct SessionEvents<F>(pub F);

impl<F: Fn(LegacyEvent) + Send + Sync> SessionObserver for SessionEvents<F> {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        let (waypoints, elbow) = (trajectory.waypoints().len(), trajectory.elbow());
        (self.0)(LegacyEvent::Started { peer, hil, waypoints, elbow });
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        (self.0)(LegacyEvent::Frame { peer, frame: *frame });
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        let outcome = outcome.as_ref().map(|report| report.frames).map_err(ToString::to_string);
        (self.0)(LegacyEvent::Ended { peer, outcome });
    }
}
