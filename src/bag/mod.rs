//! Recordings without ROS that ROS replays: rosbag2 directories (metadata.yaml and one MCAP
//! file of CDR messages) holding the topics the nodes publish, with the names, types and
//! stamps they publish them with, so `ros2 bag play` replays a command-line run as if the
//! node had been recorded.
//!
//! [`writer`] is the container, a [`crate::nodes::topics::Sink`] that the nodes' topic sets
//! publish into; [`recorder`] the background thread a run records through, [`arm`] the arm's
//! recording, [`device`] the device nodes', [`legacy`] the port-5555 sessions', and [`info`]
//! reads a bag back for `arm_hil bag info`.

pub mod arm;
pub mod device;
pub mod info;
pub mod legacy;
pub mod metadata;
pub mod recorder;
pub mod writer;

pub use recorder::{Recorder, RecordingError};
pub use writer::{BagError, BagStats, BagWriter};

/// Now on the wall clock [ns since the Unix epoch]: the time axis of bags of hardware runs,
/// as the nodes stamp them without simulated time.
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64)
}
