//! stm32_driver: the STM32 2-DOF arm as a managed ROS 2 node (see [`crate::nodes::stm32`]:
//! configure opens the port and waits for telemetry; activate sends the gains and mode and lets
//! targets through; deactivate stops them, the servos holding their last target).

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::std_msgs::msg::Empty;
use r2r::trajectory_msgs::msg::JointTrajectory;
use r2r::QosProfile;

use super::lifecycle::{spin_managed, Supervisor};
use super::params::serve_parameters;
use super::{
    end_joint_goal, node_params, now_for_device, now_ns, ros_outputs, ros_params, trajectory_goal, JointGoalHandle,
};
use crate::drivers::stm32::Stm32Commander;
use crate::nodes::follower::clocks::SteadyClock;
use crate::nodes::follower::goals::DeviceGoals;
use crate::nodes::follower::stream_gate::in_device_order;
use crate::nodes::managed_driver::{Commanding, ManagedDriver};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::refusals::Refusals;
use crate::nodes::stm32::topics::Stm32Topics;
use crate::nodes::stm32::{
    command_for_parameter, follower, stm32_node_config, targets_from_joint_state, Stm32Arm, STM32_NODE_PARAMS,
};
use crate::protocol::stm32::Command;

/// Sends `command` if the node is active; says why not otherwise.
fn send(commanding: &Commanding<Stm32Commander>, command: Command, what: &str) -> bool {
    match commanding.get().and_then(|commander| commander.send(command).map_err(|error| error.to_string())) {
        Ok(()) => true,
        Err(error) => {
            log::error!("{what} refused: {error}");
            false
        }
    }
}

/// The node's FollowJointTrajectory goals and `~/joint_command` stream.
type Goals = Arc<Mutex<DeviceGoals<JointGoalHandle>>>;

/// Serves `~/follow_joint_trajectory` (and `~/controller_state`) on the node's `goals`: each
/// telemetry packet while active is a control step, timed on the `steady` clock, whose
/// setpoint goes out as both joints' angles.
#[cfg(not(feature = "ros-doc-only"))]
fn follow_joint_trajectories(
    node: &mut r2r::Node,
    pool: &LocalPool,
    goals: Goals,
    managed: ManagedDriver<Stm32Arm, super::RosSink>,
    steady: SteadyClock,
) -> anyhow::Result<ManagedDriver<Stm32Arm, super::RosSink>> {
    use super::joint_trajectory_action::FollowJointTrajectoryServer;
    use crate::nodes::stm32::{angles_command, follower_state};

    let (commanding, clock) = (managed.commanding(), node.get_ros_clock());
    let active = commanding.clone();
    let (active, now) = (Box::new(move || active.get().is_ok()), Box::new(move || now_for_device(&clock, &steady)));
    let (first_goals, first_commanding) = (goals.clone(), commanding.clone());
    // A goal's first setpoint goes out as it is accepted, not at the next telemetry packet.
    let first_setpoint = Box::new(move || {
        let Ok(mut goals) = first_goals.lock() else { return };
        if first_commanding.get().is_err() {
            return;
        }
        if let Some(setpoint) = goals.goals.setpoint_now(steady.now_ns()) {
            send(&first_commanding, angles_command(setpoint.positions()), "a goal's first setpoint");
        }
    });
    let server = FollowJointTrajectoryServer::serve(node, &pool.spawner(), goals.clone(), active, now, first_setpoint)?;
    Ok(managed.observed_by(Arc::new(move |event, time_ns| {
        let Some(actual) = follower_state(event) else { return };
        let Ok(mut goals) = goals.lock() else { return };
        if commanding.get().is_err() {
            return goals.goals.observe(steady.now_ns(), actual);
        }
        // Sent under the goals' lock, so that no setpoint goes out after a stop's hold.
        // Stamped on the ROS clock, as everything the node publishes.
        let tick = goals.goals.tick(steady.now_ns(), actual).stamped(time_ns);
        if let Some(setpoint) = server.answer(tick) {
            send(&commanding, angles_command(setpoint.positions()), "trajectory setpoint");
        }
    })))
}

/// Runs the node until interrupted or shut down.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = stm32_node_config(&node_params(&node)).context("stm32_driver parameters")?;
    let (joint_names, imu_frame_id) = (config.joint_names.clone(), config.imu_frame_id.clone());
    let topics = ros_outputs(&mut node, |out| Stm32Topics::advertise(out, &config.port, joint_names, imu_frame_id))?;
    let shared_config = Arc::new(Mutex::new(config.clone()));
    let arm = Stm32Arm {
        port: config.port.clone(),
        link: config.link.clone(),
        config: shared_config.clone(),
        angles: Mutex::new(None),
    };
    let (faults, device_faults) = channel();
    let clock = node.get_ros_clock();
    let managed = ManagedDriver::new(arm, topics, faults, Arc::new(move || now_ns(&clock)));
    let commanding = managed.commanding();

    let pool = LocalPool::new();
    let goals = DeviceGoals::new(follower(&config).map_err(anyhow::Error::msg)?).from_ros2_control(config.ros2_control);
    let goals: Goals = Arc::new(Mutex::new(goals));
    // The goals' steps are timed on it, whatever /clock does under use_sim_time.
    let steady = SteadyClock::start();
    // FollowJointTrajectory's types are control_msgs', which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let managed = follow_joint_trajectories(&mut node, &pool, goals.clone(), managed, steady)?;
    let stopping = goals.clone();
    let managed = managed.stopping_with(Box::new(move |why| {
        end_joint_goal(stopping.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).stopped(why));
    }));
    let mut declared = to_params(&config);
    declared.extend(ros_params(&node));
    let (parameters_commanding, parameters_goals) = (commanding.clone(), goals.clone());
    serve_parameters(
        &mut node,
        &pool.spawner(),
        ParameterServer::new(declared, STM32_NODE_PARAMS),
        Box::new(move |name, value| {
            let mut config = shared_config.lock().map_err(|_| "parameters unavailable".to_owned())?;
            let followed = parameters_goals.lock().map_or(true, |goals| goals.goals.commanding());
            match command_for_parameter(&mut config, name, value, followed)? {
                // Sent now where the node is active; activating sends it otherwise.
                Some(command) => match parameters_commanding.get() {
                    Ok(commander) => commander.send(command).map_err(|error| error.to_string()),
                    Err(_) => Ok(()),
                },
                None => Err(format!("{name} is not applied while the node runs")),
            }
        }),
    )?;

    let (joint_names, targets, command_goals) = (config.joint_names.clone(), commanding.clone(), goals.clone());
    let joint_commands = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    let (mut refusals, started) = (Refusals::default(), std::time::Instant::now());
    pool.spawner().spawn_local(joint_commands.for_each(move |message| {
        let sent = targets_from_joint_state(&message.name, &message.position, &joint_names).and_then(|command| {
            let commander = targets.get();
            let mut goals = command_goals.lock().map_err(|_| "the node's goals are unavailable".to_owned())?;
            let command_values = in_device_order(&message.name, &message.position, &joint_names);
            goals.offer_command(&command_values, started.elapsed().as_secs_f64(), commander.is_ok())?;
            commander?.send(command).map_err(|error| error.to_string())?;
            // The command has the joints: the goal followed ends.
            end_joint_goal(goals.command_sent());
            Ok(())
        });
        refusals.log("~/joint_command", sent);
        futures::future::ready(())
    }))?;

    let reset_goals = goals.clone();
    // A trajectory on `~/joint_trajectory` is followed as a goal is, with no client to answer.
    let (trajectory_commanding, clock) = (commanding.clone(), node.get_ros_clock());
    let trajectories = node.subscribe::<JointTrajectory>("~/joint_trajectory", QosProfile::default())?;
    pool.spawner().spawn_local(trajectories.for_each(move |message| {
        let followed = goals.lock().map_err(|_| "the node's goals are unavailable".to_owned()).and_then(|mut goals| {
            let (taking, now) = (trajectory_commanding.get().is_ok(), now_for_device(&clock, &steady));
            goals
                .follow_trajectory(&now.restamped(trajectory_goal(&message)), now.steps_ns, taking)
                .map_err(|r| r.reason)
        });
        match followed {
            Ok(replaced) => end_joint_goal(replaced),
            Err(error) => log::error!("~/joint_trajectory refused: {error}"),
        }
        futures::future::ready(())
    }))?;

    for (topic, command) in [("~/reset", Command::SystemReset), ("~/calibrate_imu", Command::CalibrateImu)] {
        let requests = node.subscribe::<Empty>(topic, QosProfile::default())?;
        let (commanding, goals) = (commanding.clone(), reset_goals.clone());
        pool.spawner().spawn_local(requests.for_each(move |_| {
            let Ok(mut goals) = goals.lock() else { return futures::future::ready(()) };
            // A reset restarts the firmware: what the node followed ends first (the joints are
            // the firmware's then), and the command stream's command in force is not followed
            // again. Sent under the goals' lock, so that no step's setpoint comes after it.
            if command == Command::SystemReset {
                end_joint_goal(goals.stopped("~/reset"));
            }
            send(&commanding, command.clone(), topic);
            futures::future::ready(())
        }))?;
    }

    let supervisor = Supervisor {
        faults: device_faults,
        autostart: config.autostart,
        auto_recover: config.auto_recover,
        recover_protective_stops: false,
    };
    spin_managed(node, pool, managed, supervisor)
}
