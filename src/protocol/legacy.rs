//! The port-5555 binary protocol (docs/port5555.md), sans-IO.
//!
//! Client to server: a handshake (mode byte; for `H` two u8-length-prefixed device names), then
//! the trajectory payload (i32 n, elbow f64 x 3, l_arm f64, n waypoints of 10 f64). Server to
//! client: for SIL a 12-byte header (f64 end_time, i32 n), then in both modes 128-byte frames and
//! one end-marker frame at t = end_time with tau = 0, and for SIL n 80-byte ideal blocks. A HIL
//! response has no header: the lab's client reads frames from its first byte, knowing end_time
//! from its own last waypoint. Little-endian, packed.
//!
//! The protocol has no framing marks to resynchronise on: a request that breaks the grammar is
//! refused as a whole ([`RequestError`]) and the connection closed. Decoders consume bytes as they
//! come, in any split, and never panic; counts are checked before anything is allocated.

use crate::control::Waypoint;
use crate::model::math::Vec3;
use crate::sim::{Frame, IdealPoint};

/// Bytes of one waypoint: t, x[3], x_dot[3], x_ddot[3].
pub const WAYPOINT_BYTES: usize = 80;
/// Bytes of one frame: t, x[3], x_dot[3], theta[3], theta_dot[3], tau[3].
pub const FRAME_BYTES: usize = 128;
/// Bytes of one ideal block: t, theta[3], theta_dot[3], tau_ideal[3].
pub const IDEAL_BYTES: usize = 80;
/// Bytes of the SIL response header: f64 end_time, i32 n.
pub const HEADER_BYTES: usize = 12;
/// Bytes of the payload before the waypoints: i32 n, elbow[3], l_arm.
pub const PREFIX_BYTES: usize = 36;
/// Sensor device of an `H` handshake that names none.
pub const DEFAULT_SENSOR_DEVICE: &str = "/dev/ttyUSB0";
/// Arduino device of an `H` handshake that names none: find it by USB id.
pub const DEFAULT_ARDUINO_DEVICE: &str = "auto";

/// What a client asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `S`: software in the loop.
    Sil,
    /// `H`: hardware in the loop on these serial devices.
    Hil { sensor: String, arduino: String },
}

/// A whole client request: handshake plus trajectory payload, not yet validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub mode: Mode,
    /// Elbow pivot [m].
    pub elbow: Vec3,
    /// Forearm length [m].
    pub l_arm: f64,
    pub waypoints: Vec<Waypoint>,
}

/// Why a request was refused before its trajectory could be looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("unknown mode byte 0x{byte:02x} (expected 'S' or 'H')")]
    UnknownMode { byte: u8 },
    #[error("the {which} device name is not UTF-8")]
    DeviceNotUtf8 { which: &'static str },
    #[error("waypoint count {n} is outside 1..={max}")]
    BadCount { n: i32, max: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Device {
    Sensor,
    Arduino,
}

impl Device {
    fn name(self) -> &'static str {
        match self {
            Device::Sensor => "sensor",
            Device::Arduino => "Arduino",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestState {
    Mode,
    DeviceLength(Device),
    DeviceName(Device, usize),
    Prefix,
    Waypoints,
}

/// Incremental decoder of one request: feed it bytes as they arrive.
#[derive(Debug)]
pub struct RequestDecoder {
    max_waypoints: usize,
    state: RequestState,
    /// Bytes of the field being read; never more than 255.
    staged: Vec<u8>,
    hil_devices: Option<(String, String)>,
    count: usize,
    elbow: Vec3,
    l_arm: f64,
    waypoints: Vec<Waypoint>,
}

impl RequestDecoder {
    /// Waypoint storage grows by at most this many at a time, so that a client that announces a
    /// large count and sends little costs little.
    const GROWTH_STEP: usize = 65_536;

    /// A decoder that refuses counts above `max_waypoints`.
    pub fn new(max_waypoints: usize) -> RequestDecoder {
        RequestDecoder {
            max_waypoints,
            state: RequestState::Mode,
            staged: Vec::with_capacity(PREFIX_BYTES),
            hil_devices: None,
            count: 0,
            elbow: Vec3::zeros(),
            l_arm: 0.0,
            waypoints: Vec::new(),
        }
    }

    /// Waypoints received so far (for logs).
    pub fn waypoints_received(&self) -> usize {
        self.waypoints.len()
    }

    /// Consumes bytes from the front of `input`. Returns how many were consumed and, once the
    /// request is complete, the request; bytes after it are left unconsumed. After an error or a
    /// complete request the decoder must not be fed again.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<Request>), RequestError> {
        let mut consumed = 0;
        loop {
            let need = self.field_len();
            let take = (need - self.staged.len()).min(input.len() - consumed);
            self.staged.extend_from_slice(&input[consumed..consumed + take]);
            consumed += take;
            if self.staged.len() < need {
                return Ok((consumed, None));
            }
            let field = std::mem::take(&mut self.staged);
            let finished = self.field_complete(&field)?;
            self.staged = field;
            self.staged.clear();
            if finished {
                return Ok((consumed, Some(self.take_request())));
            }
        }
    }

    fn field_len(&self) -> usize {
        match self.state {
            RequestState::Mode | RequestState::DeviceLength(_) => 1,
            RequestState::DeviceName(_, len) => len,
            RequestState::Prefix => PREFIX_BYTES,
            RequestState::Waypoints => WAYPOINT_BYTES,
        }
    }

    /// Handles a complete field; true when the request is complete.
    fn field_complete(&mut self, field: &[u8]) -> Result<bool, RequestError> {
        match self.state {
            RequestState::Mode => {
                self.state = match field[0] {
                    b'S' => RequestState::Prefix,
                    b'H' => RequestState::DeviceLength(Device::Sensor),
                    byte => return Err(RequestError::UnknownMode { byte }),
                };
            }
            RequestState::DeviceLength(device) => self.state = RequestState::DeviceName(device, usize::from(field[0])),
            RequestState::DeviceName(device, _) => {
                let name =
                    std::str::from_utf8(field).map_err(|_| RequestError::DeviceNotUtf8 { which: device.name() })?;
                let devices = self.hil_devices.get_or_insert_with(Default::default);
                match device {
                    Device::Sensor => {
                        devices.0 = name.to_owned();
                        self.state = RequestState::DeviceLength(Device::Arduino);
                    }
                    Device::Arduino => {
                        devices.1 = name.to_owned();
                        self.state = RequestState::Prefix;
                    }
                }
            }
            RequestState::Prefix => {
                let n = i32::from_le_bytes(field[0..4].try_into().expect("4 bytes"));
                let count = usize::try_from(n).ok().filter(|&count| (1..=self.max_waypoints).contains(&count));
                self.count = count.ok_or(RequestError::BadCount { n, max: self.max_waypoints })?;
                let values = read_f64s::<4>(&field[4..]);
                self.elbow = Vec3::new(values[0], values[1], values[2]);
                self.l_arm = values[3];
                self.waypoints.reserve_exact(self.count.min(Self::GROWTH_STEP));
                self.state = RequestState::Waypoints;
            }
            RequestState::Waypoints => {
                if self.waypoints.len() == self.waypoints.capacity() {
                    let remaining = self.count - self.waypoints.len();
                    self.waypoints.reserve_exact(remaining.min(self.waypoints.len().max(Self::GROWTH_STEP)));
                }
                let v = read_f64s::<10>(field);
                self.waypoints.push(Waypoint {
                    t: v[0],
                    x: Vec3::new(v[1], v[2], v[3]),
                    xd: Vec3::new(v[4], v[5], v[6]),
                    xdd: Vec3::new(v[7], v[8], v[9]),
                });
                return Ok(self.waypoints.len() == self.count);
            }
        }
        Ok(false)
    }

    fn take_request(&mut self) -> Request {
        let mode = match self.hil_devices.take() {
            None => Mode::Sil,
            Some((sensor, arduino)) => Mode::Hil {
                sensor: if sensor.is_empty() { DEFAULT_SENSOR_DEVICE.to_owned() } else { sensor },
                arduino: if arduino.is_empty() { DEFAULT_ARDUINO_DEVICE.to_owned() } else { arduino },
            },
        };
        Request { mode, elbow: self.elbow, l_arm: self.l_arm, waypoints: std::mem::take(&mut self.waypoints) }
    }
}

fn read_f64s<const N: usize>(bytes: &[u8]) -> [f64; N] {
    std::array::from_fn(|i| f64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes")))
}

fn put_f64s(values: &[f64], buf: &mut Vec<u8>) {
    for value in values {
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_vec3(v: &Vec3, buf: &mut Vec<u8>) {
    put_f64s(v.as_slice(), buf);
}

/// Encodes a request as a client sends it. Device names longer than 255 bytes are cut, as the
/// u8 length cannot say more.
pub fn encode_request(request: &Request, buf: &mut Vec<u8>) {
    match &request.mode {
        Mode::Sil => buf.push(b'S'),
        Mode::Hil { sensor, arduino } => {
            buf.push(b'H');
            for name in [sensor, arduino] {
                let bytes = &name.as_bytes()[..name.len().min(255)];
                buf.push(bytes.len() as u8);
                buf.extend_from_slice(bytes);
            }
        }
    }
    let n = i32::try_from(request.waypoints.len()).unwrap_or(i32::MAX);
    buf.extend_from_slice(&n.to_le_bytes());
    put_vec3(&request.elbow, buf);
    put_f64s(&[request.l_arm], buf);
    for w in &request.waypoints {
        put_f64s(&[w.t], buf);
        put_vec3(&w.x, buf);
        put_vec3(&w.xd, buf);
        put_vec3(&w.xdd, buf);
    }
}

/// Encodes the SIL response header: end_time [s] and the waypoint count.
pub fn encode_header(end_time: f64, n: i32, buf: &mut Vec<u8>) {
    put_f64s(&[end_time], buf);
    buf.extend_from_slice(&n.to_le_bytes());
}

/// Encodes one 128-byte frame.
pub fn encode_frame(frame: &Frame, buf: &mut Vec<u8>) {
    put_f64s(&[frame.t], buf);
    for v in [&frame.x, &frame.x_dot, &frame.theta, &frame.theta_dot, &frame.tau] {
        put_vec3(v, buf);
    }
}

/// The end-marker frame: the final state at t = end_time with tau = 0 (docs/port5555.md).
pub fn end_marker(last: &Frame, end_time: f64) -> Frame {
    Frame { t: end_time, tau: Vec3::zeros(), ..*last }
}

/// Encodes one 80-byte ideal block.
pub fn encode_ideal(point: &IdealPoint, buf: &mut Vec<u8>) {
    put_f64s(&[point.t], buf);
    for v in [&point.theta, &point.theta_dot, &point.tau] {
        put_vec3(v, buf);
    }
}

/// One item of a server's response, as a client reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseItem {
    /// End time [s] and the waypoint count (SIL only).
    Header { end_time: f64, n: i32 },
    /// A frame before the end marker.
    Frame(Frame),
    /// The frame at t >= end_time that closes the frame stream.
    EndMarker(Frame),
    /// An ideal block (SIL only).
    Ideal(IdealPoint),
}

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResponseError {
    #[error("the header's waypoint count {n} is negative")]
    NegativeCount { n: i32 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ResponseState {
    Header,
    Frames { end_time: f64, n: usize },
    Ideal { remaining: usize },
    Done,
}

/// Incremental decoder of a response, the client's side (the lab GUI's reading rules: for SIL the
/// header, then frames until one has t >= end_time, then n ideal blocks; for HIL frames from the
/// first byte until one has t >= the end_time the client sent).
#[derive(Debug)]
pub struct ResponseDecoder {
    state: ResponseState,
    staged: Vec<u8>,
}

impl ResponseDecoder {
    /// Reads a SIL response: header, frames, end marker, ideal blocks.
    pub fn sil() -> ResponseDecoder {
        ResponseDecoder { state: ResponseState::Header, staged: Vec::with_capacity(FRAME_BYTES) }
    }

    /// Reads a HIL response to a trajectory whose last waypoint is at `end_time` [s]: frames up to
    /// the end marker, no header and no ideal blocks.
    pub fn hil(end_time: f64) -> ResponseDecoder {
        // No ideal blocks follow a HIL end marker.
        ResponseDecoder { state: ResponseState::Frames { end_time, n: 0 }, staged: Vec::with_capacity(FRAME_BYTES) }
    }

    /// True once the whole response has been read.
    pub fn is_done(&self) -> bool {
        self.state == ResponseState::Done
    }

    /// Consumes bytes from the front of `input` up to the end of the next item.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<ResponseItem>), ResponseError> {
        let need = match self.state {
            ResponseState::Header => HEADER_BYTES,
            ResponseState::Frames { .. } => FRAME_BYTES,
            ResponseState::Ideal { .. } => IDEAL_BYTES,
            ResponseState::Done => return Ok((0, None)),
        };
        let take = (need - self.staged.len()).min(input.len());
        self.staged.extend_from_slice(&input[..take]);
        if self.staged.len() < need {
            return Ok((take, None));
        }
        let item = self.item_complete()?;
        self.staged.clear();
        Ok((take, Some(item)))
    }

    fn item_complete(&mut self) -> Result<ResponseItem, ResponseError> {
        let bytes = &self.staged;
        match self.state {
            ResponseState::Header => {
                let end_time = read_f64s::<1>(bytes)[0];
                let n = i32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
                let count = usize::try_from(n).map_err(|_| ResponseError::NegativeCount { n })?;
                self.state = ResponseState::Frames { end_time, n: count };
                Ok(ResponseItem::Header { end_time, n })
            }
            ResponseState::Frames { end_time, n } => {
                let v = read_f64s::<16>(bytes);
                let vec3 = |i: usize| Vec3::new(v[i], v[i + 1], v[i + 2]);
                let frame = Frame {
                    t: v[0],
                    x: vec3(1),
                    x_dot: vec3(4),
                    theta: vec3(7),
                    theta_dot: vec3(10),
                    tau: vec3(13),
                    x_ref: Vec3::zeros(),
                    xd_ref: Vec3::zeros(),
                };
                if !(frame.t >= end_time) {
                    return Ok(ResponseItem::Frame(frame));
                }
                self.state = if n > 0 { ResponseState::Ideal { remaining: n } } else { ResponseState::Done };
                Ok(ResponseItem::EndMarker(frame))
            }
            ResponseState::Ideal { remaining } => {
                let v = read_f64s::<10>(bytes);
                let vec3 = |i: usize| Vec3::new(v[i], v[i + 1], v[i + 2]);
                self.state =
                    if remaining > 1 { ResponseState::Ideal { remaining: remaining - 1 } } else { ResponseState::Done };
                Ok(ResponseItem::Ideal(IdealPoint { t: v[0], theta: vec3(1), theta_dot: vec3(4), tau: vec3(7) }))
            }
            ResponseState::Done => unreachable!("decode returns before reading in the Done state"),
        }
    }
}
