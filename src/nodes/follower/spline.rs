//! A joint trajectory between its points, interpolated as ros2_control's
//! joint_trajectory_controller does with its `splines` method: per segment and per joint,
//! linear between positions alone, a cubic from positions and velocities, a quintic when both
//! ends have accelerations too. Before the first point the segment starts at the state the
//! trajectory started from; after the last point the last point holds, at rest.

/// A point of a joint trajectory: where each joint is, and how fast, at `time_s` [s] from the
/// trajectory's start. Velocities and accelerations are empty where not given.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryPoint {
    pub time_s: f64,
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
    pub accelerations: Vec<f64>,
}

/// Where the trajectory wants the joints at an instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
    pub accelerations: Vec<f64>,
}

/// The polynomial of one joint over one segment of duration `t` [s], from `(p0, v0, a0)` to
/// `(p1, v1, a1)`, its degree chosen by what both ends give.
fn coefficients(t: f64, start: (f64, Option<f64>, Option<f64>), end: (f64, Option<f64>, Option<f64>)) -> [f64; 6] {
    let (p0, p1) = (start.0, end.0);
    match (start.1.zip(end.1), start.2.zip(end.2)) {
        (Some((v0, v1)), Some((a0, a1))) => {
            let (t2, t3, t4, t5) = (t * t, t * t * t, t.powi(4), t.powi(5));
            [
                p0,
                v0,
                0.5 * a0,
                (-20.0 * p0 + 20.0 * p1 - (8.0 * v1 + 12.0 * v0) * t - (3.0 * a0 - a1) * t2) / (2.0 * t3),
                (30.0 * p0 - 30.0 * p1 + (14.0 * v1 + 16.0 * v0) * t + (3.0 * a0 - 2.0 * a1) * t2) / (2.0 * t4),
                (-12.0 * p0 + 12.0 * p1 - (6.0 * v1 + 6.0 * v0) * t - (a0 - a1) * t2) / (2.0 * t5),
            ]
        }
        (Some((v0, v1)), None) => {
            let (t2, t3) = (t * t, t * t * t);
            [
                p0,
                v0,
                (-3.0 * p0 + 3.0 * p1 - 2.0 * v0 * t - v1 * t) / t2,
                (2.0 * p0 - 2.0 * p1 + v0 * t + v1 * t) / t3,
                0.0,
                0.0,
            ]
        }
        (None, _) => [p0, (p1 - p0) / t, 0.0, 0.0, 0.0, 0.0],
    }
}

/// Position, velocity and acceleration of the polynomial `c` at `s` [s] into its segment.
fn evaluate(c: &[f64; 6], s: f64) -> (f64, f64, f64) {
    let position = c[0] + s * (c[1] + s * (c[2] + s * (c[3] + s * (c[4] + s * c[5]))));
    let velocity = c[1] + s * (2.0 * c[2] + s * (3.0 * c[3] + s * (4.0 * c[4] + s * 5.0 * c[5])));
    let acceleration = 2.0 * c[2] + s * (6.0 * c[3] + s * (12.0 * c[4] + s * 20.0 * c[5]));
    (position, velocity, acceleration)
}

/// A trajectory from a start state (its first point, at time 0) through its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Spline {
    points: Vec<TrajectoryPoint>,
}

impl Spline {
    /// The trajectory through `points` (times increasing, the first after 0) from `start`, the
    /// joints' state at time 0.
    pub fn new(start: TrajectoryPoint, points: &[TrajectoryPoint]) -> Spline {
        let mut all = Vec::with_capacity(points.len() + 1);
        all.push(TrajectoryPoint { time_s: 0.0, ..start });
        all.extend(points.iter().cloned());
        Spline { points: all }
    }

    /// The times of its points, the start's (0) first [s].
    pub fn times(&self) -> impl Iterator<Item = f64> + Clone + '_ {
        self.points.iter().map(|point| point.time_s)
    }

    /// Its points, the start first.
    pub fn points(&self) -> &[TrajectoryPoint] {
        &self.points
    }

    /// The time of the last point [s].
    pub fn end_s(&self) -> f64 {
        self.points.last().map_or(0.0, |last| last.time_s)
    }

    /// The last point's positions, where the trajectory ends at rest.
    pub fn last_positions(&self) -> &[f64] {
        self.points.last().map_or(&[], |last| &last.positions)
    }

    /// Where the trajectory wants the joints at `t` [s] from its start.
    pub fn sample(&self, t: f64) -> Sample {
        let joints = self.points[0].positions.len();
        let last = &self.points[self.points.len() - 1];
        if t >= last.time_s || self.points.len() == 1 {
            return Sample {
                positions: last.positions.clone(),
                velocities: vec![0.0; joints],
                accelerations: vec![0.0; joints],
            };
        }
        // The segment holding t: the last point at or before it (the start before time 0).
        let index = self.points.partition_point(|point| point.time_s <= t).saturating_sub(1);
        let (a, b) = (&self.points[index], &self.points[index + 1]);
        let (duration, s) = (b.time_s - a.time_s, (t - a.time_s).max(0.0));
        let mut sample = Sample {
            positions: Vec::with_capacity(joints),
            velocities: Vec::with_capacity(joints),
            accelerations: Vec::with_capacity(joints),
        };
        let at = |values: &[f64], joint: usize| values.get(joint).copied();
        for joint in 0..joints {
            let start = (a.positions[joint], at(&a.velocities, joint), at(&a.accelerations, joint));
            let end = (b.positions[joint], at(&b.velocities, joint), at(&b.accelerations, joint));
            let (position, velocity, acceleration) = evaluate(&coefficients(duration, start, end), s);
            sample.positions.push(position);
            sample.velocities.push(velocity);
            sample.accelerations.push(acceleration);
        }
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(time_s: f64, p: f64, v: Option<f64>, a: Option<f64>) -> TrajectoryPoint {
        TrajectoryPoint {
            time_s,
            positions: vec![p],
            velocities: v.into_iter().collect(),
            accelerations: a.into_iter().collect(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn positions_alone_are_linear_with_the_segments_slope() {
        let spline = Spline::new(point(0.0, 0.0, None, None), &[point(2.0, 1.0, None, None)]);
        let middle = spline.sample(1.0);
        assert!(
            close(middle.positions[0], 0.5) && close(middle.velocities[0], 0.5) && close(middle.accelerations[0], 0.0)
        );
    }

    #[test]
    fn a_cubic_meets_both_ends_positions_and_velocities() {
        let spline = Spline::new(point(0.0, 0.0, Some(0.0), None), &[point(2.0, 1.0, Some(0.5), None)]);
        let start = spline.sample(0.0);
        assert!(close(start.positions[0], 0.0) && close(start.velocities[0], 0.0));
        let end = spline.sample(2.0 - 1e-12);
        assert!((end.positions[0] - 1.0).abs() < 1e-9 && (end.velocities[0] - 0.5).abs() < 1e-9);
        // The Hermite cubic's middle: (p0 + p1) / 2 + (v0 - v1) t / 8.
        assert!(close(spline.sample(1.0).positions[0], 0.5 + (0.0 - 0.5) * 2.0 / 8.0));
    }

    #[test]
    fn a_quintic_meets_both_ends_accelerations_and_is_symmetric_from_rest_to_rest() {
        let spline = Spline::new(point(0.0, 0.0, Some(0.0), Some(0.0)), &[point(1.0, 1.0, Some(0.0), Some(0.0))]);
        let middle = spline.sample(0.5);
        assert!(close(middle.positions[0], 0.5) && close(middle.accelerations[0], 0.0));
        // The minimum-jerk peak velocity: 15/8 of the mean.
        assert!(close(middle.velocities[0], 15.0 / 8.0));
        let end = spline.sample(1.0 - 1e-12);
        assert!((end.accelerations[0]).abs() < 1e-6);
    }

    #[test]
    fn past_the_end_the_last_point_holds_at_rest() {
        let spline = Spline::new(point(0.0, 5.0, None, None), &[point(1.0, 1.0, None, None)]);
        assert!(close(spline.sample(0.0).positions[0], 5.0));
        let after = spline.sample(3.0);
        assert_eq!((after.positions[0], after.velocities[0]), (1.0, 0.0));
        assert_eq!(spline.end_s(), 1.0);
    }
}
