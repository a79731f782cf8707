//! The FollowCartesianTrajectory goals a node serves, without ROS: what a node does with an
//! accepted goal and how its run answers it. sil_node and hil_node follow goals differently
//! (a simulation restarted on the goal's trajectory; a loop that withdraws what it has queued
//! and holds), so each has its [`GoalTracker`]; the action server is the same for both.

use std::sync::Arc;

use crate::control::{Trajectory, TrajectoryError, Waypoint};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::msg::interfaces::{
    FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryGoal, FollowCartesianTrajectoryResult,
};
use crate::msg::Vector3;
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

/// One goal served at a time by a node; `G` is the node's handle of a goal. The node's run
/// loop answers the goal (feedback, result) through methods of its own.
pub trait GoalTracker<G> {
    /// What the node's run loop is asked, to follow a goal or to stop.
    type Request;

    /// Why `trajectory` cannot be followed now, if it cannot; the goal is then refused.
    fn admit(&self, trajectory: &Trajectory) -> Result<(), String>;

    /// Serves `handle`, whose `trajectory` the run loop is to follow, with the request that
    /// starts it. The goal served until now, if any, is returned with its result: a new goal
    /// replaces it.
    fn serve(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
    ) -> (Self::Request, Option<(G, FollowCartesianTrajectoryResult)>);

    /// The request that stops the goal served, which its run then ends as cancelled.
    fn cancel(&mut self) -> Self::Request;

    /// The goal served, if any.
    fn handle(&self) -> Option<&G>;
}

/// The result of a goal that a new goal replaced before its run ended.
pub fn replaced_result() -> FollowCartesianTrajectoryResult {
    FollowCartesianTrajectoryResult {
        success: false,
        message: "replaced by a new goal".into(),
        ..FollowCartesianTrajectoryResult::default()
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
