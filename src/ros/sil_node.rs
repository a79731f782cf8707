//! sil_node: the SIL simulator as a ROS 2 node (see [`crate::nodes::sil`] for what it does).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::joint_commands::serve_joint_commands;
use super::params::serve_parameters;
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, ros_params, spin};
use super::{CartesianGoalHandle, JointGoalHandle};
use crate::model::Robot;
use crate::nodes::goals::Answers;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::sil::commands::{SilCommands, REQUEST_DEPTH};
use crate::nodes::sil::publisher::SilPublisher;
use crate::nodes::sil::run::{run_sil, SilEvent};
use crate::nodes::sil::{sil_node_config, SIL_NODE_PARAMS};
use crate::nodes::trajectory_input::trajectory_from_points;
use crate::nodes::{load_trajectory, trajectory_file};

type Commands = SilCommands<JointGoalHandle, CartesianGoalHandle>;
/// What answers the goals after an event of the run.
type Answering = Box<dyn Fn(Answers<JointGoalHandle, CartesianGoalHandle>) + Send>;

/// Serves both actions on the node's `commands`; what answers their goals comes back.
#[cfg(not(feature = "ros-doc-only"))]
fn serve_goals(
    node: &mut r2r::Node,
    pool: &LocalPool,
    robot: &Robot,
    commands: &Arc<Mutex<Commands>>,
) -> anyhow::Result<Answering> {
    use super::joint_trajectory_action::{answer_goals, FollowJointTrajectoryServer};
    use super::now_ns;
    use super::trajectory_action::{deliver_all, serve};
    use crate::nodes::follower::clocks::Now;

    serve(node, &pool.spawner(), robot.clone(), commands.clone())?;
    let clock = node.get_ros_clock();
    let now = Box::new(move || Now::on_one_clock(now_ns(&clock)));
    // The simulation takes a goal at its next frame: nothing to send at acceptance.
    let first_setpoint = Box::new(|| ());
    let server = FollowJointTrajectoryServer::serve(
        node,
        &pool.spawner(),
        commands.clone(),
        Box::new(|| true),
        now,
        first_setpoint,
    )?;
    Ok(Box::new(move |answers: Answers<JointGoalHandle, CartesianGoalHandle>| {
        answer_goals(answers.joint);
        if let Some(state) = &answers.state {
            server.publish_state(state);
        }
        deliver_all(answers.cartesian);
    }))
}

#[cfg(feature = "ros-doc-only")]
fn serve_goals(_: &mut r2r::Node, _: &LocalPool, _: &Robot, _: &Arc<Mutex<Commands>>) -> anyhow::Result<Answering> {
    Ok(Box::new(|_| {}))
}

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
    let (requests, run_requests) = sync_channel(REQUEST_DEPTH);
    let start = first.waypoints()[0].x;
    let commands = SilCommands::new(&settings, robot.clone(), start, requests).map_err(anyhow::Error::msg)?;
    let commands = Arc::new(Mutex::new(commands));
    let answering = serve_goals(&mut node, &pool, &robot, &commands)?;
    let joint_commands = commands.clone();
    serve_joint_commands(&mut node, &pool, move |when, names, positions| {
        let mut commands = joint_commands.lock().map_err(|_| "the node's commands are unavailable".to_owned())?;
        commands.joint_command(when, names, positions)
    })?;
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    let (message_robot, elbow, l_arm) = (robot.clone(), robot.elbow(), robot.params().l_arm);
    let (refusals, trajectories) = (publisher.clone(), commands.clone());
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let followed = trajectory_from_points(&multi_dof_points(&message), &message_robot, elbow, l_arm)
            .map_err(|error| error.to_string())
            .and_then(|trajectory| {
                let waypoints = trajectory.waypoints().len();
                let mut commands = trajectories.lock().map_err(|_| "the node's commands are unavailable".to_owned())?;
                commands.trajectory(trajectory).map(|()| waypoints)
            });
        match followed {
            Ok(waypoints) => log::info!("new trajectory of {waypoints} points"),
            Err(error) => {
                log::error!("~/trajectory refused: {error}");
                refusals.with(|publisher, out, now| publisher.publish(out, now, Some(&SilEvent::Refused(error))));
            }
        }
        futures::future::ready(())
    }))?;

    let stop = Arc::new(AtomicBool::new(false));
    let ticks = publisher.spawn_ticks(stop.clone())?;
    let runner_stop = stop.clone();
    let (run_commands, clock) = (commands.clone(), node.get_ros_clock());
    let runner = std::thread::Builder::new().name("sil".into()).spawn(move || {
        run_sil(&robot, &config, &live, first, &run_requests, &runner_stop, &mut |event| {
            let handed = Instant::now();
            let published = publisher
                .with(|publisher, out, now| publisher.publish(out, now, Some(&event.later_by(handed.elapsed()))));
            let now = super::now_ns(&clock);
            let answers =
                run_commands.lock().ok().map(|mut commands| commands.event(event, published.unwrap_or(false), now));
            if let Some(answers) = answers {
                answering(answers);
            }
        });
        // The node is ending: so is every goal.
        if let Some(answers) = run_commands.lock().ok().map(|mut commands| commands.stopped("sil_node is ending")) {
            answering(answers);
        }
    })?;
    spin(node, pool, &stop)?;
    let _ = runner.join();
    let _ = ticks.join();
    Ok(())
}
