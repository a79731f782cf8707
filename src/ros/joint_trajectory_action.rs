//! `~/follow_joint_trajectory` (control_msgs/action/FollowJointTrajectory) and
//! `~/controller_state` (control_msgs/msg/JointTrajectoryControllerState) of the motion nodes.
//! What a goal does is the node's to decide ([`TakesJointGoals`], over its follower); this module
//! converts the messages and moves goals, feedback, results and the controller's state in and
//! out of r2r.
//!
//! Built with the `ros` feature but not `ros-doc-only`: r2r's doc-only bindings have no
//! control_msgs.

use std::sync::{Arc, Mutex};

use futures::executor::LocalSpawner;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::control_msgs::action::FollowJointTrajectory;
use r2r::control_msgs::msg::{JointTolerance as ToleranceMsg, JointTrajectoryControllerState};
use r2r::trajectory_msgs::msg::JointTrajectoryPoint;
use r2r::QosProfile;

use super::{seconds, trajectory_goal};
use crate::nodes::follower::clocks::Now;
use crate::nodes::follower::goals::{ControllerState, GoalEvent, Setpoint, TakesJointGoals, Tick};
use crate::nodes::follower::{ErrorCode, Goal, JointTolerance, Outcome};
use crate::outputs::wall_clock_ns;

type Action = FollowJointTrajectory::Action;
/// r2r's handle of a goal.
pub type Handle = r2r::ActionServerGoal<Action>;

/// What the node's control steps answer goals through, and publish the controller's state on.
#[derive(Clone)]
pub struct FollowJointTrajectoryServer {
    /// Behind a mutex: the steps come from the node's device thread, and r2r's publisher is
    /// Send, not Sync.
    state: Arc<Mutex<r2r::Publisher<JointTrajectoryControllerState>>>,
}

impl FollowJointTrajectoryServer {
    /// Serves `~/follow_joint_trajectory` and advertises `~/controller_state` on `node`: a goal
    /// while the node is not `active` is rejected; the node's `goals` take the rest, on the
    /// node's clocks `now` (its stamp moved onto the clock the steps are timed on): one refused
    /// is aborted at once with its error code, nothing commanded; an accepted goal replaces the
    /// one followed (cancelled), and `first_setpoint` is called: a node whose control steps wait
    /// for its device sends the goal's first setpoint there.
    pub fn serve<M: TakesJointGoals<Handle> + Send + 'static>(
        node: &mut r2r::Node,
        spawner: &LocalSpawner,
        goals: Arc<Mutex<M>>,
        active: Box<dyn Fn() -> bool>,
        now: Box<dyn Fn() -> Now>,
        first_setpoint: Box<dyn Fn()>,
    ) -> anyhow::Result<FollowJointTrajectoryServer> {
        let state = node.create_publisher("~/controller_state", QosProfile::default())?;
        let mut incoming = node.create_action_server::<Action>("~/follow_joint_trajectory")?;
        let cancel_spawner = spawner.clone();
        spawner.spawn_local(async move {
            while let Some(request) = incoming.next().await {
                if !active() {
                    log::warn!("~/follow_joint_trajectory: goal {} rejected: the node is not active", request.uuid);
                    if let Err(error) = request.reject() {
                        log::error!("could not reject a goal: {error}");
                    }
                    continue;
                }
                let received = now();
                let goal = received.restamped(goal_from_message(&request.goal));
                let (handle, cancels) = match request.accept() {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        log::error!("could not accept a goal: {error}");
                        continue;
                    }
                };
                // When the goal was accepted (its answer sent), for the goal's log line: what a
                // first setpoint is timed from (tests/ros/follow_benchmark.py).
                let accepted_ns = wall_clock_ns();
                let uuid = handle.uuid;
                let accepted = match goals.lock() {
                    Ok(mut goals) => goals.accept_joint_goal(handle.clone(), &goal, received.steps_ns),
                    Err(_) => continue,
                };
                match accepted {
                    Err(refusal) => {
                        finish(handle, Outcome::Aborted { code: refusal.code, reason: refusal.reason });
                        continue;
                    }
                    Ok(replaced) => {
                        if let Some((replaced, outcome)) = replaced {
                            finish(replaced, outcome);
                        }
                        // Before the log line, which costs a millisecond or two (/rosout).
                        first_setpoint();
                        log::info!(
                            "~/follow_joint_trajectory: goal {uuid} of {} points, accepted at {}.{:09} s",
                            goal.points.len(),
                            accepted_ns / 1_000_000_000,
                            accepted_ns % 1_000_000_000
                        );
                    }
                }
                let cancel_goals = goals.clone();
                let watched = cancel_spawner.spawn_local(cancels.for_each(move |cancel| {
                    let cancelled = cancel_goals
                        .lock()
                        .ok()
                        .and_then(|mut goals| goals.cancel_joint_goal(&|goal| goal.uuid == uuid));
                    match cancelled {
                        Some((goal, outcome)) => {
                            cancel.accept();
                            finish(goal, outcome);
                        }
                        None => cancel.reject(),
                    }
                    futures::future::ready(())
                }));
                if let Err(error) = watched {
                    log::error!("cannot watch goal {uuid} for cancellation: {error}");
                }
            }
        })?;
        Ok(FollowJointTrajectoryServer { state: Arc::new(Mutex::new(state)) })
    }

    /// Answers a control step: feedback to the goal followed or its end, and the controller's
    /// state; gives back what to command.
    pub fn answer(&self, tick: Tick<Handle>) -> Option<Setpoint> {
        let Tick { command, events, state } = tick;
        answer_goals(events);
        self.publish_state(&state);
        command
    }

    /// Publishes the controller's `state` on `~/controller_state`.
    pub fn publish_state(&self, state: &ControllerState) {
        if let Some(Err(error)) = self.state.lock().ok().map(|publisher| publisher.publish(&controller_state(state))) {
            log::warn!("~/controller_state: {error}");
        }
    }
}

/// Sends goals their feedback, or ends them.
pub fn answer_goals(events: Vec<GoalEvent<Handle>>) {
    for event in events {
        match event {
            GoalEvent::Feedback { goal, state } => {
                if let Err(error) = goal.publish_feedback(feedback(&state)) {
                    log::warn!("feedback to goal {}: {error}", goal.uuid);
                }
            }
            GoalEvent::Finished { goal, outcome } => finish(goal, outcome),
        }
    }
}

/// Ends `goal` with `outcome`'s status, code and text.
pub fn finish(mut goal: Handle, outcome: Outcome) {
    let result = |code: ErrorCode, text: &str| FollowJointTrajectory::Result {
        error_code: code as i32,
        error_string: text.to_owned(),
    };
    let ended = match &outcome {
        Outcome::Succeeded => goal.succeed(result(ErrorCode::Successful, "")),
        Outcome::Aborted { code, reason } => goal.abort(result(*code, reason)),
        Outcome::Canceled { reason } => goal.cancel(result(ErrorCode::Successful, reason)),
    };
    let uuid = goal.uuid;
    match (ended, outcome) {
        (Err(error), _) => log::warn!("could not end goal {uuid}: {error}"),
        (Ok(()), Outcome::Succeeded) => log::info!("~/follow_joint_trajectory: goal {uuid} succeeded"),
        (Ok(()), Outcome::Aborted { code, reason }) => {
            log::warn!("~/follow_joint_trajectory: goal {uuid} aborted ({code:?}): {reason}")
        }
        (Ok(()), Outcome::Canceled { reason }) => {
            log::info!("~/follow_joint_trajectory: goal {uuid} cancelled: {reason}")
        }
    }
}

fn tolerances(message: &[ToleranceMsg]) -> Vec<(String, JointTolerance)> {
    message.iter().map(|t| (t.name.clone(), JointTolerance { position: t.position, velocity: t.velocity })).collect()
}

fn goal_from_message(goal: &FollowJointTrajectory::Goal) -> Goal {
    Goal {
        path_tolerance: tolerances(&goal.path_tolerance),
        goal_tolerance: tolerances(&goal.goal_tolerance),
        goal_time_tolerance_s: seconds(&goal.goal_time_tolerance),
        ..trajectory_goal(&goal.trajectory)
    }
}

fn point(positions: &[f64], velocities: &[f64], accelerations: &[f64]) -> JointTrajectoryPoint {
    JointTrajectoryPoint {
        positions: positions.to_vec(),
        velocities: velocities.to_vec(),
        accelerations: accelerations.to_vec(),
        ..JointTrajectoryPoint::default()
    }
}

fn header(time_ns: u64) -> r2r::std_msgs::msg::Header {
    r2r::std_msgs::msg::Header {
        stamp: r2r::builtin_interfaces::msg::Time {
            sec: (time_ns / 1_000_000_000) as i32,
            nanosec: (time_ns % 1_000_000_000) as u32,
        },
        frame_id: String::new(),
    }
}

fn feedback(state: &ControllerState) -> FollowJointTrajectory::Feedback {
    FollowJointTrajectory::Feedback {
        header: header(state.time_ns),
        joint_names: state.joint_names.clone(),
        desired: point(&state.reference.positions, &state.reference.velocities, &state.reference.accelerations),
        actual: point(&state.feedback.positions, &state.feedback.velocities, &[]),
        error: point(&state.error.positions, &state.error.velocities, &[]),
        ..FollowJointTrajectory::Feedback::default()
    }
}

fn controller_state(state: &ControllerState) -> JointTrajectoryControllerState {
    JointTrajectoryControllerState {
        header: header(state.time_ns),
        joint_names: state.joint_names.clone(),
        reference: point(&state.reference.positions, &state.reference.velocities, &state.reference.accelerations),
        feedback: point(&state.feedback.positions, &state.feedback.velocities, &[]),
        error: point(&state.error.positions, &state.error.velocities, &[]),
        output: point(&state.output, &[], &[]),
        ..JointTrajectoryControllerState::default()
    }
}
