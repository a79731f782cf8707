//! vr_bridge: the Deltarobot VR link as a ROS 2 node. As leader it streams ROS topics (the
//! sil_node's by default) to Unity followers; as follower it publishes what a Deltarobot leader
//! sends on the same topics.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::geometry_msgs::msg::{PointStamped, Vector3Stamped};
use r2r::nav_msgs::msg::Path as PathMsg;
use r2r::QosProfile;
use tokio::sync::{mpsc, watch};

use super::params::{nothing_at_run_time, serve_parameters};
use super::publisher::NodePublisher;
use super::{node_params, now_ns, qos_profile, ros_outputs, spin};
use crate::bridge::vr::{follow, FollowerEvent, VrFeed, VrLeader};
use crate::model::math::Vec3;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::status::{Level, Status};
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::nodes::vr::topics::VrFollowerTopics;
use crate::nodes::vr::{vr_node_config, VrMode, VrNodeConfig, LINK_STATUS, VR_NODE_PARAMS};
use crate::outputs::{pump_events, Qos};

fn vec3(x: f64, y: f64, z: f64) -> Vec3 {
    Vec3::new(x, y, z)
}

fn lead(
    node: &mut r2r::Node,
    pool: &LocalPool,
    config: &VrNodeConfig,
    runtime: &tokio::runtime::Runtime,
    status: &NodePublisher<Diagnostics>,
) -> anyhow::Result<watch::Sender<bool>> {
    let feed = VrFeed::new();
    let spawner = pool.spawner();
    let state = feed.state.clone();
    spawner.spawn_local(node.subscribe::<PointStamped>(&config.position_topic, QosProfile::default())?.for_each(
        move |m| {
            state.send_modify(|s| s.position = vec3(m.point.x, m.point.y, m.point.z));
            futures::future::ready(())
        },
    ))?;
    let state = feed.state.clone();
    spawner.spawn_local(
        node.subscribe::<Vector3Stamped>(&config.current_direction_topic, QosProfile::default())?.for_each(move |m| {
            state.send_modify(|s| s.current_direction = vec3(m.vector.x, m.vector.y, m.vector.z));
            futures::future::ready(())
        }),
    )?;
    let state = feed.state.clone();
    spawner.spawn_local(
        node.subscribe::<Vector3Stamped>(&config.desired_direction_topic, QosProfile::default())?.for_each(move |m| {
            state.send_modify(|s| s.desired_direction = vec3(m.vector.x, m.vector.y, m.vector.z));
            futures::future::ready(())
        }),
    )?;
    let curve = feed.curve.clone();
    spawner.spawn_local(node.subscribe::<PathMsg>(&config.curve_topic, qos_profile(Qos::LATCHED))?.for_each(
        move |m| {
            let points = m
                .poses
                .iter()
                .map(|pose| vec3(pose.pose.position.x, pose.pose.position.y, pose.pose.position.z))
                .collect();
            curve.send_replace(Arc::new(points));
            futures::future::ready(())
        },
    ))?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let leader = runtime.block_on(VrLeader::bind(config.vr.clone())).context("cannot start the VR leader")?;
    let listening = leader.local_addr()?;
    log::info!("VR leader listening on {listening}");
    status.event(&(Level::Ok, format!("leading on {listening}")));
    runtime.spawn(leader.serve(feed, shutdown_rx));
    Ok(shutdown)
}

/// What the node logs of the link's events (the rest is on its topics).
fn log_event(event: &FollowerEvent) {
    match event {
        FollowerEvent::Connected(leader) => log::info!("following the VR leader at {leader}"),
        FollowerEvent::Refused(reason) => log::warn!("VR message refused: {reason}"),
        FollowerEvent::Disconnected { reason, retry_in } => {
            log::warn!("VR leader lost ({reason}), retrying in {retry_in:?}")
        }
        FollowerEvent::Message(_) => {}
    }
}

/// Follows the leader and publishes what it sends, until `stop` is set.
fn follower(
    node: &mut r2r::Node,
    config: &VrNodeConfig,
    runtime: &tokio::runtime::Runtime,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(watch::Sender<bool>, JoinHandle<()>)> {
    let leader = config.leader_address;
    let (topics, out) = ros_outputs(node, |out| VrFollowerTopics::advertise(out, config, leader))?;
    let clock = node.get_ros_clock();
    let (events_tx, mut events) = mpsc::channel(1024);
    let (stop_link, stop_rx) = watch::channel(false);
    runtime.spawn(follow(leader, config.vr.clone(), events_tx, stop_rx));
    // The link's events cross to the thread that publishes them, as a driver's do.
    let (forward, forwarded) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        while let Some(event) = events.recv().await {
            if forward.send(event).is_err() {
                return;
            }
        }
    });
    let publishing = std::thread::Builder::new().name("vr-events".into()).spawn(move || {
        pump_events(&forwarded, &stop, topics, out, &|| now_ns(&clock), log_event);
    })?;
    Ok((stop_link, publishing))
}

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = vr_node_config(&node_params(&node)).context("vr_bridge parameters")?;
    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), VR_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (stop_link, publishing) = match config.mode {
        VrMode::Leader => {
            let status = Status::new(LINK_STATUS, &config.vr.bind.to_string());
            let status = NodePublisher::new(&mut node, |out| Diagnostics::advertise(out, status))?;
            let stop_link = lead(&mut node, &pool, &config, &runtime, &status)?;
            (stop_link, status.spawn_ticks(stop.clone())?)
        }
        VrMode::Follower => follower(&mut node, &config, &runtime, stop.clone())?,
    };
    spin(node, pool, &stop)?;
    let _ = publishing.join();
    // Followers hear "leader shutting down"; a follower hangs up.
    stop_link.send_replace(true);
    // The timer must be made inside the runtime: built outside it, it panics (no reactor).
    runtime.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(100)).await });
    Ok(())
}
