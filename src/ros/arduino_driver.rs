//! arduino_driver: the finger testbench's MCU over rdscom as a ROS 2 node (see
//! [`crate::nodes::arduino`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::{JointState, Temperature};
use r2r::std_msgs::msg::Empty;
use r2r::QosProfile;

use super::diagnostics::Reporter;
use super::params::{nothing_at_run_time, serve_parameters};
use super::{
    event_qos, header, node_params, now, own_header, spin, state_qos, InterfacePublisher, LinkHealthPublisher,
};
use crate::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomCommander, RdscomDriver, RdscomEvent, TableChoice,
};
use crate::nodes::arduino::{
    arduino_node_config, joint_sample, motor_frame, requests_from_joint_command, track_link, ARDUINO_NODE_PARAMS,
};
use crate::nodes::interfaces::{ControlDone, DeviceError, MotorEvent, RdscomMessage};
use crate::nodes::link_health::LinkHealth;
use crate::nodes::param_server::ParameterServer;
use crate::protocol::rdscom::PrototypeTable;

fn send(commander: &RdscomCommander, line: &str) {
    match parse_console_command(line, 0).map(|request| commander.send(request)) {
        Ok(Ok(())) => {}
        Ok(Err(error)) => log::error!("`{line}` refused: {error}"),
        Err(error) => log::error!("`{line}` refused: {error}"),
    }
}

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = arduino_node_config(&node_params(&node)).context("arduino_driver parameters")?;
    let table = match (config.prototypes_file.as_str(), &config.link.table) {
        ("", TableChoice::Document) => PrototypeTable::document(),
        ("", TableChoice::Firmware) => PrototypeTable::firmware(),
        (file, _) => {
            PrototypeTable::from_yaml(&std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?)?
        }
    };
    let driver = RdscomDriver::start(&config.port, config.link.clone(), table.clone())?;
    let commander = driver.commander();
    if config.stream_rate_hz > 0 {
        send(&commander, &format!("stream all {}", config.stream_rate_hz));
    }

    let joint_states = node.create_publisher::<JointState>("/joint_states", state_qos())?;
    let temperature = node.create_publisher::<Temperature>("~/temperature", state_qos())?;
    let mut link_health = LinkHealthPublisher::create(&mut node)?;
    let motor_events = InterfacePublisher::<MotorEvent>::create(&mut node, "~/motor_event", event_qos())?;
    let control_done = InterfacePublisher::<ControlDone>::create(&mut node, "~/control_done", event_qos())?;
    let device_errors = InterfacePublisher::<DeviceError>::create(&mut node, "~/device_error", event_qos())?;
    let reporter = Reporter::new(&mut node, "arduino_driver: link", &config.port)?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), &ARDUINO_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (joint_names, command_sender) = (config.joint_names.clone(), commander.clone());
    let joint_commands = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    pool.spawner().spawn_local(joint_commands.for_each(move |message| {
        match requests_from_joint_command(
            &message.name,
            &message.position,
            &message.velocity,
            &message.effort,
            &joint_names,
        ) {
            Ok(requests) => {
                for request in requests {
                    if let Err(error) = command_sender.send(request) {
                        log::error!("joint command refused: {error}");
                    }
                }
            }
            Err(error) => log::error!("~/joint_command refused: {error}"),
        }
        futures::future::ready(())
    }))?;
    for (topic, line) in [("~/go", "go"), ("~/stop", "stop"), ("~/clear", "clear")] {
        let requests = node.subscribe::<Empty>(topic, QosProfile::default())?;
        let commander = commander.clone();
        pool.spawner().spawn_local(requests.for_each(move |_| {
            send(&commander, line);
            futures::future::ready(())
        }))?;
    }

    let clock = node.get_ros_clock();
    let stop = Arc::new(AtomicBool::new(false));
    let periodic = reporter.spawn_periodic(stop.clone())?;
    let events_stop = stop.clone();
    let (port, joint_names) = (config.port.clone(), config.joint_names.clone());
    let events = std::thread::Builder::new().name("rdscom-events".into()).spawn(move || {
        let mut health = LinkHealth::default();
        while !events_stop.load(Ordering::Relaxed) {
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
            if let DriverEvent::Link(RdscomEvent::Received(message)) = &event {
                let typed = match RdscomMessage::of(own_header(&time, ""), message, &table) {
                    Some(RdscomMessage::MotorEvent(event)) => motor_events.publish(&event),
                    Some(RdscomMessage::ControlDone(done)) => control_done.publish(&done),
                    Some(RdscomMessage::DeviceError(error)) => device_errors.publish(&error),
                    None => Ok(()),
                };
                if let Err(error) = typed {
                    log::warn!("publishing an rdscom message failed: {error:#}");
                }
            }
            let published = match &event {
                DriverEvent::Link(RdscomEvent::Received(message)) => match joint_sample(message, &table) {
                    Some(sample) if sample.joint < joint_names.len() => {
                        let result = joint_states.publish(&JointState {
                            header: header(time.clone(), ""),
                            name: vec![joint_names[sample.joint].clone()],
                            position: vec![sample.position],
                            velocity: vec![sample.velocity.unwrap_or(0.0)],
                            effort: vec![0.0],
                        });
                        match sample.temperature {
                            Some(celsius) => result.and_then(|()| {
                                temperature.publish(&Temperature {
                                    header: header(time.clone(), &motor_frame(&joint_names[sample.joint])),
                                    temperature: celsius,
                                    variance: 0.0,
                                })
                            }),
                            None => result,
                        }
                    }
                    _ => {
                        let name = table.get(message.prototype).map_or("unknown", |prototype| prototype.name.as_str());
                        log::info!("{name} #{}", message.number);
                        Ok(())
                    }
                },
                DriverEvent::Link(RdscomEvent::StateChanged(to)) => {
                    log::info!("link {to:?}");
                    Ok(())
                }
                DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
                    log::error!("request {prototype} #{number} got no acknowledgement");
                    Ok(())
                }
                DriverEvent::PortUnavailable { reason, .. } => {
                    log::warn!("port {port}: {reason}");
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
