//! The FollowCartesianTrajectory action server of sil_node and hil_node. What a goal means (its
//! trajectory, its feedback, its result) is the node's commands' to decide
//! ([`TakesCartesianGoals`]: [`crate::nodes::sil::commands`], [`crate::nodes::hil::commands`]);
//! this module moves it in and out of r2r.
//!
//! Built with the `ros` feature but not `ros-doc-only`: the action type is this package's own,
//! which r2r generates only where the package is installed (CMakeLists.txt), not among the
//! bindings the doc-only type-check has.

use std::sync::{Arc, Mutex};

use futures::executor::LocalSpawner;
use futures::task::LocalSpawnExt;
use futures::{FutureExt, StreamExt};
use r2r::arm_hil::action::FollowCartesianTrajectory;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::control::MAX_WAYPOINTS;
use crate::model::Robot;
use crate::msg::interfaces::{CartesianWaypoint, FollowCartesianTrajectoryGoal, FollowCartesianTrajectoryResult};
use crate::msg::standard::Vector3;
use crate::nodes::goals::{CartesianCheck, Checked, GoalOutcome, GoalUpdate, TakesCartesianGoals};

type Action = FollowCartesianTrajectory::Action;
/// r2r's handle of a goal, which the node's tracker holds.
pub type Goal = r2r::ActionServerGoal<Action>;

/// The generated type and the library's mirror of it carry the same fields under the same names
/// (tests/interfaces.rs checks the mirrors against the files), so serde converts between them.
fn convert<From: Serialize, To: DeserializeOwned>(value: &From) -> anyhow::Result<To> {
    Ok(serde_json::from_value(serde_json::to_value(value)?)?)
}

/// The goal's waypoints as the library's goal, copied field by field once their count is known
/// to be within [`MAX_WAYPOINTS`] (a trajectory's bound): a goal's cost is bounded before
/// anything is allocated for it.
fn goal_from_message(goal: &FollowCartesianTrajectory::Goal) -> anyhow::Result<FollowCartesianTrajectoryGoal> {
    let count = goal.waypoints.len();
    anyhow::ensure!(count <= MAX_WAYPOINTS, "{count} waypoints is more than the limit of {MAX_WAYPOINTS}");
    let point = |p: &r2r::geometry_msgs::msg::Point| Vector3 { x: p.x, y: p.y, z: p.z };
    let vector = |v: &r2r::geometry_msgs::msg::Vector3| Vector3 { x: v.x, y: v.y, z: v.z };
    let waypoints = goal
        .waypoints
        .iter()
        .map(|w| CartesianWaypoint {
            time_from_start: w.time_from_start,
            position: point(&w.position),
            velocity: vector(&w.velocity),
            acceleration: vector(&w.acceleration),
        })
        .collect();
    Ok(FollowCartesianTrajectoryGoal { waypoints })
}

/// Serves `~/follow_cartesian_trajectory` on `node`: a goal's trajectory, validated for
/// `robot` and checked off the node's thread ([`TakesCartesianGoals::cartesian_check`]), goes
/// to the node's `goals`, which follow it or say why not (the goal is then aborted); a cancel
/// goes to them too, or, while the goal is checked, keeps it from starting. Goals are checked
/// one at a time. The node's run answers the goal with [`deliver`].
pub fn serve<T>(node: &mut r2r::Node, spawner: &LocalSpawner, robot: Robot, goals: Arc<Mutex<T>>) -> anyhow::Result<()>
where
    T: TakesCartesianGoals<Goal> + Send + 'static,
{
    let mut incoming = node.create_action_server::<Action>("~/follow_cartesian_trajectory")?;
    let cancel_spawner = spawner.clone();
    spawner.spawn_local(async move {
        while let Some(request) = incoming.next().await {
            let goal = goal_from_message(&request.goal);
            let (mut handle, mut cancels) = match request.accept() {
                Ok(accepted) => accepted,
                Err(error) => {
                    log::error!("could not accept a goal: {error}");
                    continue;
                }
            };
            let check = match goals.lock() {
                Ok(goals) => goals.cartesian_check().map_err(anyhow::Error::msg),
                Err(_) => Err(anyhow::anyhow!("goals unavailable")),
            };
            let checked = match (goal, check) {
                (Ok(goal), Ok(check)) => checked_off_thread(goal, robot.clone(), check).await,
                (Err(error), _) | (_, Err(error)) => Err(error),
            };
            // Cancelled while it was checked: it never starts, and every cancel is answered.
            let mut cancelled = false;
            while let Some(Some(cancel)) = cancels.next().now_or_never() {
                cancel.accept();
                cancelled = true;
            }
            if cancelled {
                let result = FollowCartesianTrajectoryResult::refused("cancelled before it started");
                finish(&mut handle, GoalOutcome::Canceled, result);
                continue;
            }
            let followed = checked.and_then(|(waypoints, checked)| {
                let mut goals = goals.lock().map_err(|_| anyhow::anyhow!("goals unavailable"))?;
                let replaced =
                    goals.follow_checked_cartesian_goal(handle.clone(), checked).map_err(anyhow::Error::msg)?;
                Ok((waypoints, replaced))
            });
            match followed {
                Ok((waypoints, replaced)) => {
                    log::info!("~/follow_cartesian_trajectory: goal {} of {waypoints} waypoints", handle.uuid);
                    if let Some((mut replaced, result)) = replaced {
                        finish(&mut replaced, GoalOutcome::Aborted, result);
                    }
                }
                Err(error) => {
                    log::warn!("~/follow_cartesian_trajectory: goal {} refused: {error:#}", handle.uuid);
                    finish(&mut handle, GoalOutcome::Aborted, FollowCartesianTrajectoryResult::refused(error));
                    continue;
                }
            }
            let (cancel_goals, uuid) = (goals.clone(), handle.uuid);
            let watched = cancel_spawner.spawn_local(async move {
                while let Some(cancel) = cancels.next().await {
                    let cancelled = cancel_goals
                        .lock()
                        .ok()
                        .is_some_and(|mut goals| goals.cancel_cartesian_goal(&|goal| goal.uuid == uuid));
                    match cancelled {
                        true => cancel.accept(),
                        false => cancel.reject(),
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

/// `goal`'s trajectory for `robot`, through the node's `check`, on a thread of its own: the
/// node's thread goes on with its transitions, cancels and frames meanwhile (a million
/// waypoints take a while). Its number of waypoints and the trajectory checked.
async fn checked_off_thread(
    goal: FollowCartesianTrajectoryGoal,
    robot: Robot,
    check: CartesianCheck,
) -> anyhow::Result<(usize, Checked)> {
    let (done, checked) = futures::channel::oneshot::channel();
    std::thread::Builder::new().name("goal-check".into()).spawn(move || {
        let trajectory = goal.trajectory(&robot).map_err(anyhow::Error::from);
        let _ = done.send(trajectory.and_then(|trajectory| {
            let waypoints = trajectory.waypoints().len();
            Ok((waypoints, check.run(Arc::new(trajectory)).map_err(anyhow::Error::msg)?))
        }));
    })?;
    // A check that panicked is a fault of the node (the panic hook stops the devices and ends
    // it); until the node is gone, the goal is refused, the channel's end dropped.
    checked.await.map_err(|_| anyhow::anyhow!("the goal's check ended without an answer"))?
}

/// Answers the goals: feedback, or their end with its result.
pub fn deliver_all(updates: Vec<GoalUpdate<Goal>>) {
    updates.into_iter().for_each(deliver);
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
