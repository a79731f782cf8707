//! sil_node: the SIL simulator as a ROS 2 node (see [`crate::nodes::sil`] for what it does).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::geometry_msgs::msg::{PointStamped, Pose, PoseStamped, Quaternion, TwistStamped, Vector3Stamped};
use r2r::nav_msgs::msg::Path as PathMsg;
use r2r::rosgraph_msgs::msg::Clock;
use r2r::sensor_msgs::msg::JointState;
use r2r::trajectory_msgs::msg::{JointTrajectory, JointTrajectoryPoint, MultiDOFJointTrajectory};
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::serve_parameters;
use super::{
    arm_joint_state_msg, duration, header, latched_qos, linear_twist, multi_dof_points, node_params, now, own_header,
    point, point_stamped, ros_params, spin, stamp, state_qos, vector_stamped, InterfacePublisher,
};
use crate::model::math::direction_or_zero;
use crate::model::Robot;
use crate::nodes::diagnostics::Level;
use crate::nodes::interfaces::ArmState;
use crate::nodes::joints::JOINT_NAMES;
use crate::nodes::messages::trajectory_from_points;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::sil::{run_ended, run_sil, sil_node_config, RunRequest, SilEvent, SIL_NODE_PARAMS};
use crate::nodes::{load_trajectory, trajectory_file};

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let (config, settings) = sil_node_config(&node_params(&node)).context("sil_node parameters")?;
    let robot = Robot::new(config.robot.clone())?;
    let first =
        Arc::new(load_trajectory(trajectory_file(&settings.trajectory_file), &robot).context("trajectory_file")?);

    let joint_states = node.create_publisher::<JointState>("/joint_states", state_qos())?;
    let end_effector = node.create_publisher::<PointStamped>("~/end_effector", state_qos())?;
    let end_effector_twist = node.create_publisher::<TwistStamped>("~/end_effector_twist", state_qos())?;
    let reference = node.create_publisher::<PointStamped>("~/reference", state_qos())?;
    let current_direction = node.create_publisher::<Vector3Stamped>("~/current_direction", state_qos())?;
    let desired_direction = node.create_publisher::<Vector3Stamped>("~/desired_direction", state_qos())?;
    let reference_path = node.create_publisher::<PathMsg>("~/reference_path", latched_qos())?;
    let ideal = node.create_publisher::<JointTrajectory>("~/ideal", latched_qos())?;
    let state = InterfacePublisher::<ArmState>::create(&mut node, "~/state", state_qos())?;
    let reporter = Reporter::new(&mut node, "sil_node: run", "sil")?;
    let clock_out = match settings.publish_clock {
        true => Some(node.create_publisher::<Clock>("/clock", QosProfile::default().keep_last(1))?),
        false => None,
    };

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
    let frame_id = settings.frame_id.clone();
    let runner = std::thread::Builder::new().name("sil".into()).spawn(move || {
        let publish_clock = settings.publish_clock;
        let stamp_of = |clock_s: f64| if publish_clock { stamp(clock_s) } else { now(&ros_clock) };
        let mut last_clock = 0.0;
        run_sil(&robot, &config, &live, first, &run_requests, &runner_stop, &mut |event| {
            follow_goals(&event);
            let result = match event {
                SilEvent::RunStarted { trajectory, ideal: points } => {
                    let time = stamp_of(last_clock);
                    let poses = trajectory
                        .waypoints()
                        .iter()
                        .map(|w| PoseStamped {
                            header: header(time.clone(), &frame_id),
                            pose: Pose {
                                position: point(&w.x),
                                orientation: Quaternion { x: 0.0, y: 0.0, z: 0.0, w: 1.0 },
                            },
                        })
                        .collect();
                    let t0 = trajectory.start_time();
                    let joint_points = points
                        .iter()
                        .map(|p| JointTrajectoryPoint {
                            positions: p.theta.as_slice().to_vec(),
                            velocities: p.theta_dot.as_slice().to_vec(),
                            accelerations: Vec::new(),
                            effort: p.tau.as_slice().to_vec(),
                            time_from_start: duration(p.t - t0),
                        })
                        .collect();
                    let joint_names = JOINT_NAMES[..3].iter().map(|name| (*name).to_owned()).collect();
                    let waypoints = trajectory.waypoints().len();
                    reporter
                        .update(|status| status.set(Level::Ok, "running", vec![("waypoints", waypoints.to_string())]));
                    reference_path.publish(&PathMsg { header: header(time.clone(), &frame_id), poses }).and_then(|()| {
                        ideal.publish(&JointTrajectory {
                            header: header(time, &frame_id),
                            joint_names,
                            points: joint_points,
                        })
                    })
                }
                SilEvent::Sample(sample) => {
                    last_clock = sample.clock_s;
                    let time = stamp_of(sample.clock_s);
                    let frame = &sample.frame;
                    let mut published = joint_states.publish(&arm_joint_state_msg(time.clone(), &sample.joints));
                    if let Err(error) = state.publish(&ArmState::of(own_header(&time, &frame_id), frame)) {
                        log::warn!("publishing ~/state failed: {error:#}");
                    }
                    published = published
                        .and_then(|()| end_effector.publish(&point_stamped(time.clone(), &frame_id, &frame.x)));
                    published = published.and_then(|()| {
                        end_effector_twist.publish(&linear_twist(time.clone(), &frame_id, &frame.x_dot))
                    });
                    published = published
                        .and_then(|()| reference.publish(&point_stamped(time.clone(), &frame_id, &frame.x_ref)));
                    published = published.and_then(|()| {
                        current_direction.publish(&vector_stamped(
                            time.clone(),
                            &frame_id,
                            &direction_or_zero(&frame.x_dot),
                        ))
                    });
                    published = published.and_then(|()| {
                        desired_direction.publish(&vector_stamped(
                            time.clone(),
                            &frame_id,
                            &direction_or_zero(&frame.xd_ref),
                        ))
                    });
                    match &clock_out {
                        Some(clock) => published.and_then(|()| clock.publish(&Clock { clock: time })),
                        None => published,
                    }
                }
                SilEvent::RunEnded { stats, end } => {
                    reporter.update(|status| run_ended(status, &stats, &end));
                    Ok(())
                }
            };
            if let Err(error) = result {
                log::warn!("publishing failed: {error}");
            }
        });
    })?;
    spin(node, pool, &stop)?;
    let _ = runner.join();
    let _ = periodic.join();
    Ok(())
}
