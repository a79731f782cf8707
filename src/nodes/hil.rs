//! hil_node without ROS: its parameters and how trajectory segments join the running loop.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::diagnostics::{Level, Status};
use super::messages::MultiDofPoint;
use super::param_server::ParamSpec;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::control::Waypoint;
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigDevices, RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::{HilConfig, LoopStatus};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::sim::SilConfig;

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
        }
    }
}

/// How `ros2 param` sees hil_node's parameters: all are read at start (the loop and its
/// hardware are set up once).
pub const HIL_NODE_PARAMS: [ParamSpec; 13] = [
    ParamSpec::read_only("hardware", "hardware behind the loop: sim or robotscara (read at start)"),
    ParamSpec::read_only("sensor_device", "angle sensor device, robotscara (read at start)"),
    ParamSpec::read_only("arduino_device", "step-driver Arduino device or auto, robotscara (read at start)"),
    ParamSpec::read_only("publish_rate_hz", "frames published per second [Hz] (read at start)"),
    ParamSpec::read_only("trajectory_file", "trajectory CSV run at start; empty runs the built-in arc (read at start)"),
    ParamSpec::read_only("frame_id", "frame of the published points (read at start)"),
    ParamSpec::read_only("hil.", "the fixed-rate loop: rate, sensor timeout, real-time priority (read at start)"),
    ParamSpec::read_only("rig.", "the reference rig's devices (read at start)"),
    ParamSpec::read_only("stepper.", "torque to step rate (read at start)"),
    ParamSpec::read_only("robot.", "robot model, SI units (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("controller.", "task-space PID and inverse dynamics (read at start)"),
    ParamSpec::read_only("estimator.", "Kalman filter and range-bias estimator (read at start)"),
    ParamSpec::read_only("sensor.", "simulated angle sensor (read at start)"),
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

/// hil_node's status from the loop's figures: OK while no cycle overran since the last report
/// (when the loop had `overruns_before` overruns), else a warning with the count.
pub fn loop_status(status: &mut Status, snapshot: &LoopStatus, overruns_before: u64) {
    let (level, message) = match snapshot.overruns.saturating_sub(overruns_before) {
        0 => (Level::Ok, "running".to_owned()),
        new => (Level::Warn, format!("running; {new} overruns in the last second")),
    };
    let values = vec![
        ("cycles", snapshot.cycles.to_string()),
        ("overruns", snapshot.overruns.to_string()),
        ("jitter_p50_us", format!("{:.0}", snapshot.jitter_p50_us)),
        ("jitter_p99_us", format!("{:.0}", snapshot.jitter_p99_us)),
        ("jitter_max_us", format!("{:.1}", snapshot.jitter_max_us)),
        ("rms_error_m", format!("{:.6}", snapshot.rms_error_m)),
        ("sensor_readings", snapshot.sensor_readings.to_string()),
        ("starved_cycles", snapshot.starved_cycles.to_string()),
    ];
    status.set(level, message, values);
}

/// Why a segment was not appended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SegmentError {
    #[error("point {index}: {reason}")]
    Point { index: usize, reason: String },
}

/// Turns a trajectory segment into samples that continue after `last` (the last sample fed, at
/// time `last.t`): each point's time_from_start counts from there and must grow, every value
/// must be finite and every point reachable. Each point needs one transform; velocities and
/// accelerations default to zero.
pub fn segment_after(points: &[MultiDofPoint], last: &Waypoint, robot: &Robot) -> Result<Vec<Waypoint>, SegmentError> {
    let mut samples = Vec::with_capacity(points.len());
    let mut previous = (last.t, robot.inverse_kinematics(&last.x, None).ok());
    for (index, point) in points.iter().enumerate() {
        let fail = |reason: String| SegmentError::Point { index, reason };
        let [translation] = point.translations.as_slice() else {
            return Err(fail(format!("{} transforms; one is expected", point.translations.len())));
        };
        let first_or_zero = |values: &[[f64; 3]]| values.first().map_or(Vec3::zeros(), |v| Vec3::from(*v));
        let sample = Waypoint {
            t: last.t + point.time_from_start_s,
            x: Vec3::from(*translation),
            xd: first_or_zero(&point.linear_velocities),
            xdd: first_or_zero(&point.linear_accelerations),
        };
        let finite = [sample.x, sample.xd, sample.xdd].iter().all(|v| v.iter().all(|c| c.is_finite()));
        if !(finite && sample.t.is_finite()) {
            return Err(fail("a value is not finite".into()));
        }
        if !(sample.t > previous.0) {
            return Err(fail(format!("time {} s is not after {} s", sample.t, previous.0)));
        }
        let theta =
            robot.inverse_kinematics(&sample.x, previous.1.as_ref()).map_err(|error| fail(error.to_string()))?;
        previous = (sample.t, Some(theta));
        samples.push(sample);
    }
    Ok(samples)
}
