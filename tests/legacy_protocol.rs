//! The port-5555 codec against docs/port5555.md's byte layout, in every split, and on arbitrary input.

use arm_hil::control::Waypoint;
use arm_hil::model::math::Vec3;
use arm_hil::protocol::legacy::{
    encode_frame, encode_header, encode_ideal, encode_request, Mode, Request, RequestDecoder, RequestError,
    ResponseDecoder, ResponseItem, FRAME_BYTES, HEADER_BYTES, IDEAL_BYTES,
};
use arm_hil::sim::{Frame, IdealPoint};
use proptest::prelude::*;

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
}

fn two_waypoints() -> Vec<Waypoint> {
    (0..2)
        .map(|i| {
            let k = i as f64;
            Waypoint {
                t: k,
                x: Vec3::new(1.0 + k, 2.0, 3.0),
                xd: Vec3::new(4.0, 5.0, 6.0),
                xdd: Vec3::new(7.0, 8.0, 9.0 + k),
            }
        })
        .collect()
}

/// Feeds `bytes` to a fresh decoder in pieces of `piece` bytes.
fn decode_in_pieces(bytes: &[u8], piece: usize) -> Result<Option<Request>, RequestError> {
    let mut decoder = RequestDecoder::new(1_000_000);
    for chunk in bytes.chunks(piece.max(1)) {
        let (used, request) = decoder.decode(chunk)?;
        if request.is_some() {
            assert_eq!(used, chunk.len());
            return Ok(request);
        }
        assert_eq!(used, chunk.len());
    }
    Ok(None)
}

#[test]
fn a_sil_request_is_laid_out_as_the_spec_says() {
    let request =
        Request { mode: Mode::Sil, elbow: Vec3::new(0.35, 0.35, 0.0), l_arm: 0.45, waypoints: two_waypoints() };
    let mut bytes = Vec::new();
    encode_request(&request, &mut bytes);
    // Offsets of docs/port5555.md's payload table, after the one mode byte.
    assert_eq!(bytes[0], b'S');
    let payload = &bytes[1..];
    assert_eq!(payload.len(), 36 + 2 * 80);
    assert_eq!(i32::from_le_bytes(payload[0..4].try_into().unwrap()), 2);
    assert_eq!(f64s(&payload[4..36]), vec![0.35, 0.35, 0.0, 0.45]);
    assert_eq!(f64s(&payload[36..116]), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    assert_eq!(decode_in_pieces(&bytes, bytes.len()).unwrap(), Some(request));
}

#[test]
fn a_hil_handshake_carries_two_length_prefixed_devices_with_defaults_for_empty_ones() {
    // docs/port5555.md, Examples and corrections: the length of /dev/ttyUSB0 is 12, not 9.
    let mut bytes = b"H\x0c/dev/ttyUSB0\x04auto".to_vec();
    let waypoint = Request { mode: Mode::Sil, elbow: Vec3::zeros(), l_arm: 0.45, waypoints: two_waypoints() };
    let mut payload = Vec::new();
    encode_request(&waypoint, &mut payload);
    bytes.extend_from_slice(&payload[1..]);
    let request = decode_in_pieces(&bytes, 3).unwrap().unwrap();
    assert_eq!(request.mode, Mode::Hil { sensor: "/dev/ttyUSB0".into(), arduino: "auto".into() });

    let mut empty = b"H\x00\x00".to_vec();
    empty.extend_from_slice(&payload[1..]);
    let request = decode_in_pieces(&empty, 1).unwrap().unwrap();
    assert_eq!(request.mode, Mode::Hil { sensor: "/dev/ttyUSB0".into(), arduino: "auto".into() });
}

#[test]
fn bad_handshakes_and_counts_are_refused_before_any_waypoint_is_read() {
    assert_eq!(decode_in_pieces(b"X", 1), Err(RequestError::UnknownMode { byte: b'X' }));
    for n in [0i32, -5, 1_000_001] {
        let mut bytes = vec![b'S'];
        bytes.extend_from_slice(&n.to_le_bytes());
        bytes.extend_from_slice(&[0u8; 32]);
        assert_eq!(decode_in_pieces(&bytes, 7), Err(RequestError::BadCount { n, max: 1_000_000 }));
    }
    assert_eq!(decode_in_pieces(b"H\x02\xff\xfe", 4), Err(RequestError::DeviceNotUtf8 { which: "sensor" }));
}

#[test]
fn the_response_header_frames_and_ideal_blocks_have_the_spec_layout() {
    let mut bytes = Vec::new();
    encode_header(2.5, 7, &mut bytes);
    assert_eq!(bytes.len(), HEADER_BYTES);
    assert_eq!(f64s(&bytes[0..8]), vec![2.5]);
    assert_eq!(i32::from_le_bytes(bytes[8..12].try_into().unwrap()), 7);

    let v = |a: f64| Vec3::new(a, a + 1.0, a + 2.0);
    let frame = Frame {
        t: 0.5,
        x: v(1.0),
        x_dot: v(4.0),
        theta: v(7.0),
        theta_dot: v(10.0),
        tau: v(13.0),
        x_ref: v(99.0),
        xd_ref: v(98.0),
    };
    let mut bytes = Vec::new();
    encode_frame(&frame, &mut bytes);
    assert_eq!(bytes.len(), FRAME_BYTES);
    assert_eq!(
        f64s(&bytes),
        vec![0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    );

    let ideal = IdealPoint { t: 0.5, theta: v(1.0), theta_dot: v(4.0), tau: v(7.0) };
    let mut bytes = Vec::new();
    encode_ideal(&ideal, &mut bytes);
    assert_eq!(bytes.len(), IDEAL_BYTES);
    assert_eq!(f64s(&bytes), vec![0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
}

/// Everything `decoder` reads from `bytes` handed over in pieces of `piece` bytes.
fn response_items(decoder: &mut ResponseDecoder, bytes: &[u8], piece: usize) -> Vec<ResponseItem> {
    let mut items = Vec::new();
    for mut chunk in bytes.chunks(piece) {
        while !chunk.is_empty() {
            let (used, item) = decoder.decode(chunk).unwrap();
            items.extend(item);
            chunk = &chunk[used..];
        }
    }
    items
}

#[test]
fn a_client_reads_frames_until_the_end_marker_then_n_ideal_blocks() {
    let frame = |t: f64| Frame { t, ..Frame::default() };
    let ideal = IdealPoint { t: 0.0, theta: Vec3::zeros(), theta_dot: Vec3::zeros(), tau: Vec3::zeros() };
    let mut bytes = Vec::new();
    encode_header(1.0, 2, &mut bytes);
    for t in [0.25, 0.5, 1.0] {
        encode_frame(&frame(t), &mut bytes);
    }
    encode_ideal(&ideal, &mut bytes);
    encode_ideal(&IdealPoint { t: 1.0, ..ideal }, &mut bytes);
    for piece in [1, 5, 128, bytes.len()] {
        let mut decoder = ResponseDecoder::sil();
        let items = response_items(&mut decoder, &bytes, piece);
        assert!(decoder.is_done());
        assert_eq!(items.len(), 6);
        assert_eq!(items[0], ResponseItem::Header { end_time: 1.0, n: 2 });
        assert_eq!(items[3], ResponseItem::EndMarker(frame(1.0)));
        assert_eq!(items[5], ResponseItem::Ideal(IdealPoint { t: 1.0, ..ideal }));
    }
}

#[test]
fn a_hil_client_reads_frames_from_the_first_byte_until_its_own_end_time() {
    let frame = |t: f64| Frame { t, ..Frame::default() };
    let mut bytes = Vec::new();
    for t in [0.001, 0.002, 1.0] {
        encode_frame(&frame(t), &mut bytes);
    }
    for piece in [1, 5, 128, bytes.len()] {
        let mut decoder = ResponseDecoder::hil(1.0);
        let items = response_items(&mut decoder, &bytes, piece);
        assert!(decoder.is_done());
        assert_eq!(
            items,
            vec![
                ResponseItem::Frame(frame(0.001)),
                ResponseItem::Frame(frame(0.002)),
                ResponseItem::EndMarker(frame(1.0))
            ]
        );
    }
}

proptest! {
    #[test]
    fn the_request_decoder_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600), piece in 1usize..64) {
        let _ = decode_in_pieces(&bytes, piece);
    }

    #[test]
    fn the_response_decoder_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600), sil: bool, end_time: f64) {
        let mut decoder = if sil { ResponseDecoder::sil() } else { ResponseDecoder::hil(end_time) };
        let mut rest = bytes.as_slice();
        while !rest.is_empty() && !decoder.is_done() {
            match decoder.decode(rest) {
                Ok((used, _)) => rest = &rest[used..],
                Err(_) => break,
            }
        }
    }

    #[test]
    fn a_request_decodes_to_itself_in_any_split(
        values in proptest::collection::vec(-1e3f64..1e3, 10..=40),
        hil: bool,
        sensor in "[a-zA-Z/0-9]{0,20}",
        piece in 1usize..200,
    ) {
        let waypoints = values
            .chunks_exact(10)
            .map(|v| Waypoint { t: v[0], x: Vec3::new(v[1], v[2], v[3]), xd: Vec3::new(v[4], v[5], v[6]), xdd: Vec3::new(v[7], v[8], v[9]) })
            .collect();
        let mode = if hil { Mode::Hil { sensor: format!("/dev/{sensor}"), arduino: "auto".into() } } else { Mode::Sil };
        let request = Request { mode, elbow: Vec3::new(values[0], values[1], values[2]), l_arm: values[3], waypoints };
        let mut bytes = Vec::new();
        encode_request(&request, &mut bytes);
        prop_assert_eq!(decode_in_pieces(&bytes, piece).unwrap(), Some(request));
    }
}
