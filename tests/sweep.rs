//! Sweeps: the grid of cases, the spread statistics, and runs on all cores that equal the same
//! runs one by one.

use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Trajectory;
use arm_hil::model::Robot;
use arm_hil::sim::sweep::{run_case, run_sweep, summarise, sweep_cases, Gains, Spread};
use arm_hil::sim::SilConfig;

/// A 5 degree arc, about 1.4 s: enough to tell runs apart, short enough to run many.
fn short_arc(robot: &Robot) -> Arc<Trajectory> {
    let spec = ArcSpec { to_deg: [70.0, -135.0], ..ArcSpec::default() };
    let waypoints = spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    Arc::new(Trajectory::with_robot_forearm(waypoints, robot).unwrap())
}

#[test]
fn the_cases_are_every_combination_with_each_gain_sets_seeds_together() {
    let cases = sweep_cases(&[1, 2, 3], &[600.0, 900.0], &[60.0], &[0.0, 4.0]);
    assert_eq!(cases.len(), 12);
    assert_eq!(cases[0].gains, Gains { kp: 600.0, kd: 60.0, ki: 0.0 });
    assert_eq!(cases.iter().take(3).map(|case| case.seed).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(cases[3].gains, Gains { kp: 600.0, kd: 60.0, ki: 4.0 });
    assert_eq!(cases[11].gains, Gains { kp: 900.0, kd: 60.0, ki: 4.0 });
}

#[test]
fn the_spread_is_mean_nearest_rank_p95_and_worst() {
    let spread = Spread::of((1..=100).map(f64::from)).unwrap();
    assert_eq!(spread, Spread { mean: 50.5, p95: 95.0, worst: 100.0 });
    assert_eq!(Spread::of([2.0]).unwrap(), Spread { mean: 2.0, p95: 2.0, worst: 2.0 });
    assert_eq!(Spread::of(std::iter::empty()), None);
}

#[test]
fn a_sweep_on_all_cores_equals_its_runs_one_by_one_in_order() {
    let robot = Robot::default();
    let trajectory = short_arc(&robot);
    let config = SilConfig::default();
    let cases = sweep_cases(&[1, 2, 3, 4], &[900.0], &[60.0], &[4.0]);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = run_sweep(&robot, &trajectory, &config, &cases, || {
        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(done.into_inner(), 4);
    for (case, result) in cases.iter().zip(&results) {
        assert_eq!(*result, run_case(&robot, &trajectory, &config, *case));
        assert!(result.failure.is_none() && result.steps > 1000);
    }
    assert_ne!(results[0].rms_error_m, results[1].rms_error_m, "seeds must give different noise");
    let groups = summarise(&results);
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].runs, groups[0].failed), (4, 0));
}

#[test]
fn a_run_that_cannot_hold_the_arm_is_reported_and_left_out_of_the_spread() {
    let robot = Robot::default();
    let trajectory = short_arc(&robot);
    let mut config = SilConfig::default();
    config.controller.torque_limit = 0.01;
    let results = run_sweep(&robot, &trajectory, &config, &sweep_cases(&[1, 2], &[900.0], &[60.0], &[4.0]), || ());
    assert!(results.iter().all(|result| result.failure.is_some()));
    let groups = summarise(&results);
    assert_eq!((groups[0].runs, groups[0].failed, groups[0].rms_error_m), (2, 2, None));
}
