//! legacy_bridge without ROS: its parameters (here), what it publishes ([`publisher`]), and the
//! server's sessions recorded into bags or a live view ([`recording`]).

pub mod publisher;
pub mod recording;

use std::collections::BTreeMap;

use serde::Deserialize;

use super::param_server::ParamSpec;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::bridge::legacy::{HilSetup, LegacyServerConfig};
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::HilConfig;
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "legacy_bridge";

/// legacy_bridge's own parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LegacyBridgeSettings {
    /// Frames published per second of each session's time [Hz]. Default 250.
    pub publish_rate_hz: f64,
    /// Hardware for `H` sessions: "" (refuse them), "sim" or "robotscara". Default "".
    pub hil_hardware: String,
    /// Frame of the published points. Default base_link.
    pub frame_id: String,
}

impl Default for LegacyBridgeSettings {
    fn default() -> Self {
        LegacyBridgeSettings { publish_rate_hz: 250.0, hil_hardware: String::new(), frame_id: "base_link".into() }
    }
}

/// How `ros2 param` sees legacy_bridge's parameters: all are read at start.
pub const LEGACY_BRIDGE_PARAMS: [ParamSpec; 4] = [
    ParamSpec::read_only(
        "publish_rate_hz",
        "session frames republished per second of session time [Hz] (read at start)",
    ),
    ParamSpec::read_only(
        "hil_hardware",
        "hardware for H sessions: empty refuses them, sim or robotscara (read at start)",
    ),
    ParamSpec::read_only("frame_id", "frame of the published points (read at start)"),
    ParamSpec::read_only(
        "server.",
        "the port-5555 server: bind address, timeouts, limits, device allow-list (read at start)",
    ),
];

/// Everything legacy_bridge is configured by.
#[derive(Debug, Clone)]
pub struct LegacyBridgeConfig {
    pub sil: SilConfig,
    pub server: LegacyServerConfig,
    pub hil: Option<HilSetup>,
    pub settings: LegacyBridgeSettings,
}

/// The groups beside the SIL sections: the server's port and limits and the HIL hardware's.
const GROUPS: [&str; 4] = ["server", "hil", "stepper", "rig"];

/// Reads legacy_bridge's parameters: the SIL sections, `server.*` (bind, timeouts, limits,
/// device allow-list), `hil.*`, `stepper.*`, `rig.*`, and the node's own.
pub fn legacy_bridge_config(params: &BTreeMap<String, ParamValue>) -> Result<LegacyBridgeConfig, ParamError> {
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    let sil: SilConfig = read_group(&only_groups(params, &SilConfig::SECTIONS), "")?;
    sil.validate().map_err(|error| invalid(error.to_string()))?;
    let server: LegacyServerConfig = read_group(params, "server")?;
    server.validate().map_err(invalid)?;
    let groups: Vec<&str> = SilConfig::SECTIONS.iter().chain(&GROUPS).copied().collect();
    let settings: LegacyBridgeSettings = read_group(&without_groups(params, &groups), "")?;
    if !(settings.publish_rate_hz > 0.0) {
        return Err(invalid(format!("publish_rate_hz must be > 0, got {}", settings.publish_rate_hz)));
    }
    let kind = match settings.hil_hardware.as_str() {
        "" => None,
        "sim" => Some(RigKind::Sim),
        "robotscara" => Some(RigKind::Robotscara),
        other => return Err(invalid(format!("hil_hardware must be \"\", \"sim\" or \"robotscara\", got {other:?}"))),
    };
    let hil = match kind {
        None => None,
        Some(kind) => {
            let hil: HilConfig = read_group(params, "hil")?;
            hil.validate().map_err(invalid)?;
            let stepper: StepperConfig = read_group(params, "stepper")?;
            let rig: RigConfig = read_group(params, "rig")?;
            Some(HilSetup { kind, hil, settings: RigSettings { stepper, rig } })
        }
    };
    Ok(LegacyBridgeConfig { sil, server, hil, settings })
}
