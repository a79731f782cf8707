//! vr_bridge without ROS: its parameters.

pub mod topics;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;

use crate::bridge::vr::{FollowerEvent, VrConfig};
use crate::nodes::declare::node_parameters;
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

node_parameters! {
    /// vr_bridge's parameters: all are read at start.
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    pub struct VrNodeConfig, VR_NODE_PARAMS {
        read_only mode: VrMode = VrMode::Leader
            => "leader (serve Unity) or follower (listen to a Deltarobot leader)";
        section vr: VrConfig = VrConfig::default()
            => "the VR link: address, rates, timeouts, coordinate transform";
        read_only leader_address: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7777))
            => "the leader a follower connects to";
        read_only position_topic: String = "sil_node/end_effector".into() => "actuator position, PointStamped; relative names resolve in the node's namespace";
        read_only current_direction_topic: String = "sil_node/current_direction".into()
            => "current direction, Vector3Stamped";
        read_only desired_direction_topic: String = "sil_node/desired_direction".into()
            => "desired direction, Vector3Stamped";
        read_only curve_topic: String = "sil_node/reference_path".into()
            => "the curve, nav_msgs/Path, transient local";
        read_only frame_id: String = "base_link".into() => "frame of what a follower publishes";
    }
}

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
