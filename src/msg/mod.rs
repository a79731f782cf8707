//! ROS 2 messages without ROS: the types the nodes publish as plain structs, their wire form
//! (CDR, [`cdr`]) and their definitions (the ros2msg schema text and RIHS01 type hash that
//! rosbag2 and Foxglove read beside the bytes).
//!
//! [`standard`] holds the messages of ROS 2's own packages, [`interfaces`] the package's own
//! (`msg/`, `action/`). Every output of the package, ROS topic, bag or live view, is built
//! from these and goes out as their CDR (see [`crate::nodes::topics`]).

pub mod cdr;
pub mod interfaces;
pub mod standard;

use serde::Serialize;

pub use standard::*;

/// One .msg definition: its type name, its field lines and the types it refers to.
#[derive(Debug)]
pub struct MsgDef {
    /// Full type name, `package/msg/Type`.
    pub name: &'static str,
    fields: &'static str,
    uses: &'static [&'static MsgDef],
}

impl MsgDef {
    /// The definition of `name` (`package/msg/Type`) with the .msg text `fields`, using `uses`.
    pub const fn new(name: &'static str, fields: &'static str, uses: &'static [&'static MsgDef]) -> MsgDef {
        MsgDef { name, fields, uses }
    }

    /// The ros2msg schema text rosbag2 writes: this type's fields, then each type it uses
    /// (depth first, once) after a separator line and `MSG: package/Type`.
    pub fn schema(&self) -> String {
        let mut seen: Vec<&'static str> = vec![self.name];
        let mut text = self.fields.to_owned();
        let mut stack: Vec<&'static MsgDef> = self.uses.iter().rev().copied().collect();
        while let Some(def) = stack.pop() {
            if seen.contains(&def.name) {
                continue;
            }
            seen.push(def.name);
            text.push_str(&format!(
                "\n{}\nMSG: {}\n{}",
                "=".repeat(80),
                def.name.replacen("/msg/", "/", 1),
                def.fields
            ));
            stack.extend(def.uses.iter().rev().copied());
        }
        text
    }
}

/// A message type the package publishes: its definition and hash go wherever its CDR goes.
pub trait RosMessage: Serialize {
    const DEF: &'static MsgDef;
    /// RIHS01 type description hash (ROS 2 Jazzy).
    const TYPE_HASH: &'static str;
}

/// A value whose CDR is that of message `M`: `M` itself, or a view that serialises borrowed data
/// as `M` would (for a message that would otherwise be built from thousands of allocations).
pub trait EncodesAs<M: RosMessage>: Serialize {}

impl<M: RosMessage> EncodesAs<M> for M {}
