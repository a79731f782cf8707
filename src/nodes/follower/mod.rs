//! FollowJointTrajectory without ROS: one follower that every motion node (sil_node, hil_node,
//! stm32_driver, arduino_driver) runs a goal through, with ros2_control's
//! joint_trajectory_controller's semantics: a goal is validated whole before anything moves (its
//! cost against the node's [`GoalLimits`] first, then its joints, times, limits and speeds, then
//! the device's own check of the [`Plan`]), timed from its header stamp with its first segment
//! from the joints' state at receipt, interpolated ([`spline`]), watched against its path and
//! goal tolerances, and done only with the joints within tolerance and stopped; a new goal
//! replaces the running one only once it is known valid, and cancel, a violation or the end
//! holds the joints where they are. The node converts messages and applies the setpoints; the
//! follower decides.

pub mod clocks;
mod constraints;
pub mod goals;
pub mod spline;
pub mod stream_gate;

pub use constraints::{Constraints, GoalLimits};
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
    pub fn new(code: ErrorCode, reason: impl Into<String>) -> Refusal {
        Refusal { code, reason: reason.into() }
    }
}

/// How a goal ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every joint within goal tolerance and stopped at the end.
    Succeeded,
    /// A tolerance was violated, or the node stopped commanding (deactivated, a fault, a
    /// protective stop, shut down): the joints hold where they were.
    Aborted { code: ErrorCode, reason: String },
    /// Cancelled, or replaced by a new goal or another command; the joints hold (or follow
    /// what replaced it).
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
    /// [s]; in a plan, always more than 0 and within the goal limits.
    pub goal_time_s: f64,
}

/// The device's actuated joints, in its own order, with their limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Joints {
    pub names: Vec<String>,
    /// [rad]
    pub lower: Vec<f64>,
    /// [rad]
    pub upper: Vec<f64>,
    /// The fastest each joint may be asked to move [rad/s].
    pub max_velocity: Vec<f64>,
}

/// A FollowJointTrajectory goal, as the message carries it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Goal {
    pub joint_names: Vec<String>,
    pub points: Vec<TrajectoryPoint>,
    /// The trajectory's start on the node's clock [ns]; 0 starts it at its receipt.
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

/// A goal validated and timed, not yet followed: the trajectory from the joints' state at
/// receipt (its time 0, at `start_ns` on the node's clock) through the goal's points, in the
/// device's order. A node checks it further (the arm's workspace, say) before it replaces the
/// goal followed.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    spline: Spline,
    start_ns: u64,
    tolerances: Tolerances,
}

impl Plan {
    pub fn spline(&self) -> &Spline {
        &self.spline
    }

    /// When the trajectory starts, its receipt [ns, the node's clock].
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// The trajectory at `now_ns` [ns, the node's clock]; its start before it, its end after.
    pub fn sample_at(&self, now_ns: u64) -> Sample {
        self.spline.sample(self.seconds_at(now_ns))
    }

    /// `now_ns` as the trajectory's time [s].
    fn seconds_at(&self, now_ns: u64) -> f64 {
        now_ns.saturating_sub(self.start_ns) as f64 * 1e-9
    }
}

/// How finely a plan's segments are sampled for its speed and limit checks.
const CHECKS_PER_SEGMENT: usize = 8;

/// The follower of one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Follower {
    joints: Joints,
    defaults: Tolerances,
    limits: GoalLimits,
    running: Option<Plan>,
    /// Where the joints hold between goals, once a goal has ended.
    holding: Option<Vec<f64>>,
}

fn finite(values: &[f64]) -> bool {
    values.iter().all(|value| value.is_finite())
}

impl Follower {
    /// The follower of `joints`, with the node's default tolerances and goal limits.
    pub fn new(joints: Joints, defaults: Tolerances, limits: GoalLimits) -> Follower {
        Follower { joints, defaults, limits, running: None, holding: None }
    }

    pub fn joints(&self) -> &Joints {
        &self.joints
    }

    /// The node's bounds on a goal, which its Cartesian goals keep as well.
    pub fn limits(&self) -> &GoalLimits {
        &self.limits
    }

    /// Whether a goal is being followed.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The running goal's plan: what a device that takes whole trajectories (the simulated arm)
    /// plays.
    pub fn plan(&self) -> Option<&Plan> {
        self.running.as_ref()
    }

    /// Where the joints hold, when no goal runs and one has ended.
    pub fn holding(&self) -> Option<&[f64]> {
        self.holding.as_deref()
    }

    /// Takes `goal` at `now_ns` from the joints' state `actual`: [`Follower::validate`], then
    /// the device's `check` of the plan, and only then the goal replaces the one running, whose
    /// outcome comes back. A refused goal leaves the running one as it was.
    pub fn accept(
        &mut self,
        goal: &Goal,
        now_ns: u64,
        actual: &JointState,
        check: impl FnOnce(&Plan) -> Result<(), String>,
    ) -> Result<Option<Outcome>, Refusal> {
        let plan = self.validate(goal, now_ns, actual)?;
        check(&plan).map_err(|reason| Refusal::new(ErrorCode::InvalidGoal, reason))?;
        Ok(self.start(plan))
    }

    /// Follows `plan` in place of the running goal, whose outcome comes back.
    pub fn start(&mut self, plan: Plan) -> Option<Outcome> {
        let replaced =
            self.running.replace(plan).map(|_| Outcome::Canceled { reason: "replaced by a new goal".into() });
        self.holding = None;
        replaced
    }

    /// Checks `goal` received at `now_ns` with the joints at `actual`, cheapest first, and
    /// plans it. Refused (nothing moves): more points than the limits allow; joints unknown,
    /// missing or repeated; no points; a value that is not finite; times that do not increase;
    /// an end before its receipt, or further from it than the limits allow; a position outside
    /// the joints' limits or a speed over theirs anywhere along the trajectory.
    pub fn validate(&self, goal: &Goal, now_ns: u64, actual: &JointState) -> Result<Plan, Refusal> {
        let joints = self.joints.names.len();
        if goal.points.len() > self.limits.max_points as usize {
            return Err(Refusal::new(
                ErrorCode::InvalidGoal,
                format!("{} points, more than goal_limits.max_points ({})", goal.points.len(), self.limits.max_points),
            ));
        }
        let order = self.order(&goal.joint_names)?;
        let Some(last) = goal.points.last() else {
            return Err(Refusal::new(ErrorCode::InvalidGoal, "the trajectory has no points"));
        };
        let mut previous = f64::NEG_INFINITY;
        for (index, point) in goal.points.iter().enumerate() {
            let invalid = |reason: String| Refusal::new(ErrorCode::InvalidGoal, format!("point {index}: {reason}"));
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
        }
        // The goal's times from its receipt: a stamp in the future delays it, one in the past
        // brings it forward (0: it starts at its receipt).
        let offset_s = match goal.stamp_ns {
            0 => 0.0,
            stamp => (stamp as f64 - now_ns as f64) * 1e-9,
        };
        let end_s = offset_s + last.time_s;
        if !(end_s > 0.0) {
            return Err(match goal.stamp_ns {
                0 => Refusal::new(ErrorCode::InvalidGoal, "the trajectory ends at its receipt: nothing to move to"),
                _ => Refusal::new(ErrorCode::OldHeaderTimestamp, format!("the trajectory ended {:.3} s ago", -end_s)),
            });
        }
        if !(end_s <= self.limits.max_duration_s) {
            return Err(Refusal::new(
                ErrorCode::InvalidGoal,
                format!(
                    "the trajectory ends {end_s:.3} s after its receipt, later than goal_limits.max_duration_s ({} s)",
                    self.limits.max_duration_s
                ),
            ));
        }
        // How long the joints may take to reach the end, bounded with the trajectory so that
        // every goal ends: the goal's own must fit in the goal limits; the node's default (0:
        // none) is cut to what they leave.
        let left_s = (self.limits.max_duration_s - end_s).max(f64::MIN_POSITIVE);
        let goal_time_s = match (goal.goal_time_tolerance_s, self.defaults.goal_time_s) {
            (given, _) if given > 0.0 && given > left_s => {
                return Err(Refusal::new(
                    ErrorCode::InvalidGoal,
                    format!(
                        "goal_time_tolerance {given} s after the trajectory's end ({end_s:.3} s after its receipt) \
                         is later than goal_limits.max_duration_s ({} s)",
                        self.limits.max_duration_s
                    ),
                ))
            }
            (given, _) if given > 0.0 => given,
            (_, default) if default > 0.0 => default.min(left_s),
            _ => left_s,
        };
        // Points due at or before the receipt are past: the first segment runs from the joints'
        // state then to the first point still to come (joint_trajectory_controller's first
        // segment), never a jump.
        let due = |point: &TrajectoryPoint| offset_s + point.time_s;
        let mut points: Vec<TrajectoryPoint> = Vec::with_capacity(goal.points.len());
        for (index, point) in goal.points.iter().enumerate().filter(|(_, point)| due(point) > 0.0) {
            // Times a hair apart can fall together once the stamp's offset is added to them: a
            // segment of no time would jump, and its end would escape the limit checks.
            if let Some(before) = points.last().filter(|before| !(due(point) > before.time_s)) {
                return Err(Refusal::new(
                    ErrorCode::InvalidGoal,
                    format!(
                        "point {index}: due {:.9} s after its receipt, no later than the point before it ({:.9} s): \
                         too close to it for the header stamp's offset",
                        due(point),
                        before.time_s
                    ),
                ));
            }
            let reorder = |values: &[f64]| match values.is_empty() {
                true => Vec::new(),
                false => order.iter().map(|&from| values[from]).collect(),
            };
            points.push(TrajectoryPoint {
                time_s: due(point),
                positions: reorder(&point.positions),
                velocities: reorder(&point.velocities),
                accelerations: reorder(&point.accelerations),
            });
        }
        let skipped = goal.points.len() - points.len();
        let state_ok = actual.positions.len() == joints && finite(&actual.positions) && finite(&actual.velocities);
        if !state_ok {
            return Err(Refusal::new(ErrorCode::InvalidGoal, "the joints' state is not known: nothing can start"));
        }
        let start = TrajectoryPoint {
            time_s: 0.0,
            positions: actual.positions.clone(),
            velocities: actual.velocities.clone(),
            accelerations: Vec::new(),
        };
        let spline = Spline::new(start, &points);
        self.check_limits(&spline).map_err(|reason| {
            let skipped = match skipped {
                0 => String::new(),
                n => format!(" ({n} points were due before its receipt ({:.3} s after the stamp))", -offset_s),
            };
            Refusal::new(ErrorCode::InvalidGoal, format!("{reason}{skipped}"))
        })?;
        let tolerances = Tolerances {
            path: self.tolerances(&goal.path_tolerance, &self.defaults.path)?,
            goal: self.tolerances(&goal.goal_tolerance, &self.defaults.goal)?,
            goal_time_s,
        };
        Ok(Plan { spline, start_ns: now_ns, tolerances })
    }

    /// Why `spline` leaves the joints' limits or goes faster than they may, if it does: its
    /// points' positions, and [`CHECKS_PER_SEGMENT`] samples inside each segment (a cubic or quintic may
    /// overshoot its ends).
    fn check_limits(&self, spline: &Spline) -> Result<(), String> {
        // The goal's own points (the start is where the joints are, wherever that is).
        spline.points().iter().skip(1).try_for_each(|point| {
            point
                .positions
                .iter()
                .enumerate()
                .try_for_each(|(joint, &position)| self.within(joint, position, point.time_s))
        })?;
        // However short a segment, its mean speed is at most the top speed (its samples below
        // may fall outside it, its polynomial's end a hair from its start).
        spline.points().windows(2).try_for_each(|pair| {
            let dt = pair[1].time_s - pair[0].time_s;
            (0..self.joints.names.len()).try_for_each(|joint| {
                let speed = (pair[1].positions[joint] - pair[0].positions[joint]).abs() / dt;
                let top = self.joints.max_velocity[joint];
                match speed <= top * (1.0 + 1e-9) {
                    true => Ok(()),
                    false => Err(format!(
                        "{} would move at {speed:.3} rad/s on average from {:.9} s to {:.9} s, faster than its \
                         limit {top} rad/s",
                        self.joints.names[joint], pair[0].time_s, pair[1].time_s
                    )),
                }
            })
        })?;
        let mut sample_times = spline.times().zip(spline.times().skip(1)).flat_map(|(from, to)| {
            (1..=CHECKS_PER_SEGMENT)
                .map(move |k| (from + (to - from) * k as f64 / CHECKS_PER_SEGMENT as f64, to - from))
        });
        sample_times.try_for_each(|(t, length)| {
            // Just inside the segment's end, where its own polynomial still holds.
            let sample = spline.sample(t - length * 1e-6);
            (0..self.joints.names.len()).try_for_each(|joint| {
                self.within(joint, sample.positions[joint], t)?;
                let (name, velocity, top) =
                    (&self.joints.names[joint], sample.velocities[joint], self.joints.max_velocity[joint]);
                match velocity.abs() <= top * (1.0 + 1e-9) {
                    true => Ok(()),
                    false => Err(format!(
                        "{name} would move at {:.3} rad/s at {t:.3} s, faster than its limit {top} rad/s",
                        velocity.abs()
                    )),
                }
            })
        })
    }

    /// Why `position` [rad] of `joint` at `t` [s] is outside its limits, if it is.
    fn within(&self, joint: usize, position: f64, t: f64) -> Result<(), String> {
        let (lower, upper) = (self.joints.lower[joint], self.joints.upper[joint]);
        match (lower..=upper).contains(&position) {
            true => Ok(()),
            false => Err(format!(
                "{} at {position:.4} rad at {t:.3} s is outside [{lower}, {upper}]",
                self.joints.names[joint]
            )),
        }
    }

    /// Each of the device's joints' index in `names`: every joint named once, no other.
    fn order(&self, names: &[String]) -> Result<Vec<usize>, Refusal> {
        let invalid = |reason: String| Refusal::new(ErrorCode::InvalidJoints, reason);
        let joints = &self.joints.names;
        if names.len() != joints.len() {
            return Err(invalid(format!(
                "{} joints named; this device has {}: {}",
                names.len(),
                joints.len(),
                joints.join(", ")
            )));
        }
        for (index, name) in names.iter().enumerate() {
            if !joints.contains(name) {
                return Err(invalid(format!("unknown joint {name}; this device has {}", joints.join(", "))));
            }
            if names[..index].contains(name) {
                return Err(invalid(format!("{name} is named twice")));
            }
        }
        joints
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
        if given.len() > self.joints.names.len() {
            return Err(Refusal::new(ErrorCode::InvalidJoints, "more tolerances than joints"));
        }
        for (name, tolerance) in given {
            let Some(joint) = self.joints.names.iter().position(|joint| joint == name) else {
                return Err(Refusal::new(ErrorCode::InvalidJoints, format!("a tolerance names unknown joint {name}")));
            };
            if tolerance.position.is_nan() || tolerance.velocity.is_nan() {
                return Err(Refusal::new(ErrorCode::InvalidGoal, format!("{name}'s tolerance is not a number")));
            }
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

    /// Ends the running goal as `outcome` without a step: the node stopped commanding or
    /// another command took the joints over. None if no goal ran.
    pub fn end(&mut self, outcome: Outcome) -> Option<Outcome> {
        self.running.take()?;
        self.holding = None;
        Some(outcome)
    }

    /// The running goal at `now_ns` with the joints at `actual`: the setpoint, the error, and
    /// its outcome once it ends (then the joints hold). None when no goal runs. A value that
    /// is not a number is outside every tolerance.
    pub fn update(&mut self, now_ns: u64, actual: &JointState) -> Option<Step> {
        let running = self.running.as_ref()?;
        let (t, desired) = (running.seconds_at(now_ns), running.sample_at(now_ns));
        let error: Vec<f64> = desired.positions.iter().zip(&actual.positions).map(|(d, a)| d - a).collect();
        let velocity_error: Vec<f64> = desired.velocities.iter().zip(&actual.velocities).map(|(d, a)| d - a).collect();
        let outside = |tolerances: &[JointTolerance]| {
            (0..error.len()).find(|&joint| {
                let tolerance = tolerances[joint];
                let position = tolerance.position > 0.0 && !(error[joint].abs() <= tolerance.position);
                let velocity = tolerance.velocity > 0.0
                    && velocity_error.get(joint).is_some_and(|e| !(e.abs() <= tolerance.velocity));
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
                Some(joint) if t > end_s + running.tolerances.goal_time_s => Some(Outcome::Aborted {
                    code: ErrorCode::GoalToleranceViolated,
                    reason: format!(
                        "{} is {:.4} rad from its goal, moving at {:.4} rad/s, {:.3} s after the trajectory's end",
                        self.joints.names[joint],
                        error[joint],
                        actual.velocities.get(joint).copied().unwrap_or(0.0),
                        t - end_s
                    ),
                }),
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
