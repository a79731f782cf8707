//! The STM32 arm's serial protocol (docs/stm32.md), sans-IO.
//!
//! Packet: `0xAA | TYPE | LENGTH | DATA (0..=64) | CRC-8`, CRC over TYPE, LENGTH and DATA
//! (poly 0x07, init 0, no reflection, no final XOR). Little-endian fields.
//!
//! docs/stm32.md: the lab's firmware differs from the protocol's source; both are decoded: TELEMETRY_FULL carries 52
//! bytes (the document's 40 is wrong), ANGLES_ONLY 12 (document) or 8 (firmware: no timestamp),
//! ACK 1 (document) or 0 (firmware), ERROR_RESPONSE code + command + text (document) or 0
//! (firmware). [`LengthStyle`] picks which an encoder writes.

/// First byte of every packet.
pub const HEADER: u8 = 0xAA;
/// Largest DATA field.
pub const MAX_DATA: usize = 64;

/// Packet types.
pub mod kind {
    pub const SET_JOINT_ANGLES: u8 = 0x10;
    pub const SET_JOINT_ANGLE_SINGLE: u8 = 0x11;
    pub const GET_TELEMETRY: u8 = 0x20;
    pub const SYSTEM_RESET: u8 = 0x30;
    pub const CALIBRATE_IMU: u8 = 0x31;
    pub const SET_PID_GAINS: u8 = 0x40;
    pub const SET_PID_GAINS_SINGLE: u8 = 0x41;
    pub const SET_MODE: u8 = 0x50;
    pub const SET_TRAJECTORY_POINT: u8 = 0x60;
    pub const DEBUG_COMMAND: u8 = 0x70;
    pub const TELEMETRY_FULL: u8 = 0x01;
    pub const TELEMETRY_ANGLES_ONLY: u8 = 0x02;
    pub const TELEMETRY_IMU_ONLY: u8 = 0x03;
    pub const ERROR_RESPONSE: u8 = 0xF0;
    pub const ACK: u8 = 0xF1;
}

/// Error codes of ERROR_RESPONSE.
pub mod error_code {
    pub const INVALID_CMD: u8 = 0x01;
    pub const CRC_MISMATCH: u8 = 0x02;
    pub const OUT_OF_RANGE: u8 = 0x03;
    pub const TIMEOUT: u8 = 0x04;
    pub const HARDWARE: u8 = 0x05;
    pub const BUSY: u8 = 0x06;
}

/// CRC-8, polynomial 0x07, initial value 0, no reflection, no final XOR.
pub fn crc8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |crc, &byte| {
        (0..8).fold(crc ^ byte, |crc, _| if crc & 0x80 != 0 { (crc << 1) ^ 0x07 } else { crc << 1 })
    })
}

/// A joint of the 2-DOF arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joint {
    Shoulder = 0,
    Elbow = 1,
}

/// PID gains of one joint, as the firmware takes them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PidGains {
    pub kp: f32,
    pub ki: f32,
    pub kd: f32,
}

/// The firmware's control modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlMode {
    Idle = 0,
    Position = 1,
    Trajectory = 2,
}

/// Packets to the firmware.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Target angles [rad].
    SetJointAngles {
        shoulder: f32,
        elbow: f32,
    },
    SetJointAngleSingle {
        joint: Joint,
        angle: f32,
    },
    GetTelemetry,
    SystemReset,
    CalibrateImu,
    SetPidGains {
        shoulder: PidGains,
        elbow: PidGains,
    },
    SetPidGainsSingle {
        joint: Joint,
        gains: PidGains,
    },
    SetMode(ControlMode),
    /// A trajectory waypoint: angles [rad], time to reach it [s], reserved flags.
    SetTrajectoryPoint {
        shoulder: f32,
        elbow: f32,
        duration: f32,
        flags: u32,
    },
    /// Development-only commands, at most 64 bytes.
    Debug(Vec<u8>),
}

impl Command {
    /// The joints whose targets it sets: (shoulder, elbow).
    pub fn targets_set(&self) -> [bool; 2] {
        match self {
            Command::SetJointAngles { .. } => [true; 2],
            Command::SetJointAngleSingle { joint, .. } => [*joint == Joint::Shoulder, *joint == Joint::Elbow],
            _ => [false; 2],
        }
    }

    /// The packet type byte.
    pub fn kind(&self) -> u8 {
        match self {
            Command::SetJointAngles { .. } => kind::SET_JOINT_ANGLES,
            Command::SetJointAngleSingle { .. } => kind::SET_JOINT_ANGLE_SINGLE,
            Command::GetTelemetry => kind::GET_TELEMETRY,
            Command::SystemReset => kind::SYSTEM_RESET,
            Command::CalibrateImu => kind::CALIBRATE_IMU,
            Command::SetPidGains { .. } => kind::SET_PID_GAINS,
            Command::SetPidGainsSingle { .. } => kind::SET_PID_GAINS_SINGLE,
            Command::SetMode(_) => kind::SET_MODE,
            Command::SetTrajectoryPoint { .. } => kind::SET_TRAJECTORY_POINT,
            Command::Debug(_) => kind::DEBUG_COMMAND,
        }
    }
}

/// IMU sample as the wire carries it: accelerations and rates in the firmware's units (the
/// document says m/s^2 and rad/s, the firmware sends g and deg/s), fused roll and pitch [rad].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ImuSample {
    pub accel: [f32; 3],
    pub gyro: [f32; 3],
    pub orientation: [f32; 2],
}

/// TELEMETRY_FULL.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FullTelemetry {
    pub timestamp_ms: u32,
    /// Shoulder, elbow [rad].
    pub angles: [f32; 2],
    /// Shoulder, elbow [rad/s].
    pub velocities: [f32; 2],
    pub imu: ImuSample,
}

/// Packets from the firmware.
#[derive(Debug, Clone, PartialEq)]
pub enum Telemetry {
    Full(FullTelemetry),
    /// Angles [rad]; the firmware's 8-byte form has no timestamp.
    AnglesOnly {
        timestamp_ms: Option<u32>,
        angles: [f32; 2],
    },
    ImuOnly {
        timestamp_ms: u32,
        imu: ImuSample,
    },
    /// The firmware's form carries nothing: every field is `None`.
    Error {
        code: Option<u8>,
        failed_command: Option<u8>,
        message: String,
    },
    /// The firmware's form does not say which command.
    Ack {
        command: Option<u8>,
    },
}

/// Which lengths an encoder writes for the packets whose length the firmware changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthStyle {
    /// As the protocol document says (docs/stm32.md).
    Document,
    /// As the lab's firmware sends (docs/stm32.md).
    Firmware,
}

/// A packet whose frame was valid but whose payload cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("unknown packet type 0x{kind:02x}")]
    UnknownType { kind: u8 },
    #[error("packet type 0x{kind:02x} cannot carry {len} data bytes")]
    BadLength { kind: u8, len: usize },
    #[error("packet type 0x{kind:02x} has an invalid value: {what}")]
    BadValue { kind: u8, what: &'static str },
}

/// A decoded packet: its type and DATA, CRC checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPacket {
    pub kind: u8,
    pub data: Vec<u8>,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        let value = self.0[0];
        self.0 = &self.0[1..];
        value
    }
    fn u32(&mut self) -> u32 {
        let value = u32::from_le_bytes(self.0[..4].try_into().expect("4 bytes"));
        self.0 = &self.0[4..];
        value
    }
    fn f32(&mut self) -> f32 {
        f32::from_bits(self.u32())
    }
    fn f32s<const N: usize>(&mut self) -> [f32; N] {
        std::array::from_fn(|_| self.f32())
    }
    fn gains(&mut self) -> PidGains {
        let [kp, ki, kd] = self.f32s::<3>();
        PidGains { kp, ki, kd }
    }
    fn imu(&mut self) -> ImuSample {
        ImuSample { accel: self.f32s(), gyro: self.f32s(), orientation: self.f32s() }
    }
}

fn joint(kind: u8, id: u8) -> Result<Joint, PayloadError> {
    match id {
        0 => Ok(Joint::Shoulder),
        1 => Ok(Joint::Elbow),
        _ => Err(PayloadError::BadValue { kind, what: "joint id is not 0 or 1" }),
    }
}

impl RawPacket {
    /// Decodes a command (what the firmware receives).
    pub fn command(&self) -> Result<Command, PayloadError> {
        let (kind, len) = (self.kind, self.data.len());
        let expect = |wanted: usize| if len == wanted { Ok(()) } else { Err(PayloadError::BadLength { kind, len }) };
        let mut r = Reader(&self.data);
        Ok(match kind {
            kind::SET_JOINT_ANGLES => {
                expect(8)?;
                let [shoulder, elbow] = r.f32s();
                Command::SetJointAngles { shoulder, elbow }
            }
            kind::SET_JOINT_ANGLE_SINGLE => {
                expect(5)?;
                Command::SetJointAngleSingle { joint: joint(kind, r.u8())?, angle: r.f32() }
            }
            kind::GET_TELEMETRY => expect(0).map(|()| Command::GetTelemetry)?,
            kind::SYSTEM_RESET => expect(0).map(|()| Command::SystemReset)?,
            kind::CALIBRATE_IMU => expect(0).map(|()| Command::CalibrateImu)?,
            kind::SET_PID_GAINS => {
                expect(24)?;
                Command::SetPidGains { shoulder: r.gains(), elbow: r.gains() }
            }
            kind::SET_PID_GAINS_SINGLE => {
                expect(13)?;
                Command::SetPidGainsSingle { joint: joint(kind, r.u8())?, gains: r.gains() }
            }
            kind::SET_MODE => {
                expect(1)?;
                Command::SetMode(match r.u8() {
                    0 => ControlMode::Idle,
                    1 => ControlMode::Position,
                    2 => ControlMode::Trajectory,
                    _ => return Err(PayloadError::BadValue { kind, what: "mode is not 0, 1 or 2" }),
                })
            }
            kind::SET_TRAJECTORY_POINT => {
                expect(16)?;
                let [shoulder, elbow, duration] = r.f32s();
                Command::SetTrajectoryPoint { shoulder, elbow, duration, flags: r.u32() }
            }
            kind::DEBUG_COMMAND => Command::Debug(self.data.clone()),
            _ => return Err(PayloadError::UnknownType { kind }),
        })
    }

    /// Decodes telemetry (what the driver receives), in either length convention.
    pub fn telemetry(&self) -> Result<Telemetry, PayloadError> {
        let (kind, len) = (self.kind, self.data.len());
        let bad_length = PayloadError::BadLength { kind, len };
        let mut r = Reader(&self.data);
        Ok(match (kind, len) {
            (kind::TELEMETRY_FULL, 52) => Telemetry::Full(FullTelemetry {
                timestamp_ms: r.u32(),
                angles: r.f32s(),
                velocities: r.f32s(),
                imu: r.imu(),
            }),
            (kind::TELEMETRY_ANGLES_ONLY, 12) => {
                Telemetry::AnglesOnly { timestamp_ms: Some(r.u32()), angles: r.f32s() }
            }
            (kind::TELEMETRY_ANGLES_ONLY, 8) => Telemetry::AnglesOnly { timestamp_ms: None, angles: r.f32s() },
            (kind::TELEMETRY_IMU_ONLY, 36) => Telemetry::ImuOnly { timestamp_ms: r.u32(), imu: r.imu() },
            (kind::ERROR_RESPONSE, 0) => Telemetry::Error { code: None, failed_command: None, message: String::new() },
            (kind::ERROR_RESPONSE, 2..) => {
                let (code, failed_command) = (r.u8(), r.u8());
                let text = r.0.split(|&byte| byte == 0).next().unwrap_or_default();
                Telemetry::Error {
                    code: Some(code),
                    failed_command: Some(failed_command),
                    message: String::from_utf8_lossy(text).into_owned(),
                }
            }
            (kind::ACK, 0) => Telemetry::Ack { command: None },
            (kind::ACK, 1) => Telemetry::Ack { command: Some(r.u8()) },
            (
                kind::TELEMETRY_FULL
                | kind::TELEMETRY_ANGLES_ONLY
                | kind::TELEMETRY_IMU_ONLY
                | kind::ERROR_RESPONSE
                | kind::ACK,
                _,
            ) => return Err(bad_length),
            _ => return Err(PayloadError::UnknownType { kind }),
        })
    }
}

fn put_f32s(values: &[f32], data: &mut Vec<u8>) {
    for value in values {
        data.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_gains(gains: &PidGains, data: &mut Vec<u8>) {
    put_f32s(&[gains.kp, gains.ki, gains.kd], data);
}

fn put_imu(imu: &ImuSample, data: &mut Vec<u8>) {
    put_f32s(&imu.accel, data);
    put_f32s(&imu.gyro, data);
    put_f32s(&imu.orientation, data);
}

/// Frames `data` as a packet of type `kind` into `buf`. DATA beyond 64 bytes is cut.
pub fn encode_packet(kind: u8, data: &[u8], buf: &mut Vec<u8>) {
    let data = &data[..data.len().min(MAX_DATA)];
    let start = buf.len();
    buf.extend_from_slice(&[HEADER, kind, data.len() as u8]);
    buf.extend_from_slice(data);
    let crc = crc8(&buf[start + 1..]);
    buf.push(crc);
}

/// Encodes a command packet into `buf`.
pub fn encode_command(command: &Command, buf: &mut Vec<u8>) {
    let mut data = Vec::with_capacity(24);
    match command {
        Command::SetJointAngles { shoulder, elbow } => put_f32s(&[*shoulder, *elbow], &mut data),
        Command::SetJointAngleSingle { joint, angle } => {
            data.push(*joint as u8);
            put_f32s(&[*angle], &mut data);
        }
        Command::GetTelemetry | Command::SystemReset | Command::CalibrateImu => {}
        Command::SetPidGains { shoulder, elbow } => {
            put_gains(shoulder, &mut data);
            put_gains(elbow, &mut data);
        }
        Command::SetPidGainsSingle { joint, gains } => {
            data.push(*joint as u8);
            put_gains(gains, &mut data);
        }
        Command::SetMode(mode) => data.push(*mode as u8),
        Command::SetTrajectoryPoint { shoulder, elbow, duration, flags } => {
            put_f32s(&[*shoulder, *elbow, *duration], &mut data);
            data.extend_from_slice(&flags.to_le_bytes());
        }
        Command::Debug(bytes) => data.extend_from_slice(bytes),
    }
    encode_packet(command.kind(), &data, buf);
}

/// Encodes a telemetry packet into `buf` in the given length convention. Fields the convention
/// has no room for are left out; fields it needs and the value lacks are sent as zero.
pub fn encode_telemetry(telemetry: &Telemetry, style: LengthStyle, buf: &mut Vec<u8>) {
    let mut data = Vec::with_capacity(52);
    let kind = match telemetry {
        Telemetry::Full(full) => {
            data.extend_from_slice(&full.timestamp_ms.to_le_bytes());
            put_f32s(&full.angles, &mut data);
            put_f32s(&full.velocities, &mut data);
            put_imu(&full.imu, &mut data);
            kind::TELEMETRY_FULL
        }
        Telemetry::AnglesOnly { timestamp_ms, angles } => {
            if style == LengthStyle::Document {
                data.extend_from_slice(&timestamp_ms.unwrap_or(0).to_le_bytes());
            }
            put_f32s(angles, &mut data);
            kind::TELEMETRY_ANGLES_ONLY
        }
        Telemetry::ImuOnly { timestamp_ms, imu } => {
            data.extend_from_slice(&timestamp_ms.to_le_bytes());
            put_imu(imu, &mut data);
            kind::TELEMETRY_IMU_ONLY
        }
        Telemetry::Error { code, failed_command, message } => {
            if style == LengthStyle::Document {
                data.extend_from_slice(&[code.unwrap_or(0), failed_command.unwrap_or(0)]);
                data.extend_from_slice(&message.as_bytes()[..message.len().min(MAX_DATA - 3)]);
                data.push(0);
            }
            kind::ERROR_RESPONSE
        }
        Telemetry::Ack { command } => {
            if style == LengthStyle::Document {
                data.push(command.unwrap_or(0));
            }
            kind::ACK
        }
    };
    encode_packet(kind, &data, buf);
}

/// What the decoder has thrown away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecoderStats {
    /// Packets whose frame and CRC were valid.
    pub packets: u64,
    /// Bytes skipped while hunting for a valid packet.
    pub dropped_bytes: u64,
    /// Candidate packets refused for a CRC mismatch.
    pub crc_errors: u64,
    /// Candidate packets refused for a LENGTH above 64.
    pub length_errors: u64,
}

/// Finds packets in a byte stream: garbage, split reads, bad CRCs and impossible lengths.
///
/// On a bad CRC or length it advances one byte past the 0xAA and rescans, since a header byte
/// can occur inside a packet; a valid packet right after a false start is still found.
#[derive(Debug, Default)]
pub struct PacketDecoder {
    buf: Vec<u8>,
    stats: DecoderStats,
}

impl PacketDecoder {
    pub fn new() -> PacketDecoder {
        PacketDecoder { buf: Vec::with_capacity(2 * (MAX_DATA + 4)), stats: DecoderStats::default() }
    }

    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next valid packet, or `None` until more bytes arrive.
    pub fn poll_packet(&mut self) -> Option<RawPacket> {
        loop {
            let skip = self.buf.iter().position(|&byte| byte == HEADER).unwrap_or(self.buf.len());
            self.drop_front(skip);
            if self.buf.len() < 3 {
                return None;
            }
            let len = usize::from(self.buf[2]);
            if len > MAX_DATA {
                self.stats.length_errors += 1;
                self.drop_front(1);
                continue;
            }
            if self.buf.len() < len + 4 {
                return None;
            }
            if crc8(&self.buf[1..3 + len]) != self.buf[3 + len] {
                self.stats.crc_errors += 1;
                self.drop_front(1);
                continue;
            }
            let packet = RawPacket { kind: self.buf[1], data: self.buf[3..3 + len].to_vec() };
            self.buf.drain(..len + 4);
            self.stats.packets += 1;
            return Some(packet);
        }
    }

    fn drop_front(&mut self, count: usize) {
        self.stats.dropped_bytes += count as u64;
        self.buf.drain(..count);
    }
}
