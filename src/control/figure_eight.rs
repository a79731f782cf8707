//! A figure eight on the forearm sphere: a 1:2 Lissajous curve in the spherical angles about
//! a centre direction, from rest to rest. Unlike the arc it turns, reverses its curvature and
//! crosses itself, so it exercises every joint in both directions.

use serde::{Deserialize, Serialize};

use super::profile::Trapezoid;
use super::trajectory::Waypoint;
use crate::model::math::{spherical_direction, Vec3};

/// A figure eight seen from the elbow. With the curve parameter u in [0, 2 pi]:
/// polar angle = centre + a sin 2u, azimuth = centre + b sin u.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureEightSpec {
    /// Centre direction: polar angle from +z and azimuth from +x [deg]. Default (70, -115).
    pub centre_deg: [f64; 2],
    /// Half-widths a (polar) and b (azimuth) [deg]. Default (5, 15).
    pub amplitude_deg: [f64; 2],
    /// Peak rate of the curve parameter u [rad/s]. Default 0.5 (one loop in about 13.6 s).
    pub max_rate_rad_s: f64,
    /// Acceleration of u [rad/s^2]. Default 0.5.
    pub max_accel_rad_s2: f64,
    /// Waypoints per radian of u. Default 600.
    pub waypoints_per_radian: f64,
    /// Time of the first waypoint [s]. Default 0.
    pub start_time_s: f64,
}

impl Default for FigureEightSpec {
    /// Centred on the default arc's band of the workspace, 30 degrees wide in azimuth; wider
    /// ones near (8, 20) pass a singular configuration (ideal torques of hundreds of N m).
    fn default() -> Self {
        FigureEightSpec {
            centre_deg: [70.0, -115.0],
            amplitude_deg: [5.0, 15.0],
            max_rate_rad_s: 0.5,
            max_accel_rad_s2: 0.5,
            waypoints_per_radian: 600.0,
            start_time_s: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FigureEightError {
    #[error("{name} must be finite and > 0, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    #[error("the figure eight's centre, amplitudes and start time must be finite")]
    NotFinite,
}

/// The unit direction d(polar, azimuth) and its first and second partial derivatives.
struct SphericalPartials {
    d: Vec3,
    d_polar: Vec3,
    d_azimuth: Vec3,
    d_polar_azimuth: Vec3,
    d_azimuth_azimuth: Vec3,
}

impl SphericalPartials {
    fn at(polar: f64, azimuth: f64) -> SphericalPartials {
        let (sin_p, cos_p) = polar.sin_cos();
        let (sin_a, cos_a) = azimuth.sin_cos();
        SphericalPartials {
            d: spherical_direction(polar, azimuth),
            d_polar: Vec3::new(cos_p * cos_a, cos_p * sin_a, -sin_p),
            d_azimuth: Vec3::new(-sin_p * sin_a, sin_p * cos_a, 0.0),
            d_polar_azimuth: Vec3::new(-cos_p * sin_a, cos_p * cos_a, 0.0),
            d_azimuth_azimuth: Vec3::new(-sin_p * cos_a, -sin_p * sin_a, 0.0),
        }
    }
}

impl FigureEightSpec {
    /// The waypoints about `elbow` [m] on the sphere of radius `l_arm` [m], evenly spaced in u.
    pub fn waypoints(&self, elbow: &Vec3, l_arm: f64) -> Result<Vec<Waypoint>, FigureEightError> {
        for (name, value) in [
            ("max_rate_rad_s", self.max_rate_rad_s),
            ("max_accel_rad_s2", self.max_accel_rad_s2),
            ("waypoints_per_radian", self.waypoints_per_radian),
            ("l_arm", l_arm),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(FigureEightError::NotPositive { name, value });
            }
        }
        let angles = self.centre_deg.iter().chain(&self.amplitude_deg);
        if !(angles.chain([&self.start_time_s]).all(|value| value.is_finite())) {
            return Err(FigureEightError::NotFinite);
        }
        let loop_length = std::f64::consts::TAU;
        let profile = Trapezoid::new(loop_length, self.max_rate_rad_s, self.max_accel_rad_s2);
        let [centre_polar, centre_azimuth] = self.centre_deg.map(f64::to_radians);
        let [a, b] = self.amplitude_deg.map(f64::to_radians);
        let intervals = (loop_length * self.waypoints_per_radian).ceil() as usize;
        Ok((0..=intervals)
            .map(|k| {
                let u = loop_length * k as f64 / intervals as f64;
                let (t, u_dot, u_ddot) = profile.at_distance(u);
                let (sin_u, cos_u) = u.sin_cos();
                let (sin_2u, cos_2u) = (2.0 * u).sin_cos();
                let (polar, polar_u, polar_uu) = (centre_polar + a * sin_2u, 2.0 * a * cos_2u, -4.0 * a * sin_2u);
                let (azimuth, azimuth_u, azimuth_uu) = (centre_azimuth + b * sin_u, b * cos_u, -b * sin_u);
                let d = SphericalPartials::at(polar, azimuth);
                // d_polar_polar = -d on the unit sphere.
                let d_u = d.d_polar * polar_u + d.d_azimuth * azimuth_u;
                let d_uu = -d.d * (polar_u * polar_u)
                    + d.d_polar_azimuth * (2.0 * polar_u * azimuth_u)
                    + d.d_azimuth_azimuth * (azimuth_u * azimuth_u)
                    + d.d_polar * polar_uu
                    + d.d_azimuth * azimuth_uu;
                Waypoint {
                    t: self.start_time_s + t,
                    x: elbow + d.d * l_arm,
                    xd: d_u * (l_arm * u_dot),
                    xdd: (d_uu * (u_dot * u_dot) + d_u * u_ddot) * l_arm,
                }
            })
            .collect())
    }
}
