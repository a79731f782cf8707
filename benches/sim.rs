//! SIL cost: one dynamics evaluation, one accepted integrator step (dynamics + controller +
//! integrator, as the run does them), and the whole default arc.
//!
//! Run with `cargo bench --bench sim`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Trajectory;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::sim::{SilConfig, Simulation};

fn default_arc(robot: &Robot) -> Arc<Trajectory> {
    let waypoints =
        ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).expect("the default arc is valid");
    Arc::new(Trajectory::with_robot_forearm(waypoints, robot).expect("the default arc is reachable"))
}

fn dynamics_evaluation(c: &mut Criterion) {
    let robot = Robot::default();
    let p = Vec3::new(0.15, 0.0, 0.2);
    let motion = robot.motion_from_task(&p, &Vec3::new(0.02, -0.01, 0.01), None, 0.0).expect("reachable");
    let tau = Vec3::new(1.0, -1.0, 3.0);
    c.bench_function("dynamics evaluation (FK, Jacobians, M, c, G, forward dynamics)", |b| {
        b.iter(|| {
            let motion = robot.motion_from_joints(black_box(&motion.theta), black_box(&motion.theta_dot), &p)?;
            robot.forward_dynamics(&motion, black_box(&tau))
        })
    });
}

fn accepted_step(c: &mut Criterion) {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let config = SilConfig::default();
    let fresh = || Simulation::new(robot.clone(), trajectory.clone(), &config).expect("valid run");
    // Consecutive steps of runs of the default arc, timed in blocks (a clock read per step
    // would cost as much as a tenth of the step); starting a run is left out.
    c.bench_function("one accepted step (dynamics + controller + integrator)", |b| {
        b.iter_custom(|iterations| {
            let (mut remaining, mut elapsed) = (iterations, Duration::ZERO);
            while remaining > 0 {
                let mut simulation = fresh();
                let started = Instant::now();
                let taken = simulation.by_ref().take(remaining as usize).map(black_box).count() as u64;
                elapsed += started.elapsed();
                remaining -= taken;
            }
            elapsed
        })
    });
}

fn whole_arc(c: &mut Criterion) {
    let robot = Robot::default();
    let trajectory = default_arc(&robot);
    let config = SilConfig::default();
    let mut group = c.benchmark_group("whole run");
    group.sample_size(10);
    group.bench_function("default 9.86 s arc", |b| {
        b.iter(|| {
            let simulation = Simulation::new(robot.clone(), trajectory.clone(), &config).expect("valid run");
            simulation.map(|frame| frame.map(|frame| frame.t)).last()
        })
    });
    group.finish();
}

criterion_group!(benches, dynamics_evaluation, accepted_step, whole_arc);
criterion_main!(benches);
