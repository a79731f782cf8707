//! `arm_hil stm32`: the STM32 arm on a serial port. Prints telemetry and link changes, one line
//! per event (JSON lines with `--json`), and takes commands on stdin.

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use crate::console;
use crate::outputs::{finish_publisher, RunPublisher};
use arm_hil::drivers::stm32::{
    parse_console_command, ArmTelemetry, DriverEvent, LinkEvent, LinkState, Stm32Config, Stm32Driver,
};
use arm_hil::nodes::stm32::topics::Stm32Topics;
use arm_hil::nodes::stm32::Stm32NodeConfig;
use arm_hil::outputs::wall_clock_ns;
use arm_hil::serial::detect::{resolve_port, DeviceKind};

#[derive(Debug, Args)]
pub(crate) struct Stm32Args {
    /// Serial device of the STM32 board, or `auto` to find its ST-LINK by USB id
    #[arg(long, value_name = "DEV|auto")]
    port: String,
    /// Baud rate (8N1)
    #[arg(long, value_name = "N", default_value_t = 115_200)]
    baud: u32,
    /// Telemetry units of the IMU fields on the wire: firmware (g, deg/s) or si
    #[arg(long, value_name = "UNITS", default_value = "firmware")]
    imu_units: String,
    /// Only listen for telemetry instead of polling with GET_TELEMETRY (firmware that streams)
    #[arg(long)]
    stream: bool,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    json: crate::outputs::JsonArg,
}

/// One printed event; the JSON form is an interface (`--json`).
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    Telemetry(&'a ArmTelemetry),
    Link { from: LinkState, to: LinkState },
    Ack { command: u8, latency_ms: f64 },
    Resent { command: u8, attempt: u32 },
    Unacknowledged { command: u8 },
    CommandFailed { command: u8, reason: &'a str },
    DeviceError { code: Option<u8>, failed_command: Option<u8>, message: &'a str },
    BadPacket { reason: String },
    PortOpened { path: &'a str },
    PortUnavailable { path: &'a str, reason: &'a str, retry_in_s: f64 },
    Refused { input: &'a str, reason: &'a str },
}

impl Line<'_> {
    fn text(&self) -> String {
        match self {
            Line::Telemetry(t) => {
                let mut text = String::from("telemetry");
                if let Some(ms) = t.timestamp_ms {
                    text += &format!(" t={ms} ms");
                }
                if let Some([s, e]) = t.angles {
                    text += &format!(" angles=({s:.4}, {e:.4}) rad");
                }
                if let Some([s, e]) = t.velocities {
                    text += &format!(" rates=({s:.4}, {e:.4}) rad/s");
                }
                if let Some(imu) = &t.imu {
                    let [ax, ay, az] = imu.accel;
                    let [gx, gy, gz] = imu.gyro;
                    text += &format!(
                        " accel=({ax:.3}, {ay:.3}, {az:.3}) m/s^2 gyro=({gx:.3}, {gy:.3}, {gz:.3}) rad/s roll={:.4} pitch={:.4} rad",
                        imu.roll, imu.pitch
                    );
                }
                text
            }
            Line::Link { from, to } => format!("link {from:?} -> {to:?}"),
            Line::Ack { command, latency_ms } => format!("ack 0x{command:02x} after {latency_ms:.1} ms"),
            Line::Resent { command, attempt } => format!("resending 0x{command:02x} (attempt {attempt})"),
            Line::Unacknowledged { command } => format!("no ack for 0x{command:02x}"),
            Line::CommandFailed { command, reason } => format!("command 0x{command:02x} failed: {reason}"),
            Line::DeviceError { code, failed_command, message } => {
                format!("device error code={code:?} command={failed_command:?} {message}")
            }
            Line::BadPacket { reason } => format!("bad packet: {reason}"),
            Line::PortOpened { path } => format!("port {path} open"),
            Line::PortUnavailable { path, reason, retry_in_s } => {
                format!("port {path} unavailable ({reason}), retrying in {retry_in_s:.1} s")
            }
            Line::Refused { input, reason } => format!("refused `{input}`: {reason}"),
        }
    }
}

fn print(line: &Line, json: bool) -> anyhow::Result<()> {
    console::print_line(line, || line.text(), json)
}

fn print_event(event: &DriverEvent, json: bool) -> anyhow::Result<()> {
    let line = match event {
        DriverEvent::Link(LinkEvent::Telemetry(t)) => Line::Telemetry(t),
        DriverEvent::Link(LinkEvent::StateChanged { from, to }) => Line::Link { from: *from, to: *to },
        DriverEvent::Link(LinkEvent::Acked { command, latency }) => {
            Line::Ack { command: *command, latency_ms: latency.as_secs_f64() * 1e3 }
        }
        DriverEvent::Link(LinkEvent::Resent { command, attempt }) => {
            Line::Resent { command: *command, attempt: *attempt }
        }
        DriverEvent::Link(LinkEvent::Unacknowledged { command }) => Line::Unacknowledged { command: *command },
        DriverEvent::Link(LinkEvent::CommandFailed { command, reason }) => {
            Line::CommandFailed { command: *command, reason }
        }
        DriverEvent::Link(LinkEvent::DeviceError { code, failed_command, message }) => {
            Line::DeviceError { code: *code, failed_command: *failed_command, message }
        }
        DriverEvent::Link(LinkEvent::BadPacket(error)) => Line::BadPacket { reason: error.to_string() },
        DriverEvent::Link(LinkEvent::Implausible { what }) => Line::BadPacket { reason: format!("implausible {what}") },
        DriverEvent::PortOpened { path } => Line::PortOpened { path },
        DriverEvent::PortUnavailable { path, reason, retry_in } => {
            Line::PortUnavailable { path, reason, retry_in_s: retry_in.as_secs_f64() }
        }
    };
    print(&line, json)
}

/// The session as stm32_driver publishes it, with the node's default joint names and IMU frame,
/// into the bag and the live view asked for.
fn start_recording(args: &Stm32Args) -> anyhow::Result<Option<RunPublisher<DriverEvent>>> {
    let Stm32NodeConfig { joint_names, imu_frame_id, .. } = Stm32NodeConfig::default();
    let port = args.port.clone();
    args.outputs.start_publisher(arm_hil::nodes::stm32::NODE, move |out| {
        Stm32Topics::advertise(out, &port, joint_names, imu_frame_id)
    })
}

pub(crate) fn run(args: Stm32Args) -> anyhow::Result<()> {
    let imu_units = match args.imu_units.as_str() {
        "firmware" => arm_hil::drivers::stm32::ImuUnits::Firmware,
        "si" => arm_hil::drivers::stm32::ImuUnits::Si,
        other => anyhow::bail!("--imu-units must be firmware or si, got `{other}`"),
    };
    let poll_mode =
        if args.stream { arm_hil::drivers::stm32::PollMode::Stream } else { arm_hil::drivers::stm32::PollMode::Poll };
    let config = Stm32Config { baud: args.baud, imu_units, poll_mode, ..Stm32Config::default() };
    let mut recording = start_recording(&args)?;
    let port = resolve_port(&args.port, DeviceKind::Stm32)?;
    let driver = Stm32Driver::start(&port.to_string_lossy(), config).context("cannot start the driver")?;
    let served = console::run(
        driver.events(),
        |input| match parse_console_command(input)
            .and_then(|command| driver.send(command).map_err(|error| error.to_string()))
        {
            Ok(()) => Ok(()),
            Err(reason) => print(&Line::Refused { input, reason: &reason }, args.json.json),
        },
        |event| {
            if let Some(recording) = &mut recording {
                recording.event(wall_clock_ns(), event.clone());
            }
            print_event(event, args.json.json)
        },
        || Ok(()),
    );
    // The device's safe stop (a hold, a Stop) before the recording is closed, which can take a while.
    drop(driver);
    if let Some(recording) = recording {
        finish_publisher(recording, wall_clock_ns())?;
    }
    served
}
