//! What the command safety cases share: the dice, the hostile goals, and the book of goals that
//! checks every goal ends exactly once and ends right.

pub(crate) mod device;
pub(crate) mod parallel_arm;

use std::collections::BTreeMap;

use arm_hil::nodes::follower::goals::{ControllerState, GoalEvent};
use arm_hil::nodes::follower::spline::TrajectoryPoint;
use arm_hil::nodes::follower::{Goal, GoalLimits, JointTolerance, Outcome};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) const S: u64 = 1_000_000_000;

/// Runs `case` on every seed (or the one `ARM_HIL_SAFETY_SEED` names), naming the seed that fails.
pub(crate) fn cases(node: &str, case: impl Fn(u64)) {
    let seeds: Vec<u64> = match std::env::var("ARM_HIL_SAFETY_SEED").ok().and_then(|seed| seed.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let count = std::env::var("ARM_HIL_SAFETY_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
            (0..count).collect()
        }
    };
    for seed in seeds {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(seed)));
        if let Err(panic) = outcome {
            eprintln!("{node}: case {seed} failed; rerun it alone with ARM_HIL_SAFETY_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
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
/// make.
pub(crate) fn limits() -> GoalLimits {
    GoalLimits { max_points: 2_000, max_duration_s: 60.0 }
}

fn point(time_s: f64, positions: Vec<f64>) -> TrajectoryPoint {
    TrajectoryPoint { time_s, positions, velocities: Vec::new(), accelerations: Vec::new() }
}

/// A goal as a careless or hostile client sends it, for joints `names` at `actual` [rad] within
/// `lower`..`upper`, received at `now_ns`: most are ordinary moves a little way off, the rest
/// each break one rule (or none, at the edge of one).
pub(crate) fn hostile_goal(
    dice: &mut Dice,
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
    match dice.below(14) {
        // The far goal: its own position, two billion seconds away.
        0 => goal.points = vec![point(2e9, actual.to_vec())],
        // Tiny times between points.
        1 => goal.points = (1..=5).map(|k| point(k as f64 * 1e-9, near(dice, 0.01))).collect(),
        // A stamp in the past, up to 3 s, or in the future, up to 120 s.
        2 => {
            goal.stamp_ns = now_ns - dice.below(3 * S);
            goal.points = vec![point(dice.range(0.1, 4.0), near(dice, 0.1))];
        }
        3 => {
            goal.stamp_ns = now_ns + dice.below(120 * S);
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
        // Velocities and accelerations given, and tolerances of its own.
        10 => {
            let mut end = point(dice.range(1.0, 3.0), near(dice, 0.1));
            end.velocities = vec![0.0; joints];
            end.accelerations = vec![0.0; joints];
            goal.points = vec![end];
            goal.goal_tolerance = names
                .iter()
                .map(|name| (name.clone(), JointTolerance { position: dice.range(-0.1, 0.1), velocity: f64::NAN }))
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

/// Every goal a node took: running until it ends, and ending once.
#[derive(Default)]
pub(crate) struct GoalBook {
    running: BTreeMap<u64, Tolerance>,
    ended: Vec<u64>,
    next: u64,
    /// The node's default stopped velocity [rad/s].
    stopped: f64,
}

/// What a goal's success must show: its own tolerances, or the node's defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tolerance {
    Defaults,
    Own,
}

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

    /// The node took `handle`, replacing `replaced`.
    pub(crate) fn accepted(&mut self, handle: u64, goal: &Goal, replaced: Option<(u64, Outcome)>) {
        if let Some((replaced, outcome)) = replaced {
            assert!(matches!(outcome, Outcome::Canceled { .. }), "a replaced goal is cancelled: {outcome:?}");
            self.ended_once(replaced);
        }
        let tolerance = if goal.goal_tolerance.is_empty() { Tolerance::Defaults } else { Tolerance::Own };
        self.running.insert(handle, tolerance);
    }

    /// `handle` ended.
    pub(crate) fn ended_once(&mut self, handle: u64) {
        assert!(self.running.remove(&handle).is_some(), "goal {handle} ended, but it was not running (ended twice?)");
        self.ended.push(handle);
    }

    /// Goals' feedback and ends from a step whose controller state is `state`: a goal that
    /// succeeds does so within its goal tolerance and stopped (the node's defaults: 0.02 rad,
    /// and its stopped velocity).
    pub(crate) fn events(&mut self, events: Vec<GoalEvent<u64>>, state: Option<&ControllerState>) {
        for event in events {
            match event {
                GoalEvent::Feedback { goal, .. } => assert!(self.running.contains_key(&goal), "feedback to {goal}"),
                GoalEvent::Finished { goal, outcome } => {
                    let tolerance = self.running.get(&goal).copied();
                    if let (Outcome::Succeeded, Some(Tolerance::Defaults), Some(state)) = (&outcome, tolerance, state) {
                        for (error, velocity) in state.error.positions.iter().zip(&state.feedback.velocities) {
                            assert!(error.abs() <= 0.02 + 1e-9, "succeeded {error} rad from its goal");
                            assert!(velocity.abs() <= self.stopped + 1e-9, "succeeded moving at {velocity} rad/s");
                        }
                    }
                    self.ended_once(goal);
                }
            }
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

    /// At most one goal runs at a time.
    pub(crate) fn check(&self) {
        assert!(self.running.len() <= 1, "goals running at once: {:?}", self.running.keys());
    }
}
