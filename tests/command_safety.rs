//! Command safety (docs/safety.md) as a stateful randomized test: random interleavings of
//! goals (hostile ones among them: huge and tiny times, stamps past and future, values that are
//! not finite, points at and past the limits and the workspace's edge, tens of thousands of
//! points), cancels, joint command streams, Cartesian goals, lifecycle transitions and injected
//! faults (a frozen arm, a lagging one, a failed run), over the sans-IO layer of every motion
//! node: a serial device's goals and stream (stm32_driver, arduino_driver), sil_node's and
//! hil_node's commands. Every invariant is checked after every step.
//!
//! Each case is a seed: a failure names it, and `ARM_HIL_SAFETY_SEED=N` runs that case alone.
//! `ARM_HIL_SAFETY_CASES=N` runs N cases per node (default 1000).

mod safety;

use safety::{cases, device, parallel_arm};

#[test]
fn serial_devices_keep_every_invariant() {
    cases("stm32_driver", |seed| device::run(seed, device::Kind::Stm32));
    cases("arduino_driver", |seed| device::run(seed, device::Kind::Arduino));
}

#[test]
fn sil_node_keeps_every_invariant() {
    cases("sil_node", parallel_arm::run_sil);
}

#[test]
fn hil_node_keeps_every_invariant() {
    cases("hil_node", parallel_arm::run_hil);
}
