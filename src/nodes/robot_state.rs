//! What robot_state_publisher does, without ROS: the URDF's joints, and each joint's transform
//! from its parent link to its child link at a joint position, for /tf and /tf_static.

use nalgebra::{Isometry3, Translation3, Unit, UnitQuaternion};

use crate::model::math::Vec3;

/// urdf/arm_hil.urdf, the model the nodes' /joint_states drive.
pub const ARM_URDF: &str = include_str!("../../urdf/arm_hil.urdf");

/// Why a URDF could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UrdfError {
    #[error("the URDF is not well-formed XML")]
    Xml(#[from] roxmltree::Error),
    #[error("joint {joint}: {reason}")]
    Joint { joint: String, reason: String },
}

/// How a joint moves its child link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JointKind {
    /// Rotation about the axis (continuous and revolute joints) [rad].
    Revolute,
    /// Translation along the axis [m].
    Prismatic,
    /// No motion (fixed joints, and kinds this model does not use).
    Fixed,
}

/// One URDF joint.
#[derive(Debug, Clone, PartialEq)]
pub struct UrdfJoint {
    pub name: String,
    pub kind: JointKind,
    pub parent: String,
    pub child: String,
    /// Child frame in the parent frame at position zero.
    pub origin: Isometry3<f64>,
    /// Unit axis in the joint frame.
    pub axis: Unit<Vec3>,
}

impl UrdfJoint {
    /// The child link's pose in the parent link's frame at `position` [rad or m].
    pub fn transform(&self, position: f64) -> Isometry3<f64> {
        let motion = match self.kind {
            JointKind::Revolute => {
                Isometry3::from_parts(Translation3::identity(), UnitQuaternion::from_axis_angle(&self.axis, position))
            }
            JointKind::Prismatic => {
                Isometry3::translation(self.axis.x * position, self.axis.y * position, self.axis.z * position)
            }
            JointKind::Fixed => Isometry3::identity(),
        };
        self.origin * motion
    }
}

/// A URDF's links and joints.
#[derive(Debug, Clone, PartialEq)]
pub struct Urdf {
    pub links: Vec<String>,
    pub joints: Vec<UrdfJoint>,
}

impl Urdf {
    /// Reads links and joints (name, type, parent, child, origin, axis) from URDF text.
    pub fn parse(text: &str) -> Result<Urdf, UrdfError> {
        let document = roxmltree::Document::parse(text)?;
        let robot = document.root_element();
        let links = robot
            .children()
            .filter(|n| n.has_tag_name("link"))
            .filter_map(|n| n.attribute("name").map(str::to_owned))
            .collect();
        let joints = robot.children().filter(|n| n.has_tag_name("joint")).map(joint).collect::<Result<_, _>>()?;
        Ok(Urdf { links, joints })
    }

    /// The joint called `name`.
    pub fn joint(&self, name: &str) -> Option<&UrdfJoint> {
        self.joints.iter().find(|joint| joint.name == name)
    }
}

fn joint(node: roxmltree::Node) -> Result<UrdfJoint, UrdfError> {
    let name = node.attribute("name").unwrap_or_default().to_owned();
    let fail = |reason: String| UrdfError::Joint { joint: name.clone(), reason };
    let child = |tag: &str| node.children().find(|c| c.has_tag_name(tag));
    let link_of = |tag: &str| {
        child(tag).and_then(|n| n.attribute("link")).map(str::to_owned).ok_or_else(|| fail(format!("no {tag} link")))
    };
    let triple = |element: &str, attribute: &str, default: Vec3| -> Result<Vec3, UrdfError> {
        let Some(text) = child(element).and_then(|n| n.attribute(attribute)) else { return Ok(default) };
        let values: Vec<f64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|error| fail(format!("{element} {attribute}=\"{text}\": {error}")))?;
        match values[..] {
            [x, y, z] => Ok(Vec3::new(x, y, z)),
            _ => Err(fail(format!("{element} {attribute}=\"{text}\" is not three numbers"))),
        }
    };
    let kind = match node.attribute("type") {
        Some("continuous" | "revolute") => JointKind::Revolute,
        Some("prismatic") => JointKind::Prismatic,
        _ => JointKind::Fixed,
    };
    let xyz = triple("origin", "xyz", Vec3::zeros())?;
    let rpy = triple("origin", "rpy", Vec3::zeros())?;
    let axis = Unit::try_new(triple("axis", "xyz", Vec3::x())?, 1e-12).ok_or_else(|| fail("zero axis".into()))?;
    Ok(UrdfJoint {
        kind,
        parent: link_of("parent")?,
        child: link_of("child")?,
        origin: Isometry3::from_parts(Translation3::from(xyz), UnitQuaternion::from_euler_angles(rpy.x, rpy.y, rpy.z)),
        axis,
        name,
    })
}
