//! FollowJointTrajectory's follower without ROS, as joint_trajectory_controller behaves: every
//! refusal code, interpolation from where the joints are, tolerances, preemption, cancel and
//! the hold at the end.

use arm_hil::nodes::follower::spline::TrajectoryPoint;
use arm_hil::nodes::follower::{
    ErrorCode, Follower, Goal, GoalLimits, JointState, JointTolerance, Joints, Outcome, Plan, Tolerances,
};

const S: u64 = 1_000_000_000;

/// The STM32 arm's two joints, limits as urdf/stm32_arm.urdf gives them (+-pi/2, 6 rad/s), a
/// goal done within 0.01 rad and stopped (0.01 rad/s).
fn follower() -> Follower {
    let joints = Joints {
        names: vec!["stm32_shoulder".into(), "stm32_elbow".into()],
        lower: vec![-std::f64::consts::FRAC_PI_2; 2],
        upper: vec![std::f64::consts::FRAC_PI_2; 2],
        max_velocity: vec![6.0; 2],
    };
    let tolerance = JointTolerance { position: 0.01, velocity: 0.01 };
    let defaults = Tolerances { path: vec![JointTolerance::default(); 2], goal: vec![tolerance; 2], goal_time_s: 0.5 };
    Follower::new(joints, defaults, GoalLimits { max_points: 100, max_duration_s: 60.0 })
}

fn at(positions: [f64; 2]) -> JointState {
    JointState { positions: positions.to_vec(), velocities: vec![0.0; 2] }
}

fn point(time_s: f64, positions: [f64; 2]) -> TrajectoryPoint {
    TrajectoryPoint { time_s, positions: positions.to_vec(), velocities: Vec::new(), accelerations: Vec::new() }
}

fn goal(names: [&str; 2], points: Vec<TrajectoryPoint>) -> Goal {
    Goal { joint_names: names.iter().map(|name| (*name).to_owned()).collect(), points, ..Goal::default() }
}

const NAMES: [&str; 2] = ["stm32_shoulder", "stm32_elbow"];

fn any(_: &Plan) -> Result<(), String> {
    Ok(())
}

fn moving(positions: [f64; 2], velocities: [f64; 2]) -> JointState {
    JointState { positions: positions.to_vec(), velocities: velocities.to_vec() }
}

#[test]
fn a_goal_runs_from_where_the_joints_are_in_the_devices_order_and_succeeds_within_tolerance() {
    let mut follower = follower();
    // Named elbow first: the follower puts them in the device's order.
    let reversed = goal(["stm32_elbow", "stm32_shoulder"], vec![point(1.0, [0.2, 0.4])]);
    assert_eq!(follower.accept(&reversed, 10 * S, &at([0.0, 0.0]), any), Ok(None));
    let middle = follower.update(10 * S + S / 2, &at([0.0, 0.0])).unwrap();
    // Linear from the joints' state at the stamp: halfway at half time.
    assert!((middle.desired.positions[0] - 0.2).abs() < 1e-12 && (middle.desired.positions[1] - 0.1).abs() < 1e-12);
    assert_eq!(middle.ended, None);
    let end = follower.update(11 * S, &at([0.4, 0.2])).unwrap();
    assert_eq!(end.ended, Some(Outcome::Succeeded));
    assert_eq!(follower.holding(), Some(&[0.4, 0.2][..]), "the end holds the last point");
    assert!(!follower.is_running());
}

#[test]
fn bad_goals_are_refused_with_their_codes_before_anything_moves() {
    let mut follower = follower();
    let now = 100 * S;
    let refused = |follower: &mut Follower, goal: &Goal| follower.accept(goal, now, &at([0.0, 0.0]), any).unwrap_err();
    let unknown = goal(["stm32_shoulder", "wrist"], vec![point(1.0, [0.0, 0.0])]);
    assert_eq!(refused(&mut follower, &unknown).code, ErrorCode::InvalidJoints);
    let mut missing = goal(NAMES, vec![point(1.0, [0.0, 0.0])]);
    missing.joint_names.pop();
    missing.points[0].positions.pop();
    assert_eq!(refused(&mut follower, &missing).code, ErrorCode::InvalidJoints);
    let twice = goal(["stm32_elbow", "stm32_elbow"], vec![point(1.0, [0.0, 0.0])]);
    assert_eq!(refused(&mut follower, &twice).code, ErrorCode::InvalidJoints);
    let backwards = goal(NAMES, vec![point(1.0, [0.0, 0.0]), point(0.5, [0.1, 0.1])]);
    assert_eq!(refused(&mut follower, &backwards).code, ErrorCode::InvalidGoal);
    let beyond = goal(NAMES, vec![point(1.0, [0.0, 2.0])]);
    let refusal = refused(&mut follower, &beyond);
    assert_eq!(refusal.code, ErrorCode::InvalidGoal);
    assert!(refusal.reason.contains("stm32_elbow"), "{}", refusal.reason);
    let not_finite = goal(NAMES, vec![point(1.0, [f64::NAN, 0.0])]);
    assert_eq!(refused(&mut follower, &not_finite).code, ErrorCode::InvalidGoal);
    assert_eq!(refused(&mut follower, &goal(NAMES, Vec::new())).code, ErrorCode::InvalidGoal);
    let mut old = goal(NAMES, vec![point(1.0, [0.1, 0.1])]);
    old.stamp_ns = now - 5 * S;
    assert_eq!(refused(&mut follower, &old).code, ErrorCode::OldHeaderTimestamp);
    // The device's own check (the parallel arm's workspace).
    let outside = follower.accept(&goal(NAMES, vec![point(1.0, [0.1, 0.1])]), now, &at([0.0, 0.0]), |_| {
        Err("outside the workspace".into())
    });
    assert_eq!(outside.unwrap_err().code, ErrorCode::InvalidGoal);
    assert!(!follower.is_running() && follower.update(now, &at([0.0, 0.0])).is_none(), "nothing moves");
}

#[test]
fn a_path_violation_aborts_and_holds_where_the_joints_are() {
    let mut follower = follower();
    let mut strict = goal(NAMES, vec![point(2.0, [0.5, 0.5])]);
    strict.path_tolerance = vec![("stm32_elbow".into(), JointTolerance { position: 0.05, velocity: 0.0 })];
    follower.accept(&strict, 0, &at([0.0, 0.0]), any).unwrap();
    assert_eq!(follower.update(S / 10, &at([0.025, 0.025])).unwrap().ended, None);
    let stuck = follower.update(S, &at([0.25, 0.0])).unwrap();
    match stuck.ended {
        Some(Outcome::Aborted { code: ErrorCode::PathToleranceViolated, reason }) => {
            assert!(reason.contains("stm32_elbow"), "{reason}")
        }
        other => panic!("a path violation, not {other:?}"),
    }
    assert_eq!(follower.holding(), Some(&[0.25, 0.0][..]));
}

#[test]
fn a_goal_not_reached_within_the_goal_time_is_a_goal_tolerance_violation() {
    let mut follower = follower();
    follower.accept(&goal(NAMES, vec![point(1.0, [0.3, 0.3])]), 0, &at([0.0, 0.0]), any).unwrap();
    assert_eq!(follower.update(S + S / 10, &at([0.2, 0.3])).unwrap().ended, None, "within the goal time");
    let late = follower.update(2 * S, &at([0.2, 0.3])).unwrap();
    assert!(matches!(late.ended, Some(Outcome::Aborted { code: ErrorCode::GoalToleranceViolated, .. })));
}

#[test]
fn a_new_goal_replaces_the_running_one_and_cancel_holds() {
    let mut follower = follower();
    follower.accept(&goal(NAMES, vec![point(2.0, [0.5, 0.5])]), 0, &at([0.0, 0.0]), any).unwrap();
    let replaced = follower.accept(&goal(NAMES, vec![point(1.0, [-0.5, 0.0])]), S, &at([0.2, 0.2]), any).unwrap();
    assert!(matches!(replaced, Some(Outcome::Canceled { .. })));
    // The new goal starts where the joints are when it arrives.
    let start = follower.update(S, &at([0.2, 0.2])).unwrap();
    assert!((start.desired.positions[0] - 0.2).abs() < 1e-12);
    assert!(matches!(follower.cancel(&at([0.1, 0.15])), Some(Outcome::Canceled { .. })));
    assert_eq!(follower.holding(), Some(&[0.1, 0.15][..]));
    assert_eq!(follower.cancel(&at([0.1, 0.15])), None, "nothing left to cancel");
}

#[test]
fn a_future_stamp_delays_the_first_point_which_is_reached_from_the_state_at_receipt() {
    let mut follower = follower();
    let mut later = goal(NAMES, vec![point(1.0, [0.4, 0.0])]);
    later.stamp_ns = 5 * S;
    follower.accept(&later, 4 * S, &at([0.1, 0.0]), any).unwrap();
    // One segment from the receipt (4 s) to the point's time (6 s), as joint_trajectory_controller's first.
    let quarter = follower.update(4 * S + S / 2, &at([0.1, 0.0])).unwrap();
    assert!((quarter.desired.positions[0] - 0.175).abs() < 1e-12, "{:?}", quarter.desired);
    let three_quarters = follower.update(5 * S + S / 2, &at([0.25, 0.0])).unwrap();
    assert!((three_quarters.desired.positions[0] - 0.325).abs() < 1e-12);
}

#[test]
fn a_past_stamp_never_jumps_points_due_before_the_receipt_are_skipped() {
    let mut follower = follower();
    let mut late = goal(NAMES, vec![point(0.5, [0.3, 0.0]), point(2.0, [0.3, 0.3])]);
    late.stamp_ns = 9 * S;
    // Received 1 s after its stamp: the first point is past; the joints go from where they are
    // to the second, due 1 s from now.
    follower.accept(&late, 10 * S, &at([0.0, 0.0]), any).unwrap();
    let first = follower.update(10 * S, &at([0.0, 0.0])).unwrap();
    assert_eq!(first.desired.positions, vec![0.0, 0.0], "the first sample is where the joints are");
    let halfway = follower.update(10 * S + S / 2, &at([0.0, 0.0])).unwrap();
    assert!((halfway.desired.positions[0] - 0.15).abs() < 1e-12 && (halfway.desired.positions[1] - 0.15).abs() < 1e-12);
    // So close to its end that the way left is faster than the joints go: refused.
    let mut hurried = goal(NAMES, vec![point(0.5, [0.5, 0.0]), point(1.0, [1.0, 0.0])]);
    hurried.stamp_ns = 10 * S - S + S / 1000;
    let refused = follower.accept(&hurried, 10 * S, &at([0.0, 0.0]), any).unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidGoal);
    assert!(
        refused.reason.contains("faster than its limit") && refused.reason.contains("due before its receipt"),
        "{}",
        refused.reason
    );
}

#[test]
fn points_a_hair_apart_that_a_future_stamp_makes_simultaneous_are_refused_and_every_point_is_within_limits() {
    let mut follower = follower();
    // Found by the fuzzer: 4e-312 s apart, 30 s in the future; added to 30 s the two times are
    // one, and the second point (far outside the limits) ended a segment of no time.
    let mut hair = goal(NAMES, vec![point(0.0, [1.0, 0.11]), point(4e-312, [0.0, 4e86])]);
    hair.stamp_ns = 130 * S;
    let refused = follower.accept(&hair, 100 * S, &at([0.1, -0.2]), any).unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidGoal);
    assert!(refused.reason.contains("point 1") && refused.reason.contains("header stamp"), "{}", refused.reason);
    // Apart by more than the stamp's rounding, the point's own position is refused.
    hair.points[1].time_s = 1e-6;
    let refused = follower.accept(&hair, 100 * S, &at([0.1, -0.2]), any).unwrap_err();
    assert!(refused.reason.contains("stm32_elbow at") && refused.reason.contains("outside"), "{}", refused.reason);
    assert!(!follower.is_running(), "nothing moves");
    // A nanosecond apart, with velocities (cubic segments): no sample falls inside so short a
    // segment, its mean speed gives it away.
    let with_rest =
        |time_s: f64, positions: [f64; 2]| TrajectoryPoint { velocities: vec![0.0; 2], ..point(time_s, positions) };
    for points in [
        vec![with_rest(1e-9, [1.5, -0.2])],
        vec![with_rest(1.0, [0.1, -0.2]), with_rest(1.0 + 1e-9, [1.5, -0.2])],
        vec![with_rest(50.0, [0.1, -0.2]), with_rest(50.0 + 1e-7, [1.5, -0.2])],
    ] {
        let refused = follower.accept(&goal(NAMES, points), 100 * S, &at([0.1, -0.2]), any).unwrap_err();
        assert!(refused.reason.contains("on average"), "{}", refused.reason);
    }
}

#[test]
fn a_goals_cost_is_bounded_before_anything_is_allocated() {
    let mut follower = follower();
    let refused =
        |follower: &mut Follower, goal: &Goal| follower.accept(goal, 100 * S, &at([0.0, 0.0]), any).unwrap_err();
    // The far goal: its own position, two billion seconds away.
    let far = goal(NAMES, vec![point(2e9, [0.0, 0.0])]);
    let refusal = refused(&mut follower, &far);
    assert!(refusal.code == ErrorCode::InvalidGoal && refusal.reason.contains("max_duration_s"), "{}", refusal.reason);
    // A stamp far in the future is as far.
    let mut delayed = goal(NAMES, vec![point(1.0, [0.0, 0.0])]);
    delayed.stamp_ns = 100 * S + 61 * S;
    assert!(refused(&mut follower, &delayed).reason.contains("max_duration_s"));
    let many = goal(NAMES, (1..=101).map(|k| point(k as f64 * 0.01, [0.0, 0.0])).collect());
    assert!(refused(&mut follower, &many).reason.contains("max_points"));
    let mut crowd = goal(NAMES, vec![point(1.0, [0.0, 0.0])]);
    crowd.joint_names = (0..1_000_000).map(|k| format!("j{k}")).collect();
    assert_eq!(refused(&mut follower, &crowd).code, ErrorCode::InvalidJoints, "checked by count first");
    let at_once = goal(NAMES, vec![point(0.0, [0.1, 0.0])]);
    assert!(refused(&mut follower, &at_once).reason.contains("ends at its receipt"));
    // The wait for the joints at the end is bounded too: every goal ends.
    let mut patient = goal(NAMES, vec![point(1.0, [0.1, 0.0])]);
    patient.goal_time_tolerance_s = 2e9;
    assert!(refused(&mut follower, &patient).reason.contains("goal_time_tolerance"));
}

#[test]
fn a_goal_whose_joints_never_arrive_ends_within_the_goal_limits_even_with_no_goal_time() {
    let joints = follower().joints().clone();
    let defaults = Tolerances {
        path: vec![JointTolerance::default(); 2],
        goal: vec![JointTolerance { position: 0.01, velocity: 0.01 }; 2],
        goal_time_s: 0.0,
    };
    let mut follower = Follower::new(joints, defaults, GoalLimits { max_points: 100, max_duration_s: 60.0 });
    follower.accept(&goal(NAMES, vec![point(1.0, [0.1, 0.0])]), 0, &at([0.0, 0.0]), any).unwrap();
    assert_eq!(follower.update(59 * S, &at([0.0, 0.0])).unwrap().ended, None, "it waits");
    let ended = follower.update(61 * S, &at([0.0, 0.0])).unwrap().ended;
    assert!(matches!(ended, Some(Outcome::Aborted { code: ErrorCode::GoalToleranceViolated, .. })), "{ended:?}");
}

#[test]
fn speeds_and_limits_are_checked_all_along_the_trajectory() {
    let mut follower = follower();
    let refused = |follower: &mut Follower, goal: &Goal| follower.accept(goal, 0, &at([0.0, 0.0]), any).unwrap_err();
    let hasty = goal(NAMES, vec![point(0.1, [1.0, 0.0])]);
    assert!(refused(&mut follower, &hasty).reason.contains("10.000 rad/s"), "1 rad in 0.1 s");
    // Points at the limit, but a cubic through them with these velocities overshoots it.
    let mut overshoot = point(1.0, [1.5, 0.0]);
    overshoot.velocities = vec![3.0, 0.0];
    let mut end = point(2.0, [1.5, 0.0]);
    end.velocities = vec![0.0, 0.0];
    let reason = refused(&mut follower, &goal(NAMES, vec![overshoot, end])).reason;
    assert!(reason.contains("outside"), "{reason}");
    assert!(!follower.is_running());
}

#[test]
fn a_goal_is_done_only_with_the_joints_within_tolerance_and_stopped() {
    let mut follower = follower();
    follower.accept(&goal(NAMES, vec![point(1.0, [0.3, 0.3])]), 0, &at([0.0, 0.0]), any).unwrap();
    let moving_through = follower.update(S, &moving([0.3, 0.3], [0.2, 0.0])).unwrap();
    assert_eq!(moving_through.ended, None, "at the goal, still moving");
    let late = follower.update(2 * S, &moving([0.3, 0.3], [0.2, 0.0])).unwrap();
    match late.ended {
        Some(Outcome::Aborted { code: ErrorCode::GoalToleranceViolated, reason }) => {
            assert!(reason.contains("moving at 0.2000 rad/s"), "{reason}")
        }
        other => panic!("a goal tolerance violation, not {other:?}"),
    }
    follower.accept(&goal(NAMES, vec![point(1.0, [0.3, 0.3])]), 2 * S, &at([0.3, 0.3]), any).unwrap();
    assert_eq!(follower.update(3 * S, &moving([0.3, 0.3], [0.005, 0.0])).unwrap().ended, Some(Outcome::Succeeded));
    follower.accept(&goal(NAMES, vec![point(1.0, [0.3, 0.3])]), 3 * S, &at([0.3, 0.3]), any).unwrap();
    let blind = follower.update(4 * S, &moving([f64::NAN, 0.3], [0.0, 0.0])).unwrap();
    assert_eq!(blind.ended, None, "a position that is not a number is within no tolerance");
}

#[test]
fn a_refused_goal_leaves_the_running_one_running() {
    let mut follower = follower();
    follower.accept(&goal(NAMES, vec![point(2.0, [0.5, 0.5])]), 0, &at([0.0, 0.0]), any).unwrap();
    let checked_out = follower.accept(&goal(NAMES, vec![point(1.0, [0.1, 0.1])]), S, &at([0.2, 0.2]), |_| {
        Err("the device's own check".into())
    });
    assert!(checked_out.is_err());
    let going_on = follower.update(S, &at([0.25, 0.25])).unwrap();
    assert!((going_on.desired.positions[0] - 0.25).abs() < 1e-12, "the first goal goes on: {:?}", going_on.desired);
}

mod node_goals {
    //! A node's goals around its follower: what each control step commands and tells the goal.

    use super::*;
    use arm_hil::nodes::follower::goals::{
        GoalEvent, JointGoals, Setpoint, VelocityEstimate, DEFAULT_STATE_MAX_AGE_NS,
    };
    use arm_hil::nodes::follower::Constraints;

    #[test]
    fn a_goal_before_the_device_has_spoken_is_refused() {
        let mut goals = JointGoals::new(follower());
        let refused = goals.accept("g1", &goal(NAMES, vec![point(1.0, [0.2, 0.2])]), 0, any).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidGoal);
    }

    #[test]
    fn a_goal_after_the_device_fell_silent_is_refused_and_a_stop_is_not() {
        let mut goals = JointGoals::new(follower());
        goals.observe(0, at([0.0, 0.0]));
        let move_to = goal(NAMES, vec![point(1.0, [0.2, 0.2])]);
        assert!(goals.accept("g1", &move_to, DEFAULT_STATE_MAX_AGE_NS, any).is_ok(), "a state just old enough");
        // Silent a second: the joints may be anywhere the last setpoint took them.
        let refused = goals.accept("g2", &move_to, S + DEFAULT_STATE_MAX_AGE_NS, any).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidGoal);
        assert!(refused.reason.contains("last reported its joints 1.250 s ago"), "{}", refused.reason);
        assert!(refused.reason.contains("0.250 s"), "{}", refused.reason);
        assert!(goals.follow(&move_to, 2 * S).is_err(), "~/joint_trajectory as a goal");
        // A stop on ~/joint_trajectory holds all the same.
        let stop = goal(NAMES, Vec::new());
        assert!(goals.follow(&stop, 2 * S).is_ok());
        assert_eq!(goals.goal(), None);
        // Heard again: goals start.
        goals.observe(3 * S, at([0.1, 0.0]));
        assert!(goals.accept("g3", &move_to, 3 * S, any).is_ok());
    }

    #[test]
    fn each_step_commands_the_setpoint_and_feeds_the_goal_back_until_it_ends() {
        let mut goals = JointGoals::new(follower());
        goals.observe(0, at([0.0, 0.0]));
        assert_eq!(goals.accept("g1", &goal(NAMES, vec![point(1.0, [0.2, 0.4])]), 0, any), Ok(((), None)));
        let middle = goals.tick(S / 2, at([0.1, 0.2]));
        assert_eq!(middle.command, Some(Setpoint::Follow(vec![0.1, 0.2])));
        assert!(matches!(&middle.events[..], [GoalEvent::Feedback { goal: "g1", .. }]));
        assert_eq!(middle.state.output, vec![0.1, 0.2]);
        assert_eq!(middle.state.joint_names, NAMES);
        let end = goals.tick(S, at([0.2, 0.4]));
        assert_eq!(end.events, vec![GoalEvent::Finished { goal: "g1", outcome: Outcome::Succeeded }]);
        assert_eq!(goals.goal(), None);
        // Between goals nothing is commanded, and the controller state says the joints hold.
        let idle = goals.tick(2 * S, at([0.2, 0.4]));
        assert_eq!((idle.command, idle.events.len()), (None, 0));
        assert_eq!(idle.state.reference.positions, vec![0.2, 0.4]);
    }

    #[test]
    fn a_goals_first_setpoint_is_there_at_acceptance_from_the_state_at_receipt() {
        let mut goals = JointGoals::<&str>::new(follower());
        goals.observe(0, at([0.1, -0.1]));
        assert_eq!(goals.setpoint_now(0), None, "nothing is followed yet");
        // Received 10 ms after the last telemetry: the goal starts where the joints were.
        goals.accept("g1", &goal(NAMES, vec![point(1.0, [0.5, 0.3])]), S / 100, any).unwrap();
        assert_eq!(goals.setpoint_now(S / 100), Some(Setpoint::Follow(vec![0.1, -0.1])));
        // A goal at its end: its last point.
        assert_eq!(goals.setpoint_now(5 * S), Some(Setpoint::Follow(vec![0.5, 0.3])));
    }

    #[test]
    fn cancel_commands_the_hold_once_and_a_new_goal_replaces_the_old() {
        let mut goals = JointGoals::new(follower());
        goals.observe(0, at([0.0, 0.0]));
        goals.accept("g1", &goal(NAMES, vec![point(2.0, [0.5, 0.5])]), 0, any).unwrap();
        let ((), replaced) = goals.accept("g2", &goal(NAMES, vec![point(2.0, [0.5, 0.5])]), 0, any).unwrap();
        assert!(matches!(replaced, Some(("g1", Outcome::Canceled { .. }))));
        goals.tick(S / 2, at([0.1, 0.1]));
        assert_eq!(goals.cancel(|goal| *goal == "g1"), None, "only the goal followed is cancelled");
        assert!(matches!(goals.cancel(|goal| *goal == "g2"), Some(("g2", Outcome::Canceled { .. }))));
        assert_eq!(
            goals.tick(S, at([0.12, 0.11])).command,
            Some(Setpoint::Hold(vec![0.1, 0.1])),
            "the hold, where it was"
        );
        assert_eq!(goals.tick(S + S / 10, at([0.1, 0.1])).command, None, "once");
    }

    #[test]
    fn a_trajectory_on_the_topic_is_checked_and_followed_as_a_goal_and_an_empty_one_stops() {
        use arm_hil::nodes::follower::goals::DeviceGoals;
        let mut device = DeviceGoals::new(follower());
        let trajectory = goal(NAMES, vec![point(1.0, [0.2, 0.4])]);
        assert!(device.follow_trajectory(&trajectory, 0, true).is_err(), "nothing heard of the joints yet");
        device.goals.observe(0, at([0.0, 0.0]));
        assert!(device.follow_trajectory(&trajectory, 0, false).is_err(), "not while the node is inactive");
        device.goals.accept("g1", &goal(NAMES, vec![point(2.0, [0.5, 0.5])]), 0, any).unwrap();
        let too_fast = goal(NAMES, vec![point(0.01, [0.5, 0.5])]);
        assert_eq!(device.follow_trajectory(&too_fast, 0, true).unwrap_err().code, ErrorCode::InvalidGoal);
        assert_eq!(device.goals.goal(), Some(&"g1"), "a refused trajectory leaves the goal running");
        let replaced = device.follow_trajectory(&trajectory, 0, true).unwrap();
        assert!(matches!(replaced, Some(("g1", Outcome::Canceled { .. }))), "{replaced:?}");
        assert_eq!(device.goals.tick(S / 2, at([0.1, 0.2])).command, Some(Setpoint::Follow(vec![0.1, 0.2])));
        assert!(device.follow_trajectory(&goal(NAMES, Vec::new()), S / 2, true).unwrap().is_none());
        let held = device.goals.tick(S / 2 + S / 10, at([0.11, 0.21])).command;
        assert_eq!(held, Some(Setpoint::Hold(vec![0.1, 0.2])), "an empty trajectory holds where the joints were");
        device.follow_trajectory(&trajectory, S / 2 + S / 5, true).unwrap();
        assert!(device.stopped("deactivated").is_none(), "no client to answer");
        assert_eq!(device.goals.tick(2 * S, at([0.1, 0.2])).command, None, "a stop ends the trajectory");
    }

    /// A device that reports angles alone (the STM32's short telemetry, the testbench's older
    /// table): its joints' velocities are estimated from the angles.
    fn angles(positions: [f64; 2]) -> JointState {
        JointState { positions: positions.to_vec(), velocities: Vec::new() }
    }

    const SPAN: u64 = VelocityEstimate::SPAN_NS;

    #[test]
    fn a_velocity_not_reported_is_the_angles_change_over_a_span_and_never_taken_as_stopped() {
        let mut goals = JointGoals::new(follower());
        goals.observe(0, angles([0.0, 0.0]));
        // A path velocity tolerance cannot be kept on an estimate a span behind: refused.
        let mut strict = goal(NAMES, vec![point(1.0, [0.2, 0.4])]);
        strict.path_tolerance = vec![(NAMES[0].into(), JointTolerance { position: 0.0, velocity: 0.1 })];
        let refused = goals.accept("g0", &strict, 0, any).unwrap_err();
        assert!(refused.reason.contains("reports no velocities"), "{}", refused.reason);
        // One state tells no velocity: the goal starts from rest.
        goals.accept("g1", &goal(NAMES, vec![point(1.0, [0.2, 0.4])]), 0, any).unwrap();
        assert!(goals.tick(SPAN / 2, angles([0.0, 0.0])).state.feedback.velocities.iter().all(|v| v.is_nan()));
        goals.tick(SPAN, angles([0.0, 0.0]));
        let end = S;
        goals.tick(end - SPAN, angles([0.1, 0.4]));
        // At its goal on time, but 0.1 rad away a span ago: moving at 0.5 rad/s, not done; nor
        // a state right after (a burst), still measured against one a span back.
        let passing = goals.tick(end, angles([0.2, 0.4]));
        assert!((passing.state.feedback.velocities[0] - 0.5).abs() < 1e-9, "{:?}", passing.state.feedback);
        let burst = goals.tick(end + 1_000_000, angles([0.2, 0.4]));
        for tick in [&passing, &burst] {
            assert!(!tick.events.iter().any(|event| matches!(event, GoalEvent::Finished { .. })), "{tick:?}");
        }
        let stopped = goals.tick(end + SPAN, angles([0.2, 0.4]));
        assert_eq!(stopped.events, vec![GoalEvent::Finished { goal: "g1", outcome: Outcome::Succeeded }]);
    }

    #[test]
    fn a_gap_or_a_stop_makes_an_estimated_velocity_unknown_again() {
        let mut estimate = VelocityEstimate::default();
        let filled = |estimate: &mut VelocityEstimate, now_ns, positions| {
            let mut state = angles(positions);
            estimate.fill(now_ns, &mut state);
            state.velocities
        };
        assert!(filled(&mut estimate, 0, [0.0, 0.0]).iter().all(|v| v.is_nan()), "one state");
        assert_eq!(filled(&mut estimate, SPAN, [0.025, 0.0]), vec![0.125, 0.0]);
        let after_gap = SPAN + VelocityEstimate::MAX_SPAN_NS + 1;
        assert!(filled(&mut estimate, after_gap, [0.025, 0.0]).iter().all(|v| v.is_nan()), "a link that dropped");
        assert_eq!(filled(&mut estimate, after_gap + SPAN, [0.025, 0.0]), vec![0.0, 0.0]);
        let again = filled(&mut estimate, after_gap + SPAN, [0.05, 0.0]);
        assert_eq!(again, vec![0.125, 0.0], "a state at the same time takes the last one's place");
        assert!(filled(&mut estimate, 0, [0.025, 0.0]).iter().all(|v| v.is_nan()), "a clock that went back");
        let mut device = arm_hil::nodes::follower::goals::DeviceGoals::<&str>::new(follower());
        device.goals.observe(0, angles([0.0, 0.0]));
        device.goals.observe(SPAN, angles([0.0, 0.0]));
        device.stopped("deactivated");
        let after = device.goals.tick(SPAN + 1, angles([0.0, 0.0]));
        assert!(after.state.feedback.velocities.iter().all(|v| v.is_nan()), "unknown after a stop");
    }

    #[test]
    fn a_velocity_the_device_reports_is_kept_a_nan_among_them_too() {
        let mut goals = JointGoals::<&str>::new(follower());
        goals.observe(0, at([0.0, 0.0]));
        let reported = JointState { positions: vec![0.3, 0.0], velocities: vec![f64::NAN, 0.25] };
        let tick = goals.tick(S, reported);
        assert!(tick.state.feedback.velocities[0].is_nan(), "a NaN fails closed, not estimated away");
        assert_eq!(tick.state.feedback.velocities[1], 0.25);
        let refused = goals.accept("g1", &goal(NAMES, vec![point(1.0, [0.2, 0.4])]), S, any).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidGoal, "no goal starts from a NaN the device reported");
    }

    #[test]
    fn the_constraints_parameters_give_one_value_for_every_joint_or_one_per_joint() {
        let every = Constraints { goal_time: 0.5, goal: vec![0.03], ..Constraints::default() }.tolerances(2).unwrap();
        assert_eq!(every.goal, vec![JointTolerance { position: 0.03, velocity: 0.01 }; 2], "stopped within 0.01 rad/s");
        assert_eq!(every.goal_time_s, 0.5);
        let each = Constraints { goal: vec![0.01, 0.02], ..Constraints::default() }.tolerances(2).unwrap();
        assert_eq!(each.goal[1].position, 0.02);
        assert!(Constraints { goal: vec![0.01, 0.02, 0.03], ..Constraints::default() }.tolerances(2).is_err());
        assert!(Constraints { goal: vec![f64::NAN], ..Constraints::default() }.tolerances(2).is_err());
    }
}

mod devices {
    //! What each driver's control step reads from its device and sends it.

    use arm_hil::drivers::rdscom::{DriverEvent as RdscomDriverEvent, RdscomEvent, RdscomLinkState};
    use arm_hil::nodes::arduino::{TestbenchSetpoints, SETPOINT_TIMEOUT_NS};
    use arm_hil::protocol::rdscom::{FrameType, Message, PrototypeTable, Value};

    const MS: u64 = 1_000_000;

    fn received(prototype: u8, values: Vec<Value>) -> RdscomDriverEvent {
        RdscomDriverEvent::Link(RdscomEvent::Received(Message {
            kind: FrameType::Response,
            prototype,
            number: 0,
            values,
        }))
    }

    fn sample(joint: i64, position: f64) -> RdscomDriverEvent {
        received(6, vec![Value::Int(joint), Value::Float(position)])
    }

    #[test]
    fn the_testbench_steps_once_every_joint_is_heard_at_the_end_of_each_round() {
        let table = PrototypeTable::document();
        let mut testbench = TestbenchSetpoints::default();
        assert_eq!(testbench.sample(&sample(3, 0.3), &table), None, "joints 0 to 2 not heard yet");
        for joint in 0..3 {
            assert_eq!(testbench.sample(&sample(joint, 0.1 * joint as f64), &table), None);
        }
        let state = testbench.sample(&sample(3, 0.4), &table).unwrap();
        assert_eq!(state.positions, vec![0.0, 0.1, 0.2, 0.4]);
    }

    #[test]
    fn a_testbench_setpoint_is_four_simultaneous_position_controls_and_go_each_once_the_last_is_done() {
        let table = PrototypeTable::document();
        let mut testbench = TestbenchSetpoints::default();
        let requests = testbench.setpoint(0, vec![0.1, 0.2, 0.3, 0.4]);
        let names: Vec<&str> = requests.iter().map(|request| request.prototype.as_str()).collect();
        assert_eq!(names, ["MotorControl", "MotorControl", "MotorControl", "MotorControl", "ControlGo"]);
        assert_eq!(requests[0].values, vec![Value::Int(0), Value::Int(0), Value::Float(0.1), Value::Bool(false)]);
        assert_eq!(requests[3].values, vec![Value::Int(3), Value::Int(0), Value::Float(0.4), Value::Bool(true)]);
        // While the MCU runs it, the newest setpoint waits, and goes out once ControlDone comes.
        assert!(testbench.setpoint(20 * MS, vec![0.2; 4]).is_empty());
        assert!(testbench.setpoint(40 * MS, vec![0.3; 4]).is_empty());
        let control_done = table.by_name("ControlDone").unwrap().id;
        let done = received(control_done, vec![Value::Bool(true), Value::Int(20), Value::Int(4)]);
        let next = testbench.heard(45 * MS, &done, &table);
        assert_eq!(next[1].values[2], Value::Float(0.3));
        // Without an answer, the next goes out after the timeout.
        assert!(testbench.setpoint(50 * MS, vec![0.4; 4]).is_empty());
        assert_eq!(testbench.setpoint(45 * MS + SETPOINT_TIMEOUT_NS, vec![0.5; 4]).len(), 5);
        // A setpoint that waits when the node stops (or another command goes out) never goes.
        assert!(testbench.setpoint(46 * MS + SETPOINT_TIMEOUT_NS, vec![0.6; 4]).is_empty());
        testbench.unsent();
        assert!(testbench.heard(47 * MS + SETPOINT_TIMEOUT_NS, &done, &table).is_empty(), "forgotten");
    }

    #[test]
    fn ros2_control_commands_are_setpoints_sent_once_each_until_the_link_comes_up_anew_or_a_send_fails() {
        let table = PrototypeTable::document();
        let joint_names: Vec<String> = (0..4).map(|joint| format!("finger_joint{joint}")).collect();
        // The hardware plugin names the joints in the URDF's order, which need not be the motors'.
        let names: Vec<String> = [3, 0, 1, 2].iter().map(|joint| joint_names[*joint].clone()).collect();
        let mut testbench = TestbenchSetpoints::default();
        let requests = testbench.command(0, &names, &[0.4, 0.1, 0.2, 0.3], &joint_names).unwrap();
        let targets: Vec<&Value> = requests[..4].iter().map(|request| &request.values[2]).collect();
        assert_eq!(targets, [&Value::Float(0.1), &Value::Float(0.2), &Value::Float(0.3), &Value::Float(0.4)]);
        let control_done = table.by_name("ControlDone").unwrap().id;
        let done = received(control_done, vec![Value::Bool(true), Value::Int(20), Value::Int(4)]);
        assert!(testbench.heard(20 * MS, &done, &table).is_empty());
        // The controllers repeat their command every cycle: the MCU holds it already.
        assert!(testbench.command(20 * MS, &names, &[0.4, 0.1, 0.2, 0.3], &joint_names).unwrap().is_empty());
        let up = RdscomDriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Up));
        assert!(testbench.heard(30 * MS, &up, &table).is_empty());
        assert_eq!(testbench.command(40 * MS, &names, &[0.4, 0.1, 0.2, 0.3], &joint_names).unwrap().len(), 5);
        // A setpoint the node could not send (inactive, say) goes out again with the next command.
        testbench.unsent();
        assert_eq!(testbench.command(50 * MS, &names, &[0.4, 0.1, 0.2, 0.3], &joint_names).unwrap().len(), 5);
        // Every joint is commanded, with a finite target.
        let refused = testbench.command(60 * MS, &names[..3], &[0.4, 0.1, 0.2], &joint_names).unwrap_err();
        assert_eq!(refused, "joint `finger_joint2` is missing: a command names every commanded joint");
        assert!(testbench.command(60 * MS, &names, &[f64::NAN, 0.1, 0.2, 0.3], &joint_names).is_err());
    }
}

mod simulated_arm {
    //! sil_node's goals: the joint trajectory through the forward kinematics, and the hold.

    use arm_hil::control::ReferenceSampler;
    use arm_hil::control::Trajectory;
    use arm_hil::hil::protection::ProtectionConfig;
    use arm_hil::model::math::Vec3;
    use arm_hil::model::Robot;
    use arm_hil::nodes::follower::goals::JointGoals;
    use arm_hil::nodes::follower::spline::TrajectoryPoint;
    use arm_hil::nodes::follower::{Constraints, Goal, GoalLimits, JointState};
    use arm_hil::nodes::load_trajectory;
    use arm_hil::nodes::sil::joint_commands::{
        CommandMove, JointCommands, HIL_COMMAND_SPEED_M_S, LOOP_SAMPLE_S, MAX_PAST_COMMAND_M, MIN_HORIZON_S,
        QUICKEST_RISE, SIL_COMMAND_SPEED_M_S,
    };
    use arm_hil::nodes::sil::joint_goals::{arm_follower, goal_trajectory, held_at, HOLD_S};
    use arm_hil::sim::SilConfig;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_goal_plays_from_where_the_platform_is_to_its_end_then_holds() {
        let robot = Robot::new(SilConfig::default().robot).unwrap();
        let start = load_trajectory(None, &robot).unwrap().waypoints()[0];
        let theta = robot.inverse_kinematics(&start.x, None).unwrap();
        let target: Vec<f64> = theta.iter().zip([0.05, -0.04, 0.03]).map(|(a, d)| a + d).collect();
        let mut goals = JointGoals::new(arm_follower(&Constraints::default(), &GoalLimits::default()).unwrap());
        goals.observe(5 * S, JointState { positions: theta.iter().copied().collect(), velocities: vec![0.0; 3] });
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned).to_vec();
        let to = |time_s: f64, positions: Vec<f64>| {
            let point = TrajectoryPoint { time_s, positions, velocities: Vec::new(), accelerations: Vec::new() };
            Goal { joint_names: names.clone(), points: vec![point], ..Goal::default() }
        };
        let path = |plan: &_| goal_trajectory(&robot, plan, &start.x, HOLD_S);
        let apart = goals.accept((), &to(4.0, vec![3.0; 3]), 5 * S, path).unwrap_err();
        assert!(
            apart.reason.contains("cannot take the goal's angles"),
            "the arm does not assemble there: {}",
            apart.reason
        );
        let (trajectory, _) = goals.accept((), &to(1.0, target.clone()), 5 * S, path).unwrap();
        let waypoints = trajectory.waypoints();
        assert!((waypoints[0].x - start.x).norm() < 1e-9, "it starts where the platform is");
        let end = waypoints[waypoints.len() - 2];
        let at_target = robot.inverse_kinematics(&end.x, Some(&theta)).unwrap();
        assert!(at_target.iter().zip(&target).all(|(a, b)| (a - b).abs() < 1e-9), "it ends at the goal's angles");
        assert!((end.t - 1.0).abs() < 0.011, "its times count from now: {}", end.t);
        let hold = waypoints[waypoints.len() - 1];
        assert_eq!((hold.t - end.t, hold.x), (HOLD_S, end.x), "then the platform holds");

        let held = held_at(&robot, end.x, (robot.elbow(), robot.params().l_arm)).unwrap();
        assert_eq!((held.waypoints()[0].x, held.waypoints()[1].x), (end.x, end.x));
    }

    /// The simulated arm at the built-in arc's start: the robot, the platform point [m], and its
    /// motors' angles [rad].
    fn at_the_arcs_start() -> (Robot, Vec3, Vec3) {
        let robot = Robot::new(SilConfig::default().robot).unwrap();
        let start = load_trajectory(None, &robot).unwrap().waypoints()[0];
        let theta = robot.inverse_kinematics(&start.x, None).unwrap();
        (robot, start.x, theta)
    }

    /// Where motor angles `theta` [rad] put the platform [m], near `near`.
    fn platform(robot: &Robot, theta: &[f64; 3], near: &Vec3) -> Vec3 {
        robot.motion_from_joints(&Vec3::from(*theta), &Vec3::zeros(), near).unwrap().p
    }

    #[test]
    fn a_stream_of_joint_commands_is_met_a_horizon_ahead_on_its_own_course() {
        let (robot, start, theta) = at_the_arcs_start();
        // The hardware plugin names every joint of the URDF's block; the node takes the motors'.
        let names = ["joint1", "forearm_yaw", "joint2", "joint3"].map(str::to_owned);
        let command = |joint1: f64| [theta[0] + joint1, 0.3, theta[1], theta[2]];
        let mut commands = JointCommands::new(SIL_COMMAND_SPEED_M_S);
        // The stream's first command: from the controller's reference, meeting it in the longest
        // time, at rest; then resting there, then the hold.
        let first =
            commands.trajectory(&robot, (10.0, Some(5.0)), Ok((start, Vec3::zeros())), &names, &command(0.0)).unwrap();
        assert!(!first.continues, "a new stream starts at the controller's reference");
        let [from, meets, rest, hold] = first.trajectory.waypoints() else { panic!("four waypoints") };
        assert_eq!((from.x, meets.t, meets.xd), (start, JointCommands::LONGEST_S, Vec3::zeros()));
        assert_eq!((rest.x, hold.t - rest.t), (meets.x, HOLD_S));

        // A controller turning joint1 steadily, a command each 4 ms of its stamps (their arrival
        // jitters): the stream's velocity from its second step on, each move meeting the stream
        // a horizon ahead going on at it (a command that came late after its stamp, that much
        // farther on), and starting where the move before has the loop's reference as it is taken up.
        let mut before = first.trajectory.clone();
        let (mut at_s, mut quickest_s) = (10.0, 5.0);
        for (step, arrival_s) in [10.0041, 10.0079, 10.0122, 10.016].into_iter().enumerate() {
            let joint1 = 0.002 * (step + 1) as f64;
            let stamp_s = 5.0 + 0.004 * (step + 1) as f64;
            let next = commands
                .trajectory(&robot, (arrival_s, Some(stamp_s)), Ok((start, Vec3::zeros())), &names, &command(joint1))
                .unwrap();
            assert!(next.continues);
            // The least transit so far, let rise slowly.
            quickest_s = f64::min(quickest_s + QUICKEST_RISE * (arrival_s - at_s), arrival_s - stamp_s);
            let waypoints = next.trajectory.waypoints();
            let expected = ReferenceSampler::new().sample(&before, arrival_s - at_s);
            let off = ((waypoints[0].x - expected.x).norm(), (waypoints[0].xd - expected.xd).norm());
            assert!(off.0 < 1e-12 && off.1 < 1e-9, "step {step}: {off:?}");
            if step >= 1 {
                let velocity = (platform(&robot, &[theta[0] + joint1, theta[1], theta[2]], &start)
                    - platform(&robot, &[theta[0] + joint1 - 0.002, theta[1], theta[2]], &start))
                    / 0.004;
                let target = platform(&robot, &[theta[0] + joint1, theta[1], theta[2]], &start);
                let horizon_s = waypoints[1].t;
                assert_eq!(horizon_s, MIN_HORIZON_S, "two periods, at least the shortest horizon");
                assert!((waypoints[1].xd - velocity).norm() < 1e-9, "at the stream's velocity: {:?}", waypoints[1]);
                let late_s = arrival_s - stamp_s - quickest_s;
                let course = target + velocity * (horizon_s + late_s);
                assert!((waypoints[1].x - course).norm() < 1e-12, "on its course");
                assert_eq!(waypoints[2].xd, Vec3::zeros(), "then to rest, if no command follows");
            }
            (before, at_s) = (next.trajectory, arrival_s);
        }
    }

    /// A controller turning the simulated arm's joint1 from the built-in arc's start, as a
    /// stream of joint commands stamped as they are sent.
    struct Joint1Stream {
        robot: Robot,
        start: Vec3,
        theta: Vec3,
        commands: JointCommands,
    }

    impl Joint1Stream {
        /// `steps` commands turning joint1 steadily, 2 mrad every 4 ms from 0 s.
        fn steady(steps: usize) -> Joint1Stream {
            let (robot, start, theta) = at_the_arcs_start();
            let commands = JointCommands::new(SIL_COMMAND_SPEED_M_S);
            let mut stream = Joint1Stream { robot, start, theta, commands };
            for step in 0..steps {
                stream.send(0.004 * step as f64, 0.002 * step as f64);
            }
            stream
        }

        /// The command putting joint1 `joint1` [rad] off its start, sent at `at_s` [s].
        fn send(&mut self, at_s: f64, joint1: f64) -> CommandMove {
            let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
            let positions = [self.theta[0] + joint1, self.theta[1], self.theta[2]];
            let reference = Ok((self.start, Vec3::zeros()));
            self.commands.trajectory(&self.robot, (at_s, Some(at_s)), reference, &names, &positions).unwrap()
        }

        /// Where joint1 `joint1` [rad] off its start puts the platform [m], near `near`.
        fn platform(&self, joint1: f64, near: &Vec3) -> Vec3 {
            platform(&self.robot, &[self.theta[0] + joint1, self.theta[1], self.theta[2]], near)
        }
    }

    #[test]
    fn a_command_off_the_streams_course_moves_the_stream_not_its_velocity() {
        let mut stream = Joint1Stream::steady(4);
        let steady = stream.send(0.016, 0.008).trajectory.waypoints()[1].xd;
        // joint_trajectory_controller starts a new goal from the measured joints: 5 mrad off the
        // stream's course, which a velocity from it would throw 1.25 rad/s ahead.
        let jumped = stream.send(0.020, 0.010 + 0.005);
        let [start_of_move, meets, ..] = jumped.trajectory.waypoints() else { panic!() };
        assert!((meets.xd - steady).norm() < 1e-9, "the stream keeps its velocity: {:?} for {steady:?}", meets.xd);
        // It meets the stream where the command puts it, two periods on, going on at its velocity.
        let target = stream.platform(0.015, &start_of_move.x);
        assert!(meets.t == MIN_HORIZON_S && (meets.x - (target + steady * meets.t)).norm() < 1e-12);
    }

    /// A command a little behind the stream's last (here half a milliradian of joint1 back, as
    /// joint_trajectory_controller restarting a goal behind its last command, or a hostile zigzag)
    /// is a step back, not a stream slowing on its course: the stream keeps its velocity instead
    /// of turning round with it.
    #[test]
    fn a_command_a_little_behind_the_streams_last_keeps_the_streams_velocity() {
        let mut stream = Joint1Stream::steady(5);
        let start = stream.start;
        let steady = (stream.platform(0.008, &start) - stream.platform(0.006, &start)) / 0.004;
        let stepped_back = stream.send(0.020, 0.0075);
        let meets = stepped_back.trajectory.waypoints()[1];
        assert!((meets.xd - steady).norm() < 1e-9, "the stream keeps its velocity: {:?} for {steady:?}", meets.xd);
    }

    #[test]
    fn a_step_command_is_ramped_at_the_command_speed_and_arrives_at_rest() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let mut commands = JointCommands::new(SIL_COMMAND_SPEED_M_S);
        let step = [theta[0] + 0.2, theta[1], theta[2]];
        let ramp = commands.trajectory(&robot, (0.0, None), Ok((start, Vec3::zeros())), &names, &step).unwrap();
        let arrival = ramp.trajectory.waypoints()[1];
        let ramp_s = (arrival.x - start).norm() / SIL_COMMAND_SPEED_M_S;
        assert!(ramp_s > 0.1 && (arrival.t - ramp_s).abs() < 1e-9 && arrival.xd == Vec3::zeros(), "{ramp_s} s");
        let without_joint3 =
            commands.trajectory(&robot, (0.004, None), Ok((start, Vec3::zeros())), &names[..2], &step[..2]);
        assert_eq!(without_joint3.unwrap_err(), "joint `joint3` is missing: a command names every commanded joint");
        let twice = ["joint1", "joint2", "joint3", "joint1"].map(str::to_owned);
        let refused =
            commands.trajectory(&robot, (0.008, None), Ok((start, Vec3::zeros())), &twice, &[0.0, 0.5, 0.0, 0.0]);
        assert_eq!(refused.unwrap_err(), "joint `joint1` is named twice");
    }

    #[test]
    fn hil_nodes_step_command_ramps_no_faster_than_its_goals_may_turn_the_motors() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let bounds = ProtectionConfig::default();
        // A platform speed that binds less than the motors' bounds (hil_node's binds at about
        // 0.14 m a radian of joint1).
        let platform_m_s = 1.0;
        let mut commands = JointCommands::new(platform_m_s).for_the_loop().within(&bounds);
        // Half a radian on joint1 at once.
        let step = [theta[0] + 0.5, theta[1], theta[2]];
        let ramp = commands.trajectory(&robot, (0.0, None), Ok((start, Vec3::zeros())), &names, &step).unwrap();
        // The loop gets the move as samples every LOOP_SAMPLE_S, and interpolates them linearly.
        let samples = ramp.trajectory.waypoints();
        assert!(samples.windows(2).all(|pair| (pair[1].t - pair[0].t) <= LOOP_SAMPLE_S + 1e-12));
        let target = platform(&robot, &step, &start);
        let arrival = samples.iter().find(|sample| (sample.x - target).norm() < 1e-9).expect("the move arrives");
        assert!((arrival.x - start).norm() / platform_m_s < 0.25, "the platform speed binds less");
        // Its interpolation, from rest to rest, peaks at 15/8 of its mean speed: that peak at the
        // motors' bound at least, and longer where the kinematics turn joint1 faster on part of
        // the platform's straight way, until the way passes the check a segment passes.
        let speed_bound_s = 15.0 / 8.0 * 0.5 / bounds.max_joint_speed_rad_s;
        assert!(arrival.t >= speed_bound_s - LOOP_SAMPLE_S, "the motors' speed binds: {arrival:?}");
        bounds.check_motion(&robot, samples, (true, true)).expect("as the node's segments are checked");
        // The same command again 4 ms on (a controller holding its step) goes on with the ramp
        // from where it has the loop's reference: it continues, checked as the first was.
        let again = commands.trajectory(&robot, (0.004, None), Ok((start, Vec3::zeros())), &names, &step).unwrap();
        assert!(again.continues);
        let first_sample = again.trajectory.waypoints()[0];
        let on_the_ramp = ReferenceSampler::new().sample(&ramp.trajectory, 0.004);
        assert!((first_sample.x - on_the_ramp.x).norm() < 1e-5, "{first_sample:?} for {on_the_ramp:?}");
        bounds.check_motion(&robot, again.trajectory.waypoints(), (false, true)).expect("checked");
    }

    #[test]
    fn a_controllers_stream_with_stalls_and_new_goals_is_followed_closely_within_the_motors_bounds() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let bounds = ProtectionConfig::default();
        let mut commands = JointCommands::new(HIL_COMMAND_SPEED_M_S).for_the_loop().within(&bounds);
        // joint_trajectory_controller at 250 Hz: goals of 1 s between two poses 0.3 rad apart on
        // each motor, 0.3 s apart, each starting 8 mrad off (from the measured joints); the
        // commands arrive 0.3 - 2.3 ms after their stamps, and every 97th a stall of 30 ms
        // delivers five at once.
        let (period_s, apart) = (0.004, Vec3::new(0.3, -0.3, 0.3));
        let quintic = |s: f64| s * s * s * (10.0 - 15.0 * s + 6.0 * s * s);
        let desired = |t: f64| {
            let goal = (t / 1.3).floor();
            let s = (t - goal * 1.3).clamp(0.0, 1.0);
            let (from, to) = if goal as i64 % 2 == 0 { (theta, theta + apart) } else { (theta + apart, theta) };
            from + (to - from) * quintic(s)
        };
        let mut jitter = 0x2545_f491_u64;
        let mut moves: Vec<(f64, Trajectory)> = Vec::new();
        let taken_at = |moves: &[(f64, Trajectory)], t: f64| {
            moves.iter().rev().find(|(at, _)| *at <= t).map(|(at, move_)| ReferenceSampler::new().sample(move_, t - at))
        };
        let mut arrival_s = 0.0f64;
        for k in 0..1500 {
            let stamp_s = k as f64 * period_s;
            jitter ^= jitter << 13;
            jitter ^= jitter >> 7;
            jitter ^= jitter << 17;
            let stall_s = if k % 97 < 5 { 0.03 - 0.004 * (k % 97) as f64 } else { 0.0 };
            arrival_s = arrival_s.max(stamp_s + 3e-4 + (jitter % 1000) as f64 * 2e-6 + stall_s) + 1e-4;
            let goal_start = ((stamp_s / 1.3).fract() * 1.3 / period_s).round() == 0.0;
            let command = desired(stamp_s) + if goal_start { Vec3::repeat(0.008) } else { Vec3::zeros() };
            let reference = taken_at(&moves, arrival_s).map_or((start, Vec3::zeros()), |r| (r.x, r.xd));
            let taken =
                commands.trajectory(&robot, (arrival_s, Some(stamp_s)), Ok(reference), &names, command.as_slice());
            // The loop takes a move up at its next step.
            moves.push((arrival_s + 1e-3, taken.expect("every command of the stream is followed").trajectory));
        }
        // Every millisecond: the motors the loop's reference asks for, behind the controller by how
        // much, and turning how much faster than a millisecond before.
        let (mut errors, mut before): (Vec<f64>, Option<(Vec3, Option<Vec3>)>) = (Vec::new(), None);
        let mut t = 0.5;
        while t < 5.9 {
            let reference = taken_at(&moves, t).unwrap();
            let motors = robot.inverse_kinematics(&reference.x, Some(&theta)).unwrap();
            errors.push((motors - desired(t)).amax());
            let speed = before.map(|(previous, _)| (motors - previous) / 1e-3);
            if let (Some(now), Some((_, Some(then)))) = (speed, before) {
                let acceleration = ((now - then) / 1e-3).amax();
                assert!(acceleration <= bounds.max_joint_acceleration_rad_s2 * 1.1, "{acceleration} rad/s^2 at {t} s");
            }
            before = Some((motors, speed));
            t += 1e-3;
        }
        let rms = (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt();
        assert!(rms < 2e-3 && errors.iter().all(|e| *e < 1e-2), "{rms} rad RMS behind the controller");
    }

    #[test]
    fn a_stream_whose_points_come_faster_than_their_stamps_say_goes_no_farther_than_past_its_last_command() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        // A client sends points 2 mrad of joint1 apart each millisecond (2 rad/s, some 0.3 m/s
        // of the platform), stamped 1 us apart (a thousand times as fast, were the stamps
        // believed), then 1 ms: every move comes to rest within reach of its command all the same.
        for stamp_spacing_s in [1e-6, 1e-3] {
            for mut commands in [
                JointCommands::new(SIL_COMMAND_SPEED_M_S),
                JointCommands::new(HIL_COMMAND_SPEED_M_S).for_the_loop().within(&ProtectionConfig::default()),
            ] {
                let (mut reference, mut followed) = ((start, Vec3::zeros()), 0);
                for k in 0..40 {
                    let positions = [theta[0] + 0.002 * k as f64, theta[1], theta[2]];
                    let stamp = Some(1.0 + stamp_spacing_s * k as f64);
                    let Ok(taken) =
                        commands.trajectory(&robot, (2.0 + 1e-3 * k as f64, stamp), Ok(reference), &names, &positions)
                    else {
                        continue;
                    };
                    let target = platform(&robot, &positions, &start);
                    // It comes to rest on the stream's course, ahead of the command's point.
                    let rest = taken.trajectory.waypoints()[taken.trajectory.waypoints().len() - 1];
                    let past_m = (rest.x - target).norm();
                    assert!(
                        past_m <= MAX_PAST_COMMAND_M + 1e-9,
                        "{past_m} m past the command {k}: {:?} for {target:?}",
                        rest.x
                    );
                    followed += 1;
                    reference = (taken.trajectory.waypoints()[0].x, taken.trajectory.waypoints()[0].xd);
                }
                assert!(followed > 10, "{followed} of 40 followed");
            }
        }
    }

    #[test]
    fn a_stream_that_stops_dead_is_met_at_rest_where_it_stopped() {
        let mut stream = Joint1Stream::steady(10);
        // The controller's goal is canceled: it holds where it is, a command each period.
        let stopped = stream.send(0.040, 0.018);
        let [_, meets, ..] = stopped.trajectory.waypoints() else { panic!() };
        let target = stream.platform(0.018, &stream.start);
        assert_eq!(meets.xd, Vec3::zeros(), "a stream that slows is on its course");
        assert!((meets.x - target).norm() < 1e-12, "met where it stopped: {} m off", (meets.x - target).norm());
    }

    #[test]
    fn a_step_held_by_its_controller_ramps_on_as_first_planned() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let bounds = ProtectionConfig::default();
        let mut commands = JointCommands::new(HIL_COMMAND_SPEED_M_S).for_the_loop().within(&bounds);
        let step = [theta[0] + 0.2, theta[1], theta[2]];
        // forward_position_controller holding a step: the same command each 4 ms till the
        // platform is there.
        let first = commands.trajectory(&robot, (0.0, Some(0.0)), Ok((start, Vec3::zeros())), &names, &step).unwrap();
        let arrival_s = first.trajectory.end_time();
        let mut at_s = 0.004;
        while at_s < arrival_s + 0.02 {
            let again =
                commands.trajectory(&robot, (at_s, Some(at_s)), Ok((start, Vec3::zeros())), &names, &step).unwrap();
            assert!(again.continues);
            // Each move goes on with the first ramp: where it has the loop's reference at each
            // of its samples, the first has it too.
            for sample in again.trajectory.waypoints() {
                let on_first =
                    ReferenceSampler::new().sample(&first.trajectory, again.starts_s - first.starts_s + sample.t);
                assert!((sample.x - on_first.x).norm() < 1e-6, "{at_s} s: {:?} for {:?}", sample, on_first);
            }
            at_s += 0.004;
        }
    }

    #[test]
    fn a_command_the_node_refuses_leaves_the_stream_on_the_move_before() {
        let (robot, start, theta) = at_the_arcs_start();
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let mut commands =
            JointCommands::new(HIL_COMMAND_SPEED_M_S).for_the_loop().within(&ProtectionConfig::default());
        let at = |joint1: f64| [theta[0] + joint1, theta[1], theta[2]];
        let reference = Ok((start, Vec3::zeros()));
        let first = commands.trajectory(&robot, (0.0, Some(0.0)), reference.clone(), &names, &at(0.0)).unwrap();
        commands.trajectory(&robot, (0.004, Some(0.004)), reference.clone(), &names, &at(0.002)).unwrap();
        // The node's own check refuses that move after all; then one with a NaN comes.
        commands.not_sent();
        assert!(commands.trajectory(&robot, (0.006, Some(0.006)), reference.clone(), &names, &[f64::NAN; 3]).is_err());
        // The next goes on from the first move, which the loop still plays.
        let next = commands.trajectory(&robot, (0.008, Some(0.008)), reference, &names, &at(0.004)).unwrap();
        let on_first = ReferenceSampler::new().sample(&first.trajectory, next.starts_s - first.starts_s);
        assert!(next.continues && (next.trajectory.waypoints()[0].x - on_first.x).norm() < 1e-12);
    }

    #[test]
    fn the_simulated_arm_follows_a_far_step_command_at_sil_nodes_command_speed() {
        use arm_hil::sim::Simulation;
        use std::sync::Arc;

        let robot = Robot::new(SilConfig::default().robot).unwrap();
        let arc = Arc::new(load_trajectory(None, &robot).unwrap());
        let mut simulation = Simulation::new(robot.clone(), arc.clone(), &SilConfig::default()).unwrap();
        let before = (&mut simulation).map(Result::unwrap).find(|frame| frame.t >= 1.0).unwrap();
        // A fifth of a radian on joint1, as forward_position_controller takes it at once.
        let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
        let step = [before.theta[0] + 0.2, before.theta[1], before.theta[2]];
        let mut commands = JointCommands::new(SIL_COMMAND_SPEED_M_S);
        let reference = (before.x_ref, before.xd_ref);
        let trajectory =
            Arc::new(commands.trajectory(&robot, (0.0, None), Ok(reference), &names, &step).unwrap().trajectory);
        let target = trajectory.waypoints()[1];
        assert!((target.x - before.x).norm() > 0.02, "a far step: {} m", (target.x - before.x).norm());
        simulation.steer(trajectory);
        let settled = (&mut simulation).map(Result::unwrap).find(|frame| frame.t >= target.t + 0.5).unwrap();
        assert!((settled.x - target.x).norm() < 1e-3, "at {} for {}", settled.x, target.x);
        assert!(simulation.stats().max_error_m < 0.01, "tracked within {} m", simulation.stats().max_error_m);
    }
}

mod command_streams {
    //! What every node does with a stream of commands it refuses.

    use std::time::{Duration, Instant};

    use arm_hil::nodes::follower::stream_gate::HELD;
    use arm_hil::nodes::refusals::{Refusals, Said, SAID_AT_MOST_EVERY};

    fn reason(said: Option<Said>) -> Option<String> {
        said.map(|said| said.reason)
    }

    #[test]
    fn a_lasting_refusal_is_said_once_and_again_after_a_command_got_through() {
        let (mut refusals, now) = (Refusals::default(), Instant::now());
        let later = now + SAID_AT_MOST_EVERY;
        let inactive = || Err("the node is not active".to_owned());
        assert_eq!(reason(refusals.said(now, inactive())).as_deref(), Some("the node is not active"));
        assert_eq!(refusals.said(now, inactive()), None);
        assert_eq!(reason(refusals.said(later, Err("NaN".into()))).as_deref(), Some("NaN"), "another reason is said");
        assert_eq!(refusals.said(later, Ok(())), None);
        let again = refusals.said(later + SAID_AT_MOST_EVERY, inactive());
        assert_eq!(reason(again).as_deref(), Some("the node is not active"));
    }

    #[test]
    fn a_refusal_for_the_same_bound_with_other_figures_is_the_same_refusal() {
        let (mut refusals, now) = (Refusals::default(), Instant::now());
        let later = now + SAID_AT_MOST_EVERY;
        let off =
            |at: &str, offset: &str| Err(format!("at {at} s the platform point would be {offset} m off the sphere."));
        let first = reason(refusals.said(now, off("0.040", "-0.0100")));
        assert_eq!(first.as_deref(), Some("at 0.040 s the platform point would be -0.0100 m off the sphere."));
        assert_eq!(refusals.said(later, off("0.034", "-0.0101")), None);
        assert_eq!(refusals.said(later, off("0.018", "+0.0100")), None, "the other side of the same bound");
        assert!(refusals.said(later, Err("the node is not active".into())).is_some(), "another bound is said");
    }

    #[test]
    fn refusals_of_different_joints_or_motors_are_different_refusals() {
        let (mut refusals, mut now) = (Refusals::default(), Instant::now());
        for text in [
            "joint `joint1` is missing: a command names every commanded joint",
            "joint `joint2` is missing: a command names every commanded joint",
            "motor 0: its joint has not been heard lately, so no rate may run",
            "motor 3: its joint has not been heard lately, so no rate may run",
            "joint `finger_joint0`: 3 is past its limit 2.5",
            "joint `finger_joint0`: 4 is past its limit 2.5",
        ] {
            now += SAID_AT_MOST_EVERY;
            assert_eq!(reason(refusals.said(now, Err(text.into()))).as_deref(), Some(text));
        }
    }

    #[test]
    fn refusals_that_take_turns_are_said_at_most_once_a_second_with_those_held_back_counted() {
        let (mut refusals, start) = (Refusals::default(), Instant::now());
        let missing = |joint: &str| Err(format!("joint `{joint}` is missing: a command names every commanded joint"));
        let mut said = Vec::new();
        // Two reasons in turn at 250 Hz for 3 s.
        for command in 0..750u32 {
            let now = start + Duration::from_millis(4) * command;
            if let Some(line) = refusals.said(now, missing(if command % 2 == 0 { "joint1" } else { "joint2" })) {
                said.push(line);
            }
        }
        assert_eq!(said.len(), 3, "{said:#?}");
        assert!(said[0].reason.contains("joint1") && said[1].reason.contains("joint2"), "{said:#?}");
        assert_eq!(said[1].held_back, 125, "joint2's refusals in joint1's second");
        assert!(said[1].to_string().ends_with("(125 refusals held back since the line before)"), "{}", said[1]);
    }

    #[test]
    fn a_refusal_between_two_of_another_lasting_one_is_said_once_its_second_is_over() {
        let (mut refusals, start) = (Refusals::default(), Instant::now());
        let at = |ms: u64| start + Duration::from_millis(ms);
        let over = || Err("joint `joint1`: past its limit".to_owned());
        assert_eq!(reason(refusals.said(at(0), Err(HELD.into()))).as_deref(), Some(HELD));
        assert_eq!(refusals.said(at(100), over()), None, "within the held line's second");
        assert_eq!(refusals.said(at(200), over()), None);
        assert_eq!(refusals.said(at(300), Err(HELD.into())), None, "the held one lasts again");
        let said = refusals.said(at(1000), Err(HELD.into())).expect("the second is over");
        assert_eq!((said.reason.as_str(), said.held_back), ("joint `joint1`: past its limit", 2));
        assert_eq!(reason(refusals.said(at(2000), Err(HELD.into()))).as_deref(), Some(HELD), "then the lasting one");
        assert_eq!(refusals.said(at(3000), Err(HELD.into())), None);
    }

    #[test]
    fn a_refusal_held_back_is_said_once_its_second_is_over_though_commands_then_get_through() {
        let (mut refusals, start) = (Refusals::default(), Instant::now());
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert!(refusals.said(at(0), Err(HELD.into())).is_some());
        assert_eq!(refusals.said(at(100), Err("joint `joint1`: past its limit".into())), None);
        assert_eq!(refusals.said(at(500), Ok(())), None, "within the held line's second");
        let said = refusals.said(at(1000), Ok(())).expect("the second is over");
        assert_eq!((said.reason.as_str(), said.held_back), ("joint `joint1`: past its limit", 1));
        assert_eq!(refusals.said(at(2000), Ok(())), None);
    }

    #[test]
    fn a_reason_is_shown_escaped_and_cut() {
        let said = Said { reason: format!("joint `a\nb\u{1b}[31m{}`", "x".repeat(1000)), held_back: 0 }.to_string();
        assert!(!said.contains('\n') && !said.contains('\u{1b}'), "{said}");
        assert!(said.ends_with("...") && said.chars().count() == 303, "{}", said.chars().count());
    }

    #[test]
    fn any_text_is_taken_without_a_panic() {
        let (mut refusals, mut now) = (Refusals::default(), Instant::now());
        for text in ["", "-", "+.", "1.", "é2.5", "²3.", "-1.2.3.", "joint `ü` 1e-3", "\u{0}9"] {
            now += SAID_AT_MOST_EVERY;
            assert!(refusals.said(now, Err(text.into())).is_some(), "{text:?}");
        }
    }
}
