//! sil_node without ROS: its parameters (here), its run loop ([`run`]), which paces the
//! simulator to the real-time factor and hands every frame on, and its publisher
//! ([`publisher`]), which decides what of it goes out.

pub mod commands;
pub mod joint_commands;
pub mod joint_goals;
pub mod publisher;
pub mod run;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::declare::node_parameters;
use super::follower::{Constraints, GoalLimits};
use super::param_server::ParamRange;
use super::params::{only_groups, read_group, without_groups, ParamError, ParamValue};
use crate::sim::SilConfig;

/// The node's name, which its private topics are under.
pub const NODE: &str = "sil_node";

node_parameters! {
    /// sil_node's own parameters (the SIL configuration's sections sit beside them): the pacing
    /// and publishing settings apply at once, the rest is read at start.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SilNodeSettings, SIL_NODE_PARAMS {
        runtime real_time_factor: f64 = 1.0, range(ParamRange::Double { from: 0.0, to: 1000.0 })
            => "simulated seconds per wall-clock second; 0 runs as fast as possible";
        runtime publish_rate_hz: f64 = 250.0, range(ParamRange::Double { from: 0.1, to: 10000.0 })
            => "samples published per simulated second [Hz]";
        runtime repeat as "loop": bool = true => "start the trajectory again when it ends";
        read_only publish_clock: bool = false => "publish /clock from simulated time (and stamp messages with it)";
        read_only trajectory_file: String = String::new()
            => "trajectory CSV run at start; empty runs the built-in arc";
        read_only frame_id: String = "base_link".into() => "frame of every published point and path";
        section constraints: Constraints = Constraints::stopped_below(joint_goals::SIL_STOPPED_RAD_S)
            => "~/follow_joint_trajectory's default tolerances: goal_time [s], goal and trajectory [rad] per motor, stopped_velocity_tolerance [rad/s]";
        section goal_limits: GoalLimits = GoalLimits::default()
            => "~/follow_joint_trajectory's bounds on a goal: max_points, max_duration_s [s] from its receipt";
        read_only joint_command_speed_m_s: f64 = joint_commands::SIL_COMMAND_SPEED_M_S
            => "~/joint_command: a step becomes a ramp at this mean platform speed [m/s]; a controller's stream is followed at its own speed";
        read_only ros2_control: bool = false
            => "commanded by ros2_control's topic-based hardware (control:=ros2_control sets it): ~/joint_command is its stream, whose initial values are not followed";
    }
    sections {
        "robot." => "robot model, SI units; see examples/sil.yaml",
        "controller." => "task-space PID and inverse dynamics; see examples/sil.yaml",
        "estimator." => "Kalman filter and range-bias estimator; see examples/sil.yaml",
        "sensor." => "simulated angle sensor; see examples/sil.yaml",
        "integrator." => "adaptive Bogacki-Shampine integrator; see examples/sil.yaml",
        "run." => "frame cap, divergence threshold and the frames' uniform grid frame_rate_hz; see examples/sil.yaml",
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
    let invalid = |message| ParamError::Invalid { prefix: String::new(), message };
    joint_goals::arm_follower(&settings.constraints, &settings.goal_limits).map_err(invalid)?;
    joint_commands::check_command_speed(settings.joint_command_speed_m_s).map_err(invalid)?;
    Ok((sil, settings))
}
