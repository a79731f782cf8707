//! A serial device's commands (stm32_driver's, arduino_driver's) as a state machine: its
//! FollowJointTrajectory goals and its `~/joint_command` stream over [`DeviceGoals`], its
//! setpoints as the node makes them for the device (the STM32's commands, the testbench's
//! MotorControl requests), under activations, stops (a deactivation, a cleanup, a device fault,
//! a signal, a panic in the node's thread), silences of the link and device faults, against a
//! device that moves its joints toward the last setpoint at their top speed (or, stuck, not at
//! all) and that reports its joints' velocities or only their angles.

use arm_hil::drivers::rdscom::{DriverEvent, RdscomEvent};
use arm_hil::drivers::stm32::validate_command;
use arm_hil::nodes::arduino::{
    requests_from_joint_command, state_max_age_ns, ArduinoNodeConfig, TestbenchSetpoints, JOINT_LIMITS, MAX_EFFORT_NM,
    MAX_VELOCITY_RAD_S as TESTBENCH_SPEED,
};
use arm_hil::nodes::follower::clocks::Now;
use arm_hil::nodes::follower::goals::{DeviceGoals, Setpoint, TakesJointGoals};
use arm_hil::nodes::follower::stream_gate::STREAM_GAP_S;
use arm_hil::nodes::follower::{Follower, JointState};
use arm_hil::nodes::stm32::{
    angles_command, targets_from_joint_state, Stm32NodeConfig, MAX_VELOCITY_RAD_S as STM32_SPEED,
};
use arm_hil::protocol::rdscom::{PrototypeTable, Value};
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use super::{hostile_goal, limits, Dice, GoalBook, GOAL_RECIPES, S};

/// Which device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Stm32,
    Arduino,
}

/// The control period: the STM32's telemetry, the testbench's datastream rounds [ns].
const PERIOD_NS: u64 = 10_000_000;

struct Device {
    kind: Kind,
    names: Vec<String>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    top_speed: f64,
    positions: Vec<f64>,
    velocities: Vec<f64>,
    target: Vec<f64>,
    /// The testbench's joints under a velocity control turn at these [rad/s], to no limit of
    /// the MCU's; with the link silent, nothing can stop them (`unguarded`).
    rates: Vec<f64>,
    unguarded: bool,
    stuck: bool,
    /// Whether its telemetry holds velocities (the STM32's full telemetry, the testbench's
    /// firmware table) or only angles (the STM32's short telemetry, the testbench's older table).
    reports_velocities: bool,
    setpoints: TestbenchSetpoints,
}

impl Device {
    fn new(kind: Kind, reports_velocities: bool) -> (Device, Follower) {
        let (names, lower, upper, top_speed, follower) = match kind {
            Kind::Stm32 => {
                let config = Stm32NodeConfig { goal_limits: limits(), ..Stm32NodeConfig::default() };
                let limit = std::f64::consts::FRAC_PI_2;
                let follower = arm_hil::nodes::stm32::follower(&config).unwrap();
                (config.joint_names.clone(), vec![-limit; 2], vec![limit; 2], STM32_SPEED, follower)
            }
            Kind::Arduino => {
                let config = ArduinoNodeConfig { goal_limits: limits(), ..ArduinoNodeConfig::default() };
                let follower = arm_hil::nodes::arduino::follower(&config).unwrap();
                let (lower, upper) = JOINT_LIMITS.iter().copied().unzip();
                (config.joint_names.clone(), lower, upper, TESTBENCH_SPEED, follower)
            }
        };
        let middle: Vec<f64> = lower.iter().zip(&upper).map(|(l, u)| (l + u) / 2.0).collect();
        let device = Device {
            kind,
            names,
            lower,
            upper,
            top_speed,
            velocities: vec![0.0; middle.len()],
            target: middle.clone(),
            rates: vec![0.0; middle.len()],
            unguarded: false,
            positions: middle,
            stuck: false,
            reports_velocities,
            setpoints: TestbenchSetpoints::default(),
        };
        (device, follower)
    }

    /// `dt` [s] on: the joints move toward the target at their top speed, unless stuck.
    fn step(&mut self, dt: f64) {
        for joint in 0..self.positions.len() {
            let before = self.positions[joint];
            if !self.stuck && self.rates[joint] != 0.0 {
                self.positions[joint] += self.rates[joint] * dt;
            } else if !self.stuck {
                let reach = self.top_speed * dt;
                self.positions[joint] += (self.target[joint] - before).clamp(-reach, reach);
            }
            self.velocities[joint] = (self.positions[joint] - before) / dt;
        }
    }

    /// What its telemetry says.
    fn state(&self) -> JointState {
        let velocities = if self.reports_velocities { self.velocities.clone() } else { Vec::new() };
        JointState { positions: self.positions.clone(), velocities }
    }

    /// Whether each joint is within its limits.
    fn each_within(&self) -> Vec<bool> {
        self.positions.iter().zip(self.lower.iter().zip(&self.upper)).map(|(p, (l, u))| (*l..=*u).contains(p)).collect()
    }

    fn within(&self, positions: &[f64]) -> bool {
        positions.iter().zip(self.lower.iter().zip(&self.upper)).all(|(p, (l, u))| (*l..=*u).contains(p))
    }

    /// Sends `positions` as the node would at `now_ns`: what reaches the device is within its
    /// limits, or nothing does.
    fn send(&mut self, now_ns: u64, positions: Vec<f64>) {
        match self.kind {
            Kind::Stm32 => {
                validate_command(&angles_command(&positions)).expect("a setpoint the firmware refuses");
                self.target = positions;
            }
            Kind::Arduino => {
                let requests = self.setpoints.setpoint(now_ns, positions);
                self.take_requests(&requests);
            }
        }
    }

    /// The MotorControl position requests among `requests`: each within its joint's limits.
    fn take_requests(&mut self, requests: &[arm_hil::drivers::rdscom::Request]) {
        if requests.iter().any(|request| request.prototype == "Stop") {
            // Its controls end; the motors hold.
            self.rates.fill(0.0);
            self.target = self.positions.clone();
            self.unguarded = false;
        }
        for request in requests.iter().filter(|request| request.prototype == "MotorControl") {
            let [Value::Int(motor), Value::Int(mode), Value::Float(value), _] = request.values[..] else {
                panic!("a MotorControl request of another shape: {request:?}");
            };
            let motor = motor as usize;
            match mode {
                0 => {
                    let (lower, upper) = JOINT_LIMITS[motor];
                    assert!((lower..=upper).contains(&value), "joint {motor} sent to {value} rad");
                    (self.target[motor], self.rates[motor]) = (value, 0.0);
                }
                // Velocity and effort modes: within their bounds (the joints stay where they are).
                1 => {
                    assert!(value.abs() <= TESTBENCH_SPEED, "joint {motor} at {value} rad/s");
                    self.rates[motor] = value;
                }
                _ => assert!(value.abs() <= MAX_EFFORT_NM, "joint {motor} at {value} N m"),
            }
        }
    }

    /// The testbench's datastream: a sample of each joint, which the node's guard of its rates
    /// hears (its Stop, if any, reaches the MCU).
    fn datastream(&mut self, now_ns: u64) {
        if self.kind != Kind::Arduino {
            return;
        }
        let table = table();
        let Some(prototype) = table.by_name("SensorDatastream").cloned() else { return };
        for joint in 0..self.positions.len() {
            let values = prototype
                .fields
                .iter()
                .map(|field| match field.name.as_str() {
                    "joint_id" => Value::Int(joint as i64),
                    "joint_pos" | "data" => Value::Float(self.positions[joint]),
                    "motor_vel" => Value::Float(self.velocities[joint]),
                    _ => Value::Float(0.0),
                })
                .collect();
            let message = arm_hil::protocol::rdscom::Message {
                kind: arm_hil::protocol::rdscom::FrameType::Response,
                prototype: prototype.id,
                number: 0,
                values,
            };
            let sample = DriverEvent::Link(RdscomEvent::Received(message));
            let requests = self.setpoints.heard(now_ns, &sample, &table);
            self.take_requests(&requests);
            // The MCU acknowledges a Stop at once.
            if let (true, Some(stop)) =
                (requests.iter().any(|request| request.prototype == "Stop"), table.by_name("Stop"))
            {
                let acked = RdscomEvent::Acked { prototype: stop.id, number: 0, latency: std::time::Duration::ZERO };
                self.setpoints.heard(now_ns, &DriverEvent::Link(acked), &table);
            }
        }
    }

    /// The testbench ran its setpoint (ControlDone): the next may go.
    fn control_done(&mut self, now_ns: u64) {
        if self.kind == Kind::Arduino {
            let done = arm_hil::drivers::rdscom::DriverEvent::Link(arm_hil::drivers::rdscom::RdscomEvent::Received(
                arm_hil::protocol::rdscom::Message {
                    kind: arm_hil::protocol::rdscom::FrameType::Request,
                    prototype: control_done_prototype(),
                    number: 0,
                    values: Vec::new(),
                },
            ));
            let requests = self.setpoints.heard(now_ns, &done, &table());
            self.take_requests(&requests);
        }
    }
}

fn table() -> PrototypeTable {
    PrototypeTable::firmware()
}

fn control_done_prototype() -> u8 {
    table().by_name("ControlDone").map(|prototype| prototype.id).unwrap()
}

/// How a stop comes: each ends the goal at once and closes the command stream.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stop {
    Deactivated,
    CleanedUp,
    DeviceFailed,
    Signalled,
    Panicked,
}

impl Stop {
    fn why(self) -> &'static str {
        match self {
            Stop::Deactivated => "the node was deactivated",
            Stop::CleanedUp => "the node was cleaned up",
            Stop::DeviceFailed => "the device failed",
            Stop::Signalled => "SIGTERM",
            Stop::Panicked => "the node's thread panicked",
        }
    }
}

/// What a `~/joint_command` holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Command {
    /// The stream's last command again.
    Again,
    /// Up to 1 rad from the joints: often beyond their limits.
    Far,
    /// Up to 0.05 rad from them.
    Near,
    /// Joint velocities [rad/s] or efforts [N m] (the testbench's other modes), up to twice its
    /// bounds.
    Velocities,
    Efforts,
}

/// One thing that happens to the node.
#[derive(Debug, Clone)]
pub(crate) enum Transition {
    /// A FollowJointTrajectory goal ([`hostile_goal`]'s `recipe`, its choices from `seed`).
    Goal {
        recipe: u8,
        seed: u64,
    },
    /// A cancel of the running goal, or of another.
    Cancel {
        running: bool,
    },
    JointCommand {
        command: Command,
        seed: u64,
        through_setpoints: bool,
    },
    Stop(Stop),
    Activate,
    /// The device stops moving (or moves again).
    Stuck(bool),
    /// Control periods of telemetry and steps; the testbench says ControlDone at about one in
    /// `done_odds` of them.
    Run {
        periods: u16,
        done_odds: u8,
    },
    /// The link is silent for `seconds` while the device goes on (a cable pulled and put back).
    Silence {
        seconds: u8,
    },
    /// The ROS clock jumps by `seconds` (back where negative), as `/clock` may under
    /// `use_sim_time`; the steady clock the node's steps are timed on goes on.
    ClockJump {
        seconds: i16,
    },
}

/// What may happen next: the node active or not.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    kind: Kind,
    reports_velocities: bool,
    active: bool,
}

/// What may happen to a serial device's node next: its model.
pub(crate) struct DeviceMachine<const STM32: bool>;

impl<const STM32: bool> ReferenceStateMachine for DeviceMachine<STM32> {
    type State = Expected;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Expected> {
        let kind = if STM32 { Kind::Stm32 } else { Kind::Arduino };
        any::<bool>().prop_map(move |reports_velocities| Expected { kind, reports_velocities, active: true }).boxed()
    }

    fn transitions(state: &Expected) -> BoxedStrategy<Transition> {
        let command = prop_oneof![
            Just(Command::Again),
            Just(Command::Far),
            Just(Command::Near),
            Just(Command::Velocities),
            Just(Command::Efforts)
        ];
        let always = prop_oneof![
            6 => (1u16..=60, 1u8..=4).prop_map(|(periods, done_odds)| Transition::Run { periods, done_odds }),
            1 => (60u16..=900, 1u8..=4).prop_map(|(periods, done_odds)| Transition::Run { periods, done_odds }),
            3 => (command, any::<u64>(), any::<bool>()).prop_map(|(command, seed, through_setpoints)| {
                Transition::JointCommand { command, seed, through_setpoints }
            }),
            1 => any::<bool>().prop_map(|running| Transition::Cancel { running }),
            1 => any::<bool>().prop_map(Transition::Stuck),
            1 => (1u8..=6).prop_map(|seconds| Transition::Silence { seconds }),
            1 => (-200i16..=200).prop_map(|seconds| Transition::ClockJump { seconds }),
        ];
        match state.active {
            true => prop_oneof![
                4 => (0..GOAL_RECIPES, any::<u64>()).prop_map(|(recipe, seed)| Transition::Goal { recipe, seed }),
                1 => prop_oneof![
                    Just(Stop::Deactivated),
                    Just(Stop::CleanedUp),
                    Just(Stop::DeviceFailed),
                    Just(Stop::Signalled),
                    Just(Stop::Panicked)
                ]
                .prop_map(Transition::Stop),
                12 => always,
            ]
            .boxed(),
            false => prop_oneof![1 => Just(Transition::Activate), 4 => always].boxed(),
        }
    }

    fn apply(mut state: Expected, transition: &Transition) -> Expected {
        match transition {
            Transition::Stop(_) => state.active = false,
            Transition::Activate => state.active = true,
            _ => {}
        }
        state
    }

    fn preconditions(state: &Expected, transition: &Transition) -> bool {
        match transition {
            Transition::Goal { .. } | Transition::Stop(_) => state.active,
            Transition::Activate => !state.active,
            _ => true,
        }
    }
}

/// The node's goals and stream with the device they command, and what the invariants need to
/// remember.
pub(crate) struct Node {
    device: Device,
    goals: DeviceGoals<u64>,
    book: GoalBook,
    /// Now on the steady clock the node's steps are timed on [ns].
    now_ns: u64,
    /// The ROS clock's lead over it [ns]: what goals' stamps are on.
    ros_lead_ns: i128,
    active: bool,
    /// A stop with no command since: the device must not be commanded.
    held_since_stop: bool,
    /// The stream's last command, and when it came [s]: a pause longer than STREAM_GAP_S makes
    /// a new one.
    stream: Option<Vec<f64>>,
    stream_at: f64,
    /// The stream's command in force at a stop: not to be followed again.
    stale: Option<Vec<f64>>,
    /// A goal just accepted: where the joints were at its receipt, and when.
    started: Option<(Vec<f64>, u64)>,
}

impl Node {
    fn new(expected: &Expected) -> Node {
        let (device, follower) = Device::new(expected.kind, expected.reports_velocities);
        let mut goals = match expected.kind {
            Kind::Stm32 => DeviceGoals::<u64>::new(follower),
            Kind::Arduino => {
                DeviceGoals::new(follower).with_state_max_age_ns(state_max_age_ns(&ArduinoNodeConfig::default()))
            }
        };
        let now_ns = 100 * S;
        goals.goals.observe(now_ns, device.state());
        Node {
            device,
            goals,
            book: GoalBook::stopped_below(0.01),
            now_ns,
            ros_lead_ns: 0,
            active: true,
            held_since_stop: false,
            stream: None,
            stream_at: f64::NEG_INFINITY,
            stale: None,
            started: None,
        }
    }

    fn goal(&mut self, recipe: u8, seed: u64) {
        let device = &self.device;
        // Stamped on the ROS clock, moved onto the steps' clock at receipt, as the node does.
        let now = Now {
            ros_ns: u64::try_from((i128::from(self.now_ns) + self.ros_lead_ns).max(0)).unwrap_or(0),
            steps_ns: self.now_ns,
        };
        let goal = now.restamped(hostile_goal(
            &mut Dice::new(seed),
            recipe,
            &device.names,
            &device.positions,
            (&device.lower, &device.upper),
            now.ros_ns,
        ));
        let (handle, before) = (self.book.handle(), self.book.running());
        match self.goals.accept_joint_goal(handle, &goal, self.now_ns) {
            Ok(replaced) => {
                self.book.accepted(handle, &goal, replaced, self.now_ns);
                (self.held_since_stop, self.stale) = (false, self.stream.clone());
                self.started = Some((self.device.positions.clone(), self.now_ns));
            }
            Err(_) => assert_eq!(self.book.running(), before, "a refused goal leaves the one running"),
        }
    }

    fn cancel(&mut self, running: bool) {
        if let Some(goal) = self.book.running() {
            let which = if running { goal } else { goal + 1 };
            if let Some((goal, _)) = self.goals.cancel_joint_goal(&|goal| *goal == which) {
                self.book.ended_once(goal);
            }
        }
    }

    fn joint_command(&mut self, command: Command, seed: u64, through_setpoints: bool) {
        let mut dice = Dice::new(seed);
        let arduino = self.device.kind == Kind::Arduino;
        let mut around =
            |reach: f64| -> Vec<f64> { self.device.positions.iter().map(|p| p + dice.range(-reach, reach)).collect() };
        // Rates up to twice their bound (the testbench's velocity and effort modes).
        let (mode, values) = match (command, &self.stream) {
            (Command::Again, Some(last)) => (0, last.clone()),
            (Command::Far, _) => (0, around(1.0)),
            (Command::Velocities, _) if arduino => (1, around(0.0).iter().map(|_| dice.range(-6.0, 6.0)).collect()),
            (Command::Efforts, _) if arduino => (2, around(0.0).iter().map(|_| dice.range(-2.0, 2.0)).collect()),
            _ => (0, around(0.05)),
        };
        let now_s = self.now_ns as f64 * 1e-9;
        let offered = self.goals.offer_command(&values, now_s, self.active);
        let unbroken = now_s - self.stream_at <= STREAM_GAP_S;
        if self.active && unbroken && self.stale.as_ref() == Some(&values) {
            assert!(offered.is_err(), "the stream's command in force at the stop is followed again");
        }
        (self.stream, self.stream_at) = (Some(values.clone()), now_s);
        // The gate: commands while inactive after a stop are stale too; one that passes while
        // active opens it.
        match (self.active, offered.is_ok()) {
            (false, _) if self.held_since_stop => self.stale = Some(values.clone()),
            (true, true) => self.stale = None,
            _ => {}
        }
        if !(self.active && offered.is_ok()) {
            return;
        }
        let device = &mut self.device;
        let (names, none) = (&device.names, &[][..]);
        let sent = match (device.kind, mode, through_setpoints) {
            (Kind::Stm32, _, _) => targets_from_joint_state(names, &values, names).map(|_| Vec::new()),
            (Kind::Arduino, 0, true) => device.setpoints.command(self.now_ns, names, &values, names),
            (Kind::Arduino, 0, false) => requests_from_joint_command(names, &values, none, none, names),
            (Kind::Arduino, 1, _) => requests_from_joint_command(names, none, &values, none, names),
            (Kind::Arduino, _, _) => requests_from_joint_command(names, none, none, &values, names),
        };
        let within = match mode {
            0 => device.within(&values),
            1 => values.iter().all(|velocity| velocity.abs() <= TESTBENCH_SPEED),
            _ => values.iter().all(|effort| effort.abs() <= MAX_EFFORT_NM),
        };
        assert_eq!(sent.is_ok(), within, "a command is refused exactly when it is beyond the limits");
        // The node's own check: a rate only for joints heard, not toward a limit they are near.
        let sent = sent.and_then(|requests| match device.kind {
            Kind::Arduino => device.setpoints.check(&requests, self.now_ns).map(|()| requests),
            Kind::Stm32 => Ok(requests),
        });
        if let Ok(requests) = sent {
            match (device.kind, mode, through_setpoints) {
                (Kind::Stm32, _, _) => device.target = values,
                // ros2_control's setpoints: the setpoints know them already.
                (Kind::Arduino, 0, true) => device.take_requests(&requests),
                (Kind::Arduino, _, _) => {
                    device.setpoints.others_sent(&requests, self.now_ns);
                    device.take_requests(&requests);
                }
            }
            self.command_taken();
        }
    }

    fn command_taken(&mut self) {
        if let Some((goal, _)) = self.goals.command_sent() {
            self.book.ended_once(goal);
        }
        (self.held_since_stop, self.stale) = (false, None);
    }

    fn stop(&mut self, stop: Stop) {
        if let Some((goal, outcome)) = self.goals.stopped(stop.why()) {
            assert!(matches!(outcome, arm_hil::nodes::follower::Outcome::Aborted { .. }), "{outcome:?}");
            self.book.ended_once(goal);
        }
        assert!(!self.book.any_running() && !self.goals.goals.commanding(), "a goal outlives the stop");
        (self.active, self.held_since_stop, self.stale) = (false, true, self.stream.clone());
        // Every way out of active stops the device: the testbench's MCU gets Stop.
        self.device.setpoints.stopped();
        self.device
            .take_requests(&[arm_hil::drivers::rdscom::Request { prototype: "Stop".into(), values: Vec::new() }]);
        self.device.target = self.device.positions.clone();
    }

    fn run(&mut self, periods: u16, done_odds: u8) {
        let mut dice = Dice::new(u64::from(periods) << 8 | u64::from(done_odds));
        for _ in 0..periods {
            self.now_ns += PERIOD_NS;
            // A joint within its limits stays within them, but for a rate run on unheard.
            let (within, unguarded) = (self.device.each_within(), self.device.unguarded);
            self.device.step(PERIOD_NS as f64 * 1e-9);
            self.device.datastream(self.now_ns);
            let left = within.iter().zip(self.device.each_within()).any(|(before, now)| *before && !now);
            assert!(unguarded || !left, "a joint left its limits: {:?}", self.device.positions);
            if dice.below(u64::from(done_odds)) == 0 {
                self.device.control_done(self.now_ns);
            }
            if !self.active {
                self.goals.goals.observe(self.now_ns, self.device.state());
                continue;
            }
            let tick = self.goals.goals.tick(self.now_ns, self.device.state());
            self.book.events(tick.events.clone(), Some(&tick.state));
            // Every goal ends within its bound: the node's step sees it.
            self.book.check(self.now_ns, PERIOD_NS);
            if let Some(command) = tick.command {
                assert!(!self.held_since_stop, "commanded after a stop before any new command: {command:?}");
                let positions = command.positions().to_vec();
                assert!(positions.iter().all(|p| p.is_finite()), "{positions:?}");
                if let (Setpoint::Follow(_), Some((from, at))) = (&command, self.started.take()) {
                    let dt = (self.now_ns - at) as f64 * 1e-9;
                    for (to, from) in positions.iter().zip(&from) {
                        assert!(
                            (to - from).abs() <= self.device.top_speed * dt + 1e-6,
                            "a goal's first setpoint jumps from {from} to {to}"
                        );
                    }
                }
                self.device.send(self.now_ns, positions);
            }
        }
    }
}

impl<const STM32: bool> StateMachineTest for DeviceMachine<STM32> {
    type SystemUnderTest = Node;
    type Reference = DeviceMachine<STM32>;

    fn init_test(expected: &Expected) -> Node {
        Node::new(expected)
    }

    fn apply(mut node: Node, _: &Expected, transition: Transition) -> Node {
        match transition {
            Transition::Goal { recipe, seed } => node.goal(recipe, seed),
            Transition::Cancel { running } => node.cancel(running),
            Transition::JointCommand { command, seed, through_setpoints } => {
                node.joint_command(command, seed, through_setpoints)
            }
            Transition::Stop(stop) => node.stop(stop),
            Transition::Activate => node.active = true,
            Transition::Stuck(stuck) => node.device.stuck = stuck,
            Transition::Run { periods, done_odds } => node.run(periods, done_odds),
            Transition::Silence { seconds } => {
                // A velocity control runs on while nothing is heard: no software on the PC can
                // stop it (docs/safety.md, exit paths); the guard stops it when heard again.
                node.now_ns += u64::from(seconds) * S;
                node.device.unguarded |= node.device.rates.iter().any(|rate| *rate != 0.0);
                node.device.step(f64::from(seconds));
            }
            Transition::ClockJump { seconds } => node.ros_lead_ns += i128::from(seconds) * i128::from(S),
        }
        node
    }

    fn check_invariants(node: &Node, expected: &Expected) {
        assert_eq!(node.active, expected.active);
        assert!(node.active || !node.book.any_running(), "a goal runs on an inactive node");
        assert!(node.active || !node.goals.goals.commanding(), "an inactive node commands");
    }

    fn teardown(mut node: Node, _: Expected) {
        // The node ends: so does every goal.
        if let Some((goal, _)) = node.goals.stopped("the node was shut down") {
            node.book.ended_once(goal);
        }
        assert!(!node.book.any_running());
    }
}
