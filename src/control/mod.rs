//! Control: validated trajectories, their interpolation, the task-space controller and the
//! state estimator.
//!
//! Architecture invariant: no I/O and no clock; time arrives as `t` or `dt` arguments.

pub mod arc;
mod controller;
mod estimator;
pub mod figure_eight;
mod interpolation;
mod profile;
mod trajectory;
pub mod trajectory_csv;

pub use controller::{clamp_torque, ControlOutput, ControllerConfig, TaskSpaceController};
pub use estimator::{
    Estimate, Estimator, EstimatorConfig, PositionVelocityKalman, RangeBiasEstimator, ReadingRejected, SphericalReading,
};
pub use interpolation::{Reference, ReferenceSampler};
pub use trajectory::{Trajectory, TrajectoryError, Waypoint, MAX_WAYPOINTS};
