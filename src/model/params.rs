//! Robot parameters: the geometry and masses of the parallel arm (docs/model.md, its table of parameters).
//!
//! Defaults are the lab's robot (docs/model.md). Every quantity is SI: lengths [m], masses [kg],
//! gravity [m/s^2]. Arrays are indexed by leg (0 = leg 1, 1 = leg 2, 2 = leg 3).

use serde::{Deserialize, Serialize};

use super::ModelError;

/// Which root of a leg's closure equation `A sin th + B cos th = C` the arm is assembled in.
///
/// The two roots are `th = atan2(A, B) ± acos(C / hypot(A, B))`; `Plus` takes `+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Branch {
    Plus,
    Minus,
}

impl Branch {
    pub fn sign(self) -> f64 {
        match self {
            Branch::Plus => 1.0,
            Branch::Minus => -1.0,
        }
    }
}

/// Geometry and masses of the 3-DOF translational parallel arm and its forearm payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RobotParams {
    /// Height of the distal-link attachments above the platform point, before `v` [m]. Default 0.5.
    pub d: f64,
    /// Per-leg downward offset of the attachment: b_i = p + (0, 0, d - v_i) [m]. Default (0.30, 0.25, 0.00).
    pub v: [f64; 3],
    /// Height of each motor axis [m]. Default (0.40, 0.45, 1.00).
    pub h: [f64; 3],
    /// Proximal link lengths l_i1 [m]. Default 0.2 each.
    pub l_proximal: [f64; 3],
    /// Distal link lengths l_i2 [m]. Default (0.2, 0.2, 0.5).
    pub l_distal: [f64; 3],
    /// Proximal link masses m_i1 [kg]. Default 0.3 each.
    pub m_proximal: [f64; 3],
    /// Distal link masses m_i2 [kg]. Default (0.3, 0.3, 0.75).
    pub m_distal: [f64; 3],
    /// Platform mass m_d [kg]. Default 0.75.
    pub m_platform: f64,
    /// Forearm (payload) mass m_arm [kg]. Default 2.5.
    pub m_arm: f64,
    /// Elbow pivot of the forearm, world frame [m]. Default (0.35, 0.35, 0.0).
    pub elbow: [f64; 3],
    /// Forearm length, elbow to platform point [m]. Default 0.45.
    pub l_arm: f64,
    /// Gravitational acceleration along -z [m/s^2]. Default 9.81.
    pub gravity: f64,
    /// Assembly mode of each leg when no previous solution is known. Default (minus, plus, plus),
    /// the reference robot's (docs/model.md's test vector).
    pub assembly: [Branch; 3],
}

impl Default for RobotParams {
    fn default() -> Self {
        RobotParams {
            d: 0.5,
            v: [0.30, 0.25, 0.00],
            h: [0.40, 0.45, 1.00],
            l_proximal: [0.2, 0.2, 0.2],
            l_distal: [0.2, 0.2, 0.5],
            m_proximal: [0.3, 0.3, 0.3],
            m_distal: [0.3, 0.3, 0.75],
            m_platform: 0.75,
            m_arm: 2.5,
            elbow: [0.35, 0.35, 0.0],
            l_arm: 0.45,
            gravity: 9.81,
            assembly: [Branch::Minus, Branch::Plus, Branch::Plus],
        }
    }
}

impl RobotParams {
    /// Checks that every value is finite, lengths are positive and masses are not negative.
    pub fn validate(&self) -> Result<(), ModelError> {
        fn check(name: &'static str, values: &[f64], ok: fn(f64) -> bool) -> Result<(), ModelError> {
            match values.iter().find(|&&value| !ok(value)) {
                Some(&value) => Err(ModelError::InvalidParameter { name, value }),
                None => Ok(()),
            }
        }
        let finite = |x: f64| x.is_finite();
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        check("d", &[self.d], finite)?;
        check("v", &self.v, finite)?;
        check("h", &self.h, finite)?;
        check("elbow", &self.elbow, finite)?;
        check("gravity", &[self.gravity], finite)?;
        check("l_proximal", &self.l_proximal, positive)?;
        check("l_distal", &self.l_distal, positive)?;
        check("l_arm", &[self.l_arm], positive)?;
        check("m_proximal", &self.m_proximal, non_negative)?;
        check("m_distal", &self.m_distal, non_negative)?;
        check("m_platform", &[self.m_platform], non_negative)?;
        check("m_arm", &[self.m_arm], non_negative)
    }
}
