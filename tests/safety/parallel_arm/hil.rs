//! hil_node as a state machine: its commands ([`HilCommands`]), its feeder's requests, the
//! loop's withdrawals, frames and ends modelled.

use std::sync::Arc;

use arm_hil::control::{Trajectory, Waypoint};
use arm_hil::hil::protection::{PathStart, ProtectionConfig, SeenOffsets};
use arm_hil::hil::Withdrawals;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::follower::clocks::Now;
use arm_hil::nodes::follower::goals::TakesJointGoals;
use arm_hil::nodes::follower::stream_gate::STREAM_GAP_S;
use arm_hil::nodes::goals::{Answers, Checked, TakesCartesianGoals};
use arm_hil::nodes::hil::commands::HilCommands;
use arm_hil::nodes::hil::feeder::{feed_requests, segment_after, FeedRequest, Feeder, RequestQueue, SegmentError};
use arm_hil::nodes::hil::managed::LoopEnd;
use arm_hil::nodes::hil::{HilNodeConfig, HilNodeSettings};
use arm_hil::nodes::trajectory_input::MultiDofPoint;
use arm_hil::sim::{Frame, SilConfig};
use proptest_state_machine::StateMachineTest;

use super::{
    book_answers, cancel_cartesian_goal, cancel_joint_goal, joint_goal, now_ns, one_owner, Command, Expected,
    HilMachine, LoopStop, Model, Transition,
};
use crate::safety::{limits, Dice, GoalBook};

/// The loop's side of hil_node's feeder: each request as the loop makes it take effect (through
/// the node's own [`Feeder`]), every waypoint sent within the protective stop's bounds; a
/// segment after a hold runs from where the loop holds, and its way from there is within them.
struct Loop {
    feeder: Option<Feeder>,
    /// Where the loop holds for the next segment to start from, if it holds.
    holding_at: Option<Vec3>,
    /// Which of the requests the node sends are joint commands' moves.
    joint_command_moves: JointCommandMoves,
    /// Where the node saw the arm at the loop's latest frames, as it keeps them.
    seen: SeenOffsets,
    /// How far off the forearm's sphere the loop started [m], and the least and the most any of
    /// its frames saw it off.
    start_offset_m: f64,
    seen_this_loop_m: (f64, f64),
}

/// The requests joint commands sent, by their place among all the node sent: the loop takes
/// them in that order.
#[derive(Default)]
struct JointCommandMoves {
    /// How many requests the loop has taken.
    taken: usize,
    /// The places of the joint commands' requests not yet taken.
    places: std::collections::VecDeque<std::ops::Range<usize>>,
}

impl JointCommandMoves {
    /// Marks the requests a joint command sent: those waiting beyond the `waiting_before` that
    /// waited before it.
    fn sent(&mut self, waiting_before: usize, waiting_after: usize) {
        self.places.push_back(self.taken + waiting_before..self.taken + waiting_after);
    }

    /// Whether the next request the loop takes is a joint command's.
    fn take(&mut self) -> bool {
        while self.places.front().is_some_and(|places| places.end <= self.taken) {
            self.places.pop_front();
        }
        let is_joint_command = self.places.front().is_some_and(|places| places.contains(&self.taken));
        self.taken += 1;
        is_joint_command
    }
}

impl Loop {
    fn take_requests(&mut self, model: &mut Model, queue: &RequestQueue, withdrawals: &Withdrawals) {
        // The start every path the loop takes is checked from: its reference (each way is
        // anchored there), with where the node saw the arm lately.
        let at_the_models_arm = PathStart::AtTheReference { seen: self.seen.band() };
        let Some(feeder) = &mut self.feeder else { return };
        let bounds = ProtectionConfig::default();
        while let Some(request) = queue.try_take() {
            let joint_command = self.joint_command_moves.take();
            match &request {
                FeedRequest::Follow { trajectory, withdrawal } => {
                    model.check_sent(trajectory);
                    let continues = withdrawals.continues(*withdrawal).is_some();
                    if continues {
                        // A command stream's next move replaces the one before as it goes: it
                        // starts where the loop's reference is, with no step (but for the way
                        // the loop's reference goes in the millisecond it takes to take the move up).
                        let (first, at) = (trajectory.waypoints()[0].x, model.following.held_or(model.t));
                        assert!((first - at).norm() <= 1e-3, "a stream's move starts {first} off {at}");
                    }
                    if joint_command {
                        assert_within_motor_acceleration(model, trajectory.waypoints(), continues);
                    }
                    assert_within_motor_speed(&model.robot, trajectory.waypoints());
                    // Checked from the model's own reference, not from the path's first
                    // waypoint: a path that starts away from the model's reference fails here.
                    let anchored: Vec<Waypoint> = std::iter::once(Waypoint {
                        t: trajectory.waypoints()[0].t,
                        x: model.following.held_or(model.t),
                        ..Waypoint::default()
                    })
                    .chain(trajectory.waypoints().iter().copied())
                    .collect();
                    bounds
                        .check_path(&model.robot, &anchored, at_the_models_arm)
                        .expect("a path past the bounds was sent");
                    Loop::assert_no_ratchet(self.start_offset_m, self.seen_this_loop_m, &model.robot, &anchored);
                    withdrawals.done(*withdrawal, model.t, Some(model.following.held_or(model.t)));
                    model.following.follow(trajectory.clone(), model.t);
                    self.holding_at = None;
                }
                FeedRequest::Hold { withdrawal } => {
                    let x = model.following.held_or(model.t);
                    withdrawals.done(*withdrawal, model.t, Some(x));
                    model.following.hold(x);
                    self.holding_at = Some(x);
                }
                FeedRequest::Append(_) => {}
            }
            let segment = match &request {
                FeedRequest::Append(points) => Some(points.clone()),
                _ => None,
            };
            match (feeder.request(request), segment, self.holding_at) {
                // Queued behind what runs: the model's reference goes on with that.
                (Ok(()), Some(_), None) => {}
                (Ok(()), Some(points), Some(from)) => {
                    let samples = segment_after(&points, &from, &model.robot).expect("a segment taken");
                    let way: Vec<Waypoint> =
                        std::iter::once(Waypoint { t: 0.0, x: from, ..Waypoint::default() }).chain(samples).collect();
                    bounds
                        .check_path(&model.robot, &way, at_the_models_arm)
                        .expect("a segment's way from the hold past the bounds");
                    Loop::assert_no_ratchet(self.start_offset_m, self.seen_this_loop_m, &model.robot, &way);
                    bounds.check_motion(&model.robot, &way, (true, false)).expect("a segment too fast from the hold");
                    assert_within_motor_speed(&model.robot, &way);
                    let trajectory = Trajectory::with_robot_forearm(way, &model.robot).expect("a segment's way");
                    model.following.follow(Arc::new(trajectory), model.t);
                    self.holding_at = None;
                }
                (result, _, _) => assert!(
                    !matches!(result, Err(SegmentError::HoldNotMade(_))),
                    "a segment waits for a hold the loop made"
                ),
            }
        }
    }

    /// A loop starts (again), holding where the arm is: the withdrawal it makes first says so.
    fn start(&mut self, model: &Model, withdrawals: &Withdrawals) {
        let withdrawal = withdrawals.request();
        self.feeder = self.feeder.take().map(|feeder| feeder.holding(withdrawal));
        withdrawals.done(withdrawal, model.t, Some(model.x));
        self.holding_at = Some(model.x);
        self.start_offset_m = model.robot.forearm_sphere_offset(&model.x);
        self.seen_this_loop_m = (self.start_offset_m, self.start_offset_m);
    }

    /// The loop's estimate saw the platform point at `x` [m].
    fn saw(&mut self, robot: &Robot, x: &Vec3) {
        self.seen.seen(robot, x);
        let off = robot.forearm_sphere_offset(x);
        if off.is_finite() {
            let (low, high) = self.seen_this_loop_m;
            self.seen_this_loop_m = (low.min(off), high.max(off));
        }
    }

    /// No point along `way` (each line sampled every 1/64 of it) goes farther off the forearm's
    /// sphere on a side than the bound, where the loop started (`start_offset_m` off it) or, up
    /// to the bound and the tracking bound together, where a frame of the loop saw the arm
    /// (`seen_m`) (docs/hil.md, "The forearm's sphere"): nothing ratchets the arm outward within
    /// a loop. Kept apart from the node's own check, which the model also runs.
    fn assert_no_ratchet(start_offset_m: f64, (seen_low, seen_high): (f64, f64), robot: &Robot, way: &[Waypoint]) {
        const SAMPLES_PER_LINE: u32 = 64;
        let bounds = ProtectionConfig::default();
        let (bound_m, cap_m) = (bounds.max_forearm_offset_m, bounds.max_forearm_offset_m + bounds.max_tracking_error_m);
        let low = start_offset_m.min(-bound_m).min(seen_low.max(-cap_m));
        let high = start_offset_m.max(bound_m).max(seen_high.min(cap_m));
        let lines = way.windows(2).flat_map(|pair| {
            (0..=SAMPLES_PER_LINE).map(move |k| pair[0].x.lerp(&pair[1].x, f64::from(k) / f64::from(SAMPLES_PER_LINE)))
        });
        for x in way.iter().map(|waypoint| waypoint.x).chain(lines) {
            let off = robot.forearm_sphere_offset(&x);
            assert!(
                (low - 1e-9..=high + 1e-9).contains(&off),
                "a path {off:+.4} m off the forearm's sphere, past {low:+.4} to {high:+.4} m (the loop started \
                 {start_offset_m:+.4} m off it, and saw the arm {seen_low:+.4} to {seen_high:+.4} m off it)"
            );
        }
    }
}

/// A joint command's move (`waypoints`) accelerates no motor harder than the motors may
/// (`hil.protection.max_joint_acceleration_rad_s2`), as `JointCommands::within` promises, along
/// its lines to rest at its end. Where the loop `continues` into it, or it starts going, it takes
/// up the loop's reference, as the model has it when the loop takes the move, with no velocity
/// step: from the loop reference's last millisecond (extrapolated at its velocity) to the move's
/// first line within a tenth over the bound (the lines of the node's plan and of this check
/// differ; a step asks hundreds of rad/s^2). Else it starts from rest, the loop holding first.
fn assert_within_motor_acceleration(model: &Model, waypoints: &[Waypoint], continues: bool) {
    const BEFORE_S: f64 = 1e-3;
    let bounds = ProtectionConfig::default();
    let from_rest = !continues && waypoints[0].xd == Vec3::zeros();
    if let Err(reason) = bounds.check_motion(&model.robot, waypoints, (from_rest, true)) {
        panic!("a joint command's move too fast for the motors was sent: {reason}");
    }
    if let (false, [first, second, ..]) = (from_rest, waypoints) {
        let reference = model.following.reference_at(model.t);
        let before = Waypoint { t: first.t - BEFORE_S, x: reference.x - reference.xd * BEFORE_S, ..*first };
        let junction = ProtectionConfig {
            max_joint_acceleration_rad_s2: bounds.max_joint_acceleration_rad_s2 * 1.1,
            ..bounds.clone()
        };
        if let Err(reason) = junction.check_motion(&model.robot, &[before, *first, *second], (false, false)) {
            panic!("a joint command's move takes up the loop's reference with a step: {reason}");
        }
    }
}

/// No two waypoints of what the loop is sent turn a motor faster than the motors may turn
/// (`hil.protection.max_joint_speed_rad_s`), found here through the inverse kinematics alone.
fn assert_within_motor_speed(robot: &Robot, waypoints: &[Waypoint]) {
    let top = ProtectionConfig::default().max_joint_speed_rad_s;
    let mut before: Option<(f64, Vec3)> = None;
    for waypoint in waypoints {
        let theta =
            robot.inverse_kinematics(&waypoint.x, before.as_ref().map(|(_, theta)| theta)).expect("a waypoint placed");
        if let Some((t, previous)) = before {
            let speed = ((theta - previous) / (waypoint.t - t)).amax();
            assert!(speed <= top * (1.0 + 1e-6), "a motor would turn at {speed} rad/s at {} s", waypoint.t);
        }
        before = Some((waypoint.t, theta));
    }
}

/// hil_node's commands with its loop and feeder modelled, and what the invariants need to
/// remember.
pub(crate) struct HilNode {
    model: Model,
    commands: HilCommands<u64, u64>,
    queue: RequestQueue,
    withdrawals: Arc<Withdrawals>,
    hil_loop: Loop,
    book: GoalBook,
    cartesian: GoalBook,
    stream: Option<Vec<f64>>,
    stream_at: f64,
    /// No command taken since the loop stopped: nothing may reach the loop.
    held_since_stop: bool,
    /// A Cartesian goal checked off the node's thread, to be followed at the check's end, and
    /// whether the loop stopped meanwhile.
    checking: Option<(u64, Result<Checked, String>, bool)>,
    looping: bool,
    /// The number of the loop that runs or ran last, and its latest frame: after a stop, one
    /// still on its way to the node when the next loop starts.
    loop_number: u64,
    last_frame: Option<Frame>,
}

impl HilNode {
    fn answers(&mut self, answers: Answers<u64, u64>) {
        book_answers(&mut self.book, &mut self.cartesian, answers);
    }

    fn joint_goal(&mut self, recipe: u8, seed: u64) {
        let (now, handle, before) = (now_ns(&self.model), self.book.handle(), self.book.running());
        let goal = joint_goal(&self.model, recipe, seed, now);
        match self.commands.accept_joint_goal(handle, &goal, now) {
            Ok(replaced) => {
                assert!(self.looping, "a goal was taken while no loop runs");
                self.book.accepted(handle, &goal, replaced, now);
                self.held_since_stop = false;
            }
            Err(_) => assert_eq!(self.book.running(), before, "a refused goal leaves the one running"),
        }
    }

    fn joint_command(&mut self, command: Command, seed: u64) {
        let positions = self.model.joint_command(command, &mut Dice::new(seed), &self.stream);
        let unbroken = self.model.t - self.stream_at <= STREAM_GAP_S;
        let stale = self.held_since_stop && unbroken && self.stream.as_ref() == Some(&positions);
        (self.stream, self.stream_at) = (Some(positions.clone()), self.model.t);
        // Stamped as ros2_control's plugin stamps them, not at all (as a script may send them),
        // or forged: a thousandth of their time apart, a stream a thousand times as fast.
        let stamp = match seed % 3 {
            0 => Some(self.model.t),
            1 => None,
            _ => Some(self.model.t * 1e-3),
        };
        let waiting_before = self.queue.waiting();
        let taken = self.commands.joint_command((self.model.t, stamp), &Model::names(), &positions);
        if stale {
            assert!(taken.is_err(), "the command in force at the stop is followed again");
        }
        if taken.is_ok() {
            self.held_since_stop = false;
            self.hil_loop.joint_command_moves.sent(waiting_before, self.queue.waiting());
        }
    }

    fn segment(&mut self, points: u8, reach_mm: u8, seed: u64) {
        let (mut dice, reach) = (Dice::new(seed), f64::from(reach_mm) * 1e-3);
        let points = (1..=points)
            .map(|k| MultiDofPoint {
                translations: vec![(self.model.x + Vec3::new(0.0, 0.0, dice.range(-reach, reach))).into()],
                time_from_start_s: f64::from(k) * 0.5,
                ..MultiDofPoint::default()
            })
            .collect();
        if self.commands.segment(points).is_ok() {
            self.held_since_stop = false;
        }
    }

    /// The goal `handle`, `checked`, followed if the node takes it; whether it did.
    fn cartesian_goal(&mut self, handle: u64, checked: Result<Checked, String>, now: u64) -> bool {
        let Ok(Ok(replaced)) = checked.map(|checked| self.commands.follow_checked_cartesian_goal(handle, checked))
        else {
            return false;
        };
        self.cartesian.accepted(handle, &Default::default(), None, now);
        self.held_since_stop = false;
        if let Some((replaced, result)) = replaced {
            assert!(!result.success);
            self.cartesian.ended_once(replaced);
        }
        true
    }

    fn stop(&mut self, stop: LoopStop) {
        if let Some((_, _, stopped_since)) = &mut self.checking {
            *stopped_since = true;
        }
        let answers = self.commands.loop_stopped(&stop.end());
        self.answers(answers);
        assert!(!self.book.any_running() && !self.cartesian.any_running(), "a goal outlives the loop");
        self.hil_loop.take_requests(&mut self.model, &self.queue, &self.withdrawals);
        self.hil_loop.seen = SeenOffsets::default();
        (self.looping, self.held_since_stop) = (false, true);
    }

    fn run(&mut self, frames: u16) {
        if !self.looping {
            assert!(self.commands.taking().is_err(), "commands taken while no loop runs");
            return;
        }
        for _ in 0..frames {
            if self.held_since_stop {
                assert!(self.queue.try_take().is_none(), "the loop was fed after a stop before any new command");
            }
            self.hil_loop.take_requests(&mut self.model, &self.queue, &self.withdrawals);
            let (frame, _) = self.model.frame();
            self.hil_loop.saw(&self.model.robot, &frame.x);
            let now = now_ns(&self.model);
            self.last_frame = Some(frame);
            let answers = self.commands.frame(&frame, self.loop_number, true, Now::on_one_clock(now));
            self.answers(answers);
            one_owner(&self.book, &self.cartesian, now);
        }
    }
}

impl StateMachineTest for HilMachine {
    type SystemUnderTest = HilNode;
    type Reference = HilMachine;

    fn init_test(_: &Expected) -> HilNode {
        let model = Model::new();
        let mut config = HilNodeConfig {
            sil: SilConfig::default(),
            hil: Default::default(),
            rig: Default::default(),
            settings: HilNodeSettings::default(),
        };
        config.settings.goal_limits = limits();
        let (requests, queue) = feed_requests();
        let withdrawals = Arc::new(Withdrawals::default());
        let mut commands =
            HilCommands::<u64, u64>::new(&config, model.robot.clone(), requests, withdrawals.clone()).unwrap();
        // The loop starts holding where the arm is, nothing of the node's initial trajectory
        // queued.
        let still = |t| Waypoint { t, x: model.x, ..Waypoint::default() };
        let initial = Trajectory::with_robot_forearm(vec![still(0.0), still(1.0)], &model.robot).unwrap();
        let feeder = Feeder::new(&initial, model.robot.clone(), config.hil.protection.clone(), withdrawals.clone());
        let mut hil_loop = Loop {
            feeder: Some(feeder),
            holding_at: None,
            joint_command_moves: Default::default(),
            seen: SeenOffsets::default(),
            start_offset_m: 0.0,
            seen_this_loop_m: (0.0, 0.0),
        };
        hil_loop.start(&model, &withdrawals);
        commands.loop_started(1);
        let stopped = config.settings.constraints.stopped_velocity_tolerance;
        HilNode {
            model,
            commands,
            queue,
            withdrawals,
            hil_loop,
            book: GoalBook::stopped_below(stopped),
            cartesian: GoalBook::default(),
            stream: None,
            stream_at: f64::NEG_INFINITY,
            held_since_stop: false,
            checking: None,
            looping: true,
            loop_number: 1,
            last_frame: None,
        }
    }

    fn apply(mut node: HilNode, _: &Expected, transition: Transition) -> HilNode {
        let now = now_ns(&node.model);
        match transition {
            Transition::JointGoal { recipe, seed } => node.joint_goal(recipe, seed),
            Transition::CancelJointGoal => cancel_joint_goal(&mut node.book, &mut node.commands),
            Transition::JointCommand { command, seed } => node.joint_command(command, seed),
            Transition::CartesianGoal { shape, seed, checked_later } => {
                if let Some(trajectory) = node.model.cartesian_goal(shape, &mut Dice::new(seed)) {
                    let handle = node.cartesian.handle();
                    let checked = node.commands.cartesian_check().and_then(|check| check.run(trajectory));
                    match checked_later {
                        false => _ = node.cartesian_goal(handle, checked, now),
                        true => node.checking = Some((handle, checked, false)),
                    }
                }
            }
            Transition::CheckDone => {
                if let Some((handle, checked, stopped_since)) = node.checking.take() {
                    let followed = node.cartesian_goal(handle, checked, now);
                    assert!(!(followed && stopped_since), "a goal checked across a stop moved the arm after it");
                }
            }
            Transition::CancelCartesianGoal => cancel_cartesian_goal(&node.cartesian, &mut node.commands),
            Transition::Segment { points, reach_mm, seed } => node.segment(points, reach_mm, seed),
            Transition::LoopStops(stop) => node.stop(stop),
            Transition::LoopStarts => {
                // Activated again: the loop starts where the arm is, nothing queued.
                // The stop took what waited (and nothing is sent while no loop runs): the places
                // of joint commands' requests count on from there.
                assert_eq!(node.queue.drop_waiting(), 0, "requests waited past a stop");
                node.model.following.hold(node.model.x);
                node.hil_loop.start(&node.model, &node.withdrawals);
                let stopped = node.loop_number;
                node.loop_number += 1;
                node.commands.loop_started(node.loop_number);
                node.looping = true;
                // The stopped loop's last frame, still on its way, is not the new loop's.
                if let Some(frame) = node.last_frame {
                    let answers = node.commands.frame(&frame, stopped, true, Now::on_one_clock(now));
                    node.answers(answers);
                    assert!(node.commands.taking().is_err(), "the stopped loop's frame was taken by the next");
                }
            }
            Transition::Arm(arm) => node.model.arm = arm,
            Transition::Run { frames } => node.run(frames),
            Transition::RunFails => {}
        }
        let answers = node.commands.drain();
        node.answers(answers);
        node
    }

    fn check_invariants(node: &HilNode, expected: &Expected) {
        assert_eq!(node.looping, expected.looping);
        one_owner(&node.book, &node.cartesian, now_ns(&node.model));
        if !node.looping {
            assert!(!node.book.any_running() && !node.cartesian.any_running(), "a goal runs with no loop");
        }
    }

    fn teardown(mut node: HilNode, _: Expected) {
        let answers = node.commands.loop_stopped(&LoopEnd::Asked("hil_node is ending".into()));
        node.answers(answers);
        assert!(!node.book.any_running() && !node.cartesian.any_running(), "a goal outlives the node");
    }
}
