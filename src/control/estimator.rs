//! State estimation from the spherical angle sensor: the range-bias estimator and the
//! position/velocity Kalman filter (docs/model.md §E).

use serde::{Deserialize, Serialize};

use crate::model::math::{spherical_direction, Vec3};

/// One reading of the spherical sensor about the elbow: range [m], polar angle from +z [rad],
/// azimuth from +x [rad].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SphericalReading {
    pub r: f64,
    pub theta: f64,
    pub phi: f64,
}

/// Estimated platform position [m] and velocity [m/s].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    pub x: Vec3,
    pub v: Vec3,
}

/// Estimator settings. Defaults are the lab's original estimator's (docs/model.md), except where noted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EstimatorConfig {
    /// Process noise: standard deviation of the unmodelled acceleration sigma_a [m/s^2].
    /// Default 2.0 (reference 1e-2, a filter too slow to keep the loop stable; docs/model.md §C3).
    pub sigma_a: f64,
    /// Measurement noise of the position sigma_m [m]. Default: l_arm x the sensor quantum.
    pub sigma_m: Option<f64>,
    /// Feed the commanded platform acceleration into the prediction. Default true (the
    /// reference's pure constant-velocity model, false, lags the motion; docs/model.md §E).
    pub use_commanded_acceleration: bool,
    /// Initial variance of the range bias P0 [m^2]. Default 1e-3.
    pub bias_p0: f64,
    /// Range measurement noise sigma_p [m]. Default 3e-4.
    pub bias_sigma_p: f64,
    /// Random walk of the range bias per update sigma_r [m]. Default 1e-4.
    pub bias_sigma_r: f64,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            sigma_a: 2.0,
            sigma_m: None,
            use_commanded_acceleration: true,
            bias_p0: 1e-3,
            bias_sigma_p: 3e-4,
            bias_sigma_r: 1e-4,
        }
    }
}

/// Online estimate of the range bias b = E[r - L] (E1): K = P / (P + sigma_p^2);
/// b += K (r - L - b); P = (1 - K) P + sigma_r^2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeBiasEstimator {
    bias: f64,
    variance: f64,
    sigma_p: f64,
    sigma_r: f64,
}

impl RangeBiasEstimator {
    pub fn new(p0: f64, sigma_p: f64, sigma_r: f64) -> RangeBiasEstimator {
        RangeBiasEstimator { bias: 0.0, variance: p0, sigma_p, sigma_r }
    }

    /// Folds in one range `r` [m] against the nominal length `l_arm` [m]; returns the bias [m].
    pub fn update(&mut self, r: f64, l_arm: f64) -> f64 {
        let gain = self.variance / (self.variance + self.sigma_p * self.sigma_p);
        self.bias += gain * (r - l_arm - self.bias);
        self.variance = (1.0 - gain) * self.variance + self.sigma_r * self.sigma_r;
        self.bias
    }

    /// Current bias estimate [m].
    pub fn bias(&self) -> f64 {
        self.bias
    }
}

/// The 6-state position/velocity Kalman filter (E2).
///
/// The three axes share the process and measurement noise and start with the same covariance,
/// so the 6x6 covariance stays block-diagonal with three equal 2x2 blocks: one block is kept and
/// the filter costs three scalar filters, exactly equal to the full 6-state one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PositionVelocityKalman {
    estimate: Estimate,
    /// The shared 2x2 covariance block: var(x), cov(x, v), var(v).
    p_xx: f64,
    p_xv: f64,
    p_vv: f64,
    sigma_a: f64,
    sigma_m: f64,
}

impl PositionVelocityKalman {
    /// Initial velocity uncertainty [m/s]: the arm is assumed near rest when the filter starts.
    const INITIAL_VELOCITY_STD: f64 = 0.1;

    /// Starts at the first measured position `x0` [m] with zero velocity.
    pub fn new(x0: Vec3, sigma_a: f64, sigma_m: f64) -> PositionVelocityKalman {
        PositionVelocityKalman {
            estimate: Estimate { x: x0, v: Vec3::zeros() },
            p_xx: sigma_m * sigma_m,
            p_xv: 0.0,
            p_vv: Self::INITIAL_VELOCITY_STD * Self::INITIAL_VELOCITY_STD,
            sigma_a,
            sigma_m,
        }
    }

    /// Prediction over `dt` [s] with known acceleration `acceleration` [m/s^2] (zero for the
    /// constant-velocity model): x += v dt + a dt^2 / 2, v += a dt, P = F P F^T + Q.
    pub fn predict(&mut self, dt: f64, acceleration: &Vec3) {
        let Estimate { x, v } = &mut self.estimate;
        *x += *v * dt + acceleration * (0.5 * dt * dt);
        *v += acceleration * dt;
        let q = self.sigma_a * self.sigma_a;
        let (dt2, dt3, dt4) = (dt * dt, dt * dt * dt, dt * dt * dt * dt);
        self.p_xx += 2.0 * dt * self.p_xv + dt2 * self.p_vv + q * dt4 / 4.0;
        self.p_xv += dt * self.p_vv + q * dt3 / 2.0;
        self.p_vv += q * dt2;
    }

    /// Correction with a measured position `z` [m].
    pub fn correct(&mut self, z: &Vec3) {
        let innovation_variance = self.p_xx + self.sigma_m * self.sigma_m;
        let gain_x = self.p_xx / innovation_variance;
        let gain_v = self.p_xv / innovation_variance;
        let innovation = z - self.estimate.x;
        self.estimate.x += innovation * gain_x;
        self.estimate.v += innovation * gain_v;
        self.p_vv -= gain_v * self.p_xv;
        self.p_xx *= 1.0 - gain_x;
        self.p_xv *= 1.0 - gain_x;
    }

    pub fn estimate(&self) -> Estimate {
        self.estimate
    }
}

/// Why [`Estimator::gated_update`] refused a reading: what the arm cannot have produced.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ReadingRejected {
    #[error("its range is {off_m:.4} m from the forearm's length")]
    Range { off_m: f64 },
    #[error("its point is {off_m:.4} m from where the arm is predicted")]
    Point { off_m: f64 },
}

/// Turns spherical readings into a position/velocity estimate: range bias, then the point
/// elbow + (l_arm + b) u(theta, phi), then the Kalman filter.
#[derive(Debug, Clone)]
pub struct Estimator {
    config: EstimatorConfig,
    elbow: Vec3,
    l_arm: f64,
    sigma_m: f64,
    bias: RangeBiasEstimator,
    kalman: Option<PositionVelocityKalman>,
}

impl Estimator {
    /// `default_sigma_m` [m] is used when the configuration leaves sigma_m unset.
    pub fn new(config: EstimatorConfig, elbow: Vec3, l_arm: f64, default_sigma_m: f64) -> Estimator {
        let sigma_m = config.sigma_m.unwrap_or(default_sigma_m);
        let bias = RangeBiasEstimator::new(config.bias_p0, config.bias_sigma_p, config.bias_sigma_r);
        Estimator { config, elbow, l_arm, sigma_m, bias, kalman: None }
    }

    /// The point the sensor sees [m], after the range-bias update.
    pub fn measured_point(&mut self, reading: &SphericalReading) -> Vec3 {
        let bias = self.bias.update(reading.r, self.l_arm);
        self.elbow + spherical_direction(reading.theta, reading.phi) * (self.l_arm + bias)
    }

    /// One filter cycle with a reading: predict over `dt` [s] with the last commanded
    /// acceleration [m/s^2], then correct. The first reading initialises the filter.
    pub fn update(&mut self, reading: &SphericalReading, dt: f64, commanded_acceleration: &Vec3) -> Estimate {
        let z = self.measured_point(reading);
        self.predict(dt, commanded_acceleration);
        let kalman = match &mut self.kalman {
            Some(kalman) => {
                kalman.correct(&z);
                kalman
            }
            None => self.kalman.insert(PositionVelocityKalman::new(z, self.config.sigma_a, self.sigma_m)),
        };
        kalman.estimate()
    }

    /// [`Estimator::update`] for a reading the arm can have produced: its range within `gate_m`
    /// [m] of the forearm's length with the estimated bias, and its point within `gate_m` of
    /// where the filter predicts the arm after `dt` [s]. Else nothing changes (the bias
    /// estimate included) and the reading is refused, saying how far off it was. The first
    /// reading has no prediction to be held to; its range is held to the same gate.
    pub fn gated_update(
        &mut self,
        reading: &SphericalReading,
        dt: f64,
        commanded_acceleration: &Vec3,
        gate_m: f64,
    ) -> Result<Estimate, ReadingRejected> {
        let range_off = (reading.r - self.l_arm - self.bias.bias()).abs();
        if !(range_off <= gate_m) {
            return Err(ReadingRejected::Range { off_m: range_off });
        }
        if let Some(kalman) = &self.kalman {
            let mut predicted = *kalman;
            predicted.predict(dt, &self.acceleration(commanded_acceleration));
            let point = self.elbow + spherical_direction(reading.theta, reading.phi) * (self.l_arm + self.bias.bias());
            let off_m = (point - predicted.estimate().x).norm();
            if !(off_m <= gate_m) {
                return Err(ReadingRejected::Point { off_m });
            }
        }
        Ok(self.update(reading, dt, commanded_acceleration))
    }

    fn acceleration(&self, commanded: &Vec3) -> Vec3 {
        if self.config.use_commanded_acceleration {
            *commanded
        } else {
            Vec3::zeros()
        }
    }

    /// One filter cycle without a reading: predict only. `None` before the first reading.
    pub fn predict(&mut self, dt: f64, commanded_acceleration: &Vec3) -> Option<Estimate> {
        let acceleration = self.acceleration(commanded_acceleration);
        let kalman = self.kalman.as_mut()?;
        kalman.predict(dt, &acceleration);
        Some(kalman.estimate())
    }

    /// Current range-bias estimate [m].
    pub fn range_bias(&self) -> f64 {
        self.bias.bias()
    }
}
