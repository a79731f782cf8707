//! hil_node without ROS: its parameters (here), how trajectory segments and action goals reach
//! the running loop ([`feeder`]), how a goal's run answers it ([`goals`]), the node's rig and
//! loop under the lifecycle ([`managed`]), and what it publishes ([`publisher`]).

pub mod feeder;
pub mod goals;
pub mod managed;
pub mod publisher;

use std::collections::BTreeMap;

use serde::Deserialize;

use super::param_server::ParamSpec;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigDevices, RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::HilConfig;
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "hil_node";

/// hil_node's own parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HilNodeSettings {
    /// Hardware behind the loop: sim or robotscara. Default sim.
    pub hardware: RigKind,
    /// Angle sensor device (robotscara). Default /dev/ttyUSB0. (Not `sensor`: that is the
    /// simulated sensor's section.)
    pub sensor_device: String,
    /// Step-driver Arduino device, or auto (robotscara). Default auto.
    pub arduino_device: String,
    /// Frames published per second [Hz]. Default 250.
    pub publish_rate_hz: f64,
    /// Trajectory CSV run at start; empty = the built-in arc. Segments on ~/trajectory follow it.
    pub trajectory_file: String,
    /// Frame of the published points. Default base_link.
    pub frame_id: String,
    /// Configure and activate at start (the launch file sets it). Default false: the node waits
    /// unconfigured for `ros2 lifecycle set`.
    pub autostart: bool,
    /// After a device fault, configure and activate again once a second until the rig is back.
    /// Default false.
    pub auto_recover: bool,
    /// With auto_recover, activate again after a protective stop too. Default false: a
    /// protective stop leaves the node inactive until a person has looked.
    pub auto_recover_protective_stop: bool,
}

impl Default for HilNodeSettings {
    fn default() -> Self {
        HilNodeSettings {
            hardware: RigKind::Sim,
            sensor_device: "/dev/ttyUSB0".into(),
            arduino_device: "auto".into(),
            publish_rate_hz: 250.0,
            trajectory_file: String::new(),
            frame_id: "base_link".into(),
            autostart: false,
            auto_recover: false,
            auto_recover_protective_stop: false,
        }
    }
}

/// How `ros2 param` sees hil_node's parameters: all are read at start (the loop and its
/// hardware are set up once).
pub const HIL_NODE_PARAMS: [ParamSpec; 16] = [
    ParamSpec::read_only("hardware", "hardware behind the loop: sim or robotscara (read at start)"),
    ParamSpec::read_only("sensor_device", "angle sensor device, robotscara (read at start)"),
    ParamSpec::read_only("arduino_device", "step-driver Arduino device or auto, robotscara (read at start)"),
    ParamSpec::read_only("publish_rate_hz", "frames published per second [Hz] (read at start)"),
    ParamSpec::read_only("trajectory_file", "trajectory CSV run at start; empty runs the built-in arc (read at start)"),
    ParamSpec::read_only("frame_id", "frame of the published points (read at start)"),
    ParamSpec::read_only(
        "hil.",
        "the fixed-rate loop: rate, sensor timeout, real-time priority, protective stop bounds (read at start)",
    ),
    ParamSpec::read_only("rig.", "the reference rig's devices (read at start)"),
    ParamSpec::read_only("stepper.", "torque to step rate (read at start)"),
    ParamSpec::read_only("robot.", "robot model, SI units (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("controller.", "task-space PID and inverse dynamics (read at start)"),
    ParamSpec::read_only("estimator.", "Kalman filter and range-bias estimator (read at start)"),
    ParamSpec::read_only("sensor.", "simulated angle sensor (read at start)"),
    ParamSpec::read_only("autostart", "configure and activate at start (read at start)"),
    ParamSpec::read_only(
        "auto_recover",
        "after a rig fault, configure and activate again once a second (read at start)",
    ),
    ParamSpec::read_only(
        "auto_recover_protective_stop",
        "with auto_recover, activate again after a protective stop too (read at start)",
    ),
];

/// Everything hil_node is configured by.
#[derive(Debug, Clone)]
pub struct HilNodeConfig {
    pub sil: SilConfig,
    pub hil: HilConfig,
    pub rig: RigSettings,
    pub settings: HilNodeSettings,
}

impl HilNodeConfig {
    pub fn devices(&self) -> RigDevices {
        RigDevices { sensor: self.settings.sensor_device.clone(), arduino: self.settings.arduino_device.clone() }
    }
}

const GROUPS: [&str; 3] = ["hil", "stepper", "rig"];

/// Reads hil_node's parameters: the SIL sections, `hil.*`, `stepper.*`, `rig.*` and its own.
pub fn hil_node_config(params: &BTreeMap<String, ParamValue>) -> Result<HilNodeConfig, ParamError> {
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    let sil: SilConfig = read_group(&only_groups(params, &SilConfig::SECTIONS), "")?;
    sil.validate().map_err(|error| invalid(error.to_string()))?;
    let hil: HilConfig = read_group(params, "hil")?;
    hil.validate().map_err(invalid)?;
    let rig = RigSettings {
        stepper: read_group::<StepperConfig>(params, "stepper")?,
        rig: read_group::<RigConfig>(params, "rig")?,
    };
    let groups: Vec<&str> = SilConfig::SECTIONS.iter().chain(&GROUPS).copied().collect();
    let settings: HilNodeSettings = read_group(&without_groups(params, &groups), "")?;
    if !(settings.publish_rate_hz > 0.0) {
        return Err(invalid(format!("publish_rate_hz must be > 0, got {}", settings.publish_rate_hz)));
    }
    Ok(HilNodeConfig { sil, hil, rig, settings })
}
