//! The FollowCartesianTrajectory action server of sil_node. What a goal means (its trajectory,
//! its feedback, its result) is [`crate::nodes::sil::GoalRuns`]; this module moves it in and out
//! of r2r.
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
use crate::nodes::interfaces::{FollowCartesianTrajectoryGoal, FollowCartesianTrajectoryResult};
use crate::nodes::sil::{GoalOutcome, GoalRuns, GoalUpdate, RunRequest, SilEvent};

type Action = FollowCartesianTrajectory::Action;
type Goal = r2r::ActionServerGoal<Action>;

/// The generated type and the library's mirror of it carry the same fields under the same names
/// (tests/interfaces.rs checks the mirrors against the files), so serde converts between them.
fn convert<From: Serialize, To: DeserializeOwned>(value: &From) -> anyhow::Result<To> {
    Ok(serde_json::from_value(serde_json::to_value(value)?)?)
}

/// Serves `~/follow_cartesian_trajectory` on `node`: an accepted goal's trajectory goes to the run
/// loop through `requests`, a cancelled goal's run is stopped. Returns what the run loop's
/// thread calls with each of its events, to send the goal its feedback and result.
pub fn serve(
    node: &mut r2r::Node,
    spawner: &LocalSpawner,
    robot: Robot,
    requests: Sender<RunRequest>,
) -> anyhow::Result<impl FnMut(&SilEvent) + Send> {
    let mut incoming = node.create_action_server::<Action>("~/follow_cartesian_trajectory")?;
    let goals = Arc::new(Mutex::new(GoalRuns::<Goal>::default()));
    let served = goals.clone();
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
            let trajectory = match goal.and_then(|goal| Ok(goal.trajectory(&robot)?)) {
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
            let replaced = served.lock().ok().and_then(|mut goals| goals.serve(handle.clone(), trajectory.clone()));
            if let Some((mut replaced, result)) = replaced {
                finish(&mut replaced, GoalOutcome::Aborted, result);
            }
            let _ = requests.send(RunRequest::Follow(trajectory));
            let (cancel_goals, stop) = (served.clone(), requests.clone());
            let uuid = handle.uuid;
            let watched = cancel_spawner.spawn_local(async move {
                while let Some(cancel) = cancels.next().await {
                    let serving = cancel_goals.lock().is_ok_and(|goals| goals.handle().is_some_and(|g| g.uuid == uuid));
                    match serving {
                        true => {
                            cancel.accept();
                            let _ = stop.send(RunRequest::Stop);
                        }
                        false => cancel.reject(),
                    }
                }
            });
            if let Err(error) = watched {
                log::error!("cannot watch goal {uuid} for cancellation: {error}");
            }
        }
    })?;
    Ok(move |event: &SilEvent| {
        let update = goals.lock().ok().and_then(|mut goals| goals.update(event));
        match update {
            Some(GoalUpdate::Feedback(goal, feedback)) => {
                if let Err(error) = convert(&feedback).and_then(|feedback| Ok(goal.publish_feedback(feedback)?)) {
                    log::warn!("feedback to goal {}: {error:#}", goal.uuid);
                }
            }
            Some(GoalUpdate::Finished(mut goal, outcome, result)) => finish(&mut goal, outcome, result),
            None => {}
        }
    })
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
