//! Messages as ROS 2 serialises them: the 4-byte encapsulation header of little-endian plain
//! CDR, the body (fields in order, each aligned to its size from the body's start), then zero
//! padding to a multiple of 4 bytes, as Cyclone DDS sends them and rosbag2 records them.

use serde::Serialize;

/// Encapsulation kind CDR_LE with no options.
const CDR_LE_HEADER: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Why a message could not be serialised (a sequence longer than CDR's u32 length, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot serialise a message to CDR: {0}")]
pub struct CdrError(#[from] cdr_encoding::Error);

/// Replaces the contents of `out` with `message` in CDR; `out` keeps its capacity, so a
/// reused buffer stops allocating once it has held the largest message.
pub fn encode_into<M: Serialize>(message: &M, out: &mut Vec<u8>) -> Result<(), CdrError> {
    out.clear();
    out.extend_from_slice(&CDR_LE_HEADER);
    cdr_encoding::to_writer::<_, byteorder::LittleEndian, _>(&mut *out, message)?;
    out.resize(out.len().next_multiple_of(4), 0);
    Ok(())
}
