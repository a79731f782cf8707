//! The arm's topics in a bag, as sil_node, hil_node and legacy_bridge publish them, plus what
//! robot_state_publisher would add on replay: /robot_description and /tf_static (latched) and
//! /tf for every moving joint, so rviz shows the arm from the bag alone.

use super::msgs::{
    Clock, DiagnosticArray, DiagnosticStatus, EncodesAs, Header, JointState, JointTrajectory, KeyValue, Path,
    PointStamped, Pose, Quaternion, StringMsg, TfMessage, Time, Transform, TransformStamped, Twist, TwistStamped,
    Vector3, Vector3Stamped,
};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use std::sync::Arc;

use super::writer::{BagError, BagWriter, Topic};
use super::{Durability, Qos, Recorder};
use crate::control::{Trajectory, Waypoint};
use crate::model::math::{direction_or_zero, Vec3};
use crate::model::Robot;
use crate::nodes::diagnostics::Status;
use crate::nodes::interfaces::ArmState;
use crate::nodes::joints::{arm_joint_state, JointStateData, JOINT_NAMES};
use crate::nodes::robot_state::{JointKind, Urdf, UrdfError, UrdfJoint, ARM_URDF};
use crate::sim::{Frame, IdealPoint, IdealTorques};

/// tf2's QoS for /tf: keep last 100, volatile.
const TF_QOS: Qos = Qos { depth: 100, durability: Durability::Volatile };

/// Why the arm's topics could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ArmRecordingError {
    #[error(transparent)]
    Bag(#[from] BagError),
    #[error("urdf/arm_hil.urdf")]
    Urdf(#[from] UrdfError),
}

/// Which of the arm topics beyond /joint_states, /tf and the end effector a node publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArmTopics {
    /// `~/reference`.
    pub reference: bool,
    /// `~/current_direction`, `~/desired_direction`, `~/reference_path` and `~/ideal` (sil_node).
    pub run_outputs: bool,
    /// `/clock` from the bag's time axis (simulated time).
    pub clock: bool,
}

struct RunTopics {
    current_direction: Topic<Vector3Stamped>,
    desired_direction: Topic<Vector3Stamped>,
    reference_path: Topic<Path>,
    ideal: Topic<JointTrajectory>,
}

/// The arm's topics of one node in one bag.
pub struct ArmRecording {
    frame_id: String,
    joint_states: Topic<JointState>,
    tf: Topic<TfMessage>,
    end_effector: Topic<PointStamped>,
    end_effector_twist: Topic<TwistStamped>,
    state: Topic<ArmState>,
    reference: Option<Topic<PointStamped>>,
    run: Option<RunTopics>,
    clock: Option<Topic<Clock>>,
    diagnostics: Topic<DiagnosticArray>,
    /// The moving joints, each with its index in [`JOINT_NAMES`].
    moving: Vec<(usize, UrdfJoint)>,
    // Messages reused sample after sample: only their values change.
    joint_state: JointState,
    transforms: TfMessage,
    point: PointStamped,
    twist: TwistStamped,
    direction: Vector3Stamped,
    arm_state: ArmState,
}

fn transform(pose: &nalgebra::Isometry3<f64>) -> Transform {
    let q = pose.rotation.quaternion();
    Transform {
        translation: Vector3::from(&pose.translation.vector),
        rotation: Quaternion { x: q.i, y: q.j, z: q.k, w: q.w },
    }
}

impl ArmRecording {
    /// Adds the topics of node `node` (its `~/` names) to `bag`, and writes /robot_description
    /// (`urdf`, parsed from [`ARM_URDF`]) and /tf_static at `start_ns`. Points are in `frame_id`.
    pub fn new(
        bag: &mut BagWriter,
        urdf: &Urdf,
        node: &str,
        frame_id: &str,
        topics: ArmTopics,
        start_ns: u64,
    ) -> Result<ArmRecording, BagError> {
        let private = |name: &str| format!("/{node}/{name}");
        let moving = JOINT_NAMES
            .iter()
            .enumerate()
            .filter_map(|(index, name)| urdf.joint(name).map(|joint| (index, joint.clone())))
            .collect();
        let description = bag.topic::<StringMsg>("/robot_description", Qos::LATCHED)?;
        bag.write(description, start_ns, &StringMsg { data: ARM_URDF.to_owned() })?;
        let tf_static = bag.topic::<TfMessage>("/tf_static", Qos::LATCHED)?;
        let fixed = urdf
            .joints
            .iter()
            .filter(|joint| joint.kind == JointKind::Fixed)
            .map(|joint| TransformStamped {
                header: Header::at(start_ns, &joint.parent),
                child_frame_id: joint.child.clone(),
                transform: transform(&joint.transform(0.0)),
            })
            .collect();
        bag.write(tf_static, start_ns, &TfMessage { transforms: fixed })?;
        let run = match topics.run_outputs {
            true => Some(RunTopics {
                current_direction: bag.topic(&private("current_direction"), Qos::STREAM)?,
                desired_direction: bag.topic(&private("desired_direction"), Qos::STREAM)?,
                reference_path: bag.topic(&private("reference_path"), Qos::LATCHED)?,
                ideal: bag.topic(&private("ideal"), Qos::LATCHED)?,
            }),
            false => None,
        };
        Ok(ArmRecording {
            frame_id: frame_id.to_owned(),
            joint_states: bag.topic("/joint_states", Qos::STREAM)?,
            tf: bag.topic("/tf", TF_QOS)?,
            end_effector: bag.topic(&private("end_effector"), Qos::STREAM)?,
            end_effector_twist: bag.topic(&private("end_effector_twist"), Qos::STREAM)?,
            state: bag.topic(&private("state"), Qos::STREAM)?,
            reference: topics.reference.then(|| bag.topic(&private("reference"), Qos::STREAM)).transpose()?,
            run,
            clock: topics.clock.then(|| bag.topic("/clock", Qos { depth: 1, ..Qos::STREAM })).transpose()?,
            diagnostics: bag.topic("/diagnostics", Qos::STREAM)?,
            moving,
            joint_state: JointState {
                header: Header::default(),
                name: JOINT_NAMES.iter().map(|name| (*name).to_owned()).collect(),
                position: Vec::with_capacity(JOINT_NAMES.len()),
                velocity: Vec::with_capacity(JOINT_NAMES.len()),
                effort: Vec::with_capacity(JOINT_NAMES.len()),
            },
            transforms: TfMessage { transforms: Vec::new() },
            point: PointStamped { header: Header::at(start_ns, frame_id), point: Vector3::default() },
            twist: TwistStamped {
                header: Header::at(start_ns, frame_id),
                twist: Twist { linear: Vector3::default(), angular: Vector3::default() },
            },
            direction: Vector3Stamped { header: Header::at(start_ns, frame_id), vector: Vector3::default() },
            arm_state: ArmState { header: Header::at(start_ns, frame_id), ..ArmState::default() },
        })
    }

    /// One published sample at `time_ns`: joint states, their transforms, the end effector,
    /// `~/state` (and the reference, directions and clock where the node publishes them).
    pub fn sample(
        &mut self,
        bag: &mut BagWriter,
        time_ns: u64,
        frame: &Frame,
        joints: &JointStateData,
    ) -> Result<(), BagError> {
        let stamp = Time::from_nanos(time_ns);
        let state = &mut self.joint_state;
        state.header.stamp = stamp;
        for (field, values) in [
            (&mut state.position, &joints.position),
            (&mut state.velocity, &joints.velocity),
            (&mut state.effort, &joints.effort),
        ] {
            field.clear();
            field.extend_from_slice(values);
        }
        bag.write(self.joint_states, time_ns, &self.joint_state)?;

        self.transforms.transforms.resize_with(self.moving.len(), || TransformStamped {
            header: Header::default(),
            child_frame_id: String::new(),
            transform: Transform { translation: Vector3::default(), rotation: Quaternion::IDENTITY },
        });
        for ((index, joint), message) in self.moving.iter().zip(&mut self.transforms.transforms) {
            if message.child_frame_id.is_empty() {
                message.header.frame_id.clone_from(&joint.parent);
                message.child_frame_id.clone_from(&joint.child);
            }
            message.header.stamp = stamp;
            message.transform = transform(&joint.transform(joints.position[*index]));
        }
        bag.write(self.tf, time_ns, &self.transforms)?;

        let mut point = |bag: &mut BagWriter, topic, v: &Vec3| {
            self.point.header.stamp = stamp;
            self.point.point = Vector3::from(v);
            bag.write(topic, time_ns, &self.point)
        };
        point(bag, self.end_effector, &frame.x)?;
        if let Some(reference) = self.reference {
            point(bag, reference, &frame.x_ref)?;
        }
        self.twist.header.stamp = stamp;
        self.twist.twist.linear = Vector3::from(&frame.x_dot);
        bag.write(self.end_effector_twist, time_ns, &self.twist)?;
        let mut header = std::mem::take(&mut self.arm_state.header);
        header.stamp = stamp;
        self.arm_state = ArmState::of(header, frame);
        bag.write(self.state, time_ns, &self.arm_state)?;
        if let Some(run) = &self.run {
            let mut direction = |bag: &mut BagWriter, topic, v: &Vec3| {
                self.direction.header.stamp = stamp;
                self.direction.vector = Vector3::from(&direction_or_zero(v));
                bag.write(topic, time_ns, &self.direction)
            };
            direction(bag, run.current_direction, &frame.x_dot)?;
            direction(bag, run.desired_direction, &frame.xd_ref)?;
        }
        if let Some(clock) = self.clock {
            bag.write(clock, time_ns, &Clock { clock: stamp })?;
        }
        Ok(())
    }

    /// A run begins at `time_ns`: its reference path and ideal joint trajectory (sil_node's
    /// latched `~/reference_path` and `~/ideal`).
    pub fn run_started(
        &mut self,
        bag: &mut BagWriter,
        time_ns: u64,
        trajectory: &Trajectory,
        ideal: &[IdealPoint],
    ) -> Result<(), BagError> {
        let Some(run) = &self.run else { return Ok(()) };
        let path = ReferencePath::new(time_ns, &self.frame_id, trajectory.waypoints());
        bag.write(run.reference_path, time_ns, &path)?;
        bag.write(run.ideal, time_ns, &IdealTrajectory::new(time_ns, &self.frame_id, ideal, trajectory.start_time()))
    }

    /// The node's status on /diagnostics at `time_ns`.
    pub fn status(&mut self, bag: &mut BagWriter, time_ns: u64, status: &Status) -> Result<(), BagError> {
        bag.write(self.diagnostics, time_ns, &diagnostic_array(time_ns, status))
    }
}

/// std_msgs/Header, borrowing its frame.
#[derive(Debug, Clone, Copy, Serialize)]
struct HeaderRef<'a> {
    stamp: Time,
    frame_id: &'a str,
}

/// `~/reference_path` (nav_msgs/Path) encoded from a trajectory's waypoints as they are: built as
/// a message, it would be a frame string per waypoint.
#[derive(Debug, Clone, Copy)]
pub struct ReferencePath<'a> {
    header: HeaderRef<'a>,
    waypoints: &'a [Waypoint],
}

impl<'a> ReferencePath<'a> {
    /// The path of `waypoints`, stamped `time_ns`, in `frame_id`.
    pub fn new(time_ns: u64, frame_id: &'a str, waypoints: &'a [Waypoint]) -> ReferencePath<'a> {
        ReferencePath { header: HeaderRef { stamp: Time::from_nanos(time_ns), frame_id }, waypoints }
    }
}

impl EncodesAs<Path> for ReferencePath<'_> {}

impl Serialize for ReferencePath<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// geometry_msgs/PoseStamped, borrowing its frame.
        #[derive(Serialize)]
        struct PoseStampedRef<'a> {
            header: HeaderRef<'a>,
            pose: Pose,
        }
        let poses = || {
            self.waypoints.iter().map(|w| PoseStampedRef {
                header: self.header,
                pose: Pose { position: Vector3::from(&w.x), orientation: Quaternion::IDENTITY },
            })
        };
        let mut path = serializer.serialize_struct("Path", 2)?;
        path.serialize_field("header", &self.header)?;
        path.serialize_field("poses", &Sequence(poses))?;
        path.end()
    }
}

/// `~/ideal` (trajectory_msgs/JointTrajectory) encoded from the ideal points as they are: built
/// as a message, it would be three vectors per point.
#[derive(Debug, Clone, Copy)]
pub struct IdealTrajectory<'a> {
    header: HeaderRef<'a>,
    ideal: &'a [IdealPoint],
    /// The trajectory's start [s]: time_from_start counts from there.
    t0: f64,
}

impl<'a> IdealTrajectory<'a> {
    /// The ideal joint motion of a trajectory starting at `t0` [s], stamped `time_ns`, in
    /// `frame_id`.
    pub fn new(time_ns: u64, frame_id: &'a str, ideal: &'a [IdealPoint], t0: f64) -> IdealTrajectory<'a> {
        IdealTrajectory { header: HeaderRef { stamp: Time::from_nanos(time_ns), frame_id }, ideal, t0 }
    }
}

impl EncodesAs<JointTrajectory> for IdealTrajectory<'_> {}

impl Serialize for IdealTrajectory<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// trajectory_msgs/JointTrajectoryPoint, borrowing its values.
        #[derive(Serialize)]
        struct PointRef<'a> {
            positions: &'a [f64],
            velocities: &'a [f64],
            accelerations: &'a [f64],
            effort: &'a [f64],
            time_from_start: super::msgs::Duration,
        }
        let points = || {
            self.ideal.iter().map(|p| PointRef {
                positions: p.theta.as_slice(),
                velocities: p.theta_dot.as_slice(),
                accelerations: &[],
                effort: p.tau.as_slice(),
                time_from_start: super::msgs::Duration::from_secs_f64(p.t - self.t0),
            })
        };
        let mut trajectory = serializer.serialize_struct("JointTrajectory", 3)?;
        trajectory.serialize_field("header", &self.header)?;
        trajectory.serialize_field("joint_names", &JOINT_NAMES[..3])?;
        trajectory.serialize_field("points", &Sequence(points))?;
        trajectory.end()
    }
}

/// A sequence serialised from the iterator its function makes, without collecting it (its length,
/// which CDR writes first, is the iterator's exact size).
struct Sequence<F>(F);

impl<F, I> Serialize for Sequence<F>
where
    F: Fn() -> I,
    I: ExactSizeIterator<Item: Serialize>,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

/// A /diagnostics message holding `status`.
pub fn diagnostic_array(time_ns: u64, status: &Status) -> DiagnosticArray {
    DiagnosticArray {
        header: Header::at(time_ns, ""),
        status: vec![DiagnosticStatus {
            level: status.level as u8,
            name: status.name.clone(),
            message: status.message.clone(),
            hardware_id: status.hardware_id.clone(),
            values: status
                .values
                .iter()
                .map(|(key, value)| KeyValue { key: key.clone(), value: value.clone() })
                .collect(),
        }],
    }
}

/// What a run hands the arm's recorder thread.
#[derive(Debug, Clone)]
pub enum ArmEvent {
    /// A run of this trajectory begins (its path and ideal torques, where the node has them).
    Run { time_ns: u64, trajectory: Arc<Trajectory> },
    /// A published sample.
    Frame { time_ns: u64, frame: Frame },
    /// The node's status.
    Status { time_ns: u64, status: Status },
}

/// Records `node`'s arm topics into `bag` on a thread of its own: the topics are set up there,
/// and joint states and transforms are worked out there from each frame, with `robot` and the
/// running trajectory's elbow.
pub fn spawn_arm_recorder(
    bag: BagWriter,
    robot: Robot,
    node: &str,
    frame_id: &str,
    topics: ArmTopics,
    start_ns: u64,
) -> Result<Recorder<ArmEvent>, ArmRecordingError> {
    let urdf = Urdf::parse(ARM_URDF)?;
    let (node, frame_id) = (node.to_owned(), frame_id.to_owned());
    let recorder = Recorder::spawn(bag, move |bag| {
        let mut arm = ArmRecording::new(bag, &urdf, &node, &frame_id, topics, start_ns)?;
        let mut elbow = robot.elbow();
        Ok(move |bag: &mut BagWriter, event| match event {
            ArmEvent::Run { time_ns, trajectory } => {
                elbow = trajectory.elbow();
                let ideal = match topics.run_outputs {
                    true => IdealTorques::new(&robot, &trajectory).map_while(Result::ok).collect(),
                    false => Vec::new(),
                };
                arm.run_started(bag, time_ns, &trajectory, &ideal)?;
                // The latched path and ideal torques are most of a bag's bytes: out to the file
                // now, while the run goes on, rather than in its tail.
                bag.checkpoint()
            }
            ArmEvent::Frame { time_ns, frame } => {
                let joints = arm_joint_state(&robot, &frame, &elbow);
                arm.sample(bag, time_ns, &frame, &joints)
            }
            ArmEvent::Status { time_ns, status } => arm.status(bag, time_ns, &status),
        })
    })?;
    Ok(recorder)
}
