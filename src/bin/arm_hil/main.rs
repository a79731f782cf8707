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
    let result = match Cli::parse().command {
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
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
