//! Every command that moves sil_node's simulated arm, in one place: FollowJointTrajectory goals,
//! FollowCartesianTrajectory goals, `~/joint_command` streams and `~/trajectory` messages. Each
//! is checked whole before it reaches the run loop; each that takes the arm over ends the goal it
//! overtakes and closes the joint command stream; the run's events answer the goals, and a
//! failed run or the node's end ends them. One value behind one lock in the node.

use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use super::joint_commands::JointCommands;
use super::joint_goals::{arm_follower, goal_trajectory, held_at, reference_joints, HOLD_S};
use super::run::{RunEnd, RunRequest, SilEvent};
use super::SilNodeSettings;
use crate::control::Trajectory;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::msg::interfaces::{FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryResult};
use crate::nodes::follower::goals::{GoalEvent, JointGoals, Setpoint, TakesJointGoals};
use crate::nodes::follower::{ErrorCode, Goal, JointState, Outcome, Refusal};
use crate::nodes::goals::{
    check_duration, overtaken_result, Answers, CartesianCheck, Checked, CommandSource, GoalOutcome, GoalUpdate,
    TakesCartesianGoals,
};
use crate::sim::Frame;

/// The most requests that wait for the run loop; more are refused.
pub const REQUEST_DEPTH: usize = 64;

/// Sends `request` to the run loop, if it has room.
fn send(requests: &SyncSender<RunRequest>, request: RunRequest) -> Result<(), String> {
    match requests.try_send(request) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(format!("{REQUEST_DEPTH} requests already wait for the simulation")),
        Err(TrySendError::Disconnected(_)) => Err("the simulation has stopped".into()),
    }
}

/// The FollowCartesianTrajectory goal served, followed through the run's events: the goal's run
/// is the one that starts its trajectory (the same `Arc`).
#[derive(Debug)]
struct ServedGoal<C> {
    handle: C,
    trajectory: Arc<Trajectory>,
    running: bool,
}

/// Whether the arm's state at hand is the simulation's. A run started afresh puts the simulated
/// arm at rest on its trajectory's start: until its first frame, the last frame's state is not
/// the arm's, and a goal or command planned from it would step the controller's reference.
#[derive(Debug, Clone)]
enum Restart {
    None,
    /// Asked for, with this trajectory.
    Asked(Arc<Trajectory>),
    /// Started, no frame yet.
    Started,
}

/// sil_node's commands: `J` and `C` are the node's handles of FollowJointTrajectory and
/// FollowCartesianTrajectory goals.
pub struct SilCommands<J, C> {
    robot: Robot,
    joint_goals: JointGoals<J>,
    cartesian: Option<ServedGoal<C>>,
    commands: JointCommands,
    requests: SyncSender<RunRequest>,
    /// The controller's reference (position [m], velocity [m/s]) and the motors' angles [rad]
    /// at the latest frame.
    reference: (Vec3, Vec3),
    theta: [f64; 3],
    restart: Restart,
    /// Goals ended when a command of the other kind took the arm over, answered with the next
    /// event.
    overtaken_joint: Vec<GoalEvent<J>>,
    overtaken_cartesian: Vec<GoalUpdate<C>>,
}

impl<J: Clone, C: Clone> SilCommands<J, C> {
    /// The commands of the node of `settings`, whose arm starts at `start` [m], sent to its run
    /// loop through `requests` (bounded: [`REQUEST_DEPTH`]).
    pub fn new(
        settings: &SilNodeSettings,
        robot: Robot,
        start: Vec3,
        requests: SyncSender<RunRequest>,
    ) -> Result<SilCommands<J, C>, String> {
        let follower = arm_follower(&settings.constraints, &settings.goal_limits)?;
        let robot_theta = robot.inverse_kinematics(&start, None).map_err(|error| error.to_string())?.into();
        Ok(SilCommands {
            robot,
            joint_goals: JointGoals::new(follower),
            cartesian: None,
            commands: JointCommands::new(settings.joint_command_speed_m_s).from_ros2_control(settings.ros2_control),
            requests,
            reference: (start, Vec3::zeros()),
            theta: robot_theta,
            restart: Restart::None,
            overtaken_joint: Vec::new(),
            overtaken_cartesian: Vec::new(),
        })
    }

    /// Sends `request` for `source`, which then has the arm ([`SilCommands::overtake`]).
    fn claim(&mut self, source: CommandSource, request: RunRequest) -> Result<(), String> {
        let restart = match &request {
            RunRequest::Follow(trajectory) => Some(Restart::Asked(trajectory.clone())),
            RunRequest::Steer(_) | RunRequest::Stop => None,
        };
        send(&self.requests, request)?;
        self.restart = restart.unwrap_or(self.restart.clone());
        self.overtake(source);
        Ok(())
    }

    /// Whether the arm's state at hand is the simulation's, so that a goal or a command can
    /// start from it.
    fn current(&self) -> Result<(), String> {
        match self.restart {
            Restart::None => Ok(()),
            Restart::Asked(_) | Restart::Started => {
                Err("the simulation is starting a new run: where its arm is is not known yet".into())
            }
        }
    }

    /// `source` took the arm: the goals of the others end, and the joint command stream closes.
    fn overtake(&mut self, source: CommandSource) {
        let by = source.name();
        if source != CommandSource::JointGoal {
            let ended = self.joint_goals.end(Outcome::Canceled { reason: format!("replaced by {by}") });
            self.overtaken_joint.extend(ended.map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }));
        }
        if source != CommandSource::CartesianGoal {
            if let Some(goal) = self.cartesian.take() {
                let result = overtaken_result(by);
                self.overtaken_cartesian.push(GoalUpdate::Finished(goal.handle, GoalOutcome::Aborted, result));
            }
        }
        if source != CommandSource::JointCommands {
            self.commands.taken_over();
        }
    }

    /// A `~/joint_command` (`names`, `positions`) that came at `now_s` [s], stamped `stamp_s`
    /// [s] where its header has a stamp: the simulation steered along a move of the
    /// controller's reference ([`super::joint_commands`]); or why not.
    pub fn joint_command(
        &mut self,
        (now_s, stamp_s): (f64, Option<f64>),
        names: &[String],
        positions: &[f64],
    ) -> Result<(), String> {
        let reference = self.current().map(|()| self.reference);
        let command = self.commands.trajectory(&self.robot, (now_s, stamp_s), reference, names, positions)?;
        let sent = self.claim(CommandSource::JointCommands, RunRequest::Steer(Arc::new(command.trajectory)));
        if sent.is_err() {
            // The simulation goes on with the move before, to rest: the next command starts afresh.
            self.commands.not_followed();
        }
        sent
    }

    /// A `~/trajectory` message's trajectory, run afresh in place of the run.
    pub fn trajectory(&mut self, trajectory: Trajectory) -> Result<(), String> {
        self.claim(CommandSource::Trajectory, RunRequest::Follow(Arc::new(trajectory)))
    }

    /// The run's `event` at `now_ns` on the node's clock, `published` or not: feedback to the
    /// goals (at the publish rate) and their ends; a FollowJointTrajectory goal's control step
    /// (its hold, when it ends short of its end, steers the simulation while it still has the
    /// arm); a failed run ends the goal followed.
    pub fn event(&mut self, event: &SilEvent, published: bool, now_ns: u64) -> Answers<J, C> {
        let mut answers = self.drain();
        answers.cartesian.extend(self.cartesian_update(event, published));
        self.restart = match (&self.restart, event) {
            (Restart::Asked(asked), SilEvent::RunStarted(started)) if Arc::ptr_eq(asked, started) => Restart::Started,
            (Restart::Started, SilEvent::Frame { .. }) => Restart::None,
            // The new run ended with no frame: the next starts afresh from its own start.
            (Restart::Started, SilEvent::RunEnded { end: RunEnd::Stopped | RunEnd::Failed(_), .. }) => Restart::None,
            (restart, _) => restart.clone(),
        };
        match event {
            SilEvent::Frame { frame, .. } => {
                (self.reference, self.theta) = ((frame.x_ref, frame.xd_ref), frame.theta.into());
                if published {
                    self.joint_step(frame, now_ns, &mut answers);
                }
            }
            SilEvent::RunEnded { end: end @ (RunEnd::Stopped | RunEnd::Failed(_)), .. } => {
                // The next run starts afresh, its arm at rest on its first waypoint: so does
                // what the next goal or command plans from, a stream's next move included; and
                // the stream's command in force is not followed again, as after any stop.
                self.reference.1 = Vec3::zeros();
                self.commands.taken_over();
                if let RunEnd::Failed(error) = end {
                    let reason = format!("the simulation failed: {error}");
                    let ended = self.joint_goals.end(Outcome::Aborted { code: ErrorCode::InvalidGoal, reason });
                    answers.joint.extend(ended.map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }));
                }
            }
            SilEvent::RunStarted(_) | SilEvent::RunEnded { .. } | SilEvent::Refused(_) => {}
        }
        answers
    }

    /// The goals a command of the other kind ended since the last answers: the node answers
    /// them right after each goal or command it hands over.
    pub fn drain(&mut self) -> Answers<J, C> {
        Answers {
            joint: std::mem::take(&mut self.overtaken_joint),
            state: None,
            cartesian: std::mem::take(&mut self.overtaken_cartesian),
        }
    }

    fn joint_step(&mut self, frame: &Frame, now_ns: u64, answers: &mut Answers<J, C>) {
        let actual = JointState {
            positions: frame.theta.iter().copied().collect(),
            velocities: frame.theta_dot.iter().copied().collect(),
        };
        let tick = self.joint_goals.tick(now_ns, actual);
        // The hold keeps the controller's reference where it is, as hil_node's loop holds it.
        if let Some(Setpoint::Hold(_)) = &tick.command {
            let forearm = (self.robot.elbow(), self.robot.params().l_arm);
            let held = held_at(&self.robot, frame.x_ref, forearm)
                .map_err(|error| error.to_string())
                .and_then(|hold| self.claim(CommandSource::JointGoal, RunRequest::Steer(Arc::new(hold))));
            if let Err(error) = held {
                log::error!("cannot hold the arm after a goal: {error}");
            }
        }
        answers.joint.extend(tick.events);
        answers.state = Some(tick.state);
    }

    /// What `event` means for the Cartesian goal served: feedback with each frame that was
    /// `published`, the result at its run's end.
    fn cartesian_update(&mut self, event: &SilEvent, published: bool) -> Option<GoalUpdate<C>> {
        let goal = self.cartesian.as_mut()?;
        match event {
            SilEvent::RunStarted(trajectory) => {
                goal.running = Arc::ptr_eq(trajectory, &goal.trajectory);
                None
            }
            SilEvent::Frame { frame, .. } if goal.running && published => Some(GoalUpdate::Feedback(
                goal.handle.clone(),
                FollowCartesianTrajectoryFeedback::at(&goal.trajectory, frame),
            )),
            SilEvent::RunEnded { stats, end } if goal.running => {
                let (outcome, failure) = match end {
                    RunEnd::Complete => (GoalOutcome::Succeeded, None),
                    RunEnd::Replaced => (GoalOutcome::Aborted, Some("replaced by a new trajectory".to_owned())),
                    RunEnd::Stopped => (GoalOutcome::Canceled, Some("cancelled".to_owned())),
                    RunEnd::Failed(error) => (GoalOutcome::Aborted, Some(error.to_string())),
                };
                let handle = self.cartesian.take()?.handle;
                Some(GoalUpdate::Finished(handle, outcome, FollowCartesianTrajectoryResult::of_run(stats, failure)))
            }
            SilEvent::Frame { .. } | SilEvent::RunEnded { .. } | SilEvent::Refused(_) => None,
        }
    }

    /// The node is ending: every goal ends, aborted.
    pub fn stopped(&mut self, reason: &str) -> Answers<J, C> {
        let mut answers = self.drain();
        let ended = self.joint_goals.end(Outcome::Aborted { code: ErrorCode::InvalidGoal, reason: reason.to_owned() });
        answers.joint.extend(ended.map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }));
        if let Some(goal) = self.cartesian.take() {
            let result = FollowCartesianTrajectoryResult::refused(reason);
            answers.cartesian.push(GoalUpdate::Finished(goal.handle, GoalOutcome::Aborted, result));
        }
        answers
    }
}

impl<J: Clone, C: Clone> TakesJointGoals<J> for SilCommands<J, C> {
    /// A goal through the forward kinematics: the simulation is steered along it from where the
    /// arm is, then holds its end.
    fn accept_joint_goal(&mut self, handle: J, goal: &Goal, now_ns: u64) -> Result<Option<(J, Outcome)>, Refusal> {
        let refused = |reason: String| Refusal::new(ErrorCode::InvalidGoal, reason);
        self.current().map_err(refused)?;
        let start = reference_joints(&self.robot, self.reference, &self.theta).map_err(refused)?;
        let (robot, near, requests) = (&self.robot, self.reference.0, &self.requests);
        let ((), replaced) = self.joint_goals.accept_from(handle, goal, now_ns, &start, |plan| {
            let trajectory = goal_trajectory(robot, plan, &near, HOLD_S)?;
            send(requests, RunRequest::Steer(Arc::new(trajectory)))
        })?;
        // Sent already, as the last check: what the goal overtakes ends.
        self.overtake(CommandSource::JointGoal);
        Ok(replaced)
    }

    fn cancel_joint_goal(&mut self, is_it: &dyn Fn(&J) -> bool) -> Option<(J, Outcome)> {
        self.joint_goals.cancel(is_it)
    }
}

impl<J: Clone, C: Clone> TakesCartesianGoals<C> for SilCommands<J, C> {
    /// None: a simulation runs what it is given.
    fn cartesian_check(&self) -> Result<CartesianCheck, String> {
        Ok(CartesianCheck::new(|_| Ok(()), 0))
    }

    /// The simulation starts the goal's trajectory afresh, the arm at rest on its first
    /// waypoint.
    fn follow_checked_cartesian_goal(
        &mut self,
        handle: C,
        checked: Checked,
    ) -> Result<Option<(C, FollowCartesianTrajectoryResult)>, String> {
        let trajectory = checked.since(0, "sil_node")?;
        check_duration(&trajectory, self.joint_goals.follower().limits())?;
        self.claim(CommandSource::CartesianGoal, RunRequest::Follow(trajectory.clone()))?;
        let served = ServedGoal { handle, trajectory, running: false };
        let replaced = self.cartesian.replace(served);
        Ok(replaced.map(|goal| (goal.handle, overtaken_result("a new goal"))))
    }

    fn cancel_cartesian_goal(&mut self, is_it: &dyn Fn(&C) -> bool) -> bool {
        if !self.cartesian.as_ref().is_some_and(|goal| is_it(&goal.handle)) {
            return false;
        }
        match send(&self.requests, RunRequest::Stop) {
            Ok(()) => true,
            Err(error) => {
                log::error!("cancel refused: {error}");
                false
            }
        }
    }
}
