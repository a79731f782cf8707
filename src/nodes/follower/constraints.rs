//! A node's parameters for its goals: the default tolerances (`constraints.*`) and the most a
//! goal may cost (`goal_limits.*`).

use serde::{Deserialize, Serialize};

use super::{JointTolerance, Tolerances};

/// A node's default tolerances, its `constraints.*` parameters, as joint_trajectory_controller's
/// `constraints` but per joint as arrays in the device's order (one value: every joint), since
/// the joints' names are parameters themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Constraints {
    /// How long after the trajectory's end the joints may take to come within goal tolerance
    /// [s], where a goal gives none; 0 waits as long as `goal_limits.max_duration_s` lets it.
    pub goal_time: f64,
    /// Position tolerance at the end [rad].
    pub goal: Vec<f64>,
    /// Position tolerance along the trajectory [rad]; 0 checks nothing.
    pub trajectory: Vec<f64>,
    /// The fastest a joint may still move when its goal is done [rad/s]: the goal tolerance's
    /// velocity where a goal gives none; 0 checks nothing. As joint_trajectory_controller's.
    pub stopped_velocity_tolerance: f64,
}

impl Default for Constraints {
    fn default() -> Self {
        Constraints { goal_time: 1.0, goal: vec![0.02], trajectory: vec![0.0], stopped_velocity_tolerance: 0.01 }
    }
}

impl Constraints {
    /// The defaults, with joints taken as stopped below `velocity` [rad/s]: the parallel arm's
    /// nodes, whose joint rates are an estimate's, noisier than a device's own.
    pub fn stopped_below(velocity: f64) -> Constraints {
        Constraints { stopped_velocity_tolerance: velocity, ..Constraints::default() }
    }

    /// These constraints as the tolerances of a device of `joints` joints.
    pub fn tolerances(&self, joints: usize) -> Result<Tolerances, String> {
        if !(self.stopped_velocity_tolerance >= 0.0 && self.stopped_velocity_tolerance.is_finite()) {
            return Err(format!(
                "constraints.stopped_velocity_tolerance must be 0 or more, got {}",
                self.stopped_velocity_tolerance
            ));
        }
        let per_joint = |values: &[f64], name: &str, velocity: f64| {
            let tolerance = |position: f64| JointTolerance { position, velocity };
            match values {
                _ if values.iter().any(|value| value.is_nan()) => {
                    Err(format!("constraints.{name} holds a value that is not a number"))
                }
                [every] => Ok(vec![tolerance(*every); joints]),
                values if values.len() == joints => Ok(values.iter().map(|&position| tolerance(position)).collect()),
                values => {
                    Err(format!("constraints.{name} holds {} values: one, or one per joint ({joints})", values.len()))
                }
            }
        };
        if !(self.goal_time >= 0.0) {
            return Err(format!("constraints.goal_time must be 0 or more, got {}", self.goal_time));
        }
        Ok(Tolerances {
            path: per_joint(&self.trajectory, "trajectory", 0.0)?,
            goal: per_joint(&self.goal, "goal", self.stopped_velocity_tolerance)?,
            goal_time_s: self.goal_time,
        })
    }
}

/// The most a goal may cost a node, checked before anything is allocated for it: its
/// `goal_limits.*` parameters. What exceeds them is refused as INVALID_GOAL, saying which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoalLimits {
    /// The most points a goal may hold. Default 10 000 (a planner's trajectory holds tens to
    /// hundreds).
    pub max_points: u32,
    /// The longest a goal may last, from its receipt to its last point, a future header stamp
    /// and the goal's own `goal_time_tolerance` included [s]. Default 600.
    pub max_duration_s: f64,
}

impl Default for GoalLimits {
    fn default() -> Self {
        GoalLimits { max_points: 10_000, max_duration_s: 600.0 }
    }
}

impl GoalLimits {
    pub fn validate(&self) -> Result<(), String> {
        match self.max_points > 0 && self.max_duration_s.is_finite() && self.max_duration_s > 0.0 {
            true => Ok(()),
            false => Err(format!(
                "goal_limits.max_points and max_duration_s must be > 0, got {} and {}",
                self.max_points, self.max_duration_s
            )),
        }
    }
}
