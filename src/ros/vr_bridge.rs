//! vr_bridge: the Deltarobot VR link as a ROS 2 node. As leader it streams ROS topics (the
//! sil_node's by default) to Unity followers; as follower it publishes what a Deltarobot leader
//! sends on the same topics.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::geometry_msgs::msg::{PointStamped, Pose, PoseStamped, Quaternion, Vector3Stamped};
use r2r::nav_msgs::msg::Path as PathMsg;
use r2r::QosProfile;
use tokio::sync::{mpsc, watch};

use super::diagnostics::Reporter;
use super::params::{nothing_at_run_time, serve_parameters};
use super::{header, latched_qos, node_params, now, point_stamped, spin, state_qos, vector_stamped};
use crate::bridge::vr::{follow, FollowerEvent, VrFeed, VrLeader};
use crate::model::math::Vec3;
use crate::nodes::diagnostics::Level;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::vr::{connecting, track_follower, vr_node_config, VrMode, VrNodeConfig, VR_NODE_PARAMS};
use crate::protocol::deltavr::VrMessage;

fn vec3(x: f64, y: f64, z: f64) -> Vec3 {
    Vec3::new(x, y, z)
}

fn lead(
    node: &mut r2r::Node,
    pool: &LocalPool,
    config: &VrNodeConfig,
    runtime: &tokio::runtime::Runtime,
    reporter: &Reporter,
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
    spawner.spawn_local(node.subscribe::<PathMsg>(&config.curve_topic, latched_qos())?.for_each(move |m| {
        let points =
            m.poses.iter().map(|pose| vec3(pose.pose.position.x, pose.pose.position.y, pose.pose.position.z)).collect();
        curve.send_replace(Arc::new(points));
        futures::future::ready(())
    }))?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let leader = runtime.block_on(VrLeader::bind(config.vr.clone())).context("cannot start the VR leader")?;
    let listening = leader.local_addr()?;
    log::info!("VR leader listening on {listening}");
    reporter.update(|status| status.set(Level::Ok, format!("leading on {listening}"), Vec::new()));
    runtime.spawn(leader.serve(feed, shutdown_rx));
    Ok(shutdown)
}

fn follower(
    node: &mut r2r::Node,
    config: &VrNodeConfig,
    runtime: &tokio::runtime::Runtime,
    reporter: Arc<Reporter>,
) -> anyhow::Result<watch::Sender<bool>> {
    let position = node.create_publisher::<PointStamped>(&config.position_topic, state_qos())?;
    let current = node.create_publisher::<Vector3Stamped>(&config.current_direction_topic, state_qos())?;
    let desired = node.create_publisher::<Vector3Stamped>(&config.desired_direction_topic, state_qos())?;
    let curve = node.create_publisher::<PathMsg>(&config.curve_topic, latched_qos())?;
    let clock = node.get_ros_clock();
    let frame_id = config.frame_id.clone();
    let (events_tx, mut events) = mpsc::channel(1024);
    let (stop, stop_rx) = watch::channel(false);
    runtime.spawn(follow(config.leader_address, config.vr.clone(), events_tx, stop_rx));
    let publishers = Mutex::new((position, current, desired, curve));
    let leader_address = config.leader_address;
    reporter.update(|status| connecting(status, leader_address));
    runtime.spawn(async move {
        while let Some(event) = events.recv().await {
            let time = now(&clock);
            reporter.update(|status| track_follower(status, leader_address, &event));
            let Ok(publishers) = publishers.lock() else { return };
            let (position, current, desired, curve) = &*publishers;
            let vector = |[x, y, z]: [f32; 3]| vec3(f64::from(x), f64::from(y), f64::from(z));
            let published = match event {
                FollowerEvent::Message(VrMessage::ActuatorPosition(v)) => {
                    position.publish(&point_stamped(time, &frame_id, &vector(v)))
                }
                FollowerEvent::Message(VrMessage::CurrentDirection(v)) => {
                    current.publish(&vector_stamped(time, &frame_id, &vector(v)))
                }
                FollowerEvent::Message(VrMessage::DesiredDirection(v)) => {
                    desired.publish(&vector_stamped(time, &frame_id, &vector(v)))
                }
                FollowerEvent::Message(VrMessage::Curve(points)) => {
                    let poses = points
                        .iter()
                        .map(|p| PoseStamped {
                            header: header(time.clone(), &frame_id),
                            pose: Pose {
                                position: super::point(&vector(*p)),
                                orientation: Quaternion { x: 0.0, y: 0.0, z: 0.0, w: 1.0 },
                            },
                        })
                        .collect();
                    curve.publish(&PathMsg { header: header(time, &frame_id), poses })
                }
                FollowerEvent::Connected(leader) => {
                    log::info!("following the VR leader at {leader}");
                    Ok(())
                }
                FollowerEvent::Refused(reason) => {
                    log::warn!("VR message refused: {reason}");
                    Ok(())
                }
                FollowerEvent::Disconnected { reason, retry_in } => {
                    log::warn!("VR leader lost ({reason}), retrying in {retry_in:?}");
                    Ok(())
                }
                FollowerEvent::Message(_) => Ok(()),
            };
            if let Err(error) = published {
                log::warn!("publishing failed: {error}");
            }
        }
    });
    Ok(stop)
}

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = vr_node_config(&node_params(&node)).context("vr_bridge parameters")?;
    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), &VR_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let reporter = Reporter::new(&mut node, "vr_bridge: link", &config.vr.bind.to_string())?;
    let stop_link = match config.mode {
        VrMode::Leader => lead(&mut node, &pool, &config, &runtime, &reporter)?,
        VrMode::Follower => follower(&mut node, &config, &runtime, reporter.clone())?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let periodic = reporter.spawn_periodic(stop.clone())?;
    spin(node, pool, &stop)?;
    let _ = periodic.join();
    // Followers hear "leader shutting down"; a follower hangs up.
    stop_link.send_replace(true);
    // The timer must be made inside the runtime: built outside it, it panics (no reactor).
    runtime.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(100)).await });
    Ok(())
}
