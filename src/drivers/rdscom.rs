//! The rdscom driver (the GUI side): [`RdscomLink`] run on the serial port by the shared link
//! driver. The command line and the ROS node share it.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

pub use super::rdscom_link::{RdscomConfig, RdscomEvent, RdscomLink, RdscomLinkState, TableChoice};
use crate::protocol::rdscom::{encode, EncodeError, FrameType, Message, PrototypeTable, TableError, Value};
use crate::serial::link_driver::{Commander, LinkDriver, PortSettings, SerialLink};

/// What the rdscom driver reports.
pub type DriverEvent = crate::serial::link_driver::DriverEvent<RdscomEvent>;

/// A request by prototype name, with one value per field.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub prototype: String,
    pub values: Vec<Value>,
}

impl SerialLink for RdscomLink {
    type Command = Request;
    type Event = RdscomEvent;

    fn handle_command(&mut self, now: Instant, command: Request) {
        self.handle_request(now, &command.prototype, command.values);
    }
    fn handle_port_opened(&mut self, _now: Instant) {}
    fn handle_port_lost(&mut self, _now: Instant) {
        RdscomLink::handle_port_lost(self);
    }
    /// A Stop, which goes first and gives up what waited (the MCU's own queue is cleared by it).
    fn handle_shutdown(&mut self, now: Instant) {
        if self.table().by_name("Stop").is_some() {
            self.handle_request(now, "Stop", vec![Value::Int(0)]);
        }
    }
    fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        RdscomLink::handle_bytes(self, now, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        RdscomLink::handle_timeout(self, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        RdscomLink::poll_timeout(self)
    }
    fn poll_transmit(&mut self, _now: Instant, buf: &mut Vec<u8>) -> bool {
        RdscomLink::poll_transmit(self, buf)
    }
    fn poll_event(&mut self) -> Option<RdscomEvent> {
        RdscomLink::poll_event(self)
    }
}

/// Sends requests to a running driver after checking them against the table; cheap to clone.
#[derive(Clone)]
pub struct RdscomCommander {
    commander: Commander<Request>,
    table: PrototypeTable,
}

impl RdscomCommander {
    /// Checks that `request` encodes with the table and that its numbers are finite, then queues
    /// it. The wire carries a NaN or an infinity as any other float, and the MCU's controller
    /// would take it as a target; so a command never carries one, whoever typed or published it.
    pub fn send(&self, request: Request) -> Result<(), EncodeError> {
        let prototype = self.table.by_name(&request.prototype).ok_or(EncodeError::UnknownPrototype(u8::MAX))?;
        let not_finite = |value: &&Value| matches!(value, Value::Float(number) if !number.is_finite());
        if let Some((field, value)) = prototype.fields.iter().zip(&request.values).find(|(_, value)| not_finite(value))
        {
            return Err(EncodeError::OutOfRange { field: field.name.clone(), kind: field.kind, value: *value });
        }
        let probe =
            Message { kind: FrameType::Request, prototype: prototype.id, number: 0, values: request.values.clone() };
        encode(&probe, &self.table, &mut Vec::new())?;
        self.commander.send(request);
        Ok(())
    }

    pub fn table(&self) -> &PrototypeTable {
        &self.table
    }
}

/// A running rdscom driver.
pub struct RdscomDriver {
    driver: LinkDriver<RdscomLink>,
    table: PrototypeTable,
}

impl RdscomDriver {
    /// Starts the driver on `path` with `table`.
    pub fn start(path: &str, config: RdscomConfig, table: PrototypeTable) -> std::io::Result<RdscomDriver> {
        super::check_link_settings(&[
            ("retry_timeout_s", config.retry_timeout_s, 0.01..=60.0),
            ("retries", f64::from(config.retries), 0.0..=100.0),
            ("heartbeat_period_s", config.heartbeat_period_s, 0.01..=10.0),
            ("heartbeat_misses", f64::from(config.heartbeat_misses), 1.0..=1000.0),
        ])?;
        let port = PortSettings {
            path: path.to_owned(),
            baud: config.baud,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        };
        let link = RdscomLink::new(config, table.clone(), Instant::now());
        Ok(RdscomDriver { driver: LinkDriver::start("rdscom-driver", port, link)?, table })
    }

    pub fn commander(&self) -> RdscomCommander {
        RdscomCommander { commander: self.driver.commander(), table: self.table.clone() }
    }

    pub fn send(&self, request: Request) -> Result<(), EncodeError> {
        self.commander().send(request)
    }

    pub fn events(&self) -> &Receiver<DriverEvent> {
        self.driver.events()
    }

    pub fn table(&self) -> &PrototypeTable {
        &self.table
    }

    pub fn stop(self) {
        self.driver.stop();
    }
}

/// Control modes of MotorControl.
pub fn control_mode(text: &str) -> Option<u8> {
    match text {
        "position" | "0" => Some(0),
        "velocity" | "1" => Some(1),
        "torque" | "2" => Some(2),
        _ => None,
    }
}

/// The joint id of a datastream request: a number, or `all` (255).
fn joint(text: &str) -> Result<i64, String> {
    match text {
        "all" => Ok(255),
        number => number.parse::<u8>().map(i64::from).map_err(|_| format!("`{number}` is not a joint id or `all`")),
    }
}

/// Parses a console command: `move <motor> <position|velocity|torque> <value> [simultaneous]`,
/// `go`, `stop`, `clear`, `stream <joint|all> <hz>`, `unstream <joint|all>`.
pub fn parse_console_command(line: &str, nonce: i8) -> Result<Request, String> {
    let request = |prototype: &str, values: Vec<Value>| Ok(Request { prototype: prototype.to_owned(), values });
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["move", motor, mode, value, rest @ ..] if rest.len() <= 1 => {
            let motor = motor.parse::<u8>().map_err(|_| format!("`{motor}` is not a motor id"))?;
            let mode = control_mode(mode).ok_or(format!("`{mode}` is not position, velocity or torque"))?;
            let value = value.parse::<f32>().map_err(|_| format!("`{value}` is not a number"))?;
            let simultaneous = match rest.first() {
                None => false,
                Some(&"simultaneous") => true,
                Some(other) => return Err(format!("`{other}`: the last word can only be `simultaneous`")),
            };
            request(
                "MotorControl",
                vec![Value::Int(i64::from(motor)), Value::Int(i64::from(mode)), Value::Float(f64::from(value)), Value::Bool(simultaneous)],
            )
        }
        ["go"] => request("ControlGo", vec![Value::Int(i64::from(nonce))]),
        ["stop"] => request("Stop", vec![Value::Int(i64::from(nonce))]),
        ["clear"] => request("ClearControlQueue", vec![Value::Int(i64::from(nonce))]),
        ["stream", which, hz] => {
            let hz = hz.parse::<u8>().map_err(|_| format!("`{hz}` is not a rate in 1..=255 Hz"))?;
            request("StartSensorDatastream", vec![Value::Int(joint(which)?), Value::Int(i64::from(hz))])
        }
        ["unstream", which] => request("StopSensorDatastream", vec![Value::Int(joint(which)?)]),
        _ => Err(format!(
            "unknown command `{}`: try move MOTOR MODE VALUE [simultaneous], go, stop, clear, stream JOINT|all HZ, unstream JOINT|all",
            line.trim()
        )),
    }
}

/// Why a prototype table file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TableFileError {
    #[error("cannot read {}", path.display())]
    Read { path: std::path::PathBuf, source: std::io::Error },
    #[error("prototype table {}", path.display())]
    Invalid { path: std::path::PathBuf, source: TableError },
}

/// The prototype table of a node or a command: the YAML file `file` when one is given, else the
/// built-in table `choice`.
pub fn prototype_table(file: Option<&std::path::Path>, choice: &TableChoice) -> Result<PrototypeTable, TableFileError> {
    let Some(path) = file else {
        return Ok(match choice {
            TableChoice::Document => PrototypeTable::document(),
            TableChoice::Firmware => PrototypeTable::firmware(),
        });
    };
    let text =
        std::fs::read_to_string(path).map_err(|source| TableFileError::Read { path: path.to_owned(), source })?;
    PrototypeTable::from_yaml(&text).map_err(|source| TableFileError::Invalid { path: path.to_owned(), source })
}
