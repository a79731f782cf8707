//! STM32 link over a pseudo-terminal: 100 commands per second with telemetry polled at 50 Hz,
//! against the firmware emulator. Prints lost and mis-decoded packets and the command-to-ACK
//! latency distribution.
//!
//! Run with `cargo bench --bench stm32_link` (60 s; `ARM_HIL_BENCH_SECONDS` shortens it).

use std::time::{Duration, Instant};

use arm_hil::drivers::stm32::{DriverEvent, LinkEvent, Stm32Config, Stm32Driver};
use arm_hil::emulate::stm32::{Stm32Emulator, Stm32EmulatorConfig};
use arm_hil::protocol::stm32::Command;

fn main() {
    let seconds: u64 = std::env::var("ARM_HIL_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let emulator = Stm32Emulator::start(Stm32EmulatorConfig::default()).expect("emulator");
    let driver =
        Stm32Driver::start(emulator.path().to_str().expect("utf-8 path"), Stm32Config::default()).expect("driver");
    let (mut latencies, mut telemetry, mut bad, mut unacknowledged, mut failed) = (Vec::new(), 0u64, 0u64, 0u64, 0u64);
    let mut count = |event: DriverEvent, latencies: &mut Vec<Duration>| match event {
        DriverEvent::Link(LinkEvent::Acked { latency, .. }) => latencies.push(latency),
        DriverEvent::Link(LinkEvent::Telemetry(_)) => telemetry += 1,
        DriverEvent::Link(LinkEvent::BadPacket(_) | LinkEvent::Implausible { .. } | LinkEvent::DeviceError { .. }) => {
            bad += 1
        }
        DriverEvent::Link(LinkEvent::Unacknowledged { .. }) => unacknowledged += 1,
        DriverEvent::Link(LinkEvent::CommandFailed { .. }) => failed += 1,
        _ => {}
    };
    // Wait for the link.
    while let Ok(event) = driver.events().recv_timeout(Duration::from_secs(2)) {
        if matches!(event, DriverEvent::Link(LinkEvent::Telemetry(_))) {
            break;
        }
    }
    let start = Instant::now();
    let commands = seconds * 100;
    for k in 0..commands {
        let deadline = start + Duration::from_millis(10 * k);
        while let Ok(event) = driver.events().recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            count(event, &mut latencies);
        }
        let phase = k as f32 * 0.01;
        driver
            .send(Command::SetJointAngles { shoulder: 0.5 * phase.sin(), elbow: 0.3 * phase.cos() })
            .expect("in range");
    }
    let drain_until = Instant::now() + Duration::from_secs(1);
    while let Ok(event) = driver.events().recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
        count(event, &mut latencies);
    }
    let elapsed = (start.elapsed() - Duration::from_secs(1)).as_secs_f64();
    latencies.sort();
    let quantile = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e6;
    let stats = emulator.stop();
    println!("{commands} commands at 100/s for {elapsed:.1} s, telemetry polled at 50 Hz, over a pty:");
    println!("  packets the firmware decoded: {} (the commands and the GET_TELEMETRY polls)", stats.commands);
    println!(
        "  acknowledged {} / {commands}: lost {}, unacknowledged {unacknowledged}, failed {failed}",
        latencies.len(),
        commands - latencies.len() as u64
    );
    println!("  telemetry packets {telemetry} ({:.1}/s), bad or mis-decoded {bad}", telemetry as f64 / elapsed);
    println!(
        "  command-to-ACK latency p50 {:.0} us, p99 {:.0} us, max {:.0} us",
        quantile(0.5),
        quantile(0.99),
        quantile(1.0)
    );
}
