//! hil_node without ROS: its parameters (here), how trajectory segments and action goals reach
//! the running loop ([`feeder`]), how a goal's run answers it ([`goals`]), the node's rig and
//! loop under the lifecycle ([`managed`]), and what it publishes ([`publisher`]).

pub mod commands;
pub mod feeder;
pub mod goals;
pub mod managed;
pub mod publisher;

use std::collections::BTreeMap;

use serde::Deserialize;

use super::declare::node_parameters;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigDevices, RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::HilConfig;
use crate::nodes::follower::{Constraints, GoalLimits};
use crate::nodes::sil::joint_commands::{check_command_speed, HIL_COMMAND_SPEED_M_S};
use crate::nodes::sil::joint_goals::{arm_follower, HIL_STOPPED_RAD_S};
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "hil_node";

node_parameters! {
    /// hil_node's own parameters: all are read at start (the loop and its hardware are set up
    /// once).
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    pub struct HilNodeSettings, HIL_NODE_PARAMS {
        read_only hardware: RigKind = RigKind::Sim => "hardware behind the loop: sim or robotscara";
        read_only sensor_device: String = "/dev/ttyUSB0".into()
            => "angle sensor device, robotscara (not `sensor`: that is the simulated sensor's section)";
        read_only arduino_device: String = "auto".into() => "step-driver Arduino device or auto, robotscara";
        read_only publish_rate_hz: f64 = 250.0 => "frames published per second of loop time [Hz]";
        read_only trajectory_file: String = String::new()
            => "trajectory CSV run at start; empty runs the built-in arc; segments on ~/trajectory follow it";
        read_only frame_id: String = "base_link".into() => "frame of the published points";
        read_only autostart: bool = false
            => "configure and activate at start (the launch file sets it); else the node waits unconfigured";
        read_only auto_recover: bool = false
            => "after a rig fault, configure and activate again once a second until the rig is back";
        read_only auto_recover_protective_stop: bool = false
            => "with auto_recover, activate again after a protective stop too; else the node waits inactive";
        section constraints: Constraints = Constraints::stopped_below(HIL_STOPPED_RAD_S)
            => "~/follow_joint_trajectory's default tolerances: goal_time [s], goal and trajectory [rad] per motor, stopped_velocity_tolerance [rad/s]";
        section goal_limits: GoalLimits = GoalLimits::default()
            => "~/follow_joint_trajectory's bounds on a goal: max_points, max_duration_s [s] from its receipt";
        read_only joint_command_speed_m_s: f64 = HIL_COMMAND_SPEED_M_S
            => "~/joint_command: a step becomes a ramp at this mean platform speed [m/s]; a controller's stream is followed at its own speed, no motor faster than hil.protection allows";
        read_only ros2_control: bool = false
            => "commanded by ros2_control's topic-based hardware (control:=ros2_control sets it): ~/joint_command is its stream, whose initial values are not followed";
    }
    sections {
        "hil." => "the fixed-rate loop: rate, sensor timeout, real-time priority, protective stop bounds",
        "rig." => "the reference rig's devices",
        "stepper." => "torque to step rate",
        "robot." => "robot model, SI units; see examples/sil.yaml",
        "controller." => "task-space PID and inverse dynamics",
        "estimator." => "Kalman filter and range-bias estimator",
        "sensor." => "simulated angle sensor",
    }
}

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
/// The hardware's measured settings ([`RigKind::measured_defaults`]) stand where no parameter
/// sets them.
pub fn hil_node_config(params: &BTreeMap<String, ParamValue>) -> Result<HilNodeConfig, ParamError> {
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    let groups: Vec<&str> = SilConfig::SECTIONS.iter().chain(&GROUPS).copied().collect();
    let settings: HilNodeSettings = read_group(&without_groups(params, &groups), "")?;
    let mut sil_params = only_groups(params, &SilConfig::SECTIONS);
    for (section, key, value) in settings.hardware.measured_defaults() {
        sil_params.entry(format!("{section}.{key}")).or_insert(ParamValue::Double(*value));
    }
    let sil: SilConfig = read_group(&sil_params, "")?;
    sil.validate().map_err(|error| invalid(error.to_string()))?;
    let hil: HilConfig = read_group(params, "hil")?;
    hil.validate().map_err(invalid)?;
    let rig = RigSettings {
        stepper: read_group::<StepperConfig>(params, "stepper")?,
        rig: read_group::<RigConfig>(params, "rig")?,
    };
    if !(settings.publish_rate_hz > 0.0) {
        return Err(invalid(format!("publish_rate_hz must be > 0, got {}", settings.publish_rate_hz)));
    }
    arm_follower(&settings.constraints, &settings.goal_limits).map_err(invalid)?;
    check_command_speed(settings.joint_command_speed_m_s).map_err(invalid)?;
    Ok(HilNodeConfig { sil, hil, rig, settings })
}
