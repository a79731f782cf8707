//! The FollowCartesianTrajectory action server of sil_node and hil_node. What a goal means (its
//! trajectory, its feedback, its result) is the node's [`GoalTracker`]
//! ([`crate::nodes::sil::GoalRuns`], [`crate::nodes::hil::HilGoals`]); this module moves it in
//! and out of r2r.
//!
//! Built with the `ros` feature but not `ros-doc-only`: the action type is this package's own,
//! which r2r generates only where the package is installed (CMakeLists.txt), not among the
//! bindings the doc-only type-check has.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use futures::executor::LocalSpawner;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::arm_hil::action::FollowCartesianTrajectory;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::model::Robot;
use crate::msg::interfaces::{FollowCartesianTrajectoryGoal, FollowCartesianTrajectoryResult};
use crate::nodes::goals::{GoalOutcome, GoalTracker, GoalUpdate};

type Action = FollowCartesianTrajectory::Action;
/// r2r's handle of a goal, which the node's tracker holds.
pub type Goal = r2r::ActionServerGoal<Action>;

/// The generated type and the library's mirror of it carry the same fields under the same names
/// (tests/interfaces.rs checks the mirrors against the files), so serde converts between them.
fn convert<From: Serialize, To: DeserializeOwned>(value: &From) -> anyhow::Result<To> {
    Ok(serde_json::from_value(serde_json::to_value(value)?)?)
}

/// Serves `~/follow_cartesian_trajectory` on `node`: a goal the tracker admits is served, and
/// the tracker's request for it goes to the node's run loop through `requests`; a cancelled
/// goal's stop request follows the same way. The run loop answers the goal with [`deliver`].
pub fn serve<T, R>(
    node: &mut r2r::Node,
    spawner: &LocalSpawner,
    robot: Robot,
    goals: Arc<Mutex<T>>,
    requests: Sender<R>,
) -> anyhow::Result<()>
where
    T: GoalTracker<Goal, Request = R> + Send + 'static,
    R: Send + 'static,
{
    let mut incoming = node.create_action_server::<Action>("~/follow_cartesian_trajectory")?;
    let cancel_spawner = spawner.clone();
    spawner.spawn_local(async move {
        while let Some(request) = incoming.next().await {
            let goal: anyhow::Result<FollowCartesianTrajectoryGoal> = convert(&request.goal);
            let (mut handle, mut cancels) = match request.accept() {
                Ok(accepted) => accepted,
                Err(error) => {
                    log::error!("could not accept a goal: {error}");
                    continue;
                }
            };
            let admitted = goal.and_then(|goal| Ok(goal.trajectory(&robot)?)).and_then(|trajectory| {
                let admitted = goals.lock().map_err(|_| anyhow::anyhow!("goals unavailable"))?.admit(&trajectory);
                admitted.map_err(anyhow::Error::msg)?;
                Ok(trajectory)
            });
            let trajectory = match admitted {
                Ok(trajectory) => Arc::new(trajectory),
                Err(error) => {
                    log::warn!("~/follow_cartesian_trajectory: goal {} refused: {error:#}", handle.uuid);
                    finish(&mut handle, GoalOutcome::Aborted, FollowCartesianTrajectoryResult::refused(error));
                    continue;
                }
            };
            log::info!(
                "~/follow_cartesian_trajectory: goal {} of {} waypoints",
                handle.uuid,
                trajectory.waypoints().len()
            );
            let served = goals.lock().ok().map(|mut goals| goals.serve(handle.clone(), trajectory));
            let Some((start, replaced)) = served else { continue };
            if let Some((mut replaced, result)) = replaced {
                finish(&mut replaced, GoalOutcome::Aborted, result);
            }
            let _ = requests.send(start);
            let (cancel_goals, stop) = (goals.clone(), requests.clone());
            let uuid = handle.uuid;
            let watched = cancel_spawner.spawn_local(async move {
                while let Some(cancel) = cancels.next().await {
                    let stopping = cancel_goals
                        .lock()
                        .ok()
                        .filter(|goals| goals.handle().is_some_and(|goal| goal.uuid == uuid))
                        .map(|mut goals| goals.cancel());
                    match stopping {
                        Some(request) => {
                            cancel.accept();
                            let _ = stop.send(request);
                        }
                        None => cancel.reject(),
                    }
                }
            });
            if let Err(error) = watched {
                log::error!("cannot watch goal {uuid} for cancellation: {error}");
            }
        }
    })?;
    Ok(())
}

/// Sends the goal its feedback, or ends it with its result.
pub fn deliver(update: GoalUpdate<Goal>) {
    match update {
        GoalUpdate::Feedback(goal, feedback) => {
            if let Err(error) = convert(&feedback).and_then(|feedback| Ok(goal.publish_feedback(feedback)?)) {
                log::warn!("feedback to goal {}: {error:#}", goal.uuid);
            }
        }
        GoalUpdate::Finished(mut goal, outcome, result) => finish(&mut goal, outcome, result),
    }
}

/// Ends `goal` in the terminal state `outcome` with `result`.
fn finish(goal: &mut Goal, outcome: GoalOutcome, result: FollowCartesianTrajectoryResult) {
    let ended = convert(&result).and_then(|result| {
        Ok(match outcome {
            GoalOutcome::Succeeded => goal.succeed(result),
            GoalOutcome::Aborted => goal.abort(result),
            GoalOutcome::Canceled => goal.cancel(result),
        }?)
    });
    if let Err(error) = ended {
        log::warn!("could not end goal {}: {error:#}", goal.uuid);
    }
}
