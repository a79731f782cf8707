//! Joint torque to step rate for the reference rig's stepper drives (docs/hil.md).
//!
//! A stepper's torque follows the electrical lag between the commanded step position and the
//! rotor, tau = Gr Kt I sin(delta). To produce a torque the drive is run so that the lag tracks
//! delta* = asin(clamp(tau / tau_safe)), tau_safe = 0.8 Gr Kt Imax, with a PI on the lag error
//! whose output is the step rate, limited to +-62 500 pulses/s.

use serde::{Deserialize, Serialize};

use crate::model::math::Vec3;

/// Step rates of the three drives [pulses/s], signed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepRates(pub [f64; 3]);

impl StepRates {
    /// The rates as sent: |f| rounded to one decimal, direction from the sign.
    pub fn quantised(&self) -> StepRates {
        StepRates(self.0.map(|f| (f * 10.0).round() / 10.0))
    }
}

/// The drives' constants. Defaults are the lab's rig's (docs/hil.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepperConfig {
    /// Gear ratio motor : joint. Default (1, 1, 20).
    pub gear_ratio: [f64; 3],
    /// Torque constant Kt [N m/A]. Default 0.82.
    pub torque_constant: f64,
    /// Phase current Imax [A]. Default 5.5.
    pub max_current: f64,
    /// Share of the peak torque ever asked for. Default 0.8.
    pub safety_factor: f64,
    /// Proportional gain of the lag loop [pulses/s per electrical rad]. Default 1e3 (the
    /// reference's 8e3 turned sensor noise into step rates that a stalled PC holds for too long;
    /// docs/hil.md).
    pub lag_kp: f64,
    /// Integral gain of the lag loop [pulses/s^2 per electrical rad]. Default 2e3.
    pub lag_ki: f64,
    /// Largest step rate [pulses/s]. Default 62 500.
    pub max_rate: f64,
    /// Motor angle per pulse [rad]: 1.8 deg full step / 8 microsteps. Default 3.927e-3.
    pub step_angle_rad: f64,
    /// Electrical cycles per mechanical revolution (a 200-step motor has 50). Default 50.
    pub pole_pairs: f64,
}

impl Default for StepperConfig {
    fn default() -> Self {
        StepperConfig {
            gear_ratio: [1.0, 1.0, 20.0],
            torque_constant: 0.82,
            max_current: 5.5,
            safety_factor: 0.8,
            lag_kp: 1e3,
            lag_ki: 2e3,
            max_rate: 62_500.0,
            step_angle_rad: 1.8_f64.to_radians() / 8.0,
            pole_pairs: 50.0,
        }
    }
}

impl StepperConfig {
    /// Joint torque at 90 degrees of electrical lag, Gr Kt Imax [N m].
    pub fn peak_torque(&self) -> Vec3 {
        Vec3::from(self.gear_ratio) * (self.torque_constant * self.max_current)
    }

    /// The largest joint torque ever commanded, tau_safe = 0.8 Gr Kt Imax [N m].
    pub fn safe_torque(&self) -> Vec3 {
        self.peak_torque() * self.safety_factor
    }

    /// Electrical lag between the step position and the rotor [rad]: `motor_angle` is the
    /// drive's step position [rad, motor side], `theta` the joint angle [rad].
    pub fn electrical_lag(&self, motor_angle: &Vec3, theta: &Vec3) -> Vec3 {
        (motor_angle - theta.component_mul(&Vec3::from(self.gear_ratio))) * self.pole_pairs
    }

    /// Field angle that holds joint angles `theta` [rad] with torque `tau` [N m] [rad, motor side].
    pub fn holding_field_angle(&self, theta: &Vec3, tau: &Vec3) -> Vec3 {
        theta.component_mul(&Vec3::from(self.gear_ratio)) + self.lag_setpoint(tau) / self.pole_pairs
    }

    /// Lag that produces `tau` [N m]: delta* = asin(clamp(tau / tau_safe, -1, 1)) [rad].
    pub fn lag_setpoint(&self, tau: &Vec3) -> Vec3 {
        tau.component_div(&self.safe_torque()).map(|ratio| ratio.clamp(-1.0, 1.0).asin())
    }
}

/// Where the drives' fields point: the step position integrated from the rates sent, over the
/// times they were in force. Both the driver (send times) and the emulated Arduino (arrival
/// times) keep one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldTracker {
    /// Field angle at `since` [rad, motor side].
    angle: Vec3,
    /// Field rate [rad/s, motor side].
    rate: Vec3,
    /// When the current rate took effect [s].
    since: f64,
}

impl FieldTracker {
    /// Fields at rest at `angle` [rad, motor side] from time `t` [s].
    pub fn new(angle: Vec3, t: f64) -> FieldTracker {
        FieldTracker { angle, rate: Vec3::zeros(), since: t }
    }

    /// Field angle at time `t` [s].
    pub fn angle_at(&self, t: f64) -> Vec3 {
        self.angle + self.rate * (t - self.since)
    }

    /// Field rate [rad/s, motor side].
    pub fn rate(&self) -> Vec3 {
        self.rate
    }

    /// New step rates take effect at `t` [s].
    pub fn set_rates(&mut self, t: f64, rates: &StepRates, config: &StepperConfig) {
        self.angle = self.angle_at(t);
        self.rate = Vec3::from(rates.0) * config.step_angle_rad;
        self.since = t;
    }
}

/// The lag controller: a PI on the lag error whose output is the step rate.
#[derive(Debug, Clone)]
pub struct StepperDrive {
    config: StepperConfig,
    integral: Vec3,
}

impl StepperDrive {
    pub fn new(config: StepperConfig) -> StepperDrive {
        StepperDrive { config, integral: Vec3::zeros() }
    }

    pub fn config(&self) -> &StepperConfig {
        &self.config
    }

    /// Step rates for the next `dt` [s] that steer the lag toward the one that produces `tau`
    /// [N m], given the field angle `field` [rad, motor side], joint angles `theta` [rad] and
    /// joint rates `theta_dot` [rad/s]: the rate that turns the field with the rotor, plus the
    /// PI on the lag error. The integral stops while the rate is saturated.
    pub fn update(&mut self, tau: &Vec3, theta: &Vec3, theta_dot: &Vec3, field: &Vec3, dt: f64) -> StepRates {
        let error = self.config.lag_setpoint(tau) - self.config.electrical_lag(field, theta);
        let with_rotor = theta_dot.component_mul(&Vec3::from(self.config.gear_ratio)) / self.config.step_angle_rad;
        let limit = self.config.max_rate;
        let mut rates = [0.0; 3];
        for i in 0..3 {
            let unclamped =
                with_rotor[i] + self.config.lag_kp * error[i] + self.config.lag_ki * (self.integral[i] + error[i] * dt);
            if unclamped.abs() < limit {
                self.integral[i] += error[i] * dt;
            }
            rates[i] = unclamped.clamp(-limit, limit);
        }
        StepRates(rates).quantised()
    }

    /// Zero rates: the drives hold their position.
    pub fn stop(&mut self) -> StepRates {
        self.integral = Vec3::zeros();
        StepRates::default()
    }
}
