//! Device drivers: the I/O side of the rigs, behind the interfaces of [`crate::hil`].

pub mod rdscom;
mod rdscom_link;
pub mod robotscara;
pub mod stm32;
mod stm32_limits;
mod stm32_link;

use serde::{Deserialize, Serialize};

use crate::control::Waypoint;
use crate::hil::stepper::StepperConfig;
use crate::hil::{Hardware, HardwareError, SimulatedRig};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::serial::detect::{find, DeviceKind};
use crate::sim::SilConfig;
use robotscara::{ReferenceRig, RigConfig};

/// A serial link's settings as (name, value, range), the names as the node's parameters give them
/// under `link.`: the first outside its range is refused, as an invalid input. A duration out of
/// range would panic the driver's thread (negative, endless or not a number) or spin it (none
/// between two heartbeats, say): both run at a real-time priority.
fn check_link_settings(settings: &[(&str, f64, std::ops::RangeInclusive<f64>)]) -> std::io::Result<()> {
    match settings.iter().find(|(_, value, range)| !range.contains(value)) {
        Some((name, value, range)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("link.{name} {value} outside {} - {}", range.start(), range.end()),
        )),
        None => Ok(()),
    }
}

/// The hardware behind a HIL run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RigKind {
    /// The simulated plant and sensor, stepped in real time.
    Sim,
    /// The lab's rig (docs/rig.md): angle sensor and step-driver Arduino on serial ports.
    Robotscara,
}

impl RigKind {
    /// The settings measured best for this hardware, as (section, key, value), for a
    /// configuration that does not set them: on the emulated rig the steppers hold the arm
    /// stiffly, and a smoother estimator (sigma_a 0.5 m/s^2, not the simulator's 2) tracked
    /// within 0.6 - 0.8 mm RMS against 1.1 - 2.4 (docs/decisions.md). The simulated plant keeps the
    /// simulator's own.
    pub fn measured_defaults(self) -> &'static [(&'static str, &'static str, f64)] {
        match self {
            RigKind::Sim => &[],
            RigKind::Robotscara => &[("estimator", "sigma_a", 0.5)],
        }
    }
}

/// Device paths of the lab's rig; `arduino` may be `auto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RigDevices {
    pub sensor: String,
    pub arduino: String,
}

/// Settings of the lab's rig's devices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RigSettings {
    pub stepper: StepperConfig,
    pub rig: RigConfig,
}

/// Opens the hardware for a run that starts at rest on `start`, with the forearm's elbow at
/// `elbow` [m] (the simulated sensor sits there).
pub fn open_hardware(
    kind: RigKind,
    devices: &RigDevices,
    settings: &RigSettings,
    sil: &SilConfig,
    start: &Waypoint,
    elbow: Vec3,
) -> Result<Box<dyn Hardware>, HardwareError> {
    match kind {
        RigKind::Sim => {
            let robot = Robot::new(sil.robot.clone()).map_err(|error| HardwareError::Plant(error.to_string()))?;
            Ok(Box::new(SimulatedRig::new(robot, sil, start, elbow)?))
        }
        RigKind::Robotscara => {
            let arduino = match devices.arduino.as_str() {
                "auto" => find(DeviceKind::RigArduino, Some(&devices.sensor))
                    .map_err(|error| HardwareError::Link(error.to_string()))?
                    .to_string_lossy()
                    .into_owned(),
                path => path.to_owned(),
            };
            log::info!("reference rig: sensor {}, Arduino {arduino}", devices.sensor);
            Ok(Box::new(ReferenceRig::connect(&devices.sensor, &arduino, &settings.rig, settings.stepper.clone())?))
        }
    }
}
