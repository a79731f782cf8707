//! Thin r2r adapters (feature `ros`): parameters and subscriptions in, topics out. Everything a
//! node decides, its topics included ([`crate::nodes::topics`]), is in [`crate::nodes`] and
//! tested without ROS; this module copies subscribed messages into library types and hands the
//! topic sets' CDR to r2r through [`RosSink`].
//!
//! r2r is spun on the thread that calls [`spin`], which does nothing else; simulations and loops
//! run on threads of their own, each publishing through its own [`RosSink`].

pub mod arduino_driver;
pub mod hil_node;
pub mod joint_commands;
#[cfg(not(feature = "ros-doc-only"))]
pub mod joint_trajectory_action;
pub mod legacy_bridge;
pub mod lifecycle;
pub mod logging;
pub mod params;
pub mod publisher;
pub mod sil_node;
pub mod stm32_driver;
#[cfg(not(feature = "ros-doc-only"))]
pub mod trajectory_action;
pub mod vr_bridge;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;
use futures::{Stream, StreamExt};
use r2r::builtin_interfaces::msg::Duration as DurationMsg;
use r2r::trajectory_msgs::msg::{JointTrajectory, MultiDOFJointTrajectory};
use r2r::{ParameterValue, QosProfile, ServiceRequest, WrappedServiceTypeSupport};

use crate::hil::exit;
use crate::nodes::follower::clocks::{Now, SteadyClock};
use crate::nodes::params::{ParamValue, ROS_PARAMETERS};
use crate::nodes::security::{SecuritySettings, Strategy};

/// r2r's handles of FollowJointTrajectory and FollowCartesianTrajectory goals, which the nodes'
/// commands hold (none in the doc-only type-check, whose bindings lack control_msgs and this
/// package's own action).
#[cfg(not(feature = "ros-doc-only"))]
pub type JointGoalHandle = joint_trajectory_action::Handle;
#[cfg(not(feature = "ros-doc-only"))]
pub type CartesianGoalHandle = trajectory_action::Goal;
#[cfg(feature = "ros-doc-only")]
pub type JointGoalHandle = ();
#[cfg(feature = "ros-doc-only")]
pub type CartesianGoalHandle = ();

/// Ends a FollowJointTrajectory goal with `outcome` (nothing to end in the doc-only type-check).
#[cfg(not(feature = "ros-doc-only"))]
pub fn end_joint_goal(ended: Option<(JointGoalHandle, crate::nodes::follower::Outcome)>) {
    if let Some((goal, outcome)) = ended {
        joint_trajectory_action::finish(goal, outcome);
    }
}
#[cfg(feature = "ros-doc-only")]
pub fn end_joint_goal(_: Option<(JointGoalHandle, crate::nodes::follower::Outcome)>) {}
use crate::nodes::trajectory_input::MultiDofPoint;
use crate::outputs::{Durability, NodeName, Outputs, Qos, Sink, SinkError, TopicId, TopicSpec};

/// The profile of a topic's [`Qos`]: reliable, keep last `depth`, transient local if latched.
pub fn qos_profile(qos: Qos) -> QosProfile {
    let profile = QosProfile::default().keep_last(qos.depth as usize).reliable();
    match qos.durability {
        Durability::Volatile => profile.volatile(),
        Durability::TransientLocal => profile.transient_local(),
    }
}

/// A topic advertised, not yet created on the node.
#[derive(Debug)]
struct Advertised {
    name: String,
    type_name: &'static str,
    qos: Qos,
}

/// The node's r2r publishers as a [`Sink`]. Topic sets advertise on it first; [`ros_outputs`]
/// then creates their publishers on the node, by type name, and each message goes out as the
/// CDR the topic set encoded. r2r still has to know each type: the standard ones are in its
/// bindings, the package's own are generated where it is installed (see CMakeLists.txt).
#[derive(Default)]
pub struct RosSink {
    advertised: Vec<Advertised>,
    /// r2r publishers are Send but not Sync: a sink belongs to one thread (or sits behind a lock).
    publishers: Vec<r2r::PublisherUntyped>,
}

impl Sink for RosSink {
    /// The topic keeps the name the node writes (`~/imu`): rcl resolves it, with the node's
    /// namespace and remappings.
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
        let type_name = topic.message.name;
        self.advertised.push(Advertised { name: topic.name.to_owned(), type_name, qos: topic.qos });
        Ok(TopicId(self.advertised.len() - 1))
    }

    fn write(&mut self, topic: TopicId, _time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
        let publisher = self.publishers.get(topic.0).ok_or(SinkError::UnknownTopic(topic))?;
        publisher.publish_raw(cdr).map_err(|error| SinkError::Failed(Box::new(error)))
    }
}

/// A topic set of `node`'s, advertised by `advertise` and created on the node: the set and the
/// outputs it publishes through.
pub fn ros_outputs<T>(
    node: &mut r2r::Node,
    advertise: impl FnOnce(&mut Outputs<RosSink>) -> Result<T, SinkError>,
) -> anyhow::Result<(T, Outputs<RosSink>)> {
    let namespace = node.namespace()?.trim_end_matches('/').to_owned();
    let mut out = Outputs::new(NodeName { namespace, name: node.name()? }, RosSink::default());
    let topics = advertise(&mut out)?;
    let sink = out.sink_mut();
    for Advertised { name, type_name, qos } in &sink.advertised[sink.publishers.len()..] {
        let publisher = node
            .create_publisher_untyped(name, type_name, qos_profile(*qos))
            .map_err(|error| anyhow::anyhow!("cannot publish {name} as {type_name}: {error}"))?;
        sink.publishers.push(publisher);
    }
    Ok((topics, out))
}

/// Runs the node `name`: its log lines go through ROS logging, SIGINT, SIGTERM and panics are
/// handled as [`exit`] says (from the start: a signal during start-up still ends the node
/// cleanly, and a second one, or a node still holding a device after the grace, stops its devices
/// and ends the process at once), then the ROS context and the node are created and handed to
/// `main`. A failure (a bad parameter, a device that cannot be opened, a parameter file rcl cannot
/// read) ends the process with one error line and status 1; a panic with status 101. Every device
/// still open when `main` returns is stopped.
pub fn run(name: &str, main: fn(r2r::Node) -> anyhow::Result<()>) -> ExitCode {
    logging::install(name);
    let _stop_devices_at_the_end = exit::ExitGuard;
    let started = exit::handle_signals();
    let started = started.map_err(anyhow::Error::from).and_then(|()| check_security()).and_then(|()| create_context());
    let started = started.and_then(|context| {
        let mut node = r2r::Node::create(context, name, "")?;
        logging::publish_to_rosout(&mut node)?;
        Ok(node)
    });
    exit::status_of(match started.and_then(main) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{}", format!("{error:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    })
}

/// Under DDS Security, what the node's secured participant lacks: the reason it cannot start
/// (Enforce), or a warning that it runs unsecured (Permissive).
fn check_security() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().collect();
    let Some(settings) = SecuritySettings::from_environment(|name| std::env::var(name).ok(), &arguments) else {
        return Ok(());
    };
    match (settings.missing(), settings.strategy) {
        (None, _) => Ok(()),
        (Some(missing), Strategy::Enforce) => anyhow::bail!("ROS_SECURITY_STRATEGY=Enforce: {missing}"),
        (Some(missing), Strategy::Permissive) => {
            log::warn!("ROS_SECURITY_STRATEGY is Permissive: running unsecured, as {missing}");
            Ok(())
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

/// A message duration in seconds, as a trajectory point's time_from_start.
pub fn seconds(duration: &DurationMsg) -> f64 {
    f64::from(duration.sec) + f64::from(duration.nanosec) * 1e-9
}

/// A JointTrajectory as the follower's goal, with the node's default tolerances.
pub fn trajectory_goal(trajectory: &JointTrajectory) -> crate::nodes::follower::Goal {
    let stamp = &trajectory.header.stamp;
    crate::nodes::follower::Goal {
        joint_names: trajectory.joint_names.clone(),
        points: trajectory
            .points
            .iter()
            .map(|point| crate::nodes::follower::spline::TrajectoryPoint {
                time_s: seconds(&point.time_from_start),
                positions: point.positions.clone(),
                velocities: point.velocities.clone(),
                accelerations: point.accelerations.clone(),
            })
            .collect(),
        stamp_ns: u64::try_from(stamp.sec).unwrap_or(0) * 1_000_000_000 + u64::from(stamp.nanosec),
        ..Default::default()
    }
}

/// Now on the node's ROS clock (simulated time under `use_sim_time`) [ns since its epoch]: the
/// time axis of what the node publishes.
pub fn now_ns(clock: &Mutex<r2r::Clock>) -> u64 {
    let now = clock.lock().ok().and_then(|mut clock| clock.get_now().ok()).unwrap_or_default();
    u64::try_from(now.as_nanos()).unwrap_or(u64::MAX)
}

/// Now on the node's ROS clock and on a serial device's `steady` clock, the one its control
/// steps are timed on.
pub fn now_for_device(clock: &Mutex<r2r::Clock>, steady: &SteadyClock) -> Now {
    Now { ros_ns: now_ns(clock), steps_ns: steady.now_ns() }
}

/// The shortest turn of [`spin`]'s loop: at most 1000 turns a second.
pub const SPIN_PERIOD_MIN: Duration = Duration::from_millis(1);

/// Spins `node` and runs `pool`'s tasks (the parameter services, subscriptions) on this thread
/// until `stop` is set or the process is asked to end (SIGINT or SIGTERM, what `ros2 launch`
/// escalates to and systemd sends, or a panic: [`exit`]); then sets `stop` for the node's other
/// threads.
pub fn spin(mut node: r2r::Node, mut pool: LocalPool, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    spin_while(&mut node, &mut pool, || !stop.load(Ordering::Relaxed) && !exit::requested());
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// Spins `node` and runs `pool`'s tasks while `keep` says so.
///
/// A turn of the loop takes at least [`SPIN_PERIOD_MIN`]: r2r 0.9.7's action servers never expire
/// a finished goal, so from `result_timeout` (rcl's default, 10 s) after a goal's end the wait
/// returns at once on every turn; unpaced, the thread would take a core.
pub fn spin_while(node: &mut r2r::Node, pool: &mut LocalPool, mut keep: impl FnMut() -> bool) {
    while keep() {
        let turn = std::time::Instant::now();
        node.spin_once(Duration::from_millis(10));
        pool.run_until_stalled();
        std::thread::sleep(SPIN_PERIOD_MIN.saturating_sub(turn.elapsed()));
    }
}

/// Serves one service on `spawner` (the spinning thread), answering each request with `answer`.
pub fn serve<T, S>(
    spawner: &LocalSpawner,
    requests: S,
    mut answer: impl FnMut(&T::Request) -> T::Response + 'static,
) -> anyhow::Result<()>
where
    T: WrappedServiceTypeSupport + 'static,
    S: Stream<Item = ServiceRequest<T>> + Unpin + 'static,
{
    spawner.spawn_local(requests.for_each(move |request| {
        let response = answer(&request.message);
        if let Err(error) = request.respond(response) {
            log::warn!("a service's reply failed: {error}");
        }
        futures::future::ready(())
    }))?;
    Ok(())
}

/// The points of a trajectory_msgs/MultiDOFJointTrajectory in the library's form (see
/// [`crate::nodes::trajectory_input`] for what is taken from them).
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
