//! hil_node: the HIL loop as a managed ROS 2 node (see [`crate::nodes::hil::managed`]), its
//! topics decided by [`crate::nodes::hil::publisher`], and every command that moves the arm
//! (goals on ~/follow_joint_trajectory and ~/follow_cartesian_trajectory, ~/joint_command,
//! segments on ~/trajectory) taken by [`crate::nodes::hil::commands`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::joint_commands::serve_joint_commands;
use super::lifecycle::{serve_lifecycle, spin_until_shut_down, Supervisor};
use super::params::{nothing_at_run_time, serve_parameters};
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, now_for_device};
use super::{CartesianGoalHandle, JointGoalHandle};
use crate::hil::{LoopStatus, Withdrawals};
use crate::model::Robot;
use crate::nodes::follower::clocks::SteadyClock;
use crate::nodes::goals::Answers;
use crate::nodes::hil::commands::HilCommands;
use crate::nodes::hil::feeder::feed_requests;
use crate::nodes::hil::managed::{HilLinks, HilReporter, LoopEnd, ManagedHil};
use crate::nodes::hil::publisher::{publish_loop, HilEvent, HilPublisher};
use crate::nodes::hil::{hil_node_config, HIL_NODE_PARAMS};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::refusals::Refusals;
use crate::nodes::status::Level;
use crate::nodes::{load_trajectory, trajectory_file};

type Commands = HilCommands<JointGoalHandle, CartesianGoalHandle>;
/// What answers the goals after a frame or the loop's end.
type Answering = Arc<dyn Fn(Answers<JointGoalHandle, CartesianGoalHandle>) + Send + Sync>;

/// Where hil_node's state goes: its publisher, and the commands whose goals end with a loop.
struct NodeReporter {
    publisher: Arc<NodePublisher<HilPublisher>>,
    commands: Arc<Mutex<Commands>>,
    answering: Answering,
}

impl HilReporter for NodeReporter {
    fn status(&self, level: Level, message: String) {
        self.publisher.event(&HilEvent::Status(level, message));
    }

    fn loop_started(&self, loop_number: u64) {
        if let Ok(mut commands) = self.commands.lock() {
            commands.loop_started(loop_number);
        }
        self.publisher.event(&HilEvent::LoopStarted);
    }

    fn loop_stopped(&self, end: &LoopEnd) {
        // Even after a panic under the lock: the goals must end (the commands are plain data).
        let answers = self.commands.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).loop_stopped(end);
        (self.answering)(answers);
    }
}

/// Serves both actions on the node's `commands` (FollowJointTrajectory's goals are rejected
/// while they take none); what answers their goals comes back.
#[cfg(not(feature = "ros-doc-only"))]
fn serve_goals(
    node: &mut r2r::Node,
    pool: &LocalPool,
    robot: &Robot,
    commands: &Arc<Mutex<Commands>>,
    steady: SteadyClock,
) -> anyhow::Result<Answering> {
    use super::joint_trajectory_action::{answer_goals, FollowJointTrajectoryServer};
    use super::trajectory_action::{deliver_all, serve};

    serve(node, &pool.spawner(), robot.clone(), commands.clone())?;
    let clock = node.get_ros_clock();
    let taking = commands.clone();
    let active = Box::new(move || taking.lock().is_ok_and(|commands| commands.taking().is_ok()));
    // Goals are timed on a steady clock, as the loop runs: a `/clock` that goes back, jumps or
    // stands still under `use_sim_time` changes nothing of a running goal.
    let now = Box::new(move || now_for_device(&clock, &steady));
    // The loop takes a goal at its next 1 ms step: nothing to send at acceptance.
    let first_setpoint = Box::new(|| ());
    let server =
        FollowJointTrajectoryServer::serve(node, &pool.spawner(), commands.clone(), active, now, first_setpoint)?;
    Ok(Arc::new(move |answers: Answers<JointGoalHandle, CartesianGoalHandle>| {
        answer_goals(answers.joint);
        if let Some(state) = &answers.state {
            server.publish_state(state);
        }
        deliver_all(answers.cartesian);
    }))
}

#[cfg(feature = "ros-doc-only")]
fn serve_goals(
    _: &mut r2r::Node,
    _: &LocalPool,
    _: &Robot,
    _: &Arc<Mutex<Commands>>,
    _: SteadyClock,
) -> anyhow::Result<Answering> {
    Ok(Arc::new(|_| {}))
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
    // A hardware's measured settings stand where no parameter sets them, and are not declared.
    log::info!("hardware {hardware}: the estimator's sigma_a {} m/s^2", config.sil.estimator.sigma_a);
    let publisher = NodePublisher::new(&mut node, |out| {
        HilPublisher::advertise(out, robot.clone(), frame_id, rate, &hardware, None, 0)
    })?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), HIL_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (requests, request_queue) = feed_requests();
    let withdrawals = Arc::new(Withdrawals::default());
    let commands =
        HilCommands::new(&config, robot.clone(), requests, withdrawals.clone()).map_err(anyhow::Error::msg)?;
    let commands = Arc::new(Mutex::new(commands));

    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let (faults, rig_faults) = channel();
    let links = HilLinks { requests: request_queue, frames: frames_tx, status: status.clone(), withdrawals, faults };
    let steady = SteadyClock::start();
    let answering = serve_goals(&mut node, &pool, &robot, &commands, steady)?;
    let node_reporter =
        NodeReporter { publisher: publisher.clone(), commands: commands.clone(), answering: answering.clone() };
    let (autostart, auto_recover, recover_protective_stops) =
        (config.settings.autostart, config.settings.auto_recover, config.settings.auto_recover_protective_stop);
    let managed = ManagedHil::new(config, robot.clone(), initial, links, Arc::new(node_reporter));

    let joint_commands = commands.clone();
    serve_joint_commands(&mut node, &pool, move |when, names, positions| {
        let mut commands = joint_commands.lock().map_err(|_| "the node's commands are unavailable".to_owned())?;
        // The command's move is timed on the loop's clock, from when the node took it up (not
        // from the message's arrival, a lock's wait ago).
        let now_s = crate::hil::realtime::monotonic_ns() as f64 * 1e-9;
        commands.joint_command((now_s, when.1), names, positions)
    })?;
    let (segment_commands, mut refusals) = (commands.clone(), Refusals::default());
    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let taken = segment_commands
            .lock()
            .map_err(|_| "the node's commands are unavailable".to_owned())
            .and_then(|mut commands| commands.segment(multi_dof_points(&message)));
        if taken.is_ok() {
            log::debug!("~/trajectory: segment sent to the feeder");
        }
        refusals.log("~/trajectory segment", taken);
        futures::future::ready(())
    }))?;

    let stop = Arc::new(AtomicBool::new(false));
    let publisher_stop = stop.clone();
    let clock = node.get_ros_clock();
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let figures = || status.lock().map(|status| *status).unwrap_or_default();
        publish_loop(&frames, &publisher_stop, figures, |mut event| {
            let handed = Instant::now();
            let published = publisher.with(|publisher, out, now| {
                event.waited(handed.elapsed());
                publisher.publish(out, now, Some(&event))
            });
            if let HilEvent::Frame { frame, loop_number, .. } = &event {
                let now = now_for_device(&clock, &steady);
                let published = published.unwrap_or(false);
                let answers =
                    commands.lock().ok().map(|mut commands| commands.frame(frame, *loop_number, published, now));
                if let Some(answers) = answers {
                    answering(answers);
                }
            }
        });
    })?;

    let finalized = stop.clone();
    let supervisor = Supervisor { faults: rig_faults, autostart, auto_recover, recover_protective_stops };
    let lifecycle = serve_lifecycle(&mut node, &pool.spawner(), managed, supervisor, move || {
        finalized.store(true, Ordering::Relaxed)
    })?;
    spin_until_shut_down(node, pool, &stop, &lifecycle)?;
    let _ = publishing.join();
    Ok(())
}
