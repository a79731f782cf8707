//! `~/follow_joint_trajectory` (control_msgs/action/FollowJointTrajectory) and
//! `~/controller_state` (control_msgs/msg/JointTrajectoryControllerState) of the motion nodes.
//! What a goal does is the node's [`JointGoals`] (its follower); this module converts the
//! messages and moves goals, feedback, results and the controller's state in and out of r2r.
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

use super::seconds;
use crate::nodes::follower::goals::{ControllerState, GoalEvent, JointGoals, Setpoint, Tick};
use crate::nodes::follower::spline::TrajectoryPoint;
use crate::nodes::follower::{ErrorCode, Follower, Goal, JointTolerance, Outcome};

type Action = FollowJointTrajectory::Action;
/// r2r's handle of a goal.
pub type Handle = r2r::ActionServerGoal<Action>;
/// The node's goals, shared by the action server and the node's control steps.
pub type Goals = Arc<Mutex<JointGoals<Handle>>>;

/// What the node's steps need to answer goals and publish the controller's state.
#[derive(Clone)]
pub struct FollowJointTrajectoryServer {
    goals: Goals,
    /// Behind a mutex: the steps come from the node's device thread, and r2r's publisher is
    /// Send, not Sync.
    state: Arc<Mutex<r2r::Publisher<JointTrajectoryControllerState>>>,
}

/// The device's own check of a point's positions: why it cannot take them, if it cannot.
type PointCheck = Box<dyn Fn(&[f64]) -> Result<(), String>>;
/// What the node does once the follower has taken a goal; why it could not, if it could not.
type TakeOver = Box<dyn Fn(&Follower) -> Result<(), String>>;

/// What a node gives the server: whether goals may come now (the node is active), the device's
/// own check of a point, and the node's clock [ns].
pub struct NodeChecks {
    pub active: Box<dyn Fn() -> bool>,
    pub reachable: PointCheck,
    pub now_ns: Box<dyn Fn() -> u64>,
    /// Called with the follower when it has taken a goal: the node stops what it played of its
    /// own (and a device that plays whole trajectories starts the goal's); an error ends the
    /// goal as INVALID_GOAL.
    pub taking_over: TakeOver,
}

impl FollowJointTrajectoryServer {
    /// Serves `~/follow_joint_trajectory` and advertises `~/controller_state` on `node`: a goal
    /// while the node is inactive is rejected; one the follower refuses is aborted at once with
    /// its error code, nothing commanded; an accepted goal replaces the one followed (cancelled).
    pub fn serve(
        node: &mut r2r::Node,
        spawner: &LocalSpawner,
        goals: Goals,
        checks: NodeChecks,
    ) -> anyhow::Result<FollowJointTrajectoryServer> {
        let state = node.create_publisher("~/controller_state", QosProfile::default())?;
        let mut incoming = node.create_action_server::<Action>("~/follow_joint_trajectory")?;
        let (server_goals, cancel_spawner) = (goals.clone(), spawner.clone());
        spawner.spawn_local(async move {
            while let Some(request) = incoming.next().await {
                if !(checks.active)() {
                    log::warn!("~/follow_joint_trajectory: goal {} rejected: the node is not active", request.uuid);
                    if let Err(error) = request.reject() {
                        log::error!("could not reject a goal: {error}");
                    }
                    continue;
                }
                let goal = goal_from_message(&request.goal);
                let (handle, cancels) = match request.accept() {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        log::error!("could not accept a goal: {error}");
                        continue;
                    }
                };
                let uuid = handle.uuid;
                let accepted = match server_goals.lock() {
                    Ok(mut goals) => goals
                        .accept(handle.clone(), &goal, (checks.now_ns)(), &*checks.reachable)
                        .map(|replaced| (replaced, (checks.taking_over)(goals.follower()))),
                    Err(_) => continue,
                };
                match accepted {
                    Err(refusal) => {
                        finish(handle, Outcome::Aborted { code: refusal.code, reason: refusal.reason });
                        continue;
                    }
                    Ok((replaced, started)) => {
                        if let Some((replaced, outcome)) = replaced {
                            finish(replaced, outcome);
                        }
                        if let Err(reason) = started {
                            let stopped = server_goals.lock().ok().and_then(|mut goals| goals.stop());
                            if let Some((handle, _)) = stopped {
                                finish(handle, Outcome::Aborted { code: ErrorCode::InvalidGoal, reason });
                            }
                            continue;
                        }
                        log::info!("~/follow_joint_trajectory: goal {uuid} of {} points", goal.points.len());
                    }
                }
                let cancel_goals = server_goals.clone();
                let watched = cancel_spawner.spawn_local(cancels.for_each(move |cancel| {
                    let cancelled =
                        cancel_goals.lock().ok().and_then(|mut goals| goals.cancel(|goal| goal.uuid == uuid));
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
        Ok(FollowJointTrajectoryServer { goals, state: Arc::new(Mutex::new(state)) })
    }

    /// A control step of the node at `now_ns` with its joints at `actual`, while the node is
    /// `active` (else the goal followed ends): answers the goal, publishes the controller's
    /// state and gives back what to command.
    pub fn step(&self, now_ns: u64, actual: crate::nodes::follower::JointState, active: bool) -> Option<Setpoint> {
        let mut goals = self.goals.lock().ok()?;
        if !active {
            if let Some((goal, _)) = goals.stop() {
                finish(goal, Outcome::Canceled { reason: "the node was deactivated".into() });
            }
            goals.observe(actual);
            return None;
        }
        let Tick { command, events, state } = goals.tick(now_ns, actual);
        drop(goals);
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
        if let Some(Err(error)) = self.state.lock().ok().map(|publisher| publisher.publish(&controller_state(&state))) {
            log::warn!("~/controller_state: {error}");
        }
        command
    }
}

/// Ends `goal` with `outcome`'s status, code and text.
fn finish(mut goal: Handle, outcome: Outcome) {
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

fn stamp_ns(stamp: &r2r::builtin_interfaces::msg::Time) -> u64 {
    u64::try_from(stamp.sec).unwrap_or(0) * 1_000_000_000 + u64::from(stamp.nanosec)
}

fn tolerances(message: &[ToleranceMsg]) -> Vec<(String, JointTolerance)> {
    message.iter().map(|t| (t.name.clone(), JointTolerance { position: t.position, velocity: t.velocity })).collect()
}

fn goal_from_message(goal: &FollowJointTrajectory::Goal) -> Goal {
    let trajectory = &goal.trajectory;
    Goal {
        joint_names: trajectory.joint_names.clone(),
        points: trajectory
            .points
            .iter()
            .map(|point| TrajectoryPoint {
                time_s: seconds(&point.time_from_start),
                positions: point.positions.clone(),
                velocities: point.velocities.clone(),
                accelerations: point.accelerations.clone(),
            })
            .collect(),
        stamp_ns: stamp_ns(&trajectory.header.stamp),
        path_tolerance: tolerances(&goal.path_tolerance),
        goal_tolerance: tolerances(&goal.goal_tolerance),
        goal_time_tolerance_s: seconds(&goal.goal_time_tolerance),
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
