//! What the command safety state machines share: their configuration, the dice a transition's
//! seed drives, the hostile goals, and the book of goals that checks every goal ends exactly
//! once, ends right, and ends within its bound.

pub(crate) mod device;
pub(crate) mod parallel_arm;

use std::collections::BTreeMap;

use arm_hil::nodes::follower::goals::{ControllerState, GoalEvent};
use arm_hil::nodes::follower::spline::TrajectoryPoint;
use arm_hil::nodes::follower::{Goal, GoalLimits, JointTolerance, Outcome};
use proptest::test_runner::{Config, RngSeed};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) const S: u64 = 1_000_000_000;

/// The runner's settings: `ARM_HIL_SAFETY_CASES` cases a node (default 1000), from a fixed seed
/// so that every run of `cargo test` tries the same cases (proptest's `PROPTEST_RNG_SEED` picks
/// another). A failure shrinks to the shortest sequence of transitions that still fails and
/// prints it.
pub(crate) fn config() -> Config {
    let cases = std::env::var("ARM_HIL_SAFETY_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let rng_seed = match std::env::var("PROPTEST_RNG_SEED") {
        Ok(_) => Config::default().rng_seed,
        Err(_) => RngSeed::Fixed(0x5afe),
    };
    Config { cases, rng_seed, failure_persistence: None, ..Config::default() }
}

/// A seeded source of choices.
pub(crate) struct Dice(ChaCha8Rng);

impl Dice {
    pub(crate) fn new(seed: u64) -> Dice {
        Dice(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(crate) fn range(&mut self, from: f64, to: f64) -> f64 {
        from + (to - from) * self.unit()
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The goal limits every case's nodes run with: small enough that a goal past them is cheap to
/// make, and that a case runs long enough for a goal to reach its bound.
pub(crate) fn limits() -> GoalLimits {
    GoalLimits { max_points: 2_000, max_duration_s: 8.0 }
}

/// How many kinds of goal [`hostile_goal`] makes.
pub(crate) const GOAL_RECIPES: u8 = 14;

fn point(time_s: f64, positions: Vec<f64>) -> TrajectoryPoint {
    TrajectoryPoint { time_s, positions, velocities: Vec::new(), accelerations: Vec::new() }
}

/// A goal as a careless or hostile client sends it, for joints `names` at `actual` [rad] within
/// `lower`..`upper`, received at `now_ns`: `recipe` (below [`GOAL_RECIPES`]) picks its kind, from
/// those that each break one rule (or none, at the edge of one) to ordinary moves a little way
/// off, the most common.
pub(crate) fn hostile_goal(
    dice: &mut Dice,
    recipe: u8,
    names: &[String],
    actual: &[f64],
    bounds: (&[f64], &[f64]),
    now_ns: u64,
) -> Goal {
    let joints = names.len();
    let near = |dice: &mut Dice, reach: f64| -> Vec<f64> {
        actual
            .iter()
            .zip(bounds.0.iter().zip(bounds.1))
            .map(|(a, (lower, upper))| (a + dice.range(-reach, reach)).clamp(*lower, *upper))
            .collect()
    };
    let mut goal = Goal { joint_names: names.to_vec(), ..Goal::default() };
    match recipe {
        // The far goal: its own position, two billion seconds away.
        0 => goal.points = vec![point(2e9, actual.to_vec())],
        // Tiny times between points.
        1 => goal.points = (1..=5).map(|k| point(k as f64 * 1e-9, near(dice, 0.01))).collect(),
        // A stamp in the past, up to 3 s, or in the future, up to 12 s.
        2 => {
            goal.stamp_ns = now_ns.saturating_sub(dice.below(3 * S)).max(1);
            goal.points = vec![point(dice.range(0.1, 4.0), near(dice, 0.1))];
        }
        3 => {
            goal.stamp_ns = now_ns + dice.below(12 * S);
            goal.points = vec![point(dice.range(0.1, 2.0), near(dice, 0.1))];
        }
        // A value that is not finite.
        4 => {
            let mut positions = near(dice, 0.1);
            positions[dice.below(joints as u64) as usize] = [f64::NAN, f64::INFINITY][dice.below(2) as usize];
            goal.points = vec![point(1.0, positions)];
        }
        // Past the joints' limits, or far across them.
        5 => {
            let mut positions = near(dice, 0.1);
            let joint = dice.below(joints as u64) as usize;
            positions[joint] = bounds.1[joint] + dice.range(1e-6, 1.0);
            goal.points = vec![point(2.0, positions)];
        }
        6 => goal.points = vec![point(dice.range(0.5, 3.0), near(dice, 3.0))],
        // More points than the limits allow (rarely: they cost the test), or many within.
        7 if dice.chance(0.1) => {
            let count = limits().max_points as usize + 1 + dice.below(20_000) as usize;
            goal.points = (1..=count).map(|k| point(k as f64 * 1e-3, actual.to_vec())).collect();
        }
        7 => goal.points = (1..=1_500).map(|k| point(k as f64 * 2e-3, near(dice, 0.005))).collect(),
        // Joints named wrong: unknown, missing, twice, a great many.
        8 => {
            goal.points = vec![point(1.0, actual.to_vec())];
            match dice.below(4) {
                0 => goal.joint_names[0] = "wrist".into(),
                1 => {
                    goal.joint_names.pop();
                    goal.points[0].positions.pop();
                }
                2 => goal.joint_names[joints - 1] = goal.joint_names[0].clone(),
                _ => goal.joint_names = (0..100_000).map(|k| format!("j{k}")).collect(),
            }
        }
        // Too fast: the whole way in a millisecond.
        9 => goal.points = vec![point(1e-3, near(dice, 0.5))],
        // Velocities and accelerations given, and tolerances of its own (some negative: none).
        10 => {
            let mut end = point(dice.range(1.0, 3.0), near(dice, 0.1));
            end.velocities = vec![0.0; joints];
            end.accelerations = vec![0.0; joints];
            goal.points = vec![end];
            goal.goal_tolerance = names
                .iter()
                .map(|name| {
                    let tolerance =
                        JointTolerance { position: dice.range(-0.02, 0.1), velocity: dice.range(-0.01, 0.05) };
                    (name.clone(), tolerance)
                })
                .collect();
        }
        // Ordinary moves: one to four points a little way off, a second or so apart.
        _ => {
            let mut time = 0.0;
            goal.points = (0..1 + dice.below(4))
                .map(|_| {
                    time += dice.range(0.3, 1.5);
                    point(time, near(dice, 0.15))
                })
                .collect();
        }
    }
    goal
}

/// Every goal a node took: running until it ends, ending once, and within its bound.
#[derive(Default)]
pub(crate) struct GoalBook {
    /// Each goal running: what its success must show, and when it was taken [ns].
    running: BTreeMap<u64, (Tolerance, u64)>,
    next: u64,
    /// The node's default stopped velocity [rad/s].
    stopped: f64,
}

/// What a goal's success must show: the node's default tolerances, or the goal's own per joint
/// in the device's order.
#[derive(Debug, Clone)]
pub(crate) enum Tolerance {
    Defaults,
    Own(Vec<JointTolerance>),
}

/// The node's default goal tolerance [rad].
const DEFAULT_GOAL_RAD: f64 = 0.02;

impl GoalBook {
    /// The goals of a node that takes joints below `stopped` [rad/s] as stopped.
    pub(crate) fn stopped_below(stopped: f64) -> GoalBook {
        GoalBook { stopped, ..GoalBook::default() }
    }

    /// A handle for the next goal.
    pub(crate) fn handle(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The node took `handle` at `now_ns`, replacing `replaced`. `goal` names the device's
    /// joints in its order, if it has tolerances of its own.
    pub(crate) fn accepted(&mut self, handle: u64, goal: &Goal, replaced: Option<(u64, Outcome)>, now_ns: u64) {
        if let Some((replaced, outcome)) = replaced {
            assert!(matches!(outcome, Outcome::Canceled { .. }), "a replaced goal is cancelled: {outcome:?}");
            self.ended_once(replaced);
        }
        let tolerance = match goal.goal_tolerance.is_empty() {
            true => Tolerance::Defaults,
            false => Tolerance::Own(goal.goal_tolerance.iter().map(|(_, tolerance)| *tolerance).collect()),
        };
        self.running.insert(handle, (tolerance, now_ns));
    }

    /// `handle` ended.
    pub(crate) fn ended_once(&mut self, handle: u64) {
        assert!(self.running.remove(&handle).is_some(), "goal {handle} ended, but it was not running (ended twice?)");
    }

    /// Goals' feedback and ends from a step whose controller state is `state`: a goal that
    /// succeeds does so within its goal tolerance and stopped (0 takes the node's default, a
    /// negative tolerance checks nothing).
    pub(crate) fn events(&mut self, events: Vec<GoalEvent<u64>>, state: Option<&ControllerState>) {
        for event in events {
            match event {
                GoalEvent::Feedback { goal, .. } => assert!(self.running.contains_key(&goal), "feedback to {goal}"),
                GoalEvent::Finished { goal, outcome } => {
                    if let (Outcome::Succeeded, Some((tolerance, _)), Some(state)) =
                        (&outcome, self.running.get(&goal), state)
                    {
                        self.check_success(tolerance, state);
                    }
                    self.ended_once(goal);
                }
            }
        }
    }

    fn check_success(&self, tolerance: &Tolerance, state: &ControllerState) {
        let joints = state.error.positions.iter().zip(&state.feedback.velocities).enumerate();
        for (joint, (error, velocity)) in joints {
            let own = match tolerance {
                Tolerance::Defaults => JointTolerance::default(),
                Tolerance::Own(own) => own[joint],
            };
            let bound = |own: f64, default: f64| match own {
                own if own < 0.0 => f64::INFINITY,
                own if own > 0.0 => own,
                _ => default,
            };
            let (position, speed) = (bound(own.position, DEFAULT_GOAL_RAD), bound(own.velocity, self.stopped));
            assert!(error.abs() <= position + 1e-9, "succeeded {error} rad from its goal (tolerance {position})");
            assert!(velocity.abs() <= speed + 1e-9, "succeeded moving at {velocity} rad/s (tolerance {speed})");
        }
    }

    /// Whether any goal runs.
    pub(crate) fn any_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// The goal running, if one is.
    pub(crate) fn running(&self) -> Option<u64> {
        self.running.keys().next().copied()
    }

    /// At most one goal runs at a time, and none after its bound: the goal limits' duration
    /// from its receipt, and `slack_ns` for the node's step to see it, at `now_ns`.
    pub(crate) fn check(&self, now_ns: u64, slack_ns: u64) {
        assert!(self.running.len() <= 1, "goals running at once: {:?}", self.running.keys());
        let bound_ns = (limits().max_duration_s * 1e9) as u64 + slack_ns;
        for (goal, (_, taken_ns)) in &self.running {
            let age_s = now_ns.saturating_sub(*taken_ns) as f64 * 1e-9;
            assert!(now_ns <= taken_ns + bound_ns, "goal {goal} still runs {age_s:.3} s after its receipt");
        }
    }
}
