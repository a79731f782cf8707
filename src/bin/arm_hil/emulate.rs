//! `arm_hil emulate ...`: device emulators on pseudo-terminals.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use arm_hil::control::arc::ArcSpec;
use arm_hil::emulate::rdscom::{RdscomEmulator, RdscomFaults};
use arm_hil::emulate::rig::{RigEmulator, RigFaults};
use arm_hil::emulate::stm32::{Faults, Stm32Emulator, Stm32EmulatorConfig};
use arm_hil::model::math::Vec3;
use arm_hil::protocol::rdscom::PrototypeTable;
use arm_hil::protocol::stm32::LengthStyle;

use crate::config;
use crate::hil::HilSections;

#[derive(Debug, Subcommand)]
pub(crate) enum EmulateCommand {
    /// The lab's rig's angle sensor (docs/rig.md), reading the simulated arm that the emulated stepper
    /// drives move: prints both device paths (`sensor PATH`, `stepper PATH`). SIGUSR1 silences
    /// the sensor (its cable pulled), SIGUSR2 lets it speak again, SIGHUP injects the faults
    /// still to come at once (with none, it ends the emulator); each prints what it did.
    Sensor(RigArgs),
    /// The lab's rig's step-driver Arduino: the same emulated rig as `sensor`.
    Stepper(RigArgs),
    /// The STM32 arm's firmware: prints the device path (a link that survives replugs).
    Stm32(Stm32EmulatorArgs),
    /// The finger testbench's rdscom MCU: prints the device path.
    Rdscom(RdscomEmulatorArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RdscomEmulatorArgs {
    /// Prototype table: document or firmware
    #[arg(long, value_name = "TABLE", default_value = "document")]
    table: String,
    /// Probability that a frame sent is lost
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    drop_rate: f64,
    /// Delay before each acknowledgement [ms]
    #[arg(long, value_name = "MS", default_value_t = 0)]
    ack_delay_ms: u64,
    /// Up to this many random bytes between frames
    #[arg(long, value_name = "N", default_value_t = 0)]
    garbage: usize,
    /// Make every datastream payload contain the bytes E N D
    #[arg(long)]
    end_in_payload: bool,
    /// Print a JSON line each time a Stop arrives, {"unix_ns": when (to the millisecond), "stops":
    /// how many so far}: when a driver stopped the testbench
    #[arg(long, conflicts_with = "print_controls")]
    print_stops: bool,
    /// Print a JSON line each time a ControlGo arrives, {"unix_ns": when it arrived, "controls":
    /// how many so far}: when a driver's setpoint reached the testbench
    #[arg(long)]
    print_controls: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Stm32EmulatorArgs {
    /// Lengths of ANGLES_ONLY, ACK and ERROR_RESPONSE: firmware or document
    #[arg(long, value_name = "STYLE", default_value = "firmware")]
    style: String,
    /// Send telemetry unasked at this rate [Hz] (the real firmware only answers GET_TELEMETRY)
    #[arg(long, value_name = "HZ")]
    stream_rate: Option<f64>,
    /// Probability that a byte sent has a bit flipped
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    bit_flip_rate: f64,
    /// Probability that a byte sent is lost
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    drop_rate: f64,
    /// Print each new joint target as a JSON line, {"unix_ns": when it arrived, "targets":
    /// [shoulder, elbow], "angles": where the servos were as the line was printed, within a
    /// millisecond}: when commands reach the device
    #[arg(long)]
    print_targets: bool,
    /// The servos' time constant [s]: a first-order joint reaches 63 % of a step in this time
    #[arg(long, value_name = "S", default_value_t = 0.05)]
    servo_time_constant: f64,
    /// Where the servos are, and hold, at power-on [rad]
    #[arg(long, value_name = "SHOULDER,ELBOW", value_parser = angle_pair, allow_hyphen_values = true, default_value = "0,0")]
    start_angles: [f64; 2],
}

/// A time of `text` seconds, from zero on.
fn seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|error| format!("{text:?}: {error}"))?;
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?}: a number of seconds >= 0 is needed"))
}

/// Two angles [rad] written `A,B`.
fn angle_pair(text: &str) -> Result<[f64; 2], String> {
    let angles: Vec<f64> = text
        .split(',')
        .map(|angle| angle.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|error| format!("{text:?}: {error}"))?;
    match angles[..] {
        [a, b] if a.is_finite() && b.is_finite() => Ok([a, b]),
        _ => Err(format!("{text:?}: two finite angles [rad] are needed, as 0.3,-0.2")),
    }
}

#[derive(Debug, Args)]
pub(crate) struct RigArgs {
    /// Sensor lines per second [Hz]
    #[arg(long, value_name = "HZ", default_value_t = 250.0)]
    sensor_rate: f64,
    /// YAML configuration: the sections of `arm_hil hil --config`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    /// Fault: this motor (1-3) ignores the step rates sent to it, from --faults-after on
    #[arg(long, value_name = "JOINT", value_parser = clap::value_parser!(u8).range(1..=3))]
    ignore_motor: Option<u8>,
    /// Fault: the sensor repeats one reading, from --faults-after on
    #[arg(long)]
    freeze_sensor: bool,
    /// Fault: every N-th sensor line is garbled (its polar angle 0.5 rad off, a reading the rig
    /// cannot produce), from --faults-after on; 1 garbles every line
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    garble_sensor: Option<u32>,
    /// When the faults begin [s after the emulator starts]
    #[arg(long, value_name = "S", value_parser = seconds, default_value = "1")]
    faults_after: Duration,
    /// Pull the sensor's cable S seconds after the first step command arrives (a driver sends one
    /// as it connects, just before its run starts), looked at every 10 ms, once (SIGUSR2 plugs
    /// it back): what SIGUSR1 does, without looking up the emulator's pid
    #[arg(long, value_name = "S", value_parser = seconds)]
    pull_cable_after: Option<Duration>,
    /// Print a JSON line each time the step rates stop or start, {"unix_ns": when (to the
    /// millisecond), "moving": whether any rate is not zero, "rates": the rates [pulses/s]}: when
    /// a driver stopped the motors
    #[arg(long)]
    print_stops: bool,
}

pub(crate) fn run(command: EmulateCommand) -> anyhow::Result<()> {
    match command {
        EmulateCommand::Sensor(args) | EmulateCommand::Stepper(args) => run_rig(args),
        EmulateCommand::Stm32(args) => run_stm32(args),
        EmulateCommand::Rdscom(args) => run_rdscom(args),
    }
}

fn run_rdscom(args: RdscomEmulatorArgs) -> anyhow::Result<()> {
    let table = match args.table.as_str() {
        "document" => PrototypeTable::document(),
        "firmware" => PrototypeTable::firmware(),
        other => anyhow::bail!("--table must be document or firmware, got `{other}`"),
    };
    let emulator = RdscomEmulator::start(table).context("cannot start the rdscom emulator")?;
    emulator.set_faults(RdscomFaults {
        drop_rate: args.drop_rate,
        ack_delay: Duration::from_millis(args.ack_delay_ms),
        garbage_between_frames: args.garbage,
        end_in_payload: args.end_in_payload,
        silent: false,
    });
    println!("{}", emulator.path().display());
    match args.print_controls {
        true => print_changes_until_interrupted(
            true,
            || {
                let stats = emulator.stats();
                (stats.controls_run, stats.controls_run_unix_ns)
            },
            |(controls, unix_ns)| serde_json::json!({ "controls": controls, "unix_ns": unix_ns }),
        )?,
        false => print_changes_until_interrupted(
            args.print_stops,
            || emulator.stats().stops,
            |stops| serde_json::json!({ "stops": stops }),
        )?,
    }
    let stats = emulator.stop();
    log::info!("answered {} requests, {} heartbeats", stats.requests, stats.heartbeats);
    Ok(())
}

/// Prints a JSON line, stamped with the wall clock, each time a value it is offered changes: what
/// a device was told, and when, for a test that looks from outside.
struct ChangePrinter<T> {
    last: T,
}

impl<T: PartialEq> ChangePrinter<T> {
    fn new(first: T) -> ChangePrinter<T> {
        ChangePrinter { last: first }
    }

    /// Prints `fields(&value)` where `value` differs from the last one offered, with `unix_ns`
    /// now unless the fields say when it changed.
    fn offer(&mut self, value: T, fields: impl FnOnce(&T) -> serde_json::Value) -> anyhow::Result<()> {
        use std::io::Write;
        if value == self.last {
            return Ok(());
        }
        let mut line = fields(&value);
        if line.get("unix_ns").is_none() {
            let unix_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64;
            line["unix_ns"] = unix_ns.into();
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        self.last = value;
        Ok(())
    }
}

/// Runs until Ctrl-C; with `print`, prints what `read` says each time it changes, as `fields` of a
/// JSON line ([`ChangePrinter`]), looking every millisecond.
fn print_changes_until_interrupted<T: PartialEq>(
    print: bool,
    read: impl Fn() -> T,
    fields: impl Fn(&T) -> serde_json::Value,
) -> anyhow::Result<()> {
    if !print {
        return until_interrupted(|| None);
    }
    let mut printer = ChangePrinter::new(read());
    every_until_interrupted(Duration::from_millis(1), || printer.offer(read(), &fields))
}

/// Runs until Ctrl-C.
fn until_interrupted(mut failed: impl FnMut() -> Option<String>) -> anyhow::Result<()> {
    every_until_interrupted(Duration::from_millis(200), || match failed() {
        Some(failure) => anyhow::bail!("the emulator stopped: {failure}"),
        None => Ok(()),
    })
}

/// Runs `tick` every `period` until Ctrl-C, or until it fails.
fn every_until_interrupted(period: Duration, mut tick: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let stop_on_signal = stop.clone();
    ctrlc::set_handler(move || stop_on_signal.store(true, Ordering::Relaxed)).context("cannot handle Ctrl-C")?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(period);
        tick()?;
    }
    Ok(())
}

fn run_stm32(args: Stm32EmulatorArgs) -> anyhow::Result<()> {
    let style = match args.style.as_str() {
        "firmware" => LengthStyle::Firmware,
        "document" => LengthStyle::Document,
        other => anyhow::bail!("--style must be firmware or document, got `{other}`"),
    };
    anyhow::ensure!(
        args.servo_time_constant.is_finite() && args.servo_time_constant > 0.0,
        "--servo-time-constant must be a number of seconds > 0"
    );
    let config = Stm32EmulatorConfig {
        style,
        stream_rate_hz: args.stream_rate,
        servo_time_constant_s: args.servo_time_constant,
        start_angles_rad: args.start_angles,
        ..Stm32EmulatorConfig::default()
    };
    let emulator = Stm32Emulator::start(config).context("cannot start the STM32 emulator")?;
    emulator.set_faults(Faults { bit_flip_rate: args.bit_flip_rate, drop_rate: args.drop_rate, silent: false });
    println!("{}", emulator.path().display());
    print_changes_until_interrupted(
        args.print_targets,
        || {
            let stats = emulator.stats();
            (stats.targets, stats.targets_unix_ns)
        },
        |(targets, unix_ns)| serde_json::json!({ "targets": targets, "angles": emulator.stats().angles, "unix_ns": unix_ns }),
    )?;
    let stats = emulator.stop();
    log::info!("answered {} commands, sent {} telemetry packets", stats.commands, stats.telemetry_sent);
    Ok(())
}

/// Runs until SIGINT or SIGTERM, silencing the sensor on SIGUSR1 and letting it speak on SIGUSR2:
/// a test pulls the sensor's cable mid-run and sees what the driver commanded meanwhile. Injects
/// `faults` once `faults_after` has passed or on SIGHUP, whichever comes first (a test injects
/// them at the moment it wants, mid-move; a SIGHUP with none to come ends it), and says when
/// the arm hits a hard stop.
async fn serve_sensor_cable(
    emulator: &RigEmulator,
    faults: RigFaults,
    faults_after: Duration,
    mut pull_cable_after: Option<Duration>,
    print_stops: bool,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut pull = signal(SignalKind::user_defined1())?;
    let mut plug = signal(SignalKind::user_defined2())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut watch = tokio::time::interval(Duration::from_millis(200));
    let mut every_millisecond = tokio::time::interval(Duration::from_millis(1));
    let moving = |rates: &[f64; 3]| rates.iter().any(|rate| *rate != 0.0);
    let mut stops = ChangePrinter::new(false);
    let inject = tokio::time::sleep(faults_after);
    tokio::pin!(inject);
    let (mut injected, mut stopped_said) = (faults == RigFaults::default(), false);
    let inject_faults = || {
        emulator.set_faults(faults);
        println!("faults injected at t = {:.3} s: {faults:?}", emulator.stats().t);
    };
    let pull_cable = || {
        emulator.set_sensor_silent(true);
        println!("sensor silent at t = {:.3} s", emulator.stats().t);
    };
    // --pull-cable-after: looked at every 10 ms, the clock started by the first step command.
    let mut cable_watch = tokio::time::interval(Duration::from_millis(10));
    let mut cable_pulled_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = &mut inject, if !injected => {
                inject_faults();
                injected = true;
            }
            // With no faults still to come, a hangup ends the emulator as it would without a
            // handler (its terminal closed).
            _ = hangup.recv() => match injected {
                false => {
                    inject_faults();
                    injected = true;
                }
                true => return Ok(()),
            },
            _ = every_millisecond.tick(), if print_stops => {
                let rates = emulator.stats().last_rates;
                stops.offer(moving(&rates), |moving| serde_json::json!({ "moving": moving, "rates": rates }))?;
            }
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            _ = pull.recv() => pull_cable(),
            now = cable_watch.tick(), if pull_cable_after.is_some() => {
                match (cable_pulled_at, pull_cable_after) {
                    // A time past what the clock can hold never comes: the cable stays in.
                    (None, Some(after)) if emulator.stats().step_commands > 0 => match now.checked_add(after) {
                        Some(at) => cable_pulled_at = Some(at),
                        None => pull_cable_after = None,
                    },
                    (Some(at), _) if now >= at => {
                        pull_cable();
                        pull_cable_after = None;
                    }
                    _ => {}
                }
            }
            _ = plug.recv() => {
                let stats = emulator.stats();
                emulator.set_sensor_silent(false);
                let p = stats.position;
                println!(
                    "sensor back at t = {:.3} s; last step command at t = {:.3} s, rates {:?}; arm at {:.6} {:.6} {:.6} m",
                    stats.t, stats.last_command_t, stats.last_rates, p.x, p.y, p.z
                );
            }
            _ = watch.tick() => {
                if let Some(failure) = emulator.failure() {
                    anyhow::bail!("the emulator stopped: {failure}");
                }
                let stats = emulator.stats();
                if let (Some(t), false) = (stats.hard_stop_t, stopped_said) {
                    stopped_said = true;
                    let p = stats.position;
                    println!("hard stop at t = {t:.3} s: the arm stopped at {:.6} {:.6} {:.6} m", p.x, p.y, p.z);
                }
            }
        }
    }
}

fn run_rig(args: RigArgs) -> anyhow::Result<()> {
    let (sil, sections) = config::load::<HilSections>(args.config.as_deref())?;
    // The arm starts where the built-in arc starts, held by its motors.
    let elbow = Vec3::from(sil.robot.elbow);
    let start = ArcSpec::default().waypoints(&elbow, sil.robot.l_arm)?[0].x;
    let emulator = RigEmulator::start(&sil, sections.stepper, start, args.sensor_rate)
        .map_err(anyhow::Error::msg)
        .context("cannot start the rig emulator")?;
    let faults = RigFaults {
        ignored_motor: args.ignore_motor.map(|joint| usize::from(joint) - 1),
        sensor_frozen: args.freeze_sensor,
        sensor_garbled_every: args.garble_sensor,
    };
    println!("sensor {}", emulator.sensor_path().display());
    println!("stepper {}", emulator.arduino_path().display());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal handler")?
        .block_on(serve_sensor_cable(&emulator, faults, args.faults_after, args.pull_cable_after, args.print_stops))?;
    let stats = emulator.stop();
    log::info!(
        "emulated {} sensor lines, {} step commands ({} refused)",
        stats.sensor_lines,
        stats.step_commands,
        stats.bad_step_lines
    );
    Ok(())
}
