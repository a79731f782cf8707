//! The fixed-rate HIL loop: read, estimate, control, write, once per period, on its own thread.
//!
//! Deadlines are absolute (start + k period), so the loop does not drift; a cycle that ends after
//! the next deadline is an overrun, and whole periods missed are skipped rather than caught up.
//! Everything the cycle touches is allocated before the first cycle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::exit;
use super::fault_injection::FaultInjection;
use super::feed::{FeedItem, Intake, Withdrawals};
use super::protection::{estimate_out_of_reach, CycleView, Protection, ProtectionConfig, Trip};
use super::realtime;
use super::ring::{RingSample, TrajectoryRing, RING_CAPACITY};
use super::stats::{LoopStats, LoopStatus};
use super::{ActuatorCommand, Hardware, HardwareError, SensorInput};
use crate::control::{Estimate, Estimator, ReadingRejected, Reference, TaskSpaceController, Waypoint};
use crate::model::math::Vec3;
use crate::model::{ModelError, Robot};
use crate::sim::{Frame, SilConfig};

/// Loop settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HilConfig {
    /// Loop rate [Hz]. Default 1000.
    pub rate_hz: f64,
    /// Longest the sensor may stay silent before a safe stop [s]. Default 0.1.
    pub sensor_timeout_s: f64,
    /// Longest wait for the first reading and the first trajectory sample [s]. Default 2.
    pub startup_timeout_s: f64,
    /// SCHED_FIFO priority of the loop thread; null for normal scheduling. Default 50.
    pub realtime_priority: Option<i32>,
    /// Samples ahead below which the ring buffer reports low water. Default 500.
    pub low_water: usize,
    /// Hand every n-th cycle's frame to the frame sink. Default 1.
    pub frame_every: u32,
    /// Farthest a sensor reading may put the arm from where the estimator predicts it, and its
    /// range from the forearm's length [m]: a reading farther off is one the rig cannot
    /// produce (a garbled line), rejected and counted. Default 0.02 (the arm cannot move 2 cm
    /// between two readings; the noise is a fraction of a millimetre).
    pub reading_gate_m: f64,
    /// Readings rejected in a row that end the run as a fault. Default 25 (0.1 s of the
    /// sensor's 250 Hz).
    pub max_rejected_readings: u32,
    /// The protective stop's bounds.
    pub protection: ProtectionConfig,
}

impl Default for HilConfig {
    fn default() -> Self {
        HilConfig {
            rate_hz: 1000.0,
            sensor_timeout_s: 0.1,
            startup_timeout_s: 2.0,
            realtime_priority: Some(realtime::LOOP_PRIORITY),
            low_water: 500,
            frame_every: 1,
            reading_gate_m: 0.02,
            max_rejected_readings: 25,
            protection: ProtectionConfig::default(),
        }
    }
}

impl HilConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("rate_hz", self.rate_hz),
            ("sensor_timeout_s", self.sensor_timeout_s),
            ("startup_timeout_s", self.startup_timeout_s),
            ("reading_gate_m", self.reading_gate_m),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("hil.{name} must be finite and > 0, got {value}"));
            }
        }
        if self.frame_every == 0 || self.max_rejected_readings == 0 || self.low_water > RING_CAPACITY {
            return Err(format!(
                "hil.frame_every and max_rejected_readings must be > 0 and hil.low_water <= {RING_CAPACITY}, got {}, {} and {}",
                self.frame_every, self.max_rejected_readings, self.low_water
            ));
        }
        self.protection.validate()
    }
}

/// Where the loop hands its frames. `offer` must not block: a frame that cannot be taken is
/// dropped and counted.
pub trait FrameSink: Send {
    /// Returns false when the frame was not taken.
    fn offer(&mut self, frame: &Frame) -> bool;
}

/// A frame of the loop, and when the loop handed it over [ns, [`realtime::monotonic_ns`]]: what
/// is published of it is stamped with that time, however late the publishing thread takes it.
/// `loop_number` says which of a node's loops it is of ([`FrameChannel::new`]).
#[derive(Debug, Clone, Copy)]
pub struct TakenFrame {
    pub frame: Frame,
    pub taken_ns: u64,
    pub loop_number: u64,
}

impl TakenFrame {
    /// How long ago the loop handed it over [ns].
    pub fn age_ns(&self) -> u64 {
        realtime::monotonic_ns().saturating_sub(self.taken_ns)
    }
}

/// Frames into a bounded channel for another thread: the loop drops a frame that does not fit
/// rather than wait.
#[derive(Debug)]
pub struct FrameChannel {
    frames: std::sync::mpsc::SyncSender<TakenFrame>,
    loop_number: u64,
}

impl FrameChannel {
    /// Frames into `frames`, each marked as loop `loop_number`'s: a node whose loops take turns
    /// on one channel tells a stopped loop's frames, still in it, from the next loop's.
    pub fn new(frames: std::sync::mpsc::SyncSender<TakenFrame>, loop_number: u64) -> FrameChannel {
        FrameChannel { frames, loop_number }
    }
}

impl FrameSink for FrameChannel {
    fn offer(&mut self, frame: &Frame) -> bool {
        let taken = TakenFrame { frame: *frame, taken_ns: realtime::monotonic_ns(), loop_number: self.loop_number };
        self.frames.try_send(taken).is_ok()
    }
}

/// Why the loop stopped before the trajectory ended. The loop always ends with a safe stop.
#[derive(Debug, thiserror::Error)]
pub enum HilError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("no trajectory sample arrived within {0:?}")]
    NoTrajectory(Duration),
    #[error("trajectory sample refused: {0}")]
    BadSample(#[from] super::RingError),
    #[error("sensor lost at t = {t:.3} s: no reading for {silent_s:.3} s")]
    SensorLost { t: f64, silent_s: f64 },
    #[error("sensor reading at t = {t:.3} s is not finite")]
    NonFiniteReading { t: f64 },
    #[error("{count} sensor readings in a row the rig cannot produce, the last at t = {t:.3} s: {last}")]
    ImplausibleReadings { t: f64, count: u32, last: ReadingRejected },
    #[error("controller output at t = {t:.3} s is not finite")]
    NonFiniteTorque { t: f64 },
    #[error("hardware failed at t = {t:.3} s: {error}")]
    Hardware { t: f64, error: HardwareError },
    #[error("control failed at t = {t:.3} s: {error}")]
    Control { t: f64, error: ModelError },
    #[error("protective stop at t = {t:.3} s: {trip}")]
    ProtectiveStop { t: f64, trip: Trip },
}

impl HilError {
    /// The bound that tripped, when the loop ended in a protective stop.
    pub fn protective_stop(&self) -> Option<&Trip> {
        match self {
            HilError::ProtectiveStop { trip, .. } => Some(trip),
            _ => None,
        }
    }
}

/// How a run ended, and its statistics.
#[derive(Debug)]
pub struct HilReport {
    pub stats: LoopStats,
    /// Loop time covered [s].
    pub duration_s: f64,
    /// Ok when the trajectory ended, the duration elapsed or a stop was requested.
    pub outcome: Result<(), HilError>,
}

/// Where a run's reference starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// At the feed's first sample, which the run waits for.
    FirstSample,
    /// Where the first sensor reading puts the arm, held there until the feed moves it.
    WhereTheArmIs,
}

/// A HIL run ready to start; [`HilLoop::run`] blocks the calling thread for the whole run.
pub struct HilLoop {
    config: HilConfig,
    robot: Robot,
    controller: TaskSpaceController,
    estimator: Estimator,
    hardware: Box<dyn Hardware>,
    intake: Intake,
    frames: Option<Box<dyn FrameSink>>,
    status: Option<Arc<std::sync::Mutex<LoopStatus>>>,
    stop: Arc<AtomicBool>,
    max_duration_s: Option<f64>,
    start: Start,
    protection: Protection,
}

impl HilLoop {
    /// `sil` supplies the robot, controller and estimator settings; `elbow` [m] and `l_arm` [m]
    /// are the forearm's. `stop` ends the run (with a safe stop) when set, as does the process
    /// being asked to end ([`exit::requested`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: HilConfig,
        sil: &SilConfig,
        elbow: Vec3,
        l_arm: f64,
        hardware: Box<dyn Hardware>,
        feed: Receiver<FeedItem>,
        stop: Arc<AtomicBool>,
    ) -> Result<HilLoop, HilError> {
        config.validate().map_err(HilError::Config)?;
        sil.validate().map_err(|error| HilError::Config(error.to_string()))?;
        // Made here, not by the loop's first cycle: the flag is allocated the first time it is read.
        exit::requested();
        let robot = Robot::new(sil.robot.clone()).map_err(|error| HilError::Config(error.to_string()))?;
        let sigma_m = l_arm * sil.sensor.quantum_rad;
        Ok(HilLoop {
            estimator: Estimator::new(sil.estimator.clone(), elbow, l_arm, sigma_m),
            controller: TaskSpaceController::new(sil.controller.clone()),
            protection: Protection::new(config.protection.clone()),
            config,
            robot,
            hardware,
            intake: Intake::new(feed),
            frames: None,
            status: None,
            stop,
            max_duration_s: None,
            start: Start::FirstSample,
        })
    }

    /// Hands frames (estimated state, commanded torque) to `sink` while running.
    pub fn with_frames(mut self, sink: Box<dyn FrameSink>) -> HilLoop {
        self.frames = Some(sink);
        self
    }

    /// Keeps `status` up to date while running.
    pub fn with_status(mut self, status: Arc<std::sync::Mutex<LoopStatus>>) -> HilLoop {
        self.status = Some(status);
        self
    }

    /// Takes withdrawals from `withdrawals` (see [`Withdrawals`]) while running.
    pub fn with_withdrawals(mut self, withdrawals: Arc<Withdrawals>) -> HilLoop {
        self.intake = self.intake.with_withdrawals(withdrawals);
        self
    }

    /// Starts its reference where the first sensor reading puts the arm rather than at the
    /// feed's first sample, and holds it there until the feed moves it: a run that resumes after
    /// a stop starts from where the arm is, with no jump. The feed's samples count from then.
    pub fn starting_where_the_arm_is(mut self) -> HilLoop {
        self.start = Start::WhereTheArmIs;
        self
    }

    /// Ends the run after `seconds` of loop time.
    pub fn with_max_duration(mut self, seconds: f64) -> HilLoop {
        self.max_duration_s = Some(seconds);
        self
    }

    /// Runs to the end of the trajectory, the duration, a stop request or a fault, then stops
    /// the hardware safely.
    pub fn run(self) -> HilReport {
        self.run_and_release().0
    }

    /// [`HilLoop::run`], then hands the hardware back, stopped, for another run.
    pub fn run_and_release(mut self) -> (HilReport, Box<dyn Hardware>) {
        let mut stats = LoopStats::new(self.config.rate_hz);
        stats.error_from_truth = self.hardware.true_position().is_some();
        let mut ring = TrajectoryRing::new(RING_CAPACITY, self.config.low_water);
        for problem in realtime::prepare_thread(self.config.realtime_priority) {
            log::warn!("HIL loop runs without {problem}: expect more jitter");
        }
        self.hardware.begin();
        let startup = Duration::from_secs_f64(self.config.startup_timeout_s);
        let outcome = match self.start {
            Start::WhereTheArmIs => self.cycle_until_done(&mut ring, &mut stats),
            Start::FirstSample => match self.intake.first_sample(startup, || self.asked_to_stop()) {
                Some(first) => match ring.push(first) {
                    Ok(()) => self.cycle_until_done(&mut ring, &mut stats),
                    Err(error) => (Err(error.into()), 0.0),
                },
                // A feed that ends because the run was stopped meanwhile is no fault.
                None if self.asked_to_stop() => (Ok(()), 0.0),
                None => (Err(HilError::NoTrajectory(startup)), 0.0),
            },
        };
        self.hardware.stop();
        (HilReport { stats, duration_s: outcome.1, outcome: outcome.0 }, self.hardware)
    }

    /// The run was asked to end: its stop was set, or the process was asked to end (a signal, a
    /// panic), which stops the run here, in the loop's own thread, whatever the thread that
    /// handles it is busy with. Acquire: a feeder that ended on the stop (and so ended the feed)
    /// was told after it was set.
    fn asked_to_stop(&self) -> bool {
        self.stop.load(Ordering::Acquire) || exit::requested()
    }

    /// The loop proper. Returns the outcome and the loop time covered [s].
    fn cycle_until_done(&mut self, ring: &mut TrajectoryRing, stats: &mut LoopStats) -> (Result<(), HilError>, f64) {
        let period = 1.0 / self.config.rate_hz;
        let period_span = realtime::from_seconds(period);
        // Loop time since the last cycle [s]: a period, or more after skipped ones. The
        // estimator and the drives account for the time that really passed.
        let mut step = period;
        let start_time = ring.first_time().unwrap_or(0.0);
        let start = realtime::now();
        let mut deadline = start;
        let mut input = SensorInput::default();
        let mut command = ActuatorCommand::default();
        let mut task_acceleration = Vec3::zeros();
        let mut last_reading_at = 0.0;
        let mut was_low = false;
        let mut seen_reading = false;
        let mut rejected_in_row = 0;
        // The newest reading refused since the last one taken, and when [s]: when the silence
        // timer fires while readings still arrive (the last refused within half the timeout),
        // they are the fault, not silence (at 250 Hz, 25 refusals take as long as the 0.1 s
        // timeout, and either check can come first). A torn last line before real silence is
        // still a lost sensor.
        let mut last_rejected: Option<(ReadingRejected, f64)> = None;
        // Until the arm's start is known, the feed waits: its samples count from there.
        let mut awaiting_arm = self.start == Start::WhereTheArmIs;
        let injected = FaultInjection::for_this_thread();
        // A stop asked for before the first cycle (a first sample still queued, a resume asked
        // to end at once) wins: nothing is written to the rig.
        if self.asked_to_stop() {
            return (Ok(()), 0.0);
        }
        loop {
            realtime::sleep_until(&deadline);
            injected.check();
            let lateness_us = realtime::seconds(realtime::now() - deadline) * 1e6;
            stats.record_lateness(lateness_us);
            let now = realtime::seconds(deadline - start);
            let trajectory_time = start_time + now;
            stats.cycles += 1;

            if !awaiting_arm {
                self.intake.withdraw(ring, trajectory_time);
                if let Err(error) = self.intake.fill(ring, trajectory_time, realtime::nanoseconds(deadline)) {
                    return (Err(error.into()), now);
                }
            }
            if ring.is_low() && !was_low {
                stats.low_water_events += 1;
            }
            was_low = ring.is_low();

            input.reading = None;
            if let Err(error) = self.hardware.read(now, step, &mut input) {
                return (Err(HilError::Hardware { t: now, error }), now);
            }
            let estimate = match input.reading {
                Some(reading) => {
                    if ![reading.r, reading.theta, reading.phi].iter().all(|value| value.is_finite()) {
                        return (Err(HilError::NonFiniteReading { t: now }), now);
                    }
                    match self.estimator.gated_update(&reading, step, &task_acceleration, self.config.reading_gate_m) {
                        Ok(estimate) => {
                            (rejected_in_row, last_rejected, last_reading_at, seen_reading) = (0, None, now, true);
                            stats.sensor_readings += 1;
                            Some(estimate)
                        }
                        Err(last) => {
                            stats.rejected_readings += 1;
                            rejected_in_row += 1;
                            last_rejected = Some((last, now));
                            if rejected_in_row >= self.config.max_rejected_readings {
                                return (
                                    Err(HilError::ImplausibleReadings { t: now, count: rejected_in_row, last }),
                                    now,
                                );
                            }
                            self.estimator.predict(step, &task_acceleration)
                        }
                    }
                }
                None => self.estimator.predict(step, &task_acceleration),
            };
            if let (true, Some(estimate)) = (awaiting_arm, &estimate) {
                awaiting_arm = false;
                if let Err(error) = ring
                    .begin_segment(trajectory_time)
                    .and_then(|()| ring.push(Waypoint { t: 0.0, x: estimate.x, ..Waypoint::default() }))
                {
                    return (Err(error.into()), now);
                }
            }
            let timeout = if seen_reading { self.config.sensor_timeout_s } else { self.config.startup_timeout_s };
            if now - last_reading_at > timeout {
                let error = match last_rejected {
                    Some((last, at)) if now - at <= timeout / 2.0 => {
                        HilError::ImplausibleReadings { t: at, count: rejected_in_row, last }
                    }
                    _ => HilError::SensorLost { t: now, silent_s: now - last_reading_at },
                };
                return (Err(error), now);
            }

            let reference = match ring.sample(trajectory_time) {
                RingSample::Ended => return (Ok(()), now),
                RingSample::Reference(reference) => Some(reference),
                RingSample::Starved(reference) => {
                    stats.starved_cycles += 1;
                    Some(reference)
                }
                RingSample::Empty => None,
            };
            command = match (estimate, reference) {
                (Some(estimate), Some(reference)) => {
                    let output = match self.controller.update(&self.robot, &reference, &estimate, step) {
                        Ok(output) => output,
                        Err(error) => return (Err(HilError::Control { t: now, error }), now),
                    };
                    if !output.tau.iter().all(|tau| tau.is_finite()) {
                        return (Err(HilError::NonFiniteTorque { t: now }), now);
                    }
                    stats.ik_fallbacks += u64::from(output.used_fallback);
                    task_acceleration = output.task_acceleration;
                    let (theta, theta_dot) = match self.controller.last_motion() {
                        Some(motion) => (Some(motion.theta), Some(motion.theta_dot)),
                        None => (None, None),
                    };
                    self.record_tracking(stats, &estimate, &reference.x, step);
                    self.offer_frame(stats, trajectory_time, &estimate, &reference, &output.tau);
                    // The command that would follow a tripped bound is never written; an estimate
                    // the inverse kinematics cannot place leaves no motion to check: it trips too.
                    let tripped = match output.used_fallback {
                        true => Some(estimate_out_of_reach(&self.robot, &estimate.x, &self.config.protection)),
                        false => self.protect(stats, &reference.x),
                    };
                    if let Some(trip) = tripped {
                        return (Err(HilError::ProtectiveStop { t: now, trip }), now);
                    }
                    ActuatorCommand { tau: output.tau, theta, theta_dot }
                }
                // Before the first reading there is nothing to control from: hold zero torque.
                _ => ActuatorCommand { tau: Vec3::zeros(), ..command },
            };
            if let Err(error) = self.hardware.write(now, step, &command) {
                return (Err(HilError::Hardware { t: now, error }), now);
            }

            if stats.cycles % (self.config.rate_hz as u64).max(1) == 0 {
                // Never wait for a reader: a busy snapshot is refreshed next second.
                if let Some(mut status) = self.status.as_ref().and_then(|status| status.try_lock().ok()) {
                    *status = stats.status();
                }
            }
            if self.asked_to_stop() || self.max_duration_s.is_some_and(|limit| now + period > limit) {
                return (Ok(()), now);
            }
            deadline = deadline + period_span;
            step = period;
            let finished = realtime::now();
            if finished > deadline {
                let late = realtime::seconds(finished - deadline);
                stats.overruns += 1;
                stats.longest_overrun_us = stats.longest_overrun_us.max(late * 1e6);
                let missed = (late / period).floor() as u64;
                stats.skipped_periods += missed;
                for _ in 0..missed {
                    deadline = deadline + period_span;
                }
                step = period * (missed + 1) as f64;
            }
        }
    }

    /// The protective stop's bounds on this cycle's estimate (docs/hil.md).
    fn protect(&mut self, stats: &mut LoopStats, reference: &Vec3) -> Option<Trip> {
        let motion = self.controller.last_motion()?;
        let lag = self.hardware.electrical_lag();
        if let Some(lag) = lag {
            stats.max_lag_rad = stats.max_lag_rad.max(lag.amax());
        }
        self.protection.check(&self.robot, &CycleView { motion, reference, lag })
    }

    fn record_tracking(&self, stats: &mut LoopStats, estimate: &Estimate, reference: &Vec3, period: f64) {
        let position = self.hardware.true_position().unwrap_or(estimate.x);
        let error = (position - reference).norm();
        stats.record_error(error, period);
    }

    fn offer_frame(&mut self, stats: &mut LoopStats, t: f64, estimate: &Estimate, reference: &Reference, tau: &Vec3) {
        let Some(sink) = self.frames.as_mut() else { return };
        if stats.cycles % u64::from(self.config.frame_every) != 0 {
            return;
        }
        let (theta, theta_dot) = self
            .controller
            .last_motion()
            .map_or((Vec3::zeros(), Vec3::zeros()), |motion| (motion.theta, motion.theta_dot));
        let frame = Frame {
            t,
            x: estimate.x,
            x_dot: estimate.v,
            theta,
            theta_dot,
            tau: *tau,
            x_ref: reference.x,
            xd_ref: reference.xd,
        };
        if !sink.offer(&frame) {
            stats.frames_dropped += 1;
        }
    }
}
