use arm_hil::protocol::stm32::*;
use rand_chacha::{
    rand_core::{Rng, SeedableRng},
    ChaCha8Rng,
};
fn main() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut dec = PacketDecoder::new();
    let mut sent = std::collections::HashSet::new();
    let (mut accepted, mut false_crc, mut false_typed, mut false_plausible) = (0, 0, 0, 0);
    let n = 200_000u32;
    for k in 0..n {
        let t = Telemetry::Full(FullTelemetry {
            timestamp_ms: k * 20,
            angles: [(k as f32 * 0.001).sin(), 0.3],
            velocities: [0.1, -0.1],
            imu: ImuSample { accel: [0.0, 0.01, 1.0], gyro: [1.0, 2.0, 3.0], orientation: [0.0, 0.5] },
        });
        let mut b = Vec::new();
        encode_telemetry(&t, LengthStyle::Firmware, &mut b);
        sent.insert(b.clone());
        let mut corrupted = Vec::new();
        for &x in &b {
            let flip = if rng.next_u32() < u32::MAX / 100 { 1u8 << (rng.next_u32() % 8) } else { 0 };
            corrupted.push(x ^ flip);
        }
        dec.push(&corrupted);
        while let Some(p) = dec.poll_packet() {
            accepted += 1;
            let mut raw = Vec::new();
            encode_packet(p.kind, &p.data, &mut raw);
            if !sent.contains(&raw) {
                false_crc += 1;
                if let Ok(tel) = p.telemetry() {
                    false_typed += 1;
                    if let Telemetry::Full(f) = tel {
                        let ok = f.angles.iter().chain(&f.velocities).all(|a| a.is_finite() && a.abs() < 4.0)
                            && f.imu.accel.iter().all(|a| a.abs() < 16.0)
                            && f.imu.gyro.iter().all(|g| g.abs() < 2000.0)
                            && (f.timestamp_ms as i64 - (k * 20) as i64).abs() < 1000;
                        if ok {
                            false_plausible += 1;
                        }
                    }
                }
            }
        }
    }
    println!("packets {n} accepted {accepted} false(crc ok) {false_crc} false(type+len ok) {false_typed} false(plausible) {false_plausible}");
}
