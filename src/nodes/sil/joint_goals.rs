//! The parallel arm's FollowJointTrajectory (sil_node, hil_node): the arm is commanded in joint
//! space (its motors joint1..joint3) and its task-space controller follows the goal's joint
//! trajectory mapped through the forward kinematics, sampled into the waypoints of a trajectory
//! that sil_node steers its simulation along and hil_node's loop is fed. In sil_node the end of
//! a goal, a cancel and a violation hold the platform where the joints are, as a stationary
//! trajectory of [`HOLD_S`] (its run loop holds a steered trajectory's end after it, too). Joint
//! commands (ros2_control's, through its topic-based hardware plugin) are each a short move of
//! the controller's reference to where they put the platform ([`command_trajectory`]).

use crate::control::{Reference, ReferenceSampler, Trajectory, TrajectoryError, Waypoint};
use crate::hil::protection::ProtectionConfig;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::commanded_positions;
use crate::nodes::follower::spline::Sample;
use crate::nodes::follower::stream_gate::StreamGate;
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

/// A stream of joint commands (ros2_control's hardware plugin sends its controllers' at their
/// update rate): each is a move from where the loop's reference is to where the command puts the
/// platform, in the time since the command before ([`command_trajectory`]). sil_node's
/// simulation is steered along each move, hil_node's loop fed it. After a stop, or once another
/// command took the arm over, the command then in force is not followed again ([`StreamGate`]).
#[derive(Debug)]
pub struct JointCommands {
    /// The last command of the stream: when it came [s, the caller's clock], where it put the
    /// platform [m], its motor angles [rad], and the stream's period so far [s].
    last: Option<Streamed>,
    /// The fastest a move takes the platform [m/s].
    top_speed_m_s: f64,
    /// The fastest a move turns a motor [rad/s] and the hardest it accelerates one [rad/s^2],
    /// where the node bounds them (hil_node: its goals' bounds); unbounded otherwise.
    motor_bounds: MotorBounds,
    /// The bounds a step's ramp is checked against, where the node has them (hil_node's).
    ramp_check: Option<ProtectionConfig>,
    gate: StreamGate,
    /// Whether a move ends with a hold of [`HOLD_S`] (sil_node's run loop needs a trajectory to
    /// run) or at rest (hil_node's loop holds its last reference by itself).
    holds: bool,
    /// Whether a move comes as samples every [`LOOP_SAMPLE_S`] (hil_node's loop) or as its
    /// waypoints (sil_node's simulation interpolates them itself).
    sampled: bool,
}

/// The spacing of a joint command's move as hil_node's loop gets it [s]: the loop's ring
/// interpolates its samples linearly, position, velocity and acceleration alike, so a move of
/// its three waypoints alone would ask a velocity that does not match the way the position goes.
pub const LOOP_SAMPLE_S: f64 = 0.002;

impl JointCommands {
    /// The longest a command's move takes [s]: the first, or one after a pause.
    pub const LONGEST_S: f64 = 0.1;

    /// Moves at most `top_speed_m_s` fast (the node's `joint_command_speed_m_s`), each ending with
    /// a hold of [`HOLD_S`].
    pub fn new(top_speed_m_s: f64) -> JointCommands {
        let motor_bounds = MotorBounds { speed_rad_s: f64::INFINITY, acceleration_rad_s2: f64::INFINITY };
        JointCommands {
            last: None,
            top_speed_m_s,
            motor_bounds,
            ramp_check: None,
            gate: StreamGate::default(),
            holds: true,
            sampled: false,
        }
    }

    /// Moves that turn no motor faster than `bounds` allow (`max_joint_speed_rad_s`), as
    /// hil_node's goals and segments are checked; a step in the stream becomes a ramp as slow
    /// as the speed and acceleration bounds need, checked as a segment is
    /// ([`ProtectionConfig::check_motion`]).
    pub fn within(mut self, bounds: &ProtectionConfig) -> JointCommands {
        self.motor_bounds = MotorBounds {
            speed_rad_s: bounds.max_joint_speed_rad_s,
            acceleration_rad_s2: bounds.max_joint_acceleration_rad_s2,
        };
        self.ramp_check = Some(bounds.clone());
        self
    }

    /// Moves for hil_node's loop: they end at rest, with no hold after them, since the loop
    /// holds its last reference by itself (what is queued after a move, a `~/trajectory`
    /// segment, then starts as the move ends, not behind an hour's hold); and they come as
    /// samples every [`LOOP_SAMPLE_S`] of their interpolation, since the loop interpolates
    /// between samples linearly.
    pub fn for_the_loop(mut self) -> JointCommands {
        (self.holds, self.sampled) = (false, true);
        self
    }

    /// Commands that come from ros2_control's topic-based hardware (the node's `ros2_control`
    /// parameter): its initial values are not followed ([`StreamGate::of_ros2_control`]).
    pub fn from_ros2_control(mut self, yes: bool) -> JointCommands {
        if yes {
            self.gate = StreamGate::of_ros2_control();
        }
        self
    }

    /// The arm stopped, or another command took it over: the stream starts afresh, and its
    /// command in force now is not followed again.
    pub fn taken_over(&mut self) {
        self.last = None;
        self.gate.close();
    }

    /// The move of the command (`names`, `positions`) that came at `now_s` [s], the controller's
    /// reference at `x` [m] moving at `xd` [m/s], or why the node takes no command now.
    pub fn trajectory(
        &mut self,
        robot: &Robot,
        now_s: f64,
        reference: Result<(Vec3, Vec3), String>,
        names: &[String],
        positions: &[f64],
    ) -> Result<Trajectory, String> {
        let motors = commanded_positions(&JOINT_NAMES[..3], names, positions)?;
        self.gate.offer(&motors, now_s, reference.is_ok())?;
        let (x, xd) = reference?;
        let target = platform_point(robot, &motors, &x)?;
        let motors = vec3(&motors);
        // The stream's own velocity, from the command before unless it came before a pause,
        // and the speed it turns the motors at [rad/s]: over the stream's period, smoothed, so
        // that the jitter of the commands' arrival (two taken at once, say) does not jerk it.
        let streamed = self.last.filter(|last| now_s - last.at_s <= Self::LONGEST_S);
        let (period_s, stream_velocity, stream_motor_speed) = match streamed {
            Some(last) => {
                let since_s = (now_s - last.at_s).max(0.001);
                let period_s =
                    last.period_s.map_or(since_s, |period_s| period_s + PERIOD_SMOOTHING * (since_s - period_s));
                (period_s, (target - last.target) / period_s, (motors - last.motors).amax() / period_s)
            }
            None => (Self::LONGEST_S, Vec3::zeros(), 0.0),
        };
        self.last = Some(Streamed { at_s: now_s, target, motors, period_s: streamed.map(|_| period_s) });
        let mut moving = Motion {
            x,
            xd,
            period_s,
            top_speed_m_s: self.top_speed_m_s,
            turn_rad: self.motor_bounds.turn_rad(robot, &x, &target)?,
            motor_bounds: self.motor_bounds,
            stream_scale: self.motor_bounds.scale(stream_motor_speed),
            stretch: 1.0,
        };
        // A ramp's time is worked out for a motor turning in proportion to the platform's way;
        // the kinematics turn a motor faster on part of the way (a step of 0.5 rad of joint1 near the
        // arc's start needs it 2.4 times as long), so it is checked, and stretched until it passes.
        loop {
            let (trajectory, ramp) = command_trajectory(robot, &moving, &target, &stream_velocity, self.holds)?;
            let trajectory = match self.sampled {
                true => sampled(robot, &trajectory, LOOP_SAMPLE_S)?,
                false => trajectory,
            };
            let checked = match (&self.ramp_check, ramp) {
                (Some(bounds), true) => bounds.check_motion(robot, trajectory.waypoints(), (xd == Vec3::zeros(), true)),
                _ => Ok(()),
            };
            match checked {
                Ok(()) => return Ok(trajectory),
                Err(_) if moving.stretch < MAX_RAMP_STRETCH => moving.stretch *= 1.25,
                Err(reason) => return Err(reason),
            }
        }
    }
}

/// sil_node's default `constraints.stopped_velocity_tolerance` [rad/s]: the simulation's
/// estimated joint rates, holding still, reach 0.5 rad/s (the quantised sensor through a filter
/// fast enough to hold the simulated arm); a goal's success is checked at each step.
pub const SIL_STOPPED_RAD_S: f64 = 0.5;

/// hil_node's default `constraints.stopped_velocity_tolerance` [rad/s]: holding still, the
/// emulated rig's estimated joint rates stay within 0.03 rad/s, the simulated rig's within 0.12.
pub const HIL_STOPPED_RAD_S: f64 = 0.1;

/// sil_node's default fastest joint-command move [m/s]: a step (forward_position_controller's
/// commands are whatever the user sends) becomes a ramp the simulated arm follows within its
/// divergence bound; commands that move slower are followed as they come.
pub const SIL_COMMAND_SPEED_M_S: f64 = 0.25;

/// hil_node's default fastest joint-command move [m/s], well inside what the loop tracks within
/// its tracking-error bound: the lab's arm is not rushed by a step; controllers that move it
/// faster see it lag. Its moves are bounded by the motors' speed and acceleration as well, as
/// its goals and segments are ([`JointCommands::within`]). Under joint_trajectory_controller
/// 0.25 m/s follows more goals (docs/performance.md), but a command the arm lags far behind
/// becomes a straight ramp of seconds that can pass a bound of the protective stop, and is
/// refused: raising it is the lab's choice.
pub const HIL_COMMAND_SPEED_M_S: f64 = 0.05;

/// Checks a node's `joint_command_speed_m_s`.
pub fn check_command_speed(speed_m_s: f64) -> Result<(), String> {
    match speed_m_s.is_finite() && speed_m_s > 0.0 {
        true => Ok(()),
        false => Err(format!("joint_command_speed_m_s must be a speed > 0, got {speed_m_s}")),
    }
}

/// How much longer than worked out a step's ramp may be made to pass its check.
const MAX_RAMP_STRETCH: f64 = 4.0;

/// How much of the time since the command before goes into the stream's period.
const PERIOD_SMOOTHING: f64 = 0.2;

/// A command of a stream, as the next one needs it.
#[derive(Debug, Clone, Copy)]
struct Streamed {
    at_s: f64,
    target: Vec3,
    motors: Vec3,
    /// None for a stream's first command.
    period_s: Option<f64>,
}

/// How fast a joint command's move may turn the arm's motors.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MotorBounds {
    speed_rad_s: f64,
    acceleration_rad_s2: f64,
}

impl MotorBounds {
    /// The largest turn of a motor [rad] from the platform at `from` to `to` [m], as the loop's
    /// bounds measure it: the inverse kinematics at `from`, and at `to` from there (not the
    /// command's own angles, which may be another assembly of the same platform point). Zero
    /// where the motors are unbounded.
    fn turn_rad(&self, robot: &Robot, from: &Vec3, to: &Vec3) -> Result<f64, String> {
        if self.speed_rad_s == f64::INFINITY {
            return Ok(0.0);
        }
        let place = |at: &Vec3, near: Option<&Vec3>| {
            robot.inverse_kinematics(at, near).map_err(|error| format!("the arm cannot be placed: {error}"))
        };
        let from_motors = place(from, None)?;
        Ok((place(to, Some(&from_motors))? - from_motors).amax())
    }

    /// The shortest time [s] a line turning a motor `angle_rad` may take, its mean speed within
    /// the speed bound, as [`crate::hil::protection::ProtectionConfig::check_motion`] measures
    /// a line.
    fn at_speed_s(&self, angle_rad: f64) -> f64 {
        angle_rad / self.speed_rad_s
    }

    /// The shortest time [s] a move from rest to rest turning a motor `angle_rad` may take, as
    /// its interpolation goes (a quintic, which the loop gets sampled): its speed peaks at 15/8
    /// of the mean, its acceleration at 10/sqrt(3) angle / time^2, each within its bound. (The
    /// motor's turn is taken as the platform's path scaled, a straight line in both.)
    fn rest_to_rest_s(&self, angle_rad: f64) -> f64 {
        let peak_acceleration = 10.0 / 3f64.sqrt();
        (self.at_speed_s(angle_rad) * 15.0 / 8.0).max((peak_acceleration * angle_rad / self.acceleration_rad_s2).sqrt())
    }

    /// What a stream turning its fastest motor at `speed_rad_s` is slowed by to keep within
    /// the speed bound (1: not at all).
    fn scale(&self, speed_rad_s: f64) -> f64 {
        match speed_rad_s > self.speed_rad_s {
            true => self.speed_rad_s / speed_rad_s,
            false => 1.0,
        }
    }
}

/// Where a command's move starts: the controller's reference at `x` [m] moving at `xd` [m/s],
/// `period_s` [s] after the command before, moves going at most `top_speed_m_s` [m/s] and
/// within `motor_bounds`, the move turning a motor `turn_rad` [rad] at most, a stream's velocity
/// slowed by `stream_scale` to keep its motors within their speed bound.
struct Motion {
    x: Vec3,
    xd: Vec3,
    period_s: f64,
    top_speed_m_s: f64,
    turn_rad: f64,
    motor_bounds: MotorBounds,
    stream_scale: f64,
    /// What a ramp's time is multiplied by (1: as worked out).
    stretch: f64,
}

/// A joint command's move to the platform point `target` [m] (ros2_control's hardware plugin
/// streams commands): within reach at the top speed, it arrives `period_s` later going on at the
/// stream's velocity `stream_velocity` [m/s] (at most the top speed), so that a controller's
/// smooth motion is followed smoothly, and comes to rest half a period on if no command
/// follows; farther (a step), it ramps there at the top speed, or as fast as the motor bounds
/// allow from rest to rest if that is slower, and arrives at rest. Then, where
/// it `holds`, the platform holds for [`HOLD_S`]. Whether it is a ramp comes back too.
fn command_trajectory(
    robot: &Robot,
    from: &Motion,
    target: &Vec3,
    stream_velocity: &Vec3,
    holds: bool,
) -> Result<(Trajectory, bool), String> {
    let reach_s = ((target - from.x).norm() / from.top_speed_m_s).max(from.motor_bounds.at_speed_s(from.turn_rad));
    let (arrival_s, velocity) = if reach_s <= from.period_s {
        let speed = stream_velocity.norm();
        let scale = if speed > from.top_speed_m_s { from.top_speed_m_s / speed } else { 1.0 };
        (from.period_s, stream_velocity * scale.min(from.stream_scale))
    } else {
        (reach_s.max(from.motor_bounds.rest_to_rest_s(from.turn_rad)) * from.stretch, Vec3::zeros())
    };
    let ramp = arrival_s > from.period_s;
    let rest_s = arrival_s + from.period_s;
    let rest = target + velocity * (from.period_s / 2.0);
    let at = |t, x, xd| Waypoint { t, x, xd, xdd: Vec3::zeros() };
    let mut waypoints =
        vec![at(0.0, from.x, from.xd), at(arrival_s, *target, velocity), at(rest_s, rest, Vec3::zeros())];
    if holds {
        waypoints.push(at(rest_s + HOLD_S, rest, Vec3::zeros()));
    }
    let trajectory = Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| error.to_string())?;
    Ok((trajectory, ramp))
}

/// `trajectory` as samples every `step_s` [s] of its interpolation, positions, velocities and
/// accelerations, from its start to its end.
fn sampled(robot: &Robot, trajectory: &Trajectory, step_s: f64) -> Result<Trajectory, String> {
    let (start, end) = (trajectory.start_time(), trajectory.end_time());
    let steps = ((end - start) / step_s).ceil() as usize;
    let mut sampler = ReferenceSampler::new();
    let waypoints = (0..=steps)
        .map(|step| {
            let t = (start + step as f64 * step_s).min(end);
            let Reference { x, xd, xdd } = sampler.sample(trajectory, t);
            Waypoint { t, x, xd, xdd }
        })
        .collect();
    Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| error.to_string())
}

/// The platform held still at `x` [m] for [`HOLD_S`], with the forearm (`elbow` [m], `l_arm`
/// [m]) of the trajectory it holds after.
pub fn held_at(robot: &Robot, x: Vec3, (elbow, l_arm): (Vec3, f64)) -> Result<Trajectory, TrajectoryError> {
    let still = |t| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
    Trajectory::new(vec![still(0.0), still(HOLD_S)], elbow, l_arm, robot)
}
