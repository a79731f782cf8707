//! Hardware in the loop: the fixed-rate control loop, the [`Hardware`] interface its backends
//! implement, the simulated-plant backend and the trajectory ring buffer.
//!
//! Architecture invariant: inside the loop's cycle nothing allocates, blocks on I/O or logs;
//! backends that talk to devices do their I/O on their own threads and exchange the newest
//! values with the cycle (docs/design.md §4, ros2_control's read/update/write).

pub mod exit;
pub mod fault_injection;
mod feed;
pub mod protection;
pub mod realtime;
mod ring;
mod runner;
mod sim_rig;
mod stats;
pub mod stepper;

pub use feed::{feed_trajectory, FeedItem, Intake, Withdrawals, FEED_DEPTH};
pub use ring::{RingError, RingSample, TrajectoryRing, RING_CAPACITY};
pub use runner::{FrameChannel, FrameSink, HilConfig, HilError, HilLoop, HilReport, TakenFrame};
pub use sim_rig::SimulatedRig;
pub use stats::{LoopStats, LoopStatus};

use crate::control::SphericalReading;
use crate::model::math::Vec3;

/// What `read` delivers to a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SensorInput {
    /// A reading that arrived since the last cycle, if any.
    pub reading: Option<SphericalReading>,
}

/// What a cycle hands to `write`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ActuatorCommand {
    /// Joint torques [N m]; zero means a safe stop.
    pub tau: Vec3,
    /// The controller's joint angles [rad], for drives that need the rotor position; `None`
    /// until the first estimate.
    pub theta: Option<Vec3>,
    /// The controller's joint rates [rad/s], with `theta`.
    pub theta_dot: Option<Vec3>,
}

/// A device-level failure, with what the backend knows about it.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    #[error("device I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("device link lost: {0}")]
    Link(String),
    #[error("simulated plant failed: {0}")]
    Plant(String),
}

/// The loop's view of the rig. `read` and `write` run inside the cycle: they must return
/// quickly and never block on I/O.
pub trait Hardware: Send {
    /// Collects the newest sensor reading at loop time `now` [s], one `period` [s] after the last.
    fn read(&mut self, now: f64, period: f64, input: &mut SensorInput) -> Result<(), HardwareError>;
    /// Applies a command at loop time `now` [s].
    fn write(&mut self, now: f64, period: f64, command: &ActuatorCommand) -> Result<(), HardwareError>;
    /// A loop starts: its times `now` count from zero again. The device stays as it is.
    fn begin(&mut self) {}
    /// Safe stop: zero torque, zero step rate. Called once when the loop ends, however it ends;
    /// the device stays open for another loop.
    fn stop(&mut self);
    /// Waits up to `timeout` for the device to show it works (a first sensor reading, say), as a
    /// managed node checks it on configure. Does not take the reading from the loop.
    fn check(&mut self, _timeout: std::time::Duration) -> Result<(), HardwareError> {
        Ok(())
    }
    /// The true platform point [m], where the backend knows it (a simulation).
    fn true_position(&self) -> Option<Vec3> {
        None
    }
    /// The drives' electrical lag as the backend last saw it [rad], where it drives steppers:
    /// past the torque curve's peak (pi/2) a motor slips.
    fn electrical_lag(&self) -> Option<Vec3> {
        None
    }
}
