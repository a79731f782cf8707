//! arduino_driver without ROS: parameters, datastream samples to joint states, joint commands
//! to MotorControl requests, and the MCU as the managed node drives it ([`Testbench`]).

pub mod rate_guard;
pub mod topics;

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

use serde::Deserialize;

use self::rate_guard::RateGuard;
use self::topics::ArduinoTopics;
use crate::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomCommander, RdscomConfig, RdscomDriver, RdscomEvent, RdscomLinkState,
    Request,
};
use crate::nodes::commanded_positions;
use crate::nodes::declare::node_parameters;
use crate::nodes::follower::{self, Constraints, Follower, GoalLimits};
use crate::nodes::link_health::LinkReport;
use crate::nodes::managed_driver::SerialDevice;
use crate::nodes::params::{read_group, without_groups, ParamError, ParamValue};
use crate::nodes::topics::serial_device::SerialDeviceTopics;
use crate::protocol::rdscom::{Message, PrototypeTable, Value};
use crate::serial::detect::{resolve_port, DeviceKind};

/// The node's name, which its private topics are under.
pub const NODE: &str = "arduino_driver";

/// The node's link status on /diagnostics.
pub const LINK_STATUS: &str = "arduino_driver: link";

node_parameters! {
    /// arduino_driver's parameters: all are read at start (the link and the datastreams are set
    /// up once; commands go on topics).
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    pub struct ArduinoNodeConfig, ARDUINO_NODE_PARAMS {
        read_only port: String = "auto".into()
            => "serial device of the MCU, or auto: an Arduino or Teensy found by USB id (never the STM32)";
        section link: RdscomConfig = RdscomConfig::default()
            => "rdscom link: baud, table, retry_timeout_s, retries, heartbeat_period_s, heartbeat_misses";
        read_only prototypes_file: String = String::new() => "a YAML prototype table; empty uses link.table";
        read_only joint_names: Vec<String> = (0..4).map(|joint| format!("finger_joint{joint}")).collect()
            => "joint names by motor / sensor id (urdf/finger_testbench.urdf's, named apart from every other device's)";
        read_only frame_prefix: String = String::new() => "before every frame the node names: NS/ in a namespace";
        read_only stream_rate_hz: u8 = 50 => "datastream of all joints started at this rate [Hz] (1..=255); 0: none";
        read_only autostart: bool = false
            => "configure and activate at start (the launch files set it); else the node waits unconfigured";
        read_only auto_recover: bool = false
            => "after a device fault, configure and activate again once a second until the device is back";
        section constraints: Constraints = Constraints::default()
            => "~/follow_joint_trajectory's default tolerances: goal_time [s], goal and trajectory [rad] per joint, stopped_velocity_tolerance [rad/s]";
        section goal_limits: GoalLimits = GoalLimits::default()
            => "~/follow_joint_trajectory's bounds on a goal: max_points, max_duration_s [s] from its receipt";
        read_only ros2_control: bool = false
            => "commanded by ros2_control's topic-based hardware (control:=ros2_control sets it): joint_states once a datastream round, every joint in one message, and each ~/joint_command a setpoint of the four positions, the hardware's initial values not followed";
    }
}

/// Reads arduino_driver's parameters; unknown names are refused.
pub fn arduino_node_config(params: &BTreeMap<String, ParamValue>) -> Result<ArduinoNodeConfig, ParamError> {
    let own = without_groups(params, &[]);
    let config: ArduinoNodeConfig = read_group(&own, "")?;
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    if config.joint_names.len() != JOINT_LIMITS.len() {
        return Err(invalid(format!("joint_names must name {} joints", JOINT_LIMITS.len())));
    }
    follower(&config).map_err(invalid)?;
    Ok(config)
}

/// The testbench's joints' limits by motor id [rad], urdf/finger_testbench.urdf's: the base
/// turns either way, the three flexion joints bend one way only.
pub const JOINT_LIMITS: [(f64, f64); 4] = [
    (-0.35, 0.35),
    (0.0, std::f64::consts::FRAC_PI_2),
    (0.0, std::f64::consts::FRAC_PI_2),
    (0.0, std::f64::consts::FRAC_PI_2),
];

/// The fastest a joint may be asked to move [rad/s], and the largest effort a joint may be
/// commanded [N m]: urdf/finger_testbench.urdf's limits.
pub const MAX_VELOCITY_RAD_S: f64 = 3.0;
pub const MAX_EFFORT_NM: f64 = 1.0;

/// Why `value` commanded of `motor` in control `mode` (0 position, 1 velocity, 2 effort) is
/// beyond the joint's limits, if it is. A value that is not a number is beyond every limit.
fn beyond_limits(motor: usize, mode: i64, value: f64) -> Option<String> {
    let (lower, upper, unit) = match mode {
        0 => (JOINT_LIMITS[motor].0, JOINT_LIMITS[motor].1, "rad"),
        1 => (-MAX_VELOCITY_RAD_S, MAX_VELOCITY_RAD_S, "rad/s"),
        _ => (-MAX_EFFORT_NM, MAX_EFFORT_NM, "N m"),
    };
    (!(lower..=upper).contains(&value)).then(|| format!("{value:?} {unit} is outside [{lower}, {upper}] {unit}"))
}

/// The follower of `~/follow_joint_trajectory`: the four joints within their limits and speed,
/// with the node's constraints and goal limits.
pub fn follower(config: &ArduinoNodeConfig) -> Result<Follower, String> {
    let joints = follower::Joints {
        names: config.joint_names.clone(),
        lower: JOINT_LIMITS.iter().map(|(lower, _)| *lower).collect(),
        upper: JOINT_LIMITS.iter().map(|(_, upper)| *upper).collect(),
        max_velocity: vec![MAX_VELOCITY_RAD_S; JOINT_LIMITS.len()],
    };
    config.goal_limits.validate()?;
    Ok(Follower::new(joints, config.constraints.tolerances(JOINT_LIMITS.len())?, config.goal_limits.clone()))
}

/// How old the joints' state may be for a goal to start from it [ns]: three datastream periods,
/// and no less than a serial device's default.
pub fn state_max_age_ns(config: &ArduinoNodeConfig) -> u64 {
    let default = follower::goals::DEFAULT_STATE_MAX_AGE_NS;
    match config.stream_rate_hz {
        0 => default,
        hz => default.max(3_000_000_000 / u64::from(hz)),
    }
}

/// The testbench's joints' state from its datastream, which sends one joint a message: a whole
/// state each time the last joint's sample ends a round in which every joint was heard. The
/// older table carries no velocities: a round without all four has none (unknown, not stopped).
#[derive(Debug, Clone, Default)]
pub struct JointRounds {
    positions: [Option<f64>; 4],
    velocities: [Option<f64>; 4],
}

impl JointRounds {
    /// Takes `sample`; the joints' state when it ends a round.
    pub fn sample(&mut self, sample: &JointSample) -> Option<follower::JointState> {
        *self.positions.get_mut(sample.joint)? = Some(sample.position);
        self.velocities[sample.joint] = sample.velocity;
        if sample.joint != self.positions.len() - 1 {
            return None;
        }
        // The next round starts afresh: a joint that falls silent leaves it incomplete.
        let round = std::mem::take(self);
        let positions = round.positions.iter().copied().collect::<Option<Vec<f64>>>()?;
        let velocities = round.velocities.iter().copied().collect::<Option<Vec<f64>>>().unwrap_or_default();
        Some(follower::JointState { positions, velocities })
    }
}

/// The testbench commanded by setpoints (`~/follow_joint_trajectory`'s control steps, and the
/// joint commands of ros2_control's hardware): its joints' state a round at a time, and its
/// setpoints paced by the MCU: it runs its queue once ControlGo comes, so a setpoint goes out
/// when the one before is done (ControlDone), or after [`SETPOINT_TIMEOUT_NS`] without an
/// answer; meanwhile the newest waits. A setpoint equal to the last sent is not sent again (the
/// MCU holds it; ros2_control's controllers repeat theirs every cycle) until the link comes up
/// anew or a send fails ([`TestbenchSetpoints::unsent`]).
#[derive(Debug, Clone, Default)]
pub struct TestbenchSetpoints {
    rounds: JointRounds,
    /// The joints under a velocity or an effort control.
    rates: RateGuard,
    /// When the setpoint the MCU runs was sent [ns].
    running_since_ns: Option<u64>,
    waiting: Option<Vec<f64>>,
    /// The last setpoint sent since the link came up.
    sent: Option<Vec<f64>>,
}

/// How long a setpoint may run without ControlDone before the next goes out [ns].
pub const SETPOINT_TIMEOUT_NS: u64 = 500_000_000;

impl TestbenchSetpoints {
    /// The setpoints of a testbench whose joints are heard `stream_rate_hz` times a second.
    pub fn heard_at(stream_rate_hz: u8) -> TestbenchSetpoints {
        TestbenchSetpoints { rates: RateGuard::heard_at(stream_rate_hz), ..TestbenchSetpoints::default() }
    }

    /// `requests` before they go at `now_ns`: each MotorControl within its joint's limits in its
    /// mode, a velocity or effort only for a joint the datastream hears and not toward a limit
    /// it is near ([`RateGuard::check_rate`]), no change of the datastream under one.
    pub fn check(&self, requests: &[Request], now_ns: u64) -> Result<(), String> {
        for request in requests {
            match (request.prototype.as_str(), &request.values[..]) {
                ("MotorControl", [Value::Int(motor), Value::Int(mode), Value::Float(value), ..]) => {
                    let joint = usize::try_from(*motor).ok().filter(|motor| *motor < JOINT_LIMITS.len());
                    let joint = joint.ok_or(format!("motor {motor}: the testbench has motors 0 to 3"))?;
                    if let Some(why) = beyond_limits(joint, *mode, *value) {
                        return Err(format!("motor {motor}: {why}"));
                    }
                    if *mode != 0 {
                        self.rates.check_rate(joint, *mode, *value, now_ns)?;
                    }
                }
                ("MotorControl", values) => return Err(format!("a MotorControl of another shape: {values:?}")),
                ("StartSensorDatastream" | "StopSensorDatastream", _) => self.rates.check_stream()?,
                _ => {}
            }
        }
        Ok(())
    }

    /// `requests` other than the setpoints' went to the MCU at `now_ns`: its rates are watched
    /// from now ([`RateGuard::sent`]), and the setpoints sent and waiting are forgotten.
    pub fn others_sent(&mut self, requests: &[Request], now_ns: u64) {
        self.rates.sent(requests, now_ns);
        self.unsent();
    }

    /// At `now_ns` with no event: the Stop for a joint under a rate that is no longer heard
    /// ([`RateGuard::unheard`]), if one is due.
    pub fn idle(&mut self, now_ns: u64) -> Vec<Request> {
        let unheard = self.rates.unheard(now_ns);
        self.stopping(unheard).unwrap_or_default()
    }

    /// The guard's Stop, logged, and nothing waiting after it.
    fn stopping(&mut self, guarded: Option<(Request, String)>) -> Option<Vec<Request>> {
        let (stop, why) = guarded?;
        log::error!("{why}");
        self.unsent();
        Some(vec![stop])
    }

    /// The node stopped the MCU (deactivated, say): no control runs, none is waiting.
    pub fn stopped(&mut self) {
        self.rates.stopped();
        self.unsent();
    }

    /// Takes `event`'s sample, if it carries one; the joints' state when it ends a round.
    pub fn sample(&mut self, event: &DriverEvent, table: &PrototypeTable) -> Option<follower::JointState> {
        let DriverEvent::Link(RdscomEvent::Received(message)) = event else { return None };
        self.rounds.sample(&joint_sample(message, table)?)
    }

    /// The requests of `positions` [rad, by motor id] to send at `now_ns`, or none while the
    /// MCU runs the last setpoint (then these wait, replacing any that waited). A setpoint is
    /// held within the joints' limits: the follower's interpolation may pass a point at a limit
    /// by a hair.
    pub fn setpoint(&mut self, now_ns: u64, positions: Vec<f64>) -> Vec<Request> {
        if positions.iter().any(|position| position.is_nan()) {
            log::error!("a setpoint that is not a number was not sent: {positions:?}");
            return Vec::new();
        }
        let positions: Vec<f64> =
            positions.iter().zip(JOINT_LIMITS).map(|(position, (lower, upper))| position.clamp(lower, upper)).collect();
        if self.sent.as_ref() == Some(&positions) {
            self.waiting = None;
            return Vec::new();
        }
        match self.running_since_ns {
            Some(since) if now_ns.saturating_sub(since) < SETPOINT_TIMEOUT_NS => {
                self.waiting = Some(positions);
                Vec::new()
            }
            _ => {
                self.running_since_ns = Some(now_ns);
                let requests = setpoint_requests(&positions);
                self.rates.sent(&requests, now_ns);
                self.sent = Some(positions);
                requests
            }
        }
    }

    /// A joint command of ros2_control's topic-based hardware (`names`, `positions` [rad]) at
    /// `now_ns`, the joints named `joint_names` by motor id: a setpoint of all four.
    pub fn command(
        &mut self,
        now_ns: u64,
        names: &[String],
        positions: &[f64],
        joint_names: &[String],
    ) -> Result<Vec<Request>, String> {
        let positions = commanded_positions(joint_names, names, positions)?;
        let beyond = positions.iter().enumerate().find_map(|(motor, position)| {
            beyond_limits(motor, 0, *position).map(|why| format!("joint `{}`: {why}", joint_names[motor]))
        });
        match beyond {
            Some(why) => Err(why),
            None => Ok(self.setpoint(now_ns, positions)),
        }
    }

    /// The last setpoint's requests could not all be sent (the node is inactive, say), the node
    /// stopped, or another command went to the MCU: the setpoints sent and waiting are
    /// forgotten, so that none waiting goes out later and the next goes out whatever it is.
    pub fn unsent(&mut self) {
        (self.sent, self.running_since_ns, self.waiting) = (None, None, None);
    }

    /// What `event` at `now_ns` changes: ControlDone (the MCU ran its queue) sends the waiting
    /// setpoint's requests; a link that comes up (a new MCU, maybe) forgets what was sent; a
    /// joint's sample that its rate takes to its limits, or a joint under a rate no longer heard,
    /// stops the MCU ([`RateGuard`]), until it acknowledges the Stop.
    pub fn heard(&mut self, now_ns: u64, event: &DriverEvent, table: &PrototypeTable) -> Vec<Request> {
        let named = |id: u8, name: &str| table.get(id).is_some_and(|prototype| prototype.name == name);
        match event {
            DriverEvent::Link(RdscomEvent::Acked { prototype, latency, .. }) if named(*prototype, "Stop") => {
                self.rates.stop_acknowledged(now_ns.saturating_sub(latency.as_nanos() as u64));
            }
            DriverEvent::Link(RdscomEvent::Failed { prototype, .. }) if named(*prototype, "Stop") => {
                self.rates.stop_failed();
            }
            DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Up)) => self.unsent(),
            _ => {}
        }
        let sample = match event {
            DriverEvent::Link(RdscomEvent::Received(message)) => joint_sample(message, table),
            _ => None,
        };
        let guarded =
            sample.and_then(|sample| self.rates.sample(&sample, now_ns)).or_else(|| self.rates.unheard(now_ns));
        if let Some(stop) = self.stopping(guarded) {
            return stop;
        }
        let DriverEvent::Link(RdscomEvent::Received(message)) = event else { return Vec::new() };
        if table.get(message.prototype).is_none_or(|prototype| prototype.name != "ControlDone") {
            return Vec::new();
        }
        self.running_since_ns = None;
        match self.waiting.take() {
            Some(positions) => self.setpoint(now_ns, positions),
            None => Vec::new(),
        }
    }
}

/// A MotorControl request: `motor`'s control in `mode` (0 position, 1 velocity, 2 effort) to
/// `value`, run with the one before when `simultaneous`.
fn motor_control(motor: usize, mode: i64, value: f64, simultaneous: bool) -> Request {
    Request {
        prototype: "MotorControl".into(),
        values: vec![Value::Int(motor as i64), Value::Int(mode), Value::Float(value), Value::Bool(simultaneous)],
    }
}

/// The follower's setpoint as the MCU takes it: every joint's position control, run together
/// (each simultaneous with the one before), then ControlGo.
fn setpoint_requests(positions: &[f64]) -> Vec<Request> {
    let mut requests: Vec<Request> =
        positions.iter().enumerate().map(|(motor, position)| motor_control(motor, 0, *position, motor > 0)).collect();
    requests.push(Request { prototype: "ControlGo".into(), values: vec![Value::Int(0)] });
    requests
}

/// One joint's sample from a SensorDatastream: position [rad], and, with the newer table,
/// velocity [rad/s] and motor temperature [deg C].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointSample {
    pub joint: usize,
    pub position: f64,
    pub velocity: Option<f64>,
    pub temperature: Option<f64>,
}

/// Reads a SensorDatastream message in either table's layout.
pub fn joint_sample(message: &Message, table: &PrototypeTable) -> Option<JointSample> {
    let field = |name: &str| message.field(table, name).map(Value::as_f64);
    let joint = usize::try_from(field("joint_id")? as i64).ok()?;
    let position = field("joint_pos").or_else(|| field("data"))?;
    Some(JointSample { joint, position, velocity: field("motor_vel"), temperature: field("motor_temp") })
}

/// The frame of a joint's motor temperature (sensor_msgs/Temperature on `~/temperature`), a
/// link of urdf/finger_testbench.urdf, after the node's `frame_prefix`.
pub fn motor_frame(frame_prefix: &str, joint_name: &str) -> String {
    format!("{frame_prefix}{joint_name}_motor")
}

/// What a driver event tells of the link's health (/diagnostics "arduino_driver: link").
pub fn track_link(health: &mut LinkReport, event: &DriverEvent) {
    match event {
        DriverEvent::Link(RdscomEvent::Received(_)) => health.packets += 1,
        DriverEvent::Link(RdscomEvent::StateChanged(to)) => health.changed(*to),
        DriverEvent::Link(RdscomEvent::Resent { .. }) => health.resends += 1,
        DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
            health.failed_request(format!("request {prototype} #{number} got no acknowledgement"))
        }
        DriverEvent::Link(RdscomEvent::Refused { prototype, reason }) => {
            health.failed_request(format!("request {prototype} refused: {reason}"))
        }
        DriverEvent::PortUnavailable { reason, .. } => health.port_error(reason.clone()),
        _ => {}
    }
}

/// MotorControl requests from a JointState command: the one non-empty array among position,
/// velocity and effort picks the control mode; every named joint gets a control, all but the
/// first simultaneous with the one before. A NaN or infinite value, or one beyond the joint's
/// limits, refuses the whole command before any of it is sent, rather than moving the joints
/// named before it.
pub fn requests_from_joint_command(
    names: &[String],
    position: &[f64],
    velocity: &[f64],
    effort: &[f64],
    joint_names: &[String],
) -> Result<Vec<Request>, String> {
    let (mode, values) = match (position.is_empty(), velocity.is_empty(), effort.is_empty()) {
        (false, true, true) => (0, position),
        (true, false, true) => (1, velocity),
        (true, true, false) => (2, effort),
        _ => return Err("exactly one of position, velocity and effort must be given".into()),
    };
    if values.len() != names.len() {
        return Err(format!("{} names but {} values", names.len(), values.len()));
    }
    crate::nodes::each_named_once(names)?;
    names
        .iter()
        .zip(values)
        .enumerate()
        .map(|(index, (name, value))| {
            let motor = joint_names.iter().position(|joint| joint == name).ok_or(format!("unknown joint `{name}`"))?;
            if !value.is_finite() {
                return Err(format!("joint `{name}`: {value} is not a finite target"));
            }
            if let Some(why) = beyond_limits(motor, mode, *value) {
                return Err(format!("joint `{name}`: {why}"));
            }
            Ok(motor_control(motor, mode, *value, index > 0))
        })
        .collect()
}

/// The testbench's MCU on its port as a managed node drives it: configure waits for an
/// acknowledged heartbeat and starts the datastream; deactivate sends `stop`, which ends the
/// MCU's controls and holds the motors.
pub struct Testbench {
    pub port: String,
    pub link: RdscomConfig,
    pub table: PrototypeTable,
    pub stream_rate_hz: u8,
}

impl SerialDevice for Testbench {
    type Driver = RdscomDriver;
    type Commander = RdscomCommander;
    type Event = DriverEvent;
    type Topics = SerialDeviceTopics<ArduinoTopics>;

    fn open(&self) -> std::io::Result<RdscomDriver> {
        let port = resolve_port(&self.port, DeviceKind::Testbench)?;
        RdscomDriver::start(&port.to_string_lossy(), self.link.clone(), self.table.clone())
    }

    fn events(driver: &RdscomDriver) -> &Receiver<DriverEvent> {
        driver.events()
    }

    fn commander(driver: &RdscomDriver) -> RdscomCommander {
        driver.commander()
    }

    fn close(driver: RdscomDriver) {
        driver.stop();
    }

    fn answered(event: &DriverEvent) -> bool {
        matches!(event, DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Up)))
    }

    fn unavailable(event: &DriverEvent) -> Option<String> {
        event.port_unavailable()
    }

    fn lost(event: &DriverEvent) -> Option<String> {
        match event {
            DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Lost)) => {
                Some("the MCU stopped acknowledging heartbeats".to_owned())
            }
            DriverEvent::PortUnavailable { path, reason, .. } => Some(format!("port {path}: {reason}")),
            _ => None,
        }
    }

    fn log(&self, event: &DriverEvent) {
        log_event(event, &self.table);
    }

    /// The datastream of every joint, at the node's rate.
    fn configured(&self, commander: &RdscomCommander) -> Result<(), String> {
        match self.stream_rate_hz {
            0 => Ok(()),
            rate => send_line(commander, &format!("stream all {rate}")),
        }
    }

    fn activate(&self, _: &RdscomCommander) -> Result<(), String> {
        Ok(())
    }

    /// `stop`: the MCU ends its controls and holds the motors.
    fn deactivate(&self, commander: &RdscomCommander) -> Result<(), String> {
        send_line(commander, "stop")
    }
}

/// What the node logs of its driver's events (the rest is on its topics): the MCU's messages
/// that no topic carries, and the link's changes.
fn log_event(event: &DriverEvent, table: &PrototypeTable) {
    match event {
        DriverEvent::Link(RdscomEvent::Received(message)) => log_message(message, table),
        DriverEvent::Link(RdscomEvent::StateChanged(to)) => log::info!("link {to:?}"),
        DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
            log::error!("request {prototype} #{number} got no acknowledgement")
        }
        DriverEvent::Link(RdscomEvent::Refused { prototype, reason }) => {
            log::error!("request {prototype} refused: {reason}")
        }
        DriverEvent::PortUnavailable { path, reason, .. } => log::warn!("port {path}: {reason}"),
        _ => {}
    }
}

fn log_message(message: &Message, table: &PrototypeTable) {
    if joint_sample(message, table).is_none() {
        let name = table.get(message.prototype).map_or("unknown", |prototype| prototype.name.as_str());
        log::info!("{name} #{}", message.number);
    }
}

/// Sends a console command's request.
pub fn send_line(commander: &RdscomCommander, line: &str) -> Result<(), String> {
    let request = parse_console_command(line, 0)?;
    commander.send(request).map_err(|error| error.to_string())
}
