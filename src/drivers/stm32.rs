//! The STM32 driver: [`Stm32Link`] run on the serial port by the shared link driver, which
//! reopens the port with backoff when it vanishes. The command line and the ROS node share it.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

pub use super::stm32_limits::{validate_command, CommandError, ANGLE_LIMIT};
pub use super::stm32_link::{
    ArmTelemetry, ImuSi, ImuUnits, LinkEvent, LinkState, PollMode, Stm32Config, Stm32Link, STANDARD_GRAVITY,
};
use crate::protocol::stm32::{Command, ControlMode, Joint, PidGains};
use crate::serial::link_driver::{Commander, LinkDriver, PortSettings, SerialLink, MIN_BACKOFF};

/// What the STM32 driver reports.
pub type DriverEvent = crate::serial::link_driver::DriverEvent<LinkEvent>;

impl SerialLink for Stm32Link {
    type Command = Command;
    type Event = LinkEvent;

    fn handle_command(&mut self, now: Instant, command: Command) {
        Stm32Link::handle_command(self, now, &command);
    }
    fn handle_port_opened(&mut self, now: Instant) {
        Stm32Link::handle_port_opened(self, now);
    }
    fn handle_port_lost(&mut self, now: Instant) {
        Stm32Link::handle_port_lost(self, now);
    }
    fn handle_shutdown(&mut self, now: Instant) {
        Stm32Link::handle_shutdown(self, now);
    }
    fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        Stm32Link::handle_bytes(self, now, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Stm32Link::handle_timeout(self, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Stm32Link::poll_timeout(self)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> bool {
        Stm32Link::poll_transmit(self, now, buf)
    }
    fn poll_event(&mut self) -> Option<LinkEvent> {
        Stm32Link::poll_event(self)
    }
}

/// Sends commands to a running STM32 driver, after validating them; cheap to clone.
#[derive(Clone)]
pub struct Stm32Commander(Commander<Command>);

impl Stm32Commander {
    /// Validates and queues a command.
    pub fn send(&self, command: Command) -> Result<(), CommandError> {
        validate_command(&command)?;
        self.0.send(command);
        Ok(())
    }
}

/// The longest wait before reopening a vanished port, which the first wait doubles up to.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The link's settings, each in the range it is taken in. Polling slower than 2.5 Hz would let
/// the firmware's 0.5 s watchdog idle the servos between two polls.
fn check_settings(config: &Stm32Config) -> std::io::Result<()> {
    super::check_link_settings(&[
        ("poll_rate_hz", config.poll_rate_hz, 2.5..=1000.0),
        ("degraded_after_s", config.degraded_after_s, 0.001..=config.disconnected_after_s.min(60.0)),
        ("disconnected_after_s", config.disconnected_after_s, 0.001..=60.0),
        ("reconnect_interval_s", config.reconnect_interval_s, 0.001..=60.0),
        ("ack_timeout_s", config.ack_timeout_s, 0.001..=60.0),
        ("reopen_backoff_s", config.reopen_backoff_s, MIN_BACKOFF.as_secs_f64()..=MAX_BACKOFF.as_secs_f64()),
        ("reconnect_attempts", f64::from(config.reconnect_attempts), 1.0..=1000.0),
        ("command_retries", f64::from(config.command_retries), 0.0..=100.0),
    ])
}

/// A running STM32 driver.
pub struct Stm32Driver(LinkDriver<Stm32Link>);

impl Stm32Driver {
    /// Starts the driver on `path`. It keeps trying to open the port; events tell how it goes.
    pub fn start(path: &str, config: Stm32Config) -> std::io::Result<Stm32Driver> {
        check_settings(&config)?;
        let port = PortSettings {
            path: path.to_owned(),
            baud: config.baud,
            backoff: Duration::from_secs_f64(config.reopen_backoff_s),
            max_backoff: MAX_BACKOFF,
        };
        let link = Stm32Link::new(config, Instant::now());
        Ok(Stm32Driver(LinkDriver::start("stm32-driver", port, link)?))
    }

    /// Validates and queues a command.
    pub fn send(&self, command: Command) -> Result<(), CommandError> {
        self.commander().send(command)
    }

    /// A handle that sends commands from other threads.
    pub fn commander(&self) -> Stm32Commander {
        Stm32Commander(self.0.commander())
    }

    /// The driver's events, in order.
    pub fn events(&self) -> &Receiver<DriverEvent> {
        self.0.events()
    }

    pub fn stop(self) {
        self.0.stop();
    }
}

/// Parses a console command: `angles <shoulder> <elbow>` [rad], `angle <shoulder|elbow> <rad>`,
/// `pid <kp> <ki> <kd> <kp> <ki> <kd>` (shoulder then elbow), `pid <shoulder|elbow> <kp> <ki> <kd>`,
/// `mode <idle|position|trajectory>`, `reset`, `calibrate`, `telemetry`.
pub fn parse_console_command(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let numbers = |words: &[&str]| -> Result<Vec<f32>, String> {
        words.iter().map(|word| word.parse::<f32>().map_err(|_| format!("`{word}` is not a number"))).collect()
    };
    let joint = |word: &str| match word {
        "shoulder" | "0" => Ok(Joint::Shoulder),
        "elbow" | "1" => Ok(Joint::Elbow),
        _ => Err(format!("`{word}` is not a joint (shoulder or elbow)")),
    };
    let gains = |v: &[f32]| PidGains { kp: v[0], ki: v[1], kd: v[2] };
    match words.as_slice() {
        ["angles", rest @ ..] if rest.len() == 2 => {
            let v = numbers(rest)?;
            Ok(Command::SetJointAngles { shoulder: v[0], elbow: v[1] })
        }
        ["angle", which, value] => Ok(Command::SetJointAngleSingle { joint: joint(which)?, angle: numbers(&[value])?[0] }),
        ["pid", rest @ ..] if rest.len() == 6 => {
            let v = numbers(rest)?;
            Ok(Command::SetPidGains { shoulder: gains(&v[..3]), elbow: gains(&v[3..]) })
        }
        ["pid", which, rest @ ..] if rest.len() == 3 => {
            Ok(Command::SetPidGainsSingle { joint: joint(which)?, gains: gains(&numbers(rest)?) })
        }
        ["mode", "idle"] => Ok(Command::SetMode(ControlMode::Idle)),
        ["mode", "position"] => Ok(Command::SetMode(ControlMode::Position)),
        ["mode", "trajectory"] => Ok(Command::SetMode(ControlMode::Trajectory)),
        ["reset"] => Ok(Command::SystemReset),
        ["calibrate"] => Ok(Command::CalibrateImu),
        ["telemetry"] => Ok(Command::GetTelemetry),
        _ => Err(format!(
            "unknown command `{}`: try angles S E, angle JOINT A, pid KP KI KD KP KI KD, pid JOINT KP KI KD, mode idle|position|trajectory, reset, calibrate, telemetry",
            line.trim()
        )),
    }
}
