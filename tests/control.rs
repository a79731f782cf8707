//! Trajectory validation, interpolation, the estimator and the CSV format.

use arm_hil::control::trajectory_csv::{read_waypoints, write_waypoints, CsvError};
use arm_hil::control::{
    PositionVelocityKalman, RangeBiasEstimator, ReferenceSampler, Trajectory, TrajectoryError, Waypoint, MAX_WAYPOINTS,
};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;

fn waypoint(t: f64, x: Vec3) -> Waypoint {
    Waypoint { t, x, ..Waypoint::default() }
}

fn reachable(t: f64) -> Waypoint {
    waypoint(t, Vec3::new(0.15, 0.0, 0.2) + Vec3::new(0.001, 0.0, 0.0) * t)
}

fn validate(waypoints: Vec<Waypoint>) -> Result<Trajectory, TrajectoryError> {
    Trajectory::with_robot_forearm(waypoints, &Robot::default())
}

#[test]
fn trajectory_validation_names_the_first_bad_waypoint() {
    let mut non_finite: Vec<_> = (0..5).map(|i| reachable(i as f64)).collect();
    non_finite[3].xd.y = f64::NAN;
    non_finite[4].x.x = f64::INFINITY;
    assert_eq!(validate(non_finite).unwrap_err(), TrajectoryError::NonFinite { index: 3 });

    let mut repeated_time: Vec<_> = (0..5).map(|i| reachable(i as f64)).collect();
    repeated_time[2].t = 1.0;
    let error = validate(repeated_time).unwrap_err();
    assert_eq!(error, TrajectoryError::TimeNotIncreasing { index: 2, t: 1.0, previous_t: 1.0 });
    assert_eq!(error.index(), Some(2));

    let mut unreachable: Vec<_> = (0..5).map(|i| reachable(i as f64)).collect();
    unreachable[1].x = Vec3::new(5.0, 5.0, 5.0);
    let error = validate(unreachable).unwrap_err();
    assert!(matches!(error, TrajectoryError::Unreachable { index: 1, .. }));
    assert!(
        error.to_string().starts_with("waypoint 1 is unreachable: point (5.000000, 5.000000, 5.000000) m"),
        "{error}"
    );
}

#[test]
fn trajectory_size_is_between_one_and_a_million() {
    assert_eq!(validate(vec![]).unwrap_err(), TrajectoryError::Empty);
    let too_many = vec![reachable(0.0); MAX_WAYPOINTS + 1];
    assert_eq!(validate(too_many).unwrap_err(), TrajectoryError::TooManyWaypoints { count: MAX_WAYPOINTS + 1 });
    assert!(validate(vec![reachable(0.0)]).is_ok());
}

#[test]
fn quintic_interpolation_passes_through_every_waypoint_with_its_derivatives() {
    let robot = Robot::default();
    let start = Vec3::new(0.15, 0.0, 0.2);
    let waypoints = vec![
        Waypoint { t: 0.0, x: start, xd: Vec3::new(0.01, 0.0, 0.0), xdd: Vec3::new(0.0, 0.02, 0.0) },
        Waypoint { t: 0.5, x: start + Vec3::new(0.005, 0.002, 0.0), xd: Vec3::new(0.0, 0.01, 0.0), xdd: Vec3::zeros() },
        Waypoint { t: 1.5, x: start + Vec3::new(0.0, 0.01, 0.003), xd: Vec3::zeros(), xdd: Vec3::new(0.0, 0.0, -0.01) },
    ];
    let trajectory = Trajectory::with_robot_forearm(waypoints.clone(), &robot).unwrap();
    let mut sampler = ReferenceSampler::new();
    for w in &waypoints[..2] {
        let reference = sampler.sample(&trajectory, w.t + 1e-12);
        assert!((reference.x - w.x).amax() < 1e-12);
        assert!((reference.xd - w.xd).amax() < 1e-9);
        assert!((reference.xdd - w.xdd).amax() < 1e-6);
    }
    // Approaching a waypoint from the left meets its velocity and acceleration: C2 continuity.
    let left = sampler.sample(&trajectory, 0.5 - 1e-9);
    assert!((left.xd - waypoints[1].xd).amax() < 1e-7 && (left.xdd - waypoints[1].xdd).amax() < 1e-6);
    // Sampling backwards in time gives the same answers as forwards.
    let forward = sampler.sample(&trajectory, 1.2);
    let backward = sampler.sample(&trajectory, 0.3);
    assert_eq!(ReferenceSampler::new().sample(&trajectory, 1.2), forward);
    assert_eq!(ReferenceSampler::new().sample(&trajectory, 0.3), backward);
    // Outside the trajectory the end points are held at rest.
    let after = sampler.sample(&trajectory, 9.0);
    assert_eq!((after.x, after.xd, after.xdd), (waypoints[2].x, Vec3::zeros(), Vec3::zeros()));
}

#[test]
fn the_kalman_filter_converges_on_a_constant_velocity_motion() {
    let velocity = Vec3::new(0.01, -0.02, 0.005);
    let mut filter = PositionVelocityKalman::new(Vec3::zeros(), 1.0, 1e-3);
    for k in 1..=3000 {
        filter.predict(1e-3, &Vec3::zeros());
        filter.correct(&(velocity * (k as f64 * 1e-3)));
    }
    let estimate = filter.estimate();
    assert!((estimate.x - velocity * 3.0).amax() < 1e-6);
    assert!((estimate.v - velocity).amax() < 1e-4);
}

#[test]
fn the_range_bias_estimator_converges_to_the_mean_offset() {
    let mut estimator = RangeBiasEstimator::new(1e-3, 3e-4, 1e-4);
    for k in 0..2000 {
        let wobble = if k % 2 == 0 { 2e-4 } else { -2e-4 };
        estimator.update(0.45 + 0.004 + wobble, 0.45);
    }
    assert!((estimator.bias() - 0.004).abs() < 2e-4, "bias {}", estimator.bias());
}

#[test]
fn trajectory_csv_round_trips_and_reports_bad_rows_by_line() {
    let waypoints = vec![reachable(0.0), Waypoint { xd: Vec3::new(0.1, 0.2, 0.3), ..reachable(0.5) }];
    let mut bytes = Vec::new();
    write_waypoints(&mut bytes, &waypoints).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.starts_with("t,x,y,z,xd,yd,zd,xdd,ydd,zdd\n"), "{text}");
    assert_eq!(read_waypoints(bytes.as_slice()).unwrap(), waypoints);

    let bad_header = read_waypoints("t,x,y\n0,0,0\n".as_bytes()).unwrap_err();
    assert!(matches!(bad_header, CsvError::BadHeader { .. }), "{bad_header}");
    let bad_row =
        read_waypoints("t,x,y,z,xd,yd,zd,xdd,ydd,zdd\n0,0,0,0,0,0,0,0,0,0\n1,0,zero,0,0,0,0,0,0,0\n".as_bytes())
            .unwrap_err();
    assert!(matches!(bad_row, CsvError::BadRow { line: 3, .. }), "{bad_row}");
}

/// The worst offset from the forearm's sphere [m] of a joint-space move (linear in the joint
/// angles, as a FollowJointTrajectory goal of positions alone interpolates) between two poses of
/// the built-in arc `gap_s` apart, over every start along it.
fn worst_joint_space_sag(gap_s: f64) -> f64 {
    use arm_hil::control::arc::ArcSpec;
    let robot = Robot::default();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let at = |t: f64| arc.iter().find(|w| w.t >= t).unwrap_or(&arc[arc.len() - 1]).x;
    let mut worst: f64 = 0.0;
    let mut from = 0.0;
    while from + gap_s <= arc[arc.len() - 1].t {
        let (a, b) = (at(from), at(from + gap_s));
        let theta_a = robot.inverse_kinematics(&a, None).unwrap();
        let theta_b = robot.inverse_kinematics(&b, Some(&theta_a)).unwrap();
        let mut p = a;
        for k in 0..=100 {
            p = robot.forward_kinematics(&theta_a.lerp(&theta_b, k as f64 / 100.0), &p).unwrap();
            worst = worst.max(robot.forearm_sphere_offset(&p).abs());
        }
        from += 0.1;
    }
    worst
}

#[test]
fn joint_space_moves_between_poses_of_the_arc_sag_off_the_forearms_sphere_as_docs_hil_md_says() {
    // docs/hil.md, "The forearm's sphere": 0.7, 2.9, 11 and 23 mm for poses 0.5, 1, 2 and 3 s apart.
    for (gap_s, sag_mm) in [(0.5, 0.7), (1.0, 2.9), (2.0, 11.0), (3.0, 23.0)] {
        let worst_mm = worst_joint_space_sag(gap_s) * 1e3;
        assert!((worst_mm - sag_mm).abs() < 0.1 * sag_mm, "{gap_s} s apart: {worst_mm:.2} mm");
    }
}
