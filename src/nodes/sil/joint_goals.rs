//! The parallel arm's FollowJointTrajectory (sil_node, hil_node): the arm is commanded in joint
//! space (its motors joint1..joint3) and its task-space controller follows the goal's joint
//! trajectory mapped through the forward kinematics, sampled into the waypoints of a trajectory
//! that sil_node steers its simulation along and hil_node's loop is fed. In sil_node the end of
//! a goal, a cancel and a violation hold the platform where the joints are, as a stationary
//! trajectory of [`HOLD_S`] (its run loop holds a steered trajectory's end after it, too). Joint
//! commands (ros2_control's, through its topic-based hardware plugin) are
//! [`super::joint_commands`]'.

use crate::control::{Trajectory, TrajectoryError, Waypoint};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::follower::spline::Sample;
use crate::nodes::follower::{self, Constraints, Follower, GoalLimits, JointState, Plan};
use crate::nodes::joints::JOINT_NAMES;

/// The spacing of the waypoints sampled from a goal's trajectory [s].
const SAMPLE_S: f64 = 0.01;

/// How long a hold's trajectory lasts [s]; sil_node's run loop holds its end on after it, a
/// run of this long after another.
pub const HOLD_S: f64 = 3600.0;

/// The fastest the arm's motors may be asked to turn by a goal [rad/s]: well above what the
/// built-in arc asks of them (0.54 rad/s at most), and slow enough that the platform keeps
/// within reach of the controller (see [`arm_follower`]).
pub const MOTOR_MAX_VELOCITY_RAD_S: f64 = 2.0;

/// The follower of the arm's three motors; their limits are a turn either way (the URDF's
/// motors are continuous: the workspace check refuses what the arm cannot reach) and
/// [`MOTOR_MAX_VELOCITY_RAD_S`].
pub fn arm_follower(constraints: &Constraints, limits: &GoalLimits) -> Result<Follower, String> {
    let joints = follower::Joints {
        names: JOINT_NAMES[..3].iter().map(|name| (*name).to_owned()).collect(),
        lower: vec![-std::f64::consts::PI; 3],
        upper: vec![std::f64::consts::PI; 3],
        max_velocity: vec![MOTOR_MAX_VELOCITY_RAD_S; 3],
    };
    limits.validate()?;
    Ok(Follower::new(joints, constraints.tolerances(3)?, limits.clone()))
}

/// The first three of `values` as a vector (a command's or a goal's motor angles [rad]).
pub(super) fn vec3(values: &[f64]) -> Vec3 {
    Vec3::new(values[0], values[1], values[2])
}

/// The platform point [m] and velocity [m/s] at the joints' `sample`, the forward kinematics'
/// root nearest `near` [m].
fn platform(robot: &Robot, sample: &Sample, near: &Vec3) -> Result<(Vec3, Vec3), String> {
    let rates = if sample.velocities.is_empty() { Vec3::zeros() } else { vec3(&sample.velocities) };
    let motion = robot.motion_from_joints(&vec3(&sample.positions), &rates, near).map_err(|error| error.to_string())?;
    Ok((motion.p, motion.p_dot))
}

/// The motors' state where the controller's reference (`x` [m], `xd` [m/s]) puts them, the
/// inverse kinematics' root nearest `near` [rad]: where a goal's first segment starts, so that
/// the goal continues the controller's reference rather than stepping it to the estimated arm.
pub fn reference_joints(robot: &Robot, (x, xd): (Vec3, Vec3), near: &[f64]) -> Result<JointState, String> {
    let motion = robot
        .motion_from_task(&x, &xd, Some(&vec3(near)), 0.0)
        .map_err(|error| format!("the controller's reference cannot be placed: {error}"))?;
    Ok(JointState {
        positions: motion.theta.iter().copied().collect(),
        velocities: motion.theta_dot.iter().copied().collect(),
    })
}

/// The task-space trajectory of a goal's `plan` (its times from its receipt, 0), then `hold_s`
/// [s] still at its end: the platform through the forward kinematics every [`SAMPLE_S`], each
/// root the one nearest the last (the first nearest `near` [m], where the platform is),
/// accelerations by central differences of the velocities. Refused where the arm cannot
/// assemble. sil_node holds for [`HOLD_S`]; hil_node's loop holds its last reference itself.
pub fn goal_trajectory(robot: &Robot, plan: &Plan, near: &Vec3, hold_s: f64) -> Result<Trajectory, String> {
    let spline = plan.spline();
    let steps = (spline.end_s() / SAMPLE_S).ceil() as usize + 1;
    let mut near = *near;
    let mut points = Vec::with_capacity(steps + 1);
    for step in 0..=steps {
        let t = step as f64 * SAMPLE_S;
        let (x, xd) = platform(robot, &spline.sample(t.min(spline.end_s())), &near)
            .map_err(|error| format!("the arm cannot take the goal's angles at {t:.2} s: {error}"))?;
        near = x;
        points.push((t, x, xd));
    }
    let mut waypoints: Vec<Waypoint> = points
        .iter()
        .enumerate()
        .map(|(index, &(t, x, xd))| {
            let before = points[index.saturating_sub(1)];
            let after = points[(index + 1).min(points.len() - 1)];
            let span = after.0 - before.0;
            let xdd = if span > 0.0 { (after.2 - before.2) / span } else { Vec3::zeros() };
            Waypoint { t, x, xd, xdd }
        })
        .collect();
    let last = *waypoints.last().ok_or("the goal has no samples")?;
    if hold_s > 0.0 {
        waypoints.push(Waypoint { t: last.t + hold_s, x: last.x, xd: Vec3::zeros(), xdd: Vec3::zeros() });
    }
    Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| format!("the arm cannot follow it: {error}"))
}

/// sil_node's default `constraints.stopped_velocity_tolerance` [rad/s]: the simulation's
/// estimated joint rates, holding still, reach 0.5 rad/s (the quantised sensor through a filter
/// fast enough to hold the simulated arm); a goal's success is checked at each step.
pub const SIL_STOPPED_RAD_S: f64 = 0.5;

/// hil_node's default `constraints.stopped_velocity_tolerance` [rad/s]: holding still, the
/// emulated rig's estimated joint rates stay within 0.03 rad/s, the simulated rig's within 0.12.
pub const HIL_STOPPED_RAD_S: f64 = 0.1;

/// The platform held still at `x` [m] for [`HOLD_S`], with the forearm (`elbow` [m], `l_arm`
/// [m]) of the trajectory it holds after.
pub fn held_at(robot: &Robot, x: Vec3, (elbow, l_arm): (Vec3, f64)) -> Result<Trajectory, TrajectoryError> {
    let still = |t| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
    Trajectory::new(vec![still(0.0), still(HOLD_S)], elbow, l_arm, robot)
}
