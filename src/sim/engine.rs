//! One SIL run as an iterator of frames (docs/design.md §3).
//!
//! Each `next()` performs integrator attempts until a frame is due: by default every accepted
//! step yields its end state; with `run.frame_rate_hz` frames fall on a uniform grid and are
//! interpolated inside the steps by the integrator's dense output. Control ticks fall on
//! t0 + k / rate; steps never straddle a tick, because the torque changes there. The
//! controller sees only the simulated sensor, never the true state.

use std::sync::Arc;

use super::config::SilConfig;
use super::integrator::{BogackiShampine, DenseOutput, IntegratorError, StepOutcome};
use super::plant::{joint_state, plant_state, Plant, PlantState};
use super::sensor::SimulatedSensor;
use crate::control::{Estimator, Reference, ReferenceSampler, TaskSpaceController, Trajectory, Waypoint};
use crate::model::math::Vec3;
use crate::model::{ArmMotion, ModelError, Robot};

/// The state at one instant: the end of an accepted step or a point of the output grid (the
/// port-5555 frame, docs/port5555.md).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Frame {
    /// Simulated time [s].
    pub t: f64,
    /// Platform point [m].
    pub x: Vec3,
    /// Platform velocity [m/s].
    pub x_dot: Vec3,
    /// Joint angles [rad].
    pub theta: Vec3,
    /// Joint rates [rad/s].
    pub theta_dot: Vec3,
    /// Joint torques held during the step [N m].
    pub tau: Vec3,
    /// Reference position at `t` [m]; not part of the wire frame.
    pub x_ref: Vec3,
    /// Reference velocity at `t` [m/s]; not part of the wire frame.
    pub xd_ref: Vec3,
}

impl Frame {
    /// Reference position less the platform point [m]; its length is the tracking error.
    pub fn tracking_error(&self) -> Vec3 {
        self.x_ref - self.x
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("diverged at t = {t:.6} s: tracking error {error_m:.4} m exceeds {threshold_m} m")]
    Diverged { t: f64, error_m: f64, threshold_m: f64 },
    #[error("the state became non-finite at t = {t:.6} s")]
    NonFinite { t: f64 },
    #[error("at t = {t:.6} s: {error}")]
    Model { t: f64, error: ModelError },
    #[error("step size underflow at t = {t:.6} s: a step of {dt:e} s still misses the error tolerance")]
    StepUnderflow { t: f64, dt: f64 },
}

/// Running statistics of a run, updated with every frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunStats {
    /// Accepted integrator steps.
    pub steps: u64,
    /// Rejected integrator attempts.
    pub rejected_steps: u64,
    /// Frames emitted.
    pub frames: u64,
    /// Simulated time since the first waypoint [s].
    pub sim_time_s: f64,
    /// Largest Cartesian tracking error |x - x_ref| at the end of a step [m].
    pub max_error_m: f64,
    /// Largest |tau| per joint [N m].
    pub max_abs_tau: Vec3,
    /// Control updates that fell back to the last valid inverse kinematics.
    pub ik_fallbacks: u64,
    /// True when the frame cap ended the run before the trajectory did.
    pub capped: bool,
    /// Integral of the squared tracking error over time [m^2 s].
    squared_error_integral: f64,
}

impl RunStats {
    /// Time-weighted RMS of the Cartesian tracking error [m].
    pub fn rms_error_m(&self) -> f64 {
        if self.sim_time_s > 0.0 {
            (self.squared_error_integral / self.sim_time_s).sqrt()
        } else {
            0.0
        }
    }
}

/// A SIL run in progress.
#[derive(Debug, Clone)]
pub struct Simulation {
    trajectory: Arc<Trajectory>,
    sampler: ReferenceSampler,
    plant: Plant,
    integrator: BogackiShampine<6>,
    controller: TaskSpaceController,
    estimator: Estimator,
    sensor: SimulatedSensor,
    /// The elbow the sensor reads about [m]: the forearm of the run's first trajectory, kept
    /// when the run is steered.
    elbow: Vec3,
    /// The last commanded platform acceleration [m/s^2], the estimator's input.
    task_acceleration: Vec3,
    t: f64,
    y: PlantState,
    /// The controller's reference at `t`, for the control tick and the frame there: the
    /// trajectory's sample, or, at the start of a steered run, its first waypoint as it goes.
    reference: Reference,
    ticks_done: u64,
    /// When control tick 0 fell [s, simulated]; ticks fall every `control_period` from it.
    tick_origin: f64,
    control_period: f64,
    /// The output grid's period [s]; `None`: a frame per accepted step.
    frame_period: Option<f64>,
    /// The last accepted step, for frames inside it.
    last_step: Option<DenseOutput<6>>,
    frame_cap: u64,
    divergence_threshold_m: f64,
    stats: RunStats,
    finished: bool,
}

impl Simulation {
    /// Two times closer than this are the same instant [s]; far below dt_min.
    const TIME_EPS: f64 = 1e-12;

    /// Starts a run of `trajectory`, which must have been validated against `robot`, at rest
    /// on its first waypoint. `config.robot` is not read: `robot` is the model.
    pub fn new(robot: Robot, trajectory: Arc<Trajectory>, config: &SilConfig) -> Result<Simulation, SimError> {
        config.validate().map_err(|error| SimError::Config(error.to_string()))?;
        let start = trajectory.waypoints()[0];
        let t0 = start.t;
        let model_error = |error| SimError::Model { t: t0, error };
        // At rest, whatever the first waypoint's velocity: a run started afresh (a simulation
        // that had stopped, or failed) does not set a still arm going.
        let initial = robot.motion_from_task(&start.x, &Vec3::zeros(), None, 0.0).map_err(model_error)?;
        let mut sampler = ReferenceSampler::new();
        let reference = sampler.sample(&trajectory, t0);
        let plant = Plant::new(robot, &initial.theta, &initial.theta_dot, &start.x).map_err(model_error)?;
        let sigma_m = trajectory.l_arm() * config.sensor.quantum_rad;
        let estimator = Estimator::new(config.estimator.clone(), trajectory.elbow(), trajectory.l_arm(), sigma_m);
        Ok(Simulation {
            finished: trajectory.end_time() <= t0,
            sampler,
            plant,
            integrator: BogackiShampine::new(config.integrator.clone()),
            controller: TaskSpaceController::new(config.controller.clone()),
            estimator,
            sensor: SimulatedSensor::new(&config.sensor).map_err(SimError::Config)?,
            elbow: trajectory.elbow(),
            task_acceleration: Vec3::zeros(),
            t: t0,
            y: plant_state(&initial.theta, &initial.theta_dot),
            reference,
            ticks_done: 0,
            tick_origin: t0,
            control_period: config.controller.period(),
            frame_period: config.run.frame_period(),
            last_step: None,
            frame_cap: config.run.frame_cap,
            divergence_threshold_m: config.run.divergence_threshold_m,
            stats: RunStats::default(),
            trajectory,
        })
    }

    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    pub fn trajectory(&self) -> &Arc<Trajectory> {
        &self.trajectory
    }

    pub fn robot(&self) -> &Robot {
        self.plant.robot()
    }

    /// The current simulated time [s].
    pub fn time(&self) -> f64 {
        self.t
    }

    /// Goes on along `trajectory` from now, as a run of it that starts with the arm, its
    /// controller and estimator as they are (a fresh run would start the arm at rest on the
    /// trajectory's first waypoint and the filters afresh). Time is re-based so that now is the
    /// trajectory's start: frames, statistics and the end come from it as in a fresh run, and
    /// the control ticks keep their phase. The sensor keeps the run's forearm.
    pub fn steer(&mut self, trajectory: Arc<Trajectory>) {
        let start = trajectory.start_time();
        self.tick_origin += start - self.t;
        self.t = start;
        self.sampler = ReferenceSampler::new();
        // The controller's reference is now the first waypoint as it goes, not held at rest
        // there (as a sampler holds at a trajectory's start): a trajectory steered into under
        // way would otherwise have the controller brake for one control tick.
        let Waypoint { x, xd, xdd, .. } = trajectory.waypoints()[0];
        self.reference = Reference { x, xd, xdd };
        self.last_step = None;
        self.integrator.invalidate();
        self.stats = RunStats::default();
        self.finished = trajectory.end_time() <= start;
        self.trajectory = trajectory;
    }

    fn tick_time(&self, tick: u64) -> f64 {
        self.tick_origin + tick as f64 * self.control_period
    }

    /// Reads the sensor, updates the estimate and sets the torque held until the next tick.
    fn control_tick(&mut self) -> Result<(), SimError> {
        let reading = self.sensor.measure(&self.plant.motion().p, &self.elbow);
        let estimate = self.estimator.update(&reading, self.control_period, &self.task_acceleration);
        let output = self
            .controller
            .update(self.plant.robot(), &self.reference, &estimate, self.control_period)
            .map_err(|error| SimError::Model { t: self.t, error })?;
        self.stats.ik_fallbacks += u64::from(output.used_fallback);
        self.task_acceleration = output.task_acceleration;
        self.plant.set_torque(output.tau);
        self.integrator.invalidate();
        Ok(())
    }

    /// Runs until one integrator step is accepted and takes it.
    fn advance(&mut self) -> Result<(), SimError> {
        let end_time = self.trajectory.end_time();
        loop {
            let next_tick = self.tick_time(self.ticks_done);
            if self.t >= next_tick - Self::TIME_EPS {
                self.control_tick()?;
                self.ticks_done += 1;
                continue;
            }
            let boundary = next_tick.min(end_time);
            let outcome = self.integrator.step(&mut self.plant, self.t, &self.y, boundary - self.t);
            match outcome.map_err(|error| self.integrator_error(error))? {
                StepOutcome::Rejected => self.stats.rejected_steps += 1,
                StepOutcome::Accepted { t, y, dt, dense } => {
                    let t = if (boundary - t).abs() < Self::TIME_EPS { boundary } else { t };
                    return self.accept(t, y, dt, dense);
                }
            }
        }
    }

    fn integrator_error(&self, error: IntegratorError<ModelError>) -> SimError {
        match error {
            IntegratorError::StepUnderflow { t, dt } => SimError::StepUnderflow { t, dt },
            IntegratorError::System(error) => SimError::Model { t: self.t, error },
        }
    }

    /// Takes an accepted step: the statistics count the state at its end over its length.
    fn accept(&mut self, t: f64, y: PlantState, dt: f64, dense: DenseOutput<6>) -> Result<(), SimError> {
        if !y.iter().all(|value| value.is_finite()) {
            return Err(SimError::NonFinite { t });
        }
        self.t = t;
        self.y = y;
        self.last_step = Some(dense);
        let p = self.plant.accept(&y).p;
        self.reference = self.sampler.sample(&self.trajectory, t);
        let error_m = (p - self.reference.x).norm();
        let stats = &mut self.stats;
        stats.steps += 1;
        stats.sim_time_s = t - self.trajectory.start_time();
        stats.squared_error_integral += error_m * error_m * dt;
        stats.max_error_m = stats.max_error_m.max(error_m);
        stats.max_abs_tau = stats.max_abs_tau.sup(&self.plant.torque().abs());
        if !(error_m <= self.divergence_threshold_m) {
            return Err(SimError::Diverged { t, error_m, threshold_m: self.divergence_threshold_m });
        }
        Ok(())
    }

    /// The frame at the end of the last accepted step.
    fn step_end_frame(&mut self) -> Frame {
        self.stats.frames += 1;
        frame(self.t, self.plant.motion(), self.plant.torque(), &self.reference)
    }

    /// The frame at `t` inside the last accepted step, from its dense output; the state at
    /// the step's end is taken as it is.
    fn interpolated_frame(&mut self, t: f64) -> Result<Frame, SimError> {
        let step = match self.last_step {
            Some(step) if (self.t - t).abs() >= Self::TIME_EPS => step,
            _ => return Ok(self.step_end_frame()),
        };
        let (theta, theta_dot) = joint_state(&step.at(t));
        let motion = self
            .plant
            .robot()
            .motion_from_joints(&theta, &theta_dot, &self.plant.motion().p)
            .map_err(|error| SimError::Model { t, error })?;
        let reference = self.sampler.sample(&self.trajectory, t);
        self.stats.frames += 1;
        Ok(frame(t, &motion, self.plant.torque(), &reference))
    }

    fn at_end(&self) -> bool {
        self.t >= self.trajectory.end_time()
    }

    /// Steps until the next frame is due and returns it, or `None` at the end of the run.
    fn next_frame(&mut self) -> Result<Option<Frame>, SimError> {
        let Some(period) = self.frame_period else {
            self.advance()?;
            return Ok(Some(self.step_end_frame()));
        };
        let frame_time = self.trajectory.start_time() + (self.stats.frames + 1) as f64 * period;
        if frame_time > self.trajectory.end_time() + Self::TIME_EPS {
            // No grid point is left; the statistics still cover the whole trajectory.
            while !self.at_end() {
                self.advance()?;
            }
            return Ok(None);
        }
        while self.t < frame_time - Self::TIME_EPS {
            self.advance()?;
        }
        self.interpolated_frame(frame_time).map(Some)
    }
}

fn frame(t: f64, motion: &ArmMotion, tau: Vec3, reference: &Reference) -> Frame {
    Frame {
        t,
        x: motion.p,
        x_dot: motion.p_dot,
        theta: motion.theta,
        theta_dot: motion.theta_dot,
        tau,
        x_ref: reference.x,
        xd_ref: reference.xd,
    }
}

impl Iterator for Simulation {
    type Item = Result<Frame, SimError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if self.stats.frames >= self.frame_cap {
            self.stats.capped = true;
            self.finished = true;
            return None;
        }
        let result = self.next_frame();
        self.finished = !matches!(result, Ok(Some(_))) || self.at_end() && self.frame_period.is_none();
        result.transpose()
    }
}
