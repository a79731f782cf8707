//! hil_node: the HIL loop as a ROS 2 node, with sil_node's outputs at its publish rate,
//! trajectory segments from ~/trajectory and loop statistics on /diagnostics and
//! ~/loop_statistics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::geometry_msgs::msg::{PointStamped, TwistStamped};
use r2r::sensor_msgs::msg::JointState;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::{nothing_at_run_time, serve_parameters};
use super::{
    arm_joint_state_msg, linear_twist, multi_dof_points, node_params, now, own_header, point_stamped, spin, state_qos,
    InterfacePublisher,
};
use crate::control::{Trajectory, Waypoint};
use crate::drivers::open_hardware;
use crate::hil::{FeedItem, FrameChannel, HilLoop, LoopStatus, FEED_DEPTH};
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
use crate::nodes::hil::{hil_node_config, loop_status, segment_after, HIL_NODE_PARAMS};
use crate::nodes::interfaces::{ArmState, LoopStatistics};
use crate::nodes::joints::arm_joint_state;
use crate::nodes::messages::MultiDofPoint;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::{load_trajectory, trajectory_file, Decimator};

/// Feeds the loop: the initial trajectory, then each segment as it arrives, after the last
/// sample. The trajectory stays open: between segments the loop holds the last position.
fn feed(initial: Trajectory, segments: Receiver<Vec<MultiDofPoint>>, robot: Robot, samples: SyncSender<FeedItem>) {
    let mut last: Option<Waypoint> = None;
    for &sample in initial.waypoints() {
        if samples.send(FeedItem::Sample(sample)).is_err() {
            return;
        }
        last = Some(sample);
    }
    for segment in segments {
        let Some(after) = last else { return };
        match segment_after(&segment, &after, &robot) {
            Ok(new) => {
                log::info!("appending a segment of {} samples", new.len());
                for sample in new {
                    if samples.send(FeedItem::Sample(sample)).is_err() {
                        return;
                    }
                    last = Some(sample);
                }
            }
            Err(error) => log::error!("~/trajectory segment refused: {error}"),
        }
    }
}

/// Runs the node until interrupted or the loop stops.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = hil_node_config(&node_params(&node)).context("hil_node parameters")?;
    let robot = Robot::new(config.sil.robot.clone())?;
    let initial =
        load_trajectory(trajectory_file(&config.settings.trajectory_file), &robot).context("trajectory_file")?;
    let (elbow, l_arm) = (initial.elbow(), initial.l_arm());
    let hardware = open_hardware(
        config.settings.hardware,
        &config.devices(),
        &config.rig,
        &config.sil,
        &initial.waypoints()[0],
        elbow,
    )?;

    let joint_states = node.create_publisher::<JointState>("/joint_states", state_qos())?;
    let end_effector = node.create_publisher::<PointStamped>("~/end_effector", state_qos())?;
    let end_effector_twist = node.create_publisher::<TwistStamped>("~/end_effector_twist", state_qos())?;
    let reference = node.create_publisher::<PointStamped>("~/reference", state_qos())?;
    let state = InterfacePublisher::<ArmState>::create(&mut node, "~/state", state_qos())?;
    let statistics = InterfacePublisher::<LoopStatistics>::create(&mut node, "~/loop_statistics", state_qos())?;
    let reporter =
        Reporter::new(&mut node, "hil_node: loop", &format!("{:?}", config.settings.hardware).to_lowercase())?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), &HIL_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (segments_tx, segments) = channel();
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let _ = segments_tx.send(multi_dof_points(&message));
        futures::future::ready(())
    }))?;

    let (samples_tx, samples) = sync_channel(FEED_DEPTH);
    let feeder_robot = robot.clone();
    std::thread::Builder::new()
        .name("hil-feed".into())
        .spawn(move || feed(initial, segments, feeder_robot, samples_tx))?;
    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let hil = HilLoop::new(config.hil.clone(), &config.sil, elbow, l_arm, hardware, samples, stop.clone())?
        .with_frames(Box::new(FrameChannel(frames_tx)))
        .with_status(status.clone());
    let loop_stop = stop.clone();
    let loop_reporter = reporter.clone();
    let running = std::thread::Builder::new().name("hil-loop".into()).spawn(move || {
        let report = hil.run();
        if let Err(error) = &report.outcome {
            let message = format!("loop stopped: {error}");
            loop_reporter.update(|status| status.set(Level::Error, message, Vec::new()));
        }
        loop_stop.store(true, Ordering::Relaxed);
        report
    })?;
    let periodic = reporter.spawn_periodic(stop.clone())?;

    let clock = node.get_ros_clock();
    let publisher_stop = stop.clone();
    let (rate, frame_id) = (config.settings.publish_rate_hz, config.settings.frame_id.clone());
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let mut decimator = Decimator::new(rate);
        let mut last_report = std::time::Instant::now();
        let mut overruns_before = 0;
        while !publisher_stop.load(Ordering::Relaxed) {
            if let Ok(frame) = frames.recv_timeout(Duration::from_millis(100)) {
                if decimator.due(frame.t) {
                    let time = now(&clock);
                    let joints = arm_joint_state(&robot, &frame, &elbow);
                    let published = joint_states
                        .publish(&arm_joint_state_msg(time.clone(), &joints))
                        .and_then(|()| end_effector.publish(&point_stamped(time.clone(), &frame_id, &frame.x)))
                        .and_then(|()| end_effector_twist.publish(&linear_twist(time.clone(), &frame_id, &frame.x_dot)))
                        .and_then(|()| reference.publish(&point_stamped(time.clone(), &frame_id, &frame.x_ref)));
                    if let Err(error) = published {
                        log::warn!("publishing failed: {error}");
                    }
                    if let Err(error) = state.publish(&ArmState::of(own_header(&time, &frame_id), &frame)) {
                        log::warn!("publishing ~/state failed: {error:#}");
                    }
                }
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = std::time::Instant::now();
                let snapshot = status.lock().map(|status| *status).unwrap_or_default();
                reporter.update(|status| loop_status(status, &snapshot, overruns_before));
                overruns_before = snapshot.overruns;
                let message = LoopStatistics::of(own_header(&now(&clock), ""), &snapshot);
                if let Err(error) = statistics.publish(&message) {
                    log::warn!("publishing ~/loop_statistics failed: {error:#}");
                }
            }
        }
    })?;
    spin(node, pool, &stop)?;
    let report = running.join().map_err(|_| anyhow::anyhow!("the loop thread panicked"))?;
    let _ = publishing.join();
    let _ = periodic.join();
    report.outcome.context("the HIL loop stopped")
}
