//! The FollowCartesianTrajectory goal hil_node serves, followed through the loop's frames.

use std::sync::Arc;

use crate::control::Trajectory;
use crate::hil::Withdrawals;
use crate::msg::interfaces::{FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryResult};
use crate::nodes::goals::{overtaken_result, GoalOutcome, GoalUpdate};
use crate::sim::Frame;

/// The goal hil_node serves, followed through the loop's frames: its run starts when the loop
/// has withdrawn what was queued before it, lasts the trajectory's duration, and ends early
/// when cancelled, overtaken by another command, or when the loop stops. `G` is the node's
/// handle of the goal.
#[derive(Debug)]
pub struct HilGoals<G> {
    withdrawals: Arc<Withdrawals>,
    goal: Option<HilGoal<G>>,
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
        HilGoals { withdrawals, goal: None }
    }

    /// Serves `handle`, whose `trajectory` the loop runs from withdrawal `withdrawal` on. The
    /// goal served until now, if any, comes back with its result: the new goal replaced it.
    pub fn start(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
        withdrawal: u64,
    ) -> Option<(G, FollowCartesianTrajectoryResult)> {
        let goal =
            HilGoal { handle, trajectory, withdrawal, cancel: None, frames: 0, squared_error_sum: 0.0, max_error: 0.0 };
        self.goal.replace(goal).map(|goal| (goal.handle, overtaken_result("a new goal")))
    }

    /// The goal served is cancelled by withdrawal `withdrawal`: it ends once the loop holds.
    pub fn cancelling(&mut self, withdrawal: u64) {
        if let Some(goal) = &mut self.goal {
            goal.cancel = Some(withdrawal);
        }
    }

    /// The goal served, if any.
    pub fn handle(&self) -> Option<&G> {
        self.goal.as_ref().map(|goal| &goal.handle)
    }

    /// Ends the goal served, if any, as aborted for `reason`: the loop stopped, or another
    /// command took the arm over.
    pub fn end(&mut self, reason: &str) -> Option<GoalUpdate<G>> {
        Some(self.goal.take()?.finished(GoalOutcome::Aborted, Some(reason.to_owned())))
    }
}

impl<G: Clone> HilGoals<G> {
    /// What the loop's `frame` means for the goal served, if anything: feedback while its run
    /// goes on, the result when it ends (complete, or cancelled once the loop holds).
    pub fn frame(&mut self, frame: &Frame) -> Option<GoalUpdate<G>> {
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
}
