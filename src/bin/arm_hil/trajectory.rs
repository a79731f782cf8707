//! `arm_hil trajectory ...`: trajectory generators.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::figure_eight::FigureEightSpec;
use arm_hil::control::trajectory_csv::write_waypoints;
use arm_hil::control::Waypoint;
use arm_hil::model::math::Vec3;

use crate::sil::load_config;

#[derive(Debug, Subcommand)]
pub(crate) enum TrajectoryCommand {
    /// The lab's GUI's test motion: a great-circle arc on the forearm sphere, 100 waypoints
    /// per degree, trapezoidal angular speed. Writes trajectory CSV.
    Arc(ArcArgs),
    /// A figure eight on the forearm sphere: a 1:2 Lissajous curve in the spherical angles
    /// about a centre direction, from rest to rest. Writes trajectory CSV.
    FigureEight(FigureEightArgs),
}

/// Where a generated trajectory goes.
#[derive(Debug, Args)]
pub(crate) struct Output {
    /// Robot YAML whose elbow and l_arm define the sphere (default: the lab's robot)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output CSV (default: standard output)
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ArcArgs {
    /// Start direction seen from the elbow: polar angle from +z, azimuth from +x [deg] [default: 70,-140]
    #[arg(long, value_name = "THETA,PHI", value_parser = parse_direction, allow_hyphen_values = true)]
    from: Option<[f64; 2]>,
    /// End direction [deg] [default: 70,-90]
    #[arg(long, value_name = "THETA,PHI", value_parser = parse_direction, allow_hyphen_values = true)]
    to: Option<[f64; 2]>,
    /// Peak angular speed [deg/s] [default: 5]
    #[arg(long, value_name = "DEG_PER_S")]
    max_speed: Option<f64>,
    /// Angular acceleration [deg/s^2] [default: 10]
    #[arg(long, value_name = "DEG_PER_S2")]
    max_accel: Option<f64>,
    #[command(flatten)]
    output: Output,
}

#[derive(Debug, Args)]
pub(crate) struct FigureEightArgs {
    /// Centre direction seen from the elbow: polar angle from +z, azimuth from +x [deg] [default: 70,-115]
    #[arg(long, value_name = "THETA,PHI", value_parser = parse_direction, allow_hyphen_values = true)]
    centre: Option<[f64; 2]>,
    /// Half-widths in polar angle and azimuth [deg] [default: 5,15]
    #[arg(long, value_name = "A,B", value_parser = parse_direction)]
    amplitude: Option<[f64; 2]>,
    /// Peak rate of the curve parameter, 2 pi per loop [rad/s] [default: 0.5]
    #[arg(long, value_name = "RAD_PER_S")]
    max_rate: Option<f64>,
    /// Its acceleration [rad/s^2] [default: 0.5]
    #[arg(long, value_name = "RAD_PER_S2")]
    max_accel: Option<f64>,
    #[command(flatten)]
    output: Output,
}

pub(crate) fn run(command: TrajectoryCommand) -> anyhow::Result<()> {
    match command {
        TrajectoryCommand::Arc(args) => {
            let defaults = ArcSpec::default();
            let spec = ArcSpec {
                from_deg: args.from.unwrap_or(defaults.from_deg),
                to_deg: args.to.unwrap_or(defaults.to_deg),
                max_speed_deg_s: args.max_speed.unwrap_or(defaults.max_speed_deg_s),
                max_accel_deg_s2: args.max_accel.unwrap_or(defaults.max_accel_deg_s2),
                ..defaults
            };
            write(&args.output, "arc", |elbow, l_arm| Ok(spec.waypoints(elbow, l_arm)?))
        }
        TrajectoryCommand::FigureEight(args) => {
            let defaults = FigureEightSpec::default();
            let spec = FigureEightSpec {
                centre_deg: args.centre.unwrap_or(defaults.centre_deg),
                amplitude_deg: args.amplitude.unwrap_or(defaults.amplitude_deg),
                max_rate_rad_s: args.max_rate.unwrap_or(defaults.max_rate_rad_s),
                max_accel_rad_s2: args.max_accel.unwrap_or(defaults.max_accel_rad_s2),
                ..defaults
            };
            write(&args.output, "figure eight", |elbow, l_arm| Ok(spec.waypoints(elbow, l_arm)?))
        }
    }
}

/// Generates the waypoints on the configured robot's forearm sphere (elbow [m], l_arm [m])
/// and writes them as trajectory CSV.
fn write(
    output: &Output,
    what: &str,
    generate: impl FnOnce(&Vec3, f64) -> anyhow::Result<Vec<Waypoint>>,
) -> anyhow::Result<()> {
    let config = load_config(output.config.as_deref())?;
    let waypoints = generate(&Vec3::from(config.robot.elbow), config.robot.l_arm)?;
    let out: Box<dyn Write> = match &output.out {
        Some(path) => Box::new(File::create(path).with_context(|| format!("cannot create {}", path.display()))?),
        None => Box::new(io::stdout().lock()),
    };
    write_waypoints(BufWriter::new(out), &waypoints).context("cannot write the trajectory")?;
    log::info!(
        "{what} of {} waypoints over {:.3} s",
        waypoints.len(),
        waypoints.last().map_or(0.0, |w| w.t) - waypoints[0].t
    );
    Ok(())
}

/// Parses a pair of angles `A,B` in degrees.
fn parse_direction(text: &str) -> Result<[f64; 2], String> {
    let angles = text.split(',').map(|part| part.trim().parse::<f64>()).collect::<Result<Vec<_>, _>>();
    match angles.as_deref() {
        Ok(&[first, second]) => Ok([first, second]),
        _ => Err(format!("expected two angles A,B in degrees, got `{text}`")),
    }
}
