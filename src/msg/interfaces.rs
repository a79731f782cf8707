//! The package's own interfaces (`msg/`, `action/`) as plain structs, without ROS. How library
//! data becomes them is beside the topics that publish them (`crate::nodes::topics`).
//!
//! Each struct mirrors its .msg file field for field, in order and with the same types, so its
//! CDR ([`super::cdr`]) is the message ROS sends: the nodes publish these structs
//! serialised, and take action goals through them. `tests/interfaces.rs` parses every file in
//! `msg/` and `action/` and checks it against its struct.

use serde::{Deserialize, Serialize};

use super::standard::{self as msgs, Header, Vector3};
use super::{MsgDef, RosMessage};

/// A struct that mirrors one of the package's interface definitions.
pub trait Interface: Serialize {
    /// The full type name, `arm_hil/msg/Type` (`arm_hil/action/Type_Goal` for an action's parts).
    const TYPE: &'static str;
}

macro_rules! interface {
    ($type:ident, $name:literal) => {
        impl Interface for $type {
            const TYPE: &'static str = $name;
        }
    };
}

/// The package's messages go out as the nodes publish them: the schema is the .msg file itself
/// (then the types it uses), and the hash is rosidl's for it (tests/interfaces.rs works the
/// hash out from the file and compares).
macro_rules! published {
    ($type:ident, $hash:literal, uses $($uses:ident),*) => {
        impl RosMessage for $type {
            const DEF: &'static MsgDef = &MsgDef::new(
                $type::TYPE,
                include_str!(concat!("../../msg/", stringify!($type), ".msg")),
                &[$(&msgs::$uses),*],
            );
            const TYPE_HASH: &'static str = $hash;
        }
    };
}

/// arm_hil/msg/ArmState: a port-5555 frame's 16 values, its reference sample and the tracking error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ArmState {
    pub header: Header,
    /// Time on the trajectory's axis [s].
    pub time: f64,
    /// [m]
    pub position: Vector3,
    /// [m/s]
    pub velocity: Vector3,
    /// [rad]
    pub joint_positions: [f64; 3],
    /// [rad/s]
    pub joint_velocities: [f64; 3],
    /// [N m]
    pub joint_efforts: [f64; 3],
    /// [m]
    pub reference_position: Vector3,
    /// [m/s]
    pub reference_velocity: Vector3,
    /// reference_position - position [m].
    pub tracking_error: Vector3,
    /// [m]
    pub tracking_error_norm: f64,
}
interface!(ArmState, "arm_hil/msg/ArmState");
published!(ArmState, "RIHS01_54f2078895d07a8a15609ebc77050a52a3e554512d9cd1d64e5b24912c12b4b6", uses HEADER, POINT, VECTOR3);

/// arm_hil/msg/LoopStatistics: hil_node's loop since it started. Durations in seconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoopStatistics {
    pub header: Header,
    pub rate_hz: f64,
    pub cycles: u64,
    pub overruns: u64,
    /// [s]
    pub longest_overrun: f64,
    pub skipped_periods: u64,
    /// [s]
    pub jitter_p50: f64,
    /// [s]
    pub jitter_p99: f64,
    /// [s]
    pub jitter_max: f64,
    pub sensor_readings: u64,
    pub starved_cycles: u64,
    /// [m]
    pub rms_error: f64,
    /// [m]
    pub max_error: f64,
    pub error_from_truth: bool,
}
interface!(LoopStatistics, "arm_hil/msg/LoopStatistics");
published!(LoopStatistics, "RIHS01_5d6698e50c229a5c8c271cddee54c1e581df6a72533222c484d80e248ba2d4d7", uses HEADER);

/// arm_hil/msg/LinkHealth: a driver's serial link.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkHealth {
    pub header: Header,
    /// One of the `STATE_` constants.
    pub state: u8,
    pub packets: u64,
    pub bad_packets: u64,
    pub resends: u64,
    pub failed_requests: u64,
    pub reconnects: u64,
    pub last_error: String,
}
interface!(LinkHealth, "arm_hil/msg/LinkHealth");
published!(LinkHealth, "RIHS01_86741c19fed133607f8b18777598945468a2c2710edba529922388cda2aba82c", uses HEADER);

impl LinkHealth {
    pub const STATE_WAITING: u8 = 0;
    pub const STATE_CONNECTED: u8 = 1;
    pub const STATE_DEGRADED: u8 = 2;
    pub const STATE_DISCONNECTED: u8 = 3;
    pub const STATE_FAILED: u8 = 4;
}

/// arm_hil/msg/Stm32Telemetry: one telemetry packet in SI units.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stm32Telemetry {
    pub header: Header,
    /// [s]
    pub device_time: f64,
    pub device_time_valid: bool,
    pub has_angles: bool,
    pub has_imu: bool,
    /// Shoulder, elbow [rad].
    pub joint_positions: [f64; 2],
    /// Shoulder, elbow [rad/s].
    pub joint_velocities: [f64; 2],
    /// [m/s^2]
    pub linear_acceleration: Vector3,
    /// [rad/s]
    pub angular_velocity: Vector3,
    /// [rad]
    pub roll: f64,
    /// [rad]
    pub pitch: f64,
}
interface!(Stm32Telemetry, "arm_hil/msg/Stm32Telemetry");
published!(Stm32Telemetry, "RIHS01_682b9bfae8a2ff9c3facfdbe440087e9573cb4fa2010a2173117ba5bb7218952", uses HEADER, VECTOR3);

/// arm_hil/msg/MotorEvent: rdscom MotorEvent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MotorEvent {
    pub header: Header,
    pub motor_id: u8,
    pub success: bool,
    pub event_type: u8,
    pub event_value: f64,
    pub num_in_queue: u8,
    pub executed_with_count: u8,
}
interface!(MotorEvent, "arm_hil/msg/MotorEvent");
published!(MotorEvent, "RIHS01_98b047a33ceb13fb0cfb7d74a1b8342b062a9239544507649bd9f94793afb8fe", uses HEADER);

/// arm_hil/msg/ControlDone: rdscom ControlDone.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ControlDone {
    pub header: Header,
    pub success: bool,
    /// [s]
    pub duration: f64,
    pub executed: u8,
}
interface!(ControlDone, "arm_hil/msg/ControlDone");
published!(ControlDone, "RIHS01_26eaee667b1fb304819cde6ca9a3b8457c3da831fc0794b7c5b4dc54f7377495", uses HEADER);

/// arm_hil/msg/DeviceError: rdscom Error and LibraryError.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceError {
    pub header: Header,
    pub prototype: u8,
    pub error_code: u8,
    pub description: String,
}
interface!(DeviceError, "arm_hil/msg/DeviceError");
published!(DeviceError, "RIHS01_6cd6d5befed6376d2bb0ca16c35867c164f4cab0216a954ec7b90f8bbe268cd3", uses HEADER);

/// The typed message of an rdscom message from the MCU, when it has one.
#[derive(Debug, Clone, PartialEq)]
pub enum RdscomMessage {
    MotorEvent(MotorEvent),
    ControlDone(ControlDone),
    DeviceError(DeviceError),
}

/// arm_hil/msg/CartesianWaypoint.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CartesianWaypoint {
    /// [s]
    pub time_from_start: f64,
    /// [m]
    pub position: Vector3,
    /// [m/s]
    pub velocity: Vector3,
    /// [m/s^2]
    pub acceleration: Vector3,
}
interface!(CartesianWaypoint, "arm_hil/msg/CartesianWaypoint");

/// The goal of arm_hil/action/FollowCartesianTrajectory.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FollowCartesianTrajectoryGoal {
    pub waypoints: Vec<CartesianWaypoint>,
}
interface!(FollowCartesianTrajectoryGoal, "arm_hil/action/FollowCartesianTrajectory_Goal");

/// The result of arm_hil/action/FollowCartesianTrajectory.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FollowCartesianTrajectoryResult {
    pub success: bool,
    pub message: String,
    /// [m]
    pub rms_error: f64,
    /// [m]
    pub max_error: f64,
    pub frames: u64,
}
interface!(FollowCartesianTrajectoryResult, "arm_hil/action/FollowCartesianTrajectory_Result");

impl FollowCartesianTrajectoryResult {
    /// A goal that could not start: nothing ran.
    pub fn refused(reason: impl std::fmt::Display) -> FollowCartesianTrajectoryResult {
        FollowCartesianTrajectoryResult { success: false, message: format!("refused: {reason}"), ..Default::default() }
    }

    /// A run that ended after `frames` frames with these errors [m], completed (`failure`
    /// None) or not.
    pub fn ended(
        rms_error: f64,
        max_error: f64,
        frames: u64,
        failure: Option<String>,
    ) -> FollowCartesianTrajectoryResult {
        FollowCartesianTrajectoryResult {
            success: failure.is_none(),
            message: failure.unwrap_or_else(|| "trajectory complete".to_owned()),
            rms_error,
            max_error,
            frames,
        }
    }
}

/// The feedback of arm_hil/action/FollowCartesianTrajectory.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct FollowCartesianTrajectoryFeedback {
    /// Part of the trajectory's duration done, 0 to 1.
    pub progress: f64,
    /// [s]
    pub time_from_start: f64,
    /// [m]
    pub tracking_error: f64,
}
interface!(FollowCartesianTrajectoryFeedback, "arm_hil/action/FollowCartesianTrajectory_Feedback");
