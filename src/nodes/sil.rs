//! sil_node without ROS: its parameters, and its run loop, which paces the simulator to the
//! real-time factor and hands samples at the publish rate to whoever publishes them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::diagnostics::{Level, Status};
use super::goals::{replaced_result, GoalOutcome, GoalTracker, GoalUpdate};
use super::joints::{arm_joint_state, JointStateData};
use super::msg::interfaces::{FollowCartesianTrajectoryFeedback, FollowCartesianTrajectoryResult};
use super::param_server::{ParamRange, ParamSpec};
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::control::Trajectory;
use crate::model::Robot;
use crate::sim::{Frame, IdealPoint, IdealTorques, RunStats, SilConfig, SimError, Simulation};

/// sil_node's own parameters (the SIL configuration's sections sit beside them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SilNodeSettings {
    /// Simulated seconds per wall-clock second; 0 runs as fast as possible. Default 1.
    pub real_time_factor: f64,
    /// Samples published per simulated second [Hz]. Default 250.
    pub publish_rate_hz: f64,
    /// Publish /clock from simulated time (and stamp messages with it). Default false.
    pub publish_clock: bool,
    /// Trajectory CSV run at start; empty runs the built-in arc. Default empty.
    pub trajectory_file: String,
    /// Start the trajectory again when it ends. Default false.
    #[serde(rename = "loop")]
    pub repeat: bool,
    /// Frame of every published point and path. Default base_link.
    pub frame_id: String,
}

impl Default for SilNodeSettings {
    fn default() -> Self {
        SilNodeSettings {
            real_time_factor: 1.0,
            publish_rate_hz: 250.0,
            publish_clock: false,
            trajectory_file: String::new(),
            repeat: false,
            frame_id: "base_link".into(),
        }
    }
}

/// How `ros2 param` sees sil_node's parameters: the pacing and publishing settings apply at
/// once; the simulation's sections and the start-up settings are read at start.
pub const SIL_NODE_PARAMS: [ParamSpec; 12] = [
    ParamSpec::runtime(
        "real_time_factor",
        "simulated seconds per wall-clock second; 0 runs as fast as possible",
        Some(ParamRange::Double { from: 0.0, to: 1000.0 }),
    ),
    ParamSpec::runtime(
        "publish_rate_hz",
        "samples published per simulated second [Hz]",
        Some(ParamRange::Double { from: 0.1, to: 10000.0 }),
    ),
    ParamSpec::runtime("loop", "start the trajectory again when it ends", None),
    ParamSpec::read_only("publish_clock", "publish /clock from simulated time (read at start)"),
    ParamSpec::read_only("trajectory_file", "trajectory CSV run at start; empty runs the built-in arc (read at start)"),
    ParamSpec::read_only("frame_id", "frame of every published point and path (read at start)"),
    ParamSpec::read_only("robot.", "robot model, SI units (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("controller.", "task-space PID and inverse dynamics (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("estimator.", "Kalman filter and range-bias estimator (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("sensor.", "simulated angle sensor (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only("integrator.", "adaptive Bogacki-Shampine integrator (read at start; see examples/sil.yaml)"),
    ParamSpec::read_only(
        "run.",
        "frame cap, divergence threshold and the frames' uniform grid frame_rate_hz (read at start; see examples/sil.yaml)",
    ),
];

impl SilNodeSettings {
    /// Applies a parameter set while the node runs (the names of [`SIL_NODE_PARAMS`] that are
    /// `runtime`); a value out of its domain is refused with the reason.
    pub fn apply(&mut self, name: &str, value: &ParamValue) -> Result<(), String> {
        match (name, value) {
            ("real_time_factor", ParamValue::Double(factor)) if *factor >= 0.0 => self.real_time_factor = *factor,
            ("publish_rate_hz", ParamValue::Double(rate)) if *rate > 0.0 => self.publish_rate_hz = *rate,
            ("loop", ParamValue::Bool(repeat)) => self.repeat = *repeat,
            ("real_time_factor", _) => return Err(format!("must be a number >= 0, got {value:?}")),
            ("publish_rate_hz", _) => return Err(format!("must be a number > 0, got {value:?}")),
            _ => return Err(format!("{name} is not applied while the node runs")),
        }
        Ok(())
    }
}

/// Reads sil_node's parameters: the SIL sections (`robot.*`, `controller.*`, ...) and the node's
/// own. Unknown names are refused, so a typo does not silently fall back to a default.
pub fn sil_node_config(params: &BTreeMap<String, ParamValue>) -> Result<(SilConfig, SilNodeSettings), ParamError> {
    let sil: SilConfig = read_group(&only_groups(params, &SilConfig::SECTIONS), "")?;
    sil.validate().map_err(|error| ParamError::Invalid { prefix: String::new(), message: error.to_string() })?;
    let settings: SilNodeSettings = read_group(&without_groups(params, &SilConfig::SECTIONS), "")?;
    if !(settings.real_time_factor >= 0.0 && settings.publish_rate_hz > 0.0) {
        return Err(ParamError::Invalid {
            prefix: String::new(),
            message: format!(
                "real_time_factor must be >= 0 and publish_rate_hz > 0, got {} and {}",
                settings.real_time_factor, settings.publish_rate_hz
            ),
        });
    }
    Ok((sil, settings))
}

/// One published sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SilSample {
    /// Simulated time since the node started, across runs and loops [s]: the /clock value.
    pub clock_s: f64,
    pub frame: Frame,
    pub joints: JointStateData,
}

/// What the run loop reports.
#[derive(Debug)]
pub enum SilEvent<'a> {
    /// A run begins: the trajectory and its ideal joint motion (for ~/reference_path, ~/ideal).
    RunStarted {
        trajectory: &'a Arc<Trajectory>,
        ideal: &'a [IdealPoint],
    },
    Sample(&'a SilSample),
    /// A run ended: how, and its figures.
    RunEnded {
        stats: RunStats,
        end: RunEnd,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// It reached the end of its trajectory.
    Complete,
    /// A new trajectory took its place.
    Replaced,
    /// [`RunRequest::Stop`] ended it.
    Stopped,
    Failed(SimError),
}

/// What the run loop is asked to do while the node runs.
#[derive(Debug, Clone)]
pub enum RunRequest {
    /// Run this trajectory now, in place of the running one.
    Follow(Arc<Trajectory>),
    /// End the running run; the simulation idles until the next trajectory.
    Stop,
}

/// sil_node's status once a run has ended: OK with the run's figures, or an error.
pub fn run_ended(status: &mut Status, stats: &RunStats, end: &RunEnd) {
    let (level, message) = match end {
        RunEnd::Complete => (Level::Ok, "run complete".to_owned()),
        RunEnd::Replaced => (Level::Ok, "run replaced by a new trajectory".to_owned()),
        RunEnd::Stopped => (Level::Ok, "run stopped on request".to_owned()),
        RunEnd::Failed(error) => (Level::Error, format!("run stopped: {error}")),
    };
    let values = vec![
        ("frames", stats.frames.to_string()),
        ("rms_error_m", format!("{:.6}", stats.rms_error_m())),
        ("max_error_m", format!("{:.6}", stats.max_error_m)),
        ("sim_time_s", format!("{:.3}", stats.sim_time_s)),
    ];
    status.set(level, message, values);
}

/// The settings the run loop reads as it goes.
#[derive(Debug, Clone, Copy)]
struct Pacing {
    real_time_factor: f64,
    publish_rate_hz: f64,
    repeat: bool,
}

impl Pacing {
    fn of(settings: &SilNodeSettings) -> Pacing {
        Pacing {
            real_time_factor: settings.real_time_factor,
            publish_rate_hz: settings.publish_rate_hz,
            repeat: settings.repeat,
        }
    }
}

/// Runs `first`, then every trajectory that `requests` asks for (a new one replaces the running
/// one at once; [`RunRequest::Stop`] ends it), repeating when `settings.repeat`, until `stop` is
/// set. `settings` is read as the run goes, so a parameter set while it runs takes effect at the
/// next frame.
pub fn run_sil(
    robot: &Robot,
    config: &SilConfig,
    settings: &Mutex<SilNodeSettings>,
    first: Arc<Trajectory>,
    requests: &Receiver<RunRequest>,
    stop: &AtomicBool,
    sink: &mut dyn FnMut(SilEvent),
) {
    let live = || {
        settings
            .lock()
            .map(|settings| Pacing::of(&settings))
            .unwrap_or_else(|_| Pacing::of(&SilNodeSettings::default()))
    };
    let mut clock_offset = 0.0;
    let mut trajectory = first;
    'runs: while !stop.load(Ordering::Relaxed) {
        let ideal: Vec<IdealPoint> = IdealTorques::new(robot, &trajectory).map_while(Result::ok).collect();
        sink(SilEvent::RunStarted { trajectory: &trajectory, ideal: &ideal });
        let elbow = trajectory.elbow();
        let t0 = trajectory.start_time();
        // Frame time `anchor_t` was due at wall time `anchor`; pacing restarts from the current
        // frame whenever the real-time factor changes.
        let (mut anchor, mut anchor_t, mut factor) = (Instant::now(), t0, live().real_time_factor);
        let mut next_sample = t0;
        let mut simulation = match Simulation::new(robot.clone(), trajectory.clone(), config) {
            Ok(simulation) => simulation,
            Err(error) => {
                sink(SilEvent::RunEnded { stats: RunStats::default(), end: RunEnd::Failed(error) });
                break;
            }
        };
        let mut end = RunEnd::Complete;
        while let Some(frame) = simulation.next() {
            match requests.try_recv() {
                Ok(request) => {
                    clock_offset += simulation.time() - t0;
                    let (end, next) = match request {
                        RunRequest::Follow(replacement) => (RunEnd::Replaced, Some(replacement)),
                        RunRequest::Stop => (RunEnd::Stopped, None),
                    };
                    sink(SilEvent::RunEnded { stats: simulation.stats().clone(), end });
                    match next.or_else(|| idle(requests, stop)) {
                        Some(next) => {
                            trajectory = next;
                            continue 'runs;
                        }
                        None => return,
                    }
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return,
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let frame = match frame {
                Ok(frame) => frame,
                Err(failure) => {
                    end = RunEnd::Failed(failure);
                    break;
                }
            };
            let last = frame.t >= trajectory.end_time();
            if frame.t < next_sample && !last {
                continue;
            }
            let now = live();
            let period = 1.0 / now.publish_rate_hz;
            next_sample += period * ((frame.t - next_sample) / period).floor().max(0.0) + period;
            if now.real_time_factor != factor {
                (anchor, anchor_t, factor) = (Instant::now(), frame.t, now.real_time_factor);
            }
            if now.real_time_factor > 0.0 {
                let due = anchor + Duration::from_secs_f64((frame.t - anchor_t) / factor);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let joints = arm_joint_state(robot, &frame, &elbow);
            sink(SilEvent::Sample(&SilSample { clock_s: clock_offset + frame.t - t0, frame, joints }));
        }
        clock_offset += simulation.time() - t0;
        sink(SilEvent::RunEnded { stats: simulation.stats().clone(), end });
        if live().repeat {
            continue;
        }
        match idle(requests, stop) {
            Some(next) => trajectory = next,
            None => return,
        }
    }
}

/// Waits for the next trajectory to run (a Stop while idle changes nothing); None once `stop`
/// is set or the requests' sender is gone.
fn idle(requests: &Receiver<RunRequest>, stop: &AtomicBool) -> Option<Arc<Trajectory>> {
    loop {
        match requests.recv_timeout(Duration::from_millis(100)) {
            Ok(RunRequest::Follow(next)) => return Some(next),
            Ok(RunRequest::Stop) => {}
            Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {}
            Err(_) => return None,
        }
    }
}

/// The FollowCartesianTrajectory goal a node serves, followed through its run loop's events:
/// the goal's run is the one that starts its trajectory (the same `Arc`); its samples become
/// feedback and its end the result. `G` is the node's handle of the goal.
#[derive(Debug)]
pub struct GoalRuns<G> {
    goal: Option<ServedGoal<G>>,
}

#[derive(Debug)]
struct ServedGoal<G> {
    handle: G,
    trajectory: Arc<Trajectory>,
    running: bool,
}

impl<G> Default for GoalRuns<G> {
    fn default() -> Self {
        GoalRuns { goal: None }
    }
}

impl<G> GoalTracker<G> for GoalRuns<G> {
    type Request = RunRequest;

    /// The simulation starts any trajectory afresh.
    fn admit(&self, _: &Trajectory) -> Result<(), String> {
        Ok(())
    }

    fn serve(
        &mut self,
        handle: G,
        trajectory: Arc<Trajectory>,
    ) -> (RunRequest, Option<(G, FollowCartesianTrajectoryResult)>) {
        let request = RunRequest::Follow(trajectory.clone());
        let replaced = self.goal.replace(ServedGoal { handle, trajectory, running: false });
        (request, replaced.map(|goal| (goal.handle, replaced_result())))
    }

    fn cancel(&mut self) -> RunRequest {
        RunRequest::Stop
    }

    fn handle(&self) -> Option<&G> {
        self.goal.as_ref().map(|goal| &goal.handle)
    }
}

impl<G: Clone> GoalRuns<G> {
    /// What `event` means for the goal served, if anything.
    pub fn update(&mut self, event: &SilEvent) -> Option<GoalUpdate<G>> {
        let goal = self.goal.as_mut()?;
        match event {
            SilEvent::RunStarted { trajectory, .. } => {
                goal.running = Arc::ptr_eq(trajectory, &goal.trajectory);
                None
            }
            SilEvent::Sample(sample) if goal.running => Some(GoalUpdate::Feedback(
                goal.handle.clone(),
                FollowCartesianTrajectoryFeedback::at(&goal.trajectory, &sample.frame),
            )),
            SilEvent::RunEnded { stats, end } if goal.running => {
                let (outcome, failure) = match end {
                    RunEnd::Complete => (GoalOutcome::Succeeded, None),
                    RunEnd::Replaced => (GoalOutcome::Aborted, Some("replaced by a new trajectory".to_owned())),
                    RunEnd::Stopped => (GoalOutcome::Canceled, Some("cancelled".to_owned())),
                    RunEnd::Failed(error) => (GoalOutcome::Aborted, Some(error.to_string())),
                };
                let handle = self.goal.take()?.handle;
                Some(GoalUpdate::Finished(handle, outcome, FollowCartesianTrajectoryResult::of_run(stats, failure)))
            }
            SilEvent::Sample(_) | SilEvent::RunEnded { .. } => None,
        }
    }
}
