//! What the ROS nodes do, tested without ROS: parameters, message conversion, the SIL run loop.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Trajectory, TrajectoryError, Waypoint};
use arm_hil::hil::protection::ProtectionConfig;
use arm_hil::model::math::Vec3;
use arm_hil::model::{Branch, Robot};
use arm_hil::nodes::follower::clocks::Now;
use arm_hil::nodes::goals::{GoalOutcome, GoalUpdate, TakesCartesianGoals};
use arm_hil::nodes::params::{ParamError, ParamValue};
use arm_hil::nodes::sil::commands::{SilCommands, REQUEST_DEPTH};
use arm_hil::nodes::sil::run::{run_sil, RunEnd, RunRequest, SilEvent};
use arm_hil::nodes::sil::{sil_node_config, SilNodeSettings};
use arm_hil::nodes::trajectory_input::{trajectory_from_points, MultiDofPoint, TrajectoryMessageError};
use arm_hil::nodes::{load_trajectory, trajectory_file, LoadTrajectoryError};
use arm_hil::sim::{Frame, RunStats, SilConfig, SimError};

fn params(entries: &[(&str, ParamValue)]) -> BTreeMap<String, ParamValue> {
    entries.iter().map(|(name, value)| (name.to_string(), value.clone())).collect()
}

#[test]
fn parameters_fill_the_sil_configuration_and_the_node_settings() {
    let given = params(&[
        ("use_sim_time", ParamValue::Bool(true)),
        ("controller.kp", ParamValue::Integer(400)),
        ("controller.kd", ParamValue::Double(40.0)),
        ("robot.elbow", ParamValue::DoubleArray(vec![0.3, 0.35, 0.0])),
        ("robot.assembly", ParamValue::StringArray(vec!["minus".into(), "plus".into(), "plus".into()])),
        ("sensor.ideal", ParamValue::Bool(true)),
        ("publish_rate_hz", ParamValue::Double(100.0)),
        ("loop", ParamValue::Bool(true)),
        ("trajectory_file", ParamValue::String("arc.csv".into())),
    ]);
    let (sil, settings) = sil_node_config(&given).unwrap();
    assert_eq!((sil.controller.kp, sil.controller.kd, sil.controller.ki), (400.0, 40.0, 4.0));
    assert_eq!(sil.robot.elbow, [0.3, 0.35, 0.0]);
    assert_eq!(sil.robot.assembly, [Branch::Minus, Branch::Plus, Branch::Plus]);
    assert!(sil.sensor.ideal);
    assert_eq!(
        settings,
        SilNodeSettings {
            publish_rate_hz: 100.0,
            repeat: true,
            trajectory_file: "arc.csv".into(),
            ..SilNodeSettings::default()
        }
    );
    assert_eq!(sil_node_config(&BTreeMap::new()).unwrap(), (SilConfig::default(), SilNodeSettings::default()));
}

#[test]
fn bad_parameters_are_refused_with_their_names() {
    let message = |entries: &[(&str, ParamValue)]| sil_node_config(&params(entries)).unwrap_err().to_string();
    assert!(message(&[("controller.kq", ParamValue::Double(1.0))]).contains("unknown field `kq`"));
    assert!(message(&[("publish_rate", ParamValue::Double(1.0))]).contains("unknown field `publish_rate`"));
    assert!(message(&[("controller.kp", ParamValue::String("fast".into()))]).contains("invalid type"));
    assert!(message(&[("real_time_factor", ParamValue::Double(-1.0))]).contains("real_time_factor"));
    assert!(message(&[("controller.torque_limit", ParamValue::Double(-1.0))]).contains("torque_limit"));
    for speed in [0.0, -0.1] {
        let refused = message(&[("joint_command_speed_m_s", ParamValue::Double(speed))]);
        assert!(refused.contains("joint_command_speed_m_s must be a speed > 0"), "{refused}");
        let hil =
            arm_hil::nodes::hil::hil_node_config(&params(&[("joint_command_speed_m_s", ParamValue::Double(speed))]));
        assert!(hil.is_err_and(|error| error.to_string().contains("joint_command_speed_m_s")));
    }
    let conflict = sil_node_config(&params(&[("robot", ParamValue::Bool(true)), ("robot.d", ParamValue::Double(0.5))]));
    assert!(matches!(conflict, Err(ParamError::Conflict { .. })), "{conflict:?}");
}

fn point(t: f64, x: [f64; 3]) -> MultiDofPoint {
    MultiDofPoint { translations: vec![x], time_from_start_s: t, ..MultiDofPoint::default() }
}

#[test]
fn a_multidof_trajectory_becomes_a_validated_trajectory() {
    let robot = Robot::default();
    let mut second = point(0.5, [0.151, 0.0, 0.2]);
    second.linear_velocities = vec![[0.002, 0.0, 0.0]];
    second.linear_accelerations = vec![[0.0, 0.0, 0.0]];
    let trajectory =
        trajectory_from_points(&[point(0.0, [0.15, 0.0, 0.2]), second], &robot, robot.elbow(), 0.45).unwrap();
    assert_eq!(trajectory.waypoints()[1].xd, Vec3::new(0.002, 0.0, 0.0));
    assert_eq!(trajectory.end_time(), 0.5);
}

#[test]
fn bad_trajectory_messages_are_refused_naming_the_point() {
    let robot = Robot::default();
    let convert = |points: &[MultiDofPoint]| trajectory_from_points(points, &robot, robot.elbow(), 0.45).unwrap_err();
    let two_transforms = MultiDofPoint { translations: vec![[0.15, 0.0, 0.2]; 2], ..point(1.0, [0.0; 3]) };
    assert_eq!(
        convert(&[point(0.0, [0.15, 0.0, 0.2]), two_transforms]),
        TrajectoryMessageError::Transforms { index: 1, count: 2 }
    );
    let two_velocities = MultiDofPoint { linear_velocities: vec![[0.0; 3]; 2], ..point(0.0, [0.15, 0.0, 0.2]) };
    assert!(matches!(
        convert(&[two_velocities]),
        TrajectoryMessageError::Derivatives { index: 0, what: "velocities", count: 2 }
    ));
    let backwards = convert(&[point(1.0, [0.15, 0.0, 0.2]), point(0.5, [0.15, 0.0, 0.2])]);
    assert!(matches!(
        backwards,
        TrajectoryMessageError::Trajectory(TrajectoryError::TimeNotIncreasing { index: 1, .. })
    ));
    assert_eq!(convert(&[]), TrajectoryMessageError::Trajectory(TrajectoryError::Empty));
    let unreachable = convert(&[point(0.0, [2.0, 2.0, 2.0])]);
    assert!(unreachable.to_string().starts_with("waypoint 0 is unreachable"), "{unreachable}");
}

#[test]
fn an_empty_trajectory_file_parameter_starts_the_built_in_arc_and_a_missing_file_is_named() {
    let robot = Robot::new(SilConfig::default().robot).expect("default robot");
    assert_eq!(trajectory_file(""), None);
    let arc = load_trajectory(trajectory_file(""), &robot).expect("the built-in arc is valid");
    let expected = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).expect("arc waypoints");
    assert_eq!(arc.waypoints().len(), expected.len());

    let missing = load_trajectory(trajectory_file("no/such/trajectory.csv"), &robot);
    assert!(
        matches!(&missing, Err(LoadTrajectoryError::Open { path, .. }) if path.ends_with("trajectory.csv")),
        "{missing:?}"
    );
}

fn short_arc(robot: &Robot) -> Arc<Trajectory> {
    let spec = ArcSpec { from_deg: [70.0, -140.0], to_deg: [70.0, -138.0], ..ArcSpec::default() };
    Arc::new(Trajectory::with_robot_forearm(spec.waypoints(&robot.elbow(), 0.45).unwrap(), robot).unwrap())
}

#[test]
fn the_sil_loop_hands_every_frame_on_and_its_publisher_samples_them_at_the_publish_rate() {
    use arm_hil::bag::info::BagInfo;
    use arm_hil::bag::metadata::BagDistro;
    use arm_hil::bag::BagWriter;
    use arm_hil::nodes::sil::publisher::SilPublisher;
    use arm_hil::outputs::{NodeName, Outputs};

    let robot = Robot::default();
    let trajectory = short_arc(&robot);
    let settings = SilNodeSettings { real_time_factor: 0.0, publish_rate_hz: 100.0, ..SilNodeSettings::default() };
    let dir = std::env::temp_dir().join(format!("arm_hil_sil_samples_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = Outputs::new(NodeName::new("sil_node"), BagWriter::create(&dir, BagDistro::Jazzy).unwrap());
    let mut publisher = SilPublisher::advertise(&mut out, robot.clone(), &settings, None, 0).unwrap();
    let (replace, next) = channel();
    let stop = AtomicBool::new(false);
    let (mut frames, mut samples, mut clocks, mut runs, mut started) = (0usize, 0usize, Vec::new(), 0, 0);
    let end = trajectory.end_time();
    let pacing = Mutex::new(settings);
    run_sil(&robot, &SilConfig::default(), &pacing, trajectory.clone(), &next, &stop, &mut |event| {
        let sampled = publisher.publish(&mut out, 0, Some(event)).unwrap();
        match event {
            SilEvent::RunStarted(_) => started += 1,
            SilEvent::Frame { clock_s, frame, .. } => {
                frames += 1;
                clocks.push(*clock_s);
                if sampled {
                    samples += 1;
                }
                assert!(!(frame.t >= end) || sampled, "the run's last frame is published");
            }
            SilEvent::RunEnded { end, .. } => {
                assert_eq!(end, &RunEnd::Complete);
                runs += 1;
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            SilEvent::Refused(_) => unreachable!("nothing is sent to the node"),
        }
    });
    drop(replace);
    out.into_sink().finish().unwrap();
    assert_eq!((started, runs), (1, 1));
    assert!(clocks.windows(2).all(|pair| pair[1] > pair[0]));
    let expected = (end * 100.0).floor() as usize + 1;
    assert!(frames > 4 * expected, "{frames} frames handed on");
    assert!(samples.abs_diff(expected) <= 1, "{samples} samples for {expected}");
    let bag = BagInfo::read(&dir).unwrap();
    let joint_states = bag.topics.iter().find(|topic| topic.name == "/joint_states").unwrap();
    assert_eq!(joint_states.count, samples as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_steered_run_goes_on_with_the_running_arm_and_the_clock_then_holds_its_end() {
    use arm_hil::nodes::sil::joint_goals::HOLD_S;
    let robot = Robot::default();
    let arc = short_arc(&robot);
    let settings = SilNodeSettings { real_time_factor: 0.0, repeat: true, ..SilNodeSettings::default() };
    let (requests, next) = channel();
    let stop = AtomicBool::new(false);
    let (mut events, mut steered, mut runs) = (Vec::new(), false, Vec::new());
    run_sil(&robot, &SilConfig::default(), &Mutex::new(settings), arc.clone(), &next, &stop, &mut |event| {
        match event {
            SilEvent::Frame { frame, .. } if frame.t >= 0.5 && !steered => {
                // A move of 2 mm up from the controller's reference, in 0.2 s.
                steered = true;
                let at = |t, x| Waypoint { t, x, xd: Vec3::zeros(), xdd: Vec3::zeros() };
                let up = frame.x_ref + Vec3::new(0.0, 0.0, 0.002);
                let waypoints = vec![at(0.0, frame.x_ref), at(0.2, up)];
                let move_up = Trajectory::with_robot_forearm(waypoints, &robot).unwrap();
                requests.send(RunRequest::Steer(Arc::new(move_up))).unwrap();
            }
            SilEvent::RunStarted(trajectory) => {
                runs.push(trajectory.clone());
                // The third run is the hold of the move's end, an hour long: enough seen.
                stop.store(runs.len() == 3, std::sync::atomic::Ordering::Relaxed);
            }
            _ => {}
        }
        events.push(event.clone());
    });
    let ends: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            SilEvent::RunEnded { end, .. } => Some(end.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [RunEnd::Replaced, RunEnd::Complete], "the arc is replaced, the move runs to its end");
    let (move_up, held) = (runs[1].waypoints(), runs[2].waypoints());
    assert!(held.iter().all(|waypoint| waypoint.x == move_up[1].x && waypoint.xd == Vec3::zeros()));
    assert_eq!(held[1].t - held[0].t, HOLD_S, "then the simulation holds the move's end, despite `loop`");
    let frames: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            SilEvent::Frame { frame, clock_s, .. } => Some((*clock_s, *frame)),
            _ => None,
        })
        .collect();
    let at_steer = 1 + frames.windows(2).position(|pair| pair[1].1.t < pair[0].1.t).expect("a run starts anew");
    let ((clock_before, before), (clock_after, after)) = (frames[at_steer - 1], frames[at_steer]);
    assert!(clock_after > clock_before && clock_after - clock_before < 0.01, "{clock_before} then {clock_after}");
    assert!((after.x - before.x).norm() < 1e-3 && after.x_dot.norm() > 1e-3, "the arm goes on as it was");
    let (_, last) = frames.last().unwrap();
    assert!((last.t - 0.2).abs() < 1e-9 && (last.x - move_up[1].x).norm() < 1e-3, "the move's end: {last:?}");
}

/// Flattens a `/**: ros__parameters:` file into dotted names, as ROS does.
fn ros_parameters_file(path: &str) -> BTreeMap<String, ParamValue> {
    fn flatten(prefix: &str, value: &serde_norway::Value, out: &mut BTreeMap<String, ParamValue>) {
        let name = |key: &str| if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
        match value {
            serde_norway::Value::Mapping(mapping) => {
                for (key, value) in mapping {
                    flatten(&name(key.as_str().unwrap()), value, out);
                }
            }
            serde_norway::Value::Bool(b) => drop(out.insert(prefix.to_owned(), ParamValue::Bool(*b))),
            serde_norway::Value::Number(n) if n.is_i64() => {
                drop(out.insert(prefix.to_owned(), ParamValue::Integer(n.as_i64().unwrap())))
            }
            serde_norway::Value::Number(n) => {
                drop(out.insert(prefix.to_owned(), ParamValue::Double(n.as_f64().unwrap())))
            }
            serde_norway::Value::String(s) => drop(out.insert(prefix.to_owned(), ParamValue::String(s.clone()))),
            serde_norway::Value::Sequence(items) if items.iter().all(|i| i.is_f64() || i.is_i64()) => drop(out.insert(
                prefix.to_owned(),
                ParamValue::DoubleArray(items.iter().map(|i| i.as_f64().unwrap()).collect()),
            )),
            serde_norway::Value::Sequence(items) => drop(out.insert(
                prefix.to_owned(),
                ParamValue::StringArray(items.iter().map(|i| i.as_str().unwrap().to_owned()).collect()),
            )),
            other => panic!("unexpected parameter value {other:?}"),
        }
    }
    let text = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let document: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    let mut out = BTreeMap::new();
    flatten("", &document["/**"]["ros__parameters"], &mut out);
    out
}

#[test]
fn the_shipped_sil_node_parameters_are_read_without_error() {
    let (sil, settings) = sil_node_config(&ros_parameters_file("config/sil.yaml")).unwrap();
    assert!(settings.repeat);
    assert_eq!(settings.publish_rate_hz, 250.0);
    assert_eq!(sil.controller, SilConfig::default().controller);
}

#[test]
fn legacy_bridge_parameters_configure_the_server_and_hil_sessions() {
    use arm_hil::drivers::RigKind;
    use arm_hil::nodes::legacy::legacy_bridge_config;
    let config = legacy_bridge_config(&params(&[
        ("server.bind", ParamValue::String("127.0.0.1:6000".into())),
        ("server.max_sessions", ParamValue::Integer(8)),
        ("server.device_allow_list", ParamValue::StringArray(vec!["/dev/ttyACM*".into()])),
        ("hil_hardware", ParamValue::String("sim".into())),
        ("hil.rate_hz", ParamValue::Double(500.0)),
        ("publish_rate_hz", ParamValue::Double(100.0)),
    ]))
    .unwrap();
    assert_eq!(config.server.bind.port(), 6000);
    assert_eq!(config.server.max_sessions, 8);
    assert_eq!(config.server.device_allow_list, vec!["/dev/ttyACM*".to_owned()]);
    let hil = config.hil.unwrap();
    assert_eq!((hil.kind, hil.hil.rate_hz), (RigKind::Sim, 500.0));
    assert_eq!(config.settings.publish_rate_hz, 100.0);
    let refused = legacy_bridge_config(&params(&[("hil_hardware", ParamValue::String("stm32".into()))])).unwrap_err();
    assert!(refused.to_string().contains("hil_hardware"), "{refused}");
    assert!(legacy_bridge_config(&params(&[("server.port", ParamValue::Integer(1))])).is_err());
    assert!(legacy_bridge_config(&BTreeMap::new()).unwrap().hil.is_none());
}

#[test]
fn the_decimator_passes_one_sample_per_period_and_follows_a_restart() {
    use arm_hil::nodes::Decimator;
    let mut decimator = Decimator::new(100.0);
    let passed = (0..1000).filter(|k| decimator.due(*k as f64 * 1e-3)).count();
    assert_eq!(passed, 100);
    assert!(decimator.due(0.0), "time restarting is a new session");
}

#[test]
fn stm32_driver_parameters_commands_and_imu_orientation() {
    use arm_hil::nodes::stm32::{command_for_parameter, imu_orientation, stm32_node_config, targets_from_joint_state};
    use arm_hil::protocol::stm32::{Command, ControlMode, Joint};
    let mut config = stm32_node_config(&params(&[
        ("port", ParamValue::String("/dev/ttyACM1".into())),
        ("link.poll_rate_hz", ParamValue::Double(100.0)),
        ("pid.elbow.kp", ParamValue::Double(3.0)),
    ]))
    .unwrap();
    assert_eq!((config.port.as_str(), config.link.poll_rate_hz, config.pid.elbow.kp), ("/dev/ttyACM1", 100.0, 3.0));
    assert!(stm32_node_config(&params(&[("pid.elbow.kp", ParamValue::Double(30.0))]))
        .unwrap_err()
        .to_string()
        .contains("kp"));
    assert!(stm32_node_config(&params(&[("mode", ParamValue::String("fast".into()))])).is_err());

    let names = config.joint_names.clone();
    let both =
        targets_from_joint_state(&["stm32_elbow".into(), "stm32_shoulder".into()], &[0.2, -0.1], &names).unwrap();
    assert_eq!(both, Command::SetJointAngles { shoulder: -0.1, elbow: 0.2 });
    let one = targets_from_joint_state(&["stm32_elbow".into()], &[0.3], &names).unwrap();
    assert_eq!(one, Command::SetJointAngleSingle { joint: Joint::Elbow, angle: 0.3 });
    assert!(targets_from_joint_state(&["stm32_shoulder".into()], &[2.0], &names).unwrap_err().contains("outside"));
    assert!(targets_from_joint_state(&["wrist".into()], &[0.0], &names).is_err());
    let twice = ["stm32_shoulder".into(), "stm32_elbow".into(), "stm32_shoulder".into()];
    let refused = targets_from_joint_state(&twice, &[0.1, 0.2, 0.3], &names).unwrap_err();
    assert_eq!(refused, "joint `stm32_shoulder` is named twice", "no value of the two wins silently");

    let gains =
        command_for_parameter(&mut config, "pid.shoulder.ki", &ParamValue::Double(0.5), false).unwrap().unwrap();
    assert!(matches!(gains, Command::SetPidGains { shoulder, .. } if shoulder.ki == 0.5));
    assert!(command_for_parameter(&mut config, "pid.shoulder.ki", &ParamValue::Double(5.0), false).is_err());
    assert_eq!(config.pid.shoulder.ki, 0.5, "a refused change leaves the gains alone");
    let mode = command_for_parameter(&mut config, "mode", &ParamValue::String("idle".into()), false).unwrap();
    assert_eq!(mode, Some(Command::SetMode(ControlMode::Idle)));
    assert_eq!(command_for_parameter(&mut config, "port", &ParamValue::String("x".into()), false).unwrap(), None);
    // A goal or trajectory followed: the gains and the mode stay as the motion was checked with.
    for (name, value) in [("pid.elbow.kp", ParamValue::Double(1.0)), ("mode", ParamValue::String("position".into()))] {
        let refused = command_for_parameter(&mut config, name, &value, true).unwrap_err();
        assert!(refused.contains("while a goal or ~/joint_trajectory is followed"), "{refused}");
    }
    assert_eq!(config.mode, "idle", "a refused change leaves the mode alone");

    let [x, y, z, w] = imu_orientation(0.0, std::f64::consts::FRAC_PI_2);
    let half = std::f64::consts::FRAC_1_SQRT_2;
    assert!((x.abs() + (y - half).abs() + z.abs() + (w - half).abs()) < 1e-12);
}

#[test]
fn each_hardware_runs_its_measured_settings_unless_a_parameter_sets_them() {
    use arm_hil::nodes::hil::hil_node_config;
    let sigma_a = |given: &[(&str, ParamValue)]| hil_node_config(&params(given)).unwrap().sil.estimator.sigma_a;
    let rig = ("hardware", ParamValue::String("robotscara".into()));
    assert_eq!(sigma_a(&[]), 2.0, "the simulated plant: the simulator's own");
    assert_eq!(sigma_a(std::slice::from_ref(&rig)), 0.5, "the rig's, measured on the emulated rig");
    assert_eq!(sigma_a(&[rig, ("estimator.sigma_a", ParamValue::Double(1.0))]), 1.0, "a parameter wins");
}

#[test]
fn hil_node_parameters_and_segments_that_join_the_running_loop() {
    use arm_hil::drivers::RigKind;
    use arm_hil::nodes::hil::feeder::{segment_after, SegmentError};
    use arm_hil::nodes::hil::hil_node_config;
    let config = hil_node_config(&params(&[
        ("hardware", ParamValue::String("robotscara".into())),
        ("arduino_device", ParamValue::String("/dev/ttyACM0".into())),
        ("hil.rate_hz", ParamValue::Integer(500)),
        ("stepper.pole_pairs", ParamValue::Double(50.0)),
        ("estimator.sigma_a", ParamValue::Double(0.5)),
    ]))
    .unwrap();
    assert_eq!(
        (config.settings.hardware, config.hil.rate_hz, config.sil.estimator.sigma_a),
        (RigKind::Robotscara, 500.0, 0.5)
    );
    assert_eq!(config.devices().arduino, "/dev/ttyACM0");
    assert!(hil_node_config(&params(&[("hardware", ParamValue::String("stm32".into()))])).is_err());

    let robot = Robot::default();
    let last = Vec3::new(0.15, 0.0, 0.2);
    let samples =
        segment_after(&[point(0.5, [0.151, 0.0, 0.2]), point(1.0, [0.152, 0.0, 0.2])], &last, &robot).unwrap();
    assert_eq!(samples.iter().map(|s| s.t).collect::<Vec<_>>(), vec![0.5, 1.0], "timed from the segment's start");
    let stalled = segment_after(&[point(0.5, [0.151, 0.0, 0.2]), point(0.5, [0.152, 0.0, 0.2])], &last, &robot);
    assert!(matches!(stalled, Err(SegmentError::Point { index: 1, .. })), "{stalled:?}");
    assert!(
        segment_after(&[point(0.0, [0.15, 0.0, 0.2])], &last, &robot).is_err(),
        "a segment's first point comes after its start"
    );
    assert!(segment_after(&[point(0.5, [3.0, 0.0, 0.2])], &last, &robot)
        .unwrap_err()
        .to_string()
        .contains("outside the workspace"));
}

/// A hil_node goal of `waypoints` (t, x) for `robot`.
fn goal_trajectory(robot: &Robot, waypoints: &[(f64, [f64; 3])]) -> Arc<Trajectory> {
    let waypoints = waypoints.iter().map(|&(t, x)| Waypoint { t, x: Vec3::from(x), ..Waypoint::default() }).collect();
    Arc::new(Trajectory::with_robot_forearm(waypoints, robot).unwrap())
}

/// The protective stop's bounds for the moves along x from (0.15, 0, 0.2), a point on the
/// forearm's sphere, that the feeder's tests make: they leave the sphere by up to 2 cm, which the
/// default bounds refuse and which is not what those tests are about.
fn bounds_off_the_sphere() -> ProtectionConfig {
    ProtectionConfig { max_forearm_offset_m: 0.05, ..ProtectionConfig::default() }
}

fn hil_frame(t: f64, x: [f64; 3], x_ref: [f64; 3]) -> Frame {
    Frame { t, x: Vec3::from(x), x_ref: Vec3::from(x_ref), ..Frame::default() }
}

#[test]
fn hil_node_feeds_the_initial_trajectory_then_segments_then_a_goal_in_place_of_what_is_queued() {
    use arm_hil::hil::FeedItem;
    use arm_hil::nodes::hil::feeder::{FeedRequest, Feeder};
    let robot = Robot::default();
    let initial = goal_trajectory(&robot, &[(0.0, [0.15, 0.0, 0.2]), (1.0, [0.151, 0.0, 0.2])]);
    let withdrawals = Arc::new(arm_hil::hil::Withdrawals::default());
    let mut feeder = Feeder::new(&initial, robot.clone(), Default::default(), withdrawals);
    let take = |feeder: &mut Feeder| {
        let item = feeder.front().copied();
        feeder.sent();
        item
    };
    assert!(matches!(take(&mut feeder), Some(FeedItem::Sample(w)) if w.t == 0.0));
    feeder.request(FeedRequest::Append(vec![point(0.5, [0.152, 0.0, 0.2])])).unwrap();
    assert!(feeder.request(FeedRequest::Append(vec![point(0.5, [3.0, 0.0, 0.2])])).is_err(), "unreachable");
    let goal = goal_trajectory(&robot, &[(2.0, [0.152, 0.0, 0.2]), (2.5, [0.153, 0.0, 0.2]), (3.0, [0.154, 0.0, 0.2])]);
    assert!(matches!(take(&mut feeder), Some(FeedItem::Sample(w)) if w.t == 1.0));
    feeder.request(FeedRequest::Follow { trajectory: goal, withdrawal: 7 }).unwrap();
    let rest: Vec<_> = std::iter::from_fn(|| take(&mut feeder)).collect();
    let times = |items: &[FeedItem]| -> Vec<f64> {
        items.iter().filter_map(|item| if let FeedItem::Sample(w) = item { Some(w.t) } else { None }).collect()
    };
    assert_eq!(rest[0], FeedItem::Withdrawn(7), "the segment still queued is withdrawn");
    assert_eq!(times(&rest), [0.5, 1.0], "the goal after its first waypoint, timed from the goal's start");
    feeder.request(FeedRequest::Hold { withdrawal: 8 }).unwrap();
    assert_eq!(std::iter::from_fn(|| take(&mut feeder)).collect::<Vec<_>>(), [FeedItem::Withdrawn(8)]);
}

#[test]
fn a_segment_after_a_hold_starts_where_the_loop_holds_and_is_checked_from_there() {
    use arm_hil::hil::{FeedItem, Withdrawals};
    use arm_hil::nodes::hil::feeder::{FeedRequest, Feeder, SegmentError};
    let robot = Robot::default();
    // A move of 4 cm; the loop holds 1 cm along it when the hold comes.
    let initial = goal_trajectory(&robot, &[(0.0, [0.15, 0.0, 0.2]), (4.0, [0.19, 0.0, 0.2])]);
    let withdrawals = Arc::new(Withdrawals::default());
    let mut feeder = Feeder::new(&initial, robot.clone(), bounds_off_the_sphere(), withdrawals.clone());
    let hold = withdrawals.request();
    // From where the move was to end, the segment below would pass.
    let mut unheld = Feeder::new(&initial, robot.clone(), bounds_off_the_sphere(), withdrawals.clone());
    unheld.request(FeedRequest::Append(vec![point(0.1, [0.2, 0.0, 0.2])])).unwrap();
    feeder.request(FeedRequest::Hold { withdrawal: hold }).unwrap();
    // 1 cm on from the end of the move, in 0.1 s: from the hold that is 4 cm in 0.1 s.
    let segment = || FeedRequest::Append(vec![point(0.1, [0.2, 0.0, 0.2])]);
    assert_eq!(feeder.request(segment()), Err(SegmentError::HoldNotMade(hold)), "not before the loop holds");
    assert!(feeder.awaits_hold());
    withdrawals.done(hold, 1.0, Some(Vec3::new(0.16, 0.0, 0.2)));
    let refused = feeder.request(segment()).unwrap_err().to_string();
    assert!(refused.contains("harder than hil.protection.max_joint_acceleration_rad_s2"), "{refused}");
    // From the hold at a walking pace, from rest: taken, and it starts there.
    feeder.request(FeedRequest::Append(vec![point(1.0, [0.165, 0.0, 0.2])])).unwrap();
    let items: Vec<FeedItem> = std::iter::from_fn(|| {
        let item = feeder.front().copied();
        feeder.sent();
        item
    })
    .collect();
    assert_eq!(items[..2], [FeedItem::Withdrawn(hold), FeedItem::Segment]);
    // A sudden start from the hold: 1 mm in the first millisecond.
    let jerk = FeedRequest::Append(vec![point(0.001, [0.166, 0.0, 0.2]), point(1.0, [0.17, 0.0, 0.2])]);
    let refused = feeder.request(jerk).unwrap_err().to_string();
    assert!(refused.contains("max_joint_acceleration_rad_s2") || refused.contains("max_joint_speed"), "{refused}");
}

#[test]
fn a_segment_queued_behind_another_is_checked_across_the_line_between_them() {
    use arm_hil::hil::Withdrawals;
    use arm_hil::nodes::hil::feeder::{FeedRequest, Feeder};
    let robot = Robot::default();
    let initial = goal_trajectory(&robot, &[(0.0, [0.15, 0.0, 0.2]), (1.0, [0.16, 0.0, 0.2])]);
    let mut feeder = Feeder::new(&initial, robot.clone(), bounds_off_the_sphere(), Arc::new(Withdrawals::default()));
    // 1 cm on in 0.1 s from the move's end, at rest: taken.
    feeder.request(FeedRequest::Append(vec![point(0.1, [0.17, 0.0, 0.2])])).unwrap();
    // Then 4 mm back in 10 ms: within the motors' speed, but a reversal the ring would make at
    // the line between the two.
    let back = feeder.request(FeedRequest::Append(vec![point(0.01, [0.166, 0.0, 0.2])]));
    let refused = back.unwrap_err().to_string();
    assert!(refused.contains("max_joint_acceleration_rad_s2"), "{refused}");
    // Going on the same way at the same pace: taken.
    feeder.request(FeedRequest::Append(vec![point(0.1, [0.18, 0.0, 0.2])])).unwrap();
}

/// Segments queued from an arm held off the forearm's sphere: one may come back and sag out
/// again, and the next goes on from where it ends; once back on the sphere, the next cannot
/// take the arm back out to where it was.
#[test]
fn a_chain_of_segments_off_the_forearms_sphere_goes_on_from_each_end_but_not_back_out() {
    use arm_hil::hil::Withdrawals;
    use arm_hil::nodes::hil::feeder::{FeedRequest, Feeder};
    let robot = Robot::default();
    let on = Vec3::new(0.15, 0.0, 0.2);
    let off = |by: f64| -> [f64; 3] { (robot.elbow() + (on - robot.elbow()) * ((0.45 + by) / 0.45)).into() };
    let held = goal_trajectory(&robot, &[(0.0, off(0.015)), (1.0, off(0.015))]);
    let feeder = || Feeder::new(&held, robot.clone(), ProtectionConfig::default(), Arc::new(Withdrawals::default()));
    let mut sagging = feeder();
    sagging.request(FeedRequest::Append(vec![point(0.5, off(0.012)), point(1.0, off(0.013))])).unwrap();
    sagging.request(FeedRequest::Append(vec![point(0.5, off(0.0125))])).expect("on from where the last one ends");
    let mut back = feeder();
    back.request(FeedRequest::Append(vec![point(1.0, off(0.0))])).unwrap();
    let refused = back.request(FeedRequest::Append(vec![point(1.0, off(0.015))])).unwrap_err().to_string();
    assert!(refused.contains("+0.0150 m off the forearm's sphere"), "{refused}");
    assert!(refused.ends_with("past hil.protection.max_forearm_offset_m (0.0100 m)"), "{refused}");
}

/// hil_node's commands, fed to the loop through `requests` and `withdrawals`.
fn hil_commands<C: Clone>(
    robot: &Robot,
    hil: arm_hil::hil::HilConfig,
    requests: arm_hil::nodes::hil::feeder::FeedRequests,
    withdrawals: Arc<arm_hil::hil::Withdrawals>,
) -> arm_hil::nodes::hil::commands::HilCommands<(), C> {
    use arm_hil::nodes::hil::{HilNodeConfig, HilNodeSettings};
    let config =
        HilNodeConfig { sil: SilConfig::default(), hil, rig: Default::default(), settings: HilNodeSettings::default() };
    arm_hil::nodes::hil::commands::HilCommands::new(&config, robot.clone(), requests, withdrawals).unwrap()
}

/// hil_node's commands with its loop running, the arm at rest at `here` [m]: with the queue of
/// what they feed the loop, the withdrawals they ask for, and the motors' angles there [rad].
fn hil_commands_at(
    robot: &Robot,
    here: [f64; 3],
) -> (
    arm_hil::nodes::hil::commands::HilCommands<(), u32>,
    arm_hil::nodes::hil::feeder::RequestQueue,
    Arc<arm_hil::hil::Withdrawals>,
    Vec3,
) {
    let (requests, queue) = arm_hil::nodes::hil::feeder::feed_requests();
    let withdrawals = Arc::new(arm_hil::hil::Withdrawals::default());
    let mut commands = hil_commands::<u32>(robot, arm_hil::hil::HilConfig::default(), requests, withdrawals.clone());
    commands.loop_started(1);
    commands.frame(&hil_frame(5.0, here, here), 1, true, Now::on_one_clock(0));
    let theta = robot.inverse_kinematics(&Vec3::from(here), None).unwrap();
    (commands, queue, withdrawals, theta)
}

#[test]
fn a_joint_command_after_a_segment_holds_first_and_does_not_join_a_move_the_loop_may_have_left() {
    let robot = Robot::default();
    let (mut commands, _queue, withdrawals, theta) = hil_commands_at(&robot, [0.15, 0.0, 0.2]);
    let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
    let mut continuing = Vec::new();
    for (at_s, after_a_segment) in [(10.0, false), (10.004, false), (10.008, true)] {
        if after_a_segment {
            commands.segment(vec![point(0.5, [0.15, 0.0, 0.21])]).unwrap();
        }
        commands.joint_command((at_s, None), &names, theta.as_slice()).unwrap();
        continuing.push(withdrawals.continues(withdrawals.pending().expect("a withdrawal asked for")).is_some());
    }
    // A stream's first move holds first, its next goes on from it; after a segment, the stream
    // starts afresh.
    assert_eq!(continuing, [false, true, false]);
}

#[test]
fn a_segment_after_a_joint_command_follows_the_commands_move_with_no_hidden_hold_before_it() {
    use arm_hil::hil::FeedItem;
    use arm_hil::nodes::hil::feeder::Feeder;
    let robot = Robot::default();
    let here = [0.15, 0.0, 0.2];
    let (mut commands, queue, withdrawals, theta) = hil_commands_at(&robot, here);
    // One joint command to the arm's own joints, then a segment 1 cm above (the case).
    let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
    commands.joint_command((10.0, None), &names, theta.as_slice()).unwrap();
    commands.segment(vec![point(0.5, [0.15, 0.0, 0.21])]).unwrap();

    let initial = goal_trajectory(&robot, &[(0.0, here), (1.0, here)]);
    // A loop resumed where the arm is (as hil_node's is after a deactivation).
    let resumed = withdrawals.request();
    let mut feeder = Feeder::new(&initial, robot.clone(), Default::default(), withdrawals.clone()).holding(resumed);
    withdrawals.done(resumed, 5.0, Some(Vec3::from(here)));
    while let Some(request) = queue.try_take() {
        feeder.request(request).unwrap();
    }
    let items: Vec<FeedItem> = std::iter::from_fn(|| {
        let item = feeder.front().copied();
        feeder.sent();
        item
    })
    .collect();
    let segment = items.iter().position(|item| *item == FeedItem::Segment).expect("the segment is queued");
    let sample = |item: &FeedItem| if let FeedItem::Sample(w) = item { Some(*w) } else { None };
    // The loop runs a segment from where what was queued before it ends.
    let before: Vec<Waypoint> = items[..segment].iter().filter_map(sample).collect();
    let move_ends = before.last().expect("the command's move is queued").t;
    assert!(move_ends < 1.0, "the command's move ends {move_ends} s on: the segment waits that long behind it");
    let last = items[segment..].iter().rev().find_map(sample).unwrap();
    assert!((last.x - Vec3::new(0.15, 0.0, 0.21)).norm() < 1e-9, "the segment's end comes last: {last:?}");
}

#[test]
fn a_hil_goal_starts_only_where_the_arm_holds() {
    use arm_hil::hil::{HilConfig, Withdrawals};
    use arm_hil::nodes::hil::feeder::feed_requests;
    let robot = Robot::default();
    let (requests, _queue) = feed_requests();
    let hil = HilConfig { protection: bounds_off_the_sphere(), ..HilConfig::default() };
    let mut commands = hil_commands::<u32>(&robot, hil, requests, Arc::new(Withdrawals::default()));
    let here = [0.15, 0.0, 0.2];
    let goal = goal_trajectory(&robot, &[(0.0, here), (1.0, [0.151, 0.0, 0.2])]);
    assert!(commands.follow_cartesian_goal(1, goal.clone()).unwrap_err().contains("not active"));
    commands.loop_started(1);
    assert!(commands.follow_cartesian_goal(1, goal.clone()).unwrap_err().contains("first frame"));
    let answers = commands.frame(&hil_frame(5.0, here, [0.16, 0.0, 0.2]), 1, true, Now::on_one_clock(0));
    assert!(answers.cartesian.is_empty(), "no goal yet");
    assert!(commands.follow_cartesian_goal(1, goal.clone()).unwrap_err().contains("0.0100 m from the arm's reference"));
    commands.frame(&hil_frame(5.001, here, [0.152, 0.0, 0.2]), 1, true, Now::on_one_clock(0));
    let endless = goal_trajectory(&robot, &[(0.0, [0.152, 0.0, 0.2]), (2e9, [0.152, 0.0, 0.2])]);
    assert!(commands.follow_cartesian_goal(1, endless).unwrap_err().contains("max_duration_s"), "bounded as FJT's");
    // A waypoint 5 cm away 1 ms later: the loop would lose the arm.
    let jump = goal_trajectory(&robot, &[(0.0, [0.152, 0.0, 0.2]), (0.001, [0.152, 0.05, 0.2])]);
    let refused = commands.follow_cartesian_goal(1, jump).unwrap_err();
    assert!(refused.contains("faster than hil.protection.max_joint_speed_rad_s"), "{refused}");
    assert_eq!(commands.follow_cartesian_goal(1, goal), Ok(None));
}

/// A quick deactivate and activate: frames of the loop that stopped, still on their way to the
/// node, are not the new loop's, and commands wait for its own first frame.
#[test]
fn frames_of_a_stopped_loop_that_come_after_the_next_one_started_are_not_taken() {
    use arm_hil::hil::{HilConfig, Withdrawals};
    use arm_hil::nodes::hil::feeder::feed_requests;
    use arm_hil::nodes::hil::managed::LoopEnd;
    let robot = Robot::default();
    let (requests, _queue) = feed_requests();
    let mut commands = hil_commands::<u32>(&robot, HilConfig::default(), requests, Arc::new(Withdrawals::default()));
    let (held, moving) = ([0.15, 0.0, 0.2], [0.152, 0.0, 0.2]);
    commands.loop_started(1);
    commands.frame(&hil_frame(5.0, moving, moving), 1, true, Now::on_one_clock(0));
    commands.loop_stopped(&LoopEnd::Asked("deactivated".into()));
    commands.loop_started(2);
    commands.frame(&hil_frame(5.001, moving, moving), 1, true, Now::on_one_clock(0));
    let waiting = commands.taking().unwrap_err();
    assert!(waiting.contains("first frame"), "the old loop's frame was taken: {waiting}");
    commands.frame(&hil_frame(0.0, held, held), 2, true, Now::on_one_clock(0));
    assert_eq!(commands.taking().map(|(reference, _)| reference), Ok(Vec3::from(held)));
}

#[test]
fn a_hil_goal_off_the_forearms_sphere_is_refused_with_its_offset() {
    use arm_hil::hil::{HilConfig, Withdrawals};
    use arm_hil::nodes::hil::feeder::feed_requests;
    let robot = Robot::default();
    let (requests, _queue) = feed_requests();
    let mut commands = hil_commands::<u32>(&robot, HilConfig::default(), requests, Arc::new(Withdrawals::default()));
    commands.loop_started(1);
    // (0.15, 0, 0.2) is on the sphere; 4 cm along x the platform would be 1.6 cm inside it.
    let here = [0.15, 0.0, 0.2];
    commands.frame(&hil_frame(5.0, here, here), 1, true, Now::on_one_clock(0));
    let inward = goal_trajectory(&robot, &[(0.0, here), (4.0, [0.19, 0.0, 0.2])]);
    let refused = commands.follow_cartesian_goal(1, inward).unwrap_err();
    assert!(refused.contains("m off the forearm's sphere") && refused.contains("max_forearm_offset_m"), "{refused}");
    let along = goal_trajectory(&robot, &[(0.0, here), (1.0, [0.151, 0.0, 0.2])]);
    assert_eq!(commands.follow_cartesian_goal(1, along), Ok(None), "1 mm along x keeps within 1 cm of it");
}

#[test]
fn a_hil_hold_where_the_arm_is_seen_off_the_forearms_sphere_is_taken_and_so_is_the_way_back() {
    // joint_trajectory_controller holds a cancelled goal with a joint command to where the arm
    // is seen; seen 1.5 cm off the sphere (the emulated rig has no forearm to keep it on), the
    // hold and the way back must be taken, not the move before played on.
    let robot = Robot::default();
    let on = Vec3::new(0.15, 0.0, 0.2);
    let off = |by: f64| robot.elbow() + (on - robot.elbow()) * ((0.45 + by) / 0.45);
    let (mut commands, _queue, _withdrawals, theta) = hil_commands_at(&robot, off(0.015).into());
    let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
    commands.joint_command((10.0, None), &names, theta.as_slice()).expect("the hold where the arm is");
    let back = robot.inverse_kinematics(&on, Some(&theta)).unwrap();
    commands.joint_command((10.004, None), &names, back.as_slice()).expect("the way back onto the sphere");
    let farther = robot.inverse_kinematics(&off(0.02), Some(&theta)).unwrap();
    let refused = commands.joint_command((10.008, None), &names, farther.as_slice()).unwrap_err();
    assert!(refused.contains("widened to the path's start"), "{refused}");
    // Held 0.9 cm off, seen 1.2 cm off (trailing outward) for longer than the frames the node
    // keeps: JTC's hold where it is seen is taken, a move 2 mm farther is not.
    for k in 0..200 {
        commands.frame(
            &hil_frame(6.0 + 1e-3 * k as f64, off(0.012).into(), off(0.009).into()),
            1,
            true,
            Now::on_one_clock(0),
        );
    }
    let seen = robot.inverse_kinematics(&off(0.012), Some(&theta)).unwrap();
    commands.joint_command((20.0, None), &names, seen.as_slice()).expect("the hold where the arm is seen");
    let past = robot.inverse_kinematics(&off(0.014), Some(&theta)).unwrap();
    let refused = commands.joint_command((30.0, None), &names, past.as_slice()).unwrap_err();
    assert!(refused.contains("widened to as far off as the arm was seen lately"), "{refused}");
}

#[test]
fn a_hil_cancel_holds_the_arm_even_when_a_flood_has_filled_the_feeders_requests() {
    use arm_hil::hil::{HilConfig, Withdrawals};
    use arm_hil::nodes::goals::TakesCartesianGoals;
    use arm_hil::nodes::hil::feeder::{feed_requests, REQUEST_DEPTH};
    let robot = Robot::default();
    let (requests, _queue) = feed_requests();
    let withdrawals = Arc::new(Withdrawals::default());
    let mut commands = hil_commands::<u32>(&robot, HilConfig::default(), requests, withdrawals.clone());
    let here = [0.15, 0.0, 0.2];
    commands.loop_started(1);
    commands.frame(&hil_frame(5.0, here, here), 1, true, Now::on_one_clock(0));
    let goal = goal_trajectory(&robot, &[(0.0, here), (1.0, [0.151, 0.0, 0.2])]);
    assert_eq!(commands.follow_cartesian_goal(1, goal), Ok(None));
    let flood = (0..).map(|_| commands.segment(vec![point(0.5, here)])).take_while(Result::is_ok).count();
    assert_eq!(flood, REQUEST_DEPTH - 1, "the goal's request and the flood fill the queue");
    assert!(commands.segment(vec![point(0.5, here)]).unwrap_err().contains("already wait"));
    let huge = vec![point(0.5, here); arm_hil::nodes::hil::commands::MAX_SEGMENT_POINTS + 1];
    assert!(commands.segment(huge).unwrap_err().contains("more than a segment's"));
    let before = withdrawals.pending();
    assert!(commands.cancel_cartesian_goal(&|goal| *goal == 1));
    assert_eq!(withdrawals.pending(), before.map(|n| n + 1), "the hold went out past the bound");
    assert!(commands.drain().cartesian.is_empty(), "the goal waits for its hold, not ended in error");
}

/// The HIL loop on the simulated rig, fed by hil_node's feeder, with its goals followed
/// through its frames: a goal runs to its end, the next is cancelled midway and the arm holds.
#[test]
fn hil_goals_run_on_the_loop_complete_with_a_result_and_a_cancel_holds_the_arm() {
    use arm_hil::hil::{FrameChannel, HilConfig, HilLoop, SimulatedRig, Withdrawals, FEED_DEPTH};
    use arm_hil::nodes::hil::feeder::{feed_requests, run_feeder, Feeder};
    let robot = Robot::default();
    let config = SilConfig::default();
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -149.0], ..ArcSpec::default() };
    let initial =
        Trajectory::with_robot_forearm(spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap(), &robot).unwrap();
    let rig = SimulatedRig::new(robot.clone(), &config, &initial.waypoints()[0], robot.elbow()).unwrap();
    let (feed, samples) = std::sync::mpsc::sync_channel(FEED_DEPTH);
    let (requests, feeder_requests) = feed_requests();
    let hil_config = HilConfig { realtime_priority: None, ..Default::default() };
    let withdrawals = Arc::new(Withdrawals::default());
    let feeder = Feeder::new(&initial, robot.clone(), hil_config.protection.clone(), withdrawals.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let feeder_stop = stop.clone();
    let feeding = std::thread::spawn(move || run_feeder(feeder, feeder_requests, feed, &feeder_stop));
    let (frames_tx, frames) = std::sync::mpsc::sync_channel(20_000);
    let mut commands = hil_commands::<u32>(&robot, hil_config.clone(), requests, withdrawals.clone());
    let hil = HilLoop::new(hil_config, &config, robot.elbow(), 0.45, Box::new(rig), samples, stop.clone())
        .unwrap()
        .with_frames(Box::new(FrameChannel::new(frames_tx, 1)))
        .with_withdrawals(withdrawals);
    commands.loop_started(1);
    let running = std::thread::spawn(move || hil.run());

    let end = initial.end_time();
    let mut taken = frames.recv().unwrap();
    while taken.frame.t < end + 0.1 {
        assert!(commands.frame(&taken.frame, taken.loop_number, true, Now::on_one_clock(0)).cartesian.is_empty());
        taken = frames.recv().unwrap();
    }
    let frame = taken.frame;
    let hold = frame.x_ref;
    let step = |dx: f64| [hold.x + dx, hold.y, hold.z];
    let first = goal_trajectory(&robot, &[(0.0, step(0.0)), (0.3, step(0.001)), (0.6, step(0.002))]);
    assert_eq!(commands.follow_cartesian_goal(1, first), Ok(None));
    let mut updates = Vec::new();
    let mut cancelled_at = None;
    while cancelled_at.is_none() || updates.iter().all(|update| !matches!(update, GoalUpdate::Finished(2, ..))) {
        let taken = frames.recv_timeout(std::time::Duration::from_secs(2)).expect("a frame");
        let frame = taken.frame;
        for update in commands.frame(&frame, taken.loop_number, true, Now::on_one_clock(0)).cartesian {
            match &update {
                GoalUpdate::Finished(1, ..) => {
                    let second = goal_trajectory(&robot, &[(0.0, step(0.002)), (2.0, step(0.0))]);
                    assert_eq!(commands.follow_cartesian_goal(2, second), Ok(None));
                }
                GoalUpdate::Feedback(2, feedback) if feedback.progress > 0.1 && cancelled_at.is_none() => {
                    assert!(commands.cancel_cartesian_goal(&|goal| *goal == 2));
                    cancelled_at = Some(frame.t);
                }
                _ => {}
            }
            updates.push(update);
        }
    }
    let held: Vec<Vec3> = (0..200).map(|_| frames.recv().unwrap().frame.x_ref).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    running.join().unwrap().outcome.unwrap();
    drop(commands);
    feeding.join().unwrap();
    let finished: Vec<_> = updates
        .iter()
        .filter_map(|update| match update {
            GoalUpdate::Finished(goal, outcome, result) => Some((*goal, *outcome, result.clone())),
            GoalUpdate::Feedback(..) => None,
        })
        .collect();
    assert_eq!(
        finished.iter().map(|(goal, outcome, _)| (*goal, *outcome)).collect::<Vec<_>>(),
        [(1, GoalOutcome::Succeeded), (2, GoalOutcome::Canceled)]
    );
    let completed = &finished[0].2;
    assert!(completed.success && completed.message == "trajectory complete", "{completed:?}");
    // One frame a loop cycle for 0.6 s at 1 kHz; a loaded machine skips periods, never adds them.
    assert!((300..=602).contains(&completed.frames), "0.6 s at 1 kHz: {} frames", completed.frames);
    // The simulated plant runs on loop time: periods a loaded machine skips leave the arm to the
    // last torque for that long (1.03 mm was seen with a colcon build beside the tests).
    assert!(completed.max_error < 2e-3 && completed.rms_error <= completed.max_error, "{completed:?}");
    assert_eq!(finished[1].2.message, "cancelled");
    let progress: Vec<f64> = updates
        .iter()
        .filter_map(|update| match update {
            GoalUpdate::Feedback(1, feedback) => Some(feedback.progress),
            _ => None,
        })
        .collect();
    assert!(progress.windows(2).all(|pair| pair[1] >= pair[0]) && progress[0] < 0.01, "{progress:?}");
    assert!(held.windows(2).all(|pair| pair[0] == pair[1]), "the arm holds after the cancel");
}

#[test]
fn arduino_driver_samples_and_joint_commands() {
    use arm_hil::nodes::arduino::{arduino_node_config, joint_sample, requests_from_joint_command};
    use arm_hil::protocol::rdscom::{FrameType, Message, PrototypeTable, Value};
    let config = arduino_node_config(&params(&[
        ("link.table", ParamValue::String("firmware".into())),
        ("stream_rate_hz", ParamValue::Integer(100)),
    ]))
    .unwrap();
    assert_eq!(config.stream_rate_hz, 100);
    assert!(arduino_node_config(&params(&[("stream_rate_hz", ParamValue::Integer(1000))])).is_err());

    let firmware = PrototypeTable::firmware();
    let values = vec![Value::Int(2), Value::Float(1.0), Value::Float(0.5), Value::Float(36.5), Value::Float(0.25)];
    let sample =
        joint_sample(&Message { kind: FrameType::Response, prototype: 6, number: 0, values }, &firmware).unwrap();
    assert_eq!((sample.joint, sample.position, sample.velocity, sample.temperature), (2, 0.25, Some(0.5), Some(36.5)));
    let document = PrototypeTable::document();
    let sample = joint_sample(
        &Message { kind: FrameType::Response, prototype: 6, number: 0, values: vec![Value::Int(1), Value::Float(0.5)] },
        &document,
    )
    .unwrap();
    assert_eq!((sample.joint, sample.position, sample.velocity), (1, 0.5, None));

    let names = config.joint_names.clone();
    let requests =
        requests_from_joint_command(&["finger_joint1".into(), "finger_joint3".into()], &[], &[0.5, -0.5], &[], &names)
            .unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].values, vec![Value::Int(3), Value::Int(1), Value::Float(-0.5), Value::Bool(true)]);
    assert!(requests_from_joint_command(&["joint1".into()], &[0.1], &[0.1], &[], &names).is_err());
    let twice = ["finger_joint1".into(), "finger_joint1".into()];
    let refused = requests_from_joint_command(&twice, &[0.1, 0.4], &[], &[], &names).unwrap_err();
    assert!(refused.contains("named twice"), "{refused}");
    assert!(requests_from_joint_command(&["wrist".into()], &[0.1], &[], &[], &names).is_err());
    let half_finite = ["finger_joint1".into(), "finger_joint3".into()];
    for value in [f64::NAN, f64::INFINITY] {
        let refused = requests_from_joint_command(&half_finite, &[0.5, value], &[], &[], &names).unwrap_err();
        assert!(refused.contains("finger_joint3") && refused.contains("not a finite target"), "{refused}");
    }
}

/// The JointState messages arduino_driver publishes from a datastream of two rounds of every
/// joint (and a lone sample of joint 1), configured with `ros2_control`.
fn arduino_joint_states(ros2_control: bool) -> Vec<arm_hil::msg::JointState> {
    use arm_hil::bag::metadata::BagDistro;
    use arm_hil::bag::BagWriter;
    use arm_hil::drivers::rdscom::{DriverEvent, RdscomEvent};
    use arm_hil::nodes::arduino::topics::ArduinoTopics;
    use arm_hil::nodes::arduino::ArduinoNodeConfig;
    use arm_hil::outputs::{NodeName, Outputs, Publisher};
    use arm_hil::protocol::rdscom::{FrameType, Message, PrototypeTable, Value};

    let dir = std::env::temp_dir().join(format!("arm_hil_arduino_rounds_{ros2_control}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = Outputs::new(NodeName::new("arduino_driver"), BagWriter::create(&dir, BagDistro::Jazzy).unwrap());
    let config = ArduinoNodeConfig { ros2_control, ..ArduinoNodeConfig::default() };
    let mut topics = ArduinoTopics::advertise(&mut out, "/dev/ttyACM0", &config, PrototypeTable::document()).unwrap();
    let joints = [1, 0, 1, 2, 3, 0, 1, 2, 3];
    for (index, joint) in joints.into_iter().enumerate() {
        let values = vec![Value::Int(joint), Value::Float(0.1 * index as f64)];
        let message = Message { kind: FrameType::Response, prototype: 6, number: 0, values };
        let event = DriverEvent::Link(RdscomEvent::Received(message));
        topics.event(&mut out, index as u64 * 1_000_000, Some(&event)).unwrap();
    }
    out.into_sink().finish().unwrap();
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "mcap"));
    let bytes = std::fs::read(file.unwrap()).unwrap();
    let states = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|message| message.channel.topic == "/joint_states")
        .map(|message| {
            cdr_encoding::from_bytes::<arm_hil::msg::JointState, byteorder::LittleEndian>(&message.data[4..]).unwrap().0
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    states
}

#[test]
fn arduino_driver_publishes_a_joint_a_message_or_under_ros2_control_every_joint_once_a_round() {
    let samples = arduino_joint_states(false);
    assert_eq!(samples.len(), 9, "a message per sample");
    assert_eq!(
        (samples[0].name.as_slice(), samples[0].position.as_slice()),
        (&["finger_joint1".to_owned()][..], &[0.0][..])
    );
    // ros2_control's topic-based hardware reads only the newest message of a cycle.
    let rounds = arduino_joint_states(true);
    assert_eq!(rounds.len(), 2, "a message when joint 3 ends a round in which every joint was heard");
    let names: Vec<String> = (0..4).map(|joint| format!("finger_joint{joint}")).collect();
    assert!(rounds.iter().all(|state| state.name == names && state.velocity.len() == 4 && state.effort.len() == 4));
    let position = |index: usize| 0.1 * index as f64;
    assert_eq!(rounds[0].position, vec![position(1), position(2), position(3), position(4)]);
    assert_eq!(rounds[1].position, vec![position(5), position(6), position(7), position(8)]);
}

#[test]
fn vr_bridge_parameters_pick_the_role_topics_and_transform() {
    use arm_hil::nodes::vr::{vr_node_config, VrMode};
    let config = vr_node_config(&params(&[
        ("mode", ParamValue::String("follower".into())),
        ("leader_address", ParamValue::String("127.0.0.1:9000".into())),
        ("vr.rate_hz", ParamValue::Double(90.0)),
        ("vr.transform.axes", ParamValue::StringArray(vec!["-y".into(), "z".into(), "x".into()])),
    ]))
    .unwrap();
    assert_eq!((config.mode, config.leader_address.port(), config.vr.rate_hz), (VrMode::Follower, 9000, 90.0));
    // Relative: a vr_bridge follows the sil_node of its own namespace.
    assert_eq!(config.position_topic, "sil_node/end_effector");
    let repeated = params(&[("vr.transform.axes", ParamValue::StringArray(vec!["x".into(), "x".into(), "y".into()]))]);
    assert!(vr_node_config(&repeated).unwrap_err().to_string().contains("repeat"));
    assert!(vr_node_config(&params(&[("mode", ParamValue::String("observer".into()))])).is_err());
}

#[test]
fn every_shipped_parameter_file_is_read_by_its_node() {
    use arm_hil::nodes::{
        arduino::arduino_node_config, hil::hil_node_config, legacy::legacy_bridge_config, stm32::stm32_node_config,
        vr::vr_node_config,
    };
    hil_node_config(&ros_parameters_file("config/hil_node.yaml")).unwrap();
    stm32_node_config(&ros_parameters_file("config/stm32_driver.yaml")).unwrap();
    arduino_node_config(&ros_parameters_file("config/arduino_driver.yaml")).unwrap();
    legacy_bridge_config(&ros_parameters_file("config/legacy_bridge.yaml")).unwrap();
    vr_node_config(&ros_parameters_file("config/vr_bridge.yaml")).unwrap();
}

#[test]
fn a_goal_gets_feedback_from_its_own_run_and_a_result_when_the_run_completes_or_is_stopped() {
    let robot = Robot::default();
    let settings =
        SilNodeSettings { real_time_factor: 0.0, publish_rate_hz: 100.0, repeat: false, ..SilNodeSettings::default() };
    let (requests, next) = std::sync::mpsc::sync_channel(REQUEST_DEPTH);
    let stop = AtomicBool::new(false);
    let start = short_arc(&robot).waypoints()[0].x;
    let mut commands = SilCommands::<(), u32>::new(&settings, robot.clone(), start, requests).unwrap();
    let (first_goal, second_goal) = (short_arc(&robot), short_arc(&robot));
    assert_eq!(commands.follow_cartesian_goal(1, first_goal), Ok(None));
    let (mut ends, mut feedback, mut finished) = (Vec::new(), Vec::new(), Vec::new());
    let settings = Mutex::new(settings);
    run_sil(&robot, &SilConfig::default(), &settings, short_arc(&robot), &next, &stop, &mut |event| {
        if let SilEvent::RunEnded { end, .. } = event {
            ends.push(end.clone());
        }
        // Feedback goes with every frame here; the node gives it with each published one.
        for update in commands.event(event, true, 0).cartesian {
            match update {
                GoalUpdate::Feedback(goal, update) => {
                    if goal == 2 && !feedback.iter().any(|(goal, _)| *goal == 2) {
                        assert!(commands.cancel_cartesian_goal(&|goal| *goal == 2));
                    }
                    feedback.push((goal, update));
                }
                GoalUpdate::Finished(goal, outcome, result) => {
                    finished.push((goal, outcome, result));
                    match goal {
                        1 => assert_eq!(commands.follow_cartesian_goal(2, second_goal.clone()), Ok(None)),
                        _ => stop.store(true, std::sync::atomic::Ordering::Relaxed),
                    }
                }
            }
        }
    });
    assert_eq!(ends, [RunEnd::Replaced, RunEnd::Complete, RunEnd::Stopped], "the start-up run gave way to goal 1");
    let outcomes: Vec<_> = finished.iter().map(|(goal, outcome, _)| (*goal, *outcome)).collect();
    assert_eq!(outcomes, [(1, GoalOutcome::Succeeded), (2, GoalOutcome::Canceled)]);
    let (_, _, completed) = &finished[0];
    assert!(completed.success && completed.frames > 0 && completed.rms_error > 0.0, "{completed:?}");
    assert_eq!(finished[1].2.message, "cancelled");
    let first: Vec<f64> = feedback.iter().filter(|(goal, _)| *goal == 1).map(|(_, f)| f.progress).collect();
    assert!(first.windows(2).all(|pair| pair[1] >= pair[0]), "progress never goes back");
    assert_eq!(first.last(), Some(&1.0));
}

#[test]
fn after_a_stopped_or_failed_run_only_a_new_joint_command_moves_the_arm_from_rest() {
    // The run loop starts the next run afresh, its arm on the first waypoint at that
    // waypoint's velocity: a command planned from the last frame's moving reference would set
    // a still arm going.
    let robot = Robot::default();
    let here = short_arc(&robot).waypoints()[0].x;
    let theta = robot.inverse_kinematics(&here, None).unwrap();
    let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
    for end in [RunEnd::Stopped, RunEnd::Failed(SimError::NonFinite { t: 1.0 })] {
        let (requests, run) = std::sync::mpsc::sync_channel(REQUEST_DEPTH);
        let mut sil = SilCommands::<(), ()>::new(&SilNodeSettings::default(), robot.clone(), here, requests).unwrap();
        let moving = Frame { x: here, x_ref: here, xd_ref: Vec3::new(0.05, 0.0, 0.0), theta, ..Frame::default() };
        let frame = SilEvent::Frame { frame: moving, clock_s: 1.0, publish_rate_hz: 250.0, late_ns: 0 };
        sil.event(&frame, true, 0);
        // A stream under way: its next command would go on from its move before.
        sil.joint_command((1.98, None), &names, &[theta[0] + 0.005, theta[1], theta[2]]).unwrap();
        sil.event(&SilEvent::RunEnded { stats: RunStats::default(), end: end.clone() }, true, 0);
        let again = sil.joint_command((1.99, None), &names, &[theta[0] + 0.005, theta[1], theta[2]]);
        assert!(again.is_err(), "the command in force at the stop is followed again after {end:?}");
        sil.joint_command((2.0, None), &names, &[theta[0] + 0.01, theta[1], theta[2]]).unwrap();
        let moves: Vec<_> = run.try_iter().collect();
        let Some(RunRequest::Steer(trajectory)) = moves.last() else { panic!("the command is run") };
        assert_eq!(trajectory.waypoints()[0].xd, Vec3::zeros(), "after {end:?}");
    }
}

#[test]
fn a_new_goal_replaces_the_one_served_which_is_answered_at_once() {
    let robot = Robot::default();
    let (requests, _next) = std::sync::mpsc::sync_channel(REQUEST_DEPTH);
    let start = short_arc(&robot).waypoints()[0].x;
    let mut commands =
        SilCommands::<(), &str>::new(&SilNodeSettings::default(), robot.clone(), start, requests).unwrap();
    assert_eq!(commands.follow_cartesian_goal("a", short_arc(&robot)), Ok(None));
    let (replaced, result) =
        commands.follow_cartesian_goal("b", short_arc(&robot)).unwrap().expect("goal a is answered");
    assert_eq!(replaced, "a");
    assert!(!result.success);
    assert_eq!(result.message, "replaced by a new goal");
}

#[test]
fn link_health_goes_out_at_once_when_the_link_changes_and_otherwise_once_a_second() {
    use arm_hil::nodes::link_health::{LinkCondition, LinkReport};
    use arm_hil::nodes::status::Schedule;
    let (start, mut schedule, mut health) = (7_000_000_000, Schedule::every_second(), LinkReport::default());
    let at = |ms: u64| start + ms * 1_000_000;
    assert!(health.due(&mut schedule, at(0)), "the first report");
    health.packets += 1;
    assert!(!health.due(&mut schedule, at(20)), "a packet is no news");
    health.changed(LinkCondition::Up);
    assert!(health.due(&mut schedule, at(40)), "connected");
    health.failed_request("command 0x10: refused".into());
    assert!(health.due(&mut schedule, at(60)), "a new error");
    assert!(!health.due(&mut schedule, at(900)));
    assert!(health.due(&mut schedule, at(1060)), "a second after the last report");
}

/// A flood of commands at a node whose loop does not keep up: every queue between them is
/// bounded, and what does not fit is refused with the reason, the node going on.
#[test]
fn a_flood_of_commands_is_refused_past_the_queues_bounds_with_a_reason() {
    use arm_hil::hil::{HilConfig, Withdrawals};
    use arm_hil::nodes::hil::feeder::{feed_requests, REQUEST_DEPTH as FEED_DEPTH};
    let robot = Robot::default();
    let here = short_arc(&robot).waypoints()[0].x;
    let (requests, queue) = feed_requests();
    let mut hil = hil_commands::<u32>(&robot, HilConfig::default(), requests, Arc::new(Withdrawals::default()));
    hil.loop_started(1);
    hil.frame(&Frame { x: here, x_ref: here, ..Frame::default() }, 1, true, Now::on_one_clock(0));
    let segment = || vec![point(0.5, here.into())];
    for _ in 0..FEED_DEPTH {
        hil.segment(segment()).unwrap();
    }
    let refused = hil.segment(segment()).unwrap_err();
    assert!(refused.contains("requests already wait"), "{refused}");
    assert_eq!(queue.drop_waiting(), FEED_DEPTH, "the feeder takes them as it can");
    hil.segment(segment()).unwrap();

    let (requests, _run) = std::sync::mpsc::sync_channel(REQUEST_DEPTH);
    let mut sil = SilCommands::<(), ()>::new(&SilNodeSettings::default(), robot.clone(), here, requests).unwrap();
    let names = ["joint1", "joint2", "joint3"].map(str::to_owned);
    let theta = robot.inverse_kinematics(&here, None).unwrap();
    let taken: Vec<bool> = (0..REQUEST_DEPTH + 1)
        .map(|k| {
            let command = [theta[0] + 1e-4 * k as f64, theta[1], theta[2]];
            sil.joint_command((k as f64 * 0.02, None), &names, &command).is_ok()
        })
        .collect();
    assert!(taken[..REQUEST_DEPTH].iter().all(|taken| *taken) && !taken[REQUEST_DEPTH]);
}
