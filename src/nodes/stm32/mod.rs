//! stm32_driver without ROS: parameters, telemetry to joint states and IMU data, joint targets
//! and parameter changes to commands, and the arm as the managed node drives it ([`Stm32Arm`]).

pub mod topics;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use self::topics::Stm32Topics;
use crate::drivers::stm32::{
    validate_command, ArmTelemetry, DriverEvent, LinkEvent, LinkState, Stm32Commander, Stm32Config, Stm32Driver,
    ANGLE_LIMIT,
};
use crate::nodes::declare::node_parameters;
use crate::nodes::follower::{self, Constraints, Follower, GoalLimits};
use crate::nodes::link_health::LinkReport;
use crate::nodes::managed_driver::SerialDevice;
use crate::nodes::param_server::ParamRange;
use crate::nodes::params::{read_group, without_groups, ParamError, ParamValue};
use crate::nodes::topics::serial_device::SerialDeviceTopics;
use crate::protocol::stm32::{Command, ControlMode, Joint, PidGains};
use crate::serial::detect::{resolve_port, DeviceKind};

/// The node's name, which its private topics are under.
pub const NODE: &str = "stm32_driver";

/// The node's link status on /diagnostics.
pub const LINK_STATUS: &str = "stm32_driver: link";

/// PID gains of one joint, as parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GainParams {
    pub kp: f64,
    pub ki: f64,
    pub kd: f64,
}

impl Default for GainParams {
    /// The firmware's own gains are not known; these sit inside the documented ranges.
    fn default() -> Self {
        GainParams { kp: 2.0, ki: 0.1, kd: 0.1 }
    }
}

impl GainParams {
    fn wire(&self) -> PidGains {
        PidGains { kp: self.kp as f32, ki: self.ki as f32, kd: self.kd as f32 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PidParams {
    pub shoulder: GainParams,
    pub elbow: GainParams,
}

const KP: ParamRange = ParamRange::Double { from: 0.0, to: 10.0 };
const KI: ParamRange = ParamRange::Double { from: 0.0, to: 1.0 };
const KD: ParamRange = ParamRange::Double { from: 0.0, to: 2.0 };

node_parameters! {
    /// stm32_driver's parameters: gains and mode are sent to the firmware when set (see
    /// [`command_for_parameter`]); the rest is read at start.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Stm32NodeConfig, STM32_NODE_PARAMS {
        runtime mode: String = "position".into()
            => "control mode sent to the firmware at start and when set: idle, position or trajectory";
        group pid: PidParams = PidParams::default() => "gains sent to the firmware at start and when set";
        read_only port: String = "auto".into()
            => "serial device of the NUCLEO (its ST-LINK), or auto: found by USB id (never another device's)";
        section link: Stm32Config = Stm32Config::default()
            => "serial link: baud, poll_mode, poll_rate_hz, imu_units, timeouts";
        read_only joint_names: Vec<String> = vec!["stm32_shoulder".into(), "stm32_elbow".into()]
            => "names of the shoulder and elbow in /joint_states (urdf/stm32_arm.urdf's)";
        read_only imu_frame_id: String = "stm32_imu_link".into() => "frame of ~/imu";
        read_only autostart: bool = false
            => "configure and activate at start (the launch files set it); else the node waits unconfigured";
        read_only auto_recover: bool = false
            => "after a device fault, configure and activate again once a second until the device is back";
        section constraints: Constraints = Constraints::default()
            => "~/follow_joint_trajectory's default tolerances: goal_time [s], goal and trajectory [rad] per joint, stopped_velocity_tolerance [rad/s]";
        section goal_limits: GoalLimits = GoalLimits::default()
            => "~/follow_joint_trajectory's bounds on a goal: max_points, max_duration_s [s] from its receipt";
        read_only ros2_control: bool = false
            => "commanded by ros2_control's topic-based hardware (control:=ros2_control sets it): ~/joint_command is its stream, whose initial values are not followed";
    }
    entries {
        runtime "pid.shoulder.kp", range(KP) => "shoulder proportional gain, sent to the firmware",
        runtime "pid.shoulder.ki", range(KI) => "shoulder integral gain, sent to the firmware",
        runtime "pid.shoulder.kd", range(KD) => "shoulder derivative gain, sent to the firmware",
        runtime "pid.elbow.kp", range(KP) => "elbow proportional gain, sent to the firmware",
        runtime "pid.elbow.ki", range(KI) => "elbow integral gain, sent to the firmware",
        runtime "pid.elbow.kd", range(KD) => "elbow derivative gain, sent to the firmware",
    }
}

fn mode(name: &str) -> Result<ControlMode, String> {
    match name {
        "idle" => Ok(ControlMode::Idle),
        "position" => Ok(ControlMode::Position),
        "trajectory" => Ok(ControlMode::Trajectory),
        other => Err(format!("mode must be idle, position or trajectory, got {other:?}")),
    }
}

impl Stm32NodeConfig {
    /// The commands that bring the firmware to this configuration: gains, then mode.
    pub fn setup_commands(&self) -> Result<Vec<Command>, String> {
        let gains = Command::SetPidGains { shoulder: self.pid.shoulder.wire(), elbow: self.pid.elbow.wire() };
        validate_command(&gains).map_err(|error| format!("pid: {error}"))?;
        Ok(vec![gains, Command::SetMode(mode(&self.mode)?)])
    }
}

/// Reads stm32_driver's parameters; unknown names are refused.
pub fn stm32_node_config(params: &BTreeMap<String, ParamValue>) -> Result<Stm32NodeConfig, ParamError> {
    let own = without_groups(params, &[]);
    let config: Stm32NodeConfig = read_group(&own, "")?;
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    if config.joint_names.len() != 2 {
        return Err(invalid(format!("joint_names must name 2 joints, got {}", config.joint_names.len())));
    }
    config.setup_commands().map_err(invalid)?;
    follower(&config).map_err(invalid)?;
    Ok(config)
}

/// The fastest the servos may be asked to turn [rad/s], urdf/stm32_arm.urdf's velocity limit.
pub const MAX_VELOCITY_RAD_S: f64 = 6.0;

/// The follower of `~/follow_joint_trajectory`: the shoulder and elbow within the firmware's
/// angle limits and the servos' speed (urdf/stm32_arm.urdf's), with the node's constraints and
/// goal limits.
pub fn follower(config: &Stm32NodeConfig) -> Result<Follower, String> {
    let joints = follower::Joints {
        names: config.joint_names.clone(),
        lower: vec![-ANGLE_LIMIT; 2],
        upper: vec![ANGLE_LIMIT; 2],
        max_velocity: vec![MAX_VELOCITY_RAD_S; 2],
    };
    config.goal_limits.validate()?;
    Ok(Follower::new(joints, config.constraints.tolerances(2)?, config.goal_limits.clone()))
}

/// The joints' state in `event`, for the follower: telemetry with angles, and velocities where
/// it has them (the short telemetry has not: the follower estimates them).
pub fn follower_state(event: &DriverEvent) -> Option<follower::JointState> {
    let DriverEvent::Link(LinkEvent::Telemetry(telemetry)) = event else { return None };
    let positions = telemetry.angles?;
    Some(follower::JointState {
        positions: positions.to_vec(),
        velocities: telemetry.velocities.map_or_else(Vec::new, |velocities| velocities.to_vec()),
    })
}

/// The follower's setpoint (shoulder, elbow) [rad] as the command that moves both joints, each
/// angle the wire's nearest within the firmware's limits (the nearest f32 to pi/2 lies past
/// pi/2: a setpoint at the limit would be refused).
pub fn angles_command(positions: &[f64]) -> Command {
    let wire = |angle: f64| {
        let near = angle.clamp(-ANGLE_LIMIT, ANGLE_LIMIT) as f32;
        match f64::from(near).abs() > ANGLE_LIMIT {
            true => near - near.signum() * f32::EPSILON,
            false => near,
        }
    };
    Command::SetJointAngles { shoulder: wire(positions[0]), elbow: wire(positions[1]) }
}

/// Roll and pitch [rad] (yaw unknown, taken as 0) as a quaternion (x, y, z, w):
/// q = Ry(pitch) Rx(roll), the REP-103 body orientation.
pub fn imu_orientation(roll: f64, pitch: f64) -> [f64; 4] {
    let rotation = nalgebra::UnitQuaternion::from_euler_angles(roll, pitch, 0.0);
    [rotation.i, rotation.j, rotation.k, rotation.w]
}

/// The IMU orientation's covariance (row-major, rad^2): roll and pitch are the firmware's
/// fusion, yaw is not measured, so its variance is huge.
pub const IMU_ORIENTATION_COVARIANCE: [f64; 9] = [1e-3, 0.0, 0.0, 0.0, 1e-3, 0.0, 0.0, 0.0, 1e6];

/// What a driver event tells of the link's health (/diagnostics "stm32_driver: link").
pub fn track_link(health: &mut LinkReport, event: &DriverEvent) {
    match event {
        DriverEvent::Link(LinkEvent::Telemetry(_)) => health.packets += 1,
        DriverEvent::Link(LinkEvent::StateChanged { to, .. }) => health.changed(*to),
        DriverEvent::Link(LinkEvent::Resent { .. }) => health.resends += 1,
        DriverEvent::Link(LinkEvent::BadPacket(_) | LinkEvent::Implausible { .. }) => health.bad_packets += 1,
        DriverEvent::Link(LinkEvent::CommandFailed { command, reason }) => {
            health.failed_request(format!("command 0x{command:02x}: {reason}"))
        }
        DriverEvent::PortUnavailable { reason, .. } => health.port_error(reason.clone()),
        _ => {}
    }
}

/// The two joints' state from telemetry: (positions, velocities), when the telemetry has them.
pub fn joint_state(telemetry: &ArmTelemetry) -> Option<([f64; 2], [f64; 2])> {
    telemetry.angles.map(|angles| (angles, telemetry.velocities.unwrap_or([0.0; 2])))
}

/// Joint targets from a JointState's names and positions: both joints move together when both
/// are named, one alone otherwise.
pub fn targets_from_joint_state(
    names: &[String],
    positions: &[f64],
    joint_names: &[String],
) -> Result<Command, String> {
    if names.len() != positions.len() {
        return Err(format!("{} names but {} positions", names.len(), positions.len()));
    }
    crate::nodes::each_named_once(names)?;
    let find = |joint: &String| names.iter().position(|name| name == joint).map(|index| positions[index] as f32);
    let command = match (find(&joint_names[0]), find(&joint_names[1])) {
        (Some(shoulder), Some(elbow)) => Command::SetJointAngles { shoulder, elbow },
        (Some(angle), None) => Command::SetJointAngleSingle { joint: Joint::Shoulder, angle },
        (None, Some(angle)) => Command::SetJointAngleSingle { joint: Joint::Elbow, angle },
        (None, None) => return Err(format!("names none of {joint_names:?}")),
    };
    validate_command(&command).map_err(|error| error.to_string())?;
    Ok(command)
}

/// The command a changed parameter calls for, if any: `pid.*` sends the gains, `mode` the mode.
/// Neither changes while a goal or trajectory is `followed`: the motion it was checked for would
/// no longer be the one the servos make.
pub fn command_for_parameter(
    config: &mut Stm32NodeConfig,
    name: &str,
    value: &ParamValue,
    followed: bool,
) -> Result<Option<Command>, String> {
    if followed && (name == "mode" || name.starts_with("pid.")) {
        return Err(format!("{name} does not change while a goal or ~/joint_trajectory is followed: cancel it first"));
    }
    let number = || match value {
        ParamValue::Double(value) => Ok(*value),
        ParamValue::Integer(value) => Ok(*value as f64),
        _ => Err(format!("{name} must be a number")),
    };
    let gains = |config: &mut Stm32NodeConfig, joint: &str, gain: &str, value: f64| {
        let target = if joint == "shoulder" { &mut config.pid.shoulder } else { &mut config.pid.elbow };
        match gain {
            "kp" => target.kp = value,
            "ki" => target.ki = value,
            _ => target.kd = value,
        }
    };
    match name.split('.').collect::<Vec<_>>().as_slice() {
        ["pid", joint @ ("shoulder" | "elbow"), gain @ ("kp" | "ki" | "kd")] => {
            let mut changed = config.clone();
            gains(&mut changed, joint, gain, number()?);
            let command = changed.setup_commands()?.remove(0);
            *config = changed;
            Ok(Some(command))
        }
        ["mode"] => {
            let mut changed = config.clone();
            changed.set(name, value)?;
            let command = Command::SetMode(mode(&changed.mode)?);
            *config = changed;
            Ok(Some(command))
        }
        _ => Ok(None),
    }
}

/// The arm on its port as a managed node drives it, with the gains and mode the parameters hold
/// now: configure waits for telemetry; activate sends the gains and mode; deactivate holds the
/// joints where the latest telemetry puts them.
pub struct Stm32Arm {
    pub port: String,
    pub link: Stm32Config,
    pub config: Arc<Mutex<Stm32NodeConfig>>,
    /// The joints' angles in the latest telemetry [rad]: where deactivate holds them.
    pub angles: Mutex<Option<[f64; 2]>>,
}

impl SerialDevice for Stm32Arm {
    type Driver = Stm32Driver;
    type Commander = Stm32Commander;
    type Event = DriverEvent;
    type Topics = SerialDeviceTopics<Stm32Topics>;

    fn open(&self) -> std::io::Result<Stm32Driver> {
        let port = resolve_port(&self.port, DeviceKind::Stm32)?;
        Stm32Driver::start(&port.to_string_lossy(), self.link.clone())
    }

    fn events(driver: &Stm32Driver) -> &Receiver<DriverEvent> {
        driver.events()
    }

    fn commander(driver: &Stm32Driver) -> Stm32Commander {
        driver.commander()
    }

    fn close(driver: Stm32Driver) {
        driver.stop();
    }

    fn answered(event: &DriverEvent) -> bool {
        matches!(event, DriverEvent::Link(LinkEvent::Telemetry(_)))
    }

    fn unavailable(event: &DriverEvent) -> Option<String> {
        event.port_unavailable()
    }

    fn lost(event: &DriverEvent) -> Option<String> {
        match event {
            DriverEvent::Link(LinkEvent::StateChanged { to: LinkState::Disconnected, .. }) => {
                Some("the STM32 stopped answering".to_owned())
            }
            DriverEvent::PortUnavailable { path, reason, .. } => Some(format!("port {path}: {reason}")),
            _ => None,
        }
    }

    fn log(&self, event: &DriverEvent) {
        match event {
            DriverEvent::Link(LinkEvent::StateChanged { to, .. }) => log::info!("link {to:?}"),
            DriverEvent::Link(LinkEvent::CommandFailed { command, reason }) => {
                log::error!("command 0x{command:02x} failed: {reason}")
            }
            DriverEvent::PortUnavailable { path, reason, .. } => log::warn!("port {path}: {reason}"),
            _ => {}
        }
    }

    /// Nothing to ask: the driver polls telemetry.
    fn configured(&self, _: &Stm32Commander) -> Result<(), String> {
        Ok(())
    }

    /// The gains and mode of the parameters, before any target.
    fn activate(&self, commander: &Stm32Commander) -> Result<(), String> {
        let setup = self.config.lock().map_err(|_| "parameters unavailable".to_owned())?.setup_commands()?;
        setup.into_iter().try_for_each(|command| commander.send(command).map_err(|error| error.to_string()))
    }

    fn heard(&self, event: &DriverEvent) {
        let Some(state) = follower_state(event) else { return };
        if let (Ok(mut angles), &[shoulder, elbow]) = (self.angles.lock(), state.positions.as_slice()) {
            *angles = Some([shoulder, elbow]);
        }
    }

    /// The joints' targets where they are now, so that a target still to be reached is not
    /// (in position mode the servos hold their last target; the driver's telemetry polls keep
    /// the firmware's watchdog fed). Nothing known of them yet: nothing to send.
    fn deactivate(&self, commander: &Stm32Commander) -> Result<(), String> {
        let angles = self.angles.lock().ok().and_then(|angles| *angles);
        match angles {
            Some(angles) => commander.send(angles_command(&angles)).map_err(|error| error.to_string()),
            None => Ok(()),
        }
    }
}
