//! The SIL engine: the simulated arm integrated with an adaptive Bogacki-Shampine 3(2) pair,
//! the controller at fixed ticks acting on a simulated sensor, ideal torques per waypoint,
//! the run as a lazy stream of frames, and sweeps of many runs over seeds and gains.
//!
//! Architecture invariant: no I/O and no clock; a run is deterministic for a given seed, and
//! memory does not grow with the number of frames.

mod config;
mod engine;
mod ideal;
pub mod integrator;
mod plant;
mod sensor;
pub mod sweep;

pub use config::{ConfigError, RunConfig, SilConfig};
pub use engine::{Frame, RunStats, SimError, Simulation};
pub use ideal::{IdealPoint, IdealTorques};
pub use integrator::{BogackiShampine, DenseOutput, IntegratorConfig, IntegratorError, OdeSystem, StepOutcome};
pub use plant::{joint_state, plant_state, Plant, PlantState};
pub use sensor::{SensorConfig, SimulatedSensor};
