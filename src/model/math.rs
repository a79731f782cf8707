//! The crate's one math vocabulary: fixed-size, stack-allocated nalgebra types.

/// A 3-vector: a point or direction [m], joint angles [rad], torques [N m].
pub type Vec3 = nalgebra::Vector3<f64>;
/// A 3x3 matrix: constraint Jacobians, the mass matrix.
pub type Mat3 = nalgebra::Matrix3<f64>;

/// Wraps an angle to (-pi, pi] [rad].
pub fn wrap_angle(angle: f64) -> f64 {
    use std::f64::consts::{PI, TAU};
    // Most angles are already in range; rem_euclid is a library call.
    if angle > -PI && angle <= PI {
        return angle;
    }
    let wrapped = (angle + PI).rem_euclid(TAU) - PI;
    if wrapped == -PI {
        PI
    } else {
        wrapped
    }
}

/// Unit vector of the spherical angles: polar angle theta from +z, azimuth phi from +x [rad].
pub fn spherical_direction(theta: f64, phi: f64) -> Vec3 {
    let (sin_theta, cos_theta) = theta.sin_cos();
    let (sin_phi, cos_phi) = phi.sin_cos();
    Vec3::new(sin_theta * cos_phi, sin_theta * sin_phi, cos_theta)
}

/// The unit vector along `v`, or zero when `v` is (nearly) zero: a direction of motion that is
/// zero at rest.
pub fn direction_or_zero(v: &Vec3) -> Vec3 {
    v.try_normalize(1e-12).unwrap_or_else(Vec3::zeros)
}
