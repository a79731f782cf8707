//! Recordings without ROS that ROS replays: rosbag2 directories (metadata.yaml and one MCAP
//! file of CDR messages) holding the topics the nodes publish, with the names, types and
//! stamps they publish them with, so `ros2 bag play` replays a command-line run as if the
//! node had been recorded.
//!
//! [`writer`] is the container, a [`crate::outputs::Sink`] that the nodes' publishers write
//! into; [`metadata`] its metadata.yaml, and [`info`] reads a bag back for `arm_hil bag info`.

pub mod info;
pub mod metadata;
pub mod writer;

pub use writer::{BagError, BagStats, BagWriter};
