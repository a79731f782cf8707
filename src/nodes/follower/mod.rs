//! FollowJointTrajectory without ROS: one follower that every motion node (sil_node, hil_node,
//! stm32_driver, arduino_driver) runs a goal through, with ros2_control's
//! joint_trajectory_controller's semantics: a goal is validated before anything moves (its
//! joints, times, limits and the device's own check), timed from its header stamp, interpolated
//! from the device's state ([`spline`]), watched against its path and goal tolerances; a new
//! goal replaces the running one, and cancel, a violation or the end holds the joints where
//! they are. The node converts messages and applies the setpoints; the follower decides.

pub mod goals;
pub mod spline;

use serde::{Deserialize, Serialize};
use spline::{Sample, Spline, TrajectoryPoint};

/// control_msgs/FollowJointTrajectory's result codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Successful = 0,
    InvalidGoal = -1,
    InvalidJoints = -2,
    OldHeaderTimestamp = -3,
    PathToleranceViolated = -4,
    GoalToleranceViolated = -5,
}

/// A goal refused before anything moved, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub reason: String,
}

impl Refusal {
    fn new(code: ErrorCode, reason: impl Into<String>) -> Refusal {
        Refusal { code, reason: reason.into() }
    }
}

/// How a goal ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every joint within goal tolerance at the end.
    Succeeded,
    /// A path or goal tolerance was violated; the joints hold where they were.
    Aborted { code: ErrorCode, reason: String },
    /// Cancelled, or replaced by a new goal; the joints hold (or follow the new goal).
    Canceled { reason: String },
}

/// One joint's tolerance, as control_msgs/JointTolerance: 0 takes the node's default, a
/// negative value checks nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct JointTolerance {
    /// [rad]
    pub position: f64,
    /// [rad/s]
    pub velocity: f64,
}

/// A goal's tolerances, per joint in the device's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tolerances {
    pub path: Vec<JointTolerance>,
    pub goal: Vec<JointTolerance>,
    /// How long after the trajectory's end the joints may take to come within goal tolerance
    /// [s]; 0 waits as long as it takes.
    pub goal_time_s: f64,
}

/// A node's default tolerances, its `constraints.*` parameters, as joint_trajectory_controller's
/// `constraints` but per joint as arrays in the device's order (one value: every joint), since
/// the joints' names are parameters themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Constraints {
    /// How long after the trajectory's end the joints may take to come within goal tolerance
    /// [s]; 0 waits as long as it takes.
    pub goal_time: f64,
    /// Position tolerance at the end [rad].
    pub goal: Vec<f64>,
    /// Position tolerance along the trajectory [rad]; 0 checks nothing.
    pub trajectory: Vec<f64>,
}

impl Default for Constraints {
    fn default() -> Self {
        Constraints { goal_time: 1.0, goal: vec![0.02], trajectory: vec![0.0] }
    }
}

impl Constraints {
    /// These constraints as the tolerances of a device of `joints` joints.
    pub fn tolerances(&self, joints: usize) -> Result<Tolerances, String> {
        let per_joint = |values: &[f64], name: &str| match values {
            [every] => Ok(vec![JointTolerance { position: *every, velocity: 0.0 }; joints]),
            values if values.len() == joints => {
                Ok(values.iter().map(|&position| JointTolerance { position, velocity: 0.0 }).collect())
            }
            values => {
                Err(format!("constraints.{name} holds {} values: one, or one per joint ({joints})", values.len()))
            }
        };
        if !(self.goal_time >= 0.0) {
            return Err(format!("constraints.goal_time must be 0 or more, got {}", self.goal_time));
        }
        Ok(Tolerances {
            path: per_joint(&self.trajectory, "trajectory")?,
            goal: per_joint(&self.goal, "goal")?,
            goal_time_s: self.goal_time,
        })
    }
}

/// The device's actuated joints, in its own order, with their limits [rad].
#[derive(Debug, Clone, PartialEq)]
pub struct Joints {
    pub names: Vec<String>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
}

/// A FollowJointTrajectory goal, as the message carries it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Goal {
    pub joint_names: Vec<String>,
    pub points: Vec<TrajectoryPoint>,
    /// The trajectory's start on the node's clock [ns]; 0 starts it now.
    pub stamp_ns: u64,
    /// Named joints' tolerances; joints not named take the node's defaults.
    pub path_tolerance: Vec<(String, JointTolerance)>,
    pub goal_tolerance: Vec<(String, JointTolerance)>,
    /// [s]; 0 takes the node's default.
    pub goal_time_tolerance_s: f64,
}

/// The joints' state: positions [rad] and velocities [rad/s], in the device's order.
#[derive(Debug, Clone, PartialEq)]
pub struct JointState {
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
}

/// What one look at the running goal gives: where the joints are to be, how far they are from
/// it, and whether the goal ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub desired: Sample,
    /// desired - actual, per joint [rad].
    pub error: Vec<f64>,
    pub ended: Option<Outcome>,
}

/// A goal being followed.
#[derive(Debug, Clone, PartialEq)]
struct Running {
    spline: Spline,
    start_ns: u64,
    tolerances: Tolerances,
}

/// The follower of one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Follower {
    joints: Joints,
    defaults: Tolerances,
    running: Option<Running>,
    /// Where the joints hold between goals, once a goal has ended.
    holding: Option<Vec<f64>>,
}

fn finite(values: &[f64]) -> bool {
    values.iter().all(|value| value.is_finite())
}

impl Follower {
    /// The follower of `joints`, with the node's default tolerances.
    pub fn new(joints: Joints, defaults: Tolerances) -> Follower {
        Follower { joints, defaults, running: None, holding: None }
    }

    pub fn joints(&self) -> &Joints {
        &self.joints
    }

    /// Whether a goal is being followed.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The running goal's trajectory and its start on the node's clock [ns]: what a device that
    /// takes whole trajectories (the simulated arm) plays.
    pub fn plan(&self) -> Option<(&Spline, u64)> {
        self.running.as_ref().map(|running| (&running.spline, running.start_ns))
    }

    /// Where the joints hold, when no goal runs and one has ended.
    pub fn holding(&self) -> Option<&[f64]> {
        self.holding.as_deref()
    }

    /// Takes `goal` at `now_ns` from the joints' state `actual`, refusing it (nothing moves)
    /// when it names unknown, missing or repeated joints, has no points, times that do not
    /// increase, a value that is not finite, a position outside the joints' limits or one that
    /// `reachable` refuses (the device's own check, given the positions in its order), or ends
    /// before now. A goal that was running is replaced: its outcome comes back.
    pub fn accept(
        &mut self,
        goal: &Goal,
        now_ns: u64,
        actual: &JointState,
        reachable: impl Fn(&[f64]) -> Result<(), String>,
    ) -> Result<Option<Outcome>, Refusal> {
        let order = self.order(&goal.joint_names)?;
        if goal.points.is_empty() {
            return Err(Refusal::new(ErrorCode::InvalidGoal, "the trajectory has no points"));
        }
        let mut points = Vec::with_capacity(goal.points.len());
        let mut previous = f64::NEG_INFINITY;
        for (index, point) in goal.points.iter().enumerate() {
            let invalid = |reason: String| Refusal::new(ErrorCode::InvalidGoal, format!("point {index}: {reason}"));
            let joints = goal.joint_names.len();
            if point.positions.len() != joints
                || !(point.velocities.is_empty() || point.velocities.len() == joints)
                || !(point.accelerations.is_empty() || point.accelerations.len() == joints)
            {
                return Err(invalid(format!("{joints} joints named, the point's values do not match")));
            }
            let values = [&point.positions, &point.velocities, &point.accelerations];
            if !(values.iter().all(|values| finite(values)) && point.time_s.is_finite()) {
                return Err(invalid("a value is not finite".into()));
            }
            if !(point.time_s > previous && point.time_s >= 0.0) {
                return Err(invalid(format!("time_from_start {} s does not follow {} s", point.time_s, previous)));
            }
            previous = point.time_s;
            let reorder = |values: &[f64]| match values.is_empty() {
                true => Vec::new(),
                false => order.iter().map(|&from| values[from]).collect(),
            };
            let ordered = TrajectoryPoint {
                time_s: point.time_s,
                positions: reorder(&point.positions),
                velocities: reorder(&point.velocities),
                accelerations: reorder(&point.accelerations),
            };
            for (joint, position) in ordered.positions.iter().enumerate() {
                let (lower, upper) = (self.joints.lower[joint], self.joints.upper[joint]);
                if !(lower..=upper).contains(position) {
                    let name = &self.joints.names[joint];
                    return Err(invalid(format!("{name} at {position} rad is outside [{lower}, {upper}]")));
                }
            }
            reachable(&ordered.positions).map_err(invalid)?;
            points.push(ordered);
        }
        let start_ns = if goal.stamp_ns == 0 { now_ns } else { goal.stamp_ns };
        let end_ns = start_ns.saturating_add((previous * 1e9) as u64);
        if end_ns < now_ns {
            return Err(Refusal::new(
                ErrorCode::OldHeaderTimestamp,
                format!("the trajectory ended {:.3} s ago", (now_ns - end_ns) as f64 * 1e-9),
            ));
        }
        let tolerances = Tolerances {
            path: self.tolerances(&goal.path_tolerance, &self.defaults.path)?,
            goal: self.tolerances(&goal.goal_tolerance, &self.defaults.goal)?,
            goal_time_s: if goal.goal_time_tolerance_s > 0.0 {
                goal.goal_time_tolerance_s
            } else {
                self.defaults.goal_time_s
            },
        };
        // The trajectory starts where the joints are, at its stamp (JTC's first segment).
        let start = TrajectoryPoint {
            time_s: 0.0,
            positions: actual.positions.clone(),
            velocities: actual.velocities.clone(),
            accelerations: Vec::new(),
        };
        let replaced = self.running.take().map(|_| Outcome::Canceled { reason: "replaced by a new goal".into() });
        self.running = Some(Running { spline: Spline::new(start, &points), start_ns, tolerances });
        self.holding = None;
        Ok(replaced)
    }

    /// Each of the device's joints' index in `names`: every joint named once, no other.
    fn order(&self, names: &[String]) -> Result<Vec<usize>, Refusal> {
        let invalid = |reason: String| Refusal::new(ErrorCode::InvalidJoints, reason);
        for (index, name) in names.iter().enumerate() {
            if !self.joints.names.contains(name) {
                return Err(invalid(format!("unknown joint {name}; this device has {}", self.joints.names.join(", "))));
            }
            if names[..index].contains(name) {
                return Err(invalid(format!("{name} is named twice")));
            }
        }
        self.joints
            .names
            .iter()
            .map(|joint| {
                names.iter().position(|name| name == joint).ok_or_else(|| invalid(format!("{joint} is missing")))
            })
            .collect()
    }

    /// The goal's `given` tolerances over the node's `defaults`, in the device's order.
    fn tolerances(
        &self,
        given: &[(String, JointTolerance)],
        defaults: &[JointTolerance],
    ) -> Result<Vec<JointTolerance>, Refusal> {
        let mut tolerances = defaults.to_vec();
        for (name, tolerance) in given {
            let Some(joint) = self.joints.names.iter().position(|joint| joint == name) else {
                return Err(Refusal::new(ErrorCode::InvalidJoints, format!("a tolerance names unknown joint {name}")));
            };
            let pick = |given: f64, default: f64| if given == 0.0 { default } else { given };
            tolerances[joint] = JointTolerance {
                position: pick(tolerance.position, defaults[joint].position),
                velocity: pick(tolerance.velocity, defaults[joint].velocity),
            };
        }
        Ok(tolerances)
    }

    /// Cancels the running goal: the joints hold where they are (`actual`). None if no goal ran.
    pub fn cancel(&mut self, actual: &JointState) -> Option<Outcome> {
        self.running.take()?;
        self.holding = Some(actual.positions.clone());
        Some(Outcome::Canceled { reason: "cancelled".into() })
    }

    /// The running goal at `now_ns` with the joints at `actual`: the setpoint, the error, and
    /// its outcome once it ends (then the joints hold). None when no goal runs.
    pub fn update(&mut self, now_ns: u64, actual: &JointState) -> Option<Step> {
        let running = self.running.as_ref()?;
        let t = now_ns.saturating_sub(running.start_ns) as f64 * 1e-9;
        // Before its stamp the trajectory waits at its start.
        let desired = running.spline.sample(t.max(0.0));
        let error: Vec<f64> = desired.positions.iter().zip(&actual.positions).map(|(d, a)| d - a).collect();
        let velocity_error: Vec<f64> = desired.velocities.iter().zip(&actual.velocities).map(|(d, a)| d - a).collect();
        let outside = |tolerances: &[JointTolerance]| {
            (0..error.len()).find(|&joint| {
                let tolerance = tolerances[joint];
                let position = tolerance.position > 0.0 && error[joint].abs() > tolerance.position;
                let velocity =
                    tolerance.velocity > 0.0 && velocity_error.get(joint).is_some_and(|e| e.abs() > tolerance.velocity);
                position || velocity
            })
        };
        let end_s = running.spline.end_s();
        let ended = if t < end_s {
            outside(&running.tolerances.path).map(|joint| Outcome::Aborted {
                code: ErrorCode::PathToleranceViolated,
                reason: format!("{} is {:.4} rad off its path at {t:.3} s", self.joints.names[joint], error[joint]),
            })
        } else {
            match outside(&running.tolerances.goal) {
                None => Some(Outcome::Succeeded),
                Some(joint) if running.tolerances.goal_time_s > 0.0 && t > end_s + running.tolerances.goal_time_s => {
                    Some(Outcome::Aborted {
                        code: ErrorCode::GoalToleranceViolated,
                        reason: format!(
                            "{} is {:.4} rad from its goal {:.3} s after the trajectory's end",
                            self.joints.names[joint],
                            error[joint],
                            t - end_s
                        ),
                    })
                }
                Some(_) => None,
            }
        };
        match &ended {
            Some(Outcome::Succeeded) => self.holding = Some(running.spline.last_positions().to_vec()),
            Some(_) => self.holding = Some(actual.positions.clone()),
            None => {}
        }
        if ended.is_some() {
            self.running = None;
        }
        Some(Step { desired, error, ended })
    }
}
