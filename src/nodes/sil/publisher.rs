//! What sil_node publishes, and when: the arm's topics from each frame at the publish rate
//! (the run's last frame always), a run's reference path and ideal joint motion as it starts,
//! /clock where asked for, and the run's status on /diagnostics once a second and at once when
//! it changes. The r2r node and `arm_hil sil --bag/--live` only feed it [`SilEvent`]s.

use std::time::Duration;

use super::run::{RunEnd, SilEvent};
use super::SilNodeSettings;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::robot_state::Urdf;
use crate::nodes::status::{Level, Status};
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::nodes::Decimator;
use crate::outputs::{Outputs, Publisher, Sink, SinkError};
use crate::sim::{IdealTorques, RunStats};

/// sil_node's status on /diagnostics: its name and hardware id.
pub const STATUS_NAME: &str = "sil_node: run";
const HARDWARE_ID: &str = "sil";

/// The run being published.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Where the run's forearm pivots [m].
    elbow: Vec3,
    /// The trajectory's end [s]: the frame there is always published.
    end_time: f64,
}

/// sil_node's publisher.
#[derive(Debug)]
pub struct SilPublisher {
    arm: ArmTopics,
    /// Stamps on simulated time (with /clock), else on the caller's clock.
    simulated_time: bool,
    samples: Decimator,
    rate_hz: f64,
    run: Option<Run>,
    diagnostics: Diagnostics,
    /// Simulated time at the latest frame [ns].
    clock_ns: u64,
}

/// Simulated seconds as a stamp [ns].
fn clock_ns(clock_s: f64) -> u64 {
    Duration::from_secs_f64(clock_s.max(0.0)).as_nanos() as u64
}

impl SilPublisher {
    /// Advertises sil_node's topics as `settings` have them (frame, /clock, publish rate); with
    /// `robot_state`, robot_state_publisher's too (where none runs beside: a bag, a live view),
    /// their latched messages published at `start_ns`.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        robot: Robot,
        settings: &SilNodeSettings,
        robot_state: Option<&Urdf>,
        start_ns: u64,
    ) -> Result<SilPublisher, SinkError> {
        let set = ArmTopicSet { clock: settings.publish_clock, ..ArmTopicSet::SIL_NODE };
        let mut arm = ArmTopics::advertise(out, robot, set, &settings.frame_id, robot_state)?;
        let diagnostics = Diagnostics::advertise(out, Status::new(STATUS_NAME, HARDWARE_ID))?;
        // Every topic is advertised before anything is published.
        arm.start(out, start_ns)?;
        Ok(SilPublisher {
            arm,
            simulated_time: settings.publish_clock,
            samples: Decimator::new(settings.publish_rate_hz),
            rate_hz: settings.publish_rate_hz,
            run: None,
            diagnostics,
            clock_ns: 0,
        })
    }

    /// Publishes what `event` (None: the passing of time) makes due; `now_ns` is the caller's
    /// clock, which stamps everything unless the node publishes simulated time (a frame: less
    /// how late it came). True when a sample of the arm went out (a goal's feedback goes with it).
    pub fn publish<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        now_ns: u64,
        event: Option<&SilEvent>,
    ) -> Result<bool, SinkError> {
        if let Some(SilEvent::Frame { clock_s, .. }) = event {
            self.clock_ns = clock_ns(*clock_s);
        }
        let stamp = if self.simulated_time { self.clock_ns } else { now_ns };
        let mut sampled = false;
        match event {
            Some(SilEvent::RunStarted(trajectory)) => {
                self.run = Some(Run { elbow: trajectory.elbow(), end_time: trajectory.end_time() });
                self.samples = Decimator::new(self.rate_hz);
                let ideal: Vec<_> = IdealTorques::new(self.arm.robot(), trajectory).map_while(Result::ok).collect();
                self.arm.run_started(out, stamp, trajectory, &ideal)?;
                let waypoints = trajectory.waypoints().len().to_string();
                self.diagnostics.set(|status| status.set(Level::Ok, "running", vec![("waypoints", waypoints)]));
            }
            Some(SilEvent::Frame { frame, publish_rate_hz, late_ns, .. }) => {
                if *publish_rate_hz != self.rate_hz {
                    self.rate_hz = *publish_rate_hz;
                    self.samples = Decimator::new(self.rate_hz);
                }
                let run = self.run.unwrap_or(Run { elbow: self.arm.robot().elbow(), end_time: f64::INFINITY });
                if self.samples.due(frame.t) || frame.t >= run.end_time {
                    let due = if self.simulated_time { stamp } else { stamp.saturating_sub(*late_ns) };
                    self.arm.sample(out, due, frame, &run.elbow)?;
                    sampled = true;
                }
            }
            Some(SilEvent::RunEnded { stats, end }) => {
                self.run = None;
                self.diagnostics.set(|status| run_ended(status, stats, end));
            }
            Some(SilEvent::Refused(reason)) => self.diagnostics.set(|status| {
                status.level = Level::Warn;
                status.message = format!("~/trajectory refused: {reason}");
            }),
            None => {}
        }
        self.diagnostics.publish_due(out, stamp)?;
        Ok(sampled)
    }
}

impl Publisher for SilPublisher {
    type Event = SilEvent;

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&SilEvent>,
    ) -> Result<(), SinkError> {
        self.publish(out, time_ns, event).map(drop)
    }
}

/// sil_node's status once a run has ended: OK with the run's figures, or an error.
fn run_ended(status: &mut Status, stats: &RunStats, end: &RunEnd) {
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
