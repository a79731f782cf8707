//! The FollowCartesianTrajectory goal hil_node serves, followed through the loop's frames.

use std::sync::Arc;

use super::feeder::{FeedRequest, GOAL_START_TOLERANCE_M};
use crate::control::Trajectory;
use crate::hil::Withdrawals;
use crate::model::math::Vec3;
use crate::msg::interfaces::{FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryResult};
use crate::nodes::goals::{replaced_result, GoalOutcome, GoalTracker, GoalUpdate};
use crate::sim::Frame;

/// The goal hil_node serves, followed through the loop's frames: its run starts when the loop
/// has withdrawn what was queued before it, lasts the trajectory's duration, and ends early
/// when cancelled or replaced. `G` is the node's handle of the goal.
#[derive(Debug)]
pub struct HilGoals<G> {
    withdrawals: Arc<Withdrawals>,
    goal: Option<HilGoal<G>>,
    /// Where the arm's reference was at the latest frame [m].
    reference: Option<Vec3>,
}

#[derive(Debug)]
struct HilGoal<G> {
    handle: G,
    trajectory: Arc<Trajectory>,
    withdrawal: u64,
    cancel: Option<u64>,
    frames: u64,
    squared_error_sum: f64,
    max_error: f64,
}

impl<G> HilGoal<G> {
    /// The goal ended in `outcome`, completed (`failure` None) or not.
    fn finished(self, outcome: GoalOutcome, failure: Option<String>) -> GoalUpdate<G> {
        let rms_error = match self.frames {
            0 => 0.0,
            frames => (self.squared_error_sum / frames as f64).sqrt(),
        };
        let result = FollowCartesianTrajectoryResult::ended(rms_error, self.max_error, self.frames, failure);
        GoalUpdate::Finished(self.handle, outcome, result)
    }
}

impl<G> HilGoals<G> {
    /// Goals for the loop that takes withdrawals from `withdrawals`.
    pub fn new(withdrawals: Arc<Withdrawals>) -> HilGoals<G> {
        HilGoals { withdrawals, goal: None, reference: None }
    }
}

impl<G> GoalTracker<G> for HilGoals<G> {
    type Request = FeedRequest;

    /// A goal starts where the arm's reference holds: the loop never jumps to a goal.
    fn admit(&self, trajectory: &Trajectory) -> Result<(), String> {
        let Some(reference) = self.reference else { return Err("the HIL loop has not started yet".into()) };
        let first = trajectory.waypoints()[0].x;
        let distance = (first - reference).norm();
        match distance <= GOAL_START_TOLERANCE_M {
            true => Ok(()),
            false => Err(format!(
                "the first waypoint is {distance:.4} m from the arm's reference ({:.4}, {:.4}, {:.4}) m; a goal starts there (within {GOAL_START_TOLERANCE_M} m)",
                reference.x, reference.y, reference.z
            )),
        }
    }

    fn serve(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
    ) -> (FeedRequest, Option<(G, FollowCartesianTrajectoryResult)>) {
        let withdrawal = self.withdrawals.request();
        let goal = HilGoal {
            handle,
            trajectory: trajectory.clone(),
            withdrawal,
            cancel: None,
            frames: 0,
            squared_error_sum: 0.0,
            max_error: 0.0,
        };
        let replaced = self.goal.replace(goal).map(|goal| (goal.handle, replaced_result()));
        (FeedRequest::Follow { trajectory, withdrawal }, replaced)
    }

    fn cancel(&mut self) -> FeedRequest {
        let withdrawal = self.withdrawals.request();
        if let Some(goal) = &mut self.goal {
            goal.cancel = Some(withdrawal);
        }
        FeedRequest::Hold { withdrawal }
    }

    fn handle(&self) -> Option<&G> {
        self.goal.as_ref().map(|goal| &goal.handle)
    }
}

impl<G: Clone> HilGoals<G> {
    /// What the loop's `frame` means for the goal served, if anything: feedback while its run
    /// goes on, the result when it ends (complete, or cancelled once the loop holds).
    pub fn frame(&mut self, frame: &Frame) -> Option<GoalUpdate<G>> {
        self.reference = Some(frame.x_ref);
        let goal = self.goal.as_mut()?;
        let start = self.withdrawals.done_at(goal.withdrawal).filter(|&start| frame.t >= start)?;
        if goal.cancel.is_some_and(|cancel| self.withdrawals.done_at(cancel).is_some()) {
            return Some(self.goal.take()?.finished(GoalOutcome::Canceled, Some("cancelled".into())));
        }
        let error = frame.tracking_error().norm();
        goal.frames += 1;
        goal.squared_error_sum += error * error;
        goal.max_error = goal.max_error.max(error);
        let on_trajectory = Frame { t: goal.trajectory.start_time() + frame.t - start, ..*frame };
        if on_trajectory.t >= goal.trajectory.end_time() {
            return Some(self.goal.take()?.finished(GoalOutcome::Succeeded, None));
        }
        Some(GoalUpdate::Feedback(
            goal.handle.clone(),
            FollowCartesianTrajectoryFeedback::at(&goal.trajectory, &on_trajectory),
        ))
    }

    /// The loop stopped for `reason`: the goal served, if any, is aborted.
    /// Goals are refused until the next loop's first frame.
    pub fn loop_stopped(&mut self, reason: &str) -> Option<GoalUpdate<G>> {
        self.reference = None;
        Some(self.goal.take()?.finished(GoalOutcome::Aborted, Some(reason.to_owned())))
    }
}
