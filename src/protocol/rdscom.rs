//! The rdscom wire format (docs/rdscom.md), sans-IO.
//!
//! Frame: `R R R | type u8 | prototype id u8 | message number u16 BE | payload | E N D`. No length
//! and no checksum: the payload's size comes from the prototype table, and a frame is valid only
//! if `END` stands exactly where that size puts it. Payload: the prototype's fields in order,
//! packed, little-endian. The decoder resynchronises on the next `RRR`, one byte past a false
//! start, so payloads that contain `END` (or `RRR`) decode correctly.

use serde::{Deserialize, Serialize};

const START: &[u8; 3] = b"RRR";
const TRAILER: &[u8; 3] = b"END";
/// Bytes before the payload: start, type, prototype id, message number.
const HEAD_BYTES: usize = 7;

/// The frame types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameType {
    Request = 0,
    Response = 1,
    Error = 2,
}

/// Field types of a prototype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Int8,
    Uint8,
    Bool,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Float,
    Double,
}

impl FieldType {
    pub fn size(self) -> usize {
        match self {
            FieldType::Int8 | FieldType::Uint8 | FieldType::Bool => 1,
            FieldType::Int16 | FieldType::Uint16 => 2,
            FieldType::Int32 | FieldType::Uint32 | FieldType::Float => 4,
            FieldType::Double => 8,
        }
    }
}

/// One field of a prototype.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
}

/// A data prototype: what a message of this id carries, and whether a request of it must be
/// acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prototype {
    pub id: u8,
    pub name: String,
    #[serde(default)]
    pub ack: bool,
    pub fields: Vec<Field>,
}

impl Prototype {
    pub fn payload_size(&self) -> usize {
        self.fields.iter().map(|field| field.kind.size()).sum()
    }
}

/// A table of prototypes, indexed by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrototypeTable {
    by_id: Vec<Option<Prototype>>,
}

/// Why a prototype table was refused.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("prototype id {0} appears twice")]
    DuplicateId(u8),
    #[error("prototype name `{0}` appears twice")]
    DuplicateName(String),
    #[error("invalid prototype table: {0}")]
    Yaml(#[from] serde_norway::Error),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    prototypes: Vec<Prototype>,
}

/// The id rdscom reserves for errors.
pub const ERROR_PROTOTYPE_ID: u8 = 80;

fn prototype(id: u8, name: &str, ack: bool, fields: &[(&str, FieldType)]) -> Prototype {
    Prototype {
        id,
        name: name.to_owned(),
        ack,
        fields: fields.iter().map(|(name, kind)| Field { name: (*name).to_owned(), kind: *kind }).collect(),
    }
}

impl PrototypeTable {
    pub fn new(prototypes: Vec<Prototype>) -> Result<PrototypeTable, TableError> {
        let mut by_id: Vec<Option<Prototype>> = vec![None; 256];
        for prototype in prototypes {
            if by_id.iter().flatten().any(|known| known.name == prototype.name) {
                return Err(TableError::DuplicateName(prototype.name));
            }
            let slot = &mut by_id[usize::from(prototype.id)];
            if slot.is_some() {
                return Err(TableError::DuplicateId(prototype.id));
            }
            *slot = Some(prototype);
        }
        Ok(PrototypeTable { by_id })
    }

    /// A table from YAML: `prototypes: [{id, name, ack, fields: [{name, type}]}]`.
    pub fn from_yaml(text: &str) -> Result<PrototypeTable, TableError> {
        let file: TableFile = serde_norway::from_str(text)?;
        PrototypeTable::new(file.prototypes)
    }

    fn common() -> Vec<Prototype> {
        use FieldType::*;
        vec![
            prototype(0, "Heartbeat", true, &[("rand", Int8)]),
            prototype(
                1,
                "MotorControl",
                true,
                &[("motor_id", Uint8), ("control_mode", Uint8), ("control_value", Float), ("simutaneous", Bool)],
            ),
            prototype(
                2,
                "MotorEvent",
                false,
                &[
                    ("motor_id", Uint8),
                    ("success", Bool),
                    ("event_type", Uint8),
                    ("event_value", Float),
                    ("num_in_queue", Uint8),
                    ("executed_with_count", Uint8),
                ],
            ),
            prototype(3, "ControlGo", true, &[("rand", Int8)]),
            prototype(4, "ControlDone", true, &[("success", Bool), ("time", Uint32), ("executed", Uint8)]),
            prototype(5, "StartSensorDatastream", true, &[("joint_id", Uint8), ("frequency", Uint8)]),
            prototype(7, "StopSensorDatastream", true, &[("joint_id", Uint8)]),
            prototype(8, "ClearControlQueue", true, &[("rand", Int8)]),
            prototype(9, "Error", true, &[("error_code", Uint8)]),
            prototype(10, "Stop", true, &[("rand", Int8)]),
            prototype(ERROR_PROTOTYPE_ID, "LibraryError", true, &[("error_code", Uint8)]),
        ]
    }

    /// The message document's table (the default; docs/rdscom.md).
    pub fn document() -> PrototypeTable {
        let mut prototypes = PrototypeTable::common();
        prototypes.push(prototype(
            6,
            "SensorDatastream",
            false,
            &[("joint_id", FieldType::Uint8), ("data", FieldType::Float)],
        ));
        PrototypeTable::new(prototypes).expect("the built-in table has unique ids and names")
    }

    /// The newer firmware's table (docs/rdscom.md).
    pub fn firmware() -> PrototypeTable {
        use FieldType::*;
        let mut prototypes = PrototypeTable::common();
        prototypes.push(prototype(
            6,
            "SensorDatastream",
            false,
            &[
                ("joint_id", Uint8),
                ("motor_pos", Float),
                ("motor_vel", Float),
                ("motor_temp", Float),
                ("joint_pos", Float),
            ],
        ));
        prototypes.push(prototype(11, "ZeroCommand", true, &[("rand", Uint8)]));
        prototypes.push(prototype(12, "ZeroDone", true, &[("success", Uint8)]));
        PrototypeTable::new(prototypes).expect("the built-in table has unique ids and names")
    }

    pub fn get(&self, id: u8) -> Option<&Prototype> {
        self.by_id[usize::from(id)].as_ref()
    }

    pub fn by_name(&self, name: &str) -> Option<&Prototype> {
        self.by_id.iter().flatten().find(|prototype| prototype.name == name)
    }
}

/// A field value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Float(f64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(value) => value as f64,
            Value::Bool(value) => f64::from(u8::from(value)),
            Value::Float(value) => value,
        }
    }

    pub fn as_bool(self) -> bool {
        self.as_f64() != 0.0
    }
}

/// A decoded or to-be-encoded message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub kind: FrameType,
    pub prototype: u8,
    pub number: u16,
    /// One value per field of the prototype, in order.
    pub values: Vec<Value>,
}

impl Message {
    /// The value of the field `name` of this message's prototype in `table`.
    pub fn field(&self, table: &PrototypeTable, name: &str) -> Option<Value> {
        let prototype = table.get(self.prototype)?;
        prototype.fields.iter().position(|field| field.name == name).and_then(|index| self.values.get(index).copied())
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    #[error("prototype {0} is not in the table")]
    UnknownPrototype(u8),
    #[error("prototype {prototype} has {expected} fields, {given} values were given")]
    FieldCount { prototype: u8, expected: usize, given: usize },
    #[error("field `{field}` ({kind:?}) cannot hold {value:?}")]
    OutOfRange { field: String, kind: FieldType, value: Value },
}

/// Encodes `message` into `buf`.
pub fn encode(message: &Message, table: &PrototypeTable, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let prototype = table.get(message.prototype).ok_or(EncodeError::UnknownPrototype(message.prototype))?;
    if prototype.fields.len() != message.values.len() {
        return Err(EncodeError::FieldCount {
            prototype: message.prototype,
            expected: prototype.fields.len(),
            given: message.values.len(),
        });
    }
    let mut payload = Vec::with_capacity(prototype.payload_size());
    for (field, value) in prototype.fields.iter().zip(&message.values) {
        let out_of_range = || EncodeError::OutOfRange { field: field.name.clone(), kind: field.kind, value: *value };
        let integer = |value: &Value| match value {
            Value::Int(value) => Ok(*value),
            Value::Bool(value) => Ok(i64::from(*value)),
            Value::Float(_) => Err(out_of_range()),
        };
        match field.kind {
            FieldType::Int8 => payload.push(i8::try_from(integer(value)?).map_err(|_| out_of_range())? as u8),
            FieldType::Uint8 | FieldType::Bool => {
                payload.push(u8::try_from(integer(value)?).map_err(|_| out_of_range())?)
            }
            FieldType::Int16 => {
                payload.extend(i16::try_from(integer(value)?).map_err(|_| out_of_range())?.to_le_bytes())
            }
            FieldType::Uint16 => {
                payload.extend(u16::try_from(integer(value)?).map_err(|_| out_of_range())?.to_le_bytes())
            }
            FieldType::Int32 => {
                payload.extend(i32::try_from(integer(value)?).map_err(|_| out_of_range())?.to_le_bytes())
            }
            FieldType::Uint32 => {
                payload.extend(u32::try_from(integer(value)?).map_err(|_| out_of_range())?.to_le_bytes())
            }
            FieldType::Float => payload.extend((value.as_f64() as f32).to_le_bytes()),
            FieldType::Double => payload.extend(value.as_f64().to_le_bytes()),
        }
    }
    buf.extend_from_slice(START);
    buf.extend_from_slice(&[message.kind as u8, message.prototype]);
    buf.extend_from_slice(&message.number.to_be_bytes());
    buf.extend_from_slice(&payload);
    buf.extend_from_slice(TRAILER);
    Ok(())
}

fn decode_payload(prototype: &Prototype, mut bytes: &[u8]) -> Vec<Value> {
    let mut take = |n: usize| {
        let (head, rest) = bytes.split_at(n);
        bytes = rest;
        head
    };
    prototype
        .fields
        .iter()
        .map(|field| {
            let raw = take(field.kind.size());
            match field.kind {
                FieldType::Int8 => Value::Int(i64::from(raw[0] as i8)),
                FieldType::Uint8 => Value::Int(i64::from(raw[0])),
                FieldType::Bool => Value::Bool(raw[0] != 0),
                FieldType::Int16 => Value::Int(i64::from(i16::from_le_bytes([raw[0], raw[1]]))),
                FieldType::Uint16 => Value::Int(i64::from(u16::from_le_bytes([raw[0], raw[1]]))),
                FieldType::Int32 => Value::Int(i64::from(i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))),
                FieldType::Uint32 => Value::Int(i64::from(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))),
                FieldType::Float => Value::Float(f64::from(f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))),
                FieldType::Double => Value::Float(f64::from_le_bytes(raw.try_into().expect("8 bytes"))),
            }
        })
        .collect()
}

/// What the decoder has thrown away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecoderStats {
    pub frames: u64,
    /// Bytes skipped while hunting for a valid frame.
    pub dropped_bytes: u64,
    /// Candidates whose prototype id is not in the table.
    pub unknown_prototypes: u64,
    /// Candidates whose `END` was not where the prototype puts it, or whose type byte is invalid.
    pub bad_frames: u64,
}

/// Finds frames in a byte stream.
#[derive(Debug)]
pub struct FrameDecoder {
    table: PrototypeTable,
    buf: Vec<u8>,
    stats: DecoderStats,
}

impl FrameDecoder {
    pub fn new(table: PrototypeTable) -> FrameDecoder {
        FrameDecoder { table, buf: Vec::with_capacity(512), stats: DecoderStats::default() }
    }

    pub fn table(&self) -> &PrototypeTable {
        &self.table
    }

    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next valid frame, or `None` until more bytes arrive.
    pub fn poll_message(&mut self) -> Option<Message> {
        // `at` walks past every byte judged not to start a frame; they leave the buffer in one
        // drain at the end, with the frame found, so resynchronising over a read of garbage stays
        // linear in its size.
        let mut at = 0;
        let (message, frame_bytes) = loop {
            let Some(offset) = self.buf[at..].windows(3).position(|window| window == START) else {
                // Keep a possible start split across reads ("R" or "RR" at the end).
                at = at.max(self.buf.len().saturating_sub(2));
                break (None, 0);
            };
            at += offset;
            let candidate = &self.buf[at..];
            if candidate.len() < HEAD_BYTES {
                break (None, 0);
            }
            let kind = match candidate[3] {
                0 => FrameType::Request,
                1 => FrameType::Response,
                2 => FrameType::Error,
                _ => {
                    self.stats.bad_frames += 1;
                    at += 1;
                    continue;
                }
            };
            let Some(prototype) = self.table.get(candidate[4]) else {
                self.stats.unknown_prototypes += 1;
                at += 1;
                continue;
            };
            let end = HEAD_BYTES + prototype.payload_size();
            if candidate.len() < end + TRAILER.len() {
                break (None, 0);
            }
            if &candidate[end..end + TRAILER.len()] != TRAILER {
                self.stats.bad_frames += 1;
                at += 1;
                continue;
            }
            let message = Message {
                kind,
                prototype: prototype.id,
                number: u16::from_be_bytes([candidate[5], candidate[6]]),
                values: decode_payload(prototype, &candidate[HEAD_BYTES..end]),
            };
            self.stats.frames += 1;
            break (Some(message), end + TRAILER.len());
        };
        self.stats.dropped_bytes += at as u64;
        self.buf.drain(..at + frame_bytes);
        message
    }
}
