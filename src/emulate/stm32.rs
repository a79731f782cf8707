//! The STM32 arm's firmware on a pseudo-terminal: two servos following their targets, an IMU,
//! the command watchdog, and ACK / ERROR / telemetry as the lab's firmware sends them, with
//! switchable faults (bit flips, dropped bytes, silence, document-style lengths) and unplugging.
//!
//! Drivers open [`Stm32Emulator::path`], a symbolic link to the current pty, so that a replug
//! (a new pty) appears at the same path, as a USB device comes back under its by-id name.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Worker;
use crate::drivers::stm32::{ImuUnits, STANDARD_GRAVITY};
use crate::protocol::stm32::{
    encode_telemetry, error_code, Command, ControlMode, FullTelemetry, ImuSample, LengthStyle, PacketDecoder, Telemetry,
};
use crate::serial::pty::Pty;

/// How the emulated firmware behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Stm32EmulatorConfig {
    /// Lengths of ANGLES_ONLY, ACK and ERROR_RESPONSE. Default: the firmware's.
    pub style: LengthStyle,
    /// Units of the IMU fields. Default: the firmware's (g, deg/s).
    pub imu_units: ImuUnits,
    /// Servo time constant [s]. Default 0.05.
    pub servo_time_constant_s: f64,
    /// Silence after which the firmware goes IDLE [s]. Default 0.5.
    pub watchdog_s: f64,
    /// Telemetry sent unasked at this rate [Hz]; `None` (the firmware) only answers GET_TELEMETRY.
    pub stream_rate_hz: Option<f64>,
    /// Answer GET_TELEMETRY with ANGLES_ONLY instead of TELEMETRY_FULL.
    pub angles_only: bool,
    /// Where the servos are, and hold, at power-on: shoulder, elbow [rad]. Default 0, 0.
    pub start_angles_rad: [f64; 2],
}

impl Default for Stm32EmulatorConfig {
    fn default() -> Self {
        Stm32EmulatorConfig {
            style: LengthStyle::Firmware,
            imu_units: ImuUnits::Firmware,
            servo_time_constant_s: 0.05,
            watchdog_s: 0.5,
            stream_rate_hz: None,
            angles_only: false,
            start_angles_rad: [0.0; 2],
        }
    }
}

/// Faults on what the firmware sends.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Probability that a byte sent has one bit flipped.
    pub bit_flip_rate: f64,
    /// Probability that a byte sent is lost.
    pub drop_rate: f64,
    /// Send nothing at all.
    pub silent: bool,
}

/// What the emulator has done.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stm32EmulatorStats {
    pub commands: u64,
    pub crc_errors: u64,
    pub telemetry_sent: u64,
    pub acks_sent: u64,
    /// Servo angles [rad].
    pub angles: [f64; 2],
    pub targets: [f64; 2],
    /// When a command last changed the targets [ns since the Unix epoch, wall clock], as it
    /// was read: what a driver's latency is measured to.
    pub targets_unix_ns: u64,
    pub mode: Option<ControlMode>,
}

impl Stm32EmulatorStats {
    /// Before the first command: in POSITION mode, the servos at and aiming for `angles` [rad].
    fn at_power_on(angles: [f64; 2]) -> Stm32EmulatorStats {
        Stm32EmulatorStats { angles, targets: angles, mode: Some(ControlMode::Position), ..Default::default() }
    }
}

struct Control {
    plugged: AtomicBool,
    faults: Mutex<Faults>,
    stats: Mutex<Stm32EmulatorStats>,
}

/// A running firmware emulator.
pub struct Stm32Emulator {
    dir: PathBuf,
    link: PathBuf,
    control: Arc<Control>,
    worker: Worker,
}

impl Stm32Emulator {
    /// Starts the emulated firmware, plugged in, in POSITION mode with both servos holding at
    /// their start angles.
    pub fn start(config: Stm32EmulatorConfig) -> std::io::Result<Stm32Emulator> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "arm_hil-stm32-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        let link = dir.join("ttySTM32");
        let pty = Pty::open()?;
        relink(pty.path(), &link)?;
        let control = Arc::new(Control {
            plugged: AtomicBool::new(true),
            faults: Mutex::new(Faults::default()),
            stats: Mutex::new(Stm32EmulatorStats::at_power_on(config.start_angles_rad)),
        });
        let mut firmware = Firmware::new(config, control.clone(), link.clone());
        let worker = Worker::spawn("stm32-emulator", move |stop| firmware.run(Some(pty), stop))?;
        Ok(Stm32Emulator { dir, link, control, worker })
    }

    /// The device path drivers open (a link to the current pty).
    pub fn path(&self) -> &Path {
        &self.link
    }

    pub fn set_faults(&self, faults: Faults) {
        if let Ok(mut current) = self.control.faults.lock() {
            *current = faults;
        }
    }

    /// Pulls the cable: the pty goes away, and with it the path.
    pub fn unplug(&self) {
        self.control.plugged.store(false, Ordering::Relaxed);
    }

    /// Plugs the cable back in: a new pty appears at the same path.
    pub fn replug(&self) {
        self.control.plugged.store(true, Ordering::Relaxed);
    }

    pub fn stats(&self) -> Stm32EmulatorStats {
        self.control.stats.lock().map(|stats| *stats).unwrap_or_default()
    }

    pub fn stop(mut self) -> Stm32EmulatorStats {
        self.worker.stop();
        self.stats()
    }
}

impl Drop for Stm32Emulator {
    /// Stops the thread first, so that nothing recreates the link, then removes its folder.
    fn drop(&mut self) {
        self.worker.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Points `link` at `target`, replacing what was there.
fn relink(target: &Path, link: &Path) -> std::io::Result<()> {
    let staging = link.with_extension("new");
    let _ = std::fs::remove_file(&staging);
    std::os::unix::fs::symlink(target, &staging)?;
    std::fs::rename(&staging, link)
}

struct Firmware {
    config: Stm32EmulatorConfig,
    control: Arc<Control>,
    link: PathBuf,
    decoder: PacketDecoder,
    rng: ChaCha8Rng,
    started: Instant,
    last_command: Instant,
    last_step: Instant,
    next_stream: Instant,
    angles: [f64; 2],
    velocities: [f64; 2],
    targets: [f64; 2],
    mode: ControlMode,
    stats: Stm32EmulatorStats,
}

impl Firmware {
    fn new(config: Stm32EmulatorConfig, control: Arc<Control>, link: PathBuf) -> Firmware {
        let now = Instant::now();
        let start = config.start_angles_rad;
        Firmware {
            config,
            control,
            link,
            decoder: PacketDecoder::new(),
            rng: ChaCha8Rng::seed_from_u64(7),
            started: now,
            last_command: now,
            last_step: now,
            next_stream: now,
            angles: start,
            velocities: [0.0; 2],
            targets: start,
            mode: ControlMode::Position,
            stats: Stm32EmulatorStats::at_power_on(start),
        }
    }

    fn run(&mut self, mut pty: Option<Pty>, stop: &AtomicBool) {
        let mut buf = [0u8; 256];
        let mut out = Vec::with_capacity(256);
        while !stop.load(Ordering::Relaxed) {
            let plugged = self.control.plugged.load(Ordering::Relaxed);
            match (&pty, plugged) {
                (Some(_), false) => {
                    pty = None;
                    let _ = std::fs::remove_file(&self.link);
                    self.decoder = PacketDecoder::new();
                }
                (None, true) => {
                    pty = Pty::open().ok().filter(|new| relink(new.path(), &self.link).is_ok());
                }
                _ => {}
            }
            let Some(port) = pty.as_mut() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            port.wait_readable(Duration::from_millis(1));
            let now = Instant::now();
            out.clear();
            loop {
                match port.master().read(&mut buf) {
                    Ok(0) => break,
                    Ok(read) => {
                        let crc_errors_before = self.decoder.stats().crc_errors;
                        self.decoder.push(&buf[..read]);
                        while let Some(packet) = self.decoder.poll_packet() {
                            self.handle(now, packet.command(), packet.kind, &mut out);
                        }
                        for _ in crc_errors_before..self.decoder.stats().crc_errors {
                            self.stats.crc_errors += 1;
                            self.error(error_code::CRC_MISMATCH, 0, "CRC mismatch", &mut out);
                        }
                    }
                    // Nothing waiting, or no driver has the port open.
                    Err(_) => break,
                }
            }
            self.step_servos(now);
            if let Some(rate) = self.config.stream_rate_hz {
                if now >= self.next_stream {
                    self.next_stream = now + Duration::from_secs_f64(1.0 / rate);
                    self.telemetry(now, &mut out);
                }
            }
            self.transmit(port, &out);
            self.stats.angles = self.angles;
            self.stats.targets = self.targets;
            self.stats.mode = Some(self.mode);
            super::publish(&self.control.stats, self.stats, false);
        }
        super::publish(&self.control.stats, self.stats, true);
    }

    fn set_targets(&mut self, targets: [f64; 2]) {
        if targets != self.targets {
            self.targets = targets;
            self.stats.targets_unix_ns = super::unix_ns();
        }
    }

    fn handle(
        &mut self,
        now: Instant,
        command: Result<Command, crate::protocol::stm32::PayloadError>,
        kind: u8,
        out: &mut Vec<u8>,
    ) {
        self.last_command = now;
        self.stats.commands += 1;
        let limit = std::f64::consts::FRAC_PI_2;
        let in_range = |angle: f32| f64::from(angle).abs() <= limit;
        let command = match command {
            Ok(command) => command,
            Err(_) => return self.error(error_code::INVALID_CMD, kind, "invalid command", out),
        };
        match command {
            Command::GetTelemetry => return self.telemetry(now, out),
            Command::SetJointAngles { shoulder, elbow } => {
                if !(in_range(shoulder) && in_range(elbow)) {
                    return self.error(error_code::OUT_OF_RANGE, kind, "Angle out of range", out);
                }
                self.set_targets([f64::from(shoulder), f64::from(elbow)]);
                if self.mode == ControlMode::Idle {
                    self.mode = ControlMode::Position;
                }
            }
            Command::SetJointAngleSingle { joint, angle } => {
                if !in_range(angle) {
                    return self.error(error_code::OUT_OF_RANGE, kind, "Angle out of range", out);
                }
                let mut targets = self.targets;
                targets[joint as usize] = f64::from(angle);
                self.set_targets(targets);
            }
            Command::SystemReset => {
                self.set_targets([0.0; 2]);
                self.mode = ControlMode::Position;
            }
            Command::SetMode(mode) => self.mode = mode,
            Command::CalibrateImu
            | Command::SetPidGains { .. }
            | Command::SetPidGainsSingle { .. }
            | Command::SetTrajectoryPoint { .. }
            | Command::Debug(_) => {}
        }
        self.stats.acks_sent += 1;
        encode_telemetry(&Telemetry::Ack { command: Some(kind) }, self.config.style, out);
    }

    fn error(&mut self, code: u8, failed_command: u8, message: &str, out: &mut Vec<u8>) {
        let error =
            Telemetry::Error { code: Some(code), failed_command: Some(failed_command), message: message.into() };
        encode_telemetry(&error, self.config.style, out);
    }

    /// Servos follow their targets with a first-order lag while not IDLE; the watchdog idles
    /// them when commands stop.
    fn step_servos(&mut self, now: Instant) {
        let dt = (now - self.last_step).as_secs_f64();
        self.last_step = now;
        if (now - self.last_command).as_secs_f64() > self.config.watchdog_s {
            self.mode = ControlMode::Idle;
        }
        for i in 0..2 {
            let previous = self.angles[i];
            if self.mode != ControlMode::Idle {
                let blend = 1.0 - (-dt / self.config.servo_time_constant_s).exp();
                self.angles[i] += (self.targets[i] - self.angles[i]) * blend;
            }
            self.velocities[i] = if dt > 0.0 { (self.angles[i] - previous) / dt } else { 0.0 };
        }
    }

    /// The IMU sits on the forearm; the arm moves in a vertical plane, so the forearm's pitch is
    /// shoulder + elbow.
    fn imu(&mut self) -> ImuSample {
        let pitch = self.angles[0] + self.angles[1];
        let pitch_rate = self.velocities[0] + self.velocities[1];
        let (accel_unit, gyro_unit) = match self.config.imu_units {
            ImuUnits::Si => (STANDARD_GRAVITY, 1.0),
            ImuUnits::Firmware => (1.0, 180.0 / std::f64::consts::PI),
        };
        let noise = |rng: &mut ChaCha8Rng| (f64::from(rng.next_u32()) / f64::from(u32::MAX) - 0.5) * 0.002;
        ImuSample {
            accel: [
                ((-pitch.sin() + noise(&mut self.rng)) * accel_unit) as f32,
                (noise(&mut self.rng) * accel_unit) as f32,
                ((pitch.cos() + noise(&mut self.rng)) * accel_unit) as f32,
            ],
            gyro: [0.0, (pitch_rate * gyro_unit) as f32, 0.0],
            orientation: [0.0, pitch as f32],
        }
    }

    fn telemetry(&mut self, now: Instant, out: &mut Vec<u8>) {
        let timestamp_ms = (now - self.started).as_millis() as u32;
        let angles = self.angles.map(|a| a as f32);
        let telemetry = if self.config.angles_only {
            Telemetry::AnglesOnly { timestamp_ms: Some(timestamp_ms), angles }
        } else {
            Telemetry::Full(FullTelemetry {
                timestamp_ms,
                angles,
                velocities: self.velocities.map(|v| v as f32),
                imu: self.imu(),
            })
        };
        self.stats.telemetry_sent += 1;
        encode_telemetry(&telemetry, self.config.style, out);
    }

    /// Writes `bytes` through the configured faults.
    fn transmit(&mut self, port: &mut Pty, bytes: &[u8]) {
        let faults = self.control.faults.lock().map(|faults| *faults).unwrap_or_default();
        if bytes.is_empty() || faults.silent {
            return;
        }
        let chance =
            |rate: f64, rng: &mut ChaCha8Rng| rate > 0.0 && f64::from(rng.next_u32()) < rate * f64::from(u32::MAX);
        let mut sent = Vec::with_capacity(bytes.len());
        for &byte in bytes {
            if chance(faults.drop_rate, &mut self.rng) {
                continue;
            }
            let flip = if chance(faults.bit_flip_rate, &mut self.rng) { 1u8 << (self.rng.next_u32() % 8) } else { 0 };
            sent.push(byte ^ flip);
        }
        // A full pty (nobody reading) loses the bytes, as a real UART would.
        let _ = port.master().write_all(&sent);
    }
}
