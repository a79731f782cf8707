//! hil_node: the HIL loop as a managed ROS 2 node (see [`crate::nodes::managed_hil`]), with
//! sil_node's outputs at its publish rate, trajectory segments from ~/trajectory, goals on
//! ~/follow_cartesian_trajectory, and loop statistics on /diagnostics and ~/loop_statistics.

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
use super::lifecycle::{serve_lifecycle, Supervisor};
use super::params::{nothing_at_run_time, serve_parameters};
use super::{multi_dof_points, node_params, now_ns, ros_outputs, spin};
use crate::hil::{LoopStatus, Withdrawals};
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
#[cfg(not(feature = "ros-doc-only"))]
use crate::nodes::goals::GoalUpdate;
use crate::nodes::hil::{hil_node_config, loop_status, FeedRequest, HIL_NODE_PARAMS};
use crate::nodes::joints::arm_joint_state;
use crate::nodes::managed_hil::{HilLinks, HilReporter, ManagedHil};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::{load_trajectory, trajectory_file, Decimator};
use crate::sim::Frame;

/// Where hil_node's state goes: /diagnostics, and the goal served.
struct NodeReporter {
    reporter: Arc<Reporter>,
    goals: Arc<GoalsOfFrames>,
}

/// The goal served, told of each frame (Ok, and whether it is published) or of the loop's end.
type GoalsOfFrames = dyn Fn(Result<&Frame, &str>, bool) + Send + Sync;

impl HilReporter for NodeReporter {
    fn status(&self, level: Level, message: String) {
        self.reporter.update(|status| status.set(level, message, Vec::new()));
    }

    fn loop_stopped(&self, failure: Option<&str>) {
        (self.goals)(Err(failure.unwrap_or("the HIL loop stopped")), true);
    }
}

/// Runs the node until interrupted or shut down.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = hil_node_config(&node_params(&node)).context("hil_node parameters")?;
    let robot = Robot::new(config.sil.robot.clone())?;
    let initial =
        load_trajectory(trajectory_file(&config.settings.trajectory_file), &robot).context("trajectory_file")?;
    let elbow = initial.elbow();

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
    let withdrawals = Arc::new(Withdrawals::default());
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals: Arc<GoalsOfFrames> = {
        use super::trajectory_action::{deliver, serve, Goal};
        use crate::nodes::hil::HilGoals;
        let goals = Arc::new(Mutex::new(HilGoals::<Goal>::new(withdrawals.clone())));
        serve(&mut node, &pool.spawner(), robot.clone(), goals.clone(), requests.clone())?;
        // Every frame counts towards the goal's result; feedback goes out at the publish rate.
        Arc::new(move |frame: Result<&Frame, &str>, publishing: bool| {
            let update = goals.lock().ok().and_then(|mut goals| match frame {
                Ok(frame) => goals.frame(frame),
                Err(reason) => goals.loop_stopped(reason),
            });
            match update {
                Some(GoalUpdate::Feedback(..)) if !publishing => {}
                Some(update) => deliver(update),
                None => {}
            }
        })
    };
    #[cfg(feature = "ros-doc-only")]
    let follow_goals: Arc<GoalsOfFrames> = Arc::new(|_: Result<&Frame, &str>, _: bool| {});

    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let (faults, rig_faults) = channel();
    let links = HilLinks { requests: feeder_requests, frames: frames_tx, status: status.clone(), withdrawals, faults };
    let node_reporter = NodeReporter { reporter: reporter.clone(), goals: follow_goals.clone() };
    let (autostart, auto_recover, recover_protective_stops) =
        (config.settings.autostart, config.settings.auto_recover, config.settings.auto_recover_protective_stop);
    let rate = config.settings.publish_rate_hz;
    let managed = ManagedHil::new(config, robot.clone(), initial, links, Arc::new(node_reporter));
    let looping = managed.looping();

    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    let segments_looping = looping.clone();
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        match segments_looping.load(Ordering::Relaxed) {
            true => {
                let _ = requests.send(FeedRequest::Append(multi_dof_points(&message)));
            }
            false => log::error!("~/trajectory segment refused: hil_node is not active"),
        }
        futures::future::ready(())
    }))?;

    let stop = Arc::new(AtomicBool::new(false));
    let periodic = reporter.spawn_periodic(stop.clone())?;
    let clock = node.get_ros_clock();
    let publisher_stop = stop.clone();
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let mut decimator = Decimator::new(rate);
        let mut last_report = std::time::Instant::now();
        let mut overruns_before = 0;
        while !publisher_stop.load(Ordering::Relaxed) {
            if let Ok(frame) = frames.recv_timeout(Duration::from_millis(100)) {
                let due = decimator.due(frame.t);
                follow_goals(Ok(&frame), due);
                if due {
                    let joints = arm_joint_state(&robot, &frame, &elbow);
                    if let Err(error) = arm.sample(&mut out, now_ns(&clock), &frame, &joints) {
                        log::warn!("publishing failed: {error}");
                    }
                }
            }
            if last_report.elapsed() >= Duration::from_secs(1) && looping.load(Ordering::Relaxed) {
                last_report = std::time::Instant::now();
                let snapshot = status.lock().map(|status| *status).unwrap_or_default();
                // Under the reporter's lock: a loop that stopped meanwhile has said why.
                reporter.update(|status| {
                    if looping.load(Ordering::Relaxed) {
                        loop_status(status, &snapshot, overruns_before);
                    }
                });
                overruns_before = snapshot.overruns;
                if let Err(error) = arm.loop_statistics(&mut out, now_ns(&clock), &snapshot) {
                    log::warn!("publishing ~/loop_statistics failed: {error}");
                }
            }
        }
    })?;

    let finalized = stop.clone();
    let supervisor = Supervisor { faults: rig_faults, autostart, auto_recover, recover_protective_stops };
    serve_lifecycle(&mut node, &pool.spawner(), managed, supervisor, move || finalized.store(true, Ordering::Relaxed))?;
    spin(node, pool, &stop)?;
    let _ = publishing.join();
    let _ = periodic.join();
    Ok(())
}
