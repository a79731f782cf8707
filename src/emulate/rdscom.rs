//! An rdscom MCU (the finger testbench's Teensy) on a pseudo-terminal, with the queue semantics
//! of the message document (docs/rdscom.md): MotorControl requests queue up, ControlGo executes them (a control
//! marked simultaneous runs together with the one before it), ControlDone reports the count and
//! the time and is resent until acknowledged; datastreams run at the requested rate. A velocity
//! control turns its joint at its rate from ControlGo until a Stop or the joint's next control,
//! with no limit, as the firmware does (an effort control moves nothing: no dynamics). Faults:
//! dropped frames, delayed acknowledgements, garbage between frames, payloads containing `END`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Worker;
use crate::protocol::rdscom::{encode, FrameDecoder, FrameType, Message, PrototypeTable, Value};
use crate::serial::pty::Pty;

/// Switchable faults.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RdscomFaults {
    /// Probability that a frame the MCU sends is lost.
    pub drop_rate: f64,
    /// Delay before each acknowledgement.
    pub ack_delay: Duration,
    /// Random bytes written between frames, up to this many.
    pub garbage_between_frames: usize,
    /// Make every datastream payload contain the bytes `E N D`.
    pub end_in_payload: bool,
    /// Answer nothing at all.
    pub silent: bool,
}

/// What the emulated MCU has done.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RdscomEmulatorStats {
    pub requests: u64,
    pub heartbeats: u64,
    pub controls_queued: u64,
    /// Stop requests received.
    pub stops: u64,
    pub control_done_sent: u64,
    /// ControlGo requests received, and when the last came [ns since the Unix epoch, wall
    /// clock]: when a driver's setpoint reached the MCU.
    pub controls_run: u64,
    pub controls_run_unix_ns: u64,
    /// ControlDone and Error requests the GUI acknowledged.
    pub acks_received: u64,
    pub datastream_frames: u64,
}

struct Control {
    faults: Mutex<RdscomFaults>,
    /// Responses still to drop, one by one (a deterministic lost acknowledgement).
    drop_next_responses: AtomicU32,
    raise_error: Mutex<Option<u8>>,
    stats: Mutex<RdscomEmulatorStats>,
}

/// A running MCU emulator.
pub struct RdscomEmulator {
    path: PathBuf,
    control: Arc<Control>,
    worker: Worker,
}

/// Emulated time a group of controls takes to execute.
const GROUP_DURATION: Duration = Duration::from_millis(20);
/// The testbench's joints, for `all` datastreams.
const JOINTS: u8 = 4;

impl RdscomEmulator {
    pub fn start(table: PrototypeTable) -> std::io::Result<RdscomEmulator> {
        let pty = Pty::open()?;
        let path = pty.path().to_path_buf();
        let control = Arc::new(Control {
            faults: Mutex::new(RdscomFaults::default()),
            drop_next_responses: AtomicU32::new(0),
            raise_error: Mutex::new(None),
            stats: Mutex::new(RdscomEmulatorStats::default()),
        });
        let mut mcu = Mcu::new(table, control.clone());
        let worker = Worker::spawn("rdscom-emulator", move |stop| mcu.run(pty, stop))?;
        Ok(RdscomEmulator { path, control, worker })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn set_faults(&self, faults: RdscomFaults) {
        if let Ok(mut current) = self.control.faults.lock() {
            *current = faults;
        }
    }

    /// Loses the next `count` responses (acknowledgements) the MCU sends.
    pub fn drop_next_responses(&self, count: u32) {
        self.control.drop_next_responses.store(count, Ordering::Relaxed);
    }

    /// Makes the MCU send an Error request with `code`, resent until acknowledged.
    pub fn raise_error(&self, code: u8) {
        if let Ok(mut slot) = self.control.raise_error.lock() {
            *slot = Some(code);
        }
    }

    pub fn stats(&self) -> RdscomEmulatorStats {
        self.control.stats.lock().map(|stats| *stats).unwrap_or_default()
    }

    pub fn stop(mut self) -> RdscomEmulatorStats {
        self.worker.stop();
        self.stats()
    }
}

/// A queued control.
#[derive(Debug, Clone, Copy)]
struct Queued {
    motor: u8,
    mode: u8,
    value: f64,
    simultaneous: bool,
}

/// A request the MCU makes and resends until acknowledged.
struct Outstanding {
    bytes: Vec<u8>,
    number: u16,
    next_resend: Instant,
}

struct Mcu {
    table: PrototypeTable,
    control: Arc<Control>,
    decoder: FrameDecoder,
    rng: ChaCha8Rng,
    queue: Vec<Queued>,
    positions: [f64; JOINTS as usize],
    /// Each joint's rate under a velocity control [rad/s], and when the positions were last
    /// moved by them.
    rates: [f64; JOINTS as usize],
    moved_at: Option<Instant>,
    /// Executing: when it ends, how many controls, when it started.
    executing: Option<(Instant, usize, Instant)>,
    streams: Vec<(u8, Duration, Instant)>,
    outstanding: Vec<Outstanding>,
    delayed: Vec<(Instant, Vec<u8>)>,
    next_number: u16,
    stats: RdscomEmulatorStats,
}

impl Mcu {
    fn new(table: PrototypeTable, control: Arc<Control>) -> Mcu {
        Mcu {
            decoder: FrameDecoder::new(table.clone()),
            table,
            control,
            rng: ChaCha8Rng::seed_from_u64(11),
            queue: Vec::new(),
            positions: [0.0; JOINTS as usize],
            rates: [0.0; JOINTS as usize],
            moved_at: None,
            executing: None,
            streams: Vec::new(),
            outstanding: Vec::new(),
            delayed: Vec::new(),
            next_number: 1,
            stats: RdscomEmulatorStats::default(),
        }
    }

    fn run(&mut self, mut pty: Pty, stop: &AtomicBool) {
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            pty.wait_readable(Duration::from_millis(1));
            let now = Instant::now();
            let faults = self.control.faults.lock().map(|faults| *faults).unwrap_or_default();
            let mut out = Vec::new();
            while let Ok(read) = pty.master().read(&mut buf) {
                if read == 0 {
                    break;
                }
                self.decoder.push(&buf[..read]);
            }
            while let Some(message) = self.decoder.poll_message() {
                if !faults.silent {
                    self.handle(now, message, &faults, &mut out);
                }
            }
            if !faults.silent {
                self.tick(now, &faults, &mut out);
            }
            // A full pty (nobody reading) loses the bytes, as a real UART would.
            let _ = pty.master().write_all(&out);
            super::publish(&self.control.stats, self.stats, false);
        }
        super::publish(&self.control.stats, self.stats, true);
    }

    fn id(&self, name: &str) -> u8 {
        self.table.by_name(name).map_or(u8::MAX, |prototype| prototype.id)
    }

    /// Frames `message` into `out` through the faults.
    fn send(&mut self, message: &Message, faults: &RdscomFaults, out: &mut Vec<u8>) {
        let responses_to_drop = self.control.drop_next_responses.load(Ordering::Relaxed);
        if message.kind == FrameType::Response
            && responses_to_drop > 0
            && message.prototype != self.id("SensorDatastream")
        {
            self.control.drop_next_responses.store(responses_to_drop - 1, Ordering::Relaxed);
            return;
        }
        if faults.drop_rate > 0.0 && f64::from(self.rng.next_u32()) < faults.drop_rate * f64::from(u32::MAX) {
            return;
        }
        if faults.garbage_between_frames > 0 {
            let count = self.rng.next_u32() as usize % (faults.garbage_between_frames + 1);
            out.extend((0..count).map(|_| self.rng.next_u32() as u8));
        }
        let _ = encode(message, &self.table, out);
    }

    /// Acknowledges `request` with `response` (by default an echo), after the configured delay.
    fn acknowledge(
        &mut self,
        now: Instant,
        request: &Message,
        response: Option<Message>,
        faults: &RdscomFaults,
        out: &mut Vec<u8>,
    ) {
        let response = response.unwrap_or_else(|| Message { kind: FrameType::Response, ..request.clone() });
        if faults.ack_delay.is_zero() {
            return self.send(&response, faults, out);
        }
        let mut bytes = Vec::new();
        self.send(&response, faults, &mut bytes);
        self.delayed.push((now + faults.ack_delay, bytes));
    }

    fn handle(&mut self, now: Instant, message: Message, faults: &RdscomFaults, out: &mut Vec<u8>) {
        let name = self.table.get(message.prototype).map(|prototype| prototype.name.clone()).unwrap_or_default();
        if message.kind == FrameType::Response {
            // The GUI acknowledging a ControlDone or an Error.
            let before = self.outstanding.len();
            self.outstanding.retain(|outstanding| outstanding.number != message.number);
            self.stats.acks_received += (before - self.outstanding.len()) as u64;
            return;
        }
        self.stats.requests += 1;
        let value = |field: &str| message.field(&self.table, field).map_or(0.0, Value::as_f64);
        match name.as_str() {
            "Heartbeat" => {
                self.stats.heartbeats += 1;
                self.acknowledge(now, &message, None, faults, out);
            }
            "MotorControl" => {
                self.queue.push(Queued {
                    motor: value("motor_id") as u8,
                    mode: value("control_mode") as u8,
                    value: value("control_value"),
                    simultaneous: value("simutaneous") != 0.0,
                });
                self.stats.controls_queued += 1;
                let event = Message {
                    kind: FrameType::Response,
                    prototype: self.id("MotorEvent"),
                    number: message.number,
                    values: vec![
                        Value::Int(value("motor_id") as i64),
                        Value::Bool(true),
                        Value::Int(value("control_mode") as i64),
                        Value::Float(value("control_value")),
                        Value::Int(self.queue.len() as i64),
                        Value::Int(0),
                    ],
                };
                self.acknowledge(now, &message, Some(event), faults, out);
            }
            "ControlGo" => {
                (self.stats.controls_run, self.stats.controls_run_unix_ns) =
                    (self.stats.controls_run + 1, super::unix_ns());
                self.acknowledge(now, &message, None, faults, out);
                let groups = self.queue.iter().filter(|control| !control.simultaneous).count().max(1);
                self.executing = Some((now + GROUP_DURATION * groups as u32, self.queue.len(), now));
                for control in &self.queue {
                    if let Some(rate) = self.rates.get_mut(usize::from(control.motor)) {
                        *rate = if control.mode == 1 { control.value } else { 0.0 };
                    }
                }
            }
            "StartSensorDatastream" => {
                let joint = value("joint_id") as u8;
                let period = Duration::from_secs_f64(1.0 / value("frequency").max(1.0));
                self.streams.retain(|(stream, _, _)| *stream != joint);
                self.streams.push((joint, period, now));
                self.acknowledge(now, &message, None, faults, out);
            }
            "StopSensorDatastream" => {
                let joint = value("joint_id") as u8;
                self.streams.retain(|(stream, _, _)| joint != 255 && *stream != joint);
                self.acknowledge(now, &message, None, faults, out);
            }
            "ClearControlQueue" => {
                self.queue.clear();
                self.acknowledge(now, &message, None, faults, out);
            }
            "Stop" => {
                self.stats.stops += 1;
                self.queue.clear();
                self.executing = None;
                self.rates = [0.0; JOINTS as usize];
                self.acknowledge(now, &message, None, faults, out);
            }
            _ => {
                if self.table.get(message.prototype).is_some_and(|prototype| prototype.ack) {
                    self.acknowledge(now, &message, None, faults, out);
                }
            }
        }
    }

    /// A request the MCU makes, resent every second until acknowledged.
    fn request(&mut self, now: Instant, name: &str, values: Vec<Value>, faults: &RdscomFaults, out: &mut Vec<u8>) {
        let message = Message { kind: FrameType::Request, prototype: self.id(name), number: self.next_number, values };
        self.next_number = self.next_number.wrapping_add(1).max(1);
        let mut bytes = Vec::new();
        let _ = encode(&message, &self.table, &mut bytes);
        self.send(&message, faults, out);
        self.outstanding.push(Outstanding { bytes, number: message.number, next_resend: now + Duration::from_secs(1) });
    }

    fn tick(&mut self, now: Instant, faults: &RdscomFaults, out: &mut Vec<u8>) {
        let dt = self.moved_at.map_or(0.0, |at| (now - at).as_secs_f64());
        self.moved_at = Some(now);
        for (position, rate) in self.positions.iter_mut().zip(self.rates) {
            *position += rate * dt;
        }
        let (due, later): (Vec<_>, Vec<_>) = self.delayed.drain(..).partition(|(at, _)| *at <= now);
        self.delayed = later;
        for (_, bytes) in due {
            out.extend(bytes);
        }
        if let Some((done_at, executed, started)) = self.executing {
            if now >= done_at {
                self.executing = None;
                for control in self.queue.drain(..) {
                    if let Some(position) = self.positions.get_mut(usize::from(control.motor)) {
                        if control.mode == 0 {
                            *position = control.value;
                        }
                    }
                }
                let elapsed_ms = (now - started).as_millis() as i64;
                self.stats.control_done_sent += 1;
                self.request(
                    now,
                    "ControlDone",
                    vec![Value::Bool(true), Value::Int(elapsed_ms), Value::Int(executed as i64)],
                    faults,
                    out,
                );
            }
        }
        if let Some(code) = self.control.raise_error.lock().ok().and_then(|mut slot| slot.take()) {
            self.request(now, "Error", vec![Value::Int(i64::from(code))], faults, out);
        }
        for index in 0..self.outstanding.len() {
            if now >= self.outstanding[index].next_resend {
                self.outstanding[index].next_resend = now + Duration::from_secs(1);
                out.extend(self.outstanding[index].bytes.clone());
            }
        }
        let mut streamed = Vec::new();
        for (joint, period, next) in &mut self.streams {
            if now >= *next {
                *next += *period;
                if *next < now {
                    *next = now + *period;
                }
                streamed.push(*joint);
            }
        }
        for joint in streamed {
            let joints: Vec<u8> = if joint == 255 { (0..JOINTS).collect() } else { vec![joint] };
            for joint in joints {
                let message = self.datastream(joint, faults);
                self.stats.datastream_frames += 1;
                self.send(&message, faults, out);
            }
        }
    }

    /// One SensorDatastream sample in whichever table's layout.
    fn datastream(&self, joint: u8, faults: &RdscomFaults) -> Message {
        // 45 4E 44 40 ("END@") read as a little-endian float: 3.0829...
        let end_in_payload = f64::from(f32::from_le_bytes(*b"END@"));
        let position = if faults.end_in_payload {
            end_in_payload
        } else {
            self.positions.get(usize::from(joint)).copied().unwrap_or(0.0)
        };
        let fields = self.table.by_name("SensorDatastream").map_or(2, |prototype| prototype.fields.len());
        let mut values = vec![Value::Int(i64::from(joint))];
        values.extend((1..fields).map(|index| Value::Float(if index == 1 || index == 4 { position } else { 0.0 })));
        Message { kind: FrameType::Response, prototype: self.id("SensorDatastream"), number: 0, values }
    }
}
