//! arm_hil: simulation and hardware-in-the-loop control of a 3-DOF parallel arm carrying a
//! prosthetic forearm, with drivers and bridges for the lab's devices and clients.
//!
//! Modules are listed in layer order; each uses only the ones above it (docs/design.md §2):
//! the robot, control, the SIL engine, the HIL loop, sans-IO codecs, then I/O (serial ports,
//! drivers, TCP bridges), device emulators, the ROS nodes' logic (without ROS: their messages
//! and each node's topics, written once against a sink), and the sinks below them: rosbag2
//! bags and the live view (without ROS), and ROS itself.

pub mod msg;
pub mod model;
pub mod control;
pub mod sim;
pub mod hil;
pub mod protocol;
pub mod serial;
pub mod drivers;
pub mod bridge;
pub mod emulate;
pub mod outputs;
pub mod bag;
pub mod live;
pub mod nodes;
#[cfg(feature = "ros")]
pub mod ros;
