//! stm32_driver: the STM32 2-DOF arm as a ROS 2 node (see [`crate::nodes::stm32`]).

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::geometry_msgs::msg::{Quaternion, Vector3};
use r2r::sensor_msgs::msg::{Imu, JointState};
use r2r::std_msgs::msg::Empty;
use r2r::trajectory_msgs::msg::JointTrajectory;
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::serve_parameters;
use super::{
    header, node_params, now, own_header, ros_params, seconds, spin, state_qos, InterfacePublisher, LinkHealthPublisher,
};
use crate::drivers::stm32::{DriverEvent, LinkEvent, Stm32Commander, Stm32Driver};
use crate::nodes::interfaces::Stm32Telemetry;
use crate::nodes::link_health::LinkHealth;
use crate::nodes::param_server::ParameterServer;
use crate::nodes::params::to_params;
use crate::nodes::stm32::{
    command_for_parameter, imu_orientation, joint_state, stm32_node_config, targets_from_joint_state,
    targets_from_joint_trajectory, track_link, IMU_ORIENTATION_COVARIANCE, STM32_NODE_PARAMS,
};
use crate::protocol::stm32::Command;

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

    let joint_states = node.create_publisher::<JointState>("/joint_states", state_qos())?;
    let imu = node.create_publisher::<Imu>("~/imu", state_qos())?;
    let telemetry_out = InterfacePublisher::<Stm32Telemetry>::create(&mut node, "~/telemetry", state_qos())?;
    let mut link_health = LinkHealthPublisher::create(&mut node)?;
    let reporter = Reporter::new(&mut node, "stm32_driver: link", &config.port)?;

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
    let periodic = reporter.spawn_periodic(stop.clone())?;
    let events_stop = stop.clone();
    let events = std::thread::Builder::new().name("stm32-events".into()).spawn(move || {
        let mut health = LinkHealth::default();
        while !events_stop.load(std::sync::atomic::Ordering::Relaxed) {
            let event = match driver.events().recv_timeout(Duration::from_millis(100)) {
                Ok(event) => Some(event),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let time = now(&clock);
            if let Some(event) = &event {
                track_link(&mut health, event);
            }
            link_health.update(&health, &time);
            let Some(event) = event else { continue };
            let published = match &event {
                DriverEvent::Link(LinkEvent::Telemetry(telemetry)) => {
                    let typed = Stm32Telemetry::of(own_header(&time, &config.imu_frame_id), telemetry);
                    if let Err(error) = telemetry_out.publish(&typed) {
                        log::warn!("publishing ~/telemetry failed: {error:#}");
                    }
                    let mut result = Ok(());
                    if let Some((position, velocity)) = joint_state(telemetry) {
                        result = joint_states.publish(&JointState {
                            header: header(time.clone(), ""),
                            name: config.joint_names.clone(),
                            position: position.to_vec(),
                            velocity: velocity.to_vec(),
                            // The firmware reports no torque.
                            effort: vec![0.0; 2],
                        });
                    }
                    if let Some(sample) = &telemetry.imu {
                        let [x, y, z, w] = imu_orientation(sample.roll, sample.pitch);
                        let [gx, gy, gz] = sample.gyro;
                        let [ax, ay, az] = sample.accel;
                        result = result.and_then(|()| {
                            imu.publish(&Imu {
                                header: header(time.clone(), &config.imu_frame_id),
                                orientation: Quaternion { x, y, z, w },
                                orientation_covariance: IMU_ORIENTATION_COVARIANCE.to_vec(),
                                angular_velocity: Vector3 { x: gx, y: gy, z: gz },
                                angular_velocity_covariance: vec![0.0; 9],
                                linear_acceleration: Vector3 { x: ax, y: ay, z: az },
                                linear_acceleration_covariance: vec![0.0; 9],
                            })
                        });
                    }
                    result
                }
                DriverEvent::Link(LinkEvent::StateChanged { to, .. }) => {
                    log::info!("link {to:?}");
                    Ok(())
                }
                DriverEvent::Link(LinkEvent::CommandFailed { command, reason }) => {
                    log::error!("command 0x{command:02x} failed: {reason}");
                    Ok(())
                }
                DriverEvent::PortUnavailable { reason, .. } => {
                    log::warn!("port {}: {reason}", config.port);
                    Ok(())
                }
                _ => Ok(()),
            };
            if let Err(error) = published {
                log::warn!("publishing failed: {error}");
            }
            reporter.update(|status| health.report(status));
        }
    })?;
    spin(node, pool, &stop)?;
    let _ = events.join();
    let _ = periodic.join();
    Ok(())
}
