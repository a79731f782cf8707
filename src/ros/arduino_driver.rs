//! arduino_driver: the finger testbench's MCU over rdscom as a ROS 2 node (see
//! [`crate::nodes::arduino`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::std_msgs::msg::Empty;
use r2r::QosProfile;

use super::params::{nothing_at_run_time, serve_parameters};
use super::{node_params, pump_events, ros_outputs, spin};
use crate::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomCommander, RdscomDriver, RdscomEvent, TableChoice,
};
use crate::nodes::arduino::{arduino_node_config, joint_sample, requests_from_joint_command, ARDUINO_NODE_PARAMS};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::topics::arduino::ArduinoTopics;
use crate::protocol::rdscom::{Message, PrototypeTable};

/// What the node logs of its driver's events (the rest is on its topics): the MCU's messages
/// that no topic carries, and the link's changes.
fn log_event(event: &DriverEvent, table: &PrototypeTable) {
    match event {
        DriverEvent::Link(RdscomEvent::Received(message)) => log_message(message, table),
        DriverEvent::Link(RdscomEvent::StateChanged(to)) => log::info!("link {to:?}"),
        DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
            log::error!("request {prototype} #{number} got no acknowledgement")
        }
        DriverEvent::PortUnavailable { path, reason, .. } => log::warn!("port {path}: {reason}"),
        _ => {}
    }
}

fn log_message(message: &Message, table: &PrototypeTable) {
    if joint_sample(message, table).is_none() {
        let name = table.get(message.prototype).map_or("unknown", |prototype| prototype.name.as_str());
        log::info!("{name} #{}", message.number);
    }
}

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

    let (topic_table, log_table) = (table.clone(), table.clone());
    let (topics, out) =
        ros_outputs(&mut node, |out| ArduinoTopics::advertise(out, &config.port, &config, topic_table))?;

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
    let events_stop = stop.clone();
    let events = std::thread::Builder::new().name("rdscom-events".into()).spawn(move || {
        pump_events(driver.events(), &events_stop, topics, out, &clock, |event| log_event(event, &log_table));
    })?;
    spin(node, pool, &stop)?;
    let _ = events.join();
    Ok(())
}
