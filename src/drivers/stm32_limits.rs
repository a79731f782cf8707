//! What the STM32's firmware accepts (docs/stm32.md): the joints' angles and the PID gains, checked
//! before anything is sent, so that no command goes out that the firmware would refuse.

use crate::protocol::stm32::{Command, PidGains};

/// A command refused before it was sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    #[error("{what} = {value:?} is outside [{min}, {max}]")]
    OutOfRange { what: &'static str, value: f64, min: f64, max: f64 },
    #[error("{queued} packets are waiting for the wire: a command flood is refused")]
    Busy { queued: usize },
    #[error("a servo mode needs the joints' angles from telemetry at most 0.5 s old, to hold them there first")]
    NothingToHold,
}

/// The protocol's limits (docs/stm32.md): the joints' angle either way [rad], the gains.
pub const ANGLE_LIMIT: f64 = std::f64::consts::FRAC_PI_2;
/// The farthest a shutdown's hold goes: its f32 stays within [`ANGLE_LIMIT`] [rad].
pub(super) const HOLD_LIMIT: f64 = ANGLE_LIMIT - 1e-6;
const KP_MAX: f64 = 10.0;
const KI_MAX: f64 = 1.0;
const KD_MAX: f64 = 2.0;

fn check(what: &'static str, value: f32, min: f64, max: f64) -> Result<(), CommandError> {
    let value = f64::from(value);
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(CommandError::OutOfRange { what, value, min, max })
    }
}

fn check_gains(gains: &PidGains) -> Result<(), CommandError> {
    check("kp", gains.kp, 0.0, KP_MAX)?;
    check("ki", gains.ki, 0.0, KI_MAX)?;
    check("kd", gains.kd, 0.0, KD_MAX)
}

/// Refuses targets outside [-pi/2, pi/2] and gains outside the documented ranges.
pub fn validate_command(command: &Command) -> Result<(), CommandError> {
    let angle = |what, value| check(what, value, -ANGLE_LIMIT, ANGLE_LIMIT);
    match command {
        Command::SetJointAngles { shoulder, elbow } | Command::SetTrajectoryPoint { shoulder, elbow, .. } => {
            angle("shoulder angle", *shoulder).and_then(|()| angle("elbow angle", *elbow))
        }
        Command::SetJointAngleSingle { angle: value, .. } => angle("joint angle", *value),
        Command::SetPidGains { shoulder, elbow } => check_gains(shoulder).and_then(|()| check_gains(elbow)),
        Command::SetPidGainsSingle { gains, .. } => check_gains(gains),
        Command::GetTelemetry
        | Command::SystemReset
        | Command::CalibrateImu
        | Command::SetMode(_)
        | Command::Debug(_) => Ok(()),
    }
}
