//! sil_node without ROS: its parameters (here), its run loop ([`run`]), which paces the
//! simulator to the real-time factor and hands every frame on, and its publisher
//! ([`publisher`]), which decides what of it goes out.

pub mod publisher;
pub mod run;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::param_server::{ParamRange, ParamSpec};
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "sil_node";

/// sil_node's own parameters (the SIL configuration's sections sit beside them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SilNodeSettings {
    /// Simulated seconds per wall-clock second; 0 runs as fast as possible. Default 1.
    pub real_time_factor: f64,
    /// Samples published per simulated second [Hz]. Default 250.
    pub publish_rate_hz: f64,
    /// Publish /clock from simulated time (and stamp messages with it). Default false.
    pub publish_clock: bool,
    /// Trajectory CSV run at start; empty runs the built-in arc. Default empty.
    pub trajectory_file: String,
    /// Start the trajectory again when it ends. Default false.
    #[serde(rename = "loop")]
    pub repeat: bool,
    /// Frame of every published point and path. Default base_link.
    pub frame_id: String,
}

impl Default for SilNodeSettings {
    fn default() -> Self {
        SilNodeSettings {
            real_time_factor: 1.0,
            publish_rate_hz: 250.0,
            publish_clock: false,
            trajectory_file: String::new(),
            repeat: false,
            frame_id: "base_link".into(),
        }
    }
}

/// How `ros2 param` sees sil_node's parameters: the pacing and publishing settings apply at
/// once; the simulation's sections and the start-up settings are read at start.
pub const SIL_NODE_PARAMS: [ParamSpec; 12] = [
    ParamSpec::runtime(
        "real_time_factor",
        "simulated seconds per wall-clock second; 0 runs as fast as possible",
        Some(ParamRange::Double { from: 0.0, to: 1000.0 }),
    ),
    ParamSpec::runtime(
        "publish_rate_hz",
        "samples published per simulated second [Hz]",
        Some(ParamRange::Double { from: 0.1, to: 10000.0 }),
    ),
    ParamSpec::runtime("loop", "start the trajectory again when it ends", None),
    ParamSpec::read_only("publish_clock", "publish /clock from simulated time (read at start)"),
    ParamSpec::read_only("trajectory_file", "trajectory CSV run at start; empty runs the built-in arc (read at start)"),
    ParamSpec::read_only("frame_id", "frame of every published point and path (read at start)"),
    ParamSpec::read_only("robot.", "robot model, SI units (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("controller.", "task-space PID and inverse dynamics (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("estimator.", "Kalman filter and range-bias estimator (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("sensor.", "simulated angle sensor (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("integrator.", "adaptive Bogacki-Shampine integrator (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only(
        "run.",
        "frame cap, divergence threshold and the frames' uniform grid frame_rate_hz (read at start; see examples/sil.yaml)",
    ),
];

impl SilNodeSettings {
    /// Applies a parameter set while the node runs (the names of [`SIL_NODE_PARAMS`] that are
    /// `runtime`); a value out of its domain is refused with the reason.
    pub fn apply(&mut self, name: &str, value: &ParamValue) -> Result<(), String> {
        match (name, value) {
            ("real_time_factor", ParamValue::Double(factor)) if *factor >= 0.0 => self.real_time_factor = *factor,
            ("publish_rate_hz", ParamValue::Double(rate)) if *rate > 0.0 => self.publish_rate_hz = *rate,
            ("loop", ParamValue::Bool(repeat)) => self.repeat = *repeat,
            ("real_time_factor", _) => return Err(format!("must be a number >= 0, got {value:?}")),
            ("publish_rate_hz", _) => return Err(format!("must be a number > 0, got {value:?}")),
            _ => return Err(format!("{name} is not applied while the node runs")),
        }
        Ok(())
    }
}

/// Reads sil_node's parameters: the SIL sections (`robot.*`, `controller.*`, ...) and the node's
/// own. Unknown names are refused, so a typo does not silently fall back to a default.
pub fn sil_node_config(params: &BTreeMap<String, ParamValue>) -> Result<(SilConfig, SilNodeSettings), ParamError> {
    let sil: SilConfig = read_group(&only_groups(params, &SilConfig::SECTIONS), "")?;
    sil.validate().map_err(|error| ParamError::Invalid { prefix: String::new(), message: error.to_string() })?;
    let settings: SilNodeSettings = read_group(&without_groups(params, &SilConfig::SECTIONS), "")?;
    if !(settings.real_time_factor >= 0.0 && settings.publish_rate_hz > 0.0) {
        return Err(ParamError::Invalid {
            prefix: String::new(),
            message: format!(
                "real_time_factor must be >= 0 and publish_rate_hz > 0, got {} and {}",
                settings.real_time_factor, settings.publish_rate_hz
            ),
        });
    }
    Ok((sil, settings))
}
