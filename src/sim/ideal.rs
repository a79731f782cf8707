//! Ideal joint trajectory and torques per waypoint: inverse kinematics, then inverse dynamics
//! of the exact reference motion (docs/model.md §S3).

use crate::control::{Trajectory, Waypoint};
use crate::model::math::Vec3;
use crate::model::{ModelError, Robot};

/// The ideal joint-space motion at one waypoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdealPoint {
    /// Waypoint time [s].
    pub t: f64,
    /// Joint angles [rad].
    pub theta: Vec3,
    /// Joint rates [rad/s].
    pub theta_dot: Vec3,
    /// Torques that produce the waypoint's acceleration [N m].
    pub tau: Vec3,
}

/// Lazily computes the ideal point of each waypoint, with inverse kinematics continuous along
/// the trajectory.
#[derive(Debug, Clone)]
pub struct IdealTorques<'a> {
    robot: &'a Robot,
    waypoints: std::slice::Iter<'a, Waypoint>,
    previous_theta: Option<Vec3>,
}

impl<'a> IdealTorques<'a> {
    pub fn new(robot: &'a Robot, trajectory: &'a Trajectory) -> IdealTorques<'a> {
        IdealTorques { robot, waypoints: trajectory.waypoints().iter(), previous_theta: None }
    }
}

impl Iterator for IdealTorques<'_> {
    type Item = Result<IdealPoint, ModelError>;

    fn next(&mut self) -> Option<Self::Item> {
        let waypoint = self.waypoints.next()?;
        let motion = self.robot.motion_from_task(&waypoint.x, &waypoint.xd, self.previous_theta.as_ref(), 0.0);
        Some(motion.map(|motion| {
            self.previous_theta = Some(motion.theta);
            let theta_ddot = self.robot.joint_acceleration(&motion, &waypoint.xdd, 0.0);
            let tau = self.robot.inverse_dynamics(&motion, &theta_ddot);
            IdealPoint { t: waypoint.t, theta: motion.theta, theta_dot: motion.theta_dot, tau }
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.waypoints.size_hint()
    }
}
