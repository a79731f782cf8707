//! arduino_driver without ROS: parameters, datastream samples to joint states, and joint
//! commands to MotorControl requests.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::link_health::LinkHealth;
use super::param_server::ParamSpec;
use super::params::{read_group, without_groups, ParamError, ParamValue};
use crate::drivers::rdscom::{DriverEvent, RdscomConfig, RdscomEvent, Request};
use crate::protocol::rdscom::{Message, PrototypeTable, Value};

/// arduino_driver's parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArduinoNodeConfig {
    /// Serial device. Default /dev/ttyACM0.
    pub port: String,
    /// Link settings: baud, retry_timeout_s, retries, heartbeat_period_s, heartbeat_misses, table.
    pub link: RdscomConfig,
    /// A prototype table YAML file; empty uses `link.table`. Default empty.
    pub prototypes_file: String,
    /// Joint names by motor / sensor id. Default finger_joint0 .. finger_joint3 (the joints of
    /// urdf/finger_testbench.urdf, named apart from every other device's).
    pub joint_names: Vec<String>,
    /// Before every frame the node names (`JOINT_motor`): `NS/` in a namespace. Default empty.
    pub frame_prefix: String,
    /// Datastream of all joints started at this rate [Hz] (1..=255; 0: none). Default 50.
    pub stream_rate_hz: u8,
}

impl Default for ArduinoNodeConfig {
    fn default() -> Self {
        ArduinoNodeConfig {
            port: "/dev/ttyACM0".into(),
            link: RdscomConfig::default(),
            prototypes_file: String::new(),
            joint_names: (0..4).map(|joint| format!("finger_joint{joint}")).collect(),
            frame_prefix: String::new(),
            stream_rate_hz: 50,
        }
    }
}

/// How `ros2 param` sees arduino_driver's parameters: all are read at start (the link and the
/// datastreams are set up once; commands go on topics).
pub const ARDUINO_NODE_PARAMS: [ParamSpec; 6] = [
    ParamSpec::read_only("port", "serial device of the MCU (read at start)"),
    ParamSpec::read_only("joint_names", "joint names by motor / sensor id (read at start)"),
    ParamSpec::read_only("frame_prefix", "before the motor frames, NS/ in a namespace (read at start)"),
    ParamSpec::read_only(
        "stream_rate_hz",
        "datastream of all joints started at this rate [Hz]; 0: none (read at start)",
    ),
    ParamSpec::read_only("prototypes_file", "a YAML prototype table; empty uses link.table (read at start)"),
    ParamSpec::read_only("link.", "rdscom link: baud, table, retries, heartbeat (read at start)"),
];

/// Reads arduino_driver's parameters; unknown names are refused.
pub fn arduino_node_config(params: &BTreeMap<String, ParamValue>) -> Result<ArduinoNodeConfig, ParamError> {
    let own = without_groups(params, &[]);
    read_group(&own, "")
}

/// One joint's sample from a SensorDatastream: position [rad], and, with the newer table,
/// velocity [rad/s] and motor temperature [deg C].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointSample {
    pub joint: usize,
    pub position: f64,
    pub velocity: Option<f64>,
    pub temperature: Option<f64>,
}

/// Reads a SensorDatastream message in either table's layout.
pub fn joint_sample(message: &Message, table: &PrototypeTable) -> Option<JointSample> {
    let field = |name: &str| message.field(table, name).map(Value::as_f64);
    let joint = usize::try_from(field("joint_id")? as i64).ok()?;
    let position = field("joint_pos").or_else(|| field("data"))?;
    Some(JointSample { joint, position, velocity: field("motor_vel"), temperature: field("motor_temp") })
}

/// The frame of a joint's motor temperature (sensor_msgs/Temperature on `~/temperature`), a
/// link of urdf/finger_testbench.urdf, after the node's `frame_prefix`.
pub fn motor_frame(frame_prefix: &str, joint_name: &str) -> String {
    format!("{frame_prefix}{joint_name}_motor")
}

/// What a driver event tells of the link's health (/diagnostics "arduino_driver: link").
pub fn track_link(health: &mut LinkHealth, event: &DriverEvent) {
    match event {
        DriverEvent::Link(RdscomEvent::Received(_)) => health.packets += 1,
        DriverEvent::Link(RdscomEvent::StateChanged(to)) => health.changed(*to),
        DriverEvent::Link(RdscomEvent::Resent { .. }) => health.resends += 1,
        DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
            health.failed_request(format!("request {prototype} #{number} got no acknowledgement"))
        }
        DriverEvent::PortUnavailable { reason, .. } => health.port_error(reason.clone()),
        _ => {}
    }
}

/// MotorControl requests from a JointState command: the one non-empty array among position,
/// velocity and effort picks the control mode; every named joint gets a control, all but the
/// first simultaneous with the one before.
pub fn requests_from_joint_command(
    names: &[String],
    position: &[f64],
    velocity: &[f64],
    effort: &[f64],
    joint_names: &[String],
) -> Result<Vec<Request>, String> {
    let (mode, values) = match (position.is_empty(), velocity.is_empty(), effort.is_empty()) {
        (false, true, true) => (0, position),
        (true, false, true) => (1, velocity),
        (true, true, false) => (2, effort),
        _ => return Err("exactly one of position, velocity and effort must be given".into()),
    };
    if values.len() != names.len() {
        return Err(format!("{} names but {} values", names.len(), values.len()));
    }
    names
        .iter()
        .zip(values)
        .enumerate()
        .map(|(index, (name, value))| {
            let motor = joint_names.iter().position(|joint| joint == name).ok_or(format!("unknown joint `{name}`"))?;
            Ok(Request {
                prototype: "MotorControl".into(),
                values: vec![Value::Int(motor as i64), Value::Int(mode), Value::Float(*value), Value::Bool(index > 0)],
            })
        })
        .collect()
}
