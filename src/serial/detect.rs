//! `auto` device selection: find a device (the rig's step-driver Arduino, the STM32 arm's
//! ST-LINK, the finger testbench's MCU) by USB id or by its /dev/serial/by-id name, never at a
//! port that is taken (the rig's sensor).

use std::path::{Path, PathBuf};

/// USB ids of the Arduino UNO and its common clones (Arduino, Arduino.org, WCH CH340).
pub const ARDUINO_USB_IDS: [(u16, u16); 3] = [(0x2341, 0x0043), (0x2a03, 0x0043), (0x1a86, 0x7523)];

/// USB ids of the ST-LINK probes whose serial port a NUCLEO board offers (V2-1, V3).
pub const STLINK_USB_IDS: [(u16, u16); 5] =
    [(0x0483, 0x374b), (0x0483, 0x374e), (0x0483, 0x374f), (0x0483, 0x3753), (0x0483, 0x3754)];

/// USB ids of the finger testbench's MCU: an Arduino, or a Teensy.
pub const TESTBENCH_USB_IDS: [(u16, u16); 4] = [(0x2341, 0x0043), (0x2a03, 0x0043), (0x1a86, 0x7523), (0x16c0, 0x0483)];

/// A device `auto` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// The lab's rig's step-driver Arduino.
    RigArduino,
    /// The STM32 arm's NUCLEO board (its ST-LINK's serial port).
    Stm32,
    /// The finger testbench's Arduino-class MCU.
    Testbench,
}

impl DeviceKind {
    fn usb_ids(self) -> &'static [(u16, u16)] {
        match self {
            DeviceKind::RigArduino => &ARDUINO_USB_IDS,
            DeviceKind::Stm32 => &STLINK_USB_IDS,
            DeviceKind::Testbench => &TESTBENCH_USB_IDS,
        }
    }

    /// Words of its /dev/serial/by-id names (lower case).
    fn names(self) -> &'static [&'static str] {
        match self {
            DeviceKind::RigArduino => &["arduino"],
            DeviceKind::Stm32 => &["stm32", "stlink", "st-link"],
            DeviceKind::Testbench => &["arduino", "teensy"],
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceKind::RigArduino => "step-driver Arduino",
            DeviceKind::Stm32 => "STM32 (ST-LINK)",
            DeviceKind::Testbench => "finger testbench MCU (Arduino or Teensy)",
        })
    }
}

/// A serial port as enumeration sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Device path, with symbolic links resolved.
    pub path: PathBuf,
    /// USB vendor and product id, for USB ports.
    pub usb_id: Option<(u16, u16)>,
    /// File name of the /dev/serial/by-id link that points at the port, if any.
    pub by_id_name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("no {kind} found: none of {count} serial ports has its USB id or by-id name{}; name the port (see /dev/serial/by-id)", taken.as_ref().map(|taken| format!(" (other than {taken})")).unwrap_or_default())]
    NotFound { kind: DeviceKind, count: usize, taken: Option<String> },
    #[error("cannot list serial ports: {0}")]
    Enumerate(String),
}

/// A device not found is a port that cannot be opened, for code that opens ports.
impl From<DetectError> for std::io::Error {
    fn from(error: DetectError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, error.to_string())
    }
}

/// Picks the device of `kind` among `candidates`: first by USB id, then by a by-id name that
/// says what it is; a candidate at `taken` (a resolved path, the rig's sensor) is never chosen.
pub fn choose<'a>(candidates: &'a [Candidate], kind: DeviceKind, taken: Option<&Path>) -> Option<&'a Candidate> {
    let eligible = || candidates.iter().filter(|candidate| Some(candidate.path.as_path()) != taken);
    eligible().find(|candidate| candidate.usb_id.is_some_and(|id| kind.usb_ids().contains(&id))).or_else(|| {
        eligible().find(|candidate| {
            let name = candidate.by_id_name.as_deref().unwrap_or_default().to_ascii_lowercase();
            kind.names().iter().any(|word| name.contains(word))
        })
    })
}

/// Lists this machine's serial ports with their USB ids and by-id names.
pub fn candidates() -> Result<Vec<Candidate>, DetectError> {
    // serialport's sysfs scan panics where /sys/class/tty is missing (some containers).
    if !Path::new("/sys/class/tty").is_dir() {
        return Err(DetectError::Enumerate("/sys/class/tty does not exist".into()));
    }
    let ports = serialport::available_ports().map_err(|error| DetectError::Enumerate(error.to_string()))?;
    let by_id: Vec<(String, PathBuf)> = std::fs::read_dir("/dev/serial/by-id")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.file_name().to_string_lossy().into_owned(), entry.path().canonicalize().ok()?)))
        .collect();
    Ok(ports
        .into_iter()
        .map(|port| {
            let path = resolve(Path::new(&port.port_name));
            let usb_id = match port.port_type {
                serialport::SerialPortType::UsbPort(usb) => Some((usb.vid, usb.pid)),
                _ => None,
            };
            let by_id_name = by_id.iter().find(|(_, target)| *target == path).map(|(name, _)| name.clone());
            Candidate { path, usb_id, by_id_name }
        })
        .collect())
}

/// Finds the device of `kind` on this machine, never at `taken`.
pub fn find(kind: DeviceKind, taken: Option<&str>) -> Result<PathBuf, DetectError> {
    let candidates = candidates()?;
    let taken_path = taken.map(|taken| resolve(Path::new(taken)));
    choose(&candidates, kind, taken_path.as_deref())
        .map(|candidate| candidate.path.clone())
        .ok_or(DetectError::NotFound { kind, count: candidates.len(), taken: taken.map(str::to_owned) })
}

/// The port a node opens: `port` as given, or for `auto` where the device of `kind` is found.
pub fn resolve_port(port: &str, kind: DeviceKind) -> Result<PathBuf, DetectError> {
    match port {
        "auto" => {
            let found = find(kind, None)?;
            log::info!("{kind} found at {}", found.display());
            Ok(found)
        }
        port => Ok(PathBuf::from(port)),
    }
}

fn resolve(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
