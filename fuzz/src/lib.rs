//! What each fuzz target does with its input, and the seed inputs each starts from.
//!
//! One function per decoder of outside bytes. Each feeds the decoder as it is fed in real use
//! (in reads of any size where bytes come from a port or a socket) and checks, beyond "no panic,
//! no hang, no unbounded allocation", the properties that are cheap: a decoder never reports
//! more bytes consumed than it was given, and what it decodes, the package encodes back to bytes
//! that decode to the same thing. libFuzzer runs these from `fuzz_targets/`; `cargo test` runs
//! them on the seeds and on every input that ever failed (tests/fuzz_regressions.rs).

use std::path::Path;

use arm_hil::bag::info::{BagInfo, BagReadError};
use arm_hil::bridge::legacy::LegacyServerConfig;
use arm_hil::bridge::vr::VrConfig;
use arm_hil::control::trajectory_csv::{read_waypoints, write_waypoints};
use arm_hil::control::{Waypoint, MAX_WAYPOINTS};
use arm_hil::drivers::robotscara::RigConfig;
use arm_hil::drivers::{rdscom as rdscom_driver, stm32 as stm32_driver};
use arm_hil::hil::stepper::StepperConfig;
use arm_hil::hil::HilConfig;
use arm_hil::protocol::deltavr::{self, VrDecoder, VrMessage};
use arm_hil::protocol::legacy::{encode_request, Mode, Request, RequestDecoder};
use arm_hil::protocol::rdscom::{self, FieldType, FrameDecoder, FrameType, Message, PrototypeTable, Value};
use arm_hil::protocol::rig::{self, LineSplitter, SensorLine};
use arm_hil::protocol::stm32::{self, Command, LengthStyle, PacketDecoder, RawPacket, Telemetry};
use arm_hil::sim::SilConfig;
use foxglove::websocket::ws_protocol::client::ClientMessage;

/// A fuzz target: takes any input, panics only on a finding.
pub type Target = fn(&[u8]);

/// The targets, by name, as `fuzz_targets/` and the corpus folders name them.
pub const TARGETS: [(&str, Target); 11] = [
    ("port5555_request", port5555_request),
    ("stm32_packet", stm32_packet),
    ("rdscom_frame", rdscom_frame),
    ("deltavr_message", deltavr_message),
    ("rig_lines", rig_lines),
    ("trajectory_csv", trajectory_csv),
    ("config_yaml", config_yaml),
    ("bag_info", bag_info),
    ("live_client_message", live_client_message),
    ("console_command", console_command),
    ("follow_joint_trajectory_goal", follow_joint_trajectory_goal),
];

/// Splits `data` as a port or a socket delivers it: the first byte sets the size of every read
/// (1 to 256 bytes), the rest is the stream.
fn reads(data: &[u8]) -> std::slice::Chunks<'_, u8> {
    match data.split_first() {
        Some((&size, stream)) => stream.chunks(usize::from(size) + 1),
        None => [].chunks(1),
    }
}

/// A port-5555 client's request (`S` or `H` handshake, then the trajectory), as the server's
/// session decodes it.
pub fn port5555_request(data: &[u8]) {
    let mut decoder = RequestDecoder::new(MAX_WAYPOINTS);
    for read in reads(data) {
        let Ok((consumed, request)) = decoder.decode(read) else { return };
        assert!(consumed <= read.len(), "consumed {consumed} of {} bytes", read.len());
        match request {
            Some(request) => return request_round_trips(&request),
            None => assert_eq!(consumed, read.len(), "an unfinished request takes every byte"),
        }
    }
}

fn request_round_trips(request: &Request) {
    let mut bytes = Vec::new();
    encode_request(request, &mut bytes);
    let (consumed, again) = RequestDecoder::new(MAX_WAYPOINTS).decode(&bytes).expect("an encoded request decodes");
    assert_eq!(consumed, bytes.len());
    let mut bytes_again = Vec::new();
    encode_request(&again.expect("the whole request"), &mut bytes_again);
    assert_eq!(bytes, bytes_again);
}

/// The STM32 serial stream (either side's packets), with resynchronisation after garbage.
pub fn stm32_packet(data: &[u8]) {
    let mut decoder = PacketDecoder::new();
    let mut given = 0;
    for read in reads(data) {
        decoder.push(read);
        given += read.len() as u64;
        while let Some(packet) = decoder.poll_packet() {
            packet_round_trips(&packet);
        }
    }
    assert!(decoder.stats().dropped_bytes <= given);
}

fn packet_round_trips(packet: &RawPacket) {
    assert!(packet.data.len() <= stm32::MAX_DATA);
    let decode = |bytes: &[u8]| {
        let mut decoder = PacketDecoder::new();
        decoder.push(bytes);
        decoder.poll_packet().expect("an encoded packet decodes")
    };
    let mut bytes = Vec::new();
    stm32::encode_packet(packet.kind, &packet.data, &mut bytes);
    assert_eq!(&decode(&bytes), packet);
    if let Ok(command) = packet.command() {
        let encode = |command: &Command| {
            let mut bytes = Vec::new();
            stm32::encode_command(command, &mut bytes);
            bytes
        };
        let bytes = encode(&command);
        assert_eq!(encode(&decode(&bytes).command().expect("an encoded command decodes")), bytes);
    }
    if let Ok(telemetry) = packet.telemetry() {
        for style in [LengthStyle::Document, LengthStyle::Firmware] {
            let encode = |telemetry: &Telemetry| {
                let mut bytes = Vec::new();
                stm32::encode_telemetry(telemetry, style, &mut bytes);
                bytes
            };
            let bytes = encode(&telemetry);
            assert_eq!(encode(&decode(&bytes).telemetry().expect("encoded telemetry decodes")), bytes);
        }
    }
}

/// The rdscom stream of the finger testbench's MCU; the first byte picks the prototype table
/// (even: the protocol source's, odd: the firmware's; docs/stm32.md).
pub fn rdscom_frame(data: &[u8]) {
    let Some((&table, stream)) = data.split_first() else { return };
    let table = if table % 2 == 0 { PrototypeTable::document() } else { PrototypeTable::firmware() };
    let mut decoder = FrameDecoder::new(table.clone());
    // Reads back what is written; every frame it gets is whole, so it ends each one empty.
    let mut again = FrameDecoder::new(table.clone());
    for read in reads(stream) {
        decoder.push(read);
        while let Some(message) = decoder.poll_message() {
            let encode = |message: &Message| {
                let mut bytes = Vec::new();
                rdscom::encode(message, &table, &mut bytes).expect("a decoded message encodes");
                bytes
            };
            let bytes = encode(&message);
            again.push(&bytes);
            assert_eq!(encode(&again.poll_message().expect("an encoded message decodes")), bytes);
        }
    }
}

/// The Deltarobot VR link, as the leader or the follower reads it; it ends at a fatal error as
/// the session does.
pub fn deltavr_message(data: &[u8]) {
    let mut decoder = VrDecoder::new(VrConfig::default().max_variable_len);
    for read in reads(data) {
        decoder.push(read);
        while let Some(result) = decoder.poll() {
            match result {
                Ok(message) => vr_message_round_trips(&message),
                Err(error) if error.is_fatal() => return,
                Err(_) => {}
            }
        }
    }
}

fn vr_message_round_trips(message: &VrMessage) {
    let encode = |message: &VrMessage| {
        let mut bytes = Vec::new();
        deltavr::encode(message, &mut bytes);
        bytes
    };
    let bytes = encode(message);
    let mut decoder = VrDecoder::new(u32::MAX);
    decoder.push(&bytes);
    let again = decoder.poll().expect("an encoded message decodes").expect("and is valid");
    assert_eq!(encode(&again), bytes);
}

/// The lab's rig's lines (docs/rig.md): the angle sensor's (as the driver splits them, at most 128 bytes),
/// the step driver's commands and the HIL loop's trajectory segments.
pub fn rig_lines(data: &[u8]) {
    let mut splitter = LineSplitter::new(128);
    for read in reads(data) {
        splitter.push(read, |line| {
            assert!(line.len() <= 128);
            if let Ok(sample) = rig::parse_sensor_line(line) {
                let mut bytes = Vec::new();
                rig::encode_sensor_line(&sample, &mut bytes);
                let again = std::str::from_utf8(&bytes).expect("ASCII");
                let again: SensorLine = rig::parse_sensor_line(again).expect("an encoded sensor line parses");
                assert!((again.t - sample.t).abs() <= 1e-6 * sample.t.abs().max(1.0));
            }
            if let Ok(rates) = rig::parse_step_command(line) {
                let mut bytes = Vec::new();
                rig::encode_step_command(&rates, &mut bytes);
                rig::parse_step_command(std::str::from_utf8(&bytes).expect("ASCII"))
                    .expect("an encoded command parses");
            }
            let _ = rig::parse_trajectory_line(line);
        });
    }
}

/// A trajectory CSV file; what it reads, it writes back to a file that reads the same.
pub fn trajectory_csv(data: &[u8]) {
    let Ok(waypoints) = read_waypoints(data) else { return };
    let mut bytes = Vec::new();
    write_waypoints(&mut bytes, &waypoints).expect("writing to memory");
    let again = read_waypoints(&bytes[..]).expect("a written trajectory reads");
    assert_eq!(again.len(), waypoints.len());
    for (a, b) in waypoints.iter().zip(&again) {
        assert!(same_values(a, b), "{a:?} was written and read back as {b:?}");
    }
}

fn same_values(a: &Waypoint, b: &Waypoint) -> bool {
    let values = |w: &Waypoint| {
        [w.t]
            .into_iter()
            .chain(w.x.iter().copied())
            .chain(w.xd.iter().copied())
            .chain(w.xdd.iter().copied())
            .collect::<Vec<_>>()
    };
    values(a).iter().zip(values(b)).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Every section a `--config` file can hold (sil, hil, serve, vr and emulate's together).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AllSections {
    #[serde(default)]
    hil: HilConfig,
    #[serde(default)]
    stepper: StepperConfig,
    #[serde(default)]
    rig: RigConfig,
    #[serde(default)]
    server: LegacyServerConfig,
    #[serde(default)]
    vr: VrConfig,
}

/// A YAML configuration file (`--config`), and an rdscom prototype table (`--prototypes FILE`).
pub fn config_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok((_, sections)) = SilConfig::with_sections::<AllSections>(text, &["hil", "stepper", "rig", "server", "vr"])
    {
        let _ = sections.hil.validate();
        let _ = sections.server.validate();
        let _ = sections.vr.validate();
        // The step driver's and rig's sections have no checks beyond their types.
        std::hint::black_box((&sections.stepper, &sections.rig));
    }
    let _ = PrototypeTable::from_yaml(text);
}

/// A bag directory for `arm_hil bag info`: metadata.yaml up to the first NUL byte, and after it
/// the bytes of every file the metadata names.
pub fn bag_info(data: &[u8]) {
    let split = data.iter().position(|&byte| byte == 0).unwrap_or(data.len());
    let Ok(metadata) = std::str::from_utf8(&data[..split]) else { return };
    let file = data.get(split + 1..).unwrap_or_default();
    let read = BagInfo::from_metadata(metadata, Path::new("metadata.yaml"), |_| Ok(file.to_vec()));
    // The reader's guard against a panic inside the mcap crate is for users; here it is a finding.
    assert!(!matches!(read, Err(BagReadError::McapReaderFailed { .. })), "{read:?}");
    if let Ok(info) = read {
        let _ = info.text();
    }
}

/// What a Foxglove client sends the live view (`--live`): JSON operations in text messages and
/// binary messages, parsed by the Foxglove SDK's server before anything else sees them.
pub fn live_client_message(data: &[u8]) {
    let _ = ClientMessage::parse_binary(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ClientMessage::parse_json(text);
    }
}

/// A line typed on the console of `arm_hil stm32` or `arm_hil arduino` (stdin, from a person
/// or a script); the first byte picks the parser (and for rdscom, the prototype table). What
/// parses goes on as the driver takes it: an STM32 command is checked against the arm's limits
/// and, within them, encoded, and must decode to the same command; an rdscom request is checked
/// against the table and, where it fits, encoded, and must decode.
pub fn console_command(data: &[u8]) {
    let Some((&which, line)) = data.split_first() else { return };
    let Ok(line) = std::str::from_utf8(line) else { return };
    match which % 3 {
        0 => {
            let Ok(command) = stm32_driver::parse_console_command(line) else { return };
            if stm32_driver::validate_command(&command).is_err() {
                return;
            }
            let mut bytes = Vec::new();
            stm32::encode_command(&command, &mut bytes);
            let mut decoder = PacketDecoder::new();
            decoder.push(&bytes);
            let packet = decoder.poll_packet().expect("an encoded command decodes");
            assert_eq!(packet.command().as_ref(), Ok(&command));
        }
        table => {
            let Ok(request) = rdscom_driver::parse_console_command(line, 0) else { return };
            let table = if table == 1 { PrototypeTable::document() } else { PrototypeTable::firmware() };
            let Some(prototype) = table.by_name(&request.prototype) else { return };
            let message =
                Message { kind: FrameType::Request, prototype: prototype.id, number: 0, values: request.values };
            let mut bytes = Vec::new();
            if rdscom::encode(&message, &table, &mut bytes).is_ok() {
                let mut decoder = FrameDecoder::new(table);
                decoder.push(&bytes);
                assert!(decoder.poll_message().is_some(), "an encoded request decodes");
            }
        }
    }
}

/// A FollowJointTrajectory goal as a client can send it, through a motion node's acceptance:
/// the first byte picks the node (even: the STM32 arm's two joints, odd: the parallel arm's
/// three motors, its goal through the forward kinematics and the protective stop's bounds),
/// the rest is the goal (see [`goal_from_bytes`]). An accepted goal's plan starts where the
/// joints are, ends within the goal limits, and keeps every joint within its limits and speed
/// (sampled at each point and between); its setpoints are finite and within the limits.
pub fn follow_joint_trajectory_goal(data: &[u8]) {
    use arm_hil::hil::protection::{PathStart, ProtectionConfig};
    use arm_hil::nodes::follower::goals::JointGoals;
    use arm_hil::nodes::follower::{Constraints, GoalLimits, JointState};
    use arm_hil::nodes::sil::joint_goals::{arm_follower, goal_trajectory};
    use arm_hil::nodes::stm32::{follower, Stm32NodeConfig};

    let Some((&which, bytes)) = data.split_first() else { return };
    // Bit 0: the parallel arm or the STM32; bit 1: a device that reports no velocities (the
    // follower estimates them, a goal starting from rest); bit 2: a path velocity tolerance on
    // the goal's first joint (refused where the velocities are estimated).
    let (arm, reports_velocities) = (which & 1 == 1, which & 2 == 0);
    let robot = arm_hil::model::Robot::default();
    let (follower, actual) = match arm {
        false => (follower(&Stm32NodeConfig::default()).expect("the defaults"), STM32_AT.to_vec()),
        true => {
            (arm_follower(&Constraints::default(), &GoalLimits::default()).expect("the defaults"), arm_at(&robot).1)
        }
    };
    let joints = follower.joints().clone();
    let mut goal = goal_from_bytes(bytes, &joints.names);
    if let (true, Some(joint)) = (which & 4 != 0, goal.joint_names.first()) {
        let tolerance = arm_hil::nodes::follower::JointTolerance { position: 0.0, velocity: 0.1 };
        goal.path_tolerance = vec![(joint.clone(), tolerance)];
    }
    let now_ns = 1_000_000_000_000;
    let state = || JointState {
        positions: actual.clone(),
        velocities: if reports_velocities { vec![0.0; actual.len()] } else { Vec::new() },
    };
    let mut goals = JointGoals::new(follower);
    goals.observe(now_ns - 100_000_000, state());
    goals.observe(now_ns, state());
    let accepted = goals.accept((), &goal, now_ns, |plan| {
        let spline = plan.spline();
        let start = spline.sample(0.0);
        assert_eq!(start.positions, actual, "a plan starts where the joints are");
        assert!(spline.end_s() <= GoalLimits::default().max_duration_s, "a plan within the goal limits");
        assert!(goal.points.len() <= GoalLimits::default().max_points as usize);
        if arm {
            let trajectory = goal_trajectory(&robot, plan, &arm_at(&robot).0, 0.0)?;
            assert!(
                trajectory.waypoints().len() <= (spline.end_s() / 0.01) as usize + 3,
                "samples bounded by the plan"
            );
            ProtectionConfig::default().check_path(
                &robot,
                trajectory.waypoints(),
                PathStart::AtTheReference { seen: None },
            )?;
        }
        Ok(())
    });
    let Ok(((), _)) = accepted else { return };
    let end_s = goals.follower().plan().map_or(0.0, |plan| plan.spline().end_s());
    for k in 0..=16 {
        let t_ns = now_ns + (end_s * 1e9 * f64::from(k) / 16.0) as u64;
        let tick = goals.tick(t_ns, state());
        if let Some(command) = tick.command {
            for (joint, position) in command.positions().iter().enumerate() {
                assert!(
                    position.is_finite() && (joints.lower[joint]..=joints.upper[joint]).contains(position),
                    "a setpoint outside the limits: {position}"
                );
            }
        }
    }
}

/// Where the STM32 arm's joints are when a goal comes [rad].
const STM32_AT: [f64; 2] = [0.1, -0.2];

/// Where the parallel arm is when a goal comes: the built-in arc's start [m], and its motors'
/// angles [rad].
fn arm_at(robot: &arm_hil::model::Robot) -> (arm_hil::model::math::Vec3, Vec<f64>) {
    let start = arm_hil::control::arc::ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm);
    let x = start.expect("the built-in arc")[0].x;
    (x, robot.inverse_kinematics(&x, None).expect("reachable").iter().copied().collect())
}

/// A goal from bytes: a byte of joint names (each a further byte picking one of `names`, or
/// another), a little-endian u16 of points (read as at most one past the goal limit), a u64
/// header stamp [ns] and an f64 goal time tolerance; then per point a time and a position per
/// name (f64 each), and eight bytes whose lowest bits say whether velocities and accelerations
/// follow. Missing bytes read as zeros; points past what the bytes can fill repeat the last
/// one 10 ms later each when the goal names the device's number of joints, and have no values
/// otherwise.
fn goal_from_bytes(bytes: &[u8], names: &[String]) -> arm_hil::nodes::follower::Goal {
    use arm_hil::nodes::follower::spline::TrajectoryPoint;
    use arm_hil::nodes::follower::Goal;
    let mut rest = bytes.iter().copied();
    let mut take = |n: usize| -> [u8; 8] {
        let mut value = [0u8; 8];
        value.iter_mut().take(n).for_each(|b| *b = rest.next().unwrap_or(0));
        value
    };
    let count = usize::from(take(1)[0]);
    let choices: Vec<u8> = (0..count).map(|_| take(1)[0]).collect();
    let joint_names = choices
        .iter()
        .map(|&choice| names.get(usize::from(choice)).cloned().unwrap_or_else(|| format!("joint_{choice}")))
        .collect::<Vec<_>>();
    // One point past the limit reaches the refusal as surely as 65 535 do; building the rest
    // only halved the runs a second.
    let max_points = arm_hil::nodes::follower::GoalLimits::default().max_points as usize + 1;
    let points = usize::from(u16::from_le_bytes([take(1)[0], take(1)[0]])).min(max_points);
    let stamp_ns = u64::from_le_bytes(take(8));
    let goal_time_tolerance_s = f64::from_le_bytes(take(8));
    let mut values = |n: usize| (0..n).map(|_| f64::from_le_bytes(take(8))).collect::<Vec<f64>>();
    // Points past what the input's bytes can fill (a time, a position a joint, the flags) go on
    // from the last one filled, 10 ms a point, where the goal names as many joints as the
    // device has (long valid goals, through the spline and its checks); otherwise they have no
    // values (the count still reaches the limit's refusal, without megabytes of zeros a run).
    let header = 1 + count + 2 + 8 + 8;
    let filled = bytes.len().saturating_sub(header) / (8 * (count + 2));
    let wanted = points;
    let mut points: Vec<TrajectoryPoint> = Vec::with_capacity(wanted);
    for k in 0..wanted {
        let point = match (k < filled, points.last()) {
            (true, _) => {
                let time_s = values(1)[0];
                let positions = values(count);
                let flags = values(1)[0].to_bits() as u8;
                let velocities = if flags & 1 == 1 { values(count) } else { Vec::new() };
                let accelerations = if flags & 2 == 2 { values(count) } else { Vec::new() };
                TrajectoryPoint { time_s, positions, velocities, accelerations }
            }
            (false, Some(last)) if count == names.len() => {
                TrajectoryPoint { time_s: last.time_s + 0.01, ..last.clone() }
            }
            (false, _) => TrajectoryPoint {
                time_s: 0.0,
                positions: Vec::new(),
                velocities: Vec::new(),
                accelerations: Vec::new(),
            },
        };
        points.push(point);
    }
    Goal { joint_names, points, stamp_ns, goal_time_tolerance_s, ..Goal::default() }
}

/// Valid inputs for each target, from the package's own encoders: the corpora start here.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "port5555_request" => port5555_seeds(),
        "stm32_packet" => stm32_seeds(),
        "rdscom_frame" => rdscom_seeds(),
        "deltavr_message" => deltavr_seeds(),
        "rig_lines" => vec![
            with_read_size(7, b"0.001000,0.300000,1.134464,-2.617994\nF,120.5,0.0,33.1,5\r\nP,0.5,0.1,0.2,0.3,0,0,0,0,0,0\n"),
        ],
        "trajectory_csv" => {
            let mut bytes = Vec::new();
            write_waypoints(&mut bytes, &seed_waypoints()).expect("writing to memory");
            vec![bytes]
        }
        "config_yaml" => vec![
            b"robot:\n  l_arm: 0.3\ncontroller:\n  kp: 900\nrun:\n  frame_rate_hz: 250\nserver:\n  max_sessions: 4\nhil:\n  rate_hz: 1000\n".to_vec(),
            b"prototypes:\n  - id: 6\n    name: SensorDatastream\n    fields:\n      - {name: joint_id, type: uint8}\n      - {name: data, type: float}\n".to_vec(),
        ],
        "bag_info" => bag_seeds(),
        "live_client_message" => vec![
            br#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":2}]}"#.to_vec(),
            br#"{"op":"unsubscribe","subscriptionIds":[1]}"#.to_vec(),
            br#"{"op":"advertise","channels":[{"id":7,"topic":"/x","encoding":"cdr","schemaName":"std_msgs/msg/String"}]}"#.to_vec(),
            [&[1u8, 7, 0, 0, 0][..], b"payload"].concat(),
        ],
        "console_command" => [
            (0, "angles 0.5 -0.25"),
            (0, "angle elbow 0.1"),
            (0, "pid 2 0.1 0.05 1.5 0 0.02"),
            (0, "pid shoulder 2 0.1 0.05"),
            (0, "mode trajectory"),
            (0, "telemetry"),
            (1, "move 2 position 1.5 simultaneous"),
            (1, "stream all 100"),
            (2, "unstream 3"),
            (2, "go"),
        ]
        .iter()
        .map(|(which, line)| [&[*which][..], line.as_bytes()].concat())
        .collect(),
        "follow_joint_trajectory_goal" => goal_seeds(),
        _ => Vec::new(),
    }
}

/// Goals for both nodes: a short move of every joint, in order, over one and two seconds.
fn goal_seeds() -> Vec<Vec<u8>> {
    [(0u8, 2u8), (1, 3)]
        .into_iter()
        .map(|(which, joints)| {
            let mut bytes = vec![which, joints];
            bytes.extend(0..joints);
            bytes.extend(2u16.to_le_bytes());
            bytes.extend(0u64.to_le_bytes());
            bytes.extend(0f64.to_le_bytes());
            let at = if which == 0 { STM32_AT.to_vec() } else { arm_at(&arm_hil::model::Robot::default()).1 };
            for (time, step) in [(1.0f64, 0.01f64), (2.0, 0.02)] {
                bytes.extend(time.to_le_bytes());
                for start in &at {
                    bytes.extend((start + step).to_le_bytes());
                }
                bytes.extend([0; 8]);
            }
            bytes
        })
        .collect()
}

fn with_read_size(size: u8, stream: &[u8]) -> Vec<u8> {
    [&[size][..], stream].concat()
}

/// A short straight trajectory, for the targets that read trajectories.
fn seed_waypoints() -> Vec<Waypoint> {
    (0..3)
        .map(|i| {
            let t = f64::from(i) * 0.01;
            Waypoint { t, x: [0.1, -0.05, 0.3 + t].into(), xd: [0.0, 0.0, 1.0].into(), xdd: [0.0; 3].into() }
        })
        .collect()
}

fn port5555_seeds() -> Vec<Vec<u8>> {
    let waypoints = seed_waypoints();
    let hil = Mode::Hil { sensor: "/dev/ttyUSB0".into(), arduino: "auto".into() };
    [Mode::Sil, hil]
        .into_iter()
        .map(|mode| {
            let mut bytes = Vec::new();
            encode_request(
                &Request { mode, elbow: [0.0, 0.0, 0.05].into(), l_arm: 0.3, waypoints: waypoints.clone() },
                &mut bytes,
            );
            with_read_size(31, &bytes)
        })
        .collect()
}

fn stm32_seeds() -> Vec<Vec<u8>> {
    use arm_hil::protocol::stm32::{ControlMode, FullTelemetry, ImuSample, Joint, PidGains};
    let commands = [
        Command::SetJointAngles { shoulder: 0.5, elbow: -0.25 },
        Command::SetJointAngleSingle { joint: Joint::Elbow, angle: 0.1 },
        Command::GetTelemetry,
        Command::SetPidGains {
            shoulder: PidGains { kp: 2.0, ki: 0.1, kd: 0.05 },
            elbow: PidGains { kp: 1.5, ki: 0.0, kd: 0.02 },
        },
        Command::SetMode(ControlMode::Position),
        Command::SetTrajectoryPoint { shoulder: 0.2, elbow: 0.3, duration: 0.5, flags: 0 },
    ];
    let imu = ImuSample { accel: [0.0, 0.5, 9.8], gyro: [0.1, -0.2, 0.3], orientation: [0.25, -0.5] };
    let telemetry = [
        Telemetry::Full(FullTelemetry { timestamp_ms: 20, angles: [0.5, -0.25], velocities: [0.1, 0.0], imu }),
        Telemetry::AnglesOnly { timestamp_ms: Some(40), angles: [0.5, -0.25] },
        Telemetry::ImuOnly { timestamp_ms: 60, imu },
        Telemetry::Error {
            code: Some(stm32::error_code::OUT_OF_RANGE),
            failed_command: Some(0x10),
            message: "range".into(),
        },
        Telemetry::Ack { command: Some(0x10) },
    ];
    let mut stream = b"\x00garbage\xaa\x05".to_vec();
    for command in &commands {
        stm32::encode_command(command, &mut stream);
    }
    for style in [LengthStyle::Document, LengthStyle::Firmware] {
        for telemetry in &telemetry {
            stm32::encode_telemetry(telemetry, style, &mut stream);
        }
    }
    vec![with_read_size(15, &stream)]
}

fn rdscom_seeds() -> Vec<Vec<u8>> {
    [PrototypeTable::document(), PrototypeTable::firmware()]
        .iter()
        .enumerate()
        .map(|(which, table)| {
            let mut stream = b"xRR".to_vec();
            for prototype in (0..=u8::MAX).filter_map(|id| table.get(id)) {
                let values = prototype
                    .fields
                    .iter()
                    .map(|field| match field.kind {
                        FieldType::Float | FieldType::Double => Value::Float(0.5),
                        FieldType::Bool => Value::Bool(true),
                        _ => Value::Int(1),
                    })
                    .collect();
                let message = Message { kind: FrameType::Request, prototype: prototype.id, number: 7, values };
                rdscom::encode(&message, table, &mut stream).expect("seed messages fit their prototypes");
            }
            [&[which as u8][..], &with_read_size(11, &stream)].concat()
        })
        .collect()
}

fn deltavr_seeds() -> Vec<Vec<u8>> {
    let messages = [
        VrMessage::Magic(*b"DELTAVR\0"),
        VrMessage::Version(deltavr::VERSION),
        VrMessage::Ping(42),
        VrMessage::Pong(42),
        VrMessage::Curve(vec![[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]),
        VrMessage::ActuatorPosition([0.1, 0.2, 0.3]),
        VrMessage::CurrentDirection([0.0, 0.0, 1.0]),
        VrMessage::DesiredDirection([0.0, 1.0, 0.0]),
        VrMessage::EndOfTransmission("done".into()),
    ];
    let mut stream = Vec::new();
    for message in &messages {
        deltavr::encode(message, &mut stream);
    }
    vec![with_read_size(9, &stream)]
}

/// A bag the package writes, as `bag_info` takes it.
fn bag_seeds() -> Vec<Vec<u8>> {
    use arm_hil::bag::metadata::BagDistro;
    use arm_hil::bag::BagWriter;
    use arm_hil::msg::{Header, JointState, Time};
    use arm_hil::outputs::{NodeName, Outputs, Qos};

    let dir = std::env::temp_dir().join(format!("arm_hil_fuzz_seed_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let written = (|| -> Option<Vec<u8>> {
        std::fs::create_dir_all(&dir).ok()?;
        let bag = BagWriter::create(&dir.join("bag"), BagDistro::Jazzy).ok()?;
        let mut outputs = Outputs::new(NodeName::new("seed"), bag);
        let topic = outputs.topic::<JointState>("/joint_states", Qos::STREAM).ok()?;
        for i in 0..3u32 {
            let time_ns = 1_000_000_000 + u64::from(i) * 4_000_000;
            let message = JointState {
                header: Header { stamp: Time::from_nanos(time_ns), frame_id: String::new() },
                name: vec!["joint1".into()],
                position: vec![f64::from(i)],
                velocity: vec![],
                effort: vec![],
            };
            outputs.publish(topic, time_ns, &message).ok()?;
        }
        outputs.into_sink().finish().ok()?;
        let metadata = std::fs::read(dir.join("bag/metadata.yaml")).ok()?;
        let file = std::fs::read(dir.join("bag/bag_0.mcap")).ok()?;
        Some([&metadata[..], &[0], &file[..]].concat())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    written.into_iter().collect()
}
