//! The two clocks a serial device's goals meet. A goal's header stamp is on the ROS clock, which
//! `/clock` drives under `use_sim_time` and which may go back, jump or stand still; the device's
//! control steps are timed on a steady clock, which does none of these, so that a trajectory
//! plays at the device's pace whatever the ROS clock does. A goal is moved from one to the other
//! once, at its receipt, with both clocks read at that instant.

use std::time::Instant;

use super::Goal;

/// Now on both clocks [ns].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// The ROS clock: what stamps say.
    pub ros_ns: u64,
    /// The clock the node's control steps are timed on.
    pub steps_ns: u64,
}

impl Now {
    /// Both the same clock: a node whose steps are timed on the ROS clock.
    pub fn on_one_clock(ns: u64) -> Now {
        Now { ros_ns: ns, steps_ns: ns }
    }

    /// `goal` with its stamp as far from now on the steps' clock as it was on the ROS clock. A
    /// stamp of 0 (start at receipt) stays 0; one before the steps' clock's epoch becomes its
    /// first nanosecond (long past either way).
    pub fn restamped(&self, mut goal: Goal) -> Goal {
        if goal.stamp_ns != 0 {
            let moved = i128::from(goal.stamp_ns) - i128::from(self.ros_ns) + i128::from(self.steps_ns);
            goal.stamp_ns = u64::try_from(moved.max(1)).unwrap_or(u64::MAX);
        }
        goal
    }
}

/// A steady clock [ns], from an epoch far enough back (about 31.7 years) that a stamp of any
/// goal still worth following maps onto it after its start.
#[derive(Debug, Clone, Copy)]
pub struct SteadyClock {
    started: Instant,
}

/// The steady clock's reading when it starts [ns].
pub const STEADY_EPOCH_NS: u64 = 1_000_000_000_000_000_000;

impl SteadyClock {
    pub fn start() -> SteadyClock {
        SteadyClock { started: Instant::now() }
    }

    pub fn now_ns(&self) -> u64 {
        STEADY_EPOCH_NS.saturating_add(u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn stamped(stamp_ns: u64) -> Goal {
        Goal { stamp_ns, ..Goal::default() }
    }

    #[test]
    fn a_stamp_keeps_its_distance_from_now_on_the_steps_clock() {
        let now = Now { ros_ns: 1_700_000_000 * S, steps_ns: STEADY_EPOCH_NS + 5 * S };
        assert_eq!(now.restamped(stamped(now.ros_ns + 2 * S)).stamp_ns, now.steps_ns + 2 * S, "2 s ahead");
        assert_eq!(now.restamped(stamped(now.ros_ns - 3 * S)).stamp_ns, now.steps_ns - 3 * S, "3 s ago");
        assert_eq!(now.restamped(stamped(0)).stamp_ns, 0, "at receipt");
    }

    #[test]
    fn a_stamp_before_the_steps_clock_began_is_its_first_nanosecond() {
        let now = Now { ros_ns: 100 * S, steps_ns: S };
        assert_eq!(now.restamped(stamped(50 * S)).stamp_ns, 1);
    }

    #[test]
    fn on_one_clock_a_goal_is_unchanged() {
        let now = Now::on_one_clock(7 * S);
        assert_eq!(now.restamped(stamped(9 * S)), stamped(9 * S));
    }
}
