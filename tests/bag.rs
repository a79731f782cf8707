//! Bags as rosbag2 writes them: messages byte for byte as `ros2 bag record` recorded them
//! (tests/fixtures/rosbag2_jazzy_cdr.txt), schemas as readers parse them, and bags that read
//! back whole, after a clean finish or a kill.

use std::collections::HashMap;

use arm_hil::bag::info::BagInfo;
use arm_hil::bag::metadata::BagDistro;
use arm_hil::bag::BagWriter;
use arm_hil::msg::cdr::encode_into;
use arm_hil::msg::*;
use arm_hil::outputs::{NodeName, Outputs, Qos, Recorder};
use proptest::prelude::*;
use serde::Serialize;

/// The fixture's messages by type name.
fn fixtures() -> HashMap<String, Vec<u8>> {
    let text = include_str!("fixtures/rosbag2_jazzy_cdr.txt");
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (name, hex) = line.split_once(' ').unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (name.to_owned(), bytes)
        })
        .collect()
}

fn assert_recorded<M: RosMessage>(message: &M) {
    let mut bytes = Vec::new();
    encode_into(message, &mut bytes).unwrap();
    assert_eq!(bytes, fixtures()[M::DEF.name], "{}", M::DEF.name);
}

fn header() -> Header {
    Header { stamp: Time { sec: 12, nanosec: 345_000_000 }, frame_id: "base_link".into() }
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

#[test]
fn joint_state_encodes_as_rosbag2_recorded_it() {
    assert_recorded(&JointState {
        header: header(),
        name: strings(&["joint1", "leg1_distal_yaw"]),
        position: vec![0.5, -1.25],
        velocity: vec![0.125, 2.0],
        effort: vec![-3.5, 0.0],
    });
}

#[test]
fn diagnostics_encode_as_rosbag2_recorded_them() {
    assert_recorded(&DiagnosticArray {
        header: Header { frame_id: String::new(), ..header() },
        status: vec![DiagnosticStatus {
            level: 1,
            name: "sil_node: run".into(),
            message: "running".into(),
            hardware_id: "sil".into(),
            values: vec![KeyValue { key: "frames".into(), value: "42".into() }],
        }],
    });
}

#[test]
fn clock_tf_and_description_encode_as_rosbag2_recorded_them() {
    assert_recorded(&Clock { clock: Time { sec: 7, nanosec: 500 } });
    assert_recorded(&TfMessage {
        transforms: vec![TransformStamped {
            header: header(),
            child_frame_id: "link1".into(),
            transform: Transform {
                translation: Vector3 { x: 0.1, y: -0.2, z: 0.3 },
                rotation: Quaternion { x: 0.0, y: 0.0, z: 0.6, w: 0.8 },
            },
        }],
    });
    assert_recorded(&StringMsg { data: "<robot name=\"x\"/>".into() });
}

#[test]
fn geometry_messages_encode_as_rosbag2_recorded_them() {
    assert_recorded(&PointStamped { header: header(), point: Vector3 { x: 0.07, y: -0.115, z: -0.5 } });
    assert_recorded(&TwistStamped {
        header: header(),
        twist: Twist { linear: Vector3 { x: 1.5, y: -2.5, z: 0.25 }, angular: Vector3::default() },
    });
    assert_recorded(&Vector3Stamped { header: header(), vector: Vector3 { x: 0.0, y: 0.6, z: -0.8 } });
    assert_recorded(&Path {
        header: header(),
        poses: vec![PoseStamped {
            header: header(),
            pose: Pose { position: Vector3 { x: 1.0, y: 2.0, z: 3.0 }, orientation: Quaternion::IDENTITY },
        }],
    });
}

#[test]
fn trajectory_imu_and_temperature_encode_as_rosbag2_recorded_them() {
    assert_recorded(&JointTrajectory {
        header: header(),
        joint_names: strings(&["joint1"]),
        points: vec![JointTrajectoryPoint {
            positions: vec![0.1],
            velocities: vec![0.2],
            accelerations: vec![],
            effort: vec![0.3],
            time_from_start: Duration { sec: 1, nanosec: 5 },
        }],
    });
    let mut orientation_covariance = [0.0; 9];
    orientation_covariance[0] = -1.0;
    assert_recorded(&Imu {
        header: header(),
        orientation: Quaternion::IDENTITY,
        orientation_covariance,
        angular_velocity: Vector3 { x: 0.01, y: 0.02, z: 0.03 },
        angular_velocity_covariance: [0.0; 9],
        linear_acceleration: Vector3 { x: 0.0, y: 0.0, z: 9.81 },
        linear_acceleration_covariance: [0.0; 9],
    });
    assert_recorded(&Temperature { header: header(), temperature: 36.5, variance: 0.0 });
}

#[test]
fn a_schema_lists_each_type_it_uses_once_after_a_separator() {
    let schema = <JointState as RosMessage>::DEF.schema();
    let separator = format!("\n{}\n", "=".repeat(80));
    let parts: Vec<&str> = schema.split(&separator).collect();
    assert_eq!(parts.len(), 3, "{schema}");
    assert!(parts[0].starts_with("std_msgs/Header header\nstring[] name\n"));
    assert!(parts[1].starts_with("MSG: std_msgs/Header\n"));
    assert!(parts[2].starts_with("MSG: builtin_interfaces/Time\nint32 sec\n"));
    let tf = <TfMessage as RosMessage>::DEF.schema();
    assert_eq!(tf.matches("MSG: geometry_msgs/Vector3\n").count(), 1, "{tf}");
}

/// A bag of `count` joint states at 1 ms apart from 1 s.
fn write_joint_states(dir: &std::path::Path, count: u64) -> BagWriter {
    let mut bag = Outputs::new(NodeName::new("test"), BagWriter::create(dir, BagDistro::Jazzy).unwrap());
    let topic = bag.topic::<JointState>("/joint_states", Qos::STREAM).unwrap();
    bag.topic::<Clock>("/clock", Qos::STREAM).unwrap();
    for i in 0..count {
        let time_ns = 1_000_000_000 + i * 1_000_000;
        let message = JointState {
            header: Header { stamp: Time::from_nanos(time_ns), frame_id: String::new() },
            name: strings(&["joint1"]),
            position: vec![i as f64],
            velocity: vec![],
            effort: vec![],
        };
        bag.publish(topic, time_ns, &message).unwrap();
    }
    bag.into_sink()
}

#[test]
fn a_finished_bag_reads_back_with_its_counts_and_span() {
    let dir = tempdir();
    let stats = write_joint_states(&dir.join("run"), 500).finish().unwrap();
    assert_eq!(stats.messages, 500);
    let info = BagInfo::read(&dir.join("run")).unwrap();
    assert_eq!(info.files, ["run_0.mcap"]);
    assert_eq!(info.span_ns, Some((1_000_000_000, 1_499_000_000)));
    assert_eq!(
        info.topics.iter().map(|t| (t.name.as_str(), t.count)).collect::<Vec<_>>(),
        [("/joint_states", 500), ("/clock", 0)]
    );
    assert!(info.warnings.is_empty(), "{:?}", info.warnings);
    let text = info.text();
    assert!(text.contains("Duration:          0.499000000s"), "{text}");
    assert!(text.contains("Topic: /joint_states | Type: sensor_msgs/msg/JointState | Count: 500"), "{text}");
}

#[test]
fn a_bag_is_never_written_over() {
    let dir = tempdir();
    drop(write_joint_states(&dir.join("run"), 1));
    let error = BagWriter::create(&dir.join("run"), BagDistro::Jazzy).unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
}

#[test]
fn a_killed_recording_keeps_everything_up_to_its_last_checkpoint() {
    let dir = tempdir();
    let mut bag = write_joint_states(&dir.join("run"), 300);
    bag.checkpoint().unwrap();
    // A kill: the process ends without finishing the bag.
    std::mem::forget(bag);
    let info = BagInfo::read(&dir.join("run")).unwrap();
    assert_eq!(info.messages(), 300);
    assert!(info.warnings.is_empty(), "{:?}", info.warnings);
}

#[test]
fn a_recorder_writes_every_event_from_another_thread() {
    let dir = tempdir();
    let bag = BagWriter::create(&dir.join("run"), BagDistro::Jazzy).unwrap();
    let mut recorder = Recorder::spawn(bag, NodeName::new("test"), |out| {
        let topic = out.topic::<Clock>("/clock", Qos::STREAM)?;
        Ok(move |out: &mut Outputs<BagWriter>, time_ns: u64| {
            out.publish(topic, time_ns, &Clock { clock: Time::from_nanos(time_ns) })
        })
    })
    .unwrap();
    for time_ns in 0..5000 {
        assert!(recorder.record(time_ns));
    }
    assert_eq!(recorder.finish().unwrap().messages, 5000);
}

#[test]
fn the_reference_path_and_ideal_torques_encode_as_the_messages_built_the_long_way() {
    use arm_hil::control::arc::ArcSpec;
    use arm_hil::control::Trajectory;
    use arm_hil::model::Robot;
    use arm_hil::nodes::topics::arm::{IdealTrajectory, ReferencePath};
    use arm_hil::sim::IdealTorques;
    let robot = Robot::default();
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -149.0], ..ArcSpec::default() };
    let waypoints = spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let trajectory = Trajectory::with_robot_forearm(waypoints, &robot).unwrap();
    let ideal: Vec<_> = IdealTorques::new(&robot, &trajectory).map(Result::unwrap).collect();
    let (time_ns, t0) = (12_345_000_000, trajectory.start_time());
    let header = Header::at(time_ns, "base_link");

    let path = Path {
        header: header.clone(),
        poses: trajectory
            .waypoints()
            .iter()
            .map(|w| PoseStamped {
                header: header.clone(),
                pose: Pose { position: Vector3::from(&w.x), orientation: Quaternion::IDENTITY },
            })
            .collect(),
    };
    assert_eq!(encode(&ReferencePath::new(time_ns, "base_link", trajectory.waypoints())), encode(&path));

    let joint_trajectory = JointTrajectory {
        header,
        joint_names: arm_hil::nodes::joints::JOINT_NAMES[..3].iter().map(|name| (*name).to_owned()).collect(),
        points: ideal
            .iter()
            .map(|p| JointTrajectoryPoint {
                positions: p.theta.as_slice().to_vec(),
                velocities: p.theta_dot.as_slice().to_vec(),
                accelerations: Vec::new(),
                effort: p.tau.as_slice().to_vec(),
                time_from_start: Duration::from_secs_f64(p.t - t0),
            })
            .collect(),
    };
    assert_eq!(ideal.len(), trajectory.waypoints().len());
    assert_eq!(encode(&IdealTrajectory::new(time_ns, "base_link", &ideal, t0)), encode(&joint_trajectory));
}

fn encode<M: Serialize>(message: &M) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_into(message, &mut bytes).unwrap();
    bytes
}

proptest! {
    #[test]
    fn every_message_is_padded_to_whole_words_and_its_strings_end_in_nul(
        names in proptest::collection::vec("[a-z_]{0,20}", 0..6),
        positions in proptest::collection::vec(-1e3f64..1e3, 0..6),
    ) {
        let message = JointState {
            header: header(),
            name: names.clone(),
            position: positions.clone(),
            velocity: vec![],
            effort: vec![],
        };
        let bytes = encode(&message);
        prop_assert_eq!(&bytes[..4], &[0, 1, 0, 0]);
        prop_assert_eq!(bytes.len() % 4, 0);
        // The name sequence follows the 24-byte header: count, then each string with its NUL.
        let mut at = 4 + 24;
        prop_assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize, names.len());
        at += 4;
        for name in &names {
            at = at.next_multiple_of(4);
            let length = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            prop_assert_eq!(length, name.len() + 1);
            prop_assert_eq!(&bytes[at + 4..at + 4 + name.len()], name.as_bytes());
            prop_assert_eq!(bytes[at + 4 + name.len()], 0);
            at += 4 + length;
        }
        at = at.next_multiple_of(4);
        prop_assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize, positions.len());
        // Doubles align to 8 from the body's start (after the 4-byte encapsulation header).
        let first = (at + 4 - 4).next_multiple_of(8) + 4;
        for (i, position) in positions.iter().enumerate() {
            let offset = first + 8 * i;
            prop_assert_eq!(f64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()), *position);
        }
    }
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "arm_hil_bag_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
