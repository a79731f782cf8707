//! The paths a command would take the arm along, checked against the protective stop's bounds
//! and the forearm's sphere before anything moves (docs/hil.md, "The forearm's sphere"), and
//! against the motors' speed and acceleration.

use super::ProtectionConfig;
use crate::model::math::Vec3;
use crate::model::Robot;

/// The longest stretch of a line between two waypoints [`ProtectionConfig::check_path`] leaves
/// unchecked against the pose bounds [m], and the most points it checks on one line.
const PATH_STEP_M: f64 = 0.001;
const PATH_CHECKS_PER_LINE: usize = 8;

/// Where a path that [`ProtectionConfig::check_path`] checks starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PathStart {
    /// Where the loop's reference already is, or where what is queued ends (hil_node's joint goals,
    /// joint commands and segments), with how far off the sphere the arm was `seen` lately
    /// ([`SeenOffsets::band`]), where the node knows it. The path keeps within the band the bound
    /// spans, widened on each side to its start where that is farther off, closing in behind the
    /// path: once the path has come nearer the sphere, it goes no farther off again than the bound
    /// beyond the nearest it came. It may also go as far off on each side as the arm was seen, up
    /// to `max_forearm_offset_m` and `max_tracking_error_m` together (2 cm by default). The loop's
    /// reference comes off the sphere on a resume where the arm is seen, or after a joint command
    /// to where it is seen (joint_trajectory_controller's hold after a cancel, at its state, which
    /// is a few frames old and as far back along the arm's way): such a hold, and the way back,
    /// must not be refused.
    AtTheReference { seen: Option<(f64, f64)> },
    /// A point the client chose (a Cartesian goal's first waypoint, a port-5555 session's): held
    /// to `max_forearm_offset_m` as every other point is.
    Requested,
}

/// How many of the loop's latest frames [`SeenOffsets`] keeps: 0.128 s of the 1 kHz loop with
/// `hil.frame_every` 1 and no frame dropped on the way to the node, longer than the age of the
/// state joint_trajectory_controller holds at.
const SEEN_FRAMES: usize = 128;

/// How far off the forearm's sphere the loop's estimate saw the platform point at its latest
/// frames: where a hold at the arm's state may aim.
#[derive(Clone, Debug)]
pub struct SeenOffsets {
    offsets_m: [f64; SEEN_FRAMES],
    next: usize,
}

impl Default for SeenOffsets {
    fn default() -> Self {
        SeenOffsets { offsets_m: [f64::NAN; SEEN_FRAMES], next: 0 }
    }
}

impl SeenOffsets {
    /// The estimate saw the platform point at `x` [m].
    pub fn seen(&mut self, robot: &Robot, x: &Vec3) {
        self.offsets_m[self.next] = robot.forearm_sphere_offset(x);
        self.next = (self.next + 1) % SEEN_FRAMES;
    }

    /// The least and the most offset [m] over the frames kept, if any was seen (a point off the
    /// sphere by no finite offset is left out).
    pub fn band(&self) -> Option<(f64, f64)> {
        let finite = self.offsets_m.iter().copied().filter(|off| off.is_finite());
        finite.fold(None, |band, off| match band {
            None => Some((off, off)),
            Some((low, high)) => Some((low.min(off), high.max(off))),
        })
    }
}

impl ProtectionConfig {
    /// Why the arm along `waypoints` would pass one of the pose bounds or leave the forearm's
    /// sphere, if it would: the way the loop takes from the first waypoint (`start` says whose it
    /// is) through the others, a straight line between each two as its ring interpolates them. Each
    /// line's farthest points off the sphere (its ends outside it, its point nearest the elbow
    /// inside it) against `max_forearm_offset_m`, or the wider band a start at the loop's reference
    /// allows, closing in behind the path ([`PathStart::AtTheReference`]); each waypoint after the
    /// first and points along each line (every [`PATH_STEP_M`], at most [`PATH_CHECKS_PER_LINE`]),
    /// each pose (inverse kinematics from the one before), by [`ProtectionConfig::check_pose`]:
    /// what would trip the stop, or strain the forearm, is refused before anything moves. A line
    /// between two reachable waypoints can leave the workspace.
    pub fn check_path(
        &self,
        robot: &Robot,
        waypoints: &[crate::control::Waypoint],
        start: PathStart,
    ) -> Result<(), String> {
        let Some(first) = waypoints.first() else { return Ok(()) };
        let mut sphere = ForearmSphere::new(self, robot, &first.x, start);
        sphere.holds(&first.x, 0.0, sphere.band())?;
        let mut previous = robot.inverse_kinematics(&first.x, None).ok();
        for pair in waypoints.windows(2) {
            let at = |s: f64| pair[0].t + (pair[1].t - pair[0].t) * s - first.t;
            // Along a line the offset falls to its point nearest the elbow and rises after it:
            // that point is the nearest the line comes to the sphere from outside, and farthest
            // in from inside; its end is the farthest out after it (its start was passed: the
            // band still holds it).
            let band = sphere.band();
            let deepest = sphere.nearest_the_elbow(&pair[0].x, &pair[1].x);
            let passed = sphere.holds(&pair[0].x.lerp(&pair[1].x, deepest), at(deepest), band)?;
            sphere.passed(passed);
            let passed = sphere.holds(&pair[1].x, at(1.0), sphere.band())?;
            sphere.passed(passed);
            let length = (pair[1].x - pair[0].x).norm();
            let checks = ((length / PATH_STEP_M).ceil() as usize).clamp(1, PATH_CHECKS_PER_LINE);
            for k in 1..=checks {
                let s = k as f64 / checks as f64;
                let x = pair[0].x.lerp(&pair[1].x, s);
                let theta = robot
                    .inverse_kinematics(&x, previous.as_ref())
                    .map_err(|error| format!("at {:.3} s the arm cannot be placed: {error}", at(s)))?;
                if let Some(trip) = self.check_pose(robot, &theta, &x) {
                    return Err(format!("at {:.3} s the arm would pass a bound of the protective stop: {trip}", at(s)));
                }
                previous = Some(theta);
            }
        }
        Ok(())
    }

    /// Why the arm along `waypoints` would turn a motor faster or accelerate it harder than
    /// `max_joint_speed_rad_s` and `max_joint_acceleration_rad_s2` allow, if it would: each
    /// motor's speed over each line between two waypoints (as the loop's ring interpolates
    /// them), and its change from one line to the next over the mean of their times. With
    /// `from_rest` the arm holds before the first waypoint; with `to_rest`, after the last.
    pub fn check_motion(
        &self,
        robot: &Robot,
        waypoints: &[crate::control::Waypoint],
        (from_rest, to_rest): (bool, bool),
    ) -> Result<(), String> {
        // A single waypoint is a hold: nothing moves (every caller pins the first waypoint to
        // where the arm holds, and check_path places it).
        let [first, _, ..] = waypoints else { return Ok(()) };
        let place = |x: &Vec3, near: Option<&Vec3>, t: f64| {
            robot.inverse_kinematics(x, near).map_err(|error| format!("at {t:.3} s the arm cannot be placed: {error}"))
        };
        let mut theta = place(&first.x, None, 0.0)?;
        // The line before: its motors' speeds [rad/s] and time [s]; rest is a line of no time.
        let mut before: Option<(Vec3, f64)> = from_rest.then_some((Vec3::zeros(), 0.0));
        for pair in waypoints.windows(2) {
            let (dt, at) = (pair[1].t - pair[0].t, pair[1].t - first.t);
            let next = place(&pair[1].x, Some(&theta), at)?;
            let speeds = (next - theta) / dt;
            self.within_motion(speeds, before, dt, at)?;
            (theta, before) = (next, Some((speeds, dt)));
        }
        match (to_rest, before) {
            (true, Some((speeds, dt))) => {
                let end = waypoints[waypoints.len() - 1].t - first.t;
                self.within_motion(Vec3::zeros(), Some((speeds, dt)), 0.0, end)
            }
            _ => Ok(()),
        }
    }

    /// Why motors at `speeds` [rad/s] over a line of `dt` [s] after `before` (the line before's
    /// speeds and time) break the motion bounds, at `at` [s].
    fn within_motion(&self, speeds: Vec3, before: Option<(Vec3, f64)>, dt: f64, at: f64) -> Result<(), String> {
        let (motor, speed) = (speeds.iamax(), speeds.amax());
        if !(speed <= self.max_joint_speed_rad_s) {
            return Err(format!(
                "at {at:.3} s motor {} would turn at {speed:.3} rad/s, faster than hil.protection.max_joint_speed_rad_s \
                 ({} rad/s)",
                motor + 1,
                self.max_joint_speed_rad_s
            ));
        }
        let Some((previous, previous_dt)) = before else { return Ok(()) };
        let change = speeds - previous;
        let (motor, acceleration) = (change.iamax(), change.amax() / ((dt + previous_dt) / 2.0));
        match acceleration <= self.max_joint_acceleration_rad_s2 {
            true => Ok(()),
            false => Err(format!(
                "at {at:.3} s motor {} would accelerate at {acceleration:.1} rad/s^2, harder than \
                 hil.protection.max_joint_acceleration_rad_s2 ({} rad/s^2)",
                motor + 1,
                self.max_joint_acceleration_rad_s2
            )),
        }
    }
}

/// The forearm's sphere as [`ProtectionConfig::check_path`] holds a path to it: the platform
/// point's offset ([`Robot::forearm_sphere_offset`]) within `band_m`, which closes in behind the
/// path as it comes nearer the sphere, or as far off as the arm was seen where that is wider.
struct ForearmSphere<'a> {
    config: &'a ProtectionConfig,
    robot: &'a Robot,
    /// The least and the most offset allowed [m] (inside the sphere is negative): the bound's,
    /// widened to the path's start, closed in behind the path.
    band_m: (f64, f64),
    /// The least and the most offset the arm was seen at lately [m], each capped on either side
    /// at the bound and the tracking bound together (a hold at the arm's state aims at the
    /// estimate, within the tracking bound of the loop's reference).
    seen: Option<(f64, f64)>,
    /// Whether the path's start widened the band past the bound's, and whether the path's
    /// passing has closed it in since: a refusal names what did.
    widened: bool,
    closed: bool,
}

/// What a line of a path is held to: the band [m], and whether where the arm was seen widened
/// it there on each side.
#[derive(Clone, Copy)]
struct Band {
    band_m: (f64, f64),
    by_seen: (bool, bool),
}

impl<'a> ForearmSphere<'a> {
    fn new(config: &'a ProtectionConfig, robot: &'a Robot, start: &Vec3, whose: PathStart) -> Self {
        let bound_m = config.max_forearm_offset_m;
        let cap_m = bound_m + config.max_tracking_error_m;
        let mut sphere =
            ForearmSphere { config, robot, band_m: (-bound_m, bound_m), seen: None, widened: false, closed: false };
        if let PathStart::AtTheReference { seen } = whose {
            let from_m = robot.forearm_sphere_offset(start);
            if from_m.is_finite() && !(-bound_m..=bound_m).contains(&from_m) {
                sphere.band_m = (sphere.band_m.0.min(from_m), sphere.band_m.1.max(from_m));
                sphere.widened = true;
            }
            // min and max, not clamp: no bound of a configuration can make this panic.
            sphere.seen = seen.map(|(low, high)| (low.max(-cap_m).min(cap_m), high.min(cap_m).max(-cap_m)));
        }
        sphere
    }

    /// The band that holds where the path is now: as far off on each side as the arm was seen,
    /// where that is wider.
    fn band(&self) -> Band {
        let (low, high) = self.band_m;
        match self.seen {
            Some((seen_low, seen_high)) => {
                Band { band_m: (low.min(seen_low), high.max(seen_high)), by_seen: (seen_low < low, seen_high > high) }
            }
            None => Band { band_m: (low, high), by_seen: (false, false) },
        }
    }

    /// The path passed a point `off_m` [m] off the sphere: on each side, the band its start
    /// widened closes in to the bound beyond it, so that a path that came back nearer the sphere
    /// goes no farther off again than any path may go off it.
    fn passed(&mut self, off_m: f64) {
        let bound_m = self.config.max_forearm_offset_m;
        let (low, high) = self.band_m;
        let closed = (low.max(off_m - bound_m).min(-bound_m), high.min(off_m + bound_m).max(bound_m));
        self.closed |= closed != self.band_m;
        self.band_m = closed;
    }

    /// The band from `low` to `high` [m], as a refusal on one side of it names it, where the arm
    /// was seen widening that side or not.
    fn named(&self, (low, high): (f64, f64), by_seen: bool) -> String {
        let named = format!("hil.protection.max_forearm_offset_m ({:.4} m)", self.config.max_forearm_offset_m);
        let seen_words = format!(
            "as far off as the arm was seen lately (by at most hil.protection.max_tracking_error_m, {:.4} m, beyond \
             the bound)",
            self.config.max_tracking_error_m
        );
        let start = match (self.widened, self.closed) {
            (false, _) => None,
            (true, false) => Some("the path's start".to_owned()),
            (true, true) => Some(
                "the path's start, closed in behind the path to the bound beyond where it came nearest the sphere"
                    .into(),
            ),
        };
        let widened_to = match (start, by_seen) {
            (None, false) => return named,
            (Some(start), false) => start,
            (None, true) => seen_words,
            (Some(start), true) => format!("{start}, and to {seen_words}"),
        };
        format!("the {low:+.4} to {high:+.4} m off it that {named} widened to {widened_to} allows")
    }

    /// The fraction [0, 1] of the way along the line from `a` to `b` [m] nearest the elbow: where
    /// the line is deepest inside the sphere (the distance from the elbow along a line is convex,
    /// so outside the sphere the line is farthest off at one of its ends).
    fn nearest_the_elbow(&self, a: &Vec3, b: &Vec3) -> f64 {
        let along = b - a;
        let length2 = along.norm_squared();
        if length2 > 0.0 {
            ((self.robot.elbow() - a).dot(&along) / length2).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The platform point `x` [m]'s offset off the sphere [m], or why it is too far off, `at`
    /// [s] along a path, on a line held to `band`.
    fn holds(&self, x: &Vec3, at: f64, band: Band) -> Result<f64, String> {
        let off = self.robot.forearm_sphere_offset(x);
        let (low, high) = band.band_m;
        if off >= low && off <= high {
            return Ok(off);
        }
        let by_seen = if off > high { band.by_seen.1 } else { band.by_seen.0 };
        let (e, l_arm) = (self.robot.elbow(), self.robot.params().l_arm);
        Err(format!(
            "at {at:.3} s the platform point would be {off:+.4} m off the forearm's sphere (radius {l_arm:.3} m \
             about the elbow at ({:.3}, {:.3}, {:.3}) m; + outside it), past {}",
            e.x,
            e.y,
            e.z,
            self.named(band.band_m, by_seen)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::arc::ArcSpec;

    const AT_THE_REFERENCE: PathStart = PathStart::AtTheReference { seen: None };

    /// Where the arm was seen, at each of `offsets_m` [m] off the sphere on the way out from the
    /// elbow through [`off_the_sphere`]'s point.
    fn seen_at(robot: &Robot, offsets_m: &[f64]) -> Option<(f64, f64)> {
        let mut seen = SeenOffsets::default();
        offsets_m.iter().for_each(|&by_m| seen.seen(robot, &off_the_sphere(robot, by_m)));
        seen.band()
    }

    /// The built-in arc's first point moved straight out from the elbow to `by_m` [m] off the
    /// forearm's sphere.
    fn off_the_sphere(robot: &Robot, by_m: f64) -> Vec3 {
        let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
        let on = ArcSpec::default().waypoints(&elbow, l_arm).unwrap()[0].x;
        elbow + (on - elbow) * ((l_arm + by_m) / l_arm)
    }

    #[test]
    fn a_path_off_the_forearms_sphere_is_refused_before_it_runs() {
        use crate::control::Waypoint;
        let robot = Robot::default();
        let config = ProtectionConfig::default();
        let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
        let arc = ArcSpec::default().waypoints(&elbow, l_arm).unwrap();
        for start in [AT_THE_REFERENCE, PathStart::Requested] {
            assert_eq!(config.check_path(&robot, &arc, start), Ok(()));
        }
        // Straight out from the elbow, 2.4 cm past the sphere in 1 s: past the bound at its end.
        let out = |by: f64| elbow + (arc[0].x - elbow) * ((l_arm + by) / l_arm);
        let path = |by: f64| [Waypoint { x: arc[0].x, ..arc[0] }, Waypoint { t: arc[0].t + 1.0, x: out(by), ..arc[0] }];
        let refused = config.check_path(&robot, &path(0.024), AT_THE_REFERENCE).unwrap_err();
        assert!(
            refused.starts_with("at 1.000 s the platform point would be +0.0240 m off the forearm's sphere"),
            "{refused}"
        );
        assert!(refused.contains("hil.protection.max_forearm_offset_m (0.0100 m)"), "{refused}");
        assert_eq!(config.check_path(&robot, &path(-0.009), AT_THE_REFERENCE), Ok(()));
        assert!((robot.forearm_sphere_offset(&out(-0.009)) + 0.009).abs() < 1e-12);
        // A port-5555 session's first waypoint is the client's own: held to the bound.
        let from_off = [Waypoint { x: out(0.011), ..arc[0] }, arc[1]];
        let refused = config.check_path(&robot, &from_off, PathStart::Requested).unwrap_err();
        assert!(refused.starts_with("at 0.000 s the platform point would be +0.0110"), "{refused}");
    }

    #[test]
    fn a_line_that_cuts_inside_the_forearms_sphere_is_refused_however_few_its_samples() {
        use crate::control::Waypoint;
        let robot = Robot::default();
        let config = ProtectionConfig::default();
        let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
        // Along a chord of the sphere 1.01 cm deep at its middle, from one end to 7/9 of the way
        // past the middle: the deepest point lies 9/16 of the way, between two of the 8 points
        // the line's poses are checked at, which stay within the bound.
        let middle = elbow + Vec3::new(-0.2, -0.2, 0.3).normalize() * (l_arm - 0.0101);
        let (radial, across) = ((middle - elbow).normalize(), Vec3::new(0.3, 0.2, 0.2).normalize());
        let across = (across - radial * across.dot(&radial)).normalize();
        let half = (l_arm * l_arm - (middle - elbow).norm_squared()).sqrt();
        let chord = [
            Waypoint { t: 0.0, x: middle - across * half, ..Waypoint::default() },
            Waypoint { t: 1.6, x: middle + across * (half * 7.0 / 9.0), ..Waypoint::default() },
        ];
        for k in 0..=8 {
            let sampled = robot.forearm_sphere_offset(&chord[0].x.lerp(&chord[1].x, k as f64 / 8.0));
            assert!(sampled.abs() < 0.01, "{k}/8 of the way: {sampled}");
        }
        let refused = config.check_path(&robot, &chord, AT_THE_REFERENCE).unwrap_err();
        assert!(
            refused.starts_with("at 0.900 s the platform point would be -0.0101 m off the forearm's sphere"),
            "{refused}"
        );
    }

    #[test]
    fn a_reference_off_the_forearms_sphere_may_hold_or_come_back_but_not_go_farther() {
        use crate::control::Waypoint;
        let robot = Robot::default();
        let config = ProtectionConfig::default();
        let off = |by_m: f64| off_the_sphere(&robot, by_m);
        let way = |from: f64, to: f64| {
            [
                Waypoint { t: 0.0, x: off(from), ..Waypoint::default() },
                Waypoint { t: 1.0, x: off(to), ..Waypoint::default() },
            ]
        };
        let check = |way: &[Waypoint], seen_m: &[f64]| {
            config.check_path(&robot, way, PathStart::AtTheReference { seen: seen_at(&robot, seen_m) })
        };
        // The loop's reference holds 1.5 cm off (the arm was seen there): a hold, and a way
        // back onto the sphere, are taken; a way 1 mm farther is not, nor one across to the
        // other side, saying why.
        assert_eq!(check(&way(0.015, 0.015)[..1], &[]), Ok(()));
        assert_eq!(check(&way(0.015, 0.0), &[]), Ok(()));
        assert_eq!(check(&way(-0.015, -0.005), &[]), Ok(()));
        let farther = check(&way(0.015, 0.016), &[]).unwrap_err();
        assert!(
            farther.contains("+0.0160 m off the forearm's sphere")
                && farther.contains(
                    "past the -0.0100 to +0.0150 m off it that hil.protection.max_forearm_offset_m (0.0100 m) widened \
                     to the path's start allows"
                ),
            "{farther}"
        );
        assert!(check(&way(0.015, -0.015), &[]).unwrap_err().contains("-0.0150 m off"));
        // Held 0.9 cm off and seen lately 1.0 to 1.2 cm off (the arm trailing its reference
        // outward): a hold where it was seen is taken, a way past it is not.
        assert_eq!(check(&way(0.009, 0.012), &[0.012, 0.010]), Ok(()));
        let past = check(&way(0.009, 0.013), &[0.012, 0.010]).unwrap_err();
        assert!(past.contains("widened to as far off as the arm was seen lately"), "{past}");
        // Where the arm was seen widens the band up to the bound and the tracking bound
        // together (2 cm); a start farther off still widens it to itself: a hold there, and the
        // way back, are taken.
        let capped = check(&way(0.015, 0.025), &[0.025]).unwrap_err();
        assert!(capped.contains("+0.0250 m off") && capped.contains("to +0.0200 m off it"), "{capped}");
        assert_eq!(check(&way(0.015, 0.02), &[0.025]), Ok(()));
        assert_eq!(check(&way(0.03, 0.0), &[0.03]), Ok(()));
        // The client's own start gets no such leave.
        assert!(config.check_path(&robot, &way(0.015, 0.0), PathStart::Requested).is_err());
    }

    #[test]
    fn a_widened_band_closes_in_behind_a_path_that_comes_back_nearer_the_forearms_sphere() {
        use crate::control::Waypoint;
        let robot = Robot::default();
        let config = ProtectionConfig::default();
        let off = |by_m: f64| off_the_sphere(&robot, by_m);
        let way = |offsets_m: &[f64]| -> Vec<Waypoint> {
            let at = |k: usize, by: f64| Waypoint { t: k as f64, x: off(by), ..Waypoint::default() };
            offsets_m.iter().enumerate().map(|(k, &by)| at(k, by)).collect()
        };
        let check = |offsets_m: &[f64], seen_m: &[f64]| {
            config.check_path(&robot, &way(offsets_m), PathStart::AtTheReference { seen: seen_at(&robot, seen_m) })
        };
        // From 1.5 cm off, the way back may bulge out again by up to the bound (1 cm) beyond the
        // nearest it came, never past its start; back on the sphere, the bound alone holds.
        assert_eq!(check(&[0.015, 0.008, 0.015, 0.0], &[]), Ok(()));
        let again = check(&[0.015, 0.003, 0.014], &[]).unwrap_err();
        assert!(
            again.starts_with("at 2.000 s the platform point would be +0.0140 m off")
                && again.contains("the -0.0100 to +0.0130 m off it")
                && again.contains("closed in behind the path to the bound beyond where it came nearest the sphere"),
            "{again}"
        );
        assert!(check(&[0.015, 0.0, 0.011], &[]).unwrap_err().contains("+0.0110 m off"));
        assert!(check(&[-0.015, -0.002, -0.013], &[]).unwrap_err().contains("-0.0130 m off"), "inside it alike");
        // Where the arm was seen stays allowed near the path's start and where it was seen
        // (within the bound and the tracking bound, 2 cm), however near the sphere the path
        // came: JTC's hold after a cancel, at its state, from the loop's reference.
        assert_eq!(check(&[0.0, 0.006, 0.013], &[0.011, 0.0131]), Ok(()));
        assert_eq!(check(&[0.015, 0.0, 0.013], &[0.0131]), Ok(()));
        assert!(check(&[0.015, 0.0, 0.014], &[0.0131]).is_err());
        // Held 0.9 cm off, the arm seen 1.3 cm off farther back along its way (JTC's state a few
        // frames old, the arm moving): the hold where it was seen is taken.
        let (elbow, l_arm) = (robot.elbow(), robot.params().l_arm);
        let around = |axis: Vec3, angle: f64, by_m: f64| {
            let axis = nalgebra::Unit::new_normalize(axis);
            elbow + nalgebra::Rotation3::from_axis_angle(&axis, angle) * (off(by_m) - elbow)
        };
        let point = |t: f64, x: Vec3| Waypoint { t, x, ..Waypoint::default() };
        let hold = [point(0.0, off(0.009)), point(0.5, around(Vec3::z(), 0.025 / l_arm, 0.013))];
        let seen = PathStart::AtTheReference { seen: seen_at(&robot, &[0.013]) };
        assert_eq!(config.check_path(&robot, &hold, seen), Ok(()));
        // A chord between two points 1.5 cm off that passes 2 mm off at its middle closes it.
        let half_angle = ((l_arm + 0.002) / (l_arm + 0.015)).acos();
        let across = (off(0.0) - elbow).cross(&Vec3::z());
        let chord = [point(0.0, off(0.015)), point(1.0, around(across, 2.0 * half_angle, 0.015))];
        let refused = config.check_path(&robot, &chord, AT_THE_REFERENCE).unwrap_err();
        assert!(
            refused.starts_with("at 1.000 s the platform point would be +0.0150 m off")
                && refused.contains("to +0.0120 m off it")
                && refused.contains("closed in behind the path"),
            "{refused}"
        );
    }

    #[test]
    fn where_the_arm_was_seen_is_where_the_latest_frames_saw_it() {
        let robot = Robot::default();
        let off = |by_m: f64| off_the_sphere(&robot, by_m);
        let mut seen = SeenOffsets::default();
        assert_eq!(seen.band(), None, "nothing seen yet");
        seen.seen(&robot, &off(0.015));
        seen.seen(&robot, &Vec3::repeat(f64::NAN));
        let (low, high) = seen.band().unwrap();
        assert!((low - 0.015).abs() < 1e-12 && (high - 0.015).abs() < 1e-12, "a frame not seen is left out");
        for _ in 0..SEEN_FRAMES {
            seen.seen(&robot, &off(0.005));
        }
        let (low, high) = seen.band().unwrap();
        assert!((low - 0.005).abs() < 1e-12 && (high - 0.005).abs() < 1e-12, "older frames drop out: {low} {high}");
    }
}
