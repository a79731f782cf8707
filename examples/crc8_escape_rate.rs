//! How many corrupted STM32 telemetry packets get through, and at which check: the figures of
//! docs/stm32.md "What CRC-8 cannot do".
//!
//! Streams seeded full-telemetry packets with one bit flipped in 1 % of their bytes through the
//! packet decoder, then hands every packet that passed CRC-8 with wrong contents to the driver's
//! link, which checks its type, length and plausibility as it does on a real port.
//!
//! `cargo run --release --example crc8_escape_rate`

use std::collections::HashSet;
use std::time::Instant;

use arm_hil::drivers::stm32::{LinkEvent, Stm32Config, Stm32Link};
use arm_hil::protocol::stm32::{
    encode_packet, encode_telemetry, FullTelemetry, ImuSample, LengthStyle, PacketDecoder, Telemetry,
};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PACKETS: u32 = 200_000;
/// The share of bytes that get one bit flipped.
const BYTE_ERROR_RATE: f64 = 0.01;

fn telemetry(k: u32) -> Telemetry {
    let k_f32 = k as f32;
    Telemetry::Full(FullTelemetry {
        timestamp_ms: 20 * k,
        angles: [(k_f32 * 1e-3).sin(), 0.3],
        velocities: [0.1, -0.1],
        imu: ImuSample { accel: [0.0, 0.01, 1.0], gyro: [1.0, 2.0, 3.0], orientation: [0.0, 0.5] },
    })
}

fn main() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let flip_below = (f64::from(u32::MAX) * BYTE_ERROR_RATE) as u32;
    let mut decoder = PacketDecoder::new();
    let mut link = Stm32Link::new(Stm32Config::default(), Instant::now());
    let mut sent = HashSet::new();
    let (mut accepted, mut passed_crc, mut passed_type, mut passed_plausibility) = (0u32, 0u32, 0u32, 0u32);
    let (mut bytes, mut raw) = (Vec::new(), Vec::new());
    for k in 0..PACKETS {
        bytes.clear();
        encode_telemetry(&telemetry(k), LengthStyle::Firmware, &mut bytes);
        sent.insert(bytes.clone());
        for byte in &mut bytes {
            if rng.next_u32() < flip_below {
                *byte ^= 1 << (rng.next_u32() % 8);
            }
        }
        decoder.push(&bytes);
        while let Some(packet) = decoder.poll_packet() {
            accepted += 1;
            raw.clear();
            encode_packet(packet.kind, &packet.data, &mut raw);
            if sent.contains(&raw) {
                continue;
            }
            passed_crc += 1;
            passed_type += u32::from(packet.telemetry().is_ok());
            link.handle_bytes(Instant::now(), &raw);
            while let Some(event) = link.poll_event() {
                passed_plausibility += u32::from(matches!(event, LinkEvent::Telemetry(_)));
            }
        }
    }
    println!("{PACKETS} packets, {:.0} % of bytes with one bit flipped (seed 1)", BYTE_ERROR_RATE * 100.0);
    println!("accepted by the decoder:          {accepted}");
    println!("corrupted, passed CRC-8:          {passed_crc}");
    println!("  and the type and length check:  {passed_type}");
    println!("  and the driver's plausibility:  {passed_plausibility}");
}
