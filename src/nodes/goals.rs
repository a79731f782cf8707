//! The FollowCartesianTrajectory goals a node serves, without ROS: what a node does with an
//! accepted goal and how its run answers it. sil_node and hil_node follow goals differently
//! (a simulation restarted on the goal's trajectory; a loop that withdraws what it has queued
//! and holds), each through its own commands ([`crate::nodes::sil::commands`],
//! [`crate::nodes::hil::commands`]); the action server is the same for both.

use std::sync::Arc;

use crate::control::{Trajectory, TrajectoryError, Waypoint};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::msg::interfaces::{
    FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryGoal, FollowCartesianTrajectoryResult,
};
use crate::msg::Vector3;
use crate::nodes::follower::goals::{ControllerState, GoalEvent};
use crate::nodes::follower::GoalLimits;
use crate::sim::{Frame, RunStats};

/// How an action goal ended (the action's terminal states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalOutcome {
    Succeeded,
    Aborted,
    Canceled,
}

/// What the goal being served gets from its run.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalUpdate<G> {
    Feedback(G, FollowCartesianTrajectoryFeedback),
    Finished(G, GoalOutcome, FollowCartesianTrajectoryResult),
}

/// What `~/follow_cartesian_trajectory`'s server asks of a node: one goal served at a time,
/// `G` being the node's handle of a goal. The node's run answers the goal (feedback, result)
/// through its own methods.
pub trait TakesCartesianGoals<G> {
    /// The checks of a goal's trajectory that need nothing of the node's state (its path
    /// against the arm's bounds): the server runs them off the node's thread, a million
    /// waypoints taking a while, before [`TakesCartesianGoals::follow_checked_cartesian_goal`].
    /// Refused at once where the node takes no goal now.
    fn cartesian_check(&self) -> Result<CartesianCheck, String>;

    /// Follows `checked`'s trajectory for `handle` in place of the goal served, which comes back
    /// with its result; or why the node cannot follow it now (the goal is then refused): among
    /// the reasons, a stop of the node since the check was taken.
    fn follow_checked_cartesian_goal(
        &mut self,
        handle: G,
        checked: Checked,
    ) -> Result<Option<(G, FollowCartesianTrajectoryResult)>, String>;

    /// Checks `trajectory` and follows it, on the caller's thread.
    fn follow_cartesian_goal(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
    ) -> Result<Option<(G, FollowCartesianTrajectoryResult)>, String> {
        let checked = self.cartesian_check()?.run(trajectory)?;
        self.follow_checked_cartesian_goal(handle, checked)
    }

    /// Stops the goal served if `is_it` says it is the one (its run then ends it as
    /// cancelled); whether it was.
    fn cancel_cartesian_goal(&mut self, is_it: &dyn Fn(&G) -> bool) -> bool;
}

/// A node's checks of a goal's trajectory that need nothing of its state, taken out of it to run
/// on any thread, and how many times the node had stopped when they were taken.
pub struct CartesianCheck {
    check: Box<TrajectoryCheck>,
    stops: u64,
}

/// Why a trajectory may not run, if it may not.
type TrajectoryCheck = dyn Fn(&Trajectory) -> Result<(), String> + Send;

impl CartesianCheck {
    /// The check `check` of a node stopped `stops` times so far.
    pub fn new(check: impl Fn(&Trajectory) -> Result<(), String> + Send + 'static, stops: u64) -> CartesianCheck {
        CartesianCheck { check: Box::new(check), stops }
    }

    /// Runs the check on `trajectory`: the trajectory checked, or why not.
    pub fn run(self, trajectory: Arc<Trajectory>) -> Result<Checked, String> {
        (self.check)(&trajectory)?;
        Ok(Checked { trajectory, stops: self.stops })
    }
}

/// A trajectory that passed a node's [`CartesianCheck`], and how many times the node had
/// stopped when the check was taken: a goal given before a stop does not move the arm after it.
pub struct Checked {
    trajectory: Arc<Trajectory>,
    stops: u64,
}

impl Checked {
    /// The trajectory, if the node has not stopped since the check was taken (`stops` times
    /// now); why not otherwise.
    pub fn since(self, stops: u64, node: &str) -> Result<Arc<Trajectory>, String> {
        match self.stops == stops {
            true => Ok(self.trajectory),
            false => Err(format!("{node} stopped while the goal was checked: nothing moves until a new command")),
        }
    }
}

/// What a node answers after its run's events, a frame or a stop: FollowJointTrajectory goals'
/// feedback and ends (`J` their handles), the controller's state, FollowCartesianTrajectory
/// goals' feedback and ends (`C` their handles).
#[derive(Debug)]
pub struct Answers<J, C> {
    pub joint: Vec<GoalEvent<J>>,
    pub state: Option<ControllerState>,
    pub cartesian: Vec<GoalUpdate<C>>,
}

/// Which command has the arm of sil_node or hil_node: each that takes it over ends the goals of
/// the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandSource {
    JointGoal,
    CartesianGoal,
    JointCommands,
    /// sil_node's `~/trajectory`, a trajectory run afresh.
    Trajectory,
}

impl CommandSource {
    pub fn name(self) -> &'static str {
        match self {
            CommandSource::JointGoal => "a FollowJointTrajectory goal",
            CommandSource::CartesianGoal => "a FollowCartesianTrajectory goal",
            CommandSource::JointCommands => "~/joint_command",
            CommandSource::Trajectory => "a ~/trajectory message",
        }
    }
}

/// The result of a goal that a new goal or another command took the arm from, `by`, before its
/// run ended.
pub fn overtaken_result(by: &str) -> FollowCartesianTrajectoryResult {
    FollowCartesianTrajectoryResult {
        success: false,
        message: format!("replaced by {by}"),
        ..FollowCartesianTrajectoryResult::default()
    }
}

/// Whether a Cartesian goal's `trajectory` lasts no longer than the node's goal `limits` let a
/// goal last (`goal_limits.max_duration_s`), as its joint goals must.
pub fn check_duration(trajectory: &Trajectory, limits: &GoalLimits) -> Result<(), String> {
    let lasts = trajectory.end_time() - trajectory.start_time();
    match lasts <= limits.max_duration_s {
        true => Ok(()),
        false => Err(format!(
            "the trajectory lasts {lasts:.3} s, longer than goal_limits.max_duration_s ({} s)",
            limits.max_duration_s
        )),
    }
}

impl FollowCartesianTrajectoryGoal {
    /// The goal's trajectory for `robot`'s forearm, validated as every trajectory is.
    pub fn trajectory(&self, robot: &Robot) -> Result<Trajectory, TrajectoryError> {
        let waypoints = self
            .waypoints
            .iter()
            .map(|w| Waypoint {
                t: w.time_from_start,
                x: vec3(&w.position),
                xd: vec3(&w.velocity),
                xdd: vec3(&w.acceleration),
            })
            .collect();
        Trajectory::with_robot_forearm(waypoints, robot)
    }
}

fn vec3(v: &Vector3) -> Vec3 {
    Vec3::new(v.x, v.y, v.z)
}

impl FollowCartesianTrajectoryResult {
    /// A simulation run that ended, completed (`failure` None) or not.
    pub fn of_run(stats: &RunStats, failure: Option<String>) -> FollowCartesianTrajectoryResult {
        FollowCartesianTrajectoryResult::ended(stats.rms_error_m(), stats.max_error_m, stats.frames, failure)
    }
}

impl FollowCartesianTrajectoryFeedback {
    /// Where `frame` stands on `trajectory`.
    pub fn at(trajectory: &Trajectory, frame: &Frame) -> FollowCartesianTrajectoryFeedback {
        let (start, end) = (trajectory.start_time(), trajectory.end_time());
        let elapsed = frame.t - start;
        let progress = match end > start {
            true => (elapsed / (end - start)).clamp(0.0, 1.0),
            false => 1.0,
        };
        FollowCartesianTrajectoryFeedback {
            progress,
            time_from_start: elapsed.max(0.0),
            tracking_error: frame.tracking_error().norm(),
        }
    }
}
