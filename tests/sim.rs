//! The SIL engine: energy conservation of the plant, tracking on the default arc, the frame
//! stream's shape, ideal torques, and clean stops.

use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Reference, ReferenceSampler, Trajectory, Waypoint};
use arm_hil::model::math::Vec3;
use arm_hil::model::{Robot, RobotParams};
use arm_hil::sim::{
    plant_state, BogackiShampine, IdealTorques, IntegratorConfig, OdeSystem, Plant, SilConfig, SimError, Simulation,
    StepOutcome,
};

/// Integrates the plant with zero torque for `duration` [s]; returns the largest relative
/// deviation of the total energy from its initial value.
fn free_motion_energy_drift(robot: Robot, p: Vec3, p_dot: Vec3, duration: f64) -> f64 {
    let motion = robot.motion_from_task(&p, &p_dot, None, 0.0).unwrap();
    let mut plant = Plant::new(robot, &motion.theta, &motion.theta_dot, &p).unwrap();
    let mut integrator = BogackiShampine::<6>::new(IntegratorConfig::default());
    let (mut t, mut y) = (0.0, plant_state(&motion.theta, &motion.theta_dot));
    let initial = plant.energy();
    let mut worst: f64 = 0.0;
    while t < duration {
        if let StepOutcome::Accepted { t: t_next, y: y_next, .. } =
            integrator.step(&mut plant, t, &y, duration - t).unwrap()
        {
            (t, y) = (t_next, y_next);
            plant.accept(&y);
            worst = worst.max(((plant.energy() - initial) / initial).abs());
        }
    }
    worst
}

/// The linear oscillator y'' = -y as a first-order system: y(t) = (cos t, -sin t) from (1, 0).
struct Oscillator;

impl OdeSystem<2> for Oscillator {
    type Error = ();
    fn derivative(&mut self, _t: f64, y: &nalgebra::Vector2<f64>) -> Result<nalgebra::Vector2<f64>, ()> {
        Ok(nalgebra::Vector2::new(y[1], -y[0]))
    }
}

fn default_arc(robot: &Robot) -> Arc<Trajectory> {
    let waypoints = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    Arc::new(Trajectory::with_robot_forearm(waypoints, robot).unwrap())
}

#[test]
fn energy_is_conserved_over_one_second_of_free_motion() {
    // Without gravity the arm coasts for the whole second, exercising M and the velocity terms.
    let weightless = Robot::new(RobotParams { gravity: 0.0, ..RobotParams::default() }).unwrap();
    let drift = free_motion_energy_drift(weightless, Vec3::new(0.1, 0.15, 0.15), Vec3::new(0.05, -0.05, 0.0), 1.0);
    assert!(drift < 1e-5, "relative energy drift {drift:e}");
}

#[test]
fn energy_is_conserved_while_the_arm_falls_under_gravity() {
    // With gravity and no torque the arm falls into a singular configuration within about
    // 0.2 s, so the fall is checked over its first 0.15 s.
    let drift = free_motion_energy_drift(Robot::default(), Vec3::new(0.15, 0.0, 0.2), Vec3::zeros(), 0.15);
    assert!(drift < 1e-5, "relative energy drift {drift:e}");
}

#[test]
fn gravity_torques_are_the_gradient_of_the_potential_energy() {
    let robot = Robot::default();
    let p = Vec3::new(0.15, 0.0, 0.2);
    let theta = robot.inverse_kinematics(&p, None).unwrap();
    let potential = |theta: &Vec3| {
        let motion = robot.motion_from_joints(theta, &Vec3::zeros(), &p).unwrap();
        robot.potential_energy(&motion)
    };
    let gravity = robot.gravity_torques(&robot.motion_from_joints(&theta, &Vec3::zeros(), &p).unwrap());
    let h = 1e-6;
    for i in 0..3 {
        let step = Vec3::ith(i, h);
        let gradient = (potential(&(theta + step)) - potential(&(theta - step))) / (2.0 * h);
        assert!((gradient - gravity[i]).abs() < 1e-6, "joint {i}: dV/dth = {gradient}, G = {}", gravity[i]);
    }
}

#[test]
fn the_default_arc_is_tracked_with_rms_error_below_one_millimetre() {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let mut simulation = Simulation::new(robot, trajectory.clone(), &SilConfig::default()).unwrap();
    let mut previous_t = trajectory.start_time();
    let mut last = None;
    for frame in &mut simulation {
        let frame = frame.unwrap();
        assert!(frame.t > previous_t);
        previous_t = frame.t;
        last = Some(frame);
    }
    assert_eq!(last.unwrap().t, trajectory.end_time());
    let stats = simulation.stats();
    assert!(stats.rms_error_m() < 1e-3, "RMS tracking error {} m", stats.rms_error_m());
    assert!(!stats.capped);
    assert_eq!(stats.frames, stats.steps);
}

#[test]
fn equal_seeds_give_equal_runs() {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let mut config = SilConfig::default();
    config.run.frame_cap = 5_000;
    let run = || {
        let simulation = Simulation::new(robot.clone(), trajectory.clone(), &config).unwrap();
        simulation.map(|frame| frame.unwrap()).last().unwrap()
    };
    assert_eq!(run(), run());
}

#[test]
fn the_frame_cap_ends_a_run_early_and_cleanly() {
    let robot = Robot::default();
    let mut config = SilConfig::default();
    config.run.frame_cap = 1_000;
    let mut simulation = Simulation::new(robot.clone(), default_arc(&robot), &config).unwrap();
    let frames = (&mut simulation).inspect(|frame| assert!(frame.is_ok())).count();
    assert_eq!(frames, 1_000);
    assert!(simulation.stats().capped);
    assert!(simulation.next().is_none());
}

#[test]
fn a_run_that_cannot_hold_the_arm_stops_with_when_and_why() {
    let robot = Robot::default();
    let mut config = SilConfig::default();
    config.controller.torque_limit = 0.01;
    let simulation = Simulation::new(robot.clone(), default_arc(&robot), &config).unwrap();
    let error = simulation.filter_map(Result::err).next().expect("the run must fail");
    let message = error.to_string();
    assert!(message.starts_with("diverged at t = ") || message.starts_with("at t = "), "{message}");
    if let SimError::Diverged { t, error_m, threshold_m } = error {
        assert!(t > 0.0 && error_m > threshold_m);
    }
}

#[test]
fn a_steered_run_goes_on_from_the_moving_arm_on_the_new_trajectorys_time() {
    let robot = Robot::default();
    let config = SilConfig::default();
    let mut simulation = Simulation::new(robot.clone(), default_arc(&robot), &config).unwrap();
    let before = (&mut simulation).map(Result::unwrap).find(|frame| frame.t >= 1.0).unwrap();
    assert!(before.x_dot.norm() > 0.01, "the arm moves along the arc");
    // Hold where the controller's reference is, from t = 0 of the new trajectory.
    let still = |t| Waypoint { t, x: before.x_ref, xd: Vec3::zeros(), xdd: Vec3::zeros() };
    let hold = Arc::new(Trajectory::with_robot_forearm(vec![still(0.0), still(0.5)], &robot).unwrap());
    simulation.steer(hold.clone());

    let frames: Vec<_> = (&mut simulation).map(Result::unwrap).collect();
    let first = frames[0];
    assert!(first.t > 0.0 && first.t < 0.01, "time starts again from the trajectory's start: {}", first.t);
    assert!((first.x - before.x).norm() < 1e-3, "no jump: {} from {}", first.x, before.x);
    assert!((first.x_dot - before.x_dot).norm() < 0.05, "the arm still moves: {}", first.x_dot);
    assert_eq!(first.x_ref, before.x_ref, "the reference is the new trajectory's");
    let last = frames.last().unwrap();
    assert!((last.t - 0.5).abs() < 1e-9 && (last.x - before.x_ref).norm() < 1e-3, "it ends held at {}", last.x);
    assert_eq!(simulation.stats().frames, frames.len() as u64, "the figures are the new run's");

    // A fresh run of the same trajectory starts the arm at rest.
    let fresh = Simulation::new(robot.clone(), hold, &config).unwrap().next().unwrap().unwrap();
    assert!(fresh.x_dot.norm() < 1e-3);
}

#[test]
fn a_run_steered_onto_the_trajectory_it_follows_goes_on_as_if_not_steered() {
    // A FollowJointTrajectory goal taken mid-motion, or each command of a ros2_control stream,
    // steers the simulation into a trajectory that starts where the controller's reference is,
    // going.
    let robot = Robot::default();
    let config = SilConfig::default();
    let period_s = 1.0 / config.controller.rate_hz;
    let arc = default_arc(&robot);
    let mut simulation = Simulation::new(robot.clone(), arc.clone(), &config).unwrap();
    // While the arc speeds up, so that its reference's acceleration counts as well as its speed;
    // on a control tick, whose torque is the new trajectory's first.
    let before = (&mut simulation).map(Result::unwrap).find(|frame| frame.t >= 0.25).unwrap();
    assert!((before.t / period_s - (before.t / period_s).round()).abs() < 1e-6, "a tick falls at {}", before.t);
    let Reference { x, xd, xdd } = ReferenceSampler::new().sample(&arc, before.t);
    assert!(xd.norm() > 0.01 && xdd.norm() > 0.05, "the reference speeds up: {} m/s, {} m/s^2", xd.norm(), xdd.norm());
    let rest = arc.waypoints().iter().filter(|waypoint| waypoint.t > before.t);
    let waypoints = std::iter::once(Waypoint { t: 0.0, x, xd, xdd })
        .chain(rest.map(|waypoint| Waypoint { t: waypoint.t - before.t, ..*waypoint }))
        .collect();
    let mut steered = simulation.clone();
    steered.steer(Arc::new(Trajectory::with_robot_forearm(waypoints, &robot).unwrap()));

    // The torque of each control tick for 50 ms, as the frames hold it, in both runs: a
    // reference held at rest for the first tick would brake the arm (0.8 N m here), one
    // without its acceleration hold it back (0.05 N m).
    let ticks = |frames: &mut dyn Iterator<Item = (f64, Vec3)>| -> Vec<Vec3> {
        let mut torques = Vec::new();
        for (t, tau) in frames.take_while(|(t, _)| *t <= 0.05 + 1e-9) {
            let tick = ((t - 1e-9) / period_s).floor() as usize;
            if tick == torques.len() {
                torques.push(tau);
            }
        }
        torques
    };
    let going_on =
        ticks(&mut (&mut simulation).map(|frame| frame.unwrap()).map(|frame| (frame.t - before.t, frame.tau)));
    let after_steer = ticks(&mut steered.map(|frame| frame.unwrap()).map(|frame| (frame.t, frame.tau)));
    assert_eq!(going_on.len(), 50);
    assert_eq!(after_steer.len(), 50);
    for (tick, (steered, not)) in after_steer.iter().zip(&going_on).enumerate() {
        assert!((steered - not).amax() < 1e-3, "tick {tick}: torque {steered} steered, {not} not");
    }
}

#[test]
fn a_run_started_afresh_starts_the_arm_at_rest_whatever_its_first_point_says() {
    // sil_node's run loop starts a run afresh after a stop or a failure: a move planned before
    // the stop was seen may start at the speed the arm had.
    let robot = Robot::default();
    let p = Vec3::new(0.15, 0.0, 0.2);
    let going = Waypoint { t: 0.0, x: p, xd: Vec3::new(0.05, 0.0, 0.0), xdd: Vec3::zeros() };
    let there = Waypoint { t: 0.5, x: p + Vec3::new(0.01, 0.0, 0.0), ..Waypoint::default() };
    let trajectory = Arc::new(Trajectory::with_robot_forearm(vec![going, there], &robot).unwrap());
    let simulation = Simulation::new(robot, trajectory, &SilConfig::default()).unwrap();
    let first = simulation.map(Result::unwrap).next().unwrap();
    assert!(first.x_dot.norm() < 1e-3, "the arm set off at {} m/s", first.x_dot.norm());
}

#[test]
fn ideal_torques_hold_the_arm_at_rest_against_gravity() {
    let robot = Robot::default();
    let p = Vec3::new(0.15, 0.0, 0.2);
    let waypoint = Waypoint { t: 0.0, x: p, ..Waypoint::default() };
    let trajectory = Trajectory::with_robot_forearm(vec![waypoint], &robot).unwrap();
    let ideal = IdealTorques::new(&robot, &trajectory).next().unwrap().unwrap();
    let motion = robot.motion_from_task(&p, &Vec3::zeros(), None, 0.0).unwrap();
    assert_eq!(ideal.theta, motion.theta);
    assert!((ideal.tau - robot.gravity_torques(&motion)).amax() < 1e-12);
}

#[test]
fn ideal_torques_reproduce_each_waypoints_acceleration() {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let mut previous = None;
    for (waypoint, ideal) in trajectory.waypoints().iter().zip(IdealTorques::new(&robot, &trajectory)).step_by(97) {
        let ideal = ideal.unwrap();
        let motion = robot.motion_from_joints(&ideal.theta, &ideal.theta_dot, &waypoint.x).unwrap();
        let theta_ddot = robot.forward_dynamics(&motion, &ideal.tau).unwrap();
        let p_ddot = motion.velocity_map * theta_ddot + motion.acceleration_bias;
        assert!((motion.p - waypoint.x).amax() < 1e-9);
        assert!((p_ddot - waypoint.xdd).amax() < 1e-9);
        previous = Some(ideal.t);
    }
    assert!(previous.is_some());
}

#[test]
fn the_integrator_meets_its_tolerance_on_a_linear_oscillator() {
    let config = IntegratorConfig { rtol: 1e-10, atol: 1e-12, dt_max: 1e-2, ..IntegratorConfig::default() };
    let mut integrator = BogackiShampine::<2>::new(config);
    let (mut t, mut y) = (0.0, nalgebra::Vector2::new(1.0, 0.0));
    while t < 1.0 {
        if let StepOutcome::Accepted { t: t_next, y: y_next, .. } =
            integrator.step(&mut Oscillator, t, &y, 1.0 - t).unwrap()
        {
            (t, y) = (t_next, y_next);
        }
    }
    assert_eq!(t, 1.0);
    assert!((y[0] - 1f64.cos()).abs() < 1e-8 && (y[1] + 1f64.sin()).abs() < 1e-8, "{y}");
}

#[test]
fn dense_output_is_third_order_inside_a_step() {
    // One step of h from y(0) = (1, 0); the interpolant's worst error at the step's midpoint
    // falls like h^4 (locally third order), so halving h divides it by about 16.
    let midpoint_error = |h: f64| {
        let config = IntegratorConfig { dt0: h, dt_max: h, rtol: 1.0, atol: 1.0, ..IntegratorConfig::default() };
        let mut integrator = BogackiShampine::<2>::new(config);
        let Ok(StepOutcome::Accepted { dense, .. }) =
            integrator.step(&mut Oscillator, 0.0, &nalgebra::Vector2::new(1.0, 0.0), h)
        else {
            panic!("a loose tolerance accepts the step")
        };
        let y = dense.at(h / 2.0);
        (y[0] - (h / 2.0).cos()).abs().max((y[1] + (h / 2.0).sin()).abs())
    };
    let ratio = midpoint_error(0.1) / midpoint_error(0.05);
    assert!((12.0..20.0).contains(&ratio), "error ratio {ratio} when h halves");
}

#[test]
fn a_frame_rate_puts_frames_on_a_uniform_grid_with_the_same_statistics() {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let per_step = SilConfig::default();
    let mut gridded = SilConfig::default();
    gridded.run.frame_rate_hz = 250.0;
    let mut stepped = Simulation::new(robot.clone(), trajectory.clone(), &per_step).unwrap();
    let step_frames: Vec<_> = (&mut stepped).map(Result::unwrap).collect();
    let mut resampled = Simulation::new(robot.clone(), trajectory.clone(), &gridded).unwrap();
    let grid_frames: Vec<_> = (&mut resampled).map(Result::unwrap).collect();

    let duration = trajectory.end_time() - trajectory.start_time();
    assert_eq!(grid_frames.len(), (duration * 250.0).floor() as usize);
    for (k, frame) in grid_frames.iter().enumerate() {
        assert!(
            (frame.t - (trajectory.start_time() + (k + 1) as f64 / 250.0)).abs() < 1e-9,
            "frame {k} at {}",
            frame.t
        );
    }
    // The grid only resamples: the run and its statistics are the same.
    assert_eq!(resampled.stats().steps, stepped.stats().steps);
    assert_eq!(resampled.stats().rms_error_m(), stepped.stats().rms_error_m());
    // Every fourth tick is a grid point and ends a step, where both frames are the same state;
    // between, the interpolated frames follow the steps' frames closely.
    for frame in &grid_frames {
        let after = step_frames.partition_point(|step| step.t < frame.t - 1e-12);
        let nearest = &step_frames[after];
        if (nearest.t - frame.t).abs() < 1e-12 {
            assert_eq!(nearest.x, frame.x);
        }
        assert!((nearest.x - frame.x).norm() < 1e-4, "at t = {}", frame.t);
    }
}
