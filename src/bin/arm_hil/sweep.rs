//! `arm_hil sweep`: one trajectory over many sensor seeds and/or a grid of controller gains,
//! on every core, summarised as mean, p95 and worst per gain set.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use serde::Serialize;

use arm_hil::model::Robot;
use arm_hil::nodes::load_trajectory;
use arm_hil::sim::sweep::{run_sweep, summarise, sweep_cases, CaseResult, GroupSummary, Spread};

use crate::console;
use crate::sil::load_config;

#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// Trajectory CSV (default: the built-in arc)
    #[arg(long, value_name = "FILE.csv")]
    trajectory: Option<PathBuf>,
    /// YAML configuration, as for `arm_hil sil`: the base of every case
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    /// Number of sensor-noise seeds, counted up from the configuration's sensor.seed
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// Proportional gains to try [1/s^2] (default: the configuration's)
    #[arg(long, value_name = "KP,...", value_delimiter = ',')]
    kp: Vec<f64>,
    /// Derivative gains to try [1/s] (default: the configuration's)
    #[arg(long, value_name = "KD,...", value_delimiter = ',')]
    kd: Vec<f64>,
    /// Integral gains to try [1/s^3] (default: the configuration's)
    #[arg(long, value_name = "KI,...", value_delimiter = ',')]
    ki: Vec<f64>,
    /// Draw the distribution of RMS and max tracking error over the cases as SVG
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
    /// Print the cases and summaries as one JSON object on standard output
    #[arg(long)]
    json: bool,
}

/// The sweep's report; these keys are an interface (`--json`).
#[derive(Debug, Serialize)]
struct Report {
    cases: Vec<CaseResult>,
    groups: Vec<GroupSummary>,
    failed: usize,
    wall_time_s: f64,
    threads: usize,
}

pub(crate) fn run(args: SweepArgs) -> anyhow::Result<()> {
    let config = load_config(args.config.as_deref())?;
    let robot = Robot::new(config.robot.clone()).context("robot parameters")?;
    let trajectory = Arc::new(load_trajectory(args.trajectory.as_deref(), &robot)?);
    let or_configured = |values: Vec<f64>, configured: f64| if values.is_empty() { vec![configured] } else { values };
    let seeds: Vec<u64> = (0..args.seeds).map(|k| config.sensor.seed.wrapping_add(k)).collect();
    let cases = sweep_cases(
        &seeds,
        &or_configured(args.kp, config.controller.kp),
        &or_configured(args.kd, config.controller.kd),
        &or_configured(args.ki, config.controller.ki),
    );
    for case in &cases {
        case.config(&config).controller.validate().map_err(anyhow::Error::msg).context("--kp/--kd/--ki")?;
    }

    let progress = if std::io::stderr().is_terminal() {
        let style = ProgressStyle::with_template("{bar:40} {pos}/{len} runs, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        ProgressBar::new(cases.len() as u64).with_style(style)
    } else {
        ProgressBar::hidden()
    };
    let started = Instant::now();
    let results = run_sweep(&robot, &trajectory, &config, &cases, || progress.inc(1));
    let wall_time_s = started.elapsed().as_secs_f64();
    progress.finish_and_clear();

    let groups = summarise(&results);
    let failed = results.iter().filter(|result| result.failure.is_some()).count();
    for result in &results {
        if let Some(failure) = &result.failure {
            let (case, gains) = (&result.case, &result.case.gains);
            log::error!(
                "seed {} with kp {}, kd {}, ki {} stopped early: {failure}",
                case.seed,
                gains.kp,
                gains.kd,
                gains.ki
            );
        }
    }
    if let Some(path) = &args.svg {
        draw_distribution(path, &results).with_context(|| format!("cannot draw {}", path.display()))?;
    }
    let report = Report { cases: results, groups, failed, wall_time_s, threads: rayon::current_num_threads() };
    console::print_line(&report, || report.text(), args.json)?;
    anyhow::ensure!(failed == 0, "{failed} of {} runs stopped early", report.cases.len());
    Ok(())
}

impl Report {
    fn text(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "{:>6} {:>8} {:>8} {:>6} {:>9} {:>9} {:>11} {:>7}",
            "seed", "kp", "kd", "ki", "RMS mm", "max mm", "max|tau| Nm", "steps"
        );
        for result in &self.cases {
            let case = &result.case;
            let status = result.failure.as_ref().map_or("", |_| "  stopped early");
            let _ = writeln!(
                text,
                "{:>6} {:>8} {:>8} {:>6} {:>9.4} {:>9.4} {:>11.3} {:>7}{status}",
                case.seed,
                case.gains.kp,
                case.gains.kd,
                case.gains.ki,
                result.rms_error_m * 1e3,
                result.max_error_m * 1e3,
                result.max_torque_nm(),
                result.steps
            );
        }
        for group in &self.groups {
            let gains = &group.gains;
            let _ = writeln!(
                text,
                "\nkp {} kd {} ki {}: {} runs, {} stopped early\n{:>16} {:>9} {:>9} {:>9}",
                gains.kp, gains.kd, gains.ki, group.runs, group.failed, "", "mean", "p95", "worst"
            );
            let rows = [
                ("RMS [mm]", group.rms_error_m, 1e3),
                ("max [mm]", group.max_error_m, 1e3),
                ("max|tau| [N m]", group.max_torque_nm, 1.0),
            ];
            for (name, spread, scale) in rows {
                if let Some(Spread { mean, p95, worst }) = spread {
                    let _ =
                        writeln!(text, "{name:>16} {:>9.4} {:>9.4} {:>9.4}", mean * scale, p95 * scale, worst * scale);
                }
            }
        }
        let _ = write!(text, "\n{} runs in {:.2} s on {} threads", self.cases.len(), self.wall_time_s, self.threads);
        text
    }
}

/// Bins of each histogram.
const HISTOGRAM_BINS: usize = 20;

/// Histograms of the runs' RMS and max tracking error [mm], with the mean and p95 marked.
fn draw_distribution(path: &Path, results: &[CaseResult]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let completed = || results.iter().filter(|result| result.failure.is_none());
    let panels: [(&DrawingArea<SVGBackend, _>, &str, Vec<f64>); 2] = [
        (&top, "RMS tracking error per run", completed().map(|r| r.rms_error_m * 1e3).collect()),
        (&bottom, "Max tracking error per run", completed().map(|r| r.max_error_m * 1e3).collect()),
    ];
    for (area, caption, values) in panels {
        let Some(spread) = Spread::of(values.iter().copied()) else { continue };
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let width = ((spread.worst - low) / HISTOGRAM_BINS as f64).max(1e-6);
        let mut counts = [0u32; HISTOGRAM_BINS];
        for value in &values {
            counts[(((value - low) / width) as usize).min(HISTOGRAM_BINS - 1)] += 1;
        }
        let tallest = counts.iter().copied().max().unwrap_or(1);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{caption} ({} runs)", values.len()), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(low..low + width * HISTOGRAM_BINS as f64, 0u32..tallest + 1)?;
        chart.configure_mesh().x_desc("error [mm]").y_desc("runs").draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(bin, &count)| {
            let x0 = low + bin as f64 * width;
            Rectangle::new([(x0, 0), (x0 + width, count)], BLUE.mix(0.5).filled())
        }))?;
        for (label, value, colour) in [("mean", spread.mean, GREEN), ("p95", spread.p95, RED)] {
            chart
                .draw_series(LineSeries::new([(value, 0), (value, tallest + 1)], colour.stroke_width(2)))?
                .label(format!("{label} {value:.3} mm"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    root.present()?;
    Ok(())
}
