//! A serial device's commands (stm32_driver's, arduino_driver's): its FollowJointTrajectory goals
//! and its `~/joint_command` stream over [`DeviceGoals`], its setpoints as the node makes them
//! for the device (the STM32's commands, the testbench's MotorControl requests), under
//! activations, deactivations and device faults, against a device that moves its joints toward
//! the last setpoint at their top speed (or, faulted, not at all).

use arm_hil::drivers::stm32::validate_command;
use arm_hil::nodes::arduino::{
    requests_from_joint_command, ArduinoNodeConfig, TestbenchSetpoints, JOINT_LIMITS,
    MAX_VELOCITY_RAD_S as TESTBENCH_SPEED,
};
use arm_hil::nodes::follower::goals::{DeviceGoals, Setpoint, TakesJointGoals};
use arm_hil::nodes::follower::stream_gate::STREAM_GAP_S;
use arm_hil::nodes::follower::{Follower, JointState};
use arm_hil::nodes::stm32::{
    angles_command, targets_from_joint_state, Stm32NodeConfig, MAX_VELOCITY_RAD_S as STM32_SPEED,
};
use arm_hil::protocol::rdscom::{PrototypeTable, Value};

use super::{hostile_goal, limits, Dice, GoalBook, S};

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
    stuck: bool,
    setpoints: TestbenchSetpoints,
}

impl Device {
    fn new(kind: Kind) -> (Device, Follower) {
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
            positions: middle,
            stuck: false,
            setpoints: TestbenchSetpoints::default(),
        };
        (device, follower)
    }

    /// One period: the joints move toward the target at their top speed, unless stuck.
    fn step(&mut self) {
        let dt = PERIOD_NS as f64 * 1e-9;
        for joint in 0..self.positions.len() {
            let before = self.positions[joint];
            if !self.stuck {
                let reach = self.top_speed * dt;
                self.positions[joint] += (self.target[joint] - before).clamp(-reach, reach);
            }
            self.velocities[joint] = (self.positions[joint] - before) / dt;
        }
    }

    fn state(&self) -> JointState {
        JointState { positions: self.positions.clone(), velocities: self.velocities.clone() }
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
        for request in requests.iter().filter(|request| request.prototype == "MotorControl") {
            let [Value::Int(motor), Value::Int(mode), Value::Float(value), _] = request.values[..] else {
                panic!("a MotorControl request of another shape: {request:?}");
            };
            let motor = motor as usize;
            match mode {
                0 => {
                    let (lower, upper) = JOINT_LIMITS[motor];
                    assert!((lower..=upper).contains(&value), "joint {motor} sent to {value} rad");
                    self.target[motor] = value;
                }
                _ => assert!(value.abs() <= 3.0 + 1e-12 && value.is_finite(), "joint {motor}: {value} in mode {mode}"),
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

/// One case: random commands, transitions and faults against one device.
pub(crate) fn run(seed: u64, kind: Kind) {
    let mut dice = Dice::new(seed);
    let (mut device, follower) = Device::new(kind);
    let mut goals = DeviceGoals::<u64>::new(follower);
    let mut book = GoalBook::stopped_below(0.01);
    let (mut now_ns, mut active) = (100 * S, true);
    // A stop with no command since: the device must not be commanded.
    let mut held_since_stop = false;
    // The stream's last command, and whether it is the stale one a stop closed the stream on.
    let mut stream: Option<Vec<f64>> = None;
    // When the stream's last command came [s]: a pause longer than STREAM_GAP_S makes a new one.
    let mut stream_at = f64::NEG_INFINITY;
    let mut stale: Option<Vec<f64>> = None;
    // A goal just accepted: where the joints were at its receipt, and when.
    let mut started: Option<(Vec<f64>, u64)> = None;
    goals.goals.observe(now_ns, device.state());
    for _ in 0..60 {
        match dice.below(20) {
            0..=3 if active => {
                let handle = book.handle();
                let goal =
                    hostile_goal(&mut dice, &device.names, &device.positions, (&device.lower, &device.upper), now_ns);
                let before = book.running();
                match goals.accept_joint_goal(handle, &goal, now_ns) {
                    Ok(replaced) => {
                        book.accepted(handle, &goal, replaced);
                        (held_since_stop, stale) = (false, stream.clone());
                        started = Some((device.positions.clone(), now_ns));
                    }
                    Err(_) => assert_eq!(book.running(), before, "a refused goal leaves the one running"),
                }
            }
            4 => {
                if let Some(running) = book.running() {
                    let which = if dice.chance(0.8) { running } else { running + 1 };
                    if let Some((goal, _)) = goals.cancel_joint_goal(&|goal| *goal == which) {
                        book.ended_once(goal);
                    }
                }
            }
            5..=7 => {
                // A joint command stream: the same command again, a new one, or one out of bounds.
                let positions = match (dice.below(3), &stream) {
                    (0, Some(last)) => last.clone(),
                    (1, _) => device.positions.iter().map(|p| p + dice.range(-1.0, 1.0)).collect(),
                    _ => device.positions.iter().map(|p| p + dice.range(-0.05, 0.05)).collect(),
                };
                let now_s = now_ns as f64 * 1e-9;
                let offered = goals.offer_command(&positions, now_s, active);
                let unbroken = now_s - stream_at <= STREAM_GAP_S;
                if active && unbroken && stale.as_ref() == Some(&positions) {
                    assert!(offered.is_err(), "the stream's command in force at the stop is followed again");
                }
                (stream, stream_at) = (Some(positions.clone()), now_s);
                // The gate: commands while inactive after a stop are stale too; one that passes
                // while active opens it.
                match (active, offered.is_ok()) {
                    (false, _) if held_since_stop => stale = Some(positions.clone()),
                    (true, true) => stale = None,
                    _ => {}
                }
                if active && offered.is_ok() {
                    let sent = match kind {
                        Kind::Stm32 => targets_from_joint_state(&device.names, &positions, &device.names)
                            .map(|_| device.target = positions.clone()),
                        Kind::Arduino => match dice.chance(0.5) {
                            true => device.setpoints.command(now_ns, &device.names, &positions, &device.names),
                            false => requests_from_joint_command(&device.names, &positions, &[], &[], &device.names),
                        }
                        .map(|requests| device.take_requests(&requests)),
                    };
                    assert_eq!(
                        sent.is_ok(),
                        device.within(&positions),
                        "a command is refused exactly when it is beyond the limits"
                    );
                    if sent.is_ok() {
                        if let Some((goal, _)) = goals.command_sent() {
                            book.ended_once(goal);
                        }
                        (held_since_stop, stale) = (false, None);
                    }
                }
            }
            8 if active => {
                // Deactivate, clean up, or the device fails: the goal ends at once.
                let why = ["the node was deactivated", "the node was cleaned up", "the device failed"]
                    [dice.below(3) as usize];
                if let Some((goal, outcome)) = goals.stopped(why) {
                    assert!(matches!(outcome, arm_hil::nodes::follower::Outcome::Aborted { .. }), "{outcome:?}");
                    book.ended_once(goal);
                }
                assert!(!book.any_running() && !goals.goals.commanding(), "a goal outlives the stop");
                (active, held_since_stop, stale) = (false, true, stream.clone());
                device.target = device.positions.clone();
            }
            9 if !active => active = true,
            10 => device.stuck = !device.stuck,
            _ => {
                for _ in 0..dice.below(60) {
                    now_ns += PERIOD_NS;
                    device.step();
                    if dice.chance(0.3) {
                        device.control_done(now_ns);
                    }
                    if !active {
                        goals.goals.observe(now_ns, device.state());
                        continue;
                    }
                    let tick = goals.goals.tick(now_ns, device.state());
                    book.events(tick.events.clone(), Some(&tick.state));
                    if let Some(command) = tick.command {
                        assert!(!held_since_stop, "commanded after a stop before any new command: {command:?}");
                        let positions = command.positions().to_vec();
                        assert!(positions.iter().all(|p| p.is_finite()), "{positions:?}");
                        if let (Setpoint::Follow(_), Some((from, at))) = (&command, started.take()) {
                            let dt = (now_ns - at) as f64 * 1e-9;
                            for (to, from) in positions.iter().zip(&from) {
                                assert!(
                                    (to - from).abs() <= device.top_speed * dt + 1e-6,
                                    "a goal's first setpoint jumps from {from} to {to}"
                                );
                            }
                        }
                        device.send(now_ns, positions);
                    }
                }
            }
        }
        book.check();
        if !active {
            assert!(!book.any_running(), "a goal runs on an inactive node");
        }
    }
    // The node ends: so does every goal.
    if let Some((goal, _)) = goals.stopped("the node was shut down") {
        book.ended_once(goal);
    }
    assert!(!book.any_running());
}
