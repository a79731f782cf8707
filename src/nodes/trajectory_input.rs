//! Trajectory messages to library trajectories, without ROS: the node copies a
//! trajectory_msgs/MultiDOFJointTrajectory into [`MultiDofPoint`]s, and this module checks and
//! converts them.

use crate::control::{Trajectory, TrajectoryError, Waypoint};
use crate::model::math::Vec3;
use crate::model::Robot;

/// One MultiDOFJointTrajectoryPoint, as copied from the message: its transforms' translations,
/// its velocities' and accelerations' linear parts, and time_from_start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MultiDofPoint {
    pub translations: Vec<[f64; 3]>,
    pub linear_velocities: Vec<[f64; 3]>,
    pub linear_accelerations: Vec<[f64; 3]>,
    /// time_from_start [s].
    pub time_from_start_s: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrajectoryMessageError {
    #[error("point {index} has {count} transforms; one per point (the platform) is expected")]
    Transforms { index: usize, count: usize },
    #[error("point {index} has {count} {what}; none (zero) or one is expected")]
    Derivatives { index: usize, what: &'static str, count: usize },
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
}

/// Converts the points of a MultiDOFJointTrajectory (one waypoint per point: translation,
/// linear velocity, linear acceleration, time_from_start) and validates the trajectory.
pub fn trajectory_from_points(
    points: &[MultiDofPoint],
    robot: &Robot,
    elbow: Vec3,
    l_arm: f64,
) -> Result<Trajectory, TrajectoryMessageError> {
    let mut waypoints = Vec::with_capacity(points.len());
    for (index, point) in points.iter().enumerate() {
        let [translation] = point.translations.as_slice() else {
            return Err(TrajectoryMessageError::Transforms { index, count: point.translations.len() });
        };
        let derivative = |values: &[[f64; 3]], what: &'static str| match values {
            [] => Ok(Vec3::zeros()),
            [value] => Ok(Vec3::from(*value)),
            _ => Err(TrajectoryMessageError::Derivatives { index, what, count: values.len() }),
        };
        waypoints.push(Waypoint {
            t: point.time_from_start_s,
            x: Vec3::from(*translation),
            xd: derivative(&point.linear_velocities, "velocities")?,
            xdd: derivative(&point.linear_accelerations, "accelerations")?,
        });
    }
    Ok(Trajectory::new(waypoints, elbow, l_arm, robot)?)
}
