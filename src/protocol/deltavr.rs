//! The Deltarobot VR link (docs/vr.md), sans-IO.
//!
//! A message is a u16 little-endian id, size class = id >> 12, type = id & 0xFFF, then its
//! contents: 1, 2, 4, 8 or 16 bytes for size classes 0-4, or for class 0xF a u32 little-endian
//! byte count and that many bytes. Unknown types of a known size class are skipped. Size classes
//! 5-E cannot be skipped: the stream is lost and the decoder says so, once, for the session to
//! send End of transmission and close. Variable lengths above a cap are refused the same way,
//! before anything is allocated.

/// Message ids.
pub mod id {
    pub const MAGIC: u16 = 0x3001;
    pub const VERSION: u16 = 0x2002;
    pub const ACTUATOR_POSITION: u16 = 0x4003;
    pub const PING: u16 = 0x3004;
    pub const PONG: u16 = 0x3005;
    pub const END_OF_TRANSMISSION: u16 = 0xF006;
    pub const CURRENT_DIRECTION: u16 = 0x4007;
    pub const DESIRED_DIRECTION: u16 = 0x4008;
    pub const CURVE: u16 = 0xF009;
}

/// The magic value: "DeltaRVr".
pub const MAGIC: [u8; 8] = *b"DeltaRVr";
/// The protocol version this implementation speaks.
pub const VERSION: u32 = 1;
/// Bytes per curve point: three f32.
pub const CURVE_POINT_BYTES: usize = 12;

/// A message of the protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum VrMessage {
    Magic([u8; 8]),
    Version(u32),
    Ping(u64),
    Pong(u64),
    /// An optional ASCII reason.
    EndOfTransmission(String),
    /// The exercise's curve [the VR frame's units].
    Curve(Vec<[f32; 3]>),
    ActuatorPosition([f32; 3]),
    CurrentDirection([f32; 3]),
    DesiredDirection([f32; 3]),
}

/// The contents size of a size class, or `None` for variable (0xF) and undefined (5-E) ones.
pub fn fixed_size(size_class: u8) -> Option<usize> {
    match size_class {
        0..=4 => Some(1 << size_class),
        _ => None,
    }
}

fn put_vector(message_id: u16, v: &[f32; 3], buf: &mut Vec<u8>) {
    buf.extend_from_slice(&message_id.to_le_bytes());
    for value in v.iter().chain([&0.0f32]) {
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_variable(message_id: u16, contents: &[u8], buf: &mut Vec<u8>) {
    buf.extend_from_slice(&message_id.to_le_bytes());
    buf.extend_from_slice(&(contents.len() as u32).to_le_bytes());
    buf.extend_from_slice(contents);
}

/// Appends `message` to `buf`.
pub fn encode(message: &VrMessage, buf: &mut Vec<u8>) {
    match message {
        VrMessage::Magic(magic) => {
            buf.extend_from_slice(&id::MAGIC.to_le_bytes());
            buf.extend_from_slice(magic);
        }
        VrMessage::Version(version) => {
            buf.extend_from_slice(&id::VERSION.to_le_bytes());
            buf.extend_from_slice(&version.to_le_bytes());
        }
        VrMessage::Ping(value) | VrMessage::Pong(value) => {
            let message_id = if matches!(message, VrMessage::Ping(_)) { id::PING } else { id::PONG };
            buf.extend_from_slice(&message_id.to_le_bytes());
            buf.extend_from_slice(&value.to_le_bytes());
        }
        VrMessage::EndOfTransmission(reason) => put_variable(id::END_OF_TRANSMISSION, reason.as_bytes(), buf),
        VrMessage::Curve(points) => {
            let contents: Vec<u8> = points.iter().flatten().flat_map(|value| value.to_le_bytes()).collect();
            put_variable(id::CURVE, &contents, buf);
        }
        VrMessage::ActuatorPosition(v) => put_vector(id::ACTUATOR_POSITION, v, buf),
        VrMessage::CurrentDirection(v) => put_vector(id::CURRENT_DIRECTION, v, buf),
        VrMessage::DesiredDirection(v) => put_vector(id::DESIRED_DIRECTION, v, buf),
    }
}

/// What the decoder hands out besides messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VrDecodeError {
    /// The stream cannot be followed past this message: close the connection.
    #[error("message 0x{id:04x} has size class 0x{size_class:x}, which has no defined length")]
    UndefinedSizeClass { id: u16, size_class: u8 },
    /// The stream cannot be followed past this message: close the connection.
    #[error("message 0x{id:04x} announces {len} bytes, more than the limit of {max}")]
    TooLong { id: u16, len: u32, max: u32 },
    /// The message was skipped; the stream goes on.
    #[error("curve of {len} bytes is not a whole number of 12-byte points")]
    CurveLength { len: usize },
    /// The message was skipped; the stream goes on.
    #[error("end-of-transmission reason is not ASCII")]
    ReasonNotAscii,
}

impl VrDecodeError {
    /// True when the stream can no longer be followed.
    pub fn is_fatal(&self) -> bool {
        matches!(self, VrDecodeError::UndefinedSizeClass { .. } | VrDecodeError::TooLong { .. })
    }
}

/// Counts of what the decoder skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VrDecoderStats {
    pub messages: u64,
    /// Messages of unknown type skipped.
    pub skipped: u64,
}

/// Finds messages in a byte stream.
#[derive(Debug)]
pub struct VrDecoder {
    buf: Vec<u8>,
    max_variable_len: u32,
    stats: VrDecoderStats,
    failed: bool,
}

impl VrDecoder {
    /// A decoder that refuses variable contents longer than `max_variable_len` bytes.
    pub fn new(max_variable_len: u32) -> VrDecoder {
        VrDecoder { buf: Vec::with_capacity(256), max_variable_len, stats: VrDecoderStats::default(), failed: false }
    }

    pub fn stats(&self) -> VrDecoderStats {
        self.stats
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next message, a decode error, or `None` until more bytes arrive. After a fatal error
    /// nothing more is decoded.
    pub fn poll(&mut self) -> Option<Result<VrMessage, VrDecodeError>> {
        loop {
            if self.failed || self.buf.len() < 2 {
                return None;
            }
            let message_id = u16::from_le_bytes([self.buf[0], self.buf[1]]);
            let size_class = (message_id >> 12) as u8;
            let (header, len) = match (fixed_size(size_class), size_class) {
                (Some(size), _) => (2, size),
                (None, 0xF) => {
                    if self.buf.len() < 6 {
                        return None;
                    }
                    let len = u32::from_le_bytes([self.buf[2], self.buf[3], self.buf[4], self.buf[5]]);
                    if len > self.max_variable_len {
                        self.failed = true;
                        return Some(Err(VrDecodeError::TooLong { id: message_id, len, max: self.max_variable_len }));
                    }
                    (6, len as usize)
                }
                _ => {
                    self.failed = true;
                    return Some(Err(VrDecodeError::UndefinedSizeClass { id: message_id, size_class }));
                }
            };
            if self.buf.len() < header + len {
                return None;
            }
            let contents: Vec<u8> = self.buf[header..header + len].to_vec();
            self.buf.drain(..header + len);
            match decode_contents(message_id, &contents) {
                Some(Ok(message)) => {
                    self.stats.messages += 1;
                    return Some(Ok(message));
                }
                Some(Err(error)) => return Some(Err(error)),
                None => self.stats.skipped += 1,
            }
        }
    }
}

fn vector(contents: &[u8]) -> [f32; 3] {
    std::array::from_fn(|i| f32::from_le_bytes(contents[4 * i..4 * i + 4].try_into().expect("4 bytes")))
}

/// Decodes the contents of a known message; `None` for unknown types (skipped).
fn decode_contents(message_id: u16, contents: &[u8]) -> Option<Result<VrMessage, VrDecodeError>> {
    let u64_of = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
    Some(Ok(match message_id {
        id::MAGIC => VrMessage::Magic(contents.try_into().expect("8 bytes")),
        id::VERSION => VrMessage::Version(u32::from_le_bytes(contents.try_into().expect("4 bytes"))),
        id::PING => VrMessage::Ping(u64_of(contents)),
        id::PONG => VrMessage::Pong(u64_of(contents)),
        id::ACTUATOR_POSITION => VrMessage::ActuatorPosition(vector(contents)),
        id::CURRENT_DIRECTION => VrMessage::CurrentDirection(vector(contents)),
        id::DESIRED_DIRECTION => VrMessage::DesiredDirection(vector(contents)),
        id::END_OF_TRANSMISSION => match std::str::from_utf8(contents) {
            Ok(reason) if reason.is_ascii() => VrMessage::EndOfTransmission(reason.to_owned()),
            _ => return Some(Err(VrDecodeError::ReasonNotAscii)),
        },
        id::CURVE => {
            if contents.len() % CURVE_POINT_BYTES != 0 {
                return Some(Err(VrDecodeError::CurveLength { len: contents.len() }));
            }
            VrMessage::Curve(contents.chunks_exact(CURVE_POINT_BYTES).map(vector).collect())
        }
        _ => return None,
    }))
}
