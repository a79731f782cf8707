//! The robot: parameters, kinematics and dynamics of the 3-DOF translational parallel arm
//! that carries the far end of a prosthetic forearm (docs/model.md).
//!
//! Architecture invariant: no I/O, no clock, no heap in any per-step function. Every
//! function here is pure over fixed-size nalgebra types; equations are numbered as in
//! docs/model.md.

mod dynamics;
mod kinematics;
pub mod math;
mod params;

pub use dynamics::{ArmMotion, FactoredDynamics};
pub use kinematics::{JointTrig, ProximalTips};
pub use params::{Branch, RobotParams};

use math::Vec3;

/// What can go wrong when the model is built or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("robot parameter `{name}` has an invalid value ({value})")]
    InvalidParameter { name: &'static str, value: f64 },
    #[error("point ({:.6}, {:.6}, {:.6}) m is outside the workspace: leg {leg} cannot reach it", point[0], point[1], point[2])]
    Unreachable { point: [f64; 3], leg: usize },
    #[error("joint angles ({:.6}, {:.6}, {:.6}) rad do not close the chain: the distal links cannot meet", theta[0], theta[1], theta[2])]
    NoAssembly { theta: [f64; 3] },
    #[error("singular configuration at joint angles ({:.6}, {:.6}, {:.6}) rad: {what}", theta[0], theta[1], theta[2])]
    Singular { theta: [f64; 3], what: &'static str },
}

/// One leg: a motor-driven proximal link and a distal link to the platform.
///
/// The proximal tip moves on a circle, s(th) = pivot + l1 (cos th a + sin th b) (docs/model.md K1),
/// which covers both the horizontal legs 1, 2 and the vertical leg 3 (docs/model.md K1).
#[derive(Debug, Clone, Copy)]
struct Leg {
    /// Centre of the proximal circle, on the motor axis [m].
    pivot: Vec3,
    /// Unit vector from the pivot to the tip at th = 0.
    axis_cos: Vec3,
    /// Unit vector from the pivot to the tip at th = pi/2.
    axis_sin: Vec3,
    /// Proximal length l_i1 [m].
    l_proximal: f64,
    /// Distal length l_i2 [m].
    l_distal: f64,
    /// Attachment offset from the platform point, b_i - p = (0, 0, d - v_i) [m].
    attachment: Vec3,
    branch: Branch,
}

/// The robot model: parameters plus the quantities derived from them once.
#[derive(Debug, Clone)]
pub struct Robot {
    params: RobotParams,
    legs: [Leg; 3],
    /// Equivalent point mass at the platform point [kg] (docs/model.md D0).
    platform_mass: f64,
    /// Equivalent point mass at each proximal tip [kg] (docs/model.md D0).
    tip_mass: Vec3,
}

impl Robot {
    /// Builds the model after checking the parameters.
    pub fn new(params: RobotParams) -> Result<Robot, ModelError> {
        params.validate()?;
        let leg = |i: usize, axis_cos: Vec3, axis_sin: Vec3| Leg {
            pivot: Vec3::new(0.0, 0.0, params.h[i]),
            axis_cos,
            axis_sin,
            l_proximal: params.l_proximal[i],
            l_distal: params.l_distal[i],
            attachment: Vec3::new(0.0, 0.0, params.d - params.v[i]),
            branch: params.assembly[i],
        };
        // Legs 1 and 2 turn in horizontal planes: s = (-l sin th, l cos th, h).
        // Leg 3 turns in the XZ plane: s = (l sin th, 0, h - l cos th).
        let legs = [leg(0, Vec3::y(), -Vec3::x()), leg(1, Vec3::y(), -Vec3::x()), leg(2, -Vec3::z(), Vec3::x())];
        let half_distal: f64 = params.m_distal.iter().sum::<f64>() / 2.0;
        let platform_mass = params.m_platform + half_distal + params.m_arm / 2.0;
        let tip_mass = Vec3::from_fn(|i, _| (params.m_proximal[i] + params.m_distal[i]) / 2.0);
        Ok(Robot { params, legs, platform_mass, tip_mass })
    }

    pub fn params(&self) -> &RobotParams {
        &self.params
    }

    /// Elbow pivot of the forearm from the parameters [m].
    pub fn elbow(&self) -> Vec3 {
        Vec3::from(self.params.elbow)
    }

    /// How far the platform point `p` [m] lies off the forearm's sphere [m]: the forearm pivots at
    /// the elbow and its far end rides on the platform, so the rig keeps p at l_arm from the
    /// elbow; positive outside the sphere.
    pub fn forearm_sphere_offset(&self, p: &Vec3) -> f64 {
        (p - self.elbow()).norm() - self.params.l_arm
    }

    /// Equivalent point mass carried by the platform point [kg].
    pub fn platform_mass(&self) -> f64 {
        self.platform_mass
    }
}

impl Default for Robot {
    fn default() -> Self {
        Robot::new(RobotParams::default()).expect("the reference parameters are valid")
    }
}
