//! `arm_hil`: the command line. Everything runs without ROS and without hardware.

mod arduino;
mod bag;
mod config;
mod console;
mod emulate;
mod hil;
mod live;
mod outputs;
mod plot;
mod serve;
mod sil;
mod stm32;
mod sweep;
mod trajectory;
mod vr;

use std::process::ExitCode;

use arm_hil::hil::exit;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "arm_hil", version, about = "Simulate and drive the lab's parallel arm without ROS")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the SIL simulator on a trajectory (default: the built-in arc) and print a summary.
    Sil(sil::SilArgs),
    /// Run one trajectory over many sensor seeds and/or controller gains on every core.
    Sweep(sweep::SweepArgs),
    /// Run the HIL loop at a fixed rate against the simulated plant or the lab's rig.
    Hil(hil::HilArgs),
    /// Serve the port-5555 binary protocol to the lab's GUI clients.
    Serve(serve::ServeArgs),
    /// Drive the STM32 2-DOF arm over its serial protocol.
    Stm32(stm32::Stm32Args),
    /// Drive the finger testbench's MCU over rdscom.
    Arduino(arduino::ArduinoArgs),
    /// Run a device emulator on a pseudo-terminal.
    #[command(subcommand)]
    Emulate(emulate::EmulateCommand),
    /// The Deltarobot VR link: lead Unity followers, or follow a leader.
    #[command(subcommand)]
    Vr(vr::VrCommand),
    /// Read rosbag2 bags, such as those `--bag` records.
    #[command(subcommand)]
    Bag(bag::BagCommand),
    /// Write trajectories.
    #[command(subcommand)]
    Trajectory(trajectory::TrajectoryCommand),
}

fn main() -> ExitCode {
    live::init_logging();
    let command = Cli::parse().command;
    // Whatever ends a command that holds a device (a signal, a panic, the end of main) stops the
    // device first (docs/safety.md, "Exit paths"). The other commands keep their own Ctrl-C: the
    // emulators' signals are their faults, and a simulation's Ctrl-C ends it with its outputs.
    let _stop_devices_at_the_end = exit::ExitGuard;
    if matches!(command, Command::Hil(_) | Command::Serve(_) | Command::Stm32(_) | Command::Arduino(_)) {
        if let Err(error) = exit::handle_signals() {
            log::error!("cannot handle signals: {error}");
            return ExitCode::FAILURE;
        }
    }
    let result = match command {
        Command::Sil(args) => sil::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Hil(args) => hil::run(args),
        Command::Emulate(command) => emulate::run(command),
        Command::Stm32(args) => stm32::run(args),
        Command::Arduino(args) => arduino::run(args),
        Command::Vr(command) => vr::run(command),
        Command::Trajectory(command) => trajectory::run(command),
        Command::Bag(command) => bag::run(command),
    };
    exit::status_of(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{error:#}");
            ExitCode::FAILURE
        }
    })
}
