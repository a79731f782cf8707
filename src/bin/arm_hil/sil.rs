//! `arm_hil sil`: one SIL run from a trajectory CSV (or the built-in arc) to a summary, with
//! optional frame, ideal-torque and plot outputs. Frames are streamed, never kept.

use std::fs::File;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use arm_hil::control::Trajectory;
use arm_hil::model::Robot;
use arm_hil::nodes::load_trajectory;
use arm_hil::nodes::robot_state::{Urdf, ARM_URDF};
use arm_hil::nodes::sil::publisher::SilPublisher;
use arm_hil::nodes::sil::run::{RunEnd, SilEvent};
use arm_hil::nodes::sil::{SilNodeSettings, NODE};
use arm_hil::sim::{Frame, IdealPoint, IdealTorques, RunStats, SilConfig, SimError, Simulation};

use crate::config;
use crate::console;
use crate::outputs::{finish_publisher, OutputArgs, RateArg, RunPublisher};
use crate::plot::PlotRecorder;

#[derive(Debug, Args)]
pub(crate) struct SilArgs {
    /// Trajectory CSV with header t,x,y,z,xd,yd,zd,xdd,ydd,zdd (default: the built-in arc)
    #[arg(long, value_name = "FILE.csv")]
    trajectory: Option<PathBuf>,
    /// YAML configuration: robot, controller, estimator, sensor, integrator, run sections
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    /// Write every frame as CSV
    #[arg(long, value_name = "OUT.csv")]
    frames: Option<PathBuf>,
    /// Write the ideal joint trajectory and torques per waypoint as CSV
    #[arg(long, value_name = "OUT.csv")]
    ideal: Option<PathBuf>,
    /// Draw tracking error and joint torques over time as SVG
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    /// Frames on a uniform time grid of this rate, interpolated inside the integrator's steps
    /// [default: one frame per accepted step, or the file's run.frame_rate_hz]
    #[arg(long, value_name = "HZ")]
    frame_rate: Option<f64>,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    rate: crate::outputs::RateArg,
    /// Simulated seconds per wall-clock second; 0 runs as fast as possible [default: 1 with
    /// --live, so a person can watch, else 0]
    #[arg(long, value_name = "X")]
    real_time_factor: Option<f64>,
    #[command(flatten)]
    json: crate::outputs::JsonArg,
}

/// The run summary; these keys are an interface (`--json`).
#[derive(Debug, Serialize)]
struct Summary {
    steps: u64,
    rejected_steps: u64,
    frames: u64,
    sim_time_s: f64,
    wall_time_s: f64,
    rtf: f64,
    rms_error_m: f64,
    max_error_m: f64,
    max_abs_tau: [f64; 3],
    capped: bool,
    ik_fallbacks: u64,
    waypoints: usize,
    peak_rss_kib: Option<i64>,
}

impl Summary {
    fn new(stats: &RunStats, wall_time_s: f64, waypoints: usize) -> Summary {
        Summary {
            steps: stats.steps,
            rejected_steps: stats.rejected_steps,
            frames: stats.frames,
            sim_time_s: stats.sim_time_s,
            wall_time_s,
            rtf: stats.sim_time_s / wall_time_s,
            rms_error_m: stats.rms_error_m(),
            max_error_m: stats.max_error_m,
            max_abs_tau: stats.max_abs_tau.into(),
            capped: stats.capped,
            ik_fallbacks: stats.ik_fallbacks,
            waypoints,
            peak_rss_kib: peak_rss_kib(),
        }
    }

    fn text(&self) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        let _ = writeln!(text, "steps            {} accepted, {} rejected", self.steps, self.rejected_steps);
        let _ =
            writeln!(text, "frames           {}{}", self.frames, if self.capped { " (frame cap reached)" } else { "" });
        let _ = writeln!(
            text,
            "simulated time   {:.3} s in {:.3} s wall (real-time factor {:.1})",
            self.sim_time_s, self.wall_time_s, self.rtf
        );
        let _ = writeln!(
            text,
            "tracking error   RMS {:.3} mm, max {:.3} mm",
            self.rms_error_m * 1e3,
            self.max_error_m * 1e3
        );
        let [t1, t2, t3] = self.max_abs_tau;
        let _ = writeln!(text, "max |tau|        {t1:.3}, {t2:.3}, {t3:.3} N m");
        if let Some(kib) = self.peak_rss_kib {
            let _ = writeln!(text, "peak memory      {:.1} MiB", kib as f64 / 1024.0);
        }
        text.trim_end().to_owned()
    }
}

/// Peak resident set size of this process [KiB], where the OS reports it.
fn peak_rss_kib() -> Option<i64> {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).ok().map(|usage| usage.max_rss())
}

/// Loads a configuration file with the SIL sections only, or the defaults without one.
pub(crate) fn load_config(path: Option<&Path>) -> anyhow::Result<SilConfig> {
    config::load::<config::NoSections>(path).map(|(sil, _)| sil)
}

#[derive(Debug, Serialize)]
struct FrameRow {
    t: f64,
    x: f64,
    y: f64,
    z: f64,
    xd: f64,
    yd: f64,
    zd: f64,
    theta1: f64,
    theta2: f64,
    theta3: f64,
    theta1_dot: f64,
    theta2_dot: f64,
    theta3_dot: f64,
    tau1: f64,
    tau2: f64,
    tau3: f64,
    x_ref: f64,
    y_ref: f64,
    z_ref: f64,
}

impl From<&Frame> for FrameRow {
    fn from(f: &Frame) -> FrameRow {
        FrameRow {
            t: f.t,
            x: f.x.x,
            y: f.x.y,
            z: f.x.z,
            xd: f.x_dot.x,
            yd: f.x_dot.y,
            zd: f.x_dot.z,
            theta1: f.theta.x,
            theta2: f.theta.y,
            theta3: f.theta.z,
            theta1_dot: f.theta_dot.x,
            theta2_dot: f.theta_dot.y,
            theta3_dot: f.theta_dot.z,
            tau1: f.tau.x,
            tau2: f.tau.y,
            tau3: f.tau.z,
            x_ref: f.x_ref.x,
            y_ref: f.x_ref.y,
            z_ref: f.x_ref.z,
        }
    }
}

#[derive(Debug, Serialize)]
struct IdealRow {
    t: f64,
    theta1: f64,
    theta2: f64,
    theta3: f64,
    theta1_dot: f64,
    theta2_dot: f64,
    theta3_dot: f64,
    tau1: f64,
    tau2: f64,
    tau3: f64,
}

impl From<&IdealPoint> for IdealRow {
    fn from(p: &IdealPoint) -> IdealRow {
        IdealRow {
            t: p.t,
            theta1: p.theta.x,
            theta2: p.theta.y,
            theta3: p.theta.z,
            theta1_dot: p.theta_dot.x,
            theta2_dot: p.theta_dot.y,
            theta3_dot: p.theta_dot.z,
            tau1: p.tau.x,
            tau2: p.tau.y,
            tau3: p.tau.z,
        }
    }
}

fn csv_writer(path: &Path) -> anyhow::Result<csv::Writer<BufWriter<File>>> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(csv::Writer::from_writer(BufWriter::new(file)))
}

/// The run published as sil_node publishes it, into a bag and/or a live view, on simulated time
/// from zero (the node's /clock), with robot_state_publisher's topics beside.
struct SilOutputs {
    publisher: RunPublisher<SilEvent>,
    start_time: f64,
    publish_rate_hz: f64,
}

impl SilOutputs {
    /// The run's publisher, where `outputs` asks for a bag or a live view, sampling at `rate`.
    fn start(
        outputs: &OutputArgs,
        robot: &Robot,
        trajectory: &Arc<Trajectory>,
        rate: &RateArg,
    ) -> anyhow::Result<Option<SilOutputs>> {
        if !outputs.wanted() {
            return Ok(None);
        }
        let rate_hz = rate.hz()?;
        let urdf = Urdf::parse(ARM_URDF).context("urdf/arm_hil.urdf")?;
        let settings = SilNodeSettings { publish_rate_hz: rate_hz, publish_clock: true, ..SilNodeSettings::default() };
        let robot = robot.clone();
        let publisher =
            outputs.start_publisher(NODE, move |out| SilPublisher::advertise(out, robot, &settings, Some(&urdf), 0))?;
        let Some(mut publisher) = publisher else { return Ok(None) };
        publisher.event(0, SilEvent::RunStarted(trajectory.clone()));
        publisher.flush();
        Ok(Some(SilOutputs { publisher, start_time: trajectory.start_time(), publish_rate_hz: rate_hz }))
    }

    fn frame(&mut self, frame: &Frame) {
        let clock_s = frame.t - self.start_time;
        let event = SilEvent::Frame { frame: *frame, clock_s, publish_rate_hz: self.publish_rate_hz, late_ns: 0 };
        // Stamps are the publisher's: simulated time.
        self.publisher.event(0, event);
    }

    fn finish(mut self, stats: &RunStats, error: Option<&SimError>) -> anyhow::Result<()> {
        let end = error.map_or(RunEnd::Complete, |error| RunEnd::Failed(error.clone()));
        self.publisher.event(0, SilEvent::RunEnded { stats: stats.clone(), end });
        finish_publisher(self.publisher, 0)
    }
}

/// A progress bar over simulated milliseconds, drawn only when stderr is a terminal.
fn progress_bar(trajectory: &Trajectory) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let total_ms = ((trajectory.end_time() - trajectory.start_time()) * 1e3).ceil() as u64;
    let style = ProgressStyle::with_template("{bar:40} {pos}/{len} ms simulated, {per_sec}, eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total_ms).with_style(style)
}

pub(crate) fn run(args: SilArgs) -> anyhow::Result<()> {
    let mut config = load_config(args.config.as_deref())?;
    if let Some(rate_hz) = args.frame_rate {
        config.run.frame_rate_hz = rate_hz;
        config.validate().context("--frame-rate")?;
    }
    let robot = Robot::new(config.robot.clone()).context("robot parameters")?;
    let trajectory = Arc::new(load_trajectory(args.trajectory.as_deref(), &robot)?);
    let mut frames_out = args.frames.as_deref().map(csv_writer).transpose()?;
    let mut plot = args.plot.as_ref().map(|_| PlotRecorder::new());
    let progress = progress_bar(&trajectory);
    let mut simulation = Simulation::new(robot.clone(), trajectory.clone(), &config)?;
    let real_time_factor = args.real_time_factor.unwrap_or(if args.outputs.live.wanted() { 1.0 } else { 0.0 });
    anyhow::ensure!(
        real_time_factor >= 0.0 && real_time_factor.is_finite(),
        "--real-time-factor must be 0 or more, got {real_time_factor}"
    );
    let mut outputs = SilOutputs::start(&args.outputs, &robot, &trajectory, &args.rate)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let on_signal = interrupted.clone();
    ctrlc::set_handler(move || on_signal.store(true, Ordering::Relaxed)).context("cannot handle Ctrl-C")?;

    let started = Instant::now();
    let mut failure = None;
    while let Some(frame) = simulation.next() {
        let frame = match frame {
            Ok(frame) => frame,
            Err(error) => {
                failure = Some(error);
                break;
            }
        };
        if interrupted.load(Ordering::Relaxed) {
            log::warn!("interrupted at {:.3} s simulated", frame.t);
            break;
        }
        if real_time_factor > 0.0 {
            let due = Duration::from_secs_f64((frame.t - trajectory.start_time()).max(0.0) / real_time_factor);
            std::thread::sleep((started + due).saturating_duration_since(Instant::now()));
        }
        if let Some(outputs) = &mut outputs {
            outputs.frame(&frame);
        }
        if let Some(writer) = &mut frames_out {
            writer.serialize(FrameRow::from(&frame)).context("cannot write a frame")?;
        }
        if let Some(plot) = &mut plot {
            plot.record(&frame);
        }
        if simulation.stats().frames % 4096 == 0 {
            progress.set_position(((frame.t - trajectory.start_time()) * 1e3) as u64);
        }
    }
    let wall_time_s = started.elapsed().as_secs_f64();
    progress.finish_and_clear();
    if let Some(mut writer) = frames_out {
        writer.flush().context("cannot write the frames")?;
    }

    if let Some(path) = &args.ideal {
        let mut writer = csv_writer(path)?;
        for point in IdealTorques::new(&robot, &trajectory) {
            writer.serialize(IdealRow::from(&point?)).context("cannot write an ideal point")?;
        }
        writer.flush().context("cannot write the ideal torques")?;
    }
    if let (Some(path), Some(plot)) = (&args.plot, &plot) {
        plot.draw(path).with_context(|| format!("cannot draw {}", path.display()))?;
    }

    if let Some(outputs) = outputs {
        outputs.finish(simulation.stats(), failure.as_ref())?;
    }
    let summary = Summary::new(simulation.stats(), wall_time_s, trajectory.waypoints().len());
    console::print_line(&summary, || summary.text(), args.json.json)?;
    match failure {
        Some(error) => Err(error).context("the simulation stopped early"),
        None => Ok(()),
    }
}
