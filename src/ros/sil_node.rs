//! sil_node: the SIL simulator as a ROS 2 node (see [`crate::nodes::sil`] for what it does).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::params::serve_parameters;
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, ros_params, spin};
use crate::model::Robot;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::sil::publisher::SilPublisher;
use crate::nodes::sil::run::{run_sil, RunRequest, SilEvent};
use crate::nodes::sil::{sil_node_config, SIL_NODE_PARAMS};
use crate::nodes::trajectory_input::trajectory_from_points;
use crate::nodes::{load_trajectory, trajectory_file};

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let (config, settings) = sil_node_config(&node_params(&node)).context("sil_node parameters")?;
    let robot = Robot::new(config.robot.clone())?;
    let first =
        Arc::new(load_trajectory(trajectory_file(&settings.trajectory_file), &robot).context("trajectory_file")?);

    // robot_state_publisher publishes the URDF and /tf beside the node.
    let publisher =
        NodePublisher::new(&mut node, |out| SilPublisher::advertise(out, robot.clone(), &settings, None, 0))?;

    let pool = LocalPool::new();
    let mut declared = to_params(&config);
    declared.extend(to_params(&settings));
    declared.extend(ros_params(&node));
    let live = Arc::new(Mutex::new(settings.clone()));
    let applied = live.clone();
    serve_parameters(
        &mut node,
        &pool.spawner(),
        ParameterServer::new(declared, SIL_NODE_PARAMS),
        Box::new(move |name, value| applied.lock().map_err(|_| "settings unavailable".to_owned())?.set(name, value)),
    )?;
    let (requests, run_requests) = channel();
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals = {
        use super::trajectory_action::{deliver, serve, Goal};
        let goals = Arc::new(Mutex::new(crate::nodes::sil::run::GoalRuns::<Goal>::default()));
        serve(&mut node, &pool.spawner(), robot.clone(), goals.clone(), requests.clone())?;
        move |event: &SilEvent, published: bool| {
            if let Some(update) = goals.lock().ok().and_then(|mut goals| goals.update(event, published)) {
                deliver(update);
            }
        }
    };
    #[cfg(feature = "ros-doc-only")]
    let follow_goals = |_: &SilEvent, _: bool| {};
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    let (message_robot, elbow, l_arm) = (robot.clone(), robot.elbow(), robot.params().l_arm);
    let refusals = publisher.clone();
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        match trajectory_from_points(&multi_dof_points(&message), &message_robot, elbow, l_arm) {
            Ok(trajectory) => {
                log::info!("new trajectory of {} points", trajectory.waypoints().len());
                let _ = requests.send(RunRequest::Follow(Arc::new(trajectory)));
            }
            Err(error) => {
                log::error!("~/trajectory refused: {error}");
                refusals.with(|publisher, out, now| {
                    publisher.publish(out, now, Some(&SilEvent::Refused(error.to_string())))
                });
            }
        }
        futures::future::ready(())
    }))?;

    let stop = Arc::new(AtomicBool::new(false));
    let ticks = publisher.spawn_ticks(stop.clone())?;
    let runner_stop = stop.clone();
    let runner = std::thread::Builder::new().name("sil".into()).spawn(move || {
        run_sil(&robot, &config, &live, first, &run_requests, &runner_stop, &mut |event| {
            let published = publisher.with(|publisher, out, now| publisher.publish(out, now, Some(event)));
            follow_goals(event, published.unwrap_or(false));
        });
    })?;
    spin(node, pool, &stop)?;
    let _ = runner.join();
    let _ = ticks.join();
    Ok(())
}
