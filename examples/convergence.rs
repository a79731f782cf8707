//! The integrator's convergence study (docs/model.md §S1): the default arc and the default
//! figure eight at rtol 1e-4 .. 1e-10, each against a reference run at rtol 1e-12 with the same
//! sensor seed. Prints the Markdown table docs/model.md quotes.
//!
//! Run with `cargo run --release --example convergence`.

use std::sync::Arc;
use std::time::Instant;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::figure_eight::FigureEightSpec;
use arm_hil::control::Trajectory;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::sim::{IntegratorConfig, RunStats, SilConfig, Simulation};

/// Positions on the 1 kHz grid (every control tick), with the run's statistics and wall time [s].
struct Run {
    positions: Vec<Vec3>,
    stats: RunStats,
    wall_s: f64,
}

fn run(robot: &Robot, trajectory: &Arc<Trajectory>, integrator: IntegratorConfig, ideal_sensor: bool) -> Run {
    let mut config = SilConfig { integrator, ..SilConfig::default() };
    config.sensor.ideal = ideal_sensor;
    config.run.frame_rate_hz = 1000.0;
    config.run.frame_cap = u64::MAX;
    let started = Instant::now();
    let mut simulation = Simulation::new(robot.clone(), trajectory.clone(), &config).expect("a valid run");
    let positions = (&mut simulation).map(|frame| frame.expect("the run completes").x).collect();
    Run { positions, stats: simulation.stats().clone(), wall_s: started.elapsed().as_secs_f64() }
}

/// Adaptive steps between control ticks at relative tolerance `rtol`.
fn adaptive(rtol: f64) -> IntegratorConfig {
    IntegratorConfig { rtol, atol: rtol * 1e-3, dt_min: 1e-12, dt_max: 1e-2, ..IntegratorConfig::default() }
}

fn main() {
    let robot = Robot::default();
    let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
    let quantum_at_tip_m = l_arm * SilConfig::default().sensor.quantum_rad;
    let trajectories = [
        ("arc", ArcSpec::default().waypoints(&elbow, l_arm).expect("the default arc")),
        ("figure eight", FigureEightSpec::default().waypoints(&elbow, l_arm).expect("the default eight")),
    ];
    println!(
        "| trajectory | sensor | integrator | max position error | steps (rejected) | wall time | RMS tracking error |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, waypoints) in trajectories {
        let trajectory = Arc::new(Trajectory::with_robot_forearm(waypoints, &robot).expect("reachable"));
        for (sensor, ideal_sensor) in [("ideal", true), ("noisy, seed 1", false)] {
            let reference = run(&robot, &trajectory, adaptive(1e-12), ideal_sensor);
            let fixed_step = IntegratorConfig { dt_max: 5e-5, ..IntegratorConfig::default() };
            let rows = (4..=10)
                .map(|exponent| (format!("rtol 1e-{exponent}"), adaptive(10f64.powi(-exponent))))
                .chain([("fixed 50 us, rtol 1e-6".to_owned(), fixed_step)]);
            for (label, integrator) in rows {
                let result = run(&robot, &trajectory, integrator, ideal_sensor);
                let error_m = result
                    .positions
                    .iter()
                    .zip(&reference.positions)
                    .map(|(x, x_reference)| (x - x_reference).norm())
                    .fold(0.0, f64::max);
                println!(
                    "| {name} | {sensor} | {label} | {:.1e} m ({:.1e} quantum) | {} ({}) | {:.1} ms | {:.4} mm |",
                    error_m,
                    error_m / quantum_at_tip_m,
                    result.stats.steps,
                    result.stats.rejected_steps,
                    result.wall_s * 1e3,
                    result.stats.rms_error_m() * 1e3,
                );
            }
        }
    }
    println!(
        "\nReference: rtol 1e-12 with the same sensor (and seed). The sensor quantum at the forearm tip is {:.2} mm.",
        quantum_at_tip_m * 1e3
    );
}
