//! `auto` device selection: find the step-driver Arduino by USB id or by its /dev/serial/by-id
//! name, never the sensor's port.

use std::path::{Path, PathBuf};

/// USB ids of the Arduino UNO and its common clones (Arduino, Arduino.org, WCH CH340).
pub const ARDUINO_USB_IDS: [(u16, u16); 3] = [(0x2341, 0x0043), (0x2a03, 0x0043), (0x1a86, 0x7523)];

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
    #[error("no Arduino found: none of {count} serial ports has an Arduino USB id or by-id name (other than the sensor's {sensor})")]
    NotFound { count: usize, sensor: String },
    #[error("cannot list serial ports: {0}")]
    Enumerate(String),
}

/// Picks the Arduino among `candidates`: first by USB id, then by a by-id name that says
/// Arduino; a candidate at `sensor` (resolved path) is never chosen.
pub fn choose_arduino<'a>(candidates: &'a [Candidate], sensor: &Path) -> Option<&'a Candidate> {
    let eligible = || candidates.iter().filter(|candidate| candidate.path != sensor);
    eligible().find(|candidate| candidate.usb_id.is_some_and(|id| ARDUINO_USB_IDS.contains(&id))).or_else(|| {
        eligible().find(|candidate| {
            candidate.by_id_name.as_deref().is_some_and(|name| name.to_ascii_lowercase().contains("arduino"))
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

/// Finds the Arduino on this machine, never at `sensor`.
pub fn find_arduino(sensor: &str) -> Result<PathBuf, DetectError> {
    let candidates = candidates()?;
    choose_arduino(&candidates, &resolve(Path::new(sensor)))
        .map(|candidate| candidate.path.clone())
        .ok_or(DetectError::NotFound { count: candidates.len(), sensor: sensor.to_owned() })
}

fn resolve(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
