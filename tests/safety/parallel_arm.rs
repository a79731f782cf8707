//! The parallel arm's commands as state machines: sil_node's ([`SilCommands`], its run loop's
//! requests and events) and hil_node's ([`HilCommands`], its feeder's requests, the loop's
//! withdrawals and frames, the loop's ends). The run and the loop are modelled: their reference
//! follows what was sent from when it took effect, the arm follows that reference (or, faulted,
//! lags or stands still).

mod hil;
mod sil;

use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Reference, ReferenceSampler, Trajectory, Waypoint};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::follower::goals::TakesJointGoals;
use arm_hil::nodes::goals::{Answers, GoalUpdate, TakesCartesianGoals};
use arm_hil::nodes::hil::managed::LoopEnd;
use arm_hil::nodes::joints::JOINT_NAMES;
use arm_hil::sim::Frame;

use proptest::prelude::*;
use proptest_state_machine::ReferenceStateMachine;

use super::{hostile_goal, Dice, GoalBook, GOAL_RECIPES, S};

/// The publish period: every frame is a control step [s].
const PERIOD_S: f64 = 0.004;

/// The fastest any trajectory sent may move the platform between two waypoints [m/s]: the
/// motors' 2 rad/s move it at a fraction of this; a jump moves it at thousands.
const TOP_PLATFORM_SPEED_M_S: f64 = 3.0;

/// What the model's arm does with its reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arm {
    Follows,
    /// Moves toward its reference at 5 cm/s at most.
    Lags,
    Frozen,
}

/// What the run or loop follows: a trajectory from when it took effect, or a point held.
struct Following {
    trajectory: Option<(Arc<Trajectory>, f64)>,
    held: Vec3,
    sampler: ReferenceSampler,
}

impl Following {
    fn holding(x: Vec3) -> Following {
        Following { trajectory: None, held: x, sampler: ReferenceSampler::new() }
    }

    /// Its reference at time `t`, and whether the trajectory has ended.
    fn at(&mut self, t: f64) -> (Reference, bool) {
        match &self.trajectory {
            Some((trajectory, from)) => {
                let time = trajectory.start_time() + t - from;
                let ended = time >= trajectory.end_time();
                (self.sampler.sample(trajectory, time.min(trajectory.end_time())), ended)
            }
            None => (Reference { x: self.held, ..Reference::default() }, false),
        }
    }

    fn follow(&mut self, trajectory: Arc<Trajectory>, t: f64) {
        (self.trajectory, self.sampler) = (Some((trajectory, t)), ReferenceSampler::new());
    }

    fn hold(&mut self, x: Vec3) {
        (self.trajectory, self.held) = (None, x);
    }
}

/// The model arm and its frames.
struct Model {
    robot: Robot,
    t: f64,
    x: Vec3,
    theta: Vec3,
    arm: Arm,
    following: Following,
}

impl Model {
    fn new() -> Model {
        let robot = Robot::default();
        let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0].x;
        let theta = robot.inverse_kinematics(&start, None).unwrap();
        Model { robot, t: 0.0, x: start, theta, arm: Arm::Follows, following: Following::holding(start) }
    }

    /// One period on: the frame, and whether the trajectory followed has ended.
    fn frame(&mut self) -> (Frame, bool) {
        self.t += PERIOD_S;
        let (reference, ended) = self.following.at(self.t);
        let before = (self.x, self.theta);
        match self.arm {
            Arm::Follows => self.x = reference.x,
            Arm::Lags => {
                let step = reference.x - self.x;
                self.x += step * (0.05 * PERIOD_S / step.norm().max(0.05 * PERIOD_S));
            }
            Arm::Frozen => {}
        }
        if let Ok(theta) = self.robot.inverse_kinematics(&self.x, Some(&self.theta)) {
            self.theta = theta;
        }
        let frame = Frame {
            t: self.t,
            x: self.x,
            x_dot: (self.x - before.0) / PERIOD_S,
            theta: self.theta,
            theta_dot: (self.theta - before.1) / PERIOD_S,
            tau: Vec3::zeros(),
            x_ref: reference.x,
            xd_ref: reference.xd,
        };
        (frame, ended)
    }

    /// A trajectory sent to the run or loop: it starts where its reference is (a Cartesian goal
    /// within 5 mm of it: no jump), and no waypoint moves the platform faster than an arm can.
    fn check_sent(&self, trajectory: &Trajectory) {
        let waypoints = trajectory.waypoints();
        let from = (waypoints[0].x - self.following.held_or(self.t)).norm();
        assert!(from <= 0.006, "a trajectory starts {from} m from the reference");
        for pair in waypoints.windows(2) {
            let speed = (pair[1].x - pair[0].x).norm() / (pair[1].t - pair[0].t);
            assert!(speed <= TOP_PLATFORM_SPEED_M_S, "a trajectory moves the platform at {speed} m/s");
        }
    }

    fn names() -> Vec<String> {
        JOINT_NAMES[..3].iter().map(|name| (*name).to_owned()).collect()
    }

    /// A FollowCartesianTrajectory goal: a short move from where its reference holds, one that starts
    /// away from it, or one toward the workspace's edge.
    fn cartesian_goal(&self, shape: Shape, dice: &mut Dice) -> Option<Arc<Trajectory>> {
        let from = self.following.held_or(self.t);
        let offset = |dice: &mut Dice, size: f64| {
            Vec3::new(dice.range(-size, size), dice.range(-size, size), dice.range(-size, size))
        };
        let (start, end) = match shape {
            Shape::AwayFromTheReference => (from + offset(dice, 0.05), from + offset(dice, 0.05)),
            Shape::TowardTheEdge => (from, from + offset(dice, 0.3)),
            Shape::Short => (from, from + offset(dice, 0.02)),
        };
        let still = |t, x| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
        let waypoints = vec![still(0.0, start), still(dice.range(0.5, 2.0), end)];
        Trajectory::with_robot_forearm(waypoints, &self.robot).ok().map(Arc::new)
    }

    /// A `~/joint_command`: near the arm, far, or the stream's last again.
    fn joint_command(&self, command: Command, dice: &mut Dice, stream: &Option<Vec<f64>>) -> Vec<f64> {
        match (command, stream) {
            (Command::Again, Some(last)) => last.clone(),
            (Command::Far, _) => self.theta.iter().map(|theta| theta + dice.range(-1.0, 1.0)).collect(),
            (Command::NotANumber, _) => vec![f64::NAN, 0.0, 0.0],
            _ => self.theta.iter().map(|theta| theta + dice.range(-0.02, 0.02)).collect(),
        }
    }
}

impl Following {
    /// Where its reference is at `t`, without moving the sampler.
    fn held_or(&self, t: f64) -> Vec3 {
        self.reference_at(t).x
    }

    /// Its reference at `t` (where and how fast), without moving the sampler: at a trajectory's
    /// very start, its first waypoint, going (the sampler holds at rest before a trajectory).
    fn reference_at(&self, t: f64) -> Reference {
        match &self.trajectory {
            Some((trajectory, from)) if t <= *from => {
                let first = trajectory.waypoints()[0];
                Reference { x: first.x, xd: first.xd, xdd: first.xdd }
            }
            Some((trajectory, from)) => {
                let time = (trajectory.start_time() + t - from).min(trajectory.end_time());
                ReferenceSampler::new().sample(trajectory, time)
            }
            None => Reference { x: self.held, ..Reference::default() },
        }
    }
}

/// The answers' goals into the book.
fn book_answers(book: &mut GoalBook, cartesian: &mut GoalBook, answers: Answers<u64, u64>) {
    book.events(answers.joint, answers.state.as_ref());
    for update in answers.cartesian {
        if let GoalUpdate::Finished(goal, _, _) = update {
            cartesian.ended_once(goal);
        }
    }
}

/// A cancel of the joint goal running, if any: it ends once.
fn cancel_joint_goal(book: &mut GoalBook, commands: &mut impl TakesJointGoals<u64>) {
    if let Some(goal) = book.running() {
        if let Some((goal, _)) = commands.cancel_joint_goal(&|handle| *handle == goal) {
            book.ended_once(goal);
        }
    }
}

/// A cancel of the Cartesian goal running, if any: its run ends it.
fn cancel_cartesian_goal(cartesian: &GoalBook, commands: &mut impl TakesCartesianGoals<u64>) {
    if let Some(goal) = cartesian.running() {
        commands.cancel_cartesian_goal(&|handle: &u64| *handle == goal);
    }
}

/// At most one goal, of either kind, has the arm, and each ends within its bound (the next
/// frame sees it) at `now_ns`.
fn one_owner(joint: &GoalBook, cartesian: &GoalBook, now_ns: u64) {
    let slack_ns = (PERIOD_S * 1e9) as u64;
    joint.check(now_ns, slack_ns);
    cartesian.check(now_ns, slack_ns);
    assert!(!(joint.any_running() && cartesian.any_running()), "goals of both kinds running at once");
}

/// A FollowCartesianTrajectory goal's shape: a short move from where its reference holds, one
/// that starts away from it, or one toward the workspace's edge.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    Short,
    AwayFromTheReference,
    TowardTheEdge,
}

/// What a `~/joint_command` holds: the stream's last command again, one far, one not a number,
/// one near.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Command {
    Again,
    Far,
    NotANumber,
    Near,
}

/// How hil_node's loop ends: each ends every goal at once.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LoopStop {
    Deactivated,
    ProtectiveStop,
    Fault,
    Signalled,
    Panicked,
}

impl LoopStop {
    fn end(self) -> LoopEnd {
        match self {
            LoopStop::Deactivated => LoopEnd::Asked("hil_node was deactivated".into()),
            LoopStop::ProtectiveStop => {
                LoopEnd::ProtectiveStop("protective stop at t = 1.000 s: tracking_error".into())
            }
            LoopStop::Fault => LoopEnd::Fault("sensor lost".into()),
            LoopStop::Signalled => LoopEnd::Asked("SIGTERM".into()),
            LoopStop::Panicked => LoopEnd::Fault("the HIL loop's thread panicked".into()),
        }
    }
}

/// One thing that happens to the node.
#[derive(Debug, Clone)]
pub(crate) enum Transition {
    /// A FollowJointTrajectory goal ([`hostile_goal`]'s `recipe`, its choices from `seed`).
    JointGoal {
        recipe: u8,
        seed: u64,
    },
    CancelJointGoal,
    JointCommand {
        command: Command,
        seed: u64,
    },
    /// A FollowCartesianTrajectory goal; `checked_later`: hil_node's server checks it off the
    /// node's thread, the node going on meanwhile, and follows it at [`Transition::CheckDone`].
    CartesianGoal {
        shape: Shape,
        seed: u64,
        checked_later: bool,
    },
    CheckDone,
    CancelCartesianGoal,
    /// A `~/trajectory` segment of 1 to 3 points half a second apart, up to `reach_mm` up or
    /// down (hil_node's).
    Segment {
        points: u8,
        reach_mm: u8,
        seed: u64,
    },
    /// sil_node's simulation fails.
    RunFails,
    /// hil_node's loop ends, or starts again (an activation).
    LoopStops(LoopStop),
    LoopStarts,
    Arm(Arm),
    /// Frames, one a publish period each.
    Run {
        frames: u16,
    },
}

/// What may happen next: whether hil_node's loop runs (sil_node's run starts and ends of its own).
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    looping: bool,
}

fn arm_transitions() -> BoxedStrategy<Transition> {
    let command = prop_oneof![Just(Command::Again), Just(Command::Far), Just(Command::NotANumber), Just(Command::Near)];
    let shape = prop_oneof![Just(Shape::Short), Just(Shape::AwayFromTheReference), Just(Shape::TowardTheEdge)];
    let arm = prop_oneof![Just(Arm::Follows), Just(Arm::Lags), Just(Arm::Frozen)];
    prop_oneof![
        3 => (0..GOAL_RECIPES, any::<u64>()).prop_map(|(recipe, seed)| Transition::JointGoal { recipe, seed }),
        1 => Just(Transition::CancelJointGoal),
        2 => (command, any::<u64>()).prop_map(|(command, seed)| Transition::JointCommand { command, seed }),
        1 => (shape, any::<u64>(), any::<bool>())
            .prop_map(|(shape, seed, checked_later)| Transition::CartesianGoal { shape, seed, checked_later }),
        1 => Just(Transition::CheckDone),
        1 => Just(Transition::CancelCartesianGoal),
        1 => arm.prop_map(Transition::Arm),
        5 => (1u16..=200).prop_map(|frames| Transition::Run { frames }),
        1 => (200u16..=2500).prop_map(|frames| Transition::Run { frames }),
    ]
    .boxed()
}

/// What may happen to sil_node next: its model.
pub(crate) struct SilMachine;

impl ReferenceStateMachine for SilMachine {
    type State = Expected;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Expected> {
        Just(Expected { looping: true }).boxed()
    }

    fn transitions(_: &Expected) -> BoxedStrategy<Transition> {
        prop_oneof![12 => arm_transitions(), 1 => Just(Transition::RunFails)].boxed()
    }

    fn apply(state: Expected, _: &Transition) -> Expected {
        state
    }
}

/// What may happen to hil_node next: its model.
pub(crate) struct HilMachine;

impl ReferenceStateMachine for HilMachine {
    type State = Expected;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Expected> {
        Just(Expected { looping: true }).boxed()
    }

    fn transitions(state: &Expected) -> BoxedStrategy<Transition> {
        let stop = prop_oneof![
            Just(LoopStop::Deactivated),
            Just(LoopStop::ProtectiveStop),
            Just(LoopStop::Fault),
            Just(LoopStop::Signalled),
            Just(LoopStop::Panicked)
        ];
        let segment = (1u8..=3, 1u8..=200, any::<u64>()).prop_map(|(points, reach_mm, seed)| Transition::Segment {
            points,
            reach_mm,
            seed,
        });
        match state.looping {
            true => {
                prop_oneof![12 => arm_transitions(), 1 => segment, 1 => stop.prop_map(Transition::LoopStops)].boxed()
            }
            false => prop_oneof![1 => Just(Transition::LoopStarts), 3 => arm_transitions(), 1 => segment].boxed(),
        }
    }

    fn apply(mut state: Expected, transition: &Transition) -> Expected {
        match transition {
            Transition::LoopStops(_) => state.looping = false,
            Transition::LoopStarts => state.looping = true,
            _ => {}
        }
        state
    }

    fn preconditions(state: &Expected, transition: &Transition) -> bool {
        match transition {
            Transition::LoopStops(_) => state.looping,
            Transition::LoopStarts => !state.looping,
            _ => true,
        }
    }
}

/// A joint goal for the arm at `model`'s joints: its choices from `seed`.
fn joint_goal(model: &Model, recipe: u8, seed: u64, now_ns: u64) -> arm_hil::nodes::follower::Goal {
    let actual: Vec<f64> = model.theta.iter().copied().collect();
    let bounds = (&[-std::f64::consts::PI; 3][..], &[std::f64::consts::PI; 3][..]);
    hostile_goal(&mut Dice::new(seed), recipe, &Model::names(), &actual, bounds, now_ns)
}

/// The node's time for the model's `t`.
fn now_ns(model: &Model) -> u64 {
    100 * S + (model.t * 1e9) as u64
}
