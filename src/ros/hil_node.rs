//! hil_node: the HIL loop as a ROS 2 node, with sil_node's outputs at its publish rate,
//! trajectory segments from ~/trajectory, goals on ~/follow_cartesian_trajectory, and loop
//! statistics on /diagnostics and ~/loop_statistics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::{nothing_at_run_time, serve_parameters};
use super::{multi_dof_points, node_params, now_ns, ros_outputs, spin};
use crate::drivers::open_hardware;
use crate::hil::{FrameChannel, HilLoop, LoopStatus, Withdrawals, FEED_DEPTH};
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
#[cfg(not(feature = "ros-doc-only"))]
use crate::nodes::goals::GoalUpdate;
use crate::nodes::hil::{hil_node_config, loop_status, run_feeder, FeedRequest, Feeder, HIL_NODE_PARAMS};
use crate::nodes::joints::arm_joint_state;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::{load_trajectory, trajectory_file, Decimator};
use crate::sim::Frame;

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

    // robot_state_publisher publishes the URDF and /tf beside the node.
    let frame_id = &config.settings.frame_id;
    let (mut arm, mut out) =
        ros_outputs(&mut node, |out| ArmTopics::advertise(out, ArmTopicSet::HIL_NODE, frame_id, None))?;
    let reporter =
        Reporter::new(&mut node, "hil_node: loop", &format!("{:?}", config.settings.hardware).to_lowercase())?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), &HIL_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (requests, feeder_requests) = channel();
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    let segments = requests.clone();
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let _ = segments.send(FeedRequest::Append(multi_dof_points(&message)));
        futures::future::ready(())
    }))?;
    let withdrawals = Arc::new(Withdrawals::default());
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals = {
        use super::trajectory_action::{deliver, serve, Goal};
        use crate::nodes::hil::HilGoals;
        let goals = Arc::new(Mutex::new(HilGoals::<Goal>::new(withdrawals.clone())));
        serve(&mut node, &pool.spawner(), robot.clone(), goals.clone(), requests)?;
        // Every frame counts towards the goal's result; feedback goes out at the publish rate.
        move |frame: Option<&Frame>, publishing: bool| {
            let update = goals.lock().ok().and_then(|mut goals| match frame {
                Some(frame) => goals.frame(frame),
                None => goals.loop_stopped("the HIL loop stopped"),
            });
            match update {
                Some(GoalUpdate::Feedback(..)) if !publishing => {}
                Some(update) => deliver(update),
                None => {}
            }
        }
    };
    #[cfg(feature = "ros-doc-only")]
    let follow_goals = {
        drop(requests);
        |_: Option<&Frame>, _: bool| {}
    };

    let (samples_tx, samples) = sync_channel(FEED_DEPTH);
    let feeder = Feeder::new(&initial, robot.clone());
    std::thread::Builder::new()
        .name("hil-feed".into())
        .spawn(move || run_feeder(feeder, feeder_requests, samples_tx))?;
    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let hil = HilLoop::new(config.hil.clone(), &config.sil, elbow, l_arm, hardware, samples, stop.clone())?
        .with_frames(Box::new(FrameChannel(frames_tx)))
        .with_status(status.clone())
        .with_withdrawals(withdrawals);
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
    let rate = config.settings.publish_rate_hz;
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let mut decimator = Decimator::new(rate);
        let mut last_report = std::time::Instant::now();
        let mut overruns_before = 0;
        while !publisher_stop.load(Ordering::Relaxed) {
            if let Ok(frame) = frames.recv_timeout(Duration::from_millis(100)) {
                let due = decimator.due(frame.t);
                follow_goals(Some(&frame), due);
                if due {
                    let joints = arm_joint_state(&robot, &frame, &elbow);
                    if let Err(error) = arm.sample(&mut out, now_ns(&clock), &frame, &joints) {
                        log::warn!("publishing failed: {error}");
                    }
                }
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = std::time::Instant::now();
                let snapshot = status.lock().map(|status| *status).unwrap_or_default();
                reporter.update(|status| loop_status(status, &snapshot, overruns_before));
                overruns_before = snapshot.overruns;
                if let Err(error) = arm.loop_statistics(&mut out, now_ns(&clock), &snapshot) {
                    log::warn!("publishing ~/loop_statistics failed: {error}");
                }
            }
        }
        follow_goals(None, true);
    })?;
    spin(node, pool, &stop)?;
    let report = running.join().map_err(|_| anyhow::anyhow!("the loop thread panicked"))?;
    let _ = publishing.join();
    let _ = periodic.join();
    report.outcome.context("the HIL loop stopped")
}
