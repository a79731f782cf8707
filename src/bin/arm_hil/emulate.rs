//! `arm_hil emulate ...`: device emulators on pseudo-terminals.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use arm_hil::control::arc::ArcSpec;
use arm_hil::emulate::rig::RigEmulator;
use arm_hil::model::math::Vec3;

use crate::config;
use crate::hil::HilSections;

#[derive(Debug, Subcommand)]
pub(crate) enum EmulateCommand {
    /// The reference rig's angle sensor, reading the simulated arm that the emulated stepper
    /// drives move: prints both device paths (`sensor PATH`, `stepper PATH`).
    Sensor(RigArgs),
    /// The reference rig's step-driver Arduino: the same emulated rig as `sensor`.
    Stepper(RigArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RigArgs {
    /// Sensor lines per second [Hz]
    #[arg(long, value_name = "HZ", default_value_t = 250.0)]
    sensor_rate: f64,
    /// YAML configuration: the sections of `arm_hil hil --config`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
}

pub(crate) fn run(command: EmulateCommand) -> anyhow::Result<()> {
    let (EmulateCommand::Sensor(args) | EmulateCommand::Stepper(args)) = command;
    let (sil, sections) = config::load::<HilSections>(args.config.as_deref())?;
    // The arm starts where the built-in arc starts, held by its motors.
    let elbow = Vec3::from(sil.robot.elbow);
    let start = ArcSpec::default().waypoints(&elbow, sil.robot.l_arm)?[0].x;
    let emulator = RigEmulator::start(&sil, sections.stepper, start, args.sensor_rate)
        .map_err(anyhow::Error::msg)
        .context("cannot start the rig emulator")?;
    println!("sensor {}", emulator.sensor_path().display());
    println!("stepper {}", emulator.arduino_path().display());
    let stop = Arc::new(AtomicBool::new(false));
    let stop_on_signal = stop.clone();
    ctrlc::set_handler(move || stop_on_signal.store(true, Ordering::Relaxed)).context("cannot handle Ctrl-C")?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(failure) = emulator.failure() {
            anyhow::bail!("the rig emulator stopped: {failure}");
        }
    }
    let stats = emulator.stop();
    log::info!(
        "emulated {} sensor lines, {} step commands ({} refused)",
        stats.sensor_lines,
        stats.step_commands,
        stats.bad_step_lines
    );
    Ok(())
}
