//! The arm's topics, as sil_node, hil_node and legacy_bridge publish them: /joint_states (with
//! the URDF's passive joints), the end effector, `~/state`, and each node's own; off ROS also
//! what robot_state_publisher adds there: /robot_description and /tf_static (latched) and /tf
//! for every moving joint, so a bag or a live view shows the arm with nothing else running.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::control::{Trajectory, Waypoint};
use crate::hil::LoopStatus;
use crate::model::math::{direction_or_zero, Vec3};
use crate::model::Robot;
use crate::msg::interfaces::{ArmState, LoopStatistics};
use crate::msg::{
    Clock, EncodesAs, Header, JointState, JointTrajectory, Path, PointStamped, Pose, Quaternion, StringMsg, TfMessage,
    Time, Transform, TransformStamped, Twist, TwistStamped, Vector3, Vector3Stamped,
};
use crate::nodes::joints::{arm_joint_state, JOINT_NAMES};
use crate::nodes::robot_state::{JointKind, Urdf, UrdfJoint, ARM_URDF};
use crate::outputs::{Outputs, Qos, Sink, SinkError, Topic};
use crate::sim::{Frame, IdealPoint};

/// Which of the arm's topics a node publishes beyond /joint_states, the end effector and
/// `~/state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmTopicSet {
    /// `~/reference`.
    pub reference: bool,
    /// `~/current_direction`, `~/desired_direction`, `~/reference_path` and `~/ideal`.
    pub run_outputs: bool,
    /// `/clock`, from the time axis (simulated time).
    pub clock: bool,
    /// `~/loop_statistics`.
    pub loop_statistics: bool,
}

impl ArmTopicSet {
    pub const SIL_NODE: ArmTopicSet =
        ArmTopicSet { reference: true, run_outputs: true, clock: true, loop_statistics: false };
    pub const HIL_NODE: ArmTopicSet =
        ArmTopicSet { reference: true, run_outputs: false, clock: false, loop_statistics: true };
    pub const LEGACY_BRIDGE: ArmTopicSet =
        ArmTopicSet { reference: false, run_outputs: false, clock: false, loop_statistics: false };
}

#[derive(Debug)]
struct RunTopics {
    current_direction: Topic<Vector3Stamped>,
    desired_direction: Topic<Vector3Stamped>,
    reference_path: Topic<Path>,
    ideal: Topic<JointTrajectory>,
}

/// What robot_state_publisher publishes from the URDF and /joint_states, for sinks that have no
/// robot_state_publisher beside them.
#[derive(Debug)]
struct RobotStateTopics {
    description: Topic<StringMsg>,
    tf_static: Topic<TfMessage>,
    tf: Topic<TfMessage>,
    fixed: Vec<UrdfJoint>,
    /// The moving joints, each with its index in [`JOINT_NAMES`].
    moving: Vec<(usize, UrdfJoint)>,
    /// Reused sample after sample: only the stamps and transforms change.
    transforms: TfMessage,
}

/// The arm's topics of one node on one sink.
#[derive(Debug)]
pub struct ArmTopics {
    /// The arm whose joints each sample works out.
    robot: Robot,
    frame_id: String,
    joint_states: Topic<JointState>,
    end_effector: Topic<PointStamped>,
    end_effector_twist: Topic<TwistStamped>,
    state: Topic<ArmState>,
    reference: Option<Topic<PointStamped>>,
    run: Option<RunTopics>,
    clock: Option<Topic<Clock>>,
    loop_statistics: Option<Topic<LoopStatistics>>,
    robot_state: Option<RobotStateTopics>,
    // Messages reused sample after sample: only their values change.
    joint_state: JointState,
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

impl ArmTopics {
    /// Advertises `set`'s topics, points in `frame_id`; with `robot_state` (the URDF parsed from
    /// [`ARM_URDF`]) also robot_state_publisher's, published by [`ArmTopics::start`] and with
    /// each sample.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        robot: Robot,
        set: ArmTopicSet,
        frame_id: &str,
        robot_state: Option<&Urdf>,
    ) -> Result<ArmTopics, SinkError> {
        let robot_state = match robot_state {
            Some(urdf) => Some(RobotStateTopics {
                description: out.topic("/robot_description", Qos::LATCHED)?,
                tf_static: out.topic("/tf_static", Qos::LATCHED)?,
                tf: out.topic("/tf", Qos::TF)?,
                fixed: urdf.joints.iter().filter(|joint| joint.kind == JointKind::Fixed).cloned().collect(),
                moving: JOINT_NAMES
                    .iter()
                    .enumerate()
                    .filter_map(|(index, name)| urdf.joint(name).map(|joint| (index, joint.clone())))
                    .collect(),
                transforms: TfMessage { transforms: Vec::new() },
            }),
            None => None,
        };
        let run = match set.run_outputs {
            true => Some(RunTopics {
                current_direction: out.topic("~/current_direction", Qos::STREAM)?,
                desired_direction: out.topic("~/desired_direction", Qos::STREAM)?,
                reference_path: out.topic("~/reference_path", Qos::LATCHED)?,
                ideal: out.topic("~/ideal", Qos::LATCHED)?,
            }),
            false => None,
        };
        Ok(ArmTopics {
            robot,
            frame_id: frame_id.to_owned(),
            joint_states: out.topic("joint_states", Qos::STREAM)?,
            end_effector: out.topic("~/end_effector", Qos::STREAM)?,
            end_effector_twist: out.topic("~/end_effector_twist", Qos::STREAM)?,
            state: out.topic("~/state", Qos::STREAM)?,
            reference: set.reference.then(|| out.topic("~/reference", Qos::STREAM)).transpose()?,
            run,
            clock: set.clock.then(|| out.topic("/clock", Qos::CLOCK)).transpose()?,
            loop_statistics: set.loop_statistics.then(|| out.topic("~/loop_statistics", Qos::STREAM)).transpose()?,
            robot_state,
            joint_state: JointState {
                header: Header::default(),
                name: JOINT_NAMES.iter().map(|name| (*name).to_owned()).collect(),
                position: Vec::with_capacity(JOINT_NAMES.len()),
                velocity: Vec::with_capacity(JOINT_NAMES.len()),
                effort: Vec::with_capacity(JOINT_NAMES.len()),
            },
            point: PointStamped { header: Header::at(0, frame_id), point: Vector3::default() },
            twist: TwistStamped {
                header: Header::at(0, frame_id),
                twist: Twist { linear: Vector3::default(), angular: Vector3::default() },
            },
            direction: Vector3Stamped { header: Header::at(0, frame_id), vector: Vector3::default() },
            arm_state: ArmState { header: Header::at(0, frame_id), ..ArmState::default() },
        })
    }

    /// The arm whose joints each sample works out.
    pub fn robot(&self) -> &Robot {
        &self.robot
    }

    /// Publishes what is latched from the start at `time_ns`: /robot_description and
    /// /tf_static, where this sink has robot_state_publisher's topics.
    pub fn start<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        let Some(robot) = &self.robot_state else { return Ok(()) };
        out.publish(robot.description, time_ns, &StringMsg { data: ARM_URDF.to_owned() })?;
        let fixed = robot
            .fixed
            .iter()
            .map(|joint| TransformStamped {
                header: Header::at(time_ns, &joint.parent),
                child_frame_id: joint.child.clone(),
                transform: transform(&joint.transform(0.0)),
            })
            .collect();
        out.publish(robot.tf_static, time_ns, &TfMessage { transforms: fixed })
    }

    /// One published sample of `frame` at `time_ns`: joint states (with the passive joints of
    /// a forearm pivoting at `elbow` [m], and their transforms), the end effector, `~/state`,
    /// and its reference, directions and clock where the node publishes them.
    pub fn sample<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        frame: &Frame,
        elbow: &Vec3,
    ) -> Result<(), SinkError> {
        let joints = arm_joint_state(&self.robot, frame, elbow);
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
        out.publish(self.joint_states, time_ns, &self.joint_state)?;

        if let Some(robot) = &mut self.robot_state {
            robot.transforms.transforms.resize_with(robot.moving.len(), || TransformStamped {
                header: Header::default(),
                child_frame_id: String::new(),
                transform: Transform { translation: Vector3::default(), rotation: Quaternion::IDENTITY },
            });
            for ((index, joint), message) in robot.moving.iter().zip(&mut robot.transforms.transforms) {
                if message.child_frame_id.is_empty() {
                    message.header.frame_id.clone_from(&joint.parent);
                    message.child_frame_id.clone_from(&joint.child);
                }
                message.header.stamp = stamp;
                message.transform = transform(&joint.transform(joints.position[*index]));
            }
            out.publish(robot.tf, time_ns, &robot.transforms)?;
        }

        let mut point = |out: &mut Outputs<S>, topic, v: &Vec3| {
            self.point.header.stamp = stamp;
            self.point.point = Vector3::from(v);
            out.publish(topic, time_ns, &self.point)
        };
        point(out, self.end_effector, &frame.x)?;
        if let Some(reference) = self.reference {
            point(out, reference, &frame.x_ref)?;
        }
        self.twist.header.stamp = stamp;
        self.twist.twist.linear = Vector3::from(&frame.x_dot);
        out.publish(self.end_effector_twist, time_ns, &self.twist)?;
        let mut header = std::mem::take(&mut self.arm_state.header);
        header.stamp = stamp;
        self.arm_state = ArmState::of(header, frame);
        out.publish(self.state, time_ns, &self.arm_state)?;
        if let Some(run) = &self.run {
            let mut direction = |out: &mut Outputs<S>, topic, v: &Vec3| {
                self.direction.header.stamp = stamp;
                self.direction.vector = Vector3::from(&direction_or_zero(v));
                out.publish(topic, time_ns, &self.direction)
            };
            direction(out, run.current_direction, &frame.x_dot)?;
            direction(out, run.desired_direction, &frame.xd_ref)?;
        }
        if let Some(clock) = self.clock {
            out.publish(clock, time_ns, &Clock { clock: stamp })?;
        }
        Ok(())
    }

    /// A run begins at `time_ns`: its reference path and ideal joint trajectory (sil_node's
    /// latched `~/reference_path` and `~/ideal`), where the node publishes them.
    pub fn run_started<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        trajectory: &Trajectory,
        ideal: &[IdealPoint],
    ) -> Result<(), SinkError> {
        let Some(run) = &self.run else { return Ok(()) };
        let path = ReferencePath::new(time_ns, &self.frame_id, trajectory.waypoints());
        out.publish(run.reference_path, time_ns, &path)?;
        let ideal = IdealTrajectory::new(time_ns, &self.frame_id, ideal, trajectory.start_time());
        out.publish(run.ideal, time_ns, &ideal)
    }

    /// The HIL loop's statistics since it started, where the node publishes them.
    pub fn loop_statistics<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        status: &LoopStatus,
    ) -> Result<(), SinkError> {
        match self.loop_statistics {
            Some(topic) => out.publish(topic, time_ns, &LoopStatistics::of(Header::at(time_ns, ""), status)),
            None => Ok(()),
        }
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
            time_from_start: crate::msg::Duration,
        }
        let points = || {
            self.ideal.iter().map(|p| PointRef {
                positions: p.theta.as_slice(),
                velocities: p.theta_dot.as_slice(),
                accelerations: &[],
                effort: p.tau.as_slice(),
                time_from_start: crate::msg::Duration::from_secs_f64(p.t - self.t0),
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

impl ArmState {
    /// The state in `frame`, stamped with `header`.
    pub fn of(header: Header, frame: &Frame) -> ArmState {
        let error = frame.tracking_error();
        ArmState {
            header,
            time: frame.t,
            position: Vector3::from(&frame.x),
            velocity: Vector3::from(&frame.x_dot),
            joint_positions: frame.theta.into(),
            joint_velocities: frame.theta_dot.into(),
            joint_efforts: frame.tau.into(),
            reference_position: Vector3::from(&frame.x_ref),
            reference_velocity: Vector3::from(&frame.xd_ref),
            tracking_error: Vector3::from(&error),
            tracking_error_norm: error.norm(),
        }
    }
}

impl LoopStatistics {
    /// The loop's figures in `status` (microseconds become seconds).
    pub fn of(header: Header, status: &LoopStatus) -> LoopStatistics {
        LoopStatistics {
            header,
            rate_hz: status.rate_hz,
            cycles: status.cycles,
            overruns: status.overruns,
            longest_overrun: status.longest_overrun_us * 1e-6,
            skipped_periods: status.skipped_periods,
            jitter_p50: status.jitter_p50_us * 1e-6,
            jitter_p99: status.jitter_p99_us * 1e-6,
            jitter_max: status.jitter_max_us * 1e-6,
            sensor_readings: status.sensor_readings,
            starved_cycles: status.starved_cycles,
            rms_error: status.rms_error_m,
            max_error: status.max_error_m,
            error_from_truth: status.error_from_truth,
        }
    }
}
