//! Closed-form kinematics (docs/model.md §K; Schreiber & Gosselin 2019).
//!
//! Platform point p [m], joint angles th [rad]. Leg i closes when |b_i(p) - s_i(th_i)| = l_i2.

use super::math::{wrap_angle, Mat3, Vec3};
use super::{Leg, ModelError, Robot};

/// The proximal tips at one set of joint angles: everything K3-K5 and D5 need from the
/// angles, computed once per evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProximalTips {
    /// s_i(th_i) per leg [m] (K1).
    pub positions: [Vec3; 3],
    /// ds_i/dth_i per leg [m/rad] (K1').
    pub derivatives: [Vec3; 3],
}

/// Sines and cosines of the joint angles, which K1 needs once per leg and which were the
/// largest cost of a dynamics evaluation. The integrator's stages fall within |thdot| h (a few
/// mrad) of the last accepted angles; there, rotating the accepted values by the offset is
/// exact to rounding and several times cheaper than `sin_cos`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointTrig {
    /// Joint angles [rad].
    pub theta: Vec3,
    sin: Vec3,
    cos: Vec3,
}

impl JointTrig {
    /// Largest offset taken by rotation [rad]: the series' truncation is then below 1e-21.
    const MAX_OFFSET: f64 = 0.05;

    pub fn new(theta: &Vec3) -> JointTrig {
        let mut trig = JointTrig { theta: *theta, sin: Vec3::zeros(), cos: Vec3::zeros() };
        for i in 0..3 {
            (trig.sin[i], trig.cos[i]) = theta[i].sin_cos();
        }
        trig
    }

    /// The values at `theta` [rad], from these where each angle is within `MAX_OFFSET`:
    /// sin(a + d) = sin a cos d + cos a sin d, cos(a + d) = cos a cos d - sin a sin d, with
    /// sin d and cos d from their Taylor series to d^9 and d^10.
    pub fn near(&self, theta: &Vec3) -> JointTrig {
        let mut trig = JointTrig { theta: *theta, ..*self };
        for i in 0..3 {
            let d = theta[i] - self.theta[i];
            if d.abs() > Self::MAX_OFFSET {
                (trig.sin[i], trig.cos[i]) = theta[i].sin_cos();
                continue;
            }
            let d2 = d * d;
            // Horner form; the constant reciprocals fold at compile time, divisions would not.
            let sin_d = d
                * (1.0
                    - d2 * (1.0 / 6.0)
                        * (1.0 - d2 * (1.0 / 20.0) * (1.0 - d2 * (1.0 / 42.0) * (1.0 - d2 * (1.0 / 72.0)))));
            let cos_d = 1.0
                - d2 * 0.5
                    * (1.0
                        - d2 * (1.0 / 12.0)
                            * (1.0 - d2 * (1.0 / 30.0) * (1.0 - d2 * (1.0 / 56.0) * (1.0 - d2 * (1.0 / 90.0)))));
            trig.sin[i] = self.sin[i] * cos_d + self.cos[i] * sin_d;
            trig.cos[i] = self.cos[i] * cos_d - self.sin[i] * sin_d;
        }
        trig
    }
}

impl Leg {
    /// Proximal tip s(th) = pivot + l1 (cos th a + sin th b) [m] (K1) and ds/dth =
    /// l1 (cos th b - sin th a) [m/rad] (K1'), from sin th and cos th.
    fn tip_and_derivative(&self, sin: f64, cos: f64) -> (Vec3, Vec3) {
        let tip = self.pivot + self.l_proximal * (cos * self.axis_cos + sin * self.axis_sin);
        let derivative = self.l_proximal * (cos * self.axis_sin - sin * self.axis_cos);
        (tip, derivative)
    }

    /// How far the leg is from the edge of its reach at platform point `p` [m]: half the angle
    /// between its two closure roots, or between them the other way round, whichever is less
    /// [rad]. Zero where the roots meet (the leg stretched or folded: the workspace edge);
    /// `None` beyond it.
    fn reach_margin(&self, p: &Vec3) -> Option<f64> {
        let (_, spread) = self.closure_roots(p)?;
        Some(spread.min(std::f64::consts::PI - spread))
    }

    /// Both roots of the leg's closure equation A sin th + B cos th = C (K2), as
    /// (atan2(A, B), acos(C / hypot(A, B))), or `None` when the platform point is out of reach.
    fn closure_roots(&self, p: &Vec3) -> Option<(f64, f64)> {
        let w = p + self.attachment - self.pivot;
        let a = 2.0 * self.l_proximal * w.dot(&self.axis_sin);
        let b = 2.0 * self.l_proximal * w.dot(&self.axis_cos);
        let c = w.norm_squared() + self.l_proximal * self.l_proximal - self.l_distal * self.l_distal;
        // No overflow at robot scales, so the plain root serves instead of hypot.
        let radius = (a * a + b * b).sqrt();
        let ratio = c / radius;
        // The tolerance admits points exactly on the workspace boundary despite rounding.
        if !(radius > 0.0 && ratio.abs() <= 1.0 + 1e-12) {
            return None;
        }
        Some((a.atan2(b), ratio.clamp(-1.0, 1.0).acos()))
    }
}

impl Robot {
    /// Proximal tip s_i(th_i) of leg `leg` (0-based) [m].
    pub fn tip(&self, leg: usize, theta: f64) -> Vec3 {
        let (sin, cos) = theta.sin_cos();
        self.legs[leg].tip_and_derivative(sin, cos).0
    }

    /// The proximal tips and their derivatives at the joint angles of `trig` (K1, K1').
    pub fn proximal_tips(&self, trig: &JointTrig) -> ProximalTips {
        let mut tips = ProximalTips { positions: [Vec3::zeros(); 3], derivatives: [Vec3::zeros(); 3] };
        for (i, leg) in self.legs.iter().enumerate() {
            (tips.positions[i], tips.derivatives[i]) = leg.tip_and_derivative(trig.sin[i], trig.cos[i]);
        }
        tips
    }

    /// Attachment point b_i(p) of leg `leg` on the platform [m].
    pub fn attachment(&self, leg: usize, p: &Vec3) -> Vec3 {
        p + self.legs[leg].attachment
    }

    /// Inverse kinematics of one leg (K2). With a previous angle, returns the root nearest to it,
    /// unwrapped so that the angle is continuous; without, the leg's assembly-mode root in (-pi, pi].
    pub fn inverse_kinematics_leg(&self, leg: usize, p: &Vec3, previous: Option<f64>) -> Result<f64, ModelError> {
        let geometry = &self.legs[leg];
        let (phase, spread) =
            geometry.closure_roots(p).ok_or(ModelError::Unreachable { point: (*p).into(), leg: leg + 1 })?;
        Ok(match previous {
            Some(previous) => {
                let step_plus = wrap_angle(phase + spread - previous);
                let step_minus = wrap_angle(phase - spread - previous);
                let step = if step_plus.abs() <= step_minus.abs() { step_plus } else { step_minus };
                previous + step
            }
            None => wrap_angle(phase + geometry.branch.sign() * spread),
        })
    }

    /// Inverse kinematics of the arm: joint angles [rad] that put the platform at `p` [m].
    pub fn inverse_kinematics(&self, p: &Vec3, previous: Option<&Vec3>) -> Result<Vec3, ModelError> {
        let mut theta = Vec3::zeros();
        for leg in 0..3 {
            theta[leg] = self.inverse_kinematics_leg(leg, p, previous.map(|th| th[leg]))?;
        }
        Ok(theta)
    }

    /// Forward kinematics by intersecting the three spheres |p - (s_i - (b_i - p))| = l_i2 (K3);
    /// of the two roots, the one nearest `near` [m].
    pub fn forward_kinematics(&self, theta: &Vec3, near: &Vec3) -> Result<Vec3, ModelError> {
        self.close_chain(theta, &self.proximal_tips(&JointTrig::new(theta)), near)
    }

    /// Each leg's margin to the edge of its reach at platform point `p` [m] (see
    /// `Leg::reach_margin`) [rad]; `None` when a leg cannot reach `p`.
    pub fn reach_margins(&self, p: &Vec3) -> Option<Vec3> {
        let mut margins = Vec3::zeros();
        for (margin, leg) in margins.iter_mut().zip(&self.legs) {
            *margin = leg.reach_margin(p)?;
        }
        Some(margins)
    }

    /// How far the two roots of K3 lie from the plane of the distal sphere centres at joint
    /// angles `theta` [rad] [m]: zero where they merge (the distal links aligned, the other
    /// workspace edge); an error where the chain does not close.
    pub fn assembly_height(&self, theta: &Vec3) -> Result<f64, ModelError> {
        let (_, offset) = self.sphere_intersection(theta, &self.proximal_tips(&JointTrig::new(theta)))?;
        Ok(offset.norm())
    }

    /// K3 from the tips at joint angles `theta` [rad], already computed.
    pub(super) fn close_chain(&self, theta: &Vec3, tips: &ProximalTips, near: &Vec3) -> Result<Vec3, ModelError> {
        let (centre, offset) = self.sphere_intersection(theta, tips)?;
        let (above, below) = (centre + offset, centre - offset);
        Ok(if (above - near).norm_squared() <= (below - near).norm_squared() { above } else { below })
    }

    /// The two points where the three distal spheres meet, as their midpoint and the offset to
    /// either root [m].
    fn sphere_intersection(&self, theta: &Vec3, tips: &ProximalTips) -> Result<(Vec3, Vec3), ModelError> {
        let centre = |i: usize| tips.positions[i] - self.legs[i].attachment;
        let radius_sq = |i: usize| self.legs[i].l_distal * self.legs[i].l_distal;
        let (q1, q2, q3) = (centre(0), centre(1), centre(2));
        let (u, w) = (q2 - q1, q3 - q1);
        let normal = u.cross(&w);
        let normal_sq = normal.norm_squared();
        if !(normal_sq > 1e-24) {
            return Err(ModelError::Singular {
                theta: (*theta).into(),
                what: "the distal sphere centres are collinear",
            });
        }
        // Relative to q1: 2 u.x = alpha and 2 w.x = beta fix x on a line along `normal`.
        let alpha = radius_sq(0) - radius_sq(1) + u.norm_squared();
        let beta = radius_sq(0) - radius_sq(2) + w.norm_squared();
        let foot = (0.5 * alpha * w.cross(&normal) + 0.5 * beta * normal.cross(&u)) / normal_sq;
        let height_sq = radius_sq(0) - foot.norm_squared();
        if !(height_sq >= 0.0) {
            return Err(ModelError::NoAssembly { theta: (*theta).into() });
        }
        Ok((q1 + foot, normal * (height_sq / normal_sq).sqrt()))
    }

    /// The constraint Jacobians of J pdot = K thdot (K4) at platform point `p` [m]: row i of J
    /// is (b_i - s_i)^T [m], K = diag((b_i - s_i) . ds_i/dth_i) [m^2/rad], returned as its diagonal.
    pub fn constraint_jacobians(&self, p: &Vec3, tips: &ProximalTips) -> (Mat3, Vec3) {
        let mut j = Mat3::zeros();
        let mut k = Vec3::zeros();
        for (i, leg) in self.legs.iter().enumerate() {
            let link = p + leg.attachment - tips.positions[i];
            j.set_row(i, &link.transpose());
            k[i] = link.dot(&tips.derivatives[i]);
        }
        (j, k)
    }

    /// Time derivatives of J and K along a motion (K5): row i of Jdot is (pdot - sdot_i)^T,
    /// Kdot_i = (pdot - sdot_i) . ds_i/dth_i + (b_i - s_i) . d2s_i/dth_i2 thdot_i, where
    /// d2s_i/dth_i2 = pivot_i - s_i (K1'').
    pub fn constraint_jacobian_rates(
        &self,
        p: &Vec3,
        tips: &ProximalTips,
        p_dot: &Vec3,
        theta_dot: &Vec3,
    ) -> (Mat3, Vec3) {
        let mut j_dot = Mat3::zeros();
        let mut k_dot = Vec3::zeros();
        for (i, leg) in self.legs.iter().enumerate() {
            let link = p + leg.attachment - tips.positions[i];
            let second_derivative = leg.pivot - tips.positions[i];
            let link_rate = p_dot - tips.derivatives[i] * theta_dot[i];
            j_dot.set_row(i, &link_rate.transpose());
            k_dot[i] = link_rate.dot(&tips.derivatives[i]) + link.dot(&second_derivative) * theta_dot[i];
        }
        (j_dot, k_dot)
    }

    /// The motor axis of leg `leg` (unit, world frame) and the proximal link's direction at
    /// th = 0: the link turns by th about the axis, as in the URDF.
    pub fn leg_frame(&self, leg: usize) -> (Vec3, Vec3) {
        let geometry = &self.legs[leg];
        (geometry.axis_cos.cross(&geometry.axis_sin), geometry.axis_cos)
    }
}
