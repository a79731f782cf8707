//! Many SIL runs of one trajectory: sensor-noise seeds and a grid of controller gains, run on
//! every core. Each run is independent and deterministic, so a sweep repeats exactly.

use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::config::SilConfig;
use super::engine::Simulation;
use crate::control::Trajectory;
use crate::model::Robot;

/// The controller gains of one case (docs/model.md §C2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gains {
    /// Proportional gain [1/s^2].
    pub kp: f64,
    /// Derivative gain [1/s].
    pub kd: f64,
    /// Integral gain [1/s^3].
    pub ki: f64,
}

/// One run of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SweepCase {
    /// Seed of the sensor noise.
    pub seed: u64,
    #[serde(flatten)]
    pub gains: Gains,
}

impl SweepCase {
    /// `base` with this case's seed and gains.
    pub fn config(&self, base: &SilConfig) -> SilConfig {
        let mut config = base.clone();
        config.sensor.seed = self.seed;
        (config.controller.kp, config.controller.kd, config.controller.ki) =
            (self.gains.kp, self.gains.kd, self.gains.ki);
        config
    }
}

/// What one run gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    #[serde(flatten)]
    pub case: SweepCase,
    /// Time-weighted RMS of the tracking error [m].
    pub rms_error_m: f64,
    /// Largest tracking error [m].
    pub max_error_m: f64,
    /// Largest |tau| per joint [N m].
    pub max_abs_tau: [f64; 3],
    /// Accepted integrator steps.
    pub steps: u64,
    /// Why the run stopped early (divergence, a singular configuration), if it did.
    pub failure: Option<String>,
}

impl CaseResult {
    /// The largest torque on any joint [N m].
    pub fn max_torque_nm(&self) -> f64 {
        self.max_abs_tau.iter().copied().fold(0.0, f64::max)
    }
}

/// Every combination of the seeds and gains, gains outermost so that each gain set's seeds
/// are neighbours.
pub fn sweep_cases(seeds: &[u64], kp: &[f64], kd: &[f64], ki: &[f64]) -> Vec<SweepCase> {
    let mut cases = Vec::with_capacity(seeds.len() * kp.len() * kd.len() * ki.len());
    for &kp in kp {
        for &kd in kd {
            for &ki in ki {
                cases.extend(seeds.iter().map(|&seed| SweepCase { seed, gains: Gains { kp, kd, ki } }));
            }
        }
    }
    cases
}

/// Runs one case: `base` with the case's seed and gains, to the end of `trajectory` (which
/// must have been validated against `robot`), frames dropped as they come.
pub fn run_case(robot: &Robot, trajectory: &Arc<Trajectory>, base: &SilConfig, case: SweepCase) -> CaseResult {
    let (stats, failure) = match Simulation::new(robot.clone(), trajectory.clone(), &case.config(base)) {
        Ok(mut simulation) => {
            let failure = simulation.by_ref().find_map(Result::err).map(|error| error.to_string());
            (simulation.stats().clone(), failure)
        }
        Err(error) => (Default::default(), Some(error.to_string())),
    };
    CaseResult {
        case,
        rms_error_m: stats.rms_error_m(),
        max_error_m: stats.max_error_m,
        max_abs_tau: stats.max_abs_tau.into(),
        steps: stats.steps,
        failure,
    }
}

/// Runs every case on rayon's pool (all cores unless configured otherwise); results keep the
/// order of `cases`. `done` is called once per finished case, from any thread.
pub fn run_sweep(
    robot: &Robot,
    trajectory: &Arc<Trajectory>,
    base: &SilConfig,
    cases: &[SweepCase],
    done: impl Fn() + Sync,
) -> Vec<CaseResult> {
    cases
        .par_iter()
        .map(|&case| {
            let result = run_case(robot, trajectory, base, case);
            done();
            result
        })
        .collect()
}

/// Mean, 95th percentile and largest of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    /// Nearest-rank 95th percentile: the smallest value at or above 95% of the values.
    pub p95: f64,
    pub worst: f64,
}

impl Spread {
    /// The spread of `values`, or `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.into_iter().collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let rank = (0.95 * n as f64).ceil() as usize;
        Some(Spread {
            mean: sorted.iter().sum::<f64>() / n as f64,
            p95: sorted[rank.clamp(1, n) - 1],
            worst: sorted[n - 1],
        })
    }
}

/// The cases of one gain set over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    #[serde(flatten)]
    pub gains: Gains,
    pub runs: usize,
    /// Runs that stopped early; the spreads cover the others.
    pub failed: usize,
    pub rms_error_m: Option<Spread>,
    pub max_error_m: Option<Spread>,
    /// Of each run's largest torque on any joint [N m].
    pub max_torque_nm: Option<Spread>,
}

/// One summary per gain set, in the order the sets first appear in `results`.
pub fn summarise(results: &[CaseResult]) -> Vec<GroupSummary> {
    let mut gain_sets: Vec<Gains> = Vec::new();
    for result in results {
        if !gain_sets.contains(&result.case.gains) {
            gain_sets.push(result.case.gains);
        }
    }
    gain_sets
        .into_iter()
        .map(|gains| {
            let group: Vec<&CaseResult> = results.iter().filter(|result| result.case.gains == gains).collect();
            let completed = || group.iter().filter(|result| result.failure.is_none());
            GroupSummary {
                gains,
                runs: group.len(),
                failed: group.len() - completed().count(),
                rms_error_m: Spread::of(completed().map(|result| result.rms_error_m)),
                max_error_m: Spread::of(completed().map(|result| result.max_error_m)),
                max_torque_nm: Spread::of(completed().map(|result| result.max_torque_nm())),
            }
        })
        .collect()
}
