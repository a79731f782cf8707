//! `arm_hil arduino`: the tendon-driven finger testbench over rdscom. Prints events and sensor
//! data, one line per event (JSON lines with `--json`), and takes commands on stdin.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use crate::console;
use crate::outputs::{finish_publisher, RunPublisher};
use arm_hil::drivers::rdscom::{
    parse_console_command, prototype_table, DriverEvent, RdscomConfig, RdscomDriver, RdscomEvent, RdscomLinkState,
    Request, TableChoice,
};
use arm_hil::nodes::arduino::topics::ArduinoTopics;
use arm_hil::nodes::arduino::{ArduinoNodeConfig, TestbenchSetpoints};
use arm_hil::nodes::follower::clocks::SteadyClock;
use arm_hil::outputs::wall_clock_ns;
use arm_hil::protocol::rdscom::{FrameType, Message, PrototypeTable, Value};
use arm_hil::serial::detect::{resolve_port, DeviceKind};

#[derive(Debug, Args)]
pub(crate) struct ArduinoArgs {
    /// Serial device of the MCU, or `auto` to find an Arduino or Teensy by USB id
    #[arg(long, value_name = "DEV|auto")]
    port: String,
    /// Baud rate (8N1)
    #[arg(long, value_name = "N", default_value_t = 115_200)]
    baud: u32,
    /// Prototype table: `document` (default), `firmware`, or a YAML file
    #[arg(long, value_name = "FILE")]
    prototypes: Option<String>,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    json: crate::outputs::JsonArg,
}

/// One printed event; the JSON form is an interface (`--json`).
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    Link { state: RdscomLinkState },
    Ack { prototype: &'a str, number: u16, latency_ms: f64 },
    Resent { prototype: &'a str, number: u16, attempt: u32 },
    Failed { prototype: &'a str, number: u16 },
    Message { kind: FrameType, prototype: &'a str, number: u16, fields: BTreeMap<&'a str, Value> },
    PortOpened { path: &'a str },
    PortUnavailable { path: &'a str, reason: &'a str, retry_in_s: f64 },
    Refused { input: &'a str, reason: &'a str },
}

fn text(line: &Line) -> String {
    match line {
        Line::Link { state } => format!("link {state:?}"),
        Line::Ack { prototype, number, latency_ms } => format!("ack {prototype} #{number} after {latency_ms:.1} ms"),
        Line::Resent { prototype, number, attempt } => format!("resent {prototype} #{number} (retry {attempt})"),
        Line::Failed { prototype, number } => format!("{prototype} #{number} failed: no acknowledgement"),
        Line::Message { kind, prototype, number, fields } => {
            let fields: Vec<String> =
                fields.iter().map(|(name, value)| format!("{name}={}", value_text(*value))).collect();
            format!("{} {prototype} #{number} {}", format!("{kind:?}").to_lowercase(), fields.join(" "))
        }
        Line::PortOpened { path } => format!("port {path} open"),
        Line::PortUnavailable { path, reason, retry_in_s } => {
            format!("port {path} unavailable ({reason}), retrying in {retry_in_s:.1} s")
        }
        Line::Refused { input, reason } => format!("refused `{input}`: {reason}"),
    }
}

fn value_text(value: Value) -> String {
    match value {
        Value::Int(v) => v.to_string(),
        Value::Bool(v) => v.to_string(),
        Value::Float(v) => format!("{v:.4}"),
    }
}

fn print(line: &Line, json: bool) -> anyhow::Result<()> {
    console::print_line(line, || text(line), json)
}

/// `--prototypes`: a built-in table by name, or a file.
fn load_table(choice: Option<&str>) -> anyhow::Result<PrototypeTable> {
    Ok(match choice {
        None | Some("document") => prototype_table(None, &TableChoice::Document)?,
        Some("firmware") => prototype_table(None, &TableChoice::Firmware)?,
        Some(path) => prototype_table(Some(Path::new(path)), &TableChoice::Document)?,
    })
}

fn print_event(event: &DriverEvent, table: &PrototypeTable, json: bool) -> anyhow::Result<()> {
    let name = |id: u8| table.get(id).map_or("unknown", |prototype| prototype.name.as_str());
    let message_line = |message: &'_ Message| {
        let fields = table
            .get(message.prototype)
            .map(|prototype| {
                prototype.fields.iter().map(|field| field.name.as_str()).zip(message.values.iter().copied()).collect()
            })
            .unwrap_or_default();
        Line::Message { kind: message.kind, prototype: name(message.prototype), number: message.number, fields }
    };
    let line = match event {
        DriverEvent::Link(RdscomEvent::StateChanged(state)) => Line::Link { state: *state },
        DriverEvent::Link(RdscomEvent::Acked { prototype, number, latency }) => {
            Line::Ack { prototype: name(*prototype), number: *number, latency_ms: latency.as_secs_f64() * 1e3 }
        }
        DriverEvent::Link(RdscomEvent::Resent { prototype, number, attempt }) => {
            Line::Resent { prototype: name(*prototype), number: *number, attempt: *attempt }
        }
        DriverEvent::Link(RdscomEvent::Failed { prototype, number }) => {
            Line::Failed { prototype: name(*prototype), number: *number }
        }
        DriverEvent::Link(RdscomEvent::Refused { prototype, reason }) => Line::Refused { input: prototype, reason },
        DriverEvent::Link(RdscomEvent::Received(message)) => message_line(message),
        DriverEvent::PortOpened { path } => Line::PortOpened { path },
        DriverEvent::PortUnavailable { path, reason, retry_in } => {
            Line::PortUnavailable { path, reason, retry_in_s: retry_in.as_secs_f64() }
        }
    };
    print(&line, json)
}

/// The session as arduino_driver publishes it, with the node's default joint names, into the
/// bag and the live view asked for.
fn start_recording(args: &ArduinoArgs, table: PrototypeTable) -> anyhow::Result<Option<RunPublisher<DriverEvent>>> {
    let port = args.port.clone();
    args.outputs.start_publisher(arm_hil::nodes::arduino::NODE, move |out| {
        ArduinoTopics::advertise(out, &port, &ArduinoNodeConfig::default(), table)
    })
}

/// Sends the guard's Stops, saying so where one cannot go.
fn send_stops(driver: &RdscomDriver, stops: Vec<Request>) {
    for stop in stops {
        if let Err(error) = driver.send(stop) {
            log::error!("the MCU could not be stopped: {error}");
        }
    }
}

pub(crate) fn run(args: ArduinoArgs) -> anyhow::Result<()> {
    let table = load_table(args.prototypes.as_deref())?;
    let config = RdscomConfig { baud: args.baud, ..RdscomConfig::default() };
    let mut recording = start_recording(&args, table.clone())?;
    let port = resolve_port(&args.port, DeviceKind::Testbench)?;
    let driver =
        RdscomDriver::start(&port.to_string_lossy(), config, table.clone()).context("cannot start the driver")?;
    let mut nonce: i8 = 0;
    // The joints' limits, as arduino_driver keeps them: every control checked, and a velocity or
    // effort watched through the datastream (`stream all HZ`), the MCU stopped short of a limit.
    let setpoints = RefCell::new(TestbenchSetpoints::heard_at(0));
    let steady = SteadyClock::start();
    let served = console::run(
        driver.events(),
        |input| {
            nonce = nonce.wrapping_add(1);
            let sent = parse_console_command(input, nonce).and_then(|request| {
                let request = [request];
                setpoints.borrow().check(&request, steady.now_ns())?;
                driver.send(request[0].clone()).map_err(|error| error.to_string())?;
                setpoints.borrow_mut().others_sent(&request, steady.now_ns());
                Ok(())
            });
            match sent {
                Ok(()) => Ok(()),
                Err(reason) => print(&Line::Refused { input, reason: &reason }, args.json.json),
            }
        },
        |event| {
            if let Some(recording) = &mut recording {
                recording.event(wall_clock_ns(), event.clone());
            }
            send_stops(&driver, setpoints.borrow_mut().heard(steady.now_ns(), event, &table));
            print_event(event, &table, args.json.json)
        },
        // A datastream fallen silent sends no event: the guard looks meanwhile too.
        || {
            send_stops(&driver, setpoints.borrow_mut().idle(steady.now_ns()));
            Ok(())
        },
    );
    // The device's safe stop (a hold, a Stop) before the recording is closed, which can take a while.
    drop(driver);
    if let Some(recording) = recording {
        finish_publisher(recording, wall_clock_ns())?;
    }
    served
}
