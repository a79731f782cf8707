//! Quintic Hermite interpolation of a trajectory: C2-continuous position, velocity and
//! acceleration that match every waypoint exactly (docs/model.md §C1).

use super::trajectory::{Trajectory, Waypoint};
use crate::model::math::Vec3;

/// A reference sample, one instant of a trajectory: position [m], velocity [m/s], acceleration [m/s^2].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reference {
    pub x: Vec3,
    pub xd: Vec3,
    pub xdd: Vec3,
}

/// The quintic x(s) = sum c_k s^k on one segment, s = (t - t0) / T in [0, 1].
#[derive(Debug, Clone, Copy)]
struct Quintic {
    t0: f64,
    duration: f64,
    coefficients: [Vec3; 6],
}

impl Quintic {
    /// Matches position, velocity and acceleration at both ends (C1).
    fn through(start: &Waypoint, end: &Waypoint) -> Quintic {
        let duration = end.t - start.t;
        let (t1, t2) = (duration, duration * duration);
        let c0 = start.x;
        let c1 = start.xd * t1;
        let c2 = start.xdd * (t2 / 2.0);
        let position_gap = end.x - c0 - c1 - c2;
        let velocity_gap = (end.xd - start.xd) * t1 - start.xdd * t2;
        let acceleration_gap = (end.xdd - start.xdd) * t2;
        let c3 = position_gap * 10.0 - velocity_gap * 4.0 + acceleration_gap * 0.5;
        let c4 = position_gap * -15.0 + velocity_gap * 7.0 - acceleration_gap;
        let c5 = position_gap * 6.0 - velocity_gap * 3.0 + acceleration_gap * 0.5;
        Quintic { t0: start.t, duration, coefficients: [c0, c1, c2, c3, c4, c5] }
    }

    fn evaluate(&self, t: f64) -> Reference {
        let s = (t - self.t0) / self.duration;
        let c = &self.coefficients;
        let x = c[0] + (c[1] + (c[2] + (c[3] + (c[4] + c[5] * s) * s) * s) * s) * s;
        let dx_ds = c[1] + (c[2] * 2.0 + (c[3] * 3.0 + (c[4] * 4.0 + c[5] * (5.0 * s)) * s) * s) * s;
        let d2x_ds2 = c[2] * 2.0 + (c[3] * 6.0 + (c[4] * 12.0 + c[5] * (20.0 * s)) * s) * s;
        Reference { x, xd: dx_ds / self.duration, xdd: d2x_ds2 / (self.duration * self.duration) }
    }
}

/// Samples a trajectory at any time. Up to the first waypoint's time (that time included) and
/// after the last it holds that waypoint's position with zero velocity and acceleration: a run
/// starts at rest.
///
/// Keeps the current segment, so sampling at non-decreasing times costs O(1); other times
/// are found by binary search.
#[derive(Debug, Clone, Default)]
pub struct ReferenceSampler {
    segment_idx: usize,
    segment: Option<Quintic>,
}

impl ReferenceSampler {
    pub fn new() -> ReferenceSampler {
        ReferenceSampler { segment_idx: 0, segment: None }
    }

    /// `trajectory`'s reference sample at time `t` [s]. A sampler serves one trajectory.
    pub fn sample(&mut self, trajectory: &Trajectory, t: f64) -> Reference {
        let waypoints = trajectory.waypoints();
        let last = waypoints.len() - 1;
        let hold = |waypoint: &Waypoint| Reference { x: waypoint.x, ..Reference::default() };
        if t <= waypoints[0].t {
            return hold(&waypoints[0]);
        }
        if t >= waypoints[last].t {
            return hold(&waypoints[last]);
        }
        let in_segment = |idx: usize| waypoints[idx].t <= t && t < waypoints[idx + 1].t;
        let stale = self.segment.is_none() || !in_segment(self.segment_idx);
        if stale {
            let next = self.segment_idx + 1;
            self.segment_idx = if self.segment.is_some() && next < last && in_segment(next) {
                next
            } else {
                waypoints.partition_point(|waypoint| waypoint.t <= t) - 1
            };
        }
        let segment = match self.segment {
            Some(segment) if !stale => segment,
            _ => *self.segment.insert(Quintic::through(&waypoints[self.segment_idx], &waypoints[self.segment_idx + 1])),
        };
        segment.evaluate(t)
    }
}
