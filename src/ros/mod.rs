//! Thin r2r adapters (feature `ros`): parameters in, topics out. Everything a node decides is in
//! [`crate::nodes`] and tested without ROS; this module only copies data to and from messages.
//!
//! r2r is spun on the thread that calls [`spin`], which does nothing else; simulations and loops
//! run on threads of their own and publish through r2r publishers, which are thread-safe.

pub mod arduino_driver;
pub mod diagnostics;
pub mod hil_node;
pub mod legacy_bridge;
pub mod logging;
pub mod params;
pub mod sil_node;
pub mod stm32_driver;
#[cfg(not(feature = "ros-doc-only"))]
pub mod trajectory_action;
pub mod vr_bridge;

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::executor::LocalPool;
use r2r::builtin_interfaces::msg::{Duration as DurationMsg, Time};
use r2r::geometry_msgs::msg::{Point, PointStamped, Twist, TwistStamped, Vector3, Vector3Stamped};
use r2r::sensor_msgs::msg::JointState;
use r2r::std_msgs::msg::Header;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::{ParameterValue, QosProfile};

use crate::bag::cdr::encode_into;
use crate::bag::msgs;
use crate::model::math::Vec3;
use crate::nodes::diagnostics::Schedule;
use crate::nodes::interfaces::{self, Interface};
use crate::nodes::joints::{JointStateData, JOINT_NAMES};
use crate::nodes::link_health::LinkHealth;
use crate::nodes::messages::MultiDofPoint;
use crate::nodes::params::{ParamValue, ROS_PARAMETERS};

/// QoS of state topics: reliable, the last 10 (as ros2_control's /joint_states).
pub fn state_qos() -> QosProfile {
    QosProfile::default().keep_last(10).reliable()
}

/// QoS of device events (each one matters, none is replaced by the next): reliable, the last 100.
pub fn event_qos() -> QosProfile {
    QosProfile::default().keep_last(100).reliable()
}

/// QoS of data published once per run (paths, ideal trajectories): late joiners get it.
pub fn latched_qos() -> QosProfile {
    QosProfile::default().keep_last(1).reliable().transient_local()
}

/// A publisher of one of the package's own messages: the struct that mirrors the .msg file
/// ([`crate::nodes::interfaces`]) goes out as its CDR. The node so needs no generated type for
/// it, and the doc-only type-check, which has none, covers this code too; r2r still has to know
/// the type (it is generated where the package is installed, see CMakeLists.txt).
pub struct InterfacePublisher<M> {
    publisher: r2r::PublisherUntyped,
    message: PhantomData<fn(&M)>,
}

impl<M: Interface> InterfacePublisher<M> {
    pub fn create(node: &mut r2r::Node, topic: &str, qos: QosProfile) -> anyhow::Result<InterfacePublisher<M>> {
        let publisher = node
            .create_publisher_untyped(topic, M::TYPE, qos)
            .map_err(|error| anyhow::anyhow!("cannot publish {topic} as {}: {error}", M::TYPE))?;
        Ok(InterfacePublisher { publisher, message: PhantomData })
    }

    pub fn publish(&self, message: &M) -> anyhow::Result<()> {
        let mut bytes = Vec::new();
        encode_into(message, &mut bytes)?;
        Ok(self.publisher.publish_raw(&bytes)?)
    }
}

/// A driver's `~/link_health`, published when [`LinkHealth::due`] says.
pub struct LinkHealthPublisher {
    publisher: InterfacePublisher<interfaces::LinkHealth>,
    schedule: Schedule,
}

impl LinkHealthPublisher {
    pub fn create(node: &mut r2r::Node) -> anyhow::Result<LinkHealthPublisher> {
        let publisher = InterfacePublisher::create(node, "~/link_health", state_qos())?;
        Ok(LinkHealthPublisher { publisher, schedule: Schedule::every_second() })
    }

    /// Publishes `health` stamped `stamp`, if it is news or a second old.
    pub fn update(&mut self, health: &LinkHealth, stamp: &Time) {
        if health.due(&mut self.schedule, std::time::Instant::now()) {
            if let Err(error) = self.publisher.publish(&interfaces::LinkHealth::of(own_header(stamp, ""), health)) {
                log::warn!("publishing ~/link_health failed: {error:#}");
            }
        }
    }
}

/// The header of the package's own messages, from an r2r stamp.
pub fn own_header(stamp: &Time, frame_id: &str) -> msgs::Header {
    msgs::Header { stamp: msgs::Time { sec: stamp.sec, nanosec: stamp.nanosec }, frame_id: frame_id.to_owned() }
}

/// Set by SIGINT and SIGTERM; [`spin`] returns when it is.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Runs the node `name`: its log lines go through ROS logging, SIGINT and SIGTERM are caught
/// (from the start: a signal during start-up still ends the node cleanly), then the ROS context
/// and the node are created and handed to `main`. A failure (a bad parameter, a device that
/// cannot be opened, a parameter file rcl cannot read) ends the process with one error line and
/// status 1.
pub fn run(name: &str, main: fn(r2r::Node) -> anyhow::Result<()>) -> ExitCode {
    logging::install(name);
    let started = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    let started = started.map_err(anyhow::Error::from).and_then(|()| create_context()).and_then(|context| {
        let mut node = r2r::Node::create(context, name, "")?;
        logging::publish_to_rosout(&mut node)?;
        Ok(node)
    });
    match started.and_then(main) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{}", format!("{error:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// r2r panics when rcl_init fails, with rcl's reason as the message (a parameter file rcl cannot
/// parse ends there): the panic is caught and its message becomes the error.
fn create_context() -> anyhow::Result<r2r::Context> {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let created = std::panic::catch_unwind(r2r::Context::create);
    std::panic::set_hook(default_hook);
    match created {
        Ok(context) => Ok(context?),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|reason| (*reason).to_owned()))
                .unwrap_or_else(|| "no reason given".to_owned());
            anyhow::bail!("ROS 2 could not start (rcl_init failed: check the parameter files and --ros-args): {reason}")
        }
    }
}

/// The node's parameters (from the command line and parameter files) in the library's form.
pub fn node_params(node: &r2r::Node) -> BTreeMap<String, ParamValue> {
    let Ok(params) = node.params.lock() else { return BTreeMap::new() };
    params
        .iter()
        .filter_map(|(name, parameter)| {
            let value = match parameter.value.clone() {
                ParameterValue::NotSet | ParameterValue::ByteArray(_) => return None,
                ParameterValue::Bool(value) => ParamValue::Bool(value),
                ParameterValue::Integer(value) => ParamValue::Integer(value),
                ParameterValue::Double(value) => ParamValue::Double(value),
                ParameterValue::String(value) => ParamValue::String(value),
                ParameterValue::BoolArray(values) => ParamValue::BoolArray(values),
                ParameterValue::IntegerArray(values) => ParamValue::IntegerArray(values),
                ParameterValue::DoubleArray(values) => ParamValue::DoubleArray(values),
                ParameterValue::StringArray(values) => ParamValue::StringArray(values),
            };
            Some((name.clone(), value))
        })
        .collect()
}

/// ROS's own parameters the node was started with (`use_sim_time`, ...), to declare beside the
/// node's configuration.
pub fn ros_params(node: &r2r::Node) -> BTreeMap<String, ParamValue> {
    node_params(node)
        .into_iter()
        .filter(|(name, _)| ROS_PARAMETERS.contains(&name.split('.').next().unwrap_or_default()))
        .collect()
}

/// A stamp `seconds` after the clock's epoch.
pub fn stamp(seconds: f64) -> Time {
    r2r::Clock::to_builtin_time(&Duration::from_secs_f64(seconds.max(0.0)))
}

/// A message duration of `seconds` (negative durations are zero).
pub fn duration(seconds: f64) -> DurationMsg {
    let time = stamp(seconds);
    DurationMsg { sec: time.sec, nanosec: time.nanosec }
}

/// A message duration in seconds, as a trajectory point's time_from_start.
pub fn seconds(duration: &DurationMsg) -> f64 {
    f64::from(duration.sec) + f64::from(duration.nanosec) * 1e-9
}

/// Now on the node's ROS clock (simulated time under `use_sim_time`).
pub fn now(clock: &Mutex<r2r::Clock>) -> Time {
    let now = clock.lock().ok().and_then(|mut clock| clock.get_now().ok()).unwrap_or_default();
    r2r::Clock::to_builtin_time(&now)
}

pub fn header(stamp: Time, frame_id: &str) -> Header {
    Header { stamp, frame_id: frame_id.to_owned() }
}

/// Spins `node` and runs `pool`'s tasks (the parameter services, subscriptions) on this thread
/// until `stop` is set or the process gets SIGINT or SIGTERM (what `ros2 launch` escalates to
/// and systemd sends); then sets `stop` for the node's other threads.
pub fn spin(mut node: r2r::Node, mut pool: LocalPool, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    while !stop.load(Ordering::Relaxed) && !INTERRUPTED.load(Ordering::Relaxed) {
        node.spin_once(Duration::from_millis(10));
        pool.run_until_stalled();
    }
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

pub fn point(v: &Vec3) -> Point {
    Point { x: v.x, y: v.y, z: v.z }
}

pub fn vector(v: &Vec3) -> Vector3 {
    Vector3 { x: v.x, y: v.y, z: v.z }
}

pub fn point_stamped(stamp: Time, frame_id: &str, v: &Vec3) -> PointStamped {
    PointStamped { header: header(stamp, frame_id), point: point(v) }
}

/// A twist with linear velocity `v` [m/s] and no rotation.
pub fn linear_twist(stamp: Time, frame_id: &str, v: &Vec3) -> TwistStamped {
    TwistStamped {
        header: header(stamp, frame_id),
        twist: Twist { linear: vector(v), angular: vector(&Vec3::zeros()) },
    }
}

/// The arm's /joint_states message: motors and the URDF's passive joints.
pub fn arm_joint_state_msg(stamp: Time, joints: &JointStateData) -> JointState {
    JointState {
        header: header(stamp, ""),
        name: JOINT_NAMES.iter().map(|name| (*name).to_owned()).collect(),
        position: joints.position.to_vec(),
        velocity: joints.velocity.to_vec(),
        effort: joints.effort.to_vec(),
    }
}

pub fn vector_stamped(stamp: Time, frame_id: &str, v: &Vec3) -> Vector3Stamped {
    Vector3Stamped { header: header(stamp, frame_id), vector: vector(v) }
}

/// The points of a trajectory_msgs/MultiDOFJointTrajectory in the library's form (see
/// [`crate::nodes::messages`] for what is taken from them).
pub fn multi_dof_points(message: &MultiDOFJointTrajectory) -> Vec<MultiDofPoint> {
    message
        .points
        .iter()
        .map(|p| MultiDofPoint {
            translations: p.transforms.iter().map(|t| [t.translation.x, t.translation.y, t.translation.z]).collect(),
            linear_velocities: p.velocities.iter().map(|v| [v.linear.x, v.linear.y, v.linear.z]).collect(),
            linear_accelerations: p.accelerations.iter().map(|a| [a.linear.x, a.linear.y, a.linear.z]).collect(),
            time_from_start_s: seconds(&p.time_from_start),
        })
        .collect()
}
