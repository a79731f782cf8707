//! Speed profiles that carry a path parameter from rest to rest.

/// A trapezoidal speed profile over a distance: accelerate, cruise, decelerate. Distance,
/// speed and acceleration share one unit of length (an angle [rad] for the built-in paths).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trapezoid {
    distance: f64,
    peak_speed: f64,
    accel: f64,
    accel_time: f64,
    accel_distance: f64,
    total_time: f64,
}

impl Trapezoid {
    pub(crate) fn new(distance: f64, max_speed: f64, accel: f64) -> Trapezoid {
        // Too short to reach max_speed: a triangle that peaks halfway.
        let peak_speed = max_speed.min((distance * accel).sqrt());
        let accel_time = peak_speed / accel;
        let accel_distance = 0.5 * accel * accel_time * accel_time;
        let total_time = 2.0 * accel_time + (distance - 2.0 * accel_distance) / peak_speed;
        Trapezoid { distance, peak_speed, accel, accel_time, accel_distance, total_time }
    }

    /// (time, speed, acceleration) at which distance `s` is reached.
    pub(crate) fn at_distance(&self, s: f64) -> (f64, f64, f64) {
        if s < self.accel_distance {
            let t = (2.0 * s / self.accel).sqrt();
            (t, self.accel * t, self.accel)
        } else if s <= self.distance - self.accel_distance {
            (self.accel_time + (s - self.accel_distance) / self.peak_speed, self.peak_speed, 0.0)
        } else {
            let remaining_time = (2.0 * (self.distance - s).max(0.0) / self.accel).sqrt();
            (self.total_time - remaining_time, self.accel * remaining_time, -self.accel)
        }
    }
}
