//! legacy_bridge: the port-5555 server as a ROS 2 node, republishing every session's frames on
//! sil_node's topics (joint states with torques as efforts, end effector) with the session's
//! peer on /diagnostics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;

use super::diagnostics::Reporter;
use super::params::{nothing_at_run_time, serve_parameters};
use super::{node_params, now_ns, ros_outputs, spin, RosSink};
use crate::bridge::legacy::{LegacyServer, SessionError, SessionObserver, SessionReport};
use crate::control::Trajectory;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
use crate::nodes::joints::arm_joint_state;
use crate::nodes::legacy::{legacy_bridge_config, LEGACY_BRIDGE_PARAMS};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::topics::Outputs;
use crate::nodes::Decimator;
use crate::sim::Frame;

/// What the server has done, for /diagnostics.
#[derive(Default)]
struct Tally {
    running: usize,
    complete: u64,
    refused: u64,
    last: String,
}

/// Publishes sessions as they run; one decimator and elbow per peer.
struct RosObserver {
    /// r2r publishers are Send but not Sync; sessions publish from several threads.
    arm: Mutex<(ArmTopics, Outputs<RosSink>)>,
    robot: Robot,
    clock: Arc<Mutex<r2r::Clock>>,
    rate_hz: f64,
    sessions: Mutex<HashMap<SocketAddr, (Decimator, Vec3)>>,
    reporter: Arc<Reporter>,
    listening: String,
    tally: Mutex<Tally>,
}

impl RosObserver {
    /// Counts a session event and reports the server: OK while it serves, whatever its clients
    /// send (a refused client is counted and named, not an error of the server).
    fn report(&self, count: impl FnOnce(&mut Tally)) {
        let Ok(mut tally) = self.tally.lock() else { return };
        count(&mut tally);
        let message = format!("listening on {}; {} sessions running", self.listening, tally.running);
        let values = vec![
            ("sessions_running", tally.running.to_string()),
            ("sessions_complete", tally.complete.to_string()),
            ("sessions_refused", tally.refused.to_string()),
            ("last_session", tally.last.clone()),
        ];
        self.reporter.update(|status| status.set(Level::Ok, message, values));
    }
}

impl SessionObserver for RosObserver {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(peer, (Decimator::new(self.rate_hz), trajectory.elbow()));
        }
        let mode = if hil { "HIL" } else { "SIL" };
        let waypoints = trajectory.waypoints().len();
        log::info!("{peer}: {mode} session of {waypoints} waypoints");
        self.report(|tally| {
            tally.running += 1;
            tally.last = format!("{peer}: {mode} session of {waypoints} waypoints started");
        });
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        let elbow =
            match self.sessions.lock().ok().and_then(|mut s| s.get_mut(&peer).map(|(d, e)| (d.due(frame.t), *e))) {
                Some((true, elbow)) => elbow,
                _ => return,
            };
        let joints = arm_joint_state(&self.robot, frame, &elbow);
        let Ok(mut arm) = self.arm.lock() else { return };
        let (topics, out) = &mut *arm;
        if let Err(error) = topics.sample(out, now_ns(&self.clock), frame, &joints) {
            log::warn!("publishing a session frame failed: {error}");
        }
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&peer);
        }
        self.report(|tally| match outcome {
            Ok(report) => {
                tally.running = tally.running.saturating_sub(1);
                tally.complete += 1;
                tally.last = format!("{peer}: complete, {} frames", report.frames);
            }
            Err(error) => {
                // Refused before starting (no `started`) or stopped while running.
                tally.running = tally.running.min(self.sessions.lock().map_or(0, |s| s.len()));
                tally.refused += 1;
                tally.last = format!("{peer}: refused or stopped: {error}");
            }
        });
    }
}

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = legacy_bridge_config(&node_params(&node)).context("legacy_bridge parameters")?;
    // robot_state_publisher publishes the URDF and /tf beside the node.
    let frame_id = &config.settings.frame_id;
    let arm = ros_outputs(&mut node, |out| ArmTopics::advertise(out, ArmTopicSet::LEGACY_BRIDGE, frame_id, None))?;
    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), &LEGACY_BRIDGE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;

    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let server = runtime.block_on(LegacyServer::bind(config.server, config.sil.clone(), config.hil))?;
    let listening = server.local_addr()?.to_string();
    log::info!("port-5555 server listening on {listening}");
    let observer = Arc::new(RosObserver {
        arm: Mutex::new(arm),
        robot: Robot::new(config.sil.robot.clone())?,
        clock: node.get_ros_clock(),
        rate_hz: config.settings.publish_rate_hz,
        sessions: Mutex::new(HashMap::new()),
        reporter: Reporter::new(&mut node, "legacy_bridge: server", &listening)?,
        listening,
        tally: Mutex::new(Tally::default()),
    });
    observer.report(|_| {});
    let stop = Arc::new(AtomicBool::new(false));
    let periodic = observer.reporter.spawn_periodic(stop.clone())?;
    let server = server.with_observer(observer);
    // The server thread ends with the process: sessions are cut when it exits.
    let _serving =
        std::thread::Builder::new().name("legacy-server".into()).spawn(move || runtime.block_on(server.serve()))?;
    spin(node, pool, &stop)?;
    let _ = periodic.join();
    Ok(())
}
