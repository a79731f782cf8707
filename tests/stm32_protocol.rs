//! The STM32 codec: docs/stm32.md's check values and bytes, both length conventions, and a
//! streaming decoder that survives garbage, split reads, bad CRCs and impossible lengths.

use std::collections::HashSet;

use arm_hil::protocol::stm32::{
    crc8, encode_command, encode_packet, encode_telemetry, kind, Command, ControlMode, FullTelemetry, ImuSample, Joint,
    LengthStyle, PacketDecoder, PayloadError, PidGains, RawPacket, Telemetry,
};
use proptest::prelude::*;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace().map(|byte| u8::from_str_radix(byte, 16).unwrap()).collect()
}

fn decode_all(bytes: &[u8]) -> (Vec<RawPacket>, PacketDecoder) {
    let mut decoder = PacketDecoder::new();
    decoder.push(bytes);
    let packets = std::iter::from_fn(|| decoder.poll_packet()).collect();
    (packets, decoder)
}

fn full_telemetry(k: u32) -> Telemetry {
    Telemetry::Full(FullTelemetry {
        timestamp_ms: 20 * k,
        angles: [0.5, -0.25],
        velocities: [0.125, -0.0625],
        imu: ImuSample { accel: [0.0, 0.5, 1.0], gyro: [1.5, -2.5, 3.5], orientation: [0.25, -0.5] },
    })
}

#[test]
fn crc8_matches_the_design_check_values() {
    assert_eq!(crc8(b"123456789"), 0xF4);
    assert_eq!(crc8(&[0x10, 0x08]), 0x6F);
    assert_eq!(crc8(&[0x10, 0x08, 0x00, 0x00, 0x00, 0x3F]), 0x3A);
}

#[test]
fn set_joint_angles_encodes_as_design_says() {
    let mut bytes = Vec::new();
    encode_command(&Command::SetJointAngles { shoulder: 0.785, elbow: -0.524 }, &mut bytes);
    assert_eq!(bytes, hex("AA 10 08 C3 F5 48 3F DD 24 06 BF DC"));
}

#[test]
fn every_command_round_trips() {
    let gains = PidGains { kp: 2.0, ki: 0.5, kd: 0.25 };
    let commands = [
        Command::SetJointAngles { shoulder: 0.5, elbow: -0.3 },
        Command::SetJointAngleSingle { joint: Joint::Elbow, angle: 0.2 },
        Command::GetTelemetry,
        Command::SystemReset,
        Command::CalibrateImu,
        Command::SetPidGains { shoulder: gains, elbow: PidGains { kp: 1.0, ..gains } },
        Command::SetPidGainsSingle { joint: Joint::Shoulder, gains },
        Command::SetMode(ControlMode::Position),
        Command::SetTrajectoryPoint { shoulder: 0.1, elbow: 0.2, duration: 1.5, flags: 7 },
        Command::Debug(vec![0x01]),
    ];
    let sizes = [8, 5, 0, 0, 0, 24, 13, 1, 16, 1];
    for (command, size) in commands.iter().zip(sizes) {
        let mut bytes = Vec::new();
        encode_command(command, &mut bytes);
        assert_eq!(bytes.len(), 4 + size, "{command:?}");
        let (packets, _) = decode_all(&bytes);
        assert_eq!(packets[0].command().as_ref(), Ok(command));
    }
}

#[test]
fn telemetry_full_is_52_bytes_and_decodes_field_by_field() {
    let mut bytes = Vec::new();
    encode_telemetry(&full_telemetry(3), LengthStyle::Firmware, &mut bytes);
    assert_eq!(&bytes[..3], &[0xAA, 0x01, 0x34]);
    assert_eq!(bytes.len(), 56);
    let (packets, _) = decode_all(&bytes);
    assert_eq!(packets[0].telemetry(), Ok(full_telemetry(3)));
    // docs/stm32.md: the source's 40-byte length is refused, not misread.
    let mut short = Vec::new();
    encode_packet(kind::TELEMETRY_FULL, &bytes[3..43], &mut short);
    let (packets, _) = decode_all(&short);
    assert_eq!(packets[0].telemetry(), Err(PayloadError::BadLength { kind: 0x01, len: 40 }));
}

#[test]
fn both_length_conventions_are_decoded() {
    let cases = [
        (
            Telemetry::AnglesOnly { timestamp_ms: Some(40), angles: [0.5, 0.25] },
            12,
            8,
            Telemetry::AnglesOnly { timestamp_ms: None, angles: [0.5, 0.25] },
        ),
        (Telemetry::Ack { command: Some(0x10) }, 1, 0, Telemetry::Ack { command: None }),
        (
            Telemetry::Error { code: Some(0x03), failed_command: Some(0x10), message: "Angle out of range".into() },
            2 + 18 + 1,
            0,
            Telemetry::Error { code: None, failed_command: None, message: String::new() },
        ),
    ];
    for (telemetry, document_len, firmware_len, firmware_view) in cases {
        for (style, len, expected) in
            [(LengthStyle::Document, document_len, &telemetry), (LengthStyle::Firmware, firmware_len, &firmware_view)]
        {
            let mut bytes = Vec::new();
            encode_telemetry(&telemetry, style, &mut bytes);
            assert_eq!(usize::from(bytes[2]), len, "{telemetry:?} in {style:?}");
            let (packets, _) = decode_all(&bytes);
            assert_eq!(packets[0].telemetry().as_ref(), Ok(expected));
        }
    }
}

#[test]
fn the_documents_error_example_decodes() {
    let mut data = vec![0x03, 0x10];
    data.extend_from_slice(b"Angle out of range");
    let mut bytes = Vec::new();
    encode_packet(kind::ERROR_RESPONSE, &data, &mut bytes);
    let (packets, _) = decode_all(&bytes);
    let expected =
        Telemetry::Error { code: Some(0x03), failed_command: Some(0x10), message: "Angle out of range".into() };
    assert_eq!(packets[0].telemetry(), Ok(expected));
}

#[test]
fn the_decoder_finds_packets_in_any_split_after_garbage() {
    let mut stream = hex("00 13 AA 7F AA AA 05");
    let mut expected = Vec::new();
    for k in 0..3 {
        encode_telemetry(&full_telemetry(k), LengthStyle::Firmware, &mut stream);
        expected.push(full_telemetry(k));
        stream.extend_from_slice(&hex("AA 01 02 FF"));
    }
    for piece in 1..=stream.len() {
        let mut decoder = PacketDecoder::new();
        let mut found = Vec::new();
        for chunk in stream.chunks(piece) {
            decoder.push(chunk);
            found.extend(std::iter::from_fn(|| decoder.poll_packet()).map(|packet| packet.telemetry().unwrap()));
        }
        assert_eq!(found, expected, "split into pieces of {piece}");
    }
}

#[test]
fn a_valid_packet_right_after_a_false_start_is_found() {
    // A header and a plausible length, then a real packet inside the claimed span.
    let mut stream = hex("AA 01 34");
    encode_command(&Command::SetMode(ControlMode::Idle), &mut stream);
    stream.extend(std::iter::repeat_n(0x55, 60));
    let (packets, decoder) = decode_all(&stream);
    assert_eq!(packets.len(), 1);
    assert_eq!(packets[0].command(), Ok(Command::SetMode(ControlMode::Idle)));
    assert_eq!(decoder.stats().crc_errors, 1);
}

#[test]
fn impossible_lengths_and_bad_crcs_are_counted_and_skipped() {
    let mut stream = hex("AA 10 41 00 00");
    let mut good = Vec::new();
    encode_command(&Command::GetTelemetry, &mut good);
    let mut bad_crc = good.clone();
    bad_crc[3] ^= 0x01;
    stream.extend_from_slice(&bad_crc);
    stream.extend_from_slice(&good);
    let (packets, decoder) = decode_all(&stream);
    assert_eq!(packets, vec![RawPacket { kind: kind::GET_TELEMETRY, data: vec![] }]);
    let stats = decoder.stats();
    assert_eq!((stats.length_errors, stats.crc_errors, stats.packets), (1, 1, 1));
    assert!(stats.dropped_bytes >= 9);
}

/// CRC-8 over a 56-byte packet has Hamming distance 2: two flipped bits 127 bits apart pass.
/// At 1% of bytes corrupted about 5 in 10 000 packets are accepted corrupted; the decoder cannot
/// do better on this wire format (docs/stm32.md). Seeded, so the count is exact.
#[test]
fn corrupted_packets_pass_crc8_no_more_often_than_its_distance_allows() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut decoder = PacketDecoder::new();
    let mut sent = HashSet::new();
    let (mut accepted, mut false_accepts) = (0, 0);
    let packets = 20_000u32;
    for k in 0..packets {
        let mut bytes = Vec::new();
        encode_telemetry(&full_telemetry(k), LengthStyle::Firmware, &mut bytes);
        sent.insert(bytes.clone());
        for byte in &mut bytes {
            if rng.next_u32() < u32::MAX / 100 {
                *byte ^= 1 << (rng.next_u32() % 8);
            }
        }
        decoder.push(&bytes);
        while let Some(packet) = decoder.poll_packet() {
            accepted += 1;
            let mut raw = Vec::new();
            encode_packet(packet.kind, &packet.data, &mut raw);
            false_accepts += u32::from(!sent.contains(&raw));
        }
    }
    assert!(accepted > packets / 2, "the stream recovers: {accepted} of {packets} accepted");
    assert!(f64::from(false_accepts) / f64::from(packets) < 1e-3, "{false_accepts} corrupted packets accepted");
}

proptest! {
    #[test]
    fn the_decoder_never_panics_and_every_packet_it_returns_has_a_valid_crc(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        piece in 1usize..80,
    ) {
        let mut decoder = PacketDecoder::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk);
            while let Some(packet) = decoder.poll_packet() {
                let mut raw = Vec::new();
                encode_packet(packet.kind, &packet.data, &mut raw);
                prop_assert!(packet.data.len() <= 64);
                prop_assert_eq!(crc8(&raw[1..raw.len() - 1]), raw[raw.len() - 1]);
                let _ = packet.telemetry();
                let _ = packet.command();
            }
        }
    }

    #[test]
    fn telemetry_round_trips(values in proptest::collection::vec(-1e3f32..1e3, 12), timestamp: u32) {
        let full = Telemetry::Full(FullTelemetry {
            timestamp_ms: timestamp,
            angles: [values[0], values[1]],
            velocities: [values[2], values[3]],
            imu: ImuSample { accel: [values[4], values[5], values[6]], gyro: [values[7], values[8], values[9]], orientation: [values[10], values[11]] },
        });
        let mut bytes = Vec::new();
        encode_telemetry(&full, LengthStyle::Document, &mut bytes);
        let (packets, _) = decode_all(&bytes);
        prop_assert_eq!(packets[0].telemetry(), Ok(full));
    }
}
