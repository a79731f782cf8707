//! The ROS 2 standard messages the nodes publish, as plain structs that serialise to CDR in
//! their .msg field order, each with its definition and type hash.
//!
//! Definitions are the field lines of the .msg files (comments left out: readers parse fields
//! only). Type hashes are the RIHS01 hashes of ROS 2 Jazzy, as `ros2 bag record` wrote them.

use serde::{Deserialize, Serialize};

use super::{MsgDef, RosMessage};

/// Implements [`RosMessage`] for a struct with its definition and hash.
macro_rules! ros_message {
    ($type:ty, $def:ident, $hash:literal) => {
        impl RosMessage for $type {
            const DEF: &'static MsgDef = &$def;
            const TYPE_HASH: &'static str = $hash;
        }
    };
}

const TIME: MsgDef = MsgDef { name: "builtin_interfaces/msg/Time", fields: "int32 sec\nuint32 nanosec\n", uses: &[] };
const DURATION: MsgDef =
    MsgDef { name: "builtin_interfaces/msg/Duration", fields: "int32 sec\nuint32 nanosec\n", uses: &[] };
pub const HEADER: MsgDef =
    MsgDef { name: "std_msgs/msg/Header", fields: "builtin_interfaces/Time stamp\nstring frame_id\n", uses: &[&TIME] };
const STRING: MsgDef = MsgDef { name: "std_msgs/msg/String", fields: "string data\n", uses: &[] };
const LOG: MsgDef = MsgDef {
    name: "rcl_interfaces/msg/Log",
    fields: "uint8 DEBUG=10\nuint8 INFO=20\nuint8 WARN=30\nuint8 ERROR=40\nuint8 FATAL=50\n\
             builtin_interfaces/Time stamp\nuint8 level\nstring name\nstring msg\nstring file\nstring function\n\
             uint32 line\n",
    uses: &[&TIME],
};
pub const VECTOR3: MsgDef =
    MsgDef { name: "geometry_msgs/msg/Vector3", fields: "float64 x\nfloat64 y\nfloat64 z\n", uses: &[] };
pub const POINT: MsgDef =
    MsgDef { name: "geometry_msgs/msg/Point", fields: "float64 x\nfloat64 y\nfloat64 z\n", uses: &[] };
const QUATERNION: MsgDef = MsgDef {
    name: "geometry_msgs/msg/Quaternion",
    fields: "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n",
    uses: &[],
};
const TRANSFORM: MsgDef = MsgDef {
    name: "geometry_msgs/msg/Transform",
    fields: "geometry_msgs/Vector3 translation\ngeometry_msgs/Quaternion rotation\n",
    uses: &[&VECTOR3, &QUATERNION],
};
const TRANSFORM_STAMPED: MsgDef = MsgDef {
    name: "geometry_msgs/msg/TransformStamped",
    fields: "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/Transform transform\n",
    uses: &[&HEADER, &TRANSFORM],
};
const POINT_STAMPED: MsgDef = MsgDef {
    name: "geometry_msgs/msg/PointStamped",
    fields: "std_msgs/Header header\ngeometry_msgs/Point point\n",
    uses: &[&HEADER, &POINT],
};
const TWIST: MsgDef = MsgDef {
    name: "geometry_msgs/msg/Twist",
    fields: "geometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular\n",
    uses: &[&VECTOR3],
};
const TWIST_STAMPED: MsgDef = MsgDef {
    name: "geometry_msgs/msg/TwistStamped",
    fields: "std_msgs/Header header\ngeometry_msgs/Twist twist\n",
    uses: &[&HEADER, &TWIST],
};
const VECTOR3_STAMPED: MsgDef = MsgDef {
    name: "geometry_msgs/msg/Vector3Stamped",
    fields: "std_msgs/Header header\ngeometry_msgs/Vector3 vector\n",
    uses: &[&HEADER, &VECTOR3],
};
const POSE: MsgDef = MsgDef {
    name: "geometry_msgs/msg/Pose",
    fields: "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n",
    uses: &[&POINT, &QUATERNION],
};
const POSE_STAMPED: MsgDef = MsgDef {
    name: "geometry_msgs/msg/PoseStamped",
    fields: "std_msgs/Header header\ngeometry_msgs/Pose pose\n",
    uses: &[&HEADER, &POSE],
};
const PATH: MsgDef = MsgDef {
    name: "nav_msgs/msg/Path",
    fields: "std_msgs/Header header\ngeometry_msgs/PoseStamped[] poses\n",
    uses: &[&HEADER, &POSE_STAMPED],
};
const JOINT_STATE: MsgDef = MsgDef {
    name: "sensor_msgs/msg/JointState",
    fields: "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n",
    uses: &[&HEADER],
};
const IMU: MsgDef = MsgDef {
    name: "sensor_msgs/msg/Imu",
    fields: "std_msgs/Header header\ngeometry_msgs/Quaternion orientation\nfloat64[9] orientation_covariance\n\
             geometry_msgs/Vector3 angular_velocity\nfloat64[9] angular_velocity_covariance\n\
             geometry_msgs/Vector3 linear_acceleration\nfloat64[9] linear_acceleration_covariance\n",
    uses: &[&HEADER, &QUATERNION, &VECTOR3],
};
const TEMPERATURE: MsgDef = MsgDef {
    name: "sensor_msgs/msg/Temperature",
    fields: "std_msgs/Header header\nfloat64 temperature\nfloat64 variance\n",
    uses: &[&HEADER],
};
const KEY_VALUE: MsgDef =
    MsgDef { name: "diagnostic_msgs/msg/KeyValue", fields: "string key\nstring value\n", uses: &[] };
const DIAGNOSTIC_STATUS: MsgDef = MsgDef {
    name: "diagnostic_msgs/msg/DiagnosticStatus",
    fields: "byte OK=0\nbyte WARN=1\nbyte ERROR=2\nbyte STALE=3\nbyte level\nstring name\nstring message\n\
             string hardware_id\ndiagnostic_msgs/KeyValue[] values\n",
    uses: &[&KEY_VALUE],
};
const DIAGNOSTIC_ARRAY: MsgDef = MsgDef {
    name: "diagnostic_msgs/msg/DiagnosticArray",
    fields: "std_msgs/Header header\ndiagnostic_msgs/DiagnosticStatus[] status\n",
    uses: &[&HEADER, &DIAGNOSTIC_STATUS],
};
const CLOCK: MsgDef =
    MsgDef { name: "rosgraph_msgs/msg/Clock", fields: "builtin_interfaces/Time clock\n", uses: &[&TIME] };
const TF_MESSAGE: MsgDef = MsgDef {
    name: "tf2_msgs/msg/TFMessage",
    fields: "geometry_msgs/TransformStamped[] transforms\n",
    uses: &[&TRANSFORM_STAMPED],
};
const JOINT_TRAJECTORY_POINT: MsgDef = MsgDef {
    name: "trajectory_msgs/msg/JointTrajectoryPoint",
    fields: "float64[] positions\nfloat64[] velocities\nfloat64[] accelerations\nfloat64[] effort\n\
             builtin_interfaces/Duration time_from_start\n",
    uses: &[&DURATION],
};
const JOINT_TRAJECTORY: MsgDef = MsgDef {
    name: "trajectory_msgs/msg/JointTrajectory",
    fields: "std_msgs/Header header\nstring[] joint_names\ntrajectory_msgs/JointTrajectoryPoint[] points\n",
    uses: &[&HEADER, &JOINT_TRAJECTORY_POINT],
};

/// builtin_interfaces/Time.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Time {
    pub sec: i32,
    pub nanosec: u32,
}

impl Time {
    /// The time `nanos` nanoseconds after the epoch (of the clock in use).
    pub fn from_nanos(nanos: u64) -> Time {
        Time { sec: (nanos / 1_000_000_000) as i32, nanosec: (nanos % 1_000_000_000) as u32 }
    }

    pub fn nanos(&self) -> u64 {
        self.sec as u64 * 1_000_000_000 + self.nanosec as u64
    }
}

/// builtin_interfaces/Duration.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Duration {
    pub sec: i32,
    pub nanosec: u32,
}

impl Duration {
    /// A non-negative duration of `seconds` [s], rounded to the nanosecond.
    pub fn from_secs_f64(seconds: f64) -> Duration {
        let time = Time::from_nanos((seconds.max(0.0) * 1e9).round() as u64);
        Duration { sec: time.sec, nanosec: time.nanosec }
    }
}

/// std_msgs/Header.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Header {
    pub stamp: Time,
    pub frame_id: String,
}

impl Header {
    /// A stamp at `time_ns` in `frame_id`.
    pub fn at(time_ns: u64, frame_id: &str) -> Header {
        Header { stamp: Time::from_nanos(time_ns), frame_id: frame_id.to_owned() }
    }
}

/// std_msgs/String.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StringMsg {
    pub data: String,
}

/// rcl_interfaces/Log: a log line, as /rosout carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Log {
    pub stamp: Time,
    /// 10 debug, 20 info, 30 warn, 40 error, 50 fatal.
    pub level: u8,
    /// The logger's name.
    pub name: String,
    pub msg: String,
    pub file: String,
    pub function: String,
    pub line: u32,
}

/// geometry_msgs/Vector3, geometry_msgs/Point: three doubles [m, m/s, ...].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Vector3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

impl From<&nalgebra::Vector3<f64>> for Vector3 {
    fn from(v: &nalgebra::Vector3<f64>) -> Vector3 {
        Vector3 { x: v.x, y: v.y, z: v.z }
    }
}

impl From<[f64; 3]> for Vector3 {
    fn from([x, y, z]: [f64; 3]) -> Vector3 {
        Vector3 { x, y, z }
    }
}

/// geometry_msgs/Quaternion.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quaternion {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub w: f64,
}

impl Quaternion {
    pub const IDENTITY: Quaternion = Quaternion { x: 0.0, y: 0.0, z: 0.0, w: 1.0 };
}

/// geometry_msgs/Transform.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Transform {
    pub translation: Vector3,
    pub rotation: Quaternion,
}

/// geometry_msgs/TransformStamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransformStamped {
    pub header: Header,
    pub child_frame_id: String,
    pub transform: Transform,
}

/// tf2_msgs/TFMessage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TfMessage {
    pub transforms: Vec<TransformStamped>,
}

/// geometry_msgs/PointStamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointStamped {
    pub header: Header,
    pub point: Vector3,
}

/// geometry_msgs/Twist.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Twist {
    pub linear: Vector3,
    pub angular: Vector3,
}

/// geometry_msgs/TwistStamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwistStamped {
    pub header: Header,
    pub twist: Twist,
}

/// geometry_msgs/Vector3Stamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vector3Stamped {
    pub header: Header,
    pub vector: Vector3,
}

/// geometry_msgs/Pose.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pose {
    pub position: Vector3,
    pub orientation: Quaternion,
}

/// geometry_msgs/PoseStamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoseStamped {
    pub header: Header,
    pub pose: Pose,
}

/// nav_msgs/Path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Path {
    pub header: Header,
    pub poses: Vec<PoseStamped>,
}

/// sensor_msgs/JointState.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JointState {
    pub header: Header,
    pub name: Vec<String>,
    pub position: Vec<f64>,
    pub velocity: Vec<f64>,
    pub effort: Vec<f64>,
}

/// sensor_msgs/Imu.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Imu {
    pub header: Header,
    pub orientation: Quaternion,
    pub orientation_covariance: [f64; 9],
    pub angular_velocity: Vector3,
    pub angular_velocity_covariance: [f64; 9],
    pub linear_acceleration: Vector3,
    pub linear_acceleration_covariance: [f64; 9],
}

/// sensor_msgs/Temperature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Temperature {
    pub header: Header,
    /// [°C]
    pub temperature: f64,
    pub variance: f64,
}

/// diagnostic_msgs/KeyValue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

/// diagnostic_msgs/DiagnosticStatus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnosticStatus {
    /// OK 0, WARN 1, ERROR 2, STALE 3.
    pub level: u8,
    pub name: String,
    pub message: String,
    pub hardware_id: String,
    pub values: Vec<KeyValue>,
}

/// diagnostic_msgs/DiagnosticArray.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnosticArray {
    pub header: Header,
    pub status: Vec<DiagnosticStatus>,
}

/// rosgraph_msgs/Clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Clock {
    pub clock: Time,
}

/// trajectory_msgs/JointTrajectoryPoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JointTrajectoryPoint {
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
    pub accelerations: Vec<f64>,
    pub effort: Vec<f64>,
    pub time_from_start: Duration,
}

/// trajectory_msgs/JointTrajectory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JointTrajectory {
    pub header: Header,
    pub joint_names: Vec<String>,
    pub points: Vec<JointTrajectoryPoint>,
}

ros_message!(StringMsg, STRING, "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18");
ros_message!(Log, LOG, "RIHS01_e28ce254ca8abc06abf92773b74602cdbf116ed34fbaf294fb9f81da9f318eac");
ros_message!(TfMessage, TF_MESSAGE, "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087");
ros_message!(PointStamped, POINT_STAMPED, "RIHS01_4c0296af86e01e562e9e0405d138a01537247580076c58ea38d7923ac1045897");
ros_message!(TwistStamped, TWIST_STAMPED, "RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64");
ros_message!(
    Vector3Stamped,
    VECTOR3_STAMPED,
    "RIHS01_d4829622288cbb443886e7ea94ea5671a3b1be6bab4ad04224432a65f7d7887a"
);
ros_message!(Path, PATH, "RIHS01_1957a5bb3cee5da65c4e52e52b65a93df227efce4c20f8458b36e73066ca334b");
ros_message!(JointState, JOINT_STATE, "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e");
ros_message!(Imu, IMU, "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b");
ros_message!(Temperature, TEMPERATURE, "RIHS01_72514a14126ab9f8a9abec974c78e5610a367b59db5da355ff1fb982d5bad4b8");
ros_message!(
    DiagnosticArray,
    DIAGNOSTIC_ARRAY,
    "RIHS01_5a8a36efb05fb25070fa0fb3810290c0e6cd4862b54a8fb975a1ee8dc55a333e"
);
ros_message!(Clock, CLOCK, "RIHS01_692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564");
ros_message!(
    JointTrajectory,
    JOINT_TRAJECTORY,
    "RIHS01_179b33eba59d676f6d967ac71fe35e7ca2f64b2f3928f4a018cec115e213796e"
);
