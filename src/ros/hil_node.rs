//! hil_node: the HIL loop as a managed ROS 2 node (see [`crate::nodes::hil::managed`]), its
//! topics decided by [`crate::nodes::hil::publisher`], trajectory segments from ~/trajectory
//! and goals on ~/follow_cartesian_trajectory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::joint_commands::serve_joint_commands;
use super::lifecycle::{serve_lifecycle, Supervisor};
use super::params::{nothing_at_run_time, serve_parameters};
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, spin};
use crate::hil::{LoopStatus, Withdrawals};
use crate::model::Robot;
#[cfg(not(feature = "ros-doc-only"))]
use crate::nodes::goals::GoalUpdate;
use crate::nodes::hil::feeder::FeedRequest;
use crate::nodes::hil::managed::{HilLinks, HilReporter, ManagedHil};
use crate::nodes::hil::publisher::{publish_loop, HilEvent, HilPublisher};
use crate::nodes::hil::{hil_node_config, HIL_NODE_PARAMS};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::sil::joint_goals::JointCommands;
use crate::nodes::status::Level;
use crate::nodes::{load_trajectory, trajectory_file};
use crate::sim::Frame;

/// Where hil_node's state goes: its publisher, and the goal served.
struct NodeReporter {
    publisher: Arc<NodePublisher<HilPublisher>>,
    goals: Arc<GoalsOfFrames>,
}

/// The goal served, told of each frame (Ok, and whether it is published) or of the loop's end.
type GoalsOfFrames = dyn Fn(Result<&Frame, &str>, bool) + Send + Sync;

impl HilReporter for NodeReporter {
    fn status(&self, level: Level, message: String) {
        self.publisher.event(&HilEvent::Status(level, message));
    }

    fn loop_started(&self) {
        self.publisher.event(&HilEvent::LoopStarted);
    }

    fn loop_stopped(&self, failure: Option<&str>) {
        (self.goals)(Err(failure.unwrap_or("the HIL loop stopped")), true);
    }
}

/// What hil_node's joint goals and commands feed the loop through: its requests, and the
/// withdrawals that take back what is queued.
struct JointFeeding {
    requests: std::sync::mpsc::Sender<FeedRequest>,
    withdrawals: Arc<Withdrawals>,
}

/// Serves `~/follow_joint_trajectory` (and `~/controller_state`) while the loop runs: an
/// accepted goal's trajectory, through the forward kinematics, takes the place of what is
/// queued; each published frame is a control step; a hold withdraws what is queued, and the
/// loop holds where the arm is.
#[cfg(not(feature = "ros-doc-only"))]
fn follow_joint_trajectories(
    node: &mut r2r::Node,
    pool: &LocalPool,
    robot: &Robot,
    constraints: &crate::nodes::follower::Constraints,
    looping: Arc<AtomicBool>,
    feeding: JointFeeding,
) -> anyhow::Result<impl Fn(&Frame) + Send> {
    use super::joint_trajectory_action::{FollowJointTrajectoryServer, NodeChecks};
    use super::now_ns;
    use crate::nodes::follower::goals::{JointGoals, Setpoint};
    use crate::nodes::follower::JointState;
    use crate::nodes::sil::joint_goals::{arm_follower, goal_trajectory, reachable};

    let goals = Arc::new(Mutex::new(JointGoals::new(arm_follower(constraints).map_err(anyhow::Error::msg)?)));
    // Where the platform is: the forward kinematics' root nearest it is the arm's.
    let platform = Arc::new(Mutex::new(None));
    let near = |platform: &Mutex<Option<crate::model::math::Vec3>>| platform.lock().ok().and_then(|x| *x);
    let clock = node.get_ros_clock();
    let (check_robot, check_platform, active) = (robot.clone(), platform.clone(), looping.clone());
    let (start_robot, start_platform, start_clock) = (robot.clone(), platform.clone(), clock.clone());
    let start_feeding = JointFeeding { requests: feeding.requests.clone(), withdrawals: feeding.withdrawals.clone() };
    let checks = NodeChecks {
        active: Box::new(move || active.load(Ordering::Relaxed)),
        reachable: Box::new(move |positions| {
            let near = near(&check_platform).ok_or("the HIL loop has not started yet")?;
            reachable(&check_robot, positions, &near)
        }),
        now_ns: Box::new(move || now_ns(&clock)),
        taking_over: Box::new(move |follower| {
            let near = near(&start_platform).ok_or("the HIL loop has not started yet")?;
            let trajectory = goal_trajectory(&start_robot, follower, now_ns(&start_clock), &near, 0.0)?;
            let withdrawal = start_feeding.withdrawals.request();
            let follow = FeedRequest::Follow { trajectory: Arc::new(trajectory), withdrawal };
            start_feeding.requests.send(follow).map_err(|_| "the HIL loop's feeder has stopped".to_owned())
        }),
    };
    let server = FollowJointTrajectoryServer::serve(node, &pool.spawner(), goals, checks)?;
    let clock = node.get_ros_clock();
    Ok(move |frame: &Frame| {
        if let Ok(mut x) = platform.lock() {
            *x = Some(frame.x);
        }
        let actual = JointState {
            positions: frame.theta.iter().copied().collect(),
            velocities: frame.theta_dot.iter().copied().collect(),
        };
        let active = looping.load(Ordering::Relaxed);
        if let Some(Setpoint::Hold(_)) = server.step(now_ns(&clock), actual, active) {
            let withdrawal = feeding.withdrawals.request();
            let _ = feeding.requests.send(FeedRequest::Hold { withdrawal });
        }
    })
}

/// Runs the node until interrupted or shut down.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = hil_node_config(&node_params(&node)).context("hil_node parameters")?;
    let robot = Robot::new(config.sil.robot.clone())?;
    let initial =
        load_trajectory(trajectory_file(&config.settings.trajectory_file), &robot).context("trajectory_file")?;

    // robot_state_publisher publishes the URDF and /tf beside the node.
    let (frame_id, rate) = (&config.settings.frame_id, config.settings.publish_rate_hz);
    let hardware = format!("{:?}", config.settings.hardware).to_lowercase();
    let publisher = NodePublisher::new(&mut node, |out| {
        HilPublisher::advertise(out, robot.clone(), frame_id, rate, &hardware, None, 0)
    })?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), HIL_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (requests, feeder_requests) = channel();
    let withdrawals = Arc::new(Withdrawals::default());
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals: Arc<GoalsOfFrames> = {
        use super::trajectory_action::{deliver, serve, Goal};
        use crate::nodes::hil::goals::HilGoals;
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
    let command_feeding = JointFeeding { requests: requests.clone(), withdrawals: withdrawals.clone() };
    let commands = JointCommands::new(config.settings.joint_command_speed_m_s);
    #[cfg(not(feature = "ros-doc-only"))]
    let (feeding, constraints) = (
        JointFeeding { requests: requests.clone(), withdrawals: withdrawals.clone() },
        config.settings.constraints.clone(),
    );
    let links = HilLinks { requests: feeder_requests, frames: frames_tx, status: status.clone(), withdrawals, faults };
    let node_reporter = NodeReporter { publisher: publisher.clone(), goals: follow_goals.clone() };
    let (autostart, auto_recover, recover_protective_stops) =
        (config.settings.autostart, config.settings.auto_recover, config.settings.auto_recover_protective_stop);
    let managed = ManagedHil::new(config, robot.clone(), initial, links, Arc::new(node_reporter));
    let segments_looping = managed.looping();

    // FollowJointTrajectory's types are control_msgs', which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_joints = follow_joint_trajectories(&mut node, &pool, &robot, &constraints, managed.looping(), feeding)?;
    #[cfg(feature = "ros-doc-only")]
    let follow_joints = |_: &Frame| {};
    // Joint commands take the place of what is queued while the loop runs, each a move from where
    // the loop's reference is.
    let motion = Arc::new(Mutex::new(None));
    let (reference, looping) = (motion.clone(), managed.looping());
    serve_joint_commands(
        &mut node,
        &pool,
        &robot,
        commands,
        move || {
            let now = reference.lock().ok().and_then(|motion| *motion).filter(|_| looping.load(Ordering::Relaxed));
            now.ok_or_else(|| "hil_node is not active".to_owned())
        },
        move |trajectory| {
            let withdrawal = command_feeding.withdrawals.request();
            let _ = command_feeding.requests.send(FeedRequest::Follow { trajectory: Arc::new(trajectory), withdrawal });
        },
    )?;
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
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
    let publisher_stop = stop.clone();
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let figures = || status.lock().map(|status| *status).unwrap_or_default();
        publish_loop(&frames, &publisher_stop, figures, |event| {
            let published = publisher.with(|publisher, out, now| publisher.publish(out, now, Some(&event)));
            if let HilEvent::Frame(frame) = &event {
                // A command's move starts where the loop's reference is: the platform lags it,
                // and moves from the platform would hold it back there.
                if let Ok(mut motion) = motion.lock() {
                    *motion = Some((frame.x_ref, frame.xd_ref));
                }
                follow_goals(Ok(frame), published.unwrap_or(false));
                // The joint goals' control steps, at the publish rate.
                if published.unwrap_or(false) {
                    follow_joints(frame);
                }
            }
        });
    })?;

    let finalized = stop.clone();
    let supervisor = Supervisor { faults: rig_faults, autostart, auto_recover, recover_protective_stops };
    serve_lifecycle(&mut node, &pool.spawner(), managed, supervisor, move || finalized.store(true, Ordering::Relaxed))?;
    spin(node, pool, &stop)?;
    let _ = publishing.join();
    Ok(())
}
