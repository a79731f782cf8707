//! sil_node: the SIL simulator as a ROS 2 node (see [`crate::nodes::sil`] for what it does).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::serve_parameters;
use super::{multi_dof_points, node_params, now_ns, ros_outputs, ros_params, spin};
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
use crate::nodes::messages::trajectory_from_points;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::sil::{run_ended, run_sil, sil_node_config, RunRequest, SilEvent, SIL_NODE_PARAMS};
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::{load_trajectory, trajectory_file};

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let (config, settings) = sil_node_config(&node_params(&node)).context("sil_node parameters")?;
    let robot = Robot::new(config.robot.clone())?;
    let first =
        Arc::new(load_trajectory(trajectory_file(&settings.trajectory_file), &robot).context("trajectory_file")?);

    // robot_state_publisher publishes the URDF and /tf beside the node.
    let set = ArmTopicSet { clock: settings.publish_clock, ..ArmTopicSet::SIL_NODE };
    let (mut arm, mut out) = ros_outputs(&mut node, |out| ArmTopics::advertise(out, set, &settings.frame_id, None))?;
    let reporter = Reporter::new(&mut node, "sil_node: run", "sil")?;

    let pool = LocalPool::new();
    let mut declared = to_params(&config);
    declared.extend(to_params(&settings));
    declared.extend(ros_params(&node));
    let live = Arc::new(Mutex::new(settings.clone()));
    let applied = live.clone();
    serve_parameters(
        &mut node,
        &pool.spawner(),
        ParameterServer::new(declared, &SIL_NODE_PARAMS),
        Box::new(move |name, value| applied.lock().map_err(|_| "settings unavailable".to_owned())?.apply(name, value)),
    )?;
    let (requests, run_requests) = channel();
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals = {
        use super::trajectory_action::{deliver, serve, Goal};
        let goals = Arc::new(Mutex::new(crate::nodes::sil::GoalRuns::<Goal>::default()));
        serve(&mut node, &pool.spawner(), robot.clone(), goals.clone(), requests.clone())?;
        move |event: &SilEvent| {
            if let Some(update) = goals.lock().ok().and_then(|mut goals| goals.update(event)) {
                deliver(update);
            }
        }
    };
    #[cfg(feature = "ros-doc-only")]
    let follow_goals = |_: &SilEvent| {};
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    let (message_robot, elbow, l_arm) = (robot.clone(), robot.elbow(), robot.params().l_arm);
    let refusals = reporter.clone();
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        match trajectory_from_points(&multi_dof_points(&message), &message_robot, elbow, l_arm) {
            Ok(trajectory) => {
                log::info!("new trajectory of {} points", trajectory.waypoints().len());
                let _ = requests.send(RunRequest::Follow(Arc::new(trajectory)));
            }
            Err(error) => {
                log::error!("~/trajectory refused: {error}");
                refusals.update(|status| {
                    status.level = Level::Warn;
                    status.message = format!("~/trajectory refused: {error}");
                });
            }
        }
        futures::future::ready(())
    }))?;

    let ros_clock = node.get_ros_clock();
    let stop = Arc::new(AtomicBool::new(false));
    let periodic = reporter.spawn_periodic(stop.clone())?;
    let runner_stop = stop.clone();
    let runner = std::thread::Builder::new().name("sil".into()).spawn(move || {
        // Stamps are simulated time where the node publishes /clock, else the ROS clock.
        let publish_clock = settings.publish_clock;
        let time_ns = |clock_s: f64| match publish_clock {
            true => Duration::from_secs_f64(clock_s.max(0.0)).as_nanos() as u64,
            false => now_ns(&ros_clock),
        };
        let mut last_clock = 0.0;
        run_sil(&robot, &config, &live, first, &run_requests, &runner_stop, &mut |event| {
            follow_goals(&event);
            let published = match event {
                SilEvent::RunStarted { trajectory, ideal } => {
                    let waypoints = trajectory.waypoints().len();
                    reporter
                        .update(|status| status.set(Level::Ok, "running", vec![("waypoints", waypoints.to_string())]));
                    arm.run_started(&mut out, time_ns(last_clock), trajectory, ideal)
                }
                SilEvent::Sample(sample) => {
                    last_clock = sample.clock_s;
                    arm.sample(&mut out, time_ns(sample.clock_s), &sample.frame, &sample.joints)
                }
                SilEvent::RunEnded { stats, end } => {
                    reporter.update(|status| run_ended(status, &stats, &end));
                    Ok(())
                }
            };
            if let Err(error) = published {
                log::warn!("publishing failed: {error}");
            }
        });
    })?;
    spin(node, pool, &stop)?;
    let _ = runner.join();
    let _ = periodic.join();
    Ok(())
}
