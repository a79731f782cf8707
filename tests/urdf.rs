//! urdf/arm_hil.urdf against the model: with the joint states the nodes publish, the URDF's own
//! chains put every proximal tip, distal end, the platform and the forearm where the model does.

use std::collections::HashMap;

use arm_hil::control::arc::ArcSpec;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::joints::{arm_joint_state, JOINT_NAMES};
use arm_hil::nodes::robot_state::{JointKind, Urdf, ARM_URDF};
use arm_hil::sim::Frame;
use nalgebra::Isometry3;

fn load() -> Urdf {
    Urdf::parse(ARM_URDF).unwrap()
}

/// Pose of `link` in base_link, walking the URDF's chain with the given joint positions.
fn pose(link: &str, urdf: &Urdf, positions: &HashMap<&str, f64>) -> Isometry3<f64> {
    if link == "base_link" {
        return Isometry3::identity();
    }
    let joint = urdf.joints.iter().find(|joint| joint.child == link).unwrap();
    let q = positions.get(joint.name.as_str()).copied().unwrap_or(0.0);
    pose(&joint.parent, urdf, positions) * joint.transform(q)
}

#[test]
fn every_joint_refers_to_existing_links_and_every_published_joint_exists() {
    let urdf = load();
    for joint in &urdf.joints {
        assert!(urdf.links.contains(&joint.parent) && urdf.links.contains(&joint.child), "joint {}", joint.name);
    }
    for name in JOINT_NAMES {
        assert!(
            urdf.joint(name).is_some_and(|joint| joint.kind != JointKind::Fixed),
            "{name} is not a moving joint of the URDF"
        );
    }
}

#[test]
fn the_urdf_chains_reproduce_the_model_along_the_default_arc() {
    let joints = load();
    let robot = Robot::default();
    let elbow = robot.elbow();
    let arc = ArcSpec::default().waypoints(&elbow, robot.params().l_arm).unwrap();
    let mut previous = None;
    let point = |pose: Isometry3<f64>, local: Vec3| pose * nalgebra::Point3::from(local);
    for waypoint in arc.iter().step_by(50) {
        let motion = robot.motion_from_task(&waypoint.x, &waypoint.xd, previous.as_ref(), 0.0).unwrap();
        previous = Some(motion.theta);
        let frame = Frame {
            t: 0.0,
            x: motion.p,
            x_dot: motion.p_dot,
            theta: motion.theta,
            theta_dot: motion.theta_dot,
            tau: Vec3::zeros(),
            x_ref: motion.p,
            xd_ref: motion.p_dot,
        };
        let state = arm_joint_state(&robot, &frame, &elbow);
        let positions: HashMap<&str, f64> = JOINT_NAMES.iter().copied().zip(state.position).collect();
        for leg in 0..3 {
            let (_, zero_direction) = robot.leg_frame(leg);
            let tip = point(
                pose(&format!("leg{}_proximal", leg + 1), &joints, &positions),
                zero_direction * robot.params().l_proximal[leg],
            );
            assert!((tip.coords - robot.tip(leg, motion.theta[leg])).amax() < 1e-9, "leg {} tip", leg + 1);
            let end = point(
                pose(&format!("leg{}_distal", leg + 1), &joints, &positions),
                Vec3::z() * robot.params().l_distal[leg],
            );
            assert!(
                (end.coords - robot.attachment(leg, &motion.p)).amax() < 1e-9,
                "leg {} distal end {} vs {}",
                leg + 1,
                end,
                robot.attachment(leg, &motion.p)
            );
        }
        let platform = pose("platform", &joints, &positions).translation.vector;
        assert!((platform - motion.p).amax() < 1e-9);
        let forearm = point(pose("forearm", &joints, &positions), Vec3::z() * (motion.p - elbow).norm());
        assert!((forearm.coords - motion.p).amax() < 1e-9, "forearm reaches {forearm}");
    }
}

/// The device URDFs (urdf/stm32_arm.urdf, urdf/finger_testbench.urdf) as the launch files give
/// them to robot_state_publisher.
fn device_urdf(file: &str) -> Urdf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("urdf").join(file);
    Urdf::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn moving_joints(urdf: &Urdf) -> Vec<&str> {
    urdf.joints.iter().filter(|joint| joint.kind != JointKind::Fixed).map(|joint| joint.name.as_str()).collect()
}

#[test]
fn the_stm32_driver_publishes_the_moving_joints_of_its_urdf_and_its_imu_frame_is_a_link() {
    use arm_hil::nodes::stm32::Stm32NodeConfig;
    let urdf = device_urdf("stm32_arm.urdf");
    let config = Stm32NodeConfig::default();
    assert_eq!(moving_joints(&urdf), config.joint_names);
    assert!(urdf.links.contains(&config.imu_frame_id), "{} is not a link", config.imu_frame_id);
}

#[test]
fn the_arduino_driver_publishes_the_moving_joints_of_its_urdf_and_its_motor_frames_are_links() {
    use arm_hil::nodes::arduino::{motor_frame, ArduinoNodeConfig};
    let urdf = device_urdf("finger_testbench.urdf");
    let config = ArduinoNodeConfig::default();
    assert_eq!(moving_joints(&urdf), config.joint_names);
    for name in &config.joint_names {
        let frame = motor_frame(&config.frame_prefix, name);
        assert!(urdf.links.contains(&frame), "{frame} is not a link");
    }
}

#[test]
fn no_two_devices_publish_the_same_joint_name_by_default() {
    use arm_hil::nodes::arduino::ArduinoNodeConfig;
    use arm_hil::nodes::stm32::Stm32NodeConfig;
    let arm: Vec<String> = JOINT_NAMES.iter().map(|name| (*name).to_owned()).collect();
    let devices = [arm, Stm32NodeConfig::default().joint_names, ArduinoNodeConfig::default().joint_names];
    let mut seen = std::collections::HashSet::new();
    for name in devices.iter().flatten() {
        assert!(seen.insert(name), "{name} is published by two devices");
    }
}
