//! The parallel arm's FollowJointTrajectory (sil_node, hil_node): the arm is commanded in joint
//! space (its motors joint1..joint3) and its task-space controller follows the goal's joint
//! trajectory mapped through the forward kinematics, sampled into the waypoints of a trajectory
//! that sil_node steers its simulation along and hil_node's loop is fed. In sil_node the end of
//! a goal, a cancel and a violation hold the platform where the joints are, as a stationary
//! trajectory of [`HOLD_S`] (its run loop holds a steered trajectory's end after it, too). Joint
//! commands (ros2_control's, through its topic-based hardware plugin) are each a short move of
//! the controller's reference to where they put the platform ([`command_trajectory`]).

use crate::control::{Trajectory, TrajectoryError, Waypoint};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::commanded_positions;
use crate::nodes::follower::spline::Sample;
use crate::nodes::follower::{self, Constraints, Follower};
use crate::nodes::joints::JOINT_NAMES;

/// The spacing of the waypoints sampled from a goal's trajectory [s].
const SAMPLE_S: f64 = 0.01;

/// How long a hold's trajectory lasts [s]; sil_node's run loop holds its end on after it, a
/// run of this long after another.
pub const HOLD_S: f64 = 3600.0;

/// The follower of the arm's three motors; their limits are a turn either way (the URDF's
/// motors are continuous: the workspace check refuses what the arm cannot reach).
pub fn arm_follower(constraints: &Constraints) -> Result<Follower, String> {
    let joints = follower::Joints {
        names: JOINT_NAMES[..3].iter().map(|name| (*name).to_owned()).collect(),
        lower: vec![-std::f64::consts::PI; 3],
        upper: vec![std::f64::consts::PI; 3],
    };
    Ok(Follower::new(joints, constraints.tolerances(3)?))
}

fn vec3(values: &[f64]) -> Vec3 {
    Vec3::new(values[0], values[1], values[2])
}

/// The platform point [m] and velocity [m/s] at the joints' `sample`, the forward kinematics'
/// root nearest `near` [m].
fn platform(robot: &Robot, sample: &Sample, near: &Vec3) -> Result<(Vec3, Vec3), String> {
    let rates = if sample.velocities.is_empty() { Vec3::zeros() } else { vec3(&sample.velocities) };
    let motion = robot.motion_from_joints(&vec3(&sample.positions), &rates, near).map_err(|error| error.to_string())?;
    Ok((motion.p, motion.p_dot))
}

/// Where motor angles `positions` [rad] put the platform [m], the forward kinematics' root
/// nearest `near` [m].
fn platform_point(robot: &Robot, positions: &[f64], near: &Vec3) -> Result<Vec3, String> {
    let motion = robot.motion_from_joints(&vec3(positions), &Vec3::zeros(), near).map_err(|error| error.to_string())?;
    Ok(motion.p)
}

/// Whether the arm assembles at motor angles `positions` [rad], the platform near `near` [m].
pub fn reachable(robot: &Robot, positions: &[f64], near: &Vec3) -> Result<(), String> {
    platform_point(robot, positions, near)
        .map(drop)
        .map_err(|error| format!("the arm cannot take these angles: {error}"))
}

/// The task-space trajectory of the follower's running goal from `now_ns` on (its times from 0),
/// then `hold_s` [s] still at its end: the platform through the forward kinematics every
/// [`SAMPLE_S`], accelerations by central differences of the velocities. sil_node holds for
/// [`HOLD_S`]; hil_node's loop holds its last reference itself.
pub fn goal_trajectory(
    robot: &Robot,
    follower: &Follower,
    now_ns: u64,
    near: &Vec3,
    hold_s: f64,
) -> Result<Trajectory, String> {
    let (spline, start_ns) = follower.plan().ok_or("no goal is being followed")?;
    let from_s = (now_ns as f64 - start_ns as f64) * 1e-9;
    let steps = ((spline.end_s() - from_s).max(0.0) / SAMPLE_S).ceil() as usize + 1;
    let mut near = *near;
    let mut points = Vec::with_capacity(steps + 1);
    for step in 0..=steps {
        let t = step as f64 * SAMPLE_S;
        let (x, xd) = platform(robot, &spline.sample((from_s + t).clamp(0.0, spline.end_s())), &near)?;
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

/// A stream of joint commands (ros2_control's hardware plugin sends its controllers' at their
/// update rate): each is a move from where the loop's reference is to where the command puts the
/// platform, in the time since the command before ([`command_trajectory`]). sil_node's
/// simulation is steered along each move, hil_node's loop fed it.
#[derive(Debug)]
pub struct JointCommands {
    /// When the last command came [s, the caller's clock], and where it put the platform [m].
    last: Option<(f64, Vec3)>,
    /// The fastest a move takes the platform [m/s].
    top_speed_m_s: f64,
}

impl JointCommands {
    /// The longest a command's move takes [s]: the first, or one after a pause.
    pub const LONGEST_S: f64 = 0.1;

    /// Moves at most `top_speed_m_s` fast (the node's `joint_command_speed_m_s`).
    pub fn new(top_speed_m_s: f64) -> JointCommands {
        JointCommands { last: None, top_speed_m_s }
    }

    /// The move of the command (`names`, `positions`) that came at `now_s` [s], the controller's
    /// reference at `x` [m] moving at `xd` [m/s].
    pub fn trajectory(
        &mut self,
        robot: &Robot,
        now_s: f64,
        (x, xd): (Vec3, Vec3),
        names: &[String],
        positions: &[f64],
    ) -> Result<Trajectory, String> {
        let target = platform_point(robot, &commanded_positions(&JOINT_NAMES[..3], names, positions)?, &x)?;
        // The stream's own velocity, from the command before unless it came before a pause.
        let (period_s, stream_velocity) = match self.last {
            Some((last_s, last_target)) if now_s - last_s <= Self::LONGEST_S => {
                let period_s = (now_s - last_s).max(0.001);
                (period_s, (target - last_target) / period_s)
            }
            _ => (Self::LONGEST_S, Vec3::zeros()),
        };
        self.last = Some((now_s, target));
        let moving = Motion { x, xd, period_s, top_speed_m_s: self.top_speed_m_s };
        command_trajectory(robot, &moving, &target, &stream_velocity)
    }
}

/// sil_node's default fastest joint-command move [m/s]: a step (forward_position_controller's
/// commands are whatever the user sends) becomes a ramp the simulated arm follows within its
/// divergence bound; commands that move slower are followed as they come.
pub const SIL_COMMAND_SPEED_M_S: f64 = 0.25;

/// hil_node's default fastest joint-command move [m/s], well inside what the loop tracks within
/// its tracking-error bound (a step tripped its protective stop): the lab's arm is not rushed by
/// a step; controllers that move it faster see it lag.
pub const HIL_COMMAND_SPEED_M_S: f64 = 0.05;

/// Checks a node's `joint_command_speed_m_s`.
pub fn check_command_speed(speed_m_s: f64) -> Result<(), String> {
    match speed_m_s.is_finite() && speed_m_s > 0.0 {
        true => Ok(()),
        false => Err(format!("joint_command_speed_m_s must be a speed > 0, got {speed_m_s}")),
    }
}

/// Where a command's move starts: the controller's reference at `x` [m] moving at `xd` [m/s],
/// `period_s` [s] after the command before, moves going at most `top_speed_m_s` [m/s].
struct Motion {
    x: Vec3,
    xd: Vec3,
    period_s: f64,
    top_speed_m_s: f64,
}

/// A joint command's move to the platform point `target` [m] (ros2_control's hardware plugin
/// streams commands): within reach at the top speed, it arrives `period_s` later going on at the
/// stream's velocity `stream_velocity` [m/s] (at most the top speed), so that a controller's
/// smooth motion is followed smoothly, and comes to rest half a period on if no command
/// follows; farther (a step), it ramps there at the top speed and arrives at rest. Then the
/// platform holds for [`HOLD_S`].
fn command_trajectory(
    robot: &Robot,
    from: &Motion,
    target: &Vec3,
    stream_velocity: &Vec3,
) -> Result<Trajectory, String> {
    let ramp_s = (target - from.x).norm() / from.top_speed_m_s;
    let (arrival_s, velocity) = if ramp_s <= from.period_s {
        let speed = stream_velocity.norm();
        let scale = if speed > from.top_speed_m_s { from.top_speed_m_s / speed } else { 1.0 };
        (from.period_s, stream_velocity * scale)
    } else {
        (ramp_s, Vec3::zeros())
    };
    let rest_s = arrival_s + from.period_s;
    let rest = target + velocity * (from.period_s / 2.0);
    let at = |t, x, xd| Waypoint { t, x, xd, xdd: Vec3::zeros() };
    let waypoints = vec![
        at(0.0, from.x, from.xd),
        at(arrival_s, *target, velocity),
        at(rest_s, rest, Vec3::zeros()),
        at(rest_s + HOLD_S, rest, Vec3::zeros()),
    ];
    Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| error.to_string())
}

/// The platform held still where motor angles `positions` [rad] put it, for [`HOLD_S`].
pub fn hold_trajectory(robot: &Robot, positions: &[f64], near: &Vec3) -> Result<Trajectory, String> {
    let x = platform_point(robot, positions, near)?;
    held_at(robot, x, (robot.elbow(), robot.params().l_arm)).map_err(|error| error.to_string())
}

/// The platform held still at `x` [m] for [`HOLD_S`], with the forearm (`elbow` [m], `l_arm`
/// [m]) of the trajectory it holds after.
pub fn held_at(robot: &Robot, x: Vec3, (elbow, l_arm): (Vec3, f64)) -> Result<Trajectory, TrajectoryError> {
    let still = |t| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
    Trajectory::new(vec![still(0.0), still(HOLD_S)], elbow, l_arm, robot)
}
