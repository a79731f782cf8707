//! `arm_hil hil`: the 1 kHz HIL loop against the simulated plant or the lab's rig.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use arm_hil::control::{Trajectory, Waypoint};
use arm_hil::drivers::robotscara::RigConfig;
use arm_hil::drivers::{open_hardware, RigDevices, RigKind, RigSettings};
use arm_hil::hil::exit;
use arm_hil::hil::protection::Trip;
use arm_hil::hil::stepper::StepperConfig;
use arm_hil::hil::{
    feed_trajectory, FeedItem, FrameChannel, HilConfig, HilError, HilLoop, HilReport, LoopStatus, TakenFrame,
    FEED_DEPTH,
};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::hil::publisher::{loop_failure, publish_loop, HilEvent, HilPublisher};
use arm_hil::nodes::hil::{HilNodeSettings, NODE};
use arm_hil::nodes::load_trajectory;
use arm_hil::nodes::robot_state::{Urdf, ARM_URDF};
use arm_hil::nodes::status::Level;
use arm_hil::outputs::wall_clock_ns;
use arm_hil::protocol::rig::parse_trajectory_line;

use crate::config;
use crate::console;
use crate::outputs::{finish_publisher, OutputArgs, RateArg, RunPublisher};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// The simulated plant and sensor, stepped in real time: HIL without hardware.
    Sim,
    /// The lab's rig (docs/rig.md): angle sensor and step-driver Arduino on serial ports.
    Robotscara,
}

impl Backend {
    pub(crate) fn kind(self) -> RigKind {
        match self {
            Backend::Sim => RigKind::Sim,
            Backend::Robotscara => RigKind::Robotscara,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct HilArgs {
    /// Hardware behind the loop
    #[arg(long, value_enum, default_value = "sim")]
    hardware: Backend,
    /// Angle sensor serial device (robotscara)
    #[arg(long, value_name = "DEV", default_value = "/dev/ttyUSB0")]
    sensor: String,
    /// Step-driver Arduino serial device, or `auto` to find it by USB id (robotscara)
    #[arg(long, value_name = "DEV|auto", default_value = "auto")]
    arduino: String,
    /// Trajectory CSV (header t,x,y,z,xd,yd,zd,xdd,ydd,zdd), or `-` for `P,t,x,y,z,xd,yd,zd,xdd,ydd,zdd`
    /// lines streamed on stdin (default: the built-in arc)
    #[arg(long, value_name = "FILE|-")]
    trajectory: Option<PathBuf>,
    /// Stop after this many seconds of loop time
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// YAML configuration: the sections of `arm_hil sil --config` plus `hil`, `stepper` and `rig`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    rate: crate::outputs::RateArg,
    #[command(flatten)]
    json: crate::outputs::JsonArg,
}

/// Publishes the loop as hil_node publishes it into the bag and the live view `outputs` asks
/// for (None: neither), sampled at `rate` of loop time, on wall-clock time, with robot_state_publisher's topics beside, from
/// the loop's `frames` and figures (`status`) until the loop ends and drops its end of `frames`.
fn publish_hil(
    outputs: &OutputArgs,
    robot: &Robot,
    rate: &RateArg,
    hardware: &str,
    frames: Receiver<TakenFrame>,
    status: Arc<Mutex<LoopStatus>>,
) -> anyhow::Result<Option<HilPublishing>> {
    if !outputs.wanted() {
        return Ok(None);
    }
    let rate_hz = rate.hz()?;
    let urdf = Urdf::parse(ARM_URDF).context("urdf/arm_hil.urdf")?;
    let (robot, hardware, start_ns) = (robot.clone(), hardware.to_owned(), wall_clock_ns());
    let frame_id = HilNodeSettings::default().frame_id;
    let publisher = outputs.start_publisher(NODE, move |out| {
        HilPublisher::advertise(out, robot, &frame_id, rate_hz, &hardware, Some(&urdf), start_ns)
    })?;
    let Some(mut publisher) = publisher else { return Ok(None) };
    publisher.event(start_ns, HilEvent::LoopStarted);
    let thread = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let figures = || status.lock().map(|status| *status).unwrap_or_default();
        publish_loop(&frames, &AtomicBool::new(false), figures, |event| {
            publisher.event(wall_clock_ns(), event);
        });
        publisher
    });
    Ok(Some(HilPublishing { thread: thread.context("cannot start the publishing thread")? }))
}

/// The publishing thread of a run.
struct HilPublishing {
    thread: JoinHandle<RunPublisher<HilEvent>>,
}

impl HilPublishing {
    /// The loop has ended with `outcome`: its last word, then the bag and the live view are
    /// finished (a failure there is logged: the run's own outcome is what the command reports).
    fn finish(self, outcome: &Result<(), HilError>) -> anyhow::Result<()> {
        let mut publisher = self.thread.join().map_err(|_| anyhow::anyhow!("the publishing thread panicked"))?;
        if let Err(error) = outcome {
            publisher.event(wall_clock_ns(), HilEvent::Status(Level::Error, loop_failure(error)));
        }
        if let Err(error) = finish_publisher(publisher, wall_clock_ns()) {
            log::error!("{error:#}");
        }
        Ok(())
    }
}

/// The sections of `hil` beside the SIL ones.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HilSections {
    #[serde(default)]
    pub(crate) hil: HilConfig,
    #[serde(default)]
    pub(crate) stepper: StepperConfig,
    #[serde(default)]
    pub(crate) rig: RigConfig,
}

impl config::Sections for HilSections {
    const KEYS: &'static [&'static str] = &["hil", "stepper", "rig"];
}

/// The result; these keys are an interface (`--json`).
#[derive(Debug, Serialize)]
struct Summary {
    rate_hz: f64,
    cycles: u64,
    overruns: u64,
    jitter_p50_us: f64,
    jitter_p99_us: f64,
    jitter_max_us: f64,
    rms_error_m: f64,
    max_error_m: f64,
    longest_overrun_us: f64,
    skipped_periods: u64,
    duration_s: f64,
    sensor_readings: u64,
    /// Readings the rig cannot produce, rejected by the estimator's gate.
    rejected_readings: u64,
    starved_cycles: u64,
    ik_fallbacks: u64,
    error_from_truth: bool,
    /// The largest electrical lag of a stepper drive [rad] (0 without steppers).
    max_lag_rad: f64,
    /// The estimator's process noise the run used, `estimator.sigma_a` [m/s^2]: on
    /// `--hardware robotscara` the rig's measured setting, unless `--config` sets it.
    estimator_sigma_a_m_s2: f64,
    /// "ok", "protective_stop", or why the run failed.
    outcome: String,
    /// The bound that tripped, when `outcome` is "protective_stop".
    #[serde(skip_serializing_if = "Option::is_none")]
    protective_stop: Option<ProtectiveStop>,
}

/// Where and why the protective stop came.
#[derive(Debug, Serialize)]
struct ProtectiveStop {
    t: f64,
    #[serde(flatten)]
    trip: Trip,
    reason: String,
}

impl Summary {
    fn new(report: &HilReport, sigma_a: f64) -> Summary {
        let stats = &report.stats;
        Summary {
            rate_hz: stats.rate_hz,
            cycles: stats.cycles,
            overruns: stats.overruns,
            jitter_p50_us: stats.jitter_quantile_us(0.5),
            jitter_p99_us: stats.jitter_quantile_us(0.99),
            jitter_max_us: stats.jitter_max_us,
            rms_error_m: stats.rms_error_m(),
            max_error_m: stats.max_error_m,
            longest_overrun_us: stats.longest_overrun_us,
            skipped_periods: stats.skipped_periods,
            duration_s: report.duration_s,
            sensor_readings: stats.sensor_readings,
            rejected_readings: stats.rejected_readings,
            starved_cycles: stats.starved_cycles,
            ik_fallbacks: stats.ik_fallbacks,
            error_from_truth: stats.error_from_truth,
            max_lag_rad: stats.max_lag_rad,
            estimator_sigma_a_m_s2: sigma_a,
            outcome: match &report.outcome {
                Ok(()) => "ok".to_owned(),
                Err(HilError::ProtectiveStop { .. }) => "protective_stop".to_owned(),
                Err(error) => error.to_string(),
            },
            protective_stop: match &report.outcome {
                Err(error @ HilError::ProtectiveStop { t, trip }) => {
                    Some(ProtectiveStop { t: *t, trip: *trip, reason: error.to_string() })
                }
                _ => None,
            },
        }
    }

    fn text(&self) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        let _ = writeln!(text, "cycles           {} at {} Hz over {:.3} s", self.cycles, self.rate_hz, self.duration_s);
        let _ = writeln!(
            text,
            "period jitter    p50 {:.0} us, p99 {:.0} us, max {:.1} us",
            self.jitter_p50_us, self.jitter_p99_us, self.jitter_max_us
        );
        let _ = writeln!(
            text,
            "overruns         {} (longest {:.1} us, {} periods skipped)",
            self.overruns, self.longest_overrun_us, self.skipped_periods
        );
        let against = if self.error_from_truth { "true position" } else { "estimate" };
        let _ = writeln!(
            text,
            "tracking error   RMS {:.3} mm, max {:.3} mm ({against})",
            self.rms_error_m * 1e3,
            self.max_error_m * 1e3
        );
        match &self.protective_stop {
            Some(stop) => {
                let _ = writeln!(text, "outcome          {}", stop.reason);
            }
            None => {
                let _ = writeln!(text, "outcome          {}", self.outcome);
            }
        }
        text.trim_end().to_owned()
    }
}

/// Where trajectory samples come from.
enum Source {
    Validated(Trajectory),
    Stdin,
}

fn open_source(path: Option<&Path>, robot: &Robot) -> anyhow::Result<Source> {
    match path {
        Some(path) if path == Path::new("-") => Ok(Source::Stdin),
        file => Ok(Source::Validated(load_trajectory(file, robot)?)),
    }
}

/// Reads `P,...` lines from stdin until the first usable one. Bad lines are logged and skipped.
struct StdinSamples {
    robot: Robot,
    line_number: usize,
    previous: Option<(f64, Vec3)>,
}

impl StdinSamples {
    fn next_sample(&mut self, lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Option<Waypoint> {
        for line in lines {
            self.line_number += 1;
            let line = match line {
                Ok(line) => line,
                Err(error) => {
                    log::error!("stdin: {error}");
                    return None;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let sample = match parse_trajectory_line(&line) {
                Ok(sample) => sample,
                Err(error) => {
                    log::warn!("stdin line {}: refused: {error}", self.line_number);
                    continue;
                }
            };
            if let Some((previous_t, _)) = self.previous {
                if !(sample.t > previous_t) {
                    log::warn!(
                        "stdin line {}: refused: t = {} s is not after {} s",
                        self.line_number,
                        sample.t,
                        previous_t
                    );
                    continue;
                }
            }
            match self.robot.inverse_kinematics(&sample.x, self.previous.as_ref().map(|(_, theta)| theta)) {
                Ok(theta) => self.previous = Some((sample.t, theta)),
                Err(error) => {
                    log::warn!("stdin line {}: refused: {error}", self.line_number);
                    continue;
                }
            }
            return Some(sample);
        }
        None
    }
}

/// Starts the thread that feeds the loop; returns the feed and the first sample.
fn start_feed(source: Source, robot: &Robot) -> anyhow::Result<(Receiver<FeedItem>, Waypoint)> {
    match source {
        Source::Validated(trajectory) => {
            let first = trajectory.waypoints()[0];
            Ok((feed_trajectory(Arc::new(trajectory)), first))
        }
        Source::Stdin => {
            let mut samples = StdinSamples { robot: robot.clone(), line_number: 0, previous: None };
            let mut lines = std::io::stdin().lock().lines();
            let first = samples.next_sample(&mut lines).context("stdin ended before the first usable P line")?;
            let (feed, received) = sync_channel(FEED_DEPTH);
            std::thread::spawn(move || {
                let mut lines = std::io::stdin().lock().lines();
                let mut next = Some(first);
                while let Some(sample) = next {
                    if feed.send(FeedItem::Sample(sample)).is_err() {
                        return;
                    }
                    next = samples.next_sample(&mut lines);
                }
                let _ = feed.send(FeedItem::End);
            });
            Ok((received, first))
        }
    }
}

pub(crate) fn run(args: HilArgs) -> anyhow::Result<()> {
    let kind = args.hardware.kind();
    let (sil, sections) = config::load_over::<HilSections>(args.config.as_deref(), kind.measured_defaults())?;
    let robot = Robot::new(sil.robot.clone()).context("robot parameters")?;
    let hardware_name = format!("{:?}", args.hardware).to_lowercase();
    log::info!("hardware {hardware_name}: the estimator's sigma_a {} m/s^2", sil.estimator.sigma_a);
    let source = open_source(args.trajectory.as_deref(), &robot)?;
    let (samples, first) = start_feed(source, &robot)?;
    let devices = RigDevices { sensor: args.sensor.clone(), arduino: args.arduino.clone() };
    let settings = RigSettings { stepper: sections.stepper.clone(), rig: sections.rig.clone() };
    let hardware = open_hardware(kind, &devices, &settings, &sil, &first, robot.elbow())?;
    // A signal ends the run, with the loop's safe stop (main handles them: exit::handle_signals).
    let stop = exit::requested_flag();
    let mut hil =
        HilLoop::new(sections.hil.clone(), &sil, robot.elbow(), robot.params().l_arm, hardware, samples, stop)?;
    if let Some(duration) = args.duration {
        hil = hil.with_max_duration(duration);
    }
    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let publishing = publish_hil(&args.outputs, &robot, &args.rate, &hardware_name, frames, status.clone())?;
    if publishing.is_some() {
        hil = hil.with_frames(Box::new(FrameChannel::new(frames_tx, 1))).with_status(status);
    }
    let report = std::thread::Builder::new()
        .name("hil-loop".into())
        .spawn(move || hil.run())
        .context("cannot start the loop thread")?
        .join()
        .map_err(|_| anyhow::anyhow!("the loop thread panicked"))?;
    if let Some(publishing) = publishing {
        publishing.finish(&report.outcome)?;
    }
    let summary = Summary::new(&report, sil.estimator.sigma_a);
    console::print_line(&summary, || summary.text(), args.json.json)?;
    report.outcome.context("the HIL run stopped")
}
