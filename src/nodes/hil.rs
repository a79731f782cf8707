//! hil_node without ROS: its parameters, how trajectory segments and action goals reach the
//! running loop ([`Feeder`]), and how a goal's run answers it ([`HilGoals`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::diagnostics::{Level, Status};
use super::goals::{replaced_result, GoalOutcome, GoalTracker, GoalUpdate};
use super::messages::MultiDofPoint;
use super::msg::interfaces::{FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryResult};
use super::param_server::ParamSpec;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::control::{Trajectory, Waypoint};
use crate::drivers::robotscara::RigConfig;
use crate::drivers::{RigDevices, RigKind, RigSettings};
use crate::hil::stepper::StepperConfig;
use crate::hil::{FeedItem, HilConfig, LoopStatus, Withdrawals};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::sim::{Frame, SilConfig};

/// hil_node's own parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HilNodeSettings {
    /// Hardware behind the loop: sim or robotscara. Default sim.
    pub hardware: RigKind,
    /// Angle sensor device (robotscara). Default /dev/ttyUSB0. (Not `sensor`: that is the
    /// simulated sensor's section.)
    pub sensor_device: String,
    /// Step-driver Arduino device, or auto (robotscara). Default auto.
    pub arduino_device: String,
    /// Frames published per second [Hz]. Default 250.
    pub publish_rate_hz: f64,
    /// Trajectory CSV run at start; empty = the built-in arc. Segments on ~/trajectory follow it.
    pub trajectory_file: String,
    /// Frame of the published points. Default base_link.
    pub frame_id: String,
    /// Configure and activate at start (the launch file sets it). Default false: the node waits
    /// unconfigured for `ros2 lifecycle set`.
    pub autostart: bool,
    /// After a device fault, configure and activate again once a second until the rig is back.
    /// Default false.
    pub auto_recover: bool,
    /// With auto_recover, activate again after a protective stop too. Default false: a
    /// protective stop leaves the node inactive until a person has looked.
    pub auto_recover_protective_stop: bool,
}

impl Default for HilNodeSettings {
    fn default() -> Self {
        HilNodeSettings {
            hardware: RigKind::Sim,
            sensor_device: "/dev/ttyUSB0".into(),
            arduino_device: "auto".into(),
            publish_rate_hz: 250.0,
            trajectory_file: String::new(),
            frame_id: "base_link".into(),
            autostart: false,
            auto_recover: false,
            auto_recover_protective_stop: false,
        }
    }
}

/// How `ros2 param` sees hil_node's parameters: all are read at start (the loop and its
/// hardware are set up once).
pub const HIL_NODE_PARAMS: [ParamSpec; 16] = [
    ParamSpec::read_only("hardware", "hardware behind the loop: sim or robotscara (read at start)"),
    ParamSpec::read_only("sensor_device", "angle sensor device, robotscara (read at start)"),
    ParamSpec::read_only("arduino_device", "step-driver Arduino device or auto, robotscara (read at start)"),
    ParamSpec::read_only("publish_rate_hz", "frames published per second [Hz] (read at start)"),
    ParamSpec::read_only("trajectory_file", "trajectory CSV run at start; empty runs the built-in arc (read at start)"),
    ParamSpec::read_only("frame_id", "frame of the published points (read at start)"),
    ParamSpec::read_only(
        "hil.",
        "the fixed-rate loop: rate, sensor timeout, real-time priority, protective stop bounds (read at start)",
    ),
    ParamSpec::read_only("rig.", "the reference rig's devices (read at start)"),
    ParamSpec::read_only("stepper.", "torque to step rate (read at start)"),
    ParamSpec::read_only("robot.", "robot model, SI units (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("controller.", "task-space PID and inverse dynamics (read at start)"),
    ParamSpec::read_only("estimator.", "Kalman filter and range-bias estimator (read at start)"),
    ParamSpec::read_only("sensor.", "simulated angle sensor (read at start)"),
    ParamSpec::read_only("autostart", "configure and activate at start (read at start)"),
    ParamSpec::read_only(
        "auto_recover",
        "after a rig fault, configure and activate again once a second (read at start)",
    ),
    ParamSpec::read_only(
        "auto_recover_protective_stop",
        "with auto_recover, activate again after a protective stop too (read at start)",
    ),
];

/// Everything hil_node is configured by.
#[derive(Debug, Clone)]
pub struct HilNodeConfig {
    pub sil: SilConfig,
    pub hil: HilConfig,
    pub rig: RigSettings,
    pub settings: HilNodeSettings,
}

impl HilNodeConfig {
    pub fn devices(&self) -> RigDevices {
        RigDevices { sensor: self.settings.sensor_device.clone(), arduino: self.settings.arduino_device.clone() }
    }
}

const GROUPS: [&str; 3] = ["hil", "stepper", "rig"];

/// Reads hil_node's parameters: the SIL sections, `hil.*`, `stepper.*`, `rig.*` and its own.
pub fn hil_node_config(params: &BTreeMap<String, ParamValue>) -> Result<HilNodeConfig, ParamError> {
    let invalid = |message: String| ParamError::Invalid { prefix: String::new(), message };
    let sil: SilConfig = read_group(&only_groups(params, &SilConfig::SECTIONS), "")?;
    sil.validate().map_err(|error| invalid(error.to_string()))?;
    let hil: HilConfig = read_group(params, "hil")?;
    hil.validate().map_err(invalid)?;
    let rig = RigSettings {
        stepper: read_group::<StepperConfig>(params, "stepper")?,
        rig: read_group::<RigConfig>(params, "rig")?,
    };
    let groups: Vec<&str> = SilConfig::SECTIONS.iter().chain(&GROUPS).copied().collect();
    let settings: HilNodeSettings = read_group(&without_groups(params, &groups), "")?;
    if !(settings.publish_rate_hz > 0.0) {
        return Err(invalid(format!("publish_rate_hz must be > 0, got {}", settings.publish_rate_hz)));
    }
    Ok(HilNodeConfig { sil, hil, rig, settings })
}

/// hil_node's status from the loop's figures: OK while no cycle overran since the last report
/// (when the loop had `overruns_before` overruns), else a warning with the count.
pub fn loop_status(status: &mut Status, snapshot: &LoopStatus, overruns_before: u64) {
    let (level, message) = match snapshot.overruns.saturating_sub(overruns_before) {
        0 => (Level::Ok, "running".to_owned()),
        new => (Level::Warn, format!("running; {new} overruns in the last second")),
    };
    let values = vec![
        ("cycles", snapshot.cycles.to_string()),
        ("overruns", snapshot.overruns.to_string()),
        ("jitter_p50_us", format!("{:.0}", snapshot.jitter_p50_us)),
        ("jitter_p99_us", format!("{:.0}", snapshot.jitter_p99_us)),
        ("jitter_max_us", format!("{:.1}", snapshot.jitter_max_us)),
        ("rms_error_m", format!("{:.6}", snapshot.rms_error_m)),
        ("sensor_readings", snapshot.sensor_readings.to_string()),
        ("starved_cycles", snapshot.starved_cycles.to_string()),
    ];
    status.set(level, message, values);
}

/// Why a segment was not appended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SegmentError {
    #[error("point {index}: {reason}")]
    Point { index: usize, reason: String },
}

/// Turns a trajectory segment into samples timed from the segment's start, continuing from
/// `last` (the last position fed): each point's time_from_start must grow from zero, every value
/// must be finite and every point reachable. Each point needs one transform; velocities and
/// accelerations default to zero.
pub fn segment_after(points: &[MultiDofPoint], last: &Vec3, robot: &Robot) -> Result<Vec<Waypoint>, SegmentError> {
    let mut samples = Vec::with_capacity(points.len());
    let mut previous = (0.0, robot.inverse_kinematics(last, None).ok());
    for (index, point) in points.iter().enumerate() {
        let fail = |reason: String| SegmentError::Point { index, reason };
        let [translation] = point.translations.as_slice() else {
            return Err(fail(format!("{} transforms; one is expected", point.translations.len())));
        };
        let first_or_zero = |values: &[[f64; 3]]| values.first().map_or(Vec3::zeros(), |v| Vec3::from(*v));
        let sample = Waypoint {
            t: point.time_from_start_s,
            x: Vec3::from(*translation),
            xd: first_or_zero(&point.linear_velocities),
            xdd: first_or_zero(&point.linear_accelerations),
        };
        let finite = [sample.x, sample.xd, sample.xdd].iter().all(|v| v.iter().all(|c| c.is_finite()));
        if !(finite && sample.t.is_finite()) {
            return Err(fail("a value is not finite".into()));
        }
        if !(sample.t > previous.0) {
            return Err(fail(format!("time {} s is not after {} s", sample.t, previous.0)));
        }
        let theta =
            robot.inverse_kinematics(&sample.x, previous.1.as_ref()).map_err(|error| fail(error.to_string()))?;
        previous = (sample.t, Some(theta));
        samples.push(sample);
    }
    Ok(samples)
}

/// How far a goal's first waypoint may be from where the arm's reference holds [m]: the loop
/// does not jump to a goal, it starts it where the arm is.
pub const GOAL_START_TOLERANCE_M: f64 = 0.005;

/// What hil_node's feeder is asked.
#[derive(Debug, Clone)]
pub enum FeedRequest {
    /// A `~/trajectory` segment: it follows what is queued.
    Append(Vec<MultiDofPoint>),
    /// A goal: withdrawal `withdrawal` takes back what is queued, then the trajectory runs from
    /// its first waypoint, where the arm holds.
    Follow { trajectory: Arc<Trajectory>, withdrawal: u64 },
    /// Withdrawal `withdrawal` takes back what is queued; the arm holds where it is.
    Hold { withdrawal: u64 },
}

/// What hil_node sends the loop, in order: the initial trajectory, then segments and goals as
/// they are asked for. Pure: the feeding thread moves [`Feeder::front`] into the loop's feed as
/// it has room, and hands requests to [`Feeder::request`] as they come.
#[derive(Debug)]
pub struct Feeder {
    robot: Robot,
    queue: VecDeque<FeedItem>,
    /// The last position queued [m]: where a segment continues from.
    last: Vec3,
}

impl Feeder {
    /// Queues `initial`, run at its own times.
    pub fn new(initial: &Trajectory, robot: Robot) -> Feeder {
        let queue: VecDeque<FeedItem> = initial.waypoints().iter().map(|&sample| FeedItem::Sample(sample)).collect();
        let last = initial.waypoints().last().map_or(Vec3::zeros(), |last| last.x);
        Feeder { robot, queue, last }
    }

    /// The feeder of a loop that resumes holding where the arm is: nothing queued; segments
    /// continue from there.
    pub fn holding(mut self) -> Feeder {
        self.queue.clear();
        self
    }

    /// The next item for the loop.
    pub fn front(&self) -> Option<&FeedItem> {
        self.queue.front()
    }

    /// The loop took [`Feeder::front`].
    pub fn sent(&mut self) {
        self.queue.pop_front();
    }

    /// Acts on `request`; a segment that cannot be run is refused with the reason.
    pub fn request(&mut self, request: FeedRequest) -> Result<(), SegmentError> {
        match request {
            FeedRequest::Append(points) => {
                let samples = segment_after(&points, &self.last, &self.robot)?;
                self.queue.push_back(FeedItem::Segment);
                self.queue_samples(samples);
            }
            FeedRequest::Follow { trajectory, withdrawal } => {
                self.withdrawn(withdrawal);
                let waypoints = trajectory.waypoints();
                let start = waypoints[0].t;
                self.last = waypoints[0].x;
                // The first waypoint is where the arm holds (admitted within the tolerance), so
                // the hold stands for it.
                self.queue_samples(waypoints[1..].iter().map(|w| Waypoint { t: w.t - start, ..*w }));
            }
            FeedRequest::Hold { withdrawal } => self.withdrawn(withdrawal),
        }
        Ok(())
    }

    fn withdrawn(&mut self, withdrawal: u64) {
        self.queue.clear();
        self.queue.push_back(FeedItem::Withdrawn(withdrawal));
    }

    fn queue_samples(&mut self, samples: impl IntoIterator<Item = Waypoint>) {
        for sample in samples {
            self.last = sample.x;
            self.queue.push_back(FeedItem::Sample(sample));
        }
    }
}

/// How long the feeding thread waits for a request while the loop's feed is full.
const FULL_FEED_WAIT: Duration = Duration::from_millis(5);
/// How long it waits for a request with nothing to feed, between looks at its stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Runs `feeder` on the calling thread until the loop goes away or `stop` is set: items go into
/// `feed` as it has room, and requests are taken as they come, also while the feed is full (a
/// goal must not wait behind the samples it replaces). Refused segments are logged. Hands the
/// feeder and its requests back for the next loop.
pub fn run_feeder(
    mut feeder: Feeder,
    requests: Receiver<FeedRequest>,
    feed: SyncSender<FeedItem>,
    stop: &AtomicBool,
) -> (Feeder, Receiver<FeedRequest>) {
    while !stop.load(Ordering::Relaxed) {
        let request = match feeder.front() {
            Some(&item) => match feed.try_send(item) {
                Ok(()) => {
                    feeder.sent();
                    requests.try_recv().ok()
                }
                Err(TrySendError::Full(_)) => match requests.recv_timeout(FULL_FEED_WAIT) {
                    Ok(request) => Some(request),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(FULL_FEED_WAIT);
                        None
                    }
                },
                Err(TrySendError::Disconnected(_)) => break,
            },
            None => match requests.recv_timeout(IDLE_WAIT) {
                Ok(request) => Some(request),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
        };
        if let Some(request) = request {
            let segment = matches!(request, FeedRequest::Append(_));
            match feeder.request(request) {
                Ok(()) if segment => log::info!("~/trajectory: segment queued"),
                Ok(()) => {}
                Err(error) => log::error!("~/trajectory segment refused: {error}"),
            }
        }
    }
    (feeder, requests)
}

/// The goal hil_node serves, followed through the loop's frames: its run starts when the loop
/// has withdrawn what was queued before it, lasts the trajectory's duration, and ends early
/// when cancelled or replaced. `G` is the node's handle of the goal.
#[derive(Debug)]
pub struct HilGoals<G> {
    withdrawals: Arc<Withdrawals>,
    goal: Option<HilGoal<G>>,
    /// Where the arm's reference was at the latest frame [m].
    reference: Option<Vec3>,
}

#[derive(Debug)]
struct HilGoal<G> {
    handle: G,
    trajectory: Arc<Trajectory>,
    withdrawal: u64,
    cancel: Option<u64>,
    frames: u64,
    squared_error_sum: f64,
    max_error: f64,
}

impl<G> HilGoal<G> {
    /// The goal ended in `outcome`, completed (`failure` None) or not.
    fn finished(self, outcome: GoalOutcome, failure: Option<String>) -> GoalUpdate<G> {
        let rms_error = match self.frames {
            0 => 0.0,
            frames => (self.squared_error_sum / frames as f64).sqrt(),
        };
        let result = FollowCartesianTrajectoryResult::ended(rms_error, self.max_error, self.frames, failure);
        GoalUpdate::Finished(self.handle, outcome, result)
    }
}

impl<G> HilGoals<G> {
    /// Goals for the loop that takes withdrawals from `withdrawals`.
    pub fn new(withdrawals: Arc<Withdrawals>) -> HilGoals<G> {
        HilGoals { withdrawals, goal: None, reference: None }
    }
}

impl<G> GoalTracker<G> for HilGoals<G> {
    type Request = FeedRequest;

    /// A goal starts where the arm's reference holds: the loop never jumps to a goal.
    fn admit(&self, trajectory: &Trajectory) -> Result<(), String> {
        let Some(reference) = self.reference else { return Err("the HIL loop has not started yet".into()) };
        let first = trajectory.waypoints()[0].x;
        let distance = (first - reference).norm();
        match distance <= GOAL_START_TOLERANCE_M {
            true => Ok(()),
            false => Err(format!(
                "the first waypoint is {distance:.4} m from the arm's reference ({:.4}, {:.4}, {:.4}) m; a goal starts there (within {GOAL_START_TOLERANCE_M} m)",
                reference.x, reference.y, reference.z
            )),
        }
    }

    fn serve(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
    ) -> (FeedRequest, Option<(G, FollowCartesianTrajectoryResult)>) {
        let withdrawal = self.withdrawals.request();
        let goal = HilGoal {
            handle,
            trajectory: trajectory.clone(),
            withdrawal,
            cancel: None,
            frames: 0,
            squared_error_sum: 0.0,
            max_error: 0.0,
        };
        let replaced = self.goal.replace(goal).map(|goal| (goal.handle, replaced_result()));
        (FeedRequest::Follow { trajectory, withdrawal }, replaced)
    }

    fn cancel(&mut self) -> FeedRequest {
        let withdrawal = self.withdrawals.request();
        if let Some(goal) = &mut self.goal {
            goal.cancel = Some(withdrawal);
        }
        FeedRequest::Hold { withdrawal }
    }

    fn handle(&self) -> Option<&G> {
        self.goal.as_ref().map(|goal| &goal.handle)
    }
}

impl<G: Clone> HilGoals<G> {
    /// What the loop's `frame` means for the goal served, if anything: feedback while its run
    /// goes on, the result when it ends (complete, or cancelled once the loop holds).
    pub fn frame(&mut self, frame: &Frame) -> Option<GoalUpdate<G>> {
        self.reference = Some(frame.x_ref);
        let goal = self.goal.as_mut()?;
        let start = self.withdrawals.done_at(goal.withdrawal).filter(|&start| frame.t >= start)?;
        if goal.cancel.is_some_and(|cancel| self.withdrawals.done_at(cancel).is_some()) {
            return Some(self.goal.take()?.finished(GoalOutcome::Canceled, Some("cancelled".into())));
        }
        let error = frame.tracking_error().norm();
        goal.frames += 1;
        goal.squared_error_sum += error * error;
        goal.max_error = goal.max_error.max(error);
        let on_trajectory = Frame { t: goal.trajectory.start_time() + frame.t - start, ..*frame };
        if on_trajectory.t >= goal.trajectory.end_time() {
            return Some(self.goal.take()?.finished(GoalOutcome::Succeeded, None));
        }
        Some(GoalUpdate::Feedback(
            goal.handle.clone(),
            FollowCartesianTrajectoryFeedback::at(&goal.trajectory, &on_trajectory),
        ))
    }

    /// The loop stopped for `reason`: the goal served, if any, is aborted.
    /// Goals are refused until the next loop's first frame.
    pub fn loop_stopped(&mut self, reason: &str) -> Option<GoalUpdate<G>> {
        self.reference = None;
        Some(self.goal.take()?.finished(GoalOutcome::Aborted, Some(reason.to_owned())))
    }
}
