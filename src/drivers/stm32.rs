//! The STM32 driver: a thread that owns the serial port and runs [`Stm32Link`] on it, reopening
//! the port with backoff when it vanishes. The command line and the ROS node share this API.

use std::io::{Read, Write};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use super::stm32_link::{
    validate_command, ArmTelemetry, CommandError, ImuSi, ImuUnits, LinkEvent, LinkState, PollMode, Stm32Config,
    Stm32Link, STANDARD_GRAVITY,
};
use crate::protocol::stm32::{Command, ControlMode, Joint, PidGains};
use crate::serial;

/// What the driver reports.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverEvent {
    Link(LinkEvent),
    PortOpened {
        path: String,
    },
    /// The port could not be opened, or vanished; the driver retries after `retry_in`.
    PortUnavailable {
        path: String,
        reason: String,
        retry_in: Duration,
    },
}

/// Sends commands to a running driver; cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct Stm32Commander {
    requests: Sender<Request>,
}

impl Stm32Commander {
    /// Validates and queues a command. After the driver stopped, commands go nowhere.
    pub fn send(&self, command: Command) -> Result<(), CommandError> {
        validate_command(&command)?;
        let _ = self.requests.send(Request::Command(command));
        Ok(())
    }
}

#[derive(Debug)]
enum Request {
    Command(Command),
    Stop,
}

/// A running STM32 driver.
pub struct Stm32Driver {
    requests: Sender<Request>,
    events: Receiver<DriverEvent>,
    thread: Option<JoinHandle<()>>,
}

impl Stm32Driver {
    /// Starts the driver on `path`. It keeps trying to open the port; events tell how it goes.
    pub fn start(path: &str, config: Stm32Config) -> std::io::Result<Stm32Driver> {
        let (requests, requests_rx) = channel();
        let (events_tx, events) = channel();
        let path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("stm32-driver".into())
            .spawn(move || run(&path, config, &requests_rx, &events_tx))?;
        Ok(Stm32Driver { requests, events, thread: Some(thread) })
    }

    /// Validates and queues a command.
    pub fn send(&self, command: Command) -> Result<(), CommandError> {
        self.commander().send(command)
    }

    /// A handle that sends commands from other threads.
    pub fn commander(&self) -> Stm32Commander {
        Stm32Commander { requests: self.requests.clone() }
    }

    /// The driver's events, in order.
    pub fn events(&self) -> &Receiver<DriverEvent> {
        &self.events
    }

    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let _ = self.requests.send(Request::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Stm32Driver {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Longest a read waits, so that commands are picked up promptly.
const READ_SLICE: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

fn run(path: &str, config: Stm32Config, requests: &Receiver<Request>, events: &Sender<DriverEvent>) {
    let mut link = Stm32Link::new(config.clone(), Instant::now());
    let first_backoff = Duration::from_secs_f64(config.reopen_backoff_s);
    let mut backoff = first_backoff;
    let mut buf = [0u8; 256];
    let mut out = Vec::with_capacity(128);
    loop {
        let mut port = match serial::open(path, config.baud, READ_SLICE) {
            Ok(port) => port,
            Err(error) => {
                let _ = events.send(DriverEvent::PortUnavailable {
                    path: path.into(),
                    reason: error.to_string(),
                    retry_in: backoff,
                });
                if wait_or_stop(requests, backoff) {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = first_backoff;
        let _ = events.send(DriverEvent::PortOpened { path: path.into() });
        link.handle_port_opened(Instant::now());
        let lost = loop {
            match drain_requests(requests, &mut link) {
                Drained::Stop => return,
                Drained::Continue => {}
            }
            let now = Instant::now();
            if link.poll_timeout().is_some_and(|deadline| deadline <= now) {
                link.handle_timeout(now);
            }
            out.clear();
            while link.poll_transmit(now, &mut out) {}
            if let Err(error) = port.write_all(&out) {
                break error;
            }
            forward_events(&mut link, events);
            let wait =
                link.poll_timeout().map_or(READ_SLICE, |deadline| deadline.saturating_duration_since(Instant::now()));
            if let Err(error) = port.set_timeout(wait.clamp(Duration::from_millis(1), READ_SLICE)) {
                break error.into();
            }
            match port.read(&mut buf) {
                Ok(0) => {}
                Ok(read) => link.handle_bytes(Instant::now(), &buf[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {}
                Err(error) => break error,
            }
            forward_events(&mut link, events);
        };
        drop(port);
        link.handle_port_lost(Instant::now());
        forward_events(&mut link, events);
        let _ = events.send(DriverEvent::PortUnavailable {
            path: path.into(),
            reason: lost.to_string(),
            retry_in: backoff,
        });
        if wait_or_stop(requests, backoff) {
            return;
        }
    }
}

enum Drained {
    Continue,
    Stop,
}

fn drain_requests(requests: &Receiver<Request>, link: &mut Stm32Link) -> Drained {
    loop {
        match requests.try_recv() {
            Ok(Request::Command(command)) => {
                // Commands were validated by `send`.
                let _ = link.send(&command);
            }
            Ok(Request::Stop) | Err(TryRecvError::Disconnected) => return Drained::Stop,
            Err(TryRecvError::Empty) => return Drained::Continue,
        }
    }
}

/// Waits `delay` while the port is away; true when asked to stop. Commands sent meanwhile are
/// dropped: there is no firmware to take them.
fn wait_or_stop(requests: &Receiver<Request>, delay: Duration) -> bool {
    let until = Instant::now() + delay;
    loop {
        match requests.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Request::Command(_)) => continue,
            Ok(Request::Stop) | Err(RecvTimeoutError::Disconnected) => return true,
            Err(RecvTimeoutError::Timeout) => return false,
        }
    }
}

fn forward_events(link: &mut Stm32Link, events: &Sender<DriverEvent>) {
    while let Some(event) = link.poll_event() {
        let _ = events.send(DriverEvent::Link(event));
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
