//! arm_hil: simulation and hardware-in-the-loop control of a 3-DOF parallel arm carrying a
//! prosthetic forearm, with drivers and bridges for the lab's devices and clients.
//!
//! Layers, each using only the ones above it (DESIGN.md §1):
//! [`model`] (the robot), [`control`] (trajectories, controller, filters),
//! [`sim`] (the SIL engine), [`protocol`] (sans-IO wire codecs), [`bridge`] (TCP servers).

pub mod bridge;
pub mod control;
pub mod hil;
pub mod model;
pub mod protocol;
pub mod sim;
