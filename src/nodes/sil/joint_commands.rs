//! The parallel arm's `~/joint_command` stream (sil_node, hil_node): ros2_control's topic-based
//! hardware plugin streams its controllers' position commands for the three motors, one each
//! update of the controller manager. Each command becomes a short move of the controller's
//! reference, planned on from the node's own move before it (the loop's frames come at the
//! commands' rate and lag them), to where the stream will be a horizon ahead ([`HORIZON_PERIODS`]:
//! its own velocity carries it on), then to rest if no command follows. So the controller's reference follows
//! a controller's motion as it goes, not a period behind it.
//!
//! A command off the stream's course (a controller's new trajectory starts from the measured
//! joints; a command is lost on the way) moves the stream, not its velocity
//! ([`STREAM_MAX_ACCELERATION_M_S2`]); a step becomes a ramp within the node's bounds
//! ([`JointCommands::within`]). After a stop, or once another command took the arm over, the
//! command then in force is not followed again ([`StreamGate`]).

use crate::control::{Reference, ReferenceSampler, Trajectory, Waypoint, MAX_WAYPOINTS};
use crate::hil::protection::ProtectionConfig;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::commanded_positions;
use crate::nodes::follower::stream_gate::StreamGate;
use crate::nodes::joints::JOINT_NAMES;
use crate::nodes::sil::joint_goals::{vec3, HOLD_S};

/// The spacing of a joint command's move as hil_node's loop gets it [s]: the loop's ring
/// interpolates its samples linearly, position, velocity and acceleration alike, so a move of
/// its few waypoints alone would ask a velocity that does not match the way the position goes.
pub const LOOP_SAMPLE_S: f64 = 0.002;

/// How many of the stream's periods ahead a move meets the stream: a command that comes late
/// (or not at all) finds the controller's reference still on the stream's course. Only a move's
/// first period or so is run: the next command's move takes over from there.
pub const HORIZON_PERIODS: f64 = 2.0;

/// The shortest time a move takes to meet the stream [s]: an offset (the one a late command
/// leaves, say) is taken up over tens of milliseconds, within the motors' acceleration bound,
/// not in one period.
pub const MIN_HORIZON_S: f64 = 0.02;

/// The farthest a move goes past its command's point [m], meeting the stream ahead and coming
/// to rest on its course: a stream that stops dead (a controller's goal canceled, its last
/// command lost), or that a client forges by sending its points faster than it means them, ends
/// that close to its last command. The stream's velocity is slowed until its move keeps within
/// it; joint_trajectory_controller's goals of a second go 4 - 16 mm past.
pub const MAX_PAST_COMMAND_M: f64 = 0.02;

/// The hardest a controller's stream is taken to speed the platform up [m/s^2]: a command whose
/// velocity from the one before is faster by more than this over their period than the step
/// before is off its course (a trajectory started anew from the measured joints, a command
/// lost), and the stream keeps the velocity it had. joint_trajectory_controller's goals of a
/// second ask 1 - 2 m/s^2. A stream that slows is on its course however hard it slows (a goal
/// canceled: the controller holds where it is).
pub const STREAM_MAX_ACCELERATION_M_S2: f64 = 20.0;

/// The closest two stamps are taken to be apart [s]: nearer (a client's, not a controller
/// manager's), the stream's period is timed by the commands' arrival.
const MIN_STAMP_SPACING_S: f64 = 0.001;

/// How fast the least transit time a stream has shown is let rise, per second of the stream
/// [s/s]: one stamp from a clock ahead does not make every command after it late for good (it
/// is forgotten within seconds), while the transit's jitter of a few milliseconds is not taken
/// for lateness.
pub const QUICKEST_RISE: f64 = 0.02;

/// How long after its command a move is taken up [s]: hil_node's loop takes it at its next
/// 1 kHz step, sil_node's simulation at its next frame. The move starts where the move before
/// has the controller's reference then.
pub const SPLICE_LEAD_S: f64 = 0.001;

/// How hard a move comes to rest when no command follows it [m/s^2], where the node gives no
/// bound of its own (hil_node's is the protective stop's `stopping_deceleration_m_s2`).
const REST_DECELERATION_M_S2: f64 = 5.0;

/// How much longer than worked out a move may be made to pass its check: a stream that comes
/// back after a stall of tens of milliseconds, the controller's reference come to rest meanwhile, is caught
/// up with over some 0.3 s within the motors' acceleration bound.
const MAX_STRETCH: f64 = 16.0;

/// How much of the time since the command before goes into the stream's period.
const PERIOD_SMOOTHING: f64 = 0.2;

/// sil_node's default fastest joint-command ramp [m/s]: a step (forward_position_controller's
/// commands are whatever the user sends) becomes a ramp the simulated arm follows within its
/// divergence bound; a controller's stream is followed at its own speed.
pub const SIL_COMMAND_SPEED_M_S: f64 = 0.25;

/// hil_node's default fastest joint-command ramp [m/s], the same: a step is a ramp the loop
/// tracks well within its tracking-error bound, and no motor turns faster, nor accelerates
/// harder, than the protective stop lets a goal or a segment turn it ([`JointCommands::within`]);
/// a controller's stream is followed at its own speed within those motor bounds.
pub const HIL_COMMAND_SPEED_M_S: f64 = 0.25;

/// Checks a node's `joint_command_speed_m_s`.
pub fn check_command_speed(speed_m_s: f64) -> Result<(), String> {
    match speed_m_s.is_finite() && speed_m_s > 0.0 {
        true => Ok(()),
        false => Err(format!("joint_command_speed_m_s must be a speed > 0, got {speed_m_s}")),
    }
}

/// A command's move for the node's loop or simulation.
#[derive(Debug, Clone)]
pub struct CommandMove {
    /// The move, its times from when it is taken up.
    pub trajectory: Trajectory,
    /// Whether it goes on from the stream's move before, which the loop then replaces without a
    /// stop (hil_node: [`crate::hil::Withdrawals::request_continuing`]).
    pub continues: bool,
    /// When it was planned to be taken up [s, the caller's clock]: its time 0.
    pub starts_s: f64,
}

/// A stream of joint commands (ros2_control's hardware plugin sends its controllers' at their
/// update rate), each followed by a move ([`JointCommands::trajectory`]). sil_node's simulation
/// is steered along each move, hil_node's loop fed it.
#[derive(Debug)]
pub struct JointCommands {
    following: Following,
    /// The stream as it was before the move last sent, should the node not send it after all
    /// ([`JointCommands::not_sent`]).
    before: Option<Following>,
    /// The fastest a ramp takes the platform [m/s], and the most a move may add to the stream's
    /// own velocity to take up an offset.
    top_speed_m_s: f64,
    /// The fastest a move turns a motor [rad/s] and the hardest it accelerates one [rad/s^2],
    /// where the node bounds them (hil_node: its goals' bounds); unbounded otherwise.
    motor_bounds: MotorBounds,
    /// The bounds a move is checked against, where the node has them (hil_node's).
    check: Option<ProtectionConfig>,
    gate: StreamGate,
    /// Whether a move ends with a hold of [`HOLD_S`] (sil_node's run loop needs a trajectory to
    /// run) or at rest (hil_node's loop holds its last reference by itself).
    holds: bool,
    /// Whether a move comes as samples every [`LOOP_SAMPLE_S`] (hil_node's loop) or as its
    /// waypoints (sil_node's simulation interpolates them itself).
    sampled: bool,
}

/// Where a stream is: its last command, the move last sent, the ramp it is on.
#[derive(Debug, Clone, Default)]
struct Following {
    /// The stream's last command, as the next one needs it.
    last: Option<Streamed>,
    /// The move last sent: when it was taken up [s, the caller's clock], and the move.
    planned: Option<(f64, Trajectory)>,
    /// Where the move last sent ramps to [m] and when it arrives there [s, the caller's clock],
    /// where it is a ramp: a controller holding its step sends the same point again each period,
    /// and the ramp goes on as planned, not planned anew from each point on its way.
    ramp: Option<(Vec3, f64)>,
}

/// A command of a stream, as the next one needs it.
#[derive(Debug, Clone, Copy)]
struct Streamed {
    /// When it came [s, the caller's clock], and its header's stamp [s] where it has one.
    at_s: f64,
    stamp_s: Option<f64>,
    /// The least time from a stamp to its command's arrival seen in the stream [s, the two
    /// clocks' offset included], and how much later than that this one came [s]: the stream's
    /// course is where the command puts the platform, that much on.
    quickest_s: Option<f64>,
    late_s: f64,
    /// Where it puts the platform [m].
    target: Vec3,
    /// The velocity from the command before to it [m/s], and the stream's velocity taken
    /// from it [m/s] (the one before, where it was off the stream's course).
    step_velocity: Vec3,
    velocity: Vec3,
    /// The stream's period so far [s]; None for a stream's first command.
    period_s: Option<f64>,
}

impl JointCommands {
    /// The longest a command's move takes to meet the stream [s]: the first, or one after a
    /// pause.
    pub const LONGEST_S: f64 = 0.1;

    /// Ramps at most `top_speed_m_s` fast (the node's `joint_command_speed_m_s`), each move
    /// ending with a hold of [`HOLD_S`].
    pub fn new(top_speed_m_s: f64) -> JointCommands {
        let motor_bounds = MotorBounds { speed_rad_s: f64::INFINITY, acceleration_rad_s2: f64::INFINITY };
        JointCommands {
            following: Following::default(),
            before: None,
            top_speed_m_s,
            motor_bounds,
            check: None,
            gate: StreamGate::default(),
            holds: true,
            sampled: false,
        }
    }

    /// Moves that turn no motor faster, nor accelerate one harder, than `bounds` allow
    /// (`max_joint_speed_rad_s`, `max_joint_acceleration_rad_s2`), as hil_node's goals and
    /// segments are checked, and that come to rest no harder than its stop is assumed to
    /// (`stopping_deceleration_m_s2`): a step in the stream becomes a ramp as slow as the
    /// bounds need, and every move is checked as a segment is
    /// ([`ProtectionConfig::check_motion`]).
    pub fn within(mut self, bounds: &ProtectionConfig) -> JointCommands {
        self.motor_bounds = MotorBounds {
            speed_rad_s: bounds.max_joint_speed_rad_s,
            acceleration_rad_s2: bounds.max_joint_acceleration_rad_s2,
        };
        self.check = Some(bounds.clone());
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
        self.not_followed();
        self.gate.close();
    }

    /// The stream's moves no longer run (the node could not send the last one, or queued
    /// something after it): the next command starts a stream afresh, from the controller's
    /// reference.
    pub fn not_followed(&mut self) {
        (self.following, self.before) = (Following::default(), None);
    }

    /// The move last made was refused after all (the node's path check, or its loop had no
    /// room): the move before it plays on, and the next command goes on from it.
    pub fn not_sent(&mut self) {
        if let Some(before) = self.before.take() {
            self.following = before;
        }
    }

    /// The move of the command (`names`, `positions`, stamped `stamp_s` [s] where its header
    /// has a stamp) that came at `now_s` [s], the controller's reference at its latest frame at
    /// `x` [m] moving at `xd` [m/s], or why the node takes no command now. A command refused
    /// leaves the stream as it was: the move before plays on.
    pub fn trajectory(
        &mut self,
        robot: &Robot,
        (now_s, stamp_s): (f64, Option<f64>),
        reference: Result<(Vec3, Vec3), String>,
        names: &[String],
        positions: &[f64],
    ) -> Result<CommandMove, String> {
        let motors = commanded_positions(&JOINT_NAMES[..3], names, positions)?;
        self.gate.offer(&motors, now_s, reference.is_ok())?;
        let (x, xd) = reference?;
        let streamed = self.following.last.filter(|last| now_s - last.at_s <= Self::LONGEST_S);
        // Where the move starts: where the stream's move before has the controller's reference as this one
        // is taken up, else (a new stream) at the controller's reference.
        let continued = streamed.and(self.following.planned.as_ref());
        let continues = continued.is_some();
        let starts_s = now_s + SPLICE_LEAD_S;
        let start = match continued {
            // Two commands taken at once: the move before is at its very first waypoint, going
            // (the sampler holds at rest before a trajectory starts).
            Some((from_s, planned)) if starts_s - from_s <= planned.start_time() => {
                Waypoint { t: 0.0, ..planned.waypoints()[0] }
            }
            Some((from_s, planned)) => {
                let Reference { x, xd, xdd } = ReferenceSampler::new().sample(planned, starts_s - from_s);
                Waypoint { t: 0.0, x, xd, xdd }
            }
            // hil_node's loop holds at rest before a move that does not go on from the one
            // before ([`crate::hil::Withdrawals::request`]): the move starts at rest.
            None if self.sampled => Waypoint { t: 0.0, x, xd: Vec3::zeros(), xdd: Vec3::zeros() },
            None => Waypoint { t: 0.0, x, xd, xdd: Vec3::zeros() },
        };
        let target = platform_point(robot, &motors, &start.x)?;
        let stream = self.stream(streamed, (now_s, stamp_s), target);
        let (velocity, to_rest_s) = self.motor_bounds.capped(robot, &target, &stream.velocity, &motors)?;
        let horizon_s = stream
            .period_s
            .map_or(Self::LONGEST_S, |period_s| (HORIZON_PERIODS * period_s).clamp(MIN_HORIZON_S, Self::LONGEST_S));
        // A ramp to this very point goes on as planned.
        let ramp_left_s = self
            .following
            .ramp
            .filter(|(to, arrives_s)| continues && (to - target).norm() < 1e-9 && *arrives_s - starts_s > LOOP_SAMPLE_S)
            .map(|(_, arrives_s)| arrives_s - starts_s);
        let moving = Motion {
            start,
            target,
            velocity,
            late_s: stream.late_s,
            horizon_s,
            rest_s: stream.period_s.unwrap_or(Self::LONGEST_S).max(to_rest_s),
            rest_deceleration_m_s2: self
                .check
                .as_ref()
                .map_or(REST_DECELERATION_M_S2, |bounds| bounds.stopping_deceleration_m_s2),
            top_speed_m_s: self.top_speed_m_s,
            motor_bounds: self.motor_bounds,
            ramp_left_s,
            stretch: 1.0,
        };
        let (trajectory, ramp_s, samples) = self.checked(robot, moving)?;
        let following = Following {
            last: Some(stream),
            planned: Some((starts_s, trajectory.clone())),
            ramp: ramp_s.map(|arrival_s| (target, starts_s + arrival_s)),
        };
        self.before = Some(std::mem::replace(&mut self.following, following));
        let trajectory = samples.unwrap_or(trajectory);
        Ok(CommandMove { trajectory, continues, starts_s })
    }

    /// The stream with its command that came at `now_s` [s] (stamped `stamp_s`), putting the
    /// platform at `target` [m]: its period and velocity, from the command before unless it
    /// came before a pause (`streamed` is None then).
    fn stream(&self, streamed: Option<Streamed>, (now_s, stamp_s): (f64, Option<f64>), target: Vec3) -> Streamed {
        // A command that came later after its stamp than the stream's quickest was held up on the
        // way (a busy executor, the transport): the stream has gone on meanwhile. The least
        // transit rises slowly, and starts afresh where the clocks' offset jumps (a clock
        // stepped, the stamps of another clock).
        let transit_s = stamp_s.map(|stamp| now_s - stamp);
        let quickest_s =
            match (streamed.and_then(|last| last.quickest_s.map(|quickest| (quickest, last.at_s))), transit_s) {
                (Some((quickest, at_s)), Some(transit)) if (transit - quickest).abs() <= Self::LONGEST_S => {
                    Some(transit.min(quickest + QUICKEST_RISE * (now_s - at_s)))
                }
                (_, transit) => transit,
            };
        let late_s = match (transit_s, quickest_s) {
            (Some(transit), Some(quickest)) => (transit - quickest).min(Self::LONGEST_S),
            _ => 0.0,
        };
        let first = Streamed {
            at_s: now_s,
            stamp_s,
            quickest_s,
            late_s,
            target,
            step_velocity: Vec3::zeros(),
            velocity: Vec3::zeros(),
            period_s: None,
        };
        let Some(last) = streamed else { return first };
        // The time between the commands' stamps where both have one and it is like the stream's
        // period so far (topic_based_ros2_control stamps a command as the controller manager
        // writes it), else between their arrivals, which jitter (two taken at once, say): over
        // those, the stream's smoothed period.
        let stamped_s = match (stamp_s, last.stamp_s) {
            (Some(stamp), Some(before)) => Some(stamp - before).filter(|spacing| {
                (MIN_STAMP_SPACING_S..=Self::LONGEST_S).contains(spacing)
                    && last.period_s.is_none_or(|period_s| (0.5 * period_s..=2.0 * period_s).contains(spacing))
            }),
            _ => None,
        };
        let since_s = stamped_s.unwrap_or(now_s - last.at_s).max(MIN_STAMP_SPACING_S);
        let period_s = last.period_s.map_or(since_s, |period_s| period_s + PERIOD_SMOOTHING * (since_s - period_s));
        let over_s = stamped_s.unwrap_or(period_s);
        let step_velocity = (target - last.target) / over_s;
        // Slowing along the course, not turning back or aside: the step is a fraction of the
        // one before, in its direction, and off it no more than the bound allows.
        let along = match last.step_velocity.norm_squared() {
            speed2 if speed2 > 0.0 => step_velocity.dot(&last.step_velocity) / speed2,
            _ => 0.0,
        };
        let aside_m_s2 = (step_velocity - last.step_velocity * along).norm() / over_s;
        let slowing = (0.0..=1.0).contains(&along) && aside_m_s2 <= STREAM_MAX_ACCELERATION_M_S2;
        let on_course = slowing || (step_velocity - last.step_velocity).norm() / over_s <= STREAM_MAX_ACCELERATION_M_S2;
        let velocity = if on_course { step_velocity } else { last.velocity };
        Streamed { step_velocity, velocity, period_s: Some(period_s), ..first }
    }

    /// The move of `moving`, checked against the node's bounds where it has them: a move that
    /// fails is stretched until it passes, or refused. When it is a ramp, its arrival [s from
    /// its start] comes too, and its samples for the loop, where it is [`JointCommands::sampled`].
    fn checked(
        &self,
        robot: &Robot,
        mut moving: Motion,
    ) -> Result<(Trajectory, Option<f64>, Option<Trajectory>), String> {
        // A move's time is worked out for a motor turning in proportion to the platform's way;
        // the kinematics turn a motor faster on part of the way (a step of 0.5 rad of joint1 near
        // the arc's start needs it 2.4 times as long), so it is checked, and stretched until it
        // passes.
        loop {
            let (trajectory, ramp_s) = command_trajectory(robot, &moving, self.holds)?;
            let samples = match self.sampled || self.check.is_some() {
                true => Some(sampled(robot, &trajectory, LOOP_SAMPLE_S)?),
                false => None,
            };
            let checked = match (&self.check, &samples) {
                (Some(bounds), Some(samples)) => {
                    bounds.check_motion(robot, samples.waypoints(), (moving.start.xd == Vec3::zeros(), true))
                }
                _ => Ok(()),
            };
            match checked {
                Ok(()) => return Ok((trajectory, ramp_s, samples.filter(|_| self.sampled))),
                Err(_) if moving.stretch < MAX_STRETCH => moving.stretch = (moving.stretch * 1.25).min(MAX_STRETCH),
                Err(reason) => return Err(reason),
            }
        }
    }
}

/// Where motor angles `positions` [rad] put the platform [m], the forward kinematics' root
/// nearest `near` [m].
fn platform_point(robot: &Robot, positions: &[f64], near: &Vec3) -> Result<Vec3, String> {
    let motion = robot.motion_from_joints(&vec3(positions), &Vec3::zeros(), near).map_err(|error| error.to_string())?;
    Ok(motion.p)
}

/// How fast a joint command's move may turn the arm's motors.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MotorBounds {
    speed_rad_s: f64,
    acceleration_rad_s2: f64,
}

impl MotorBounds {
    fn unbounded(&self) -> bool {
        self.speed_rad_s == f64::INFINITY
    }

    /// The largest turn of a motor [rad] from the platform at `from` to `to` [m], as the loop's
    /// bounds measure it: the inverse kinematics at `from`, and at `to` from there (not the
    /// command's own angles, which may be another assembly of the same platform point). Zero
    /// where the motors are unbounded.
    fn turn_rad(&self, robot: &Robot, from: &Vec3, to: &Vec3) -> Result<f64, String> {
        if self.unbounded() {
            return Ok(0.0);
        }
        let place = |at: &Vec3, near: Option<&Vec3>| {
            robot.inverse_kinematics(at, near).map_err(|error| format!("the arm cannot be placed: {error}"))
        };
        let from_motors = place(from, None)?;
        Ok((place(to, Some(&from_motors))? - from_motors).amax())
    }

    /// The stream's `velocity` [m/s] at the platform point `at` [m] (the motors at `motors`
    /// [rad]), slowed where it would turn a motor faster than the speed bound, and the shortest
    /// a move may take to bring it to rest [s] within the acceleration bound (a quintic from it
    /// to rest decelerates at most 15/8 as hard as its mean; twice, for the way the kinematics
    /// turn a motor unevenly).
    fn capped(&self, robot: &Robot, at: &Vec3, velocity: &Vec3, motors: &[f64]) -> Result<(Vec3, f64), String> {
        if self.unbounded() || *velocity == Vec3::zeros() {
            return Ok((*velocity, 0.0));
        }
        let motion = robot
            .motion_from_task(at, velocity, Some(&vec3(motors)), 0.0)
            .map_err(|error| format!("the arm cannot follow the stream there: {error}"))?;
        let fastest_rad_s = motion.theta_dot.amax();
        let capped = match fastest_rad_s > self.speed_rad_s {
            true => velocity * (self.speed_rad_s / fastest_rad_s),
            false => *velocity,
        };
        Ok((capped, 2.0 * fastest_rad_s.min(self.speed_rad_s) / self.acceleration_rad_s2))
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
}

/// What a command's move is made from: where it starts (`start`, the controller's reference's position,
/// velocity and acceleration), the command's platform point `target` [m] and the stream's
/// `velocity` [m/s], how late the command came (`late_s` [s], which the stream went on
/// meanwhile), the time it meets the stream in `horizon_s` [s] and the shortest it takes
/// to come to rest after `rest_s` [s], at most `rest_deceleration_m_s2` hard, the node's bounds,
/// how long the ramp to the same point that it goes on from has still to go (`ramp_left_s` [s]),
/// and what a move's time is multiplied by to pass its check (`stretch`, 1: as worked out).
struct Motion {
    start: Waypoint,
    target: Vec3,
    velocity: Vec3,
    late_s: f64,
    horizon_s: f64,
    rest_s: f64,
    rest_deceleration_m_s2: f64,
    top_speed_m_s: f64,
    motor_bounds: MotorBounds,
    ramp_left_s: Option<f64>,
    stretch: f64,
}

impl Motion {
    /// When it meets the stream and how long it then takes to come to rest [s], stretched, and
    /// the stream's velocity it goes on at [m/s]: the stream's own, or slower where meeting a
    /// stream that fast ahead and coming to rest on its course would go farther past the
    /// command than [`MAX_PAST_COMMAND_M`] (slowing by the ratio keeps within it: the rest is
    /// no longer for a slower stream).
    fn meeting(&self) -> (f64, f64, Vec3) {
        let rest_s = self.rest_s.max(self.velocity.norm() / self.rest_deceleration_m_s2) * self.stretch;
        let horizon_s = self.horizon_s * self.stretch;
        let past_m = self.velocity.norm() * (horizon_s + self.late_s + rest_s / 2.0);
        (horizon_s, rest_s, self.velocity * (MAX_PAST_COMMAND_M / past_m).min(1.0))
    }
}

/// A joint command's move: where the stream will be `horizon_s` on (the command's platform
/// point carried on at the stream's velocity) is within reach, taking up the offset no faster
/// than the top speed and turning no motor faster than its bound, the move meets the stream
/// there going on at its velocity, then comes to rest on its course, in `rest_s` or as long as
/// its deceleration bound needs (a command that follows takes the arm on before that); farther
/// (a step), it ramps to the command's point at the top speed, or as fast as the motor bounds
/// allow from rest to rest if that is slower, and arrives at rest (a ramp under way to the same
/// point goes on as planned). Then, where it `holds`, the platform holds for [`HOLD_S`]. A
/// stretched move meets the stream and comes to rest that much later, a stretched ramp arrives
/// that much later. Returns the move, and when it is a ramp, its arrival [s from its start].
fn command_trajectory(robot: &Robot, moving: &Motion, holds: bool) -> Result<(Trajectory, Option<f64>), String> {
    let Motion { start, target, motor_bounds, top_speed_m_s, stretch, .. } = *moving;
    let (horizon_s, rest_s, velocity) = moving.meeting();
    let meets = target + velocity * (horizon_s + moving.late_s);
    let taking_up_m_s = ((meets - start.x) / horizon_s - velocity).norm();
    let turn_rad = motor_bounds.turn_rad(robot, &start.x, &meets)?;
    let at = |t, x, xd| Waypoint { t, x, xd, xdd: Vec3::zeros() };
    let mut waypoints = vec![start];
    let on_stream = moving.ramp_left_s.is_none()
        && taking_up_m_s <= top_speed_m_s
        && motor_bounds.at_speed_s(turn_rad) <= horizon_s;
    let ramp_s = if on_stream {
        waypoints.push(at(horizon_s, meets, velocity));
        waypoints.push(at(horizon_s + rest_s, meets + velocity * (rest_s / 2.0), Vec3::zeros()));
        None
    } else {
        let arrival_s = match moving.ramp_left_s {
            Some(left_s) => left_s * stretch,
            None => {
                let turn_rad = motor_bounds.turn_rad(robot, &start.x, &target)?;
                let reach_s = ((target - start.x).norm() / top_speed_m_s).max(motor_bounds.at_speed_s(turn_rad));
                reach_s.max(motor_bounds.rest_to_rest_s(turn_rad)).max(moving.horizon_s) * stretch
            }
        };
        waypoints.push(at(arrival_s, target, Vec3::zeros()));
        Some(arrival_s)
    };
    if holds {
        let rest = waypoints[waypoints.len() - 1];
        waypoints.push(at(rest.t + HOLD_S, rest.x, Vec3::zeros()));
    }
    let trajectory = Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| error.to_string())?;
    Ok((trajectory, ramp_s))
}

/// `trajectory` as samples every `step_s` [s] of its interpolation, positions, velocities and
/// accelerations, from its start to its end.
fn sampled(robot: &Robot, trajectory: &Trajectory, step_s: f64) -> Result<Trajectory, String> {
    let (start, end) = (trajectory.start_time(), trajectory.end_time());
    let steps = ((end - start) / step_s).ceil() as usize;
    if steps >= MAX_WAYPOINTS {
        return Err(format!("a move of {:.1} s, more than the loop takes at once", end - start));
    }
    let mut sampler = ReferenceSampler::new();
    // The first is the trajectory's own: a sampler holds (at rest) at a trajectory's start.
    let waypoints = std::iter::once(trajectory.waypoints()[0])
        .chain((1..=steps).map(|step| {
            let t = (start + step as f64 * step_s).min(end);
            let Reference { x, xd, xdd } = sampler.sample(trajectory, t);
            Waypoint { t, x, xd, xdd }
        }))
        .collect();
    Trajectory::with_robot_forearm(waypoints, robot).map_err(|error| error.to_string())
}
