//! Dynamics of the equivalent-point-mass model from one Lagrangian (docs/model.md §D;
//! Zhou & Gosselin 2024). Every link is two point masses, half at each end.

use nalgebra::{Cholesky, U3};

use super::kinematics::{JointTrig, ProximalTips};
use super::math::{Mat3, Vec3};
use super::{ModelError, Robot};

/// One instant of the arm's motion with the kinematic quantities the dynamics need,
/// computed once and shared by the mass matrix, velocity terms and gravity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmMotion {
    /// Joint angles [rad].
    pub theta: Vec3,
    /// Joint rates [rad/s].
    pub theta_dot: Vec3,
    /// ds_i/dth_i per leg at `theta` [m/rad] (K1').
    pub tip_derivatives: [Vec3; 3],
    /// Platform point, world frame [m].
    pub p: Vec3,
    /// Platform velocity [m/s].
    pub p_dot: Vec3,
    /// Constraint Jacobian J [m] (K4).
    pub j: Mat3,
    /// Diagonal of the constraint Jacobian K [m^2/rad] (K4).
    pub k: Vec3,
    /// A = J^-1 diag(K), so that pdot = A thdot [m/rad] (D1).
    pub velocity_map: Mat3,
    /// Adot thdot = J^-1 (Kdot thdot - Jdot pdot): the platform acceleration at zero joint
    /// acceleration [m/s^2] (D2).
    pub acceleration_bias: Vec3,
}

impl Robot {
    /// The motion at joint state (th, thdot); forward kinematics picks the root nearest `near`.
    pub fn motion_from_joints(&self, theta: &Vec3, theta_dot: &Vec3, near: &Vec3) -> Result<ArmMotion, ModelError> {
        self.motion_from_trig(&JointTrig::new(theta), theta_dot, near)
    }

    /// `motion_from_joints` with the joint angles' sines and cosines at hand.
    pub fn motion_from_trig(&self, trig: &JointTrig, theta_dot: &Vec3, near: &Vec3) -> Result<ArmMotion, ModelError> {
        let theta = &trig.theta;
        let tips = self.proximal_tips(trig);
        let p = self.close_chain(theta, &tips, near)?;
        let (j, k) = self.constraint_jacobians(&p, &tips);
        let j_inv = self.invert_j(&j, theta)?;
        let p_dot = j_inv * k.component_mul(theta_dot);
        Ok(self.complete_motion(*theta, *theta_dot, &tips, p, p_dot, j, k, j_inv))
    }

    /// The motion at task state (p, pdot): th by inverse kinematics continuous with `previous`,
    /// thdot = K^-1 J pdot with K inverted with damping `damping` [m^2/rad] (0: exact).
    pub fn motion_from_task(
        &self,
        p: &Vec3,
        p_dot: &Vec3,
        previous: Option<&Vec3>,
        damping: f64,
    ) -> Result<ArmMotion, ModelError> {
        let theta = self.inverse_kinematics(p, previous)?;
        let tips = self.proximal_tips(&JointTrig::new(&theta));
        let (j, k) = self.constraint_jacobians(p, &tips);
        let j_inv = self.invert_j(&j, &theta)?;
        let theta_dot = damped_inverse(&k, damping).component_mul(&(j * p_dot));
        if !theta_dot.iter().all(|x| x.is_finite()) {
            return Err(ModelError::Singular { theta: theta.into(), what: "K is singular" });
        }
        Ok(self.complete_motion(theta, theta_dot, &tips, *p, *p_dot, j, k, j_inv))
    }

    fn invert_j(&self, j: &Mat3, theta: &Vec3) -> Result<Mat3, ModelError> {
        j.try_inverse()
            .filter(|inverse| inverse.iter().all(|x| x.is_finite()))
            .ok_or(ModelError::Singular { theta: (*theta).into(), what: "J is singular" })
    }

    #[allow(clippy::too_many_arguments)]
    fn complete_motion(
        &self,
        theta: Vec3,
        theta_dot: Vec3,
        tips: &ProximalTips,
        p: Vec3,
        p_dot: Vec3,
        j: Mat3,
        k: Vec3,
        j_inv: Mat3,
    ) -> ArmMotion {
        let (j_dot, k_dot) = self.constraint_jacobian_rates(&p, tips, &p_dot, &theta_dot);
        ArmMotion {
            theta,
            theta_dot,
            tip_derivatives: tips.derivatives,
            p,
            p_dot,
            j,
            k,
            velocity_map: j_inv * Mat3::from_diagonal(&k),
            acceleration_bias: j_inv * (k_dot.component_mul(&theta_dot) - j_dot * p_dot),
        }
    }

    /// Joint inertia of the tip masses, diag(m_si l_i1^2) [kg m^2] (D1).
    fn tip_inertia(&self) -> Vec3 {
        Vec3::from_fn(|i, _| self.tip_mass[i] * self.params.l_proximal[i] * self.params.l_proximal[i])
    }

    /// Mass matrix M(th) = diag(m_si l_i1^2) + m_P A^T A [kg m^2] (D3).
    pub fn mass_matrix(&self, motion: &ArmMotion) -> Mat3 {
        let a = &motion.velocity_map;
        Mat3::from_diagonal(&self.tip_inertia()) + self.platform_mass * a.transpose() * a
    }

    /// Velocity-product terms c(th, thdot) = m_P A^T (Adot thdot) [N m] (D4).
    pub fn velocity_terms(&self, motion: &ArmMotion) -> Vec3 {
        self.platform_mass * motion.velocity_map.transpose() * motion.acceleration_bias
    }

    /// Gravity torques G(th) = g (m_P A^T e_z + m_si (ds_i/dth_i)_z) [N m] (D5).
    pub fn gravity_torques(&self, motion: &ArmMotion) -> Vec3 {
        let tip_lift = Vec3::from_fn(|i, _| motion.tip_derivatives[i].z);
        self.params.gravity
            * (self.platform_mass * motion.velocity_map.row(2).transpose() + self.tip_mass.component_mul(&tip_lift))
    }

    /// Inverse dynamics tau = M thdd + c + G [N m] (D6).
    pub fn inverse_dynamics(&self, motion: &ArmMotion, theta_ddot: &Vec3) -> Vec3 {
        self.mass_matrix(motion) * theta_ddot + self.velocity_terms(motion) + self.gravity_torques(motion)
    }

    /// Forward dynamics thdd = M^-1 (tau - c - G) [rad/s^2] (D7).
    pub fn forward_dynamics(&self, motion: &ArmMotion, tau: &Vec3) -> Result<Vec3, ModelError> {
        Ok(self.factored_dynamics(motion)?.joint_acceleration(tau))
    }

    /// M factored and c + G at one motion, for D7 at any torque.
    pub fn factored_dynamics(&self, motion: &ArmMotion) -> Result<FactoredDynamics, ModelError> {
        let mass = self.mass_matrix(motion).cholesky().ok_or(ModelError::Singular {
            theta: motion.theta.into(),
            what: "the mass matrix is not positive definite",
        })?;
        Ok(FactoredDynamics { mass, bias: self.velocity_terms(motion) + self.gravity_torques(motion) })
    }

    /// Joint accelerations that produce platform acceleration `p_ddot` [m/s^2]:
    /// thdd = K^+ (J pdd + Jdot pdot - Kdot thdot) = K^+ J (pdd - Adot thdot) [rad/s^2] (K6 with
    /// D2), K inverted with `damping`.
    pub fn joint_acceleration(&self, motion: &ArmMotion, p_ddot: &Vec3, damping: f64) -> Vec3 {
        let rhs = motion.j * (p_ddot - motion.acceleration_bias);
        damped_inverse(&motion.k, damping).component_mul(&rhs)
    }

    /// Kinetic energy T = (m_P |pdot|^2 + sum m_si l_i1^2 thdot_i^2) / 2 [J] (D0).
    pub fn kinetic_energy(&self, motion: &ArmMotion) -> f64 {
        0.5 * (self.platform_mass * motion.p_dot.norm_squared()
            + self.tip_inertia().dot(&motion.theta_dot.component_mul(&motion.theta_dot)))
    }

    /// Potential energy V = g (m_P z + sum m_si z_si) [J], zero at z = 0 (D0).
    pub fn potential_energy(&self, motion: &ArmMotion) -> f64 {
        let tips_z = Vec3::from_fn(|i, _| self.tip(i, motion.theta[i]).z);
        self.params.gravity * (self.platform_mass * motion.p.z + self.tip_mass.dot(&tips_z))
    }
}

/// The equations of motion at one motion with the torque left open: a new held torque at the
/// same state costs one 3x3 solve instead of a dynamics evaluation.
#[derive(Debug, Clone, Copy)]
pub struct FactoredDynamics {
    /// Cholesky factor of M(th) [kg m^2] (D3).
    mass: Cholesky<f64, U3>,
    /// c(th, thdot) + G(th) [N m] (D4, D5).
    bias: Vec3,
}

impl FactoredDynamics {
    /// thdd = M^-1 (tau - c - G) [rad/s^2] (D7).
    pub fn joint_acceleration(&self, tau: &Vec3) -> Vec3 {
        self.mass.solve(&(tau - self.bias))
    }
}

/// Element-wise damped inverse k / (k^2 + damping^2) of a diagonal matrix given as a vector.
fn damped_inverse(diagonal: &Vec3, damping: f64) -> Vec3 {
    diagonal.map(|k| k / (k * k + damping * damping))
}
