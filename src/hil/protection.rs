//! The protective stop: bounds the HIL loop checks every cycle, as an industrial arm's safety
//! controller does, so that an arm that is being lost is stopped, holding where it is, before
//! it reaches the edge of its workspace (docs/hil.md, "The protective stop").
//!
//! Sans-IO: [`Protection::check`] takes what one cycle knows (the estimated arm, its reference sample,
//! the drives' electrical lag) and says which bound, if any, tripped.

use serde::{Deserialize, Serialize};

use crate::model::math::Vec3;
use crate::model::{ArmMotion, Robot};

mod path;
pub use path::{PathStart, SeenOffsets};

/// The bounds. Every one is a parameter (`hil.protection` in a configuration file, hil_node's
/// `hil.protection.*`); the defaults leave the built-in arc a wide berth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtectionConfig {
    /// Largest distance between the estimated platform point and its reference [m]. Default
    /// 0.01: the arc tracks within 1.5 - 2.5 mm on the emulated rig, loaded or not; a lost arm
    /// leaves it by centimetres.
    pub max_tracking_error_m: f64,
    /// Smallest margin of any leg to the edge of its reach (half the angle between its two
    /// assembly roots) [rad]. Default 0.1; the built-in arc keeps 0.43.
    pub min_reach_margin_rad: f64,
    /// Smallest height of the distal links' meeting point over the plane of their sphere
    /// centres (zero where the chain no longer closes) [m]. Default 0.01; the arc keeps 0.027.
    pub min_assembly_height_m: f64,
    /// Lower joint limits [rad], kept with `joint_margin_rad`; null for none. Default null: the
    /// rig's joints turn freely and its workspace ends first.
    pub joint_lower_rad: Option<[f64; 3]>,
    /// Upper joint limits [rad], likewise. Default null.
    pub joint_upper_rad: Option<[f64; 3]>,
    /// Margin kept inside the joint limits [rad]. Default 0.05.
    pub joint_margin_rad: f64,
    /// Deceleration the stop is assumed to achieve [m/s^2]: the workspace and joint bounds are
    /// checked where the arm would come to rest, |v|^2 / 2a along its velocity, as well as where
    /// it is. Default 5.
    pub stopping_deceleration_m_s2: f64,
    /// Largest electrical lag of a stepper drive before its motor is taken to slip [rad]: past
    /// pi/2 the torque falls as the lag grows. Default 2.2.
    pub max_lag_rad: f64,
    /// Cycles in a row the lag must stay past `max_lag_rad` to trip: a PC that stalls for
    /// 20 ms leaves the drives' last rates in force, and the lag loop takes a few milliseconds to
    /// bring the lag back; a slipping motor stays past the bound. Default 20.
    pub lag_cycles: u32,
    /// Fastest a Cartesian goal, a `~/trajectory` segment or a port-5555 trajectory may turn a
    /// motor [rad/s], checked before it runs (not a trip). Default 2, as joint goals: well above
    /// the built-in arc's 0.54, and slow enough for the controller to keep the platform within
    /// `max_tracking_error_m`.
    pub max_joint_speed_rad_s: f64,
    /// Hardest such a trajectory may accelerate a motor [rad/s^2], likewise: the change of its
    /// speed from one line between waypoints to the next over their mean time, from rest at
    /// its start and to rest at its end. Default 20: the built-in arc asks 1.2, an arc at
    /// 30 deg/s 9.2; a waypoint 5 cm away 1 ms later asks thousands.
    pub max_joint_acceleration_rad_s2: f64,
    /// Farthest a goal, a command or a trajectory may take the platform point off the forearm's
    /// sphere (radius l_arm about the elbow) [m], checked before it runs (not a trip). The rig's
    /// forearm holds the platform on that sphere: a reference off it strains the forearm and is
    /// as large a tracking error (keep this at or below `max_tracking_error_m`), and the sensor
    /// cannot see the platform off it (readings are refused past `hil.reading_gate_m`, 0.02).
    /// Default 0.01: the built-in arc keeps to the sphere; a straight line between two points on
    /// it sags by c^2/8l (1 cm for a 19 cm chord), a joint-space move between two poses of the
    /// arc more (docs/hil.md). hil_node's joint goals, joint commands and segments may keep as
    /// far off as they start until they come nearer the sphere, and its joint goals and joint
    /// commands go as far off as the arm was seen lately, up to this and `max_tracking_error_m`
    /// together ([`PathStart::AtTheReference`]).
    pub max_forearm_offset_m: f64,
}

impl Default for ProtectionConfig {
    fn default() -> Self {
        ProtectionConfig {
            max_tracking_error_m: 0.01,
            min_reach_margin_rad: 0.1,
            min_assembly_height_m: 0.01,
            joint_lower_rad: None,
            joint_upper_rad: None,
            joint_margin_rad: 0.05,
            stopping_deceleration_m_s2: 5.0,
            max_lag_rad: 2.2,
            lag_cycles: 20,
            max_joint_speed_rad_s: 2.0,
            max_joint_acceleration_rad_s2: 20.0,
            max_forearm_offset_m: 0.01,
        }
    }
}

impl ProtectionConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("max_tracking_error_m", self.max_tracking_error_m),
            ("min_reach_margin_rad", self.min_reach_margin_rad),
            ("min_assembly_height_m", self.min_assembly_height_m),
            ("joint_margin_rad", self.joint_margin_rad),
            ("stopping_deceleration_m_s2", self.stopping_deceleration_m_s2),
            ("max_lag_rad", self.max_lag_rad),
            ("max_forearm_offset_m", self.max_forearm_offset_m),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("hil.protection.{name} must be finite and >= 0, got {value}"));
            }
        }
        let positive =
            [self.stopping_deceleration_m_s2, self.max_joint_speed_rad_s, self.max_joint_acceleration_rad_s2];
        if !positive.iter().all(|value| *value > 0.0 && value.is_finite()) || self.lag_cycles == 0 {
            return Err("hil.protection.stopping_deceleration_m_s2, max_joint_speed_rad_s, \
                 max_joint_acceleration_rad_s2 and lag_cycles must be finite and > 0"
                .into());
        }
        let lower = self.joint_lower_rad.unwrap_or([f64::NEG_INFINITY; 3]);
        let upper = self.joint_upper_rad.unwrap_or([f64::INFINITY; 3]);
        let mut given = self.joint_lower_rad.iter().chain(&self.joint_upper_rad).flatten();
        if given.any(|limit| !limit.is_finite()) || (0..3).any(|joint| !(lower[joint] < upper[joint])) {
            return Err(format!(
                "hil.protection.joint_lower_rad and joint_upper_rad must be finite, each lower below its upper, \
                 got {:?} and {:?}",
                self.joint_lower_rad, self.joint_upper_rad
            ));
        }
        Ok(())
    }
}

/// Which bound tripped. The names are an interface (`--json`, /diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    TrackingError,
    ReachMargin,
    AssemblyHeight,
    JointLimit,
    Slip,
    /// The inverse kinematics cannot place the estimated platform point: the loop has no
    /// motion of the arm to check, so it stops.
    EstimateOutOfReach,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::TrackingError => "tracking_error",
            Bound::ReachMargin => "reach_margin",
            Bound::AssemblyHeight => "assembly_height",
            Bound::JointLimit => "joint_limit",
            Bound::Slip => "slip",
            Bound::EstimateOutOfReach => "estimate_out_of_reach",
        }
    }
}

/// A bound that tripped: what was measured against what was allowed, and where.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trip {
    pub bound: Bound,
    /// The measured value, in the bound's unit.
    pub value: f64,
    /// The bound it passed.
    pub limit: f64,
    /// The joint (1-3) or leg it concerns, where it concerns one.
    pub joint: Option<usize>,
}

impl std::fmt::Display for Trip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.bound {
            Bound::TrackingError => "tracking error [m]",
            Bound::ReachMargin => "reach margin [rad]",
            Bound::AssemblyHeight => "assembly height [m]",
            Bound::JointLimit => "joint angle past its limit's margin [rad]",
            Bound::Slip => "electrical lag [rad]",
            Bound::EstimateOutOfReach => "the estimate's smallest reach margin [rad]",
        };
        write!(f, "{} ({what} {:.4}, bound {:.4}", self.bound.name(), self.value, self.limit)?;
        if let Some(joint) = self.joint {
            write!(f, ", joint {joint}")?;
        }
        write!(f, ")")
    }
}

/// What one cycle knows of the arm, for [`Protection::check`].
#[derive(Debug, Clone, Copy)]
pub struct CycleView<'a> {
    /// The estimated arm: joint angles and platform point and velocity.
    pub motion: &'a ArmMotion,
    /// Where the platform point should be [m].
    pub reference: &'a Vec3,
    /// The drives' electrical lag [rad], where the backend drives steppers.
    pub lag: Option<Vec3>,
}

/// The bounds' state across cycles.
#[derive(Debug, Clone)]
pub struct Protection {
    config: ProtectionConfig,
    /// Cycles in a row each drive's lag has been past the bound.
    lag_cycles: [u32; 3],
}

impl Protection {
    pub fn new(config: ProtectionConfig) -> Protection {
        Protection { config, lag_cycles: [0; 3] }
    }

    /// The first bound this cycle passes, if any, in the order: slip, tracking error, then the
    /// pose bounds ([`ProtectionConfig::check_pose`]) where the arm is and where it would come
    /// to rest. A value that is not a number passes no bound: it trips.
    pub fn check(&mut self, robot: &Robot, view: &CycleView<'_>) -> Option<Trip> {
        let config = &self.config;
        if let Some(lag) = view.lag {
            for joint in 0..3 {
                let within = lag[joint].abs() <= config.max_lag_rad;
                self.lag_cycles[joint] = if within { 0 } else { self.lag_cycles[joint] + 1 };
                if self.lag_cycles[joint] >= config.lag_cycles {
                    return Some(trip(Bound::Slip, lag[joint].abs(), config.max_lag_rad, Some(joint)));
                }
            }
        }
        let motion = view.motion;
        let error = (motion.p - view.reference).norm();
        if !(error <= config.max_tracking_error_m) {
            return Some(trip(Bound::TrackingError, error, config.max_tracking_error_m, None));
        }
        if let Some(found) = config.check_pose(robot, &motion.theta, &motion.p) {
            return Some(found);
        }
        let stop_point = motion.p + motion.p_dot * (motion.p_dot.norm() / (2.0 * config.stopping_deceleration_m_s2));
        match robot.inverse_kinematics(&stop_point, Some(&motion.theta)) {
            Ok(stop_theta) => config.check_pose(robot, &stop_theta, &stop_point),
            // Out of reach: its margin is none.
            Err(_) => Some(trip(Bound::ReachMargin, 0.0, config.min_reach_margin_rad, None)),
        }
    }
}

impl ProtectionConfig {
    /// The first bound the arm at joint angles `theta` [rad] with its platform at `p` [m]
    /// passes, if any, in the order: joint limits, reach, assembly. The loop checks it every
    /// cycle; a node checks every point of a goal with it before accepting the goal.
    pub fn check_pose(&self, robot: &Robot, theta: &Vec3, p: &Vec3) -> Option<Trip> {
        if let Some(found) = past_joint_limit(theta, self) {
            return Some(found);
        }
        let reach = robot.reach_margins(p).map_or((0.0, 0), |margins| (margins.min(), margins.imin()));
        if !(reach.0 >= self.min_reach_margin_rad) {
            return Some(trip(Bound::ReachMargin, reach.0, self.min_reach_margin_rad, Some(reach.1)));
        }
        let height = robot.assembly_height(theta).unwrap_or(0.0);
        if !(height >= self.min_assembly_height_m) {
            return Some(trip(Bound::AssemblyHeight, height, self.min_assembly_height_m, None));
        }
        None
    }
}

/// The estimated platform point `p` [m] out of the inverse kinematics' reach: its smallest reach
/// margin (none: 0) against the reach bound.
pub fn estimate_out_of_reach(robot: &Robot, p: &Vec3, config: &ProtectionConfig) -> Trip {
    let margin = robot.reach_margins(p).map_or(0.0, |margins| margins.min());
    trip(Bound::EstimateOutOfReach, margin, config.min_reach_margin_rad, None)
}

/// A bound passed at joint index `joint` (0-based; reported 1-based).
fn trip(bound: Bound, value: f64, limit: f64, joint: Option<usize>) -> Trip {
    Trip { bound, value, limit, joint: joint.map(|index| index + 1) }
}

/// The first joint of `theta` [rad] within the margin of one of its limits, if any.
fn past_joint_limit(theta: &Vec3, config: &ProtectionConfig) -> Option<Trip> {
    let margin = config.joint_margin_rad;
    (0..3).find_map(|joint| {
        let value = theta[joint];
        let lower = config.joint_lower_rad.map(|limits| limits[joint] + margin);
        let upper = config.joint_upper_rad.map(|limits| limits[joint] - margin);
        match (lower, upper) {
            (Some(lower), _) if !(value >= lower) => Some(trip(Bound::JointLimit, value, lower, Some(joint))),
            (_, Some(upper)) if !(value <= upper) => Some(trip(Bound::JointLimit, value, upper, Some(joint))),
            _ if value.is_nan() => Some(trip(Bound::JointLimit, value, f64::NAN, Some(joint))),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::arc::ArcSpec;

    fn arc_start(robot: &Robot) -> ArmMotion {
        let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
        robot.motion_from_task(&arc[0].x, &Vec3::zeros(), None, 0.0).unwrap()
    }

    #[test]
    fn an_arm_on_its_reference_trips_nothing() {
        let robot = Robot::default();
        let motion = arc_start(&robot);
        let view = CycleView { motion: &motion, reference: &motion.p, lag: Some(Vec3::new(0.9, -0.9, 1.5)) };
        assert_eq!(Protection::new(ProtectionConfig::default()).check(&robot, &view), None);
    }

    #[test]
    fn a_tracking_error_past_its_bound_trips_at_once() {
        let robot = Robot::default();
        let motion = arc_start(&robot);
        let reference = motion.p + Vec3::new(0.0, 0.02, 0.0);
        let view = CycleView { motion: &motion, reference: &reference, lag: None };
        let trip = Protection::new(ProtectionConfig::default()).check(&robot, &view).unwrap();
        assert_eq!((trip.bound, trip.limit, trip.joint), (Bound::TrackingError, 0.01, None));
        assert!((trip.value - 0.02).abs() < 1e-12);
    }

    #[test]
    fn a_lag_past_the_torque_peak_trips_only_when_it_persists() {
        let robot = Robot::default();
        let motion = arc_start(&robot);
        let config = ProtectionConfig::default();
        let mut protection = Protection::new(config.clone());
        let slipping = CycleView { motion: &motion, reference: &motion.p, lag: Some(Vec3::new(0.0, 0.0, -3.0)) };
        let settled = CycleView { lag: Some(Vec3::zeros()), ..slipping };
        for _ in 1..config.lag_cycles {
            assert_eq!(protection.check(&robot, &slipping), None);
        }
        assert_eq!(protection.check(&robot, &settled), None, "a glitch resets the count");
        for _ in 1..config.lag_cycles {
            assert_eq!(protection.check(&robot, &slipping), None);
        }
        let trip = protection.check(&robot, &slipping).unwrap();
        assert_eq!((trip.bound, trip.value, trip.joint), (Bound::Slip, 3.0, Some(3)));
    }

    /// The arm at rest just inside the reach bound (its margin `inside` [rad] above it), along
    /// `direction` from the arc's start: its motion, and where the bound lies along `direction`
    /// [m from that point].
    fn near_the_edge(robot: &Robot, direction: Vec3, inside: f64) -> (ArmMotion, f64) {
        let config = ProtectionConfig::default();
        let start = arc_start(robot).p;
        let margin = |d: f64| robot.reach_margins(&(start + direction * d)).map_or(0.0, |m| m.min());
        // Bisect for the distances where the margin is the bound plus `inside`, and the bound.
        let find = |target: f64| {
            let (mut inner, mut outer) = (0.0, 1.0);
            for _ in 0..60 {
                let middle = (inner + outer) / 2.0;
                if margin(middle) > target {
                    inner = middle
                } else {
                    outer = middle
                }
            }
            inner
        };
        let at = find(config.min_reach_margin_rad + inside);
        let edge = find(config.min_reach_margin_rad);
        let motion = robot.motion_from_task(&(start + direction * at), &Vec3::zeros(), None, 0.0).unwrap();
        (motion, edge - at)
    }

    #[test]
    fn an_arm_heading_for_the_workspace_edge_trips_once_it_could_not_stop_before_it() {
        let robot = Robot::default();
        let direction = Vec3::new(0.0, 0.0, 1.0);
        let (mut motion, to_edge) = near_the_edge(&robot, direction, 0.05);
        let config = ProtectionConfig::default();
        assert!(to_edge > 1e-4 && to_edge < 0.05, "{to_edge} m from the bound");
        // The speed at which the stopping distance |v|^2 / 2a is the way left to the bound.
        let critical = (2.0 * config.stopping_deceleration_m_s2 * to_edge).sqrt();
        assert!(critical < 0.5, "an arm's speed, not a projectile's: {critical} m/s");
        let mut check = |velocity: Vec3| {
            motion.p_dot = velocity;
            let view = CycleView { motion: &motion, reference: &motion.p, lag: None };
            Protection::new(config.clone()).check(&robot, &view)
        };
        assert_eq!(check(Vec3::zeros()), None, "at rest inside the bound");
        assert_eq!(check(direction * (0.9 * critical)), None, "it can still stop before the bound");
        assert_eq!(check(-direction * (3.0 * critical)), None, "moving away");
        let trip = check(direction * (1.1 * critical)).expect("it cannot stop before the bound");
        assert_eq!(trip.bound, Bound::ReachMargin, "{trip}");
    }

    #[test]
    fn a_value_that_is_not_a_number_trips() {
        let robot = Robot::default();
        let mut motion = arc_start(&robot);
        let reference = Vec3::new(f64::NAN, 0.0, 0.0);
        let view = CycleView { motion: &motion, reference: &reference, lag: None };
        assert_eq!(
            Protection::new(ProtectionConfig::default()).check(&robot, &view).map(|t| t.bound),
            Some(Bound::TrackingError)
        );
        motion.theta[1] = f64::NAN;
        let view = CycleView { motion: &motion, reference: &motion.p, lag: Some(Vec3::new(f64::NAN, 0.0, 0.0)) };
        let mut protection = Protection::new(ProtectionConfig { lag_cycles: 1, ..ProtectionConfig::default() });
        assert_eq!(protection.check(&robot, &view).map(|t| t.bound), Some(Bound::Slip), "a lag that is not a number");
        let view = CycleView { lag: None, ..view };
        assert_eq!(
            protection.check(&robot, &view).map(|t| t.bound),
            Some(Bound::JointLimit),
            "an angle that is not a number"
        );
    }

    #[test]
    fn joint_limits_keep_their_margin() {
        let robot = Robot::default();
        let motion = arc_start(&robot);
        let theta = motion.theta;
        let config = ProtectionConfig {
            joint_lower_rad: Some([theta[0] - 1.0, theta[1] - 1.0, -4.0]),
            joint_upper_rad: Some([theta[0] + 1.0, theta[1] + 0.04, 4.0]),
            ..ProtectionConfig::default()
        };
        let view = CycleView { motion: &motion, reference: &motion.p, lag: None };
        let trip = Protection::new(config).check(&robot, &view).unwrap();
        assert_eq!((trip.bound, trip.joint), (Bound::JointLimit, Some(2)));
        assert!((trip.limit - (theta[1] - 0.01)).abs() < 1e-12);
    }

    #[test]
    fn bounds_are_validated() {
        assert!(ProtectionConfig::default().validate().is_ok());
        let bad = ProtectionConfig { max_tracking_error_m: f64::NAN, ..ProtectionConfig::default() };
        assert!(bad.validate().is_err());
        let crossed = ProtectionConfig {
            joint_lower_rad: Some([1.0; 3]),
            joint_upper_rad: Some([0.0; 3]),
            ..ProtectionConfig::default()
        };
        assert!(crossed.validate().is_err());
    }
}
