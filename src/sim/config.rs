//! Everything a SIL run is configured by, loadable from one YAML file.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_norway::{Mapping, Value};

use super::integrator::IntegratorConfig;
use super::sensor::SensorConfig;
use crate::control::{ControllerConfig, EstimatorConfig};
use crate::model::{ModelError, RobotParams};

/// The SIL configuration. Every section and field is optional in YAML; missing ones take the
/// reference defaults, unknown ones are an error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SilConfig {
    pub robot: RobotParams,
    pub controller: ControllerConfig,
    pub estimator: EstimatorConfig,
    pub sensor: SensorConfig,
    pub integrator: IntegratorConfig,
    pub run: RunConfig,
}

/// Limits of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Frames after which a run stops early, cleanly (docs/port5555.md's frame cap). Default 1 000 000.
    pub frame_cap: u64,
    /// Tracking error beyond which the run is declared diverged [m]. Default 0.05.
    pub divergence_threshold_m: f64,
    /// Frames on a uniform grid of this rate, interpolated inside the integrator's steps
    /// [Hz]; 0 gives one frame per accepted step. Default 0.
    pub frame_rate_hz: f64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { frame_cap: 1_000_000, divergence_threshold_m: 0.05, frame_rate_hz: 0.0 }
    }
}

impl RunConfig {
    /// The output grid's period [s], or `None` for one frame per accepted step.
    pub fn frame_period(&self) -> Option<f64> {
        (self.frame_rate_hz > 0.0).then(|| 1.0 / self.frame_rate_hz)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid YAML configuration: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl SilConfig {
    /// The top-level keys of a SIL configuration document.
    pub const SECTIONS: [&'static str; 6] = ["robot", "controller", "estimator", "sensor", "integrator", "run"];

    /// Parses and validates a YAML document.
    pub fn from_yaml(text: &str) -> Result<SilConfig, ConfigError> {
        // An empty document means "all defaults", which serde_norway reads as a unit value.
        let config: SilConfig =
            if text.trim().is_empty() { SilConfig::default() } else { serde_norway::from_str(text)? };
        config.validate()?;
        Ok(config)
    }

    /// Parses and validates a document whose top level holds the SIL sections beside a
    /// command's own sections (`own_keys`, read as `S`). Any other top-level key is an error; an
    /// empty document means all defaults.
    pub fn with_sections<S: DeserializeOwned + Default>(
        text: &str,
        own_keys: &[&str],
    ) -> Result<(SilConfig, S), ConfigError> {
        let mapping = match serde_norway::from_str::<Value>(text)? {
            Value::Null => Mapping::new(),
            Value::Mapping(mapping) => mapping,
            _ => return Err(ConfigError::Invalid("expected a mapping of sections".into())),
        };
        let (mut sil, mut own) = (Mapping::new(), Mapping::new());
        for (key, value) in mapping {
            match key.as_str() {
                Some(name) if Self::SECTIONS.contains(&name) => sil.insert(key, value),
                Some(name) if own_keys.contains(&name) => own.insert(key, value),
                _ => {
                    let key = serde_norway::to_string(&key).unwrap_or_default();
                    return Err(ConfigError::Invalid(format!("unknown section `{}`", key.trim())));
                }
            };
        }
        let sil: SilConfig = serde_norway::from_value(Value::Mapping(sil))?;
        sil.validate()?;
        Ok((sil, serde_norway::from_value(Value::Mapping(own))?))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.robot.validate()?;
        self.controller.validate().map_err(ConfigError::Invalid)?;
        self.sensor.validate().map_err(ConfigError::Invalid)?;
        self.integrator.validate().map_err(ConfigError::Invalid)?;
        if !(self.run.frame_rate_hz.is_finite() && self.run.frame_rate_hz >= 0.0) {
            return Err(ConfigError::Invalid(format!(
                "run.frame_rate_hz must be finite and >= 0 (0: a frame per step), got {}",
                self.run.frame_rate_hz
            )));
        }
        if !(self.run.divergence_threshold_m > 0.0) {
            return Err(ConfigError::Invalid(format!(
                "run.divergence_threshold_m must be > 0, got {}",
                self.run.divergence_threshold_m
            )));
        }
        Ok(())
    }
}
