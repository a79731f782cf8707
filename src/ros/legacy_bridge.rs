//! legacy_bridge: the port-5555 server as a ROS 2 node, republishing every session's frames on
//! sil_node's topics (joint states with torques as efforts, end effector) with the session's
//! peer on /diagnostics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use r2r::diagnostic_msgs::msg::DiagnosticArray;
use r2r::geometry_msgs::msg::{PointStamped, TwistStamped};
use r2r::sensor_msgs::msg::JointState;
use r2r::{Publisher, QosProfile};

use super::{
    arm_joint_state_msg, diagnostics, linear_twist, node_params, now, point_stamped, spin, state_qos, ERROR, OK,
};
use crate::bridge::legacy::{LegacyServer, SessionError, SessionObserver, SessionReport};
use crate::control::Trajectory;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::joints::arm_joint_state;
use crate::nodes::legacy::legacy_bridge_config;
use crate::nodes::Decimator;
use crate::sim::Frame;

struct Publishers {
    joint_states: Publisher<JointState>,
    end_effector: Publisher<PointStamped>,
    end_effector_twist: Publisher<TwistStamped>,
    diagnostics: Publisher<DiagnosticArray>,
}

/// Publishes sessions as they run; one decimator and elbow per peer.
struct RosObserver {
    /// r2r publishers are Send but not Sync; sessions publish from several threads.
    publishers: Mutex<Publishers>,
    robot: Robot,
    clock: Arc<Mutex<r2r::Clock>>,
    frame_id: String,
    rate_hz: f64,
    sessions: Mutex<HashMap<SocketAddr, (Decimator, Vec3)>>,
}

impl RosObserver {
    fn report(&self, level: u8, peer: SocketAddr, message: &str, values: &[(&str, String)]) {
        let status = diagnostics(now(&self.clock), level, "legacy_bridge: session", message, &peer.to_string(), values);
        if let Err(error) = self.publishers.lock().map(|publishers| publishers.diagnostics.publish(&status)) {
            log::warn!("publishing /diagnostics failed: {error}");
        }
    }
}

impl SessionObserver for RosObserver {
    fn started(&self, peer: SocketAddr, hil: bool, trajectory: &Trajectory) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(peer, (Decimator::new(self.rate_hz), trajectory.elbow()));
        }
        let mode = if hil { "HIL" } else { "SIL" };
        self.report(
            OK,
            peer,
            &format!("{mode} session started"),
            &[("waypoints", trajectory.waypoints().len().to_string())],
        );
    }

    fn frame(&self, peer: SocketAddr, frame: &Frame) {
        let elbow =
            match self.sessions.lock().ok().and_then(|mut s| s.get_mut(&peer).map(|(d, e)| (d.due(frame.t), *e))) {
                Some((true, elbow)) => elbow,
                _ => return,
            };
        let time = now(&self.clock);
        let joints = arm_joint_state(&self.robot, frame, &elbow);
        let Ok(publishers) = self.publishers.lock() else { return };
        let published = publishers
            .joint_states
            .publish(&arm_joint_state_msg(time.clone(), &joints))
            .and_then(|()| publishers.end_effector.publish(&point_stamped(time.clone(), &self.frame_id, &frame.x)))
            .and_then(|()| publishers.end_effector_twist.publish(&linear_twist(time, &self.frame_id, &frame.x_dot)));
        if let Err(error) = published {
            log::warn!("publishing a session frame failed: {error}");
        }
    }

    fn ended(&self, peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&peer);
        }
        match outcome {
            Ok(report) => self.report(OK, peer, "session complete", &[("frames", report.frames.to_string())]),
            Err(error) => self.report(ERROR, peer, &format!("session refused or stopped: {error}"), &[]),
        }
    }
}

/// Runs the node until interrupted.
pub fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let context = r2r::Context::create()?;
    let mut node = r2r::Node::create(context, "legacy_bridge", "")?;
    let config = legacy_bridge_config(&node_params(&node)).context("legacy_bridge parameters")?;
    let publishers = Publishers {
        joint_states: node.create_publisher("/joint_states", state_qos())?,
        end_effector: node.create_publisher("~/end_effector", state_qos())?,
        end_effector_twist: node.create_publisher("~/end_effector_twist", state_qos())?,
        diagnostics: node.create_publisher("/diagnostics", QosProfile::default().keep_last(10))?,
    };
    let observer = Arc::new(RosObserver {
        publishers: Mutex::new(publishers),
        robot: Robot::new(config.sil.robot.clone())?,
        clock: node.get_ros_clock(),
        frame_id: config.settings.frame_id.clone(),
        rate_hz: config.settings.publish_rate_hz,
        sessions: Mutex::new(HashMap::new()),
    });
    let pool = LocalPool::new();
    let (handler, _parameter_events) = node.make_parameter_handler()?;
    pool.spawner().spawn_local(handler)?;

    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let server = runtime.block_on(LegacyServer::bind(config.server, config.sil, config.hil))?.with_observer(observer);
    log::info!("port-5555 server listening on {}", server.local_addr()?);
    let serving =
        std::thread::Builder::new().name("legacy-server".into()).spawn(move || runtime.block_on(server.serve()))?;
    spin(node, pool, &stop)?;
    // The server thread ends with the process.
    drop(serving);
    Ok(())
}
