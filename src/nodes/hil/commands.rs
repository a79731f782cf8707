//! Every command that moves hil_node's arm, in one place: FollowJointTrajectory goals,
//! FollowCartesianTrajectory goals, `~/joint_command` streams and `~/trajectory` segments.
//! Each is checked whole before it reaches the loop (its cost, its speed, every pose against
//! the protective stop's bounds); each that takes the arm over (a goal, a joint command, a
//! hold) ends the goal it overtakes and closes the joint command stream; the loop's frames
//! answer the goals, and the loop's end ends them all, so that after any stop the arm holds
//! until a new command. One value behind one lock in the node: the order of commands is the
//! order they take effect in.

use std::sync::Arc;

use super::feeder::{FeedRequest, FeedRequests, GOAL_START_TOLERANCE_M};
use super::goals::HilGoals;
use super::managed::LoopEnd;
use super::HilNodeConfig;
use crate::control::Trajectory;
use crate::hil::protection::{PathStart, ProtectionConfig, SeenOffsets};
use crate::hil::Withdrawals;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::msg::interfaces::FollowCartesianTrajectoryResult;
use crate::nodes::follower::clocks::Now;
use crate::nodes::follower::goals::{GoalEvent, JointGoals, Setpoint, TakesJointGoals};
use crate::nodes::follower::{ErrorCode, Goal, JointState, Outcome, Refusal};
use crate::nodes::goals::{
    check_duration, Answers, CartesianCheck, Checked, CommandSource, GoalUpdate, TakesCartesianGoals,
};
use crate::nodes::sil::joint_commands::JointCommands;
use crate::nodes::sil::joint_goals::{arm_follower, goal_trajectory, reference_joints};
use crate::nodes::trajectory_input::MultiDofPoint;
use crate::sim::Frame;

/// How a command that takes the arm withdraws what the loop has: it holds at rest where the
/// reference is until the command's samples come, or (a joint command stream's next move) the
/// loop goes on with what it has until they come, and they take over from there.
#[derive(Debug, Clone, Copy)]
enum Withdrawal {
    Holding,
    /// The move after it starts at this time [ns, the monotonic clock].
    Continuing(u64),
}

/// The most points a `~/trajectory` segment may hold: 100 s at the loop's 1 kHz.
pub const MAX_SEGMENT_POINTS: usize = 100_000;

/// hil_node's commands: `J` and `C` are the node's handles of FollowJointTrajectory and
/// FollowCartesianTrajectory goals.
pub struct HilCommands<J, C> {
    robot: Robot,
    bounds: ProtectionConfig,
    joint_goals: JointGoals<J>,
    cartesian: HilGoals<C>,
    commands: JointCommands,
    requests: FeedRequests,
    withdrawals: Arc<Withdrawals>,
    /// The withdrawal of the joint goals' latest request (a goal's start, or its hold).
    joint_claim: Option<u64>,
    /// The loop's reference (position [m], velocity [m/s]) at its latest frame; None while no
    /// loop runs and until its first frame.
    reference: Option<(Vec3, Vec3)>,
    /// Where the loop's estimate saw the platform point at its latest frames, off the forearm's
    /// sphere: where joint_trajectory_controller's hold aims (its state is the estimate's, a
    /// few frames old).
    seen: SeenOffsets,
    /// The motors' angles at the latest frame [rad]: which of the inverse kinematics' roots is
    /// the arm's.
    theta: [f64; 3],
    looping: bool,
    /// The number of the latest loop started ([`crate::hil::TakenFrame`]): a frame of another is
    /// of a loop that has stopped, still on its way to the node.
    loop_number: u64,
    /// How many times the loop has stopped: a Cartesian goal checked across a stop is refused.
    stops: u64,
    /// Goals ended when a command of the other kind took the arm over, answered with the next
    /// frame.
    overtaken_joint: Vec<GoalEvent<J>>,
    overtaken_cartesian: Vec<GoalUpdate<C>>,
}

impl<J: Clone, C: Clone> HilCommands<J, C> {
    /// The commands of the node configured by `config`, fed to the loop through `requests` and
    /// `withdrawals`.
    pub fn new(
        config: &HilNodeConfig,
        robot: Robot,
        requests: FeedRequests,
        withdrawals: Arc<Withdrawals>,
    ) -> Result<HilCommands<J, C>, String> {
        let settings = &config.settings;
        let follower = arm_follower(&settings.constraints, &settings.goal_limits)?;
        Ok(HilCommands {
            robot,
            bounds: config.hil.protection.clone(),
            joint_goals: JointGoals::new(follower),
            cartesian: HilGoals::new(withdrawals.clone()),
            commands: JointCommands::new(settings.joint_command_speed_m_s)
                .from_ros2_control(settings.ros2_control)
                .for_the_loop()
                .within(&config.hil.protection),
            requests,
            withdrawals,
            joint_claim: None,
            reference: None,
            seen: SeenOffsets::default(),
            theta: [0.0; 3],
            looping: false,
            loop_number: 0,
            stops: 0,
            overtaken_joint: Vec::new(),
            overtaken_cartesian: Vec::new(),
        })
    }

    /// Whether commands are taken (a loop runs and has sent a frame): the loop's reference,
    /// position [m] and velocity [m/s], or why not.
    pub fn taking(&self) -> Result<(Vec3, Vec3), String> {
        match (self.looping, self.reference) {
            (true, Some(reference)) => Ok(reference),
            (true, None) => Err("the HIL loop has not sent its first frame yet".into()),
            (false, _) => Err("hil_node is not active".into()),
        }
    }

    /// Takes the arm for `source` with `request`, given the withdrawal that starts it: checks
    /// that the feeder has room before anything is claimed. The withdrawal comes back.
    fn claim(&mut self, source: CommandSource, request: impl FnOnce(u64) -> FeedRequest) -> Result<u64, String> {
        self.requests.room()?;
        self.take_arm(source, Withdrawal::Holding, request)
    }

    /// Holds the arm where it is for `source` (a goal's end or cancel), even when the feeder's
    /// requests are full: a hold only takes the arm back, and comes once for each goal's end, so
    /// that a flood cannot multiply it. The withdrawal comes back.
    fn claim_hold(&mut self, source: CommandSource) -> Result<u64, String> {
        self.take_arm(source, Withdrawal::Holding, |withdrawal| FeedRequest::Hold { withdrawal })
    }

    /// The withdrawal (`kind`) for `request`, sent to the feeder whatever its room, and the arm
    /// taken for `source`.
    fn take_arm(
        &mut self,
        source: CommandSource,
        kind: Withdrawal,
        request: impl FnOnce(u64) -> FeedRequest,
    ) -> Result<u64, String> {
        let withdrawal = match kind {
            Withdrawal::Holding => self.withdrawals.request(),
            Withdrawal::Continuing(starts_ns) => self.withdrawals.request_continuing(starts_ns),
        };
        self.requests.send_past_the_bound(request(withdrawal))?;
        self.overtake(source);
        Ok(withdrawal)
    }

    /// `source` took the arm: the goals of the others end, and the joint command stream closes.
    fn overtake(&mut self, source: CommandSource) {
        let by = source.name();
        if source != CommandSource::JointGoal {
            let ended = self.joint_goals.end(Outcome::Canceled { reason: format!("replaced by {by}") });
            self.overtaken_joint.extend(ended.map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }));
            self.joint_claim = None;
        }
        if source != CommandSource::CartesianGoal {
            self.overtaken_cartesian.extend(self.cartesian.end(&format!("replaced by {by}")));
        }
        if source != CommandSource::JointCommands {
            self.commands.taken_over();
        }
    }

    /// A `~/joint_command` (`names`, `positions`) taken at `now_s` [s, the loop's monotonic
    /// clock, [`crate::hil::realtime::monotonic_ns`]], stamped `stamp_s` [s] where its header
    /// has a stamp: a move of the loop's reference ([`crate::nodes::sil::joint_commands`]) to a
    /// pose within the protective stop's bounds; or why it is not followed. A move that goes on
    /// from the stream's move before replaces it in the loop without a stop, at the time it was
    /// planned from on the loop's clock.
    pub fn joint_command(
        &mut self,
        (now_s, stamp_s): (f64, Option<f64>),
        names: &[String],
        positions: &[f64],
    ) -> Result<(), String> {
        self.requests.room()?;
        let command = self.commands.trajectory(&self.robot, (now_s, stamp_s), self.taking(), names, positions)?;
        let start = PathStart::AtTheReference { seen: self.seen.band() };
        if let Err(error) = self.bounds.check_path(&self.robot, command.trajectory.waypoints(), start) {
            // The loop goes on with the move before: the next command goes on from it.
            self.commands.not_sent();
            return Err(error);
        }
        let starts_ns = (command.starts_s * 1e9) as u64;
        let kind = if command.continues { Withdrawal::Continuing(starts_ns) } else { Withdrawal::Holding };
        let trajectory = Arc::new(command.trajectory);
        let sent = self
            .take_arm(CommandSource::JointCommands, kind, |withdrawal| FeedRequest::Follow { trajectory, withdrawal });
        if sent.is_err() {
            // No loop takes it: the next command starts afresh.
            self.commands.not_followed();
        }
        sent.map(|_| ())
    }

    /// A `~/trajectory` segment: it follows what is queued (the feeder checks it, and refuses
    /// it if it would not fit). One of more than [`MAX_SEGMENT_POINTS`] is refused here, so that
    /// the feeder's check of it cannot keep it from feeding the loop.
    pub fn segment(&mut self, points: Vec<MultiDofPoint>) -> Result<(), String> {
        self.taking()?;
        if points.len() > MAX_SEGMENT_POINTS {
            return Err(format!("{} points, more than a segment's {MAX_SEGMENT_POINTS}", points.len()));
        }
        self.requests.send(FeedRequest::Append(points))?;
        // A joint command's move no longer ends the queue: the stream's next move starts
        // afresh, holding first, not from a move the loop may have left for the segment.
        self.commands.not_followed();
        Ok(())
    }

    /// The `frame` of loop `loop_number`, at `now`, `published` or not: feedback to the goals
    /// (at the publish rate) and their ends, a FollowJointTrajectory goal's control step, timed
    /// on the steps' clock and stamped on the ROS clock (its hold, when it ends short of its end,
    /// goes to the loop while it still has the arm). A frame of a loop that stopped is not taken,
    /// whether it comes while no loop runs or after the next one started: its reference and its
    /// arm are not the running loop's.
    pub fn frame(&mut self, frame: &Frame, loop_number: u64, published: bool, now: Now) -> Answers<J, C> {
        if !self.looping || loop_number != self.loop_number {
            return self.drain();
        }
        self.reference = Some((frame.x_ref, frame.xd_ref));
        self.seen.seen(&self.robot, &frame.x);
        self.theta = frame.theta.into();
        let mut answers = self.drain();
        match self.cartesian.frame(frame) {
            Some(GoalUpdate::Feedback(..)) if !published => {}
            Some(update) => answers.cartesian.push(update),
            None => {}
        }
        if published {
            let actual = JointState {
                positions: frame.theta.iter().copied().collect(),
                velocities: frame.theta_dot.iter().copied().collect(),
            };
            let tick = self.joint_goals.tick(now.steps_ns, actual).stamped(now.ros_ns);
            if let Some(Setpoint::Hold(_)) = tick.command {
                // The arm holds where it is: what the goal queued is withdrawn.
                match self.claim_hold(CommandSource::JointGoal) {
                    Ok(withdrawal) => self.joint_claim = Some(withdrawal),
                    Err(error) => log::error!("cannot hold the arm after a goal: {error}"),
                }
            }
            answers.joint.extend(tick.events);
            answers.state = Some(tick.state);
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

    /// Loop `loop_number` starts: commands are taken from its first frame on.
    pub fn loop_started(&mut self, loop_number: u64) {
        (self.looping, self.loop_number) = (true, loop_number);
    }

    /// The loop ended (`end`): every goal ends, aborted with the reason; the joint command
    /// stream closes; the next loop starts from where the arm is, with nothing of this one's.
    pub fn loop_stopped(&mut self, end: &LoopEnd) -> Answers<J, C> {
        (self.looping, self.reference, self.joint_claim) = (false, None, None);
        self.seen = SeenOffsets::default();
        self.stops += 1;
        let mut answers = self.drain();
        let reason = format!("the arm stopped, holding: {}", end.reason());
        let code = match end {
            LoopEnd::ProtectiveStop(_) => ErrorCode::PathToleranceViolated,
            LoopEnd::Asked(_) | LoopEnd::Fault(_) => ErrorCode::InvalidGoal,
        };
        let ended = self.joint_goals.end(Outcome::Aborted { code, reason: reason.clone() });
        answers.joint.extend(ended.map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }));
        answers.cartesian.extend(self.cartesian.end(&reason));
        self.commands.taken_over();
        answers
    }
}

impl<J: Clone, C: Clone> TakesJointGoals<J> for HilCommands<J, C> {
    /// A goal through the forward kinematics, every sample within the protective stop's
    /// bounds, in place of what the loop has queued.
    fn accept_joint_goal(&mut self, handle: J, goal: &Goal, now_ns: u64) -> Result<Option<(J, Outcome)>, Refusal> {
        let refused = |reason: String| Refusal::new(ErrorCode::InvalidGoal, reason);
        let reference = self.taking().map_err(refused)?;
        let start = reference_joints(&self.robot, reference, &self.theta).map_err(refused)?;
        let (robot, bounds, seen) = (&self.robot, &self.bounds, self.seen.band());
        let (trajectory, replaced) = self.joint_goals.accept_from(handle, goal, now_ns, &start, |plan| {
            let trajectory = goal_trajectory(robot, plan, &reference.0, 0.0)?;
            bounds.check_path(robot, trajectory.waypoints(), PathStart::AtTheReference { seen })?;
            self.requests.room()?;
            Ok(Arc::new(trajectory))
        })?;
        let withdrawal =
            self.claim(CommandSource::JointGoal, |withdrawal| FeedRequest::Follow { trajectory, withdrawal });
        match withdrawal {
            Ok(withdrawal) => self.joint_claim = Some(withdrawal),
            Err(reason) => {
                // The feeder went away between the check and the send: the goal cannot run.
                let reason = format!("the HIL loop cannot take the goal: {reason}");
                let code = ErrorCode::InvalidGoal;
                self.overtaken_joint.extend(
                    self.joint_goals
                        .end(Outcome::Aborted { code, reason })
                        .map(|(goal, outcome)| GoalEvent::Finished { goal, outcome }),
                );
            }
        }
        Ok(replaced)
    }

    fn cancel_joint_goal(&mut self, is_it: &dyn Fn(&J) -> bool) -> Option<(J, Outcome)> {
        self.joint_goals.cancel(is_it)
    }
}

impl<J: Clone, C: Clone> TakesCartesianGoals<C> for HilCommands<J, C> {
    /// A goal starts where the arm's reference holds (the loop never jumps to a goal) and
    /// keeps within the protective stop's bounds; it takes the place of what is queued.
    /// Its path against the protective stop's bounds and the motors' speed and acceleration,
    /// from the hold the goal's withdrawal makes to the hold at its end.
    fn cartesian_check(&self) -> Result<CartesianCheck, String> {
        self.taking()?;
        let (robot, bounds) = (self.robot.clone(), self.bounds.clone());
        // Its first waypoint is the client's, within GOAL_START_TOLERANCE_M of the loop's reference.
        let check = move |trajectory: &Trajectory| {
            bounds.check_path(&robot, trajectory.waypoints(), PathStart::Requested)?;
            bounds.check_motion(&robot, trajectory.waypoints(), (true, true))
        };
        Ok(CartesianCheck::new(check, self.stops))
    }

    fn follow_checked_cartesian_goal(
        &mut self,
        handle: C,
        checked: Checked,
    ) -> Result<Option<(C, FollowCartesianTrajectoryResult)>, String> {
        let trajectory = checked.since(self.stops, "hil_node")?;
        check_duration(&trajectory, self.joint_goals.follower().limits())?;
        let (reference, _) = self.taking()?;
        let first = trajectory.waypoints()[0].x;
        let distance = (first - reference).norm();
        if !(distance <= GOAL_START_TOLERANCE_M) {
            return Err(format!(
                "the first waypoint is {distance:.4} m from the arm's reference ({:.4}, {:.4}, {:.4}) m; a goal starts there (within {GOAL_START_TOLERANCE_M} m)",
                reference.x, reference.y, reference.z
            ));
        }
        let follow = trajectory.clone();
        let withdrawal = self
            .claim(CommandSource::CartesianGoal, |withdrawal| FeedRequest::Follow { trajectory: follow, withdrawal })?;
        Ok(self.cartesian.start(handle, trajectory, withdrawal))
    }

    fn cancel_cartesian_goal(&mut self, is_it: &dyn Fn(&C) -> bool) -> bool {
        if !self.cartesian.handle().is_some_and(is_it) {
            return false;
        }
        match self.claim_hold(CommandSource::CartesianGoal) {
            Ok(withdrawal) => self.cartesian.cancelling(withdrawal),
            Err(error) => {
                log::error!("cannot hold the arm for a cancel: {error}");
                self.overtaken_cartesian.extend(self.cartesian.end(&format!("cancelled, but {error}")));
            }
        }
        true
    }
}
