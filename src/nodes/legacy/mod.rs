//! legacy_bridge without ROS: its parameters (here), what it publishes ([`publisher`]), and the
//! server's sessions recorded into bags or a live view ([`recording`]).

pub mod publisher;
pub mod recording;

use std::collections::BTreeMap;

use serde::Deserialize;

use super::declare::node_parameters;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::bridge::legacy::{HilSetup, LegacyServerConfig};
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::HilConfig;
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "legacy_bridge";

node_parameters! {
    /// legacy_bridge's own parameters: all are read at start.
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    pub struct LegacyBridgeSettings, LEGACY_BRIDGE_PARAMS {
        read_only publish_rate_hz: f64 = 250.0 => "session frames republished per second of session time [Hz]";
        read_only hil_hardware: String = String::new()
            => "hardware for H sessions: empty refuses them, sim or robotscara";
        read_only frame_id: String = "base_link".into() => "frame of the published points";
    }
    sections {
        "server." => "the port-5555 server: bind address, timeouts, limits, device allow-list",
    }
}

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
