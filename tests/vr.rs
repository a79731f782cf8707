//! The Deltarobot VR link: the codec against docs/vr.md's examples, and leader and follower
//! over real sockets on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arm_hil::bridge::vr::{follow, FollowerEvent, VrConfig, VrFeed, VrLeader, VrState, VrTransform};
use arm_hil::model::math::Vec3;
use arm_hil::protocol::deltavr::{encode, VrDecodeError, VrDecoder, VrMessage, MAGIC};
use proptest::prelude::*;
use tokio::sync::{mpsc, watch};

fn bytes_of(message: &VrMessage) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode(message, &mut bytes);
    bytes
}

#[test]
fn the_version_message_is_laid_out_as_the_documents_example() {
    assert_eq!(bytes_of(&VrMessage::Version(1)), vec![0x02, 0x20, 0x01, 0x00, 0x00, 0x00]);
    let magic = bytes_of(&VrMessage::Magic(MAGIC));
    assert_eq!(&magic[..2], &[0x01, 0x30]);
    assert_eq!(&magic[2..], b"DeltaRVr");
    let position = bytes_of(&VrMessage::ActuatorPosition([1.0, 2.0, 3.0]));
    assert_eq!(position.len(), 2 + 16);
    assert_eq!(&position[..2], &[0x03, 0x40]);
}

#[test]
fn unknown_types_are_skipped_and_the_stream_goes_on() {
    let mut stream = vec![0x0A, 0x00, 0xFF]; // type 0x00A, size class 0: one byte
    stream.extend([0x0B, 0x40]);
    stream.extend([0u8; 16]); // type 0x00B, 16 bytes
    stream.extend([0x0C, 0xF0, 3, 0, 0, 0, 1, 2, 3]); // variable, 3 bytes
    stream.extend(bytes_of(&VrMessage::Ping(42)));
    for piece in 1..=stream.len() {
        let mut decoder = VrDecoder::new(1024);
        let mut found = Vec::new();
        for chunk in stream.chunks(piece) {
            decoder.push(chunk);
            found.extend(std::iter::from_fn(|| decoder.poll()));
        }
        assert_eq!(found, vec![Ok(VrMessage::Ping(42))]);
        assert_eq!(decoder.stats().skipped, 3);
    }
}

#[test]
fn undefined_size_classes_and_oversized_lengths_end_the_stream() {
    let mut decoder = VrDecoder::new(1024);
    decoder.push(&[0x01, 0x70, 1, 2, 3]);
    assert_eq!(decoder.poll(), Some(Err(VrDecodeError::UndefinedSizeClass { id: 0x7001, size_class: 7 })));
    decoder.push(&bytes_of(&VrMessage::Ping(1)));
    assert_eq!(decoder.poll(), None, "nothing is decoded after a fatal error");
    let mut decoder = VrDecoder::new(1024);
    decoder.push(&[0x09, 0xF0, 0x00, 0x00, 0x10, 0x00]);
    assert_eq!(decoder.poll(), Some(Err(VrDecodeError::TooLong { id: 0xF009, len: 0x100000, max: 1024 })));
}

#[test]
fn a_curve_whose_length_is_not_whole_points_is_refused() {
    let mut decoder = VrDecoder::new(1024);
    decoder.push(&[0x09, 0xF0, 13, 0, 0, 0]);
    decoder.push(&[0u8; 13]);
    decoder.push(&bytes_of(&VrMessage::Curve(vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])));
    assert_eq!(decoder.poll(), Some(Err(VrDecodeError::CurveLength { len: 13 })));
    assert_eq!(decoder.poll(), Some(Ok(VrMessage::Curve(vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))));
}

proptest! {
    #[test]
    fn the_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), piece in 1usize..40) {
        let mut decoder = VrDecoder::new(256);
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk);
            while decoder.poll().is_some() {}
        }
    }

    #[test]
    fn messages_round_trip(values in proptest::collection::vec(-1e3f32..1e3, 3..30), ping: u64, reason in "[ -~]{0,40}") {
        let points: Vec<[f32; 3]> = values.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        let messages = vec![
            VrMessage::Curve(points),
            VrMessage::Ping(ping),
            VrMessage::CurrentDirection([values[0], values[1], values[2]]),
            VrMessage::EndOfTransmission(reason),
        ];
        let mut decoder = VrDecoder::new(1 << 16);
        for message in &messages {
            decoder.push(&bytes_of(message));
        }
        let decoded: Vec<_> = std::iter::from_fn(|| decoder.poll()).collect();
        prop_assert_eq!(decoded, messages.into_iter().map(Ok).collect::<Vec<_>>());
    }
}

fn test_config() -> VrConfig {
    VrConfig {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        rate_hz: 100.0,
        ping_period_s: 0.2,
        pong_timeout_s: 0.5,
        handshake_timeout_s: 1.0,
        ..VrConfig::default()
    }
}

/// A leader on its own runtime thread; returns its address, feed and shutdown switch.
fn start_leader(config: VrConfig) -> (SocketAddr, VrFeed, watch::Sender<bool>) {
    let feed = VrFeed::new();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let serving = feed.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let leader = VrLeader::bind(config).await.unwrap();
            address_tx.send(leader.local_addr().unwrap()).unwrap();
            leader.serve(serving, shutdown_rx).await
        })
    });
    (address_rx.recv().unwrap(), feed, shutdown)
}

/// A hand-written follower: sends `hello` first, then reads what comes, answering pings when
/// told to, until EOF or `limit`.
fn raw_follower(address: SocketAddr, hello: &[u8], answer_pings: bool, limit: Duration) -> Vec<VrMessage> {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(hello).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut decoder = VrDecoder::new(1 << 20);
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let until = Instant::now() + limit;
    while Instant::now() < until {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => decoder.push(&buf[..n]),
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                continue
            }
            Err(_) => break,
        }
        while let Some(Ok(message)) = decoder.poll() {
            if let (true, VrMessage::Ping(value)) = (answer_pings, &message) {
                let _ = stream.write_all(&bytes_of(&VrMessage::Pong(*value)));
            }
            received.push(message);
        }
    }
    received
}

fn hello() -> Vec<u8> {
    let mut bytes = bytes_of(&VrMessage::Magic(MAGIC));
    bytes.extend(bytes_of(&VrMessage::Version(1)));
    bytes
}

#[test]
fn the_leader_exchanges_magic_and_version_then_streams_the_curve_and_the_arm() {
    let (address, feed, _shutdown) = start_leader(test_config());
    feed.curve.send_replace(Arc::new(vec![Vec3::new(0.1, 0.2, 0.3), Vec3::new(0.4, 0.5, 0.6)]));
    feed.state.send_replace(VrState {
        position: Vec3::new(1.0, 2.0, 3.0),
        current_direction: Vec3::x(),
        desired_direction: Vec3::y(),
    });
    let received = raw_follower(address, &hello(), true, Duration::from_millis(400));
    assert_eq!(received[0], VrMessage::Magic(MAGIC));
    assert_eq!(received[1], VrMessage::Version(1));
    assert!(received.contains(&VrMessage::Curve(vec![[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])));
    assert!(received.contains(&VrMessage::ActuatorPosition([1.0, 2.0, 3.0])));
    assert!(received.contains(&VrMessage::DesiredDirection([0.0, 1.0, 0.0])));
    let positions = received.iter().filter(|m| matches!(m, VrMessage::ActuatorPosition(_))).count();
    assert!((25..=45).contains(&positions), "{positions} positions in 0.4 s at 100 Hz");
    assert!(received.iter().any(|m| matches!(m, VrMessage::Ping(_))));
}

#[test]
fn a_follower_without_magic_is_closed_with_a_reason() {
    let (address, _feed, _shutdown) = start_leader(test_config());
    let received = raw_follower(address, &bytes_of(&VrMessage::Version(1)), true, Duration::from_secs(2));
    assert!(
        matches!(received.last(), Some(VrMessage::EndOfTransmission(reason)) if reason.contains("expected magic")),
        "{received:?}"
    );
}

#[test]
fn a_follower_that_never_pongs_is_dropped_while_another_keeps_receiving() {
    let (address, _feed, _shutdown) = start_leader(test_config());
    let silent = std::thread::spawn(move || raw_follower(address, &hello(), false, Duration::from_secs(3)));
    let polite = raw_follower(address, &hello(), true, Duration::from_secs(2));
    let silent = silent.join().unwrap();
    assert!(
        matches!(silent.last(), Some(VrMessage::EndOfTransmission(reason)) if reason.contains("no pong")),
        "{:?}",
        silent.last()
    );
    assert!(!polite.iter().any(|m| matches!(m, VrMessage::EndOfTransmission(_))));
    let late_positions =
        polite.iter().skip(polite.len() / 2).filter(|m| matches!(m, VrMessage::ActuatorPosition(_))).count();
    assert!(late_positions > 50, "the polite follower kept receiving: {late_positions}");
}

#[test]
fn an_undefined_size_class_closes_the_link_with_end_of_transmission() {
    let (address, _feed, _shutdown) = start_leader(test_config());
    let mut bytes = hello();
    bytes.extend([0x01, 0x70, 0, 0, 0, 0]);
    let received = raw_follower(address, &bytes, true, Duration::from_secs(2));
    assert!(
        matches!(received.last(), Some(VrMessage::EndOfTransmission(reason)) if reason.contains("size class 0x7")),
        "{received:?}"
    );
}

#[test]
fn arm_hils_follower_sees_the_leaders_positions_and_reconnects() {
    let config = test_config();
    let (address, feed, shutdown) = start_leader(config.clone());
    let transform = VrTransform { scale: 10.0, ..VrTransform::default() };
    feed.state.send_replace(VrState { position: Vec3::new(0.1, 0.2, 0.3), ..VrState::default() });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (events_tx, mut events) = mpsc::channel(1024);
    let (stop, stop_rx) = watch::channel(false);
    runtime.spawn(follow(address, config, events_tx, stop_rx));
    let first = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                if let Some(FollowerEvent::Message(VrMessage::ActuatorPosition(position))) = events.recv().await {
                    return position;
                }
            }
        })
        .await
    });
    assert_eq!(first.unwrap(), [0.1, 0.2, 0.3]);
    // The leader shuts down: the follower hears why, then tries again.
    shutdown.send_replace(true);
    let ended = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                if let Some(FollowerEvent::Disconnected { reason, .. }) = events.recv().await {
                    return reason;
                }
            }
        })
        .await
    });
    assert!(ended.unwrap().contains("leader shutting down"));
    stop.send_replace(true);
    assert_eq!(transform.point(&Vec3::new(0.1, 0.2, 0.3)), [1.0, 2.0, 3.0]);
    let unity = VrTransform { axes: ["-y".into(), "z".into(), "x".into()], ..VrTransform::default() };
    assert_eq!(unity.point(&Vec3::new(1.0, 2.0, 3.0)), [-2.0, 3.0, 1.0]);
    assert!(VrTransform { axes: ["x".into(), "x".into(), "z".into()], ..VrTransform::default() }.validate().is_err());
}
