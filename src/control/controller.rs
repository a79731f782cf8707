//! Task-space PID with anti-windup plus inverse dynamics (docs/model.md §C2).

use serde::{Deserialize, Serialize};

use super::estimator::Estimate;
use super::interpolation::Reference;
use crate::model::math::Vec3;
use crate::model::{ArmMotion, ModelError, Robot};

/// Controller gains and limits. Defaults are the lab's original controller's (docs/model.md), except Kp and Kd:
/// its (30, 4) cannot hold the arm against its gravity-driven unstable mode with a
/// quantised sensor (docs/model.md §C3 has the measurements).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// Proportional gain [1/s^2]. Default 900 (30 rad/s; reference 30).
    pub kp: f64,
    /// Derivative gain [1/s]. Default 60 (critically damped with kp; reference 4).
    pub kd: f64,
    /// Integral gain [1/s^3]. Default 4.
    pub ki: f64,
    /// Bound on each component of the error integral [m s]. Default 1.0.
    pub integral_clamp: f64,
    /// Bound on each joint torque [N m]. Default 30.
    pub torque_limit: f64,
    /// Damping of the pseudo-inverse of K near singularities [m^2/rad]. Default 1e-4.
    pub pinv_damping: f64,
    /// Control update rate [Hz]; torque is held between updates. Default 1000.
    pub rate_hz: f64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            kp: 900.0,
            kd: 60.0,
            ki: 4.0,
            integral_clamp: 1.0,
            torque_limit: 30.0,
            pinv_damping: 1e-4,
            rate_hz: 1000.0,
        }
    }
}

impl ControllerConfig {
    /// Checks that gains are finite and not negative, and limits and rate positive.
    pub fn validate(&self) -> Result<(), String> {
        let gains = [("kp", self.kp), ("kd", self.kd), ("ki", self.ki), ("pinv_damping", self.pinv_damping)];
        let limits =
            [("integral_clamp", self.integral_clamp), ("torque_limit", self.torque_limit), ("rate_hz", self.rate_hz)];
        for (name, value) in gains {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("controller.{name} must be finite and >= 0, got {value}"));
            }
        }
        for (name, value) in limits {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("controller.{name} must be finite and > 0, got {value}"));
            }
        }
        Ok(())
    }

    /// Control period [s].
    pub fn period(&self) -> f64 {
        1.0 / self.rate_hz
    }
}

/// What one control update produces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControlOutput {
    /// Joint torques, clamped to the limit [N m].
    pub tau: Vec3,
    /// Commanded platform acceleration xdd_cmd [m/s^2]; the estimator may use it as its input.
    pub task_acceleration: Vec3,
    /// True when inverse kinematics of the estimate failed and the last valid solution was used.
    pub used_fallback: bool,
}

/// The controller's state: the error integral and the last valid joint-space motion.
#[derive(Debug, Clone)]
pub struct TaskSpaceController {
    config: ControllerConfig,
    integral: Vec3,
    last_motion: Option<ArmMotion>,
}

impl TaskSpaceController {
    pub fn new(config: ControllerConfig) -> TaskSpaceController {
        TaskSpaceController { config, integral: Vec3::zeros(), last_motion: None }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The joint-space motion of the last update (or the fallback it reused).
    pub fn last_motion(&self) -> Option<&ArmMotion> {
        self.last_motion.as_ref()
    }

    /// PID in task space (C2): xdd_cmd = xdd_d + Kp e + Kd edot + Ki int(e), with the integral
    /// clamped component-wise (anti-windup). `dt` is the control period [s].
    pub fn task_acceleration(&mut self, reference: &Reference, estimate: &Estimate, dt: f64) -> Vec3 {
        let error = reference.x - estimate.x;
        let error_rate = reference.xd - estimate.v;
        let clamp = self.config.integral_clamp;
        self.integral = (self.integral + error * dt).map(|e| e.clamp(-clamp, clamp));
        reference.xdd + error * self.config.kp + error_rate * self.config.kd + self.integral * self.config.ki
    }

    /// One control update: PID, then joint accelerations through K^+ (K6), then inverse
    /// dynamics (D6), then the torque limit. Inverse kinematics of the estimate falls back to
    /// the last valid solution; the error is returned only if there has never been one.
    pub fn update(
        &mut self,
        robot: &Robot,
        reference: &Reference,
        estimate: &Estimate,
        dt: f64,
    ) -> Result<ControlOutput, ModelError> {
        let task_acceleration = self.task_acceleration(reference, estimate, dt);
        let previous_theta = self.last_motion.as_ref().map(|motion| motion.theta);
        let damping = self.config.pinv_damping;
        let (motion, used_fallback) =
            match robot.motion_from_task(&estimate.x, &estimate.v, previous_theta.as_ref(), damping) {
                Ok(motion) => (motion, false),
                Err(error) => (self.last_motion.ok_or(error)?, true),
            };
        self.last_motion = Some(motion);
        let theta_ddot = robot.joint_acceleration(&motion, &task_acceleration, damping);
        let tau = clamp_torque(&robot.inverse_dynamics(&motion, &theta_ddot), self.config.torque_limit);
        Ok(ControlOutput { tau, task_acceleration, used_fallback })
    }
}

/// Clamps each joint torque to [-limit, limit] [N m].
pub fn clamp_torque(tau: &Vec3, limit: f64) -> Vec3 {
    tau.map(|t| t.clamp(-limit, limit))
}
