//! Trajectories: waypoints with time, position, velocity and acceleration, plus the forearm
//! geometry, validated once so that `sim` and `hil` never check again.

use crate::model::math::Vec3;
use crate::model::{ModelError, Robot};

/// The most waypoints one trajectory may hold (docs/port5555.md).
pub const MAX_WAYPOINTS: usize = 1_000_000;

/// One waypoint: absolute time [s], platform position [m], velocity [m/s], acceleration [m/s^2].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Waypoint {
    pub t: f64,
    pub x: Vec3,
    pub xd: Vec3,
    pub xdd: Vec3,
}

impl Waypoint {
    fn is_finite(&self) -> bool {
        self.t.is_finite() && [self.x, self.xd, self.xdd].iter().all(|v| v.iter().all(|c| c.is_finite()))
    }
}

/// Why a trajectory was refused. Indices are 0-based waypoint indices.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrajectoryError {
    #[error("a trajectory needs at least one waypoint")]
    Empty,
    #[error("{count} waypoints is more than the limit of {MAX_WAYPOINTS}")]
    TooManyWaypoints { count: usize },
    #[error(
        "the forearm geometry is invalid: elbow ({:?}) m and l_arm {l_arm} m must be finite with l_arm > 0",
        elbow
    )]
    InvalidForearm { elbow: [f64; 3], l_arm: f64 },
    #[error("waypoint {index} has a value that is not finite")]
    NonFinite { index: usize },
    #[error("waypoint {index} has t = {t} s, not after the previous waypoint's {previous_t} s")]
    TimeNotIncreasing { index: usize, t: f64, previous_t: f64 },
    #[error("waypoint {index} is unreachable: {error}")]
    Unreachable { index: usize, error: ModelError },
}

impl TrajectoryError {
    /// The first bad waypoint, where the error is about one.
    pub fn index(&self) -> Option<usize> {
        match self {
            TrajectoryError::NonFinite { index }
            | TrajectoryError::TimeNotIncreasing { index, .. }
            | TrajectoryError::Unreachable { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// A validated trajectory: 1 to [`MAX_WAYPOINTS`] finite waypoints, t strictly increasing,
/// every point reachable by the robot it was checked against.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    waypoints: Vec<Waypoint>,
    elbow: Vec3,
    l_arm: f64,
}

impl Trajectory {
    /// Validates `waypoints` against `robot`; the error names the first bad waypoint.
    /// `elbow` [m] and `l_arm` [m] describe the forearm whose far end the waypoints move.
    pub fn new(
        waypoints: Vec<Waypoint>,
        elbow: Vec3,
        l_arm: f64,
        robot: &Robot,
    ) -> Result<Trajectory, TrajectoryError> {
        if waypoints.is_empty() {
            return Err(TrajectoryError::Empty);
        }
        if waypoints.len() > MAX_WAYPOINTS {
            return Err(TrajectoryError::TooManyWaypoints { count: waypoints.len() });
        }
        if !(elbow.iter().all(|c| c.is_finite()) && l_arm.is_finite() && l_arm > 0.0) {
            return Err(TrajectoryError::InvalidForearm { elbow: elbow.into(), l_arm });
        }
        let mut previous: Option<(f64, Vec3)> = None;
        for (index, waypoint) in waypoints.iter().enumerate() {
            if !waypoint.is_finite() {
                return Err(TrajectoryError::NonFinite { index });
            }
            if let Some((previous_t, _)) = previous {
                if !(waypoint.t > previous_t) {
                    return Err(TrajectoryError::TimeNotIncreasing { index, t: waypoint.t, previous_t });
                }
            }
            let theta = robot
                .inverse_kinematics(&waypoint.x, previous.as_ref().map(|(_, theta)| theta))
                .map_err(|error| TrajectoryError::Unreachable { index, error })?;
            previous = Some((waypoint.t, theta));
        }
        Ok(Trajectory { waypoints, elbow, l_arm })
    }

    /// Like [`Trajectory::new`] with the forearm geometry of the robot's parameters.
    pub fn with_robot_forearm(waypoints: Vec<Waypoint>, robot: &Robot) -> Result<Trajectory, TrajectoryError> {
        Trajectory::new(waypoints, robot.elbow(), robot.params().l_arm, robot)
    }

    pub fn waypoints(&self) -> &[Waypoint] {
        &self.waypoints
    }

    /// Elbow pivot of the forearm [m].
    pub fn elbow(&self) -> Vec3 {
        self.elbow
    }

    /// Forearm length [m].
    pub fn l_arm(&self) -> f64 {
        self.l_arm
    }

    /// Time of the first waypoint [s].
    pub fn start_time(&self) -> f64 {
        self.waypoints[0].t
    }

    /// Time of the last waypoint [s].
    pub fn end_time(&self) -> f64 {
        self.waypoints[self.waypoints.len() - 1].t
    }
}
