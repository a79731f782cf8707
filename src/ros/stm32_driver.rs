//! stm32_driver: the STM32 2-DOF arm as a ROS 2 node (see [`crate::nodes::stm32`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::std_msgs::msg::Empty;
use r2r::trajectory_msgs::msg::JointTrajectory;
use r2r::QosProfile;

use super::params::serve_parameters;
use super::{node_params, pump_events, ros_outputs, ros_params, seconds, spin};
use crate::drivers::stm32::{DriverEvent, LinkEvent, Stm32Commander, Stm32Driver};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::stm32::{
    command_for_parameter, stm32_node_config, targets_from_joint_state, targets_from_joint_trajectory,
    STM32_NODE_PARAMS,
};
use crate::nodes::topics::stm32::Stm32Topics;
use crate::protocol::stm32::Command;

/// What the node logs of its driver's events (the rest is on its topics).
fn log_event(event: &DriverEvent) {
    match event {
        DriverEvent::Link(LinkEvent::StateChanged { to, .. }) => log::info!("link {to:?}"),
        DriverEvent::Link(LinkEvent::CommandFailed { command, reason }) => {
            log::error!("command 0x{command:02x} failed: {reason}")
        }
        DriverEvent::PortUnavailable { path, reason, .. } => log::warn!("port {path}: {reason}"),
        _ => {}
    }
}

fn send(commander: &Stm32Commander, command: Command, what: &str) {
    if let Err(error) = commander.send(command) {
        log::error!("{what} refused: {error}");
    }
}

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = stm32_node_config(&node_params(&node)).context("stm32_driver parameters")?;
    let driver = Stm32Driver::start(&config.port, config.link.clone())?;
    let commander = driver.commander();
    for command in config.setup_commands().map_err(anyhow::Error::msg)? {
        send(&commander, command, "setup");
    }

    let (joint_names, imu_frame_id) = (config.joint_names.clone(), config.imu_frame_id.clone());
    let (topics, out) =
        ros_outputs(&mut node, |out| Stm32Topics::advertise(out, &config.port, joint_names, imu_frame_id))?;

    let pool = LocalPool::new();
    let mut declared = to_params(&config);
    declared.extend(ros_params(&node));
    let parameters_commander = commander.clone();
    let mut parameter_config = config.clone();
    serve_parameters(
        &mut node,
        &pool.spawner(),
        ParameterServer::new(declared, &STM32_NODE_PARAMS),
        Box::new(move |name, value| match command_for_parameter(&mut parameter_config, name, value)? {
            Some(command) => parameters_commander.send(command).map_err(|error| error.to_string()),
            None => Err(format!("{name} is not applied while the node runs")),
        }),
    )?;

    let joint_names = config.joint_names.clone();
    let targets_commander = commander.clone();
    let joint_commands = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    pool.spawner().spawn_local(joint_commands.for_each(move |message| {
        match targets_from_joint_state(&message.name, &message.position, &joint_names) {
            Ok(command) => send(&targets_commander, command, "joint command"),
            Err(error) => log::error!("~/joint_command refused: {error}"),
        }
        futures::future::ready(())
    }))?;

    let joint_names = config.joint_names.clone();
    let trajectory_commander = commander.clone();
    let trajectories = node.subscribe::<JointTrajectory>("~/joint_trajectory", QosProfile::default())?;
    pool.spawner().spawn_local(trajectories.for_each(move |message| {
        let points: Vec<(Vec<f64>, f64)> =
            message.points.iter().map(|p| (p.positions.clone(), seconds(&p.time_from_start))).collect();
        match targets_from_joint_trajectory(&message.joint_names, &points, &joint_names) {
            Ok(schedule) => {
                // Each target goes out at its time; a later trajectory does not cancel this one.
                let commander = trajectory_commander.clone();
                std::thread::spawn(move || {
                    let start = Instant::now();
                    for (time, command) in schedule {
                        std::thread::sleep(
                            (start + Duration::from_secs_f64(time.max(0.0))).saturating_duration_since(Instant::now()),
                        );
                        send(&commander, command, "trajectory point");
                    }
                });
            }
            Err(error) => log::error!("~/joint_trajectory refused: {error}"),
        }
        futures::future::ready(())
    }))?;

    for (topic, command) in [("~/reset", Command::SystemReset), ("~/calibrate_imu", Command::CalibrateImu)] {
        let requests = node.subscribe::<Empty>(topic, QosProfile::default())?;
        let commander = commander.clone();
        pool.spawner().spawn_local(requests.for_each(move |_| {
            send(&commander, command.clone(), topic);
            futures::future::ready(())
        }))?;
    }

    let clock = node.get_ros_clock();
    let stop = Arc::new(AtomicBool::new(false));
    let events_stop = stop.clone();
    let events = std::thread::Builder::new()
        .name("stm32-events".into())
        .spawn(move || pump_events(driver.events(), &events_stop, topics, out, &clock, log_event))?;
    spin(node, pool, &stop)?;
    let _ = events.join();
    Ok(())
}
