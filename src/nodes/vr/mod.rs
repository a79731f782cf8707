//! vr_bridge without ROS: its parameters.

pub mod topics;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;

use crate::bridge::vr::{FollowerEvent, VrConfig};
use crate::nodes::param_server::ParamSpec;
use crate::nodes::params::{read_group, without_groups, ParamError, ParamValue};
use crate::nodes::status::{Level, Status};

/// The node's name, which its private topics are under.
pub const NODE: &str = "vr_bridge";

/// vr_bridge's status on /diagnostics, as leader and as follower.
pub const LINK_STATUS: &str = "vr_bridge: link";

/// Which role the node plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VrMode {
    /// Serve Unity followers from ROS topics.
    Leader,
    /// Follow a Deltarobot leader and publish what it sends on ROS topics.
    Follower,
}

/// vr_bridge's parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VrNodeConfig {
    pub mode: VrMode,
    /// Leader settings (bind address, rate, ping, timeouts, transform).
    pub vr: VrConfig,
    /// The leader a follower connects to. Default 127.0.0.1:7777.
    pub leader_address: SocketAddr,
    /// geometry_msgs/PointStamped: the actuator position. Default sil_node's end effector.
    pub position_topic: String,
    /// geometry_msgs/Vector3Stamped: the current direction of motion.
    pub current_direction_topic: String,
    /// geometry_msgs/Vector3Stamped: the desired direction of motion.
    pub desired_direction_topic: String,
    /// nav_msgs/Path: the exercise curve. Default sil_node's reference path.
    pub curve_topic: String,
    /// Frame of what a follower publishes. Default base_link.
    pub frame_id: String,
}

impl Default for VrNodeConfig {
    fn default() -> Self {
        VrNodeConfig {
            mode: VrMode::Leader,
            vr: VrConfig::default(),
            leader_address: SocketAddr::from(([127, 0, 0, 1], 7777)),
            position_topic: "/sil_node/end_effector".into(),
            current_direction_topic: "/sil_node/current_direction".into(),
            desired_direction_topic: "/sil_node/desired_direction".into(),
            curve_topic: "/sil_node/reference_path".into(),
            frame_id: "base_link".into(),
        }
    }
}

/// How `ros2 param` sees vr_bridge's parameters: all are read at start.
pub const VR_NODE_PARAMS: [ParamSpec; 8] = [
    ParamSpec::read_only("mode", "leader (serve Unity) or follower (listen to a Deltarobot leader) (read at start)"),
    ParamSpec::read_only("leader_address", "the leader a follower connects to (read at start)"),
    ParamSpec::read_only("position_topic", "actuator position, PointStamped (read at start)"),
    ParamSpec::read_only("current_direction_topic", "current direction, Vector3Stamped (read at start)"),
    ParamSpec::read_only("desired_direction_topic", "desired direction, Vector3Stamped (read at start)"),
    ParamSpec::read_only("curve_topic", "the curve, nav_msgs/Path, transient local (read at start)"),
    ParamSpec::read_only("frame_id", "frame of what a follower publishes (read at start)"),
    ParamSpec::read_only("vr.", "the VR link: address, rates, timeouts, coordinate transform (read at start)"),
];

/// Reads vr_bridge's parameters; unknown names are refused.
pub fn vr_node_config(params: &BTreeMap<String, ParamValue>) -> Result<VrNodeConfig, ParamError> {
    let own = without_groups(params, &[]);
    let config: VrNodeConfig = read_group(&own, "")?;
    config.vr.validate().map_err(|message| ParamError::Invalid { prefix: "vr".into(), message })?;
    Ok(config)
}

/// A follower's status ("vr_bridge: link") before it has reached the leader at `leader`.
pub fn connecting(status: &mut Status, leader: SocketAddr) {
    status.set(Level::Warn, format!("connecting to {leader}"), Vec::new());
}

/// What a follower event tells of the link to the leader at `leader`: OK while following,
/// ERROR while it is lost.
pub fn track_follower(status: &mut Status, leader: SocketAddr, event: &FollowerEvent) {
    match event {
        FollowerEvent::Connected(address) => status.set(Level::Ok, format!("following {address}"), Vec::new()),
        FollowerEvent::Disconnected { reason, .. } => {
            status.set(Level::Error, format!("no leader at {leader}: {reason}; retrying"), Vec::new())
        }
        FollowerEvent::Message(_) | FollowerEvent::Refused(_) => {}
    }
}
