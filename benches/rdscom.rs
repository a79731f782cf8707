//! rdscom figures: frames decoded per second from a byte stream, and a datastream at 100 Hz
//! over a pseudo-terminal against the MCU emulator, counting every sample sent and received.
//!
//! Run with `cargo bench --bench rdscom` (60 s of datastream; `ARM_HIL_BENCH_SECONDS` shortens it).

use std::time::{Duration, Instant};

use arm_hil::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomConfig, RdscomDriver, RdscomEvent, RdscomLinkState,
};
use arm_hil::emulate::rdscom::RdscomEmulator;
use arm_hil::protocol::rdscom::{encode, FrameDecoder, FrameType, Message, PrototypeTable, Value};

fn decode_rate() -> (usize, f64) {
    let table = PrototypeTable::firmware();
    let mut stream = Vec::new();
    let frames = 1_000_000;
    for k in 0..frames {
        let values = vec![
            Value::Int(k as i64 % 4),
            Value::Float(0.5),
            Value::Float(-0.25),
            Value::Float(31.5),
            Value::Float(k as f64 * 1e-3),
        ];
        let message = Message { kind: FrameType::Response, prototype: 6, number: k as u16, values };
        encode(&message, &table, &mut stream).expect("encodes");
    }
    let started = Instant::now();
    let mut decoder = FrameDecoder::new(table);
    let mut decoded = 0;
    for chunk in stream.chunks(4096) {
        decoder.push(chunk);
        while decoder.poll_message().is_some() {
            decoded += 1;
        }
    }
    assert_eq!(decoded, frames);
    (frames, frames as f64 / started.elapsed().as_secs_f64())
}

fn main() {
    let (frames, rate) = decode_rate();
    println!("decoding {frames} SensorDatastream frames (firmware table, 27 bytes each) from memory:");
    println!("  {rate:.0} frames/s");

    let seconds: u64 = std::env::var("ARM_HIL_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let emulator = RdscomEmulator::start(PrototypeTable::document()).expect("emulator");
    let driver = RdscomDriver::start(
        emulator.path().to_str().expect("utf-8 path"),
        RdscomConfig::default(),
        PrototypeTable::document(),
    )
    .expect("driver");
    while let Ok(event) = driver.events().recv_timeout(Duration::from_secs(2)) {
        if matches!(event, DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Up))) {
            break;
        }
    }
    driver.send(parse_console_command("stream 0 100", 1).expect("valid")).expect("encodes");
    let (mut received, mut lost_link, mut failed) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut count = |event: DriverEvent| match event {
        DriverEvent::Link(RdscomEvent::Received(message)) if message.prototype == 6 => received += 1,
        DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Lost)) => lost_link += 1,
        DriverEvent::Link(RdscomEvent::Failed { .. }) => failed += 1,
        _ => {}
    };
    while let Ok(event) = driver.events().recv_timeout(until.saturating_duration_since(Instant::now())) {
        count(event);
    }
    driver.send(parse_console_command("unstream all", 2).expect("valid")).expect("encodes");
    let drain = Instant::now() + Duration::from_millis(500);
    while let Ok(event) = driver.events().recv_timeout(drain.saturating_duration_since(Instant::now())) {
        count(event);
    }
    let sent = emulator.stop().datastream_frames;
    println!("datastream of joint 0 at 100 Hz for {seconds} s over a pty:");
    println!(
        "  sent {sent}, received {received}, lost {}; link lost {lost_link} times, failed requests {failed}",
        sent.saturating_sub(received)
    );
}
