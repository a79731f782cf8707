//! sil_node without ROS: its parameters, and its run loop, which paces the simulator to the
//! real-time factor and hands samples at the publish rate to whoever publishes them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::joints::{arm_joint_state, JointStateData};
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::control::Trajectory;
use crate::model::Robot;
use crate::sim::{Frame, IdealPoint, IdealTorques, RunStats, SilConfig, SimError, Simulation};

/// sil_node's own parameters (the SIL configuration's sections sit beside them).
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
        trajectory: &'a Trajectory,
        ideal: &'a [IdealPoint],
    },
    Sample(&'a SilSample),
    /// A run ended, by reaching the end of its trajectory or by an error.
    RunEnded {
        stats: RunStats,
        error: Option<SimError>,
    },
}

/// Runs `first`, then every trajectory that arrives on `next` (a new one replaces the running
/// one at once), repeating when `settings.repeat`, until `stop` is set.
pub fn run_sil(
    robot: &Robot,
    config: &SilConfig,
    settings: &SilNodeSettings,
    first: Arc<Trajectory>,
    next: &Receiver<Arc<Trajectory>>,
    stop: &AtomicBool,
    sink: &mut dyn FnMut(SilEvent),
) {
    let period = 1.0 / settings.publish_rate_hz;
    let mut clock_offset = 0.0;
    let mut trajectory = first;
    'runs: while !stop.load(Ordering::Relaxed) {
        let ideal: Vec<IdealPoint> = IdealTorques::new(robot, &trajectory).map_while(Result::ok).collect();
        sink(SilEvent::RunStarted { trajectory: &trajectory, ideal: &ideal });
        let elbow = trajectory.elbow();
        let t0 = trajectory.start_time();
        let started = Instant::now();
        let mut next_sample = t0;
        let mut simulation = match Simulation::new(robot.clone(), trajectory.clone(), config) {
            Ok(simulation) => simulation,
            Err(error) => {
                sink(SilEvent::RunEnded { stats: RunStats::default(), error: Some(error) });
                break;
            }
        };
        let mut error = None;
        while let Some(frame) = simulation.next() {
            match next.try_recv() {
                Ok(replacement) => {
                    clock_offset += simulation.time() - t0;
                    sink(SilEvent::RunEnded { stats: simulation.stats().clone(), error: None });
                    trajectory = replacement;
                    continue 'runs;
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
                    error = Some(failure);
                    break;
                }
            };
            let last = frame.t >= trajectory.end_time();
            if frame.t < next_sample && !last {
                continue;
            }
            next_sample += period * ((frame.t - next_sample) / period).floor().max(0.0) + period;
            if settings.real_time_factor > 0.0 {
                let due = started + Duration::from_secs_f64((frame.t - t0) / settings.real_time_factor);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let joints = arm_joint_state(robot, &frame, &elbow);
            sink(SilEvent::Sample(&SilSample { clock_s: clock_offset + frame.t - t0, frame, joints }));
        }
        clock_offset += simulation.time() - t0;
        sink(SilEvent::RunEnded { stats: simulation.stats().clone(), error });
        if settings.repeat {
            continue;
        }
        // Idle until a new trajectory arrives.
        loop {
            match next.recv_timeout(Duration::from_millis(100)) {
                Ok(replacement) => {
                    trajectory = replacement;
                    continue 'runs;
                }
                Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {}
                Err(_) => return,
            }
        }
    }
}
