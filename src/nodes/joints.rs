//! `/joint_states` for robot_state_publisher: the three motors plus the passive joints of
//! urdf/arm_hil.urdf, where the closed chains are opened (docs/design.md §6).
//!
//! In the URDF each distal link hangs from its proximal tip on a universal joint (yaw about the
//! proximal link's z, then pitch about the new y; the link runs along its +z); the platform rides
//! on three prismatic joints from the base (x, y, z); the forearm hangs from the elbow on a
//! universal joint of the same kind. The angles below make every chain land where the model
//! says: distal ends on the platform attachments, forearm toward the platform point.

use crate::model::math::{Mat3, Vec3};
use crate::model::Robot;
use crate::sim::Frame;

/// Joint names, in the order of [`JointStateData`]: motors, then the passive joints.
pub const JOINT_NAMES: [&str; 14] = [
    "joint1",
    "joint2",
    "joint3",
    "leg1_distal_yaw",
    "leg1_distal_pitch",
    "leg2_distal_yaw",
    "leg2_distal_pitch",
    "leg3_distal_yaw",
    "leg3_distal_pitch",
    "platform_x",
    "platform_y",
    "platform_z",
    "forearm_yaw",
    "forearm_pitch",
];

/// A joint state message's content: equal-length arrays, in [`JOINT_NAMES`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct JointStateData {
    pub position: [f64; 14],
    pub velocity: [f64; 14],
    pub effort: [f64; 14],
}

/// Rotation about the unit `axis` by `angle` [rad].
fn rotation(axis: &Vec3, angle: f64) -> Mat3 {
    nalgebra::Rotation3::from_axis_angle(&nalgebra::Unit::new_normalize(*axis), angle).into_inner()
}

/// Yaw and pitch of a universal joint that points a link's +z along `direction`, given in the
/// joint's parent frame: direction = Rz(yaw) Ry(pitch) e_z.
pub fn universal_angles(direction: &Vec3) -> (f64, f64) {
    let horizontal = direction.x.hypot(direction.y);
    (direction.y.atan2(direction.x), horizontal.atan2(direction.z))
}

/// The passive angles of one leg's distal universal joint [rad].
pub fn distal_angles(robot: &Robot, leg: usize, theta: f64, p: &Vec3) -> (f64, f64) {
    let (axis, _) = robot.leg_frame(leg);
    let tip = robot.tip(leg, theta);
    let direction = robot.attachment(leg, p) - tip;
    // Into the proximal link's frame, which the motor has turned by theta about its axis.
    universal_angles(&(rotation(&axis, theta).transpose() * direction))
}

/// Joint states for the arm in `frame` with the forearm pivoting at `elbow` [m]. Passive joints
/// carry positions; their velocities and efforts are zero except the platform's prismatic
/// velocities.
pub fn arm_joint_state(robot: &Robot, frame: &Frame, elbow: &Vec3) -> JointStateData {
    let mut state = JointStateData { position: [0.0; 14], velocity: [0.0; 14], effort: [0.0; 14] };
    for leg in 0..3 {
        state.position[leg] = frame.theta[leg];
        state.velocity[leg] = frame.theta_dot[leg];
        state.effort[leg] = frame.tau[leg];
        let (yaw, pitch) = distal_angles(robot, leg, frame.theta[leg], &frame.x);
        state.position[3 + 2 * leg] = yaw;
        state.position[4 + 2 * leg] = pitch;
    }
    for axis in 0..3 {
        state.position[9 + axis] = frame.x[axis];
        state.velocity[9 + axis] = frame.x_dot[axis];
    }
    let (yaw, pitch) = universal_angles(&(frame.x - elbow));
    state.position[12] = yaw;
    state.position[13] = pitch;
    state
}
