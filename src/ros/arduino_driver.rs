//! arduino_driver: the finger testbench's MCU over rdscom as a ROS 2 node (see
//! [`crate::nodes::arduino`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::diagnostic_msgs::msg::DiagnosticArray;
use r2r::sensor_msgs::msg::{JointState, Temperature};
use r2r::std_msgs::msg::Empty;
use r2r::QosProfile;

use super::{diagnostics, header, node_params, now, spin, state_qos, ERROR, OK, WARN};
use crate::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomCommander, RdscomDriver, RdscomEvent, RdscomLinkState, TableChoice,
};
use crate::nodes::arduino::{arduino_node_config, joint_sample, requests_from_joint_command};
use crate::protocol::rdscom::PrototypeTable;

fn send(commander: &RdscomCommander, line: &str) {
    match parse_console_command(line, 0).map(|request| commander.send(request)) {
        Ok(Ok(())) => {}
        Ok(Err(error)) => log::error!("`{line}` refused: {error}"),
        Err(error) => log::error!("`{line}` refused: {error}"),
    }
}

/// Runs the node until interrupted.
pub fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let context = r2r::Context::create()?;
    let mut node = r2r::Node::create(context, "arduino_driver", "")?;
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
    let diagnostics_out =
        node.create_publisher::<DiagnosticArray>("/diagnostics", QosProfile::default().keep_last(10))?;

    let pool = LocalPool::new();
    let (handler, _parameter_events) = node.make_parameter_handler()?;
    pool.spawner().spawn_local(handler)?;
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
    let (port, joint_names) = (config.port.clone(), config.joint_names.clone());
    let events = std::thread::Builder::new().name("rdscom-events".into()).spawn(move || {
        let (mut state, mut failed, mut last_event) = (RdscomLinkState::Lost, 0u64, String::from("started"));
        let mut last_report = Instant::now();
        while !events_stop.load(Ordering::Relaxed) {
            let event = driver.events().recv_timeout(Duration::from_millis(100)).ok();
            let time = now(&clock);
            let published = match &event {
                Some(DriverEvent::Link(RdscomEvent::Received(message))) => match joint_sample(message, &table) {
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
                                let frame = format!("{}_motor", joint_names[sample.joint]);
                                temperature.publish(&Temperature {
                                    header: header(time.clone(), &frame),
                                    temperature: celsius,
                                    variance: 0.0,
                                })
                            }),
                            None => result,
                        }
                    }
                    _ => {
                        let name = table.get(message.prototype).map_or("unknown", |prototype| prototype.name.as_str());
                        last_event = format!("{name} #{}", message.number);
                        Ok(())
                    }
                },
                Some(DriverEvent::Link(RdscomEvent::StateChanged(to))) => {
                    state = *to;
                    last_report = Instant::now() - Duration::from_secs(2);
                    Ok(())
                }
                Some(DriverEvent::Link(RdscomEvent::Failed { prototype, number })) => {
                    failed += 1;
                    log::error!("request {prototype} #{number} got no acknowledgement");
                    Ok(())
                }
                Some(DriverEvent::PortUnavailable { reason, .. }) => {
                    log::warn!("port {port}: {reason}");
                    Ok(())
                }
                _ => Ok(()),
            };
            if let Err(error) = published {
                log::warn!("publishing failed: {error}");
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = Instant::now();
                let level = match (state, failed) {
                    (RdscomLinkState::Lost, _) => ERROR,
                    (RdscomLinkState::Up, 0) => OK,
                    (RdscomLinkState::Up, _) => WARN,
                };
                let values = [
                    ("state", format!("{state:?}")),
                    ("failed_requests", failed.to_string()),
                    ("last_event", last_event.clone()),
                ];
                let status = diagnostics(time, level, "arduino_driver: link", &format!("{state:?}"), &port, &values);
                if let Err(error) = diagnostics_out.publish(&status) {
                    log::warn!("publishing /diagnostics failed: {error}");
                }
            }
        }
    })?;
    spin(node, pool, &stop)?;
    let _ = events.join();
    Ok(())
}
