//! Command safety (docs/safety.md) as state machines (proptest-state-machine): a reference
//! model of what may happen to each motion node next drives random sequences of goals (hostile
//! ones among them: huge and tiny times, stamps past and future, values that are not finite,
//! points at and past the limits and the workspace's edge, thousands of points, tolerances of
//! their own), cancels, joint command streams (positions, and the testbench's velocities and
//! efforts), Cartesian goals and trajectory segments, lifecycle transitions, signals and
//! panics, silent links and injected faults (a stuck device, a frozen arm, a lagging one, a
//! failed run) through the sans-IO layer of every motion node: a serial device's goals and
//! stream (stm32_driver, arduino_driver), sil_node's and hil_node's commands. Every invariant,
//! every goal's end within its bound among them, is checked after every step; a failure shrinks
//! to the shortest sequence that still fails, and prints it.
//!
//! `ARM_HIL_SAFETY_CASES=N` runs N cases a node (default 1000); `PROPTEST_RNG_SEED=N` another
//! set of them.

mod safety;

use proptest_state_machine::prop_state_machine;
use safety::config;
use safety::device::DeviceMachine;
use safety::parallel_arm::{HilMachine, SilMachine};

prop_state_machine! {
    #![proptest_config(config())]

    #[test]
    fn stm32_driver_keeps_every_invariant(sequential 1..60 => DeviceMachine<true>);

    #[test]
    fn arduino_driver_keeps_every_invariant(sequential 1..60 => DeviceMachine<false>);

    #[test]
    fn sil_node_keeps_every_invariant(sequential 1..50 => SilMachine);

    #[test]
    fn hil_node_keeps_every_invariant(sequential 1..50 => HilMachine);
}
