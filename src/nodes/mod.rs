//! What the ROS nodes do, without ROS: parameters into configuration, messages into library
//! types, joint states for the URDF, the nodes' run loops producing plain data, and each node's
//! topics ([`topics`], built from the messages in [`msg`]) written against one sink. The `ros`
//! module (feature `ros`) only moves this data in and out of r2r; bags and live views are the
//! other sinks.

pub mod arduino;
pub mod declare;
pub mod follower;
pub mod goals;
pub mod hil;
pub mod joints;
pub mod lifecycle;
pub mod managed_driver;
pub mod legacy;
pub mod link_health;
pub mod param_server;
pub mod params;
pub mod refusals;
pub mod robot_state;
pub mod security;
pub mod sil;
pub mod stm32;
pub mod status;
pub mod topics;
pub mod trajectory_input;
pub mod vr;

use std::path::{Path, PathBuf};

use crate::control::arc::{ArcError, ArcSpec};
use crate::control::trajectory_csv::{read_waypoints, CsvError};
use crate::control::{Trajectory, TrajectoryError};
use crate::model::Robot;

/// Why a run's starting trajectory could not be loaded. Each variant names the file (or the
/// built-in arc) and carries the cause as its source.
#[derive(Debug, thiserror::Error)]
pub enum LoadTrajectoryError {
    #[error("cannot open {}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("trajectory {}", path.display())]
    Csv { path: PathBuf, source: CsvError },
    #[error("the built-in arc")]
    Arc(#[source] ArcError),
    #[error("{origin} is not a valid trajectory")]
    Invalid { origin: String, source: TrajectoryError },
}

/// The positions [rad] of `joints`, in their order, from a joint command's `names` and
/// `positions`, as ros2_control's topic-based hardware sends them (every joint with a command
/// interface, in the URDF's order; other joints named are left out): each must be there, finite.
pub fn commanded_positions<J: AsRef<str>>(
    joints: &[J],
    names: &[String],
    positions: &[f64],
) -> Result<Vec<f64>, String> {
    if names.len() != positions.len() {
        return Err(format!("{} names but {} positions", names.len(), positions.len()));
    }
    each_named_once(names)?;
    joints
        .iter()
        .map(|joint| match names.iter().position(|name| name == joint.as_ref()) {
            Some(index) if positions[index].is_finite() => Ok(positions[index]),
            Some(index) => Err(format!("joint `{}`: {} is not a finite target", joint.as_ref(), positions[index])),
            None => Err(format!("joint `{}` is missing: a command names every commanded joint", joint.as_ref())),
        })
        .collect()
}

/// Refuses a command that names a joint twice: which of its values was meant cannot be known.
/// Linear in the names (a message may hold any number).
pub fn each_named_once(names: &[String]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    match names.iter().find(|name| !seen.insert(name.as_str())) {
        Some(twice) => Err(format!("joint `{twice}` is named twice")),
        None => Ok(()),
    }
}

/// The nodes' trajectory_file parameter as a path: empty means the built-in arc.
pub fn trajectory_file(parameter: &str) -> Option<&Path> {
    (!parameter.is_empty()).then(|| Path::new(parameter))
}

/// A run's starting trajectory: the trajectory CSV at `file`, or the built-in arc without one.
/// The command line and the nodes start every run from here.
pub fn load_trajectory(file: Option<&Path>, robot: &Robot) -> Result<Trajectory, LoadTrajectoryError> {
    let (waypoints, origin) = match file {
        Some(path) => {
            let opened = std::fs::File::open(path)
                .map_err(|source| LoadTrajectoryError::Open { path: path.to_owned(), source })?;
            let waypoints =
                read_waypoints(opened).map_err(|source| LoadTrajectoryError::Csv { path: path.to_owned(), source })?;
            (waypoints, path.display().to_string())
        }
        None => {
            let waypoints =
                ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).map_err(LoadTrajectoryError::Arc)?;
            (waypoints, "the built-in arc".to_owned())
        }
    };
    Trajectory::with_robot_forearm(waypoints, robot).map_err(|source| LoadTrajectoryError::Invalid { origin, source })
}

/// Passes one sample per period of its time axis [s]: how nodes publish a simulator's steps or
/// a loop's cycles at their publish rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decimator {
    period: f64,
    next: Option<f64>,
}

impl Decimator {
    /// One sample every `1 / rate_hz` seconds.
    pub fn new(rate_hz: f64) -> Decimator {
        Decimator { period: 1.0 / rate_hz, next: None }
    }

    /// True when the sample at `t` [s] is due. Samples keep to a grid of whole periods (with a
    /// millionth of a period of slack for rounding); time that restarts or jumps starts a new grid.
    pub fn due(&mut self, t: f64) -> bool {
        let slack = self.period * 1e-6;
        match self.next {
            Some(next) if t + slack < next && t + slack >= next - self.period => false,
            Some(next) if t + slack >= next && t < next + self.period => {
                self.next = Some(next + self.period);
                true
            }
            _ => {
                self.next = Some(t + self.period);
                true
            }
        }
    }
}
