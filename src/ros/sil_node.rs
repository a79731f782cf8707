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

use super::joint_commands::serve_joint_commands;
use super::params::serve_parameters;
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, ros_params, spin};
use crate::model::Robot;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::sil::joint_goals::JointCommands;
use crate::nodes::sil::publisher::SilPublisher;
use crate::nodes::sil::run::{run_sil, RunRequest, SilEvent};
use crate::nodes::sil::{sil_node_config, SIL_NODE_PARAMS};
use crate::nodes::trajectory_input::trajectory_from_points;
use crate::nodes::{load_trajectory, trajectory_file};
use crate::sim::Frame;

/// Serves `~/follow_joint_trajectory` (and `~/controller_state`): the simulation is steered along
/// an accepted goal's trajectory through the forward kinematics, in place of the run; each
/// published frame is a control step; a hold steers it onto the platform still where the joints
/// are.
#[cfg(not(feature = "ros-doc-only"))]
fn follow_joint_trajectories(
    node: &mut r2r::Node,
    pool: &LocalPool,
    robot: &Robot,
    settings: &crate::nodes::sil::SilNodeSettings,
    last: Arc<Mutex<Frame>>,
    requests: std::sync::mpsc::Sender<RunRequest>,
) -> anyhow::Result<impl Fn(&SilEvent) + Send> {
    use super::joint_trajectory_action::{FollowJointTrajectoryServer, NodeChecks};
    use super::now_ns;
    use crate::nodes::follower::goals::{JointGoals, Setpoint};
    use crate::nodes::follower::JointState;
    use crate::nodes::sil::joint_goals::{arm_follower, goal_trajectory, hold_trajectory, reachable, HOLD_S};

    let goals = Arc::new(Mutex::new(JointGoals::new(arm_follower(&settings.constraints).map_err(anyhow::Error::msg)?)));
    // Where the platform is: the forward kinematics' root nearest it is the arm's.
    let near = |last: &Mutex<Frame>| last.lock().map(|frame| frame.x).unwrap_or_default();
    let clock = node.get_ros_clock();
    let (check_robot, check_platform) = (robot.clone(), last.clone());
    let (start_robot, start_platform, start_clock, start_requests) =
        (robot.clone(), last, clock.clone(), requests.clone());
    let checks = NodeChecks {
        active: Box::new(|| true),
        reachable: Box::new(move |positions| reachable(&check_robot, positions, &near(&check_platform))),
        now_ns: Box::new(move || now_ns(&clock)),
        taking_over: Box::new(move |follower| {
            let (now, near) = (now_ns(&start_clock), near(&start_platform));
            let trajectory = goal_trajectory(&start_robot, follower, now, &near, HOLD_S)?;
            start_requests
                .send(RunRequest::Steer(Arc::new(trajectory)))
                .map_err(|_| "the simulation has stopped".to_owned())
        }),
    };
    let server = FollowJointTrajectoryServer::serve(node, &pool.spawner(), goals, checks)?;
    let (robot, clock) = (robot.clone(), node.get_ros_clock());
    Ok(move |event: &SilEvent| {
        let SilEvent::Frame { frame, .. } = event else { return };
        let actual = JointState {
            positions: frame.theta.iter().copied().collect(),
            velocities: frame.theta_dot.iter().copied().collect(),
        };
        if let Some(Setpoint::Hold(positions)) = server.step(now_ns(&clock), actual, true) {
            match hold_trajectory(&robot, &positions, &frame.x) {
                Ok(hold) => drop(requests.send(RunRequest::Steer(Arc::new(hold)))),
                Err(error) => log::error!("cannot hold the arm: {error}"),
            }
        }
    })
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
    // FollowJointTrajectory's types are control_msgs', which the doc-only type-check lacks.
    let start = first.waypoints()[0].x;
    let last = Arc::new(Mutex::new(Frame { x: start, x_ref: start, ..Frame::default() }));
    // Joint commands steer the running simulation, from where the last frame's reference is.
    let (reference, steering) = (last.clone(), requests.clone());
    serve_joint_commands(
        &mut node,
        &pool,
        &robot,
        JointCommands::new(settings.joint_command_speed_m_s),
        move || Ok(reference.lock().map(|frame| (frame.x_ref, frame.xd_ref)).unwrap_or_default()),
        move |trajectory| drop(steering.send(RunRequest::Steer(Arc::new(trajectory)))),
    )?;
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_joints = follow_joint_trajectories(&mut node, &pool, &robot, &settings, last.clone(), requests.clone())?;
    #[cfg(feature = "ros-doc-only")]
    let follow_joints = |_: &SilEvent| {};
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
            if let (SilEvent::Frame { frame, .. }, Ok(mut last)) = (event, last.lock()) {
                *last = *frame;
            }
            let published = publisher.with(|publisher, out, now| publisher.publish(out, now, Some(event)));
            follow_goals(event, published.unwrap_or(false));
            // The joint goals' control steps, at the publish rate.
            if published.unwrap_or(false) {
                follow_joints(event);
            }
        });
    })?;
    spin(node, pool, &stop)?;
    let _ = runner.join();
    let _ = ticks.join();
    Ok(())
}
