//! The parallel arm's commands: sil_node's ([`SilCommands`], its run loop's requests and events)
//! and hil_node's ([`HilCommands`], its feeder's requests, the loop's withdrawals and frames, the
//! loop's ends). The run and the loop are modelled: their reference follows what was sent
//! from when it took effect, the arm follows that reference (or, faulted, lags or stands still).

use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Reference, ReferenceSampler, Trajectory, Waypoint};
use arm_hil::hil::protection::ProtectionConfig;
use arm_hil::hil::Withdrawals;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::follower::goals::TakesJointGoals;
use arm_hil::nodes::follower::stream_gate::STREAM_GAP_S;
use arm_hil::nodes::goals::{Answers, GoalUpdate, TakesCartesianGoals};
use arm_hil::nodes::hil::commands::HilCommands;
use arm_hil::nodes::hil::feeder::{feed_requests, FeedRequest, RequestQueue};
use arm_hil::nodes::hil::managed::LoopEnd;
use arm_hil::nodes::hil::{HilNodeConfig, HilNodeSettings};
use arm_hil::nodes::joints::JOINT_NAMES;
use arm_hil::nodes::sil::commands::{SilCommands, REQUEST_DEPTH};
use arm_hil::nodes::sil::run::{RunEnd, RunRequest, SilEvent};
use arm_hil::nodes::sil::SilNodeSettings;
use arm_hil::nodes::trajectory_input::MultiDofPoint;
use arm_hil::sim::{Frame, RunStats, SilConfig, SimError};

use super::{hostile_goal, limits, Dice, GoalBook, S};

/// The publish period: every frame is a control step [s].
const PERIOD_S: f64 = 0.004;

/// The fastest any trajectory sent may move the platform between two waypoints [m/s]: the
/// motors' 2 rad/s move it at a fraction of this; a jump moves it at thousands.
const TOP_PLATFORM_SPEED_M_S: f64 = 3.0;

/// What the model's arm does with its reference.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Arm {
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
    fn cartesian_goal(&self, dice: &mut Dice) -> Option<Arc<Trajectory>> {
        let from = self.following.held_or(self.t);
        let offset = |dice: &mut Dice, size: f64| {
            Vec3::new(dice.range(-size, size), dice.range(-size, size), dice.range(-size, size))
        };
        let (start, end) = match dice.below(4) {
            0 => (from + offset(dice, 0.05), from + offset(dice, 0.05)),
            1 => (from, from + offset(dice, 0.3)),
            _ => (from, from + offset(dice, 0.02)),
        };
        let still = |t, x| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
        let waypoints = vec![still(0.0, start), still(dice.range(0.5, 2.0), end)];
        Trajectory::with_robot_forearm(waypoints, &self.robot).ok().map(Arc::new)
    }

    /// A `~/joint_command`: near the arm, far, or the stream's last again.
    fn joint_command(&self, dice: &mut Dice, stream: &Option<Vec<f64>>) -> Vec<f64> {
        match (dice.below(4), stream) {
            (0, Some(last)) => last.clone(),
            (1, _) => self.theta.iter().map(|theta| theta + dice.range(-1.0, 1.0)).collect(),
            (2, _) => vec![f64::NAN, 0.0, 0.0],
            _ => self.theta.iter().map(|theta| theta + dice.range(-0.02, 0.02)).collect(),
        }
    }
}

impl Following {
    /// Where its reference is at `t`, without moving the sampler.
    fn held_or(&self, t: f64) -> Vec3 {
        match &self.trajectory {
            Some((trajectory, from)) => {
                let time = (trajectory.start_time() + t - from).min(trajectory.end_time());
                ReferenceSampler::new().sample(trajectory, time).x
            }
            None => self.held,
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

/// At most one goal, of either kind, has the arm.
fn one_owner(joint: &GoalBook, cartesian: &GoalBook) {
    joint.check();
    cartesian.check();
    assert!(!(joint.any_running() && cartesian.any_running()), "goals of both kinds running at once");
}

/// One sil_node case.
pub(crate) fn run_sil(seed: u64) {
    let mut dice = Dice::new(seed);
    let mut model = Model::new();
    let settings = SilNodeSettings { goal_limits: limits(), ..SilNodeSettings::default() };
    let (requests, run_requests) = sync_channel(REQUEST_DEPTH);
    let mut commands = SilCommands::<u64, u64>::new(&settings, model.robot.clone(), model.x, requests).unwrap();
    let stopped = settings.constraints.stopped_velocity_tolerance;
    let (mut book, mut cartesian) = (GoalBook::stopped_below(stopped), GoalBook::default());
    let (mut stream, mut stream_at): (Option<Vec<f64>>, f64) = (None, f64::NEG_INFINITY);
    let mut running = true;
    let now_ns = |model: &Model| 100 * S + (model.t * 1e9) as u64;
    for _ in 0..50 {
        match dice.below(16) {
            0..=2 => {
                let handle = book.handle();
                let actual: Vec<f64> = model.theta.iter().copied().collect();
                let bounds = (&[-std::f64::consts::PI; 3][..], &[std::f64::consts::PI; 3][..]);
                let goal = hostile_goal(&mut dice, &Model::names(), &actual, bounds, now_ns(&model));
                let before = book.running();
                match commands.accept_joint_goal(handle, &goal, now_ns(&model)) {
                    Ok(replaced) => {
                        book.accepted(handle, &goal, replaced);
                        // The stream going on with its command does not overtake the goal.
                        if let (Some(last), true) = (&stream, model.t - stream_at <= STREAM_GAP_S) {
                            assert!(
                                commands.joint_command(model.t, &Model::names(), last).is_err(),
                                "the stream overtakes a goal"
                            );
                            stream_at = model.t;
                        }
                    }
                    Err(_) => assert_eq!(book.running(), before, "a refused goal leaves the one running"),
                }
            }
            3 => {
                if let Some(goal) = book.running() {
                    if let Some((goal, _)) = commands.cancel_joint_goal(&|handle| *handle == goal) {
                        book.ended_once(goal);
                    }
                }
            }
            4..=5 => {
                let positions = model.joint_command(&mut dice, &stream);
                (stream, stream_at) = (Some(positions.clone()), model.t);
                let _ = commands.joint_command(model.t, &Model::names(), &positions);
            }
            6 => {
                if let Some(trajectory) = model.cartesian_goal(&mut dice) {
                    let handle = cartesian.handle();
                    if let Ok(replaced) = commands.follow_cartesian_goal(handle, trajectory) {
                        cartesian.accepted(handle, &Default::default(), None);
                        if let Some((replaced, result)) = replaced {
                            assert!(!result.success);
                            cartesian.ended_once(replaced);
                        }
                    }
                }
            }
            7 => {
                if let Some(goal) = cartesian.running() {
                    commands.cancel_cartesian_goal(&|handle: &u64| *handle == goal);
                }
            }
            8 if running => {
                // The simulation fails: every goal it ran ends with the run.
                let failed = RunEnd::Failed(SimError::NonFinite { t: model.t });
                let answers = commands.event(
                    &SilEvent::RunEnded { stats: RunStats::default(), end: failed },
                    true,
                    now_ns(&model),
                );
                book_answers(&mut book, &mut cartesian, answers);
                assert!(!book.any_running(), "a goal outlives the run that failed");
                running = false;
            }
            9 => model.arm = [Arm::Follows, Arm::Lags, Arm::Frozen][dice.below(3) as usize],
            _ => {
                for _ in 0..dice.below(200) {
                    // The run loop takes its requests between frames.
                    while let Ok(request) = run_requests.try_recv() {
                        let (end, next) = match request {
                            // A run started afresh puts the simulated arm at rest on its start.
                            RunRequest::Follow(trajectory) => {
                                model.x = trajectory.waypoints()[0].x;
                                (RunEnd::Replaced, Some(trajectory))
                            }
                            // A steered run goes on from where the arm is; with none running,
                            // the simulation starts afresh on it.
                            RunRequest::Steer(trajectory) => {
                                match running {
                                    true => model.check_sent(&trajectory),
                                    false => model.x = trajectory.waypoints()[0].x,
                                }
                                (RunEnd::Replaced, Some(trajectory))
                            }
                            RunRequest::Stop => (RunEnd::Stopped, None),
                        };
                        if running {
                            let answers = commands.event(
                                &SilEvent::RunEnded { stats: RunStats::default(), end },
                                true,
                                now_ns(&model),
                            );
                            book_answers(&mut book, &mut cartesian, answers);
                        }
                        running = next.is_some();
                        if let Some(trajectory) = next {
                            model.following.follow(trajectory.clone(), model.t);
                            let answers = commands.event(&SilEvent::RunStarted(trajectory), true, now_ns(&model));
                            book_answers(&mut book, &mut cartesian, answers);
                        }
                    }
                    if !running {
                        break;
                    }
                    let (frame, ended) = model.frame();
                    let event = SilEvent::Frame { frame, clock_s: model.t, publish_rate_hz: 250.0 };
                    let answers = commands.event(&event, true, now_ns(&model));
                    book_answers(&mut book, &mut cartesian, answers);
                    if ended {
                        let answers = commands.event(
                            &SilEvent::RunEnded { stats: RunStats::default(), end: RunEnd::Complete },
                            true,
                            now_ns(&model),
                        );
                        book_answers(&mut book, &mut cartesian, answers);
                        let x = model.following.held_or(model.t);
                        model.following.hold(x);
                    }
                }
            }
        }
        book_answers(&mut book, &mut cartesian, commands.drain());
        one_owner(&book, &cartesian);
    }
    let answers = commands.stopped("sil_node is ending");
    book_answers(&mut book, &mut cartesian, answers);
    assert!(!book.any_running() && !cartesian.any_running(), "a goal outlives the node");
}

/// The loop's side of hil_node's feeder: each request as the loop makes it take effect, every
/// waypoint sent within the protective stop's bounds.
fn take_requests(model: &mut Model, queue: &RequestQueue, withdrawals: &Withdrawals, bounds: &ProtectionConfig) {
    while let Some(request) = queue.try_take() {
        match request {
            FeedRequest::Follow { trajectory, withdrawal } => {
                model.check_sent(&trajectory);
                bounds.check_path(&model.robot, trajectory.waypoints()).expect("a path past the bounds was sent");
                withdrawals.done(withdrawal, model.t);
                model.following.follow(trajectory, model.t);
            }
            FeedRequest::Hold { withdrawal } => {
                withdrawals.done(withdrawal, model.t);
                let x = model.following.held_or(model.t);
                model.following.hold(x);
            }
            // A segment joins what is queued; the feeder checks it (its tests say how): here
            // its reference holds.
            FeedRequest::Append(_) => {}
        }
    }
}

/// One hil_node case.
pub(crate) fn run_hil(seed: u64) {
    let mut dice = Dice::new(seed);
    let mut model = Model::new();
    let mut config = HilNodeConfig {
        sil: SilConfig::default(),
        hil: Default::default(),
        rig: Default::default(),
        settings: HilNodeSettings::default(),
    };
    config.settings.goal_limits = limits();
    let bounds = config.hil.protection.clone();
    let (requests, queue) = feed_requests();
    let withdrawals = Arc::new(Withdrawals::default());
    let mut commands =
        HilCommands::<u64, u64>::new(&config, model.robot.clone(), requests, withdrawals.clone()).unwrap();
    let stopped = config.settings.constraints.stopped_velocity_tolerance;
    let (mut book, mut cartesian) = (GoalBook::stopped_below(stopped), GoalBook::default());
    let (mut stream, mut stream_at): (Option<Vec<f64>>, f64) = (None, f64::NEG_INFINITY);
    // No command taken since the loop stopped: nothing may reach the loop.
    let mut held_since_stop = false;
    let mut looping = true;
    commands.loop_started();
    let now_ns = |model: &Model| 100 * S + (model.t * 1e9) as u64;
    for _ in 0..50 {
        match dice.below(17) {
            0..=2 => {
                let handle = book.handle();
                let actual: Vec<f64> = model.theta.iter().copied().collect();
                let bounds = (&[-std::f64::consts::PI; 3][..], &[std::f64::consts::PI; 3][..]);
                let goal = hostile_goal(&mut dice, &Model::names(), &actual, bounds, now_ns(&model));
                let before = book.running();
                match commands.accept_joint_goal(handle, &goal, now_ns(&model)) {
                    Ok(replaced) => {
                        assert!(looping, "a goal was taken while no loop runs");
                        book.accepted(handle, &goal, replaced);
                        held_since_stop = false;
                    }
                    Err(_) => assert_eq!(book.running(), before, "a refused goal leaves the one running"),
                }
            }
            3 => {
                if let Some(goal) = book.running() {
                    if let Some((goal, _)) = commands.cancel_joint_goal(&|handle| *handle == goal) {
                        book.ended_once(goal);
                    }
                }
            }
            4..=5 => {
                let positions = model.joint_command(&mut dice, &stream);
                let unbroken = model.t - stream_at <= STREAM_GAP_S;
                let stale = held_since_stop && unbroken && stream.as_ref() == Some(&positions);
                (stream, stream_at) = (Some(positions.clone()), model.t);
                let taken = commands.joint_command(model.t, &Model::names(), &positions);
                if stale {
                    assert!(taken.is_err(), "the command in force at the stop is followed again");
                }
                if taken.is_ok() {
                    held_since_stop = false;
                }
            }
            6 => {
                if let Some(trajectory) = model.cartesian_goal(&mut dice) {
                    let handle = cartesian.handle();
                    if let Ok(replaced) = commands.follow_cartesian_goal(handle, trajectory) {
                        cartesian.accepted(handle, &Default::default(), None);
                        held_since_stop = false;
                        if let Some((replaced, result)) = replaced {
                            assert!(!result.success);
                            cartesian.ended_once(replaced);
                        }
                    }
                }
            }
            7 => {
                if let Some(goal) = cartesian.running() {
                    commands.cancel_cartesian_goal(&|handle: &u64| *handle == goal);
                }
            }
            8 => {
                let points = (1..=1 + dice.below(3))
                    .map(|k| MultiDofPoint {
                        translations: vec![(model.x + Vec3::new(0.0, 0.0, dice.range(-0.2, 0.2))).into()],
                        time_from_start_s: k as f64 * 0.5,
                        ..MultiDofPoint::default()
                    })
                    .collect();
                if commands.segment(points).is_ok() {
                    held_since_stop = false;
                }
            }
            9 if looping => {
                // The loop ends: deactivated, a protective stop, a fault. Every goal ends at once.
                let end = match dice.below(3) {
                    0 => LoopEnd::Asked("hil_node was deactivated".into()),
                    1 => LoopEnd::ProtectiveStop("protective stop at t = 1.000 s: tracking_error".into()),
                    _ => LoopEnd::Fault("sensor lost".into()),
                };
                let answers = commands.loop_stopped(&end);
                book_answers(&mut book, &mut cartesian, answers);
                assert!(!book.any_running() && !cartesian.any_running(), "a goal outlives the loop");
                take_requests(&mut model, &queue, &withdrawals, &bounds);
                (looping, held_since_stop) = (false, true);
            }
            10 if !looping => {
                // Activated again: the loop starts where the arm is, nothing queued.
                queue.drop_waiting();
                model.following.hold(model.x);
                commands.loop_started();
                looping = true;
            }
            11 => model.arm = [Arm::Follows, Arm::Lags, Arm::Frozen][dice.below(3) as usize],
            _ if looping => {
                for _ in 0..dice.below(200) {
                    if held_since_stop {
                        assert!(queue.try_take().is_none(), "the loop was fed after a stop before any new command");
                    }
                    take_requests(&mut model, &queue, &withdrawals, &bounds);
                    let (frame, _) = model.frame();
                    let answers = commands.frame(&frame, true, now_ns(&model));
                    book_answers(&mut book, &mut cartesian, answers);
                }
            }
            _ => {
                assert!(commands.taking().is_err(), "commands taken while no loop runs");
            }
        }
        book_answers(&mut book, &mut cartesian, commands.drain());
        one_owner(&book, &cartesian);
        if !looping {
            assert!(!book.any_running() && !cartesian.any_running());
        }
    }
    let answers = commands.loop_stopped(&LoopEnd::Asked("hil_node is ending".into()));
    book_answers(&mut book, &mut cartesian, answers);
    assert!(!book.any_running() && !cartesian.any_running(), "a goal outlives the node");
}
