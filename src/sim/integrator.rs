//! The embedded Bogacki-Shampine 3(2) pair with FSAL and step-size control (docs/model.md §S1;
//! Bogacki & Shampine 1989).

use nalgebra::SVector;
use serde::{Deserialize, Serialize};

/// Step-size settings. The defaults let the error control choose the steps between control
/// ticks (docs/model.md §S1 has the convergence study behind them); dt_max = 5e-5 gives the
/// reference simulator's fixed 50 us steps (examples/fixed_steps.yaml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IntegratorConfig {
    /// First step [s]. Default 1e-6.
    pub dt0: f64,
    /// Smallest step; a step rejected at this size stops the run [s]. Default 1e-8.
    pub dt_min: f64,
    /// Largest step [s]. Default 1e-2: a backstop, since steps end on control ticks anyway.
    pub dt_max: f64,
    /// Relative error tolerance per step. Default 1e-6.
    pub rtol: f64,
    /// Absolute error tolerance per step [rad, rad/s]. Default 1e-9.
    pub atol: f64,
}

impl Default for IntegratorConfig {
    fn default() -> Self {
        IntegratorConfig { dt0: 1e-6, dt_min: 1e-8, dt_max: 1e-2, rtol: 1e-6, atol: 1e-9 }
    }
}

impl IntegratorConfig {
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("dt0", self.dt0),
            ("dt_min", self.dt_min),
            ("dt_max", self.dt_max),
            ("rtol", self.rtol),
            ("atol", self.atol),
        ];
        if let Some((name, value)) = positive.iter().find(|(_, value)| !(value.is_finite() && *value > 0.0)) {
            return Err(format!("integrator.{name} must be finite and > 0, got {value}"));
        }
        if !(self.dt_min <= self.dt0 && self.dt0 <= self.dt_max) {
            return Err(format!(
                "integrator steps must satisfy dt_min <= dt0 <= dt_max, got {} <= {} <= {}",
                self.dt_min, self.dt0, self.dt_max
            ));
        }
        Ok(())
    }
}

/// A system y' = f(t, y) of N states.
pub trait OdeSystem<const N: usize> {
    type Error;
    fn derivative(&mut self, t: f64, y: &SVector<f64, N>) -> Result<SVector<f64, N>, Self::Error>;
}

/// What one attempted step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepOutcome<const N: usize> {
    /// The step was within tolerance: the state at `t` = start + `dt`, and the solution across
    /// the step.
    Accepted { t: f64, y: SVector<f64, N>, dt: f64, dense: DenseOutput<N> },
    /// The error estimate was too large; the next attempt uses a smaller step.
    Rejected,
}

/// The solution inside one accepted step: the cubic Hermite interpolant through both ends'
/// states and derivatives, Bogacki-Shampine's third-order continuous extension (S1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DenseOutput<const N: usize> {
    /// Start of the step [s].
    pub t0: f64,
    /// Length of the step [s].
    pub h: f64,
    y0: SVector<f64, N>,
    y1: SVector<f64, N>,
    f0: SVector<f64, N>,
    f1: SVector<f64, N>,
}

impl<const N: usize> DenseOutput<N> {
    /// The state at `t` in [t0, t0 + h]: with s = (t - t0) / h,
    /// y = (2s^3 - 3s^2 + 1) y0 + (s^3 - 2s^2 + s) h f0 + (3s^2 - 2s^3) y1 + (s^3 - s^2) h f1.
    pub fn at(&self, t: f64) -> SVector<f64, N> {
        let s = (t - self.t0) / self.h;
        let (s2, s3) = (s * s, s * s * s);
        self.y0 * (2.0 * s3 - 3.0 * s2 + 1.0)
            + self.f0 * ((s3 - 2.0 * s2 + s) * self.h)
            + self.y1 * (3.0 * s2 - 2.0 * s3)
            + self.f1 * ((s3 - s2) * self.h)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IntegratorError<E> {
    #[error("step size underflow: a step of {dt:e} s at t = {t} s still misses the tolerance")]
    StepUnderflow { t: f64, dt: f64 },
    #[error(transparent)]
    System(E),
}

/// The integrator's state: the proposed step and the FSAL derivative.
#[derive(Debug, Clone)]
pub struct BogackiShampine<const N: usize> {
    config: IntegratorConfig,
    dt: f64,
    /// f(t, y) at the start of the next step, from the last stage of the previous one (FSAL).
    first_stage: Option<SVector<f64, N>>,
}

impl<const N: usize> BogackiShampine<N> {
    const SAFETY: f64 = 0.9;
    const MIN_FACTOR: f64 = 0.2;
    const MAX_FACTOR: f64 = 5.0;

    pub fn new(config: IntegratorConfig) -> BogackiShampine<N> {
        BogackiShampine { dt: config.dt0, config, first_stage: None }
    }

    /// Forgets the FSAL derivative: call when f changes discontinuously (a new held torque).
    pub fn invalidate(&mut self) {
        self.first_stage = None;
    }

    /// Attempts one step from (t, y), no longer than `dt_limit` [s] (so steps end on control
    /// ticks and at the end of the run). Stages (S1): k1 = f(t, y), k2 = f(t + h/2, y + h k1 / 2),
    /// k3 = f(t + 3h/4, y + 3h k2 / 4), y3 = y + h (2 k1 + 3 k2 + 4 k3) / 9, k4 = f(t + h, y3);
    /// error = h (-5 k1 / 72 + k2 / 12 + k3 / 9 - k4 / 8).
    pub fn step<S: OdeSystem<N>>(
        &mut self,
        system: &mut S,
        t: f64,
        y: &SVector<f64, N>,
        dt_limit: f64,
    ) -> Result<StepOutcome<N>, IntegratorError<S::Error>> {
        let limited = dt_limit < self.dt;
        let h = if limited { dt_limit } else { self.dt };
        let k1 = match self.first_stage {
            Some(k1) => k1,
            None => system.derivative(t, y).map_err(IntegratorError::System)?,
        };
        let k2 = system.derivative(t + 0.5 * h, &(y + k1 * (0.5 * h))).map_err(IntegratorError::System)?;
        let k3 = system.derivative(t + 0.75 * h, &(y + k2 * (0.75 * h))).map_err(IntegratorError::System)?;
        let y_next = y + (k1 * 2.0 + k2 * 3.0 + k3 * 4.0) * (h / 9.0);
        let k4 = system.derivative(t + h, &y_next).map_err(IntegratorError::System)?;
        let error = (k1 * (-5.0 / 72.0) + k2 * (1.0 / 12.0) + k3 * (1.0 / 9.0) - k4 * 0.125) * h;
        let error_ratio = self.error_ratio(&error, y, &y_next);
        let factor = if error_ratio > 0.0 {
            (Self::SAFETY / error_ratio.cbrt()).clamp(Self::MIN_FACTOR, Self::MAX_FACTOR)
        } else {
            Self::MAX_FACTOR
        };
        if error_ratio <= 1.0 {
            // A step shortened to meet a limit says nothing against the longer proposal.
            let proposal = h * factor;
            self.dt =
                if limited { self.dt.max(proposal) } else { proposal }.clamp(self.config.dt_min, self.config.dt_max);
            self.first_stage = Some(k4);
            let dense = DenseOutput { t0: t, h, y0: *y, y1: y_next, f0: k1, f1: k4 };
            return Ok(StepOutcome::Accepted { t: t + h, y: y_next, dt: h, dense });
        }
        self.first_stage = Some(k1);
        if h <= self.config.dt_min {
            return Err(IntegratorError::StepUnderflow { t, dt: h });
        }
        self.dt = (h * factor).clamp(self.config.dt_min, self.config.dt_max);
        Ok(StepOutcome::Rejected)
    }

    /// max_i |e_i| / (atol + rtol max(|y_i|, |y_next_i|)); NaN counts as too large.
    fn error_ratio(&self, error: &SVector<f64, N>, y: &SVector<f64, N>, y_next: &SVector<f64, N>) -> f64 {
        let mut worst: f64 = 0.0;
        for i in 0..N {
            let scale = self.config.atol + self.config.rtol * y[i].abs().max(y_next[i].abs());
            let ratio = error[i].abs() / scale;
            if ratio.is_nan() {
                return f64::INFINITY;
            }
            worst = worst.max(ratio);
        }
        worst
    }
}
