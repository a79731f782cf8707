//! The lab's rig's ASCII line protocols, sans-IO (docs/rig.md).
//!
//! - Angle sensor (115200 8N1): `t,r,theta,phi` per line [s, m, rad, rad].
//! - Step-driver Arduino (250000 8N1): `F,fx,fy,fz,dirBits` per line: |f_i| in pulses/s with one
//!   decimal, bit i of dirBits set when f_i < 0.
//! - Trajectory segments for the HIL loop: `P,t,x,y,z,xd,yd,zd,xdd,ydd,zdd` per line.
//!
//! [`LineSplitter`] cuts a byte stream into lines of bounded length and resynchronises on the
//! next newline after an overlong line or bytes that are not UTF-8; the parsers name what is wrong
//! with a line and never panic.

use crate::control::Waypoint;
use crate::hil::stepper::StepRates;
use crate::model::math::Vec3;

/// Why a line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("expected {expected} comma-separated fields, found {found}")]
    FieldCount { expected: usize, found: usize },
    #[error("expected the line to start with `{expected}`")]
    Tag { expected: &'static str },
    #[error("field {index} (`{text}`) is not a finite number")]
    NotANumber { index: usize, text: String },
    #[error("direction bits `{text}` are not an integer in 0..=7")]
    DirectionBits { text: String },
}

/// Splits a byte stream into lines (`\n`, with an optional `\r` before it).
#[derive(Debug)]
pub struct LineSplitter {
    line: Vec<u8>,
    max_len: usize,
    discarding: bool,
    dropped_bytes: u64,
}

impl LineSplitter {
    /// Lines longer than `max_len` bytes are dropped whole.
    pub fn new(max_len: usize) -> LineSplitter {
        LineSplitter { line: Vec::with_capacity(max_len), max_len, discarding: false, dropped_bytes: 0 }
    }

    /// Bytes dropped so far: overlong lines and lines that are not UTF-8.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// Feeds bytes; calls `on_line` for every complete line, without its line ending.
    pub fn push(&mut self, bytes: &[u8], mut on_line: impl FnMut(&str)) {
        for &byte in bytes {
            if byte != b'\n' {
                if self.discarding {
                    self.dropped_bytes += 1;
                } else if self.line.len() == self.max_len {
                    self.dropped_bytes += self.line.len() as u64 + 1;
                    self.line.clear();
                    self.discarding = true;
                } else {
                    self.line.push(byte);
                }
                continue;
            }
            if self.discarding {
                self.discarding = false;
                continue;
            }
            let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            match std::str::from_utf8(line) {
                Ok(text) => on_line(text),
                Err(_) => self.dropped_bytes += self.line.len() as u64,
            }
            self.line.clear();
        }
    }
}

/// Parses `N` comma-separated finite numbers, after an optional tag field.
fn numbers<const N: usize>(line: &str, tag: Option<&'static str>) -> Result<[f64; N], LineError> {
    let mut fields = line.trim().split(',');
    if let Some(tag) = tag {
        if fields.next().map(str::trim) != Some(tag) {
            return Err(LineError::Tag { expected: tag });
        }
    }
    let offset = usize::from(tag.is_some());
    let mut values = [0.0; N];
    let mut found = 0;
    for (index, field) in fields.enumerate() {
        found = index + 1;
        if index < N {
            let text = field.trim();
            values[index] = text
                .parse::<f64>()
                .ok()
                .filter(|value| value.is_finite())
                .ok_or_else(|| LineError::NotANumber { index: index + offset, text: text.to_owned() })?;
        }
    }
    if found != N {
        return Err(LineError::FieldCount { expected: N + offset, found: found + offset });
    }
    Ok(values)
}

/// One angle-sensor line: time [s], range [m], polar angle from +z [rad], azimuth [rad].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SensorLine {
    pub t: f64,
    pub r: f64,
    pub theta: f64,
    pub phi: f64,
}

/// Parses `t,r,theta,phi`.
pub fn parse_sensor_line(line: &str) -> Result<SensorLine, LineError> {
    let [t, r, theta, phi] = numbers::<4>(line, None)?;
    Ok(SensorLine { t, r, theta, phi })
}

/// Writes `t,r,theta,phi\n` with enough digits for the sensor's resolution.
pub fn encode_sensor_line(sample: &SensorLine, buf: &mut Vec<u8>) {
    use std::io::Write;
    // Writing to a Vec cannot fail.
    let _ = writeln!(buf, "{:.6},{:.6},{:.6},{:.6}", sample.t, sample.r, sample.theta, sample.phi);
}

/// Writes `F,fx,fy,fz,dirBits\n`: magnitudes with one decimal, bit i set when f_i < 0.
pub fn encode_step_command(rates: &StepRates, buf: &mut Vec<u8>) {
    use std::io::Write;
    let rates = rates.quantised().0;
    let bits = (0..3).filter(|&i| rates[i] < 0.0).fold(0u8, |bits, i| bits | 1 << i);
    let [fx, fy, fz] = rates;
    // Writing to a Vec cannot fail.
    let _ = writeln!(buf, "F,{:.1},{:.1},{:.1},{bits}", fx.abs(), fy.abs(), fz.abs());
}

/// Parses `F,fx,fy,fz,dirBits` back into signed rates (the Arduino's side).
pub fn parse_step_command(line: &str) -> Result<StepRates, LineError> {
    let (head, bits_text) = line.trim().rsplit_once(',').ok_or(LineError::FieldCount { expected: 5, found: 1 })?;
    let magnitudes = numbers::<3>(head, Some("F")).map_err(|error| match error {
        LineError::FieldCount { expected, found } => LineError::FieldCount { expected: expected + 1, found: found + 1 },
        other => other,
    })?;
    let bits_text = bits_text.trim();
    let bits = bits_text
        .parse::<u8>()
        .ok()
        .filter(|bits| *bits <= 7)
        .ok_or_else(|| LineError::DirectionBits { text: bits_text.to_owned() })?;
    Ok(StepRates(std::array::from_fn(|i| if bits & (1 << i) != 0 { -magnitudes[i] } else { magnitudes[i] })))
}

/// Parses a trajectory segment line `P,t,x,y,z,xd,yd,zd,xdd,ydd,zdd`.
pub fn parse_trajectory_line(line: &str) -> Result<Waypoint, LineError> {
    let v = numbers::<10>(line, Some("P"))?;
    Ok(Waypoint {
        t: v[0],
        x: Vec3::new(v[1], v[2], v[3]),
        xd: Vec3::new(v[4], v[5], v[6]),
        xdd: Vec3::new(v[7], v[8], v[9]),
    })
}
