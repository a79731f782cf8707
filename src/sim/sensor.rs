//! The simulated spherical sensor: the platform point seen from the elbow as range and two
//! angles, quantised, with seeded Gaussian noise (docs/model.md S2).

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::control::SphericalReading;
use crate::model::math::Vec3;

/// Sensor settings. Defaults follow the lab's rig's encoders (docs/rig.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SensorConfig {
    /// Angle resolution [rad]. Default 0.0052.
    pub quantum_rad: f64,
    /// Angle noise standard deviation, added before quantisation [rad]. Default 0.1 x quantum.
    pub angle_noise_std_rad: f64,
    /// Range noise standard deviation [m]. Default 3e-4 (the bias estimator's sigma_p).
    pub range_noise_std_m: f64,
    /// Seed of the noise generator; equal seeds give equal runs. Default 1.
    pub seed: u64,
    /// An ideal sensor: exact range and angles, no quantisation or noise. Default false.
    pub ideal: bool,
}

impl Default for SensorConfig {
    fn default() -> Self {
        SensorConfig {
            quantum_rad: 0.0052,
            angle_noise_std_rad: 0.00052,
            range_noise_std_m: 3e-4,
            seed: 1,
            ideal: false,
        }
    }
}

impl SensorConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.quantum_rad.is_finite() && self.quantum_rad > 0.0) {
            return Err(format!("sensor.quantum_rad must be finite and > 0, got {}", self.quantum_rad));
        }
        for (name, value) in
            [("angle_noise_std_rad", self.angle_noise_std_rad), ("range_noise_std_m", self.range_noise_std_m)]
        {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("sensor.{name} must be finite and >= 0, got {value}"));
            }
        }
        Ok(())
    }
}

/// The sensor and its random number generator.
#[derive(Debug, Clone)]
pub struct SimulatedSensor {
    quantum: f64,
    ideal: bool,
    angle_noise: Normal<f64>,
    range_noise: Normal<f64>,
    rng: ChaCha8Rng,
}

impl SimulatedSensor {
    pub fn new(config: &SensorConfig) -> Result<SimulatedSensor, String> {
        config.validate()?;
        let normal = |std: f64| Normal::new(0.0, std).map_err(|error| format!("sensor noise: {error}"));
        Ok(SimulatedSensor {
            quantum: config.quantum_rad,
            ideal: config.ideal,
            angle_noise: normal(config.angle_noise_std_rad)?,
            range_noise: normal(config.range_noise_std_m)?,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
        })
    }

    /// Reads the platform point `p` [m] from the elbow `elbow` [m].
    pub fn measure(&mut self, p: &Vec3, elbow: &Vec3) -> SphericalReading {
        let offset = p - elbow;
        let r = offset.norm();
        let theta = (offset.z / r).clamp(-1.0, 1.0).acos();
        let phi = offset.y.atan2(offset.x);
        if self.ideal {
            return SphericalReading { r, theta, phi };
        }
        let mut quantised = |angle: f64| {
            let noisy = angle + self.angle_noise.sample(&mut self.rng);
            (noisy / self.quantum).round() * self.quantum
        };
        let (theta, phi) = (quantised(theta), quantised(phi));
        SphericalReading { r: r + self.range_noise.sample(&mut self.rng), theta, phi }
    }
}
