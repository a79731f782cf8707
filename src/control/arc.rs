//! The lab's GUI's test motion: a great-circle arc on the forearm sphere (radius l_arm
//! about the elbow) between two spherical directions, with a trapezoidal angular speed.

use serde::{Deserialize, Serialize};

use super::profile::Trapezoid;
use super::trajectory::Waypoint;
use crate::model::math::{spherical_direction, Vec3};

/// An arc between two directions seen from the elbow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArcSpec {
    /// Start direction: polar angle from +z and azimuth from +x [deg].
    pub from_deg: [f64; 2],
    /// End direction [deg].
    pub to_deg: [f64; 2],
    /// Peak angular speed along the arc [deg/s]. Default 5.
    pub max_speed_deg_s: f64,
    /// Angular acceleration and deceleration [deg/s^2]. Default 10.
    pub max_accel_deg_s2: f64,
    /// Waypoint density along the arc [1/deg]. Default 100.
    pub waypoints_per_degree: f64,
    /// Time of the first waypoint [s]. Default 0.
    pub start_time_s: f64,
}

impl Default for ArcSpec {
    /// A 46.8 degree arc, 9.86 s long, across the band of the workspace where holding the arm
    /// takes little torque: at most (1.5, 1.9, 7.9) N m, inside what the lab's rig's
    /// steppers give safely (3.6, 3.6, 72) N m.
    fn default() -> Self {
        ArcSpec {
            from_deg: [70.0, -140.0],
            to_deg: [70.0, -90.0],
            max_speed_deg_s: 5.0,
            max_accel_deg_s2: 10.0,
            waypoints_per_degree: 100.0,
            start_time_s: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArcError {
    #[error("{name} must be finite and > 0, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    #[error("the arc's end directions must be finite and neither equal nor opposite")]
    Degenerate,
}

impl ArcSpec {
    /// The waypoints of the arc about `elbow` [m] with radius `l_arm` [m], evenly spaced in angle.
    pub fn waypoints(&self, elbow: &Vec3, l_arm: f64) -> Result<Vec<Waypoint>, ArcError> {
        for (name, value) in [
            ("max_speed_deg_s", self.max_speed_deg_s),
            ("max_accel_deg_s2", self.max_accel_deg_s2),
            ("waypoints_per_degree", self.waypoints_per_degree),
            ("l_arm", l_arm),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ArcError::NotPositive { name, value });
            }
        }
        let direction = |[theta, phi]: [f64; 2]| spherical_direction(theta.to_radians(), phi.to_radians());
        let (start, end) = (direction(self.from_deg), direction(self.to_deg));
        let angle = start.cross(&end).norm().atan2(start.dot(&end));
        let normal_part = end - start * start.dot(&end);
        if !(angle > 1e-9 && angle < std::f64::consts::PI - 1e-9 && self.start_time_s.is_finite()) {
            return Err(ArcError::Degenerate);
        }
        let across = normal_part.normalize();
        let profile = Trapezoid::new(angle, self.max_speed_deg_s.to_radians(), self.max_accel_deg_s2.to_radians());
        let intervals = (angle.to_degrees() * self.waypoints_per_degree).ceil().max(1.0) as usize;
        Ok((0..=intervals)
            .map(|k| {
                let s = angle * k as f64 / intervals as f64;
                let (t, speed, accel) = profile.at_distance(s);
                let (sin, cos) = s.sin_cos();
                let radial = start * cos + across * sin;
                let tangent = across * cos - start * sin;
                Waypoint {
                    t: self.start_time_s + t,
                    x: elbow + radial * l_arm,
                    xd: tangent * (l_arm * speed),
                    xdd: (tangent * accel - radial * (speed * speed)) * l_arm,
                }
            })
            .collect())
    }
}
