//! The lab's rig behind the HIL loop (docs/rig.md): the angle sensor (115200 8N1, `t,r,theta,phi` lines)
//! and the step-driver Arduino (250000 8N1, `F,fx,fy,fz,dirBits` lines).
//!
//! Serial I/O runs on two threads of its own. The loop's `read` takes the newest sensor
//! reading, its `write` turns torque into step rates and leaves them for the writer, which sends
//! the newest rates as fast as the link allows (at 250000 baud a command line takes about 1 ms).
//! Neither call blocks on I/O; a failed port is reported by the next `read` or `write`.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::control::SphericalReading;
use crate::hil::stepper::{FieldTracker, StepRates, StepperConfig, StepperDrive};
use crate::hil::{exit, ActuatorCommand, Hardware, HardwareError, SensorInput};
use crate::model::math::Vec3;
use crate::protocol::rig::{encode_step_command, parse_sensor_line, LineSplitter};
use crate::serial;

/// Serial settings of the rig. Defaults are the lab's rig's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RigConfig {
    /// Angle sensor baud rate. Default 115200.
    pub sensor_baud: u32,
    /// Step-driver Arduino baud rate. Default 250000.
    pub arduino_baud: u32,
}

impl Default for RigConfig {
    fn default() -> Self {
        RigConfig { sensor_baud: 115_200, arduino_baud: 250_000 }
    }
}

/// The newest sensor reading and how many have arrived.
#[derive(Debug, Default)]
struct SensorSlot {
    count: u64,
    reading: Option<SphericalReading>,
    bad_lines: u64,
}

/// The newest step rates for the writer.
#[derive(Debug, Default)]
struct CommandSlot {
    sequence: u64,
    rates: StepRates,
    closing: bool,
}

#[derive(Debug)]
struct Shared {
    /// The clock of the field tracker.
    started: Instant,
    sensor: Mutex<SensorSlot>,
    command: Mutex<CommandSlot>,
    command_changed: Condvar,
    /// The drives' fields as the writer has commanded them, at real send times; `None` until
    /// the loop knows the joint angles.
    field: Mutex<Option<FieldTracker>>,
    /// The first I/O failure of either thread.
    failure: Mutex<Option<String>>,
    stop: AtomicBool,
    /// Set by the process's exit stop: from then on the writer sends zero rates and ends.
    exit_closing: AtomicBool,
    /// Set by the writer once it has sent the closing (zero) rates.
    closed: AtomicBool,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            started: Instant::now(),
            sensor: Mutex::default(),
            command: Mutex::default(),
            command_changed: Condvar::new(),
            field: Mutex::new(None),
            failure: Mutex::new(None),
            stop: AtomicBool::new(false),
            exit_closing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn fail(&self, what: String) {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(what);
        }
    }

    /// Closes the command slot: the writer sends zero rates next and nothing after them, whatever
    /// the loop still offers, and rates it holds already are not sent.
    fn close(&self) {
        self.exit_closing.store(true, Ordering::SeqCst);
        if let Ok(mut slot) = self.command.lock() {
            slot.sequence += 1;
            slot.closing = true;
        }
        self.command_changed.notify_one();
    }
}

/// How long the process's exit stop waits for the writer to send the zero rates before it writes
/// them to the port itself, and then for the port.
const EXIT_WRITER_WAIT: Duration = Duration::from_millis(20);
const EXIT_PORT_WAIT: Duration = Duration::from_millis(30);

/// The Arduino's port, shared by the writer and the exit stop: one line at a time on the wire.
type SharedPort = Arc<Mutex<Box<dyn serialport::SerialPort>>>;

/// The rig's stop at the process's exit ([`crate::hil::exit`]): the writer's closing zero rates,
/// or, if the writer does not confirm them in time (stuck, or gone), the same line written to the
/// port here, between the writer's lines. A second zero line is harmless; the writer sends no
/// other rates after it.
fn exit_stop(shared: &Shared, port: &SharedPort) {
    shared.close();
    if exit::wait_for(EXIT_WRITER_WAIT, || shared.closed.load(Ordering::Relaxed)) {
        return;
    }
    let mut line = Vec::with_capacity(48);
    encode_step_command(&StepRates::default(), &mut line);
    let deadline = Instant::now() + EXIT_PORT_WAIT;
    let port = loop {
        match port.try_lock() {
            Ok(port) => break Some(port),
            Err(TryLockError::Poisoned(poisoned)) => break Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(TryLockError::WouldBlock) => break None,
        }
    };
    match port.map(|mut port| port.write_all(&line)) {
        Some(Ok(())) => {}
        Some(Err(error)) => log::error!("the rig's exit stop could not write zero rates: {error}"),
        None => log::error!("the rig's exit stop found the Arduino's port held for {EXIT_PORT_WAIT:?}"),
    }
}

/// The lab's rig as a [`Hardware`] backend.
pub struct ReferenceRig {
    shared: Arc<Shared>,
    drive: StepperDrive,
    /// The drives' electrical lag at the last write [rad].
    lag: Option<Vec3>,
    readings_seen: u64,
    threads: Vec<JoinHandle<()>>,
    /// Zero rates at the process's exit while the rig is open.
    _exit_stop: exit::DeviceStop,
}

impl ReferenceRig {
    /// Opens both ports and starts their threads.
    pub fn connect(
        sensor: &str,
        arduino: &str,
        config: &RigConfig,
        stepper: StepperConfig,
    ) -> Result<ReferenceRig, HardwareError> {
        let open = |path: &str, baud: u32| {
            serial::open(path, baud, Duration::from_millis(20))
                .map_err(|error| HardwareError::Link(format!("cannot open {path} at {baud} baud: {error}")))
        };
        let sensor_port = open(sensor, config.sensor_baud)?;
        let arduino_port: SharedPort = Arc::new(Mutex::new(open(arduino, config.arduino_baud)?));
        let shared = Arc::new(Shared::new());
        let exit_stop = {
            let (shared, port) = (shared.clone(), arduino_port.clone());
            exit::on_exit(format!("the rig's step-driver Arduino ({arduino})"), move || exit_stop(&shared, &port))
        };
        let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name.into()).spawn(body).map_err(HardwareError::Io)
        };
        let threads = vec![
            spawn("rig-sensor", {
                let shared = shared.clone();
                Box::new(move || read_sensor(sensor_port, &shared))
            })?,
            spawn("rig-stepper", {
                let shared = shared.clone();
                let config = stepper.clone();
                Box::new(move || write_steps(arduino_port, &shared, &config))
            })?,
        ];
        Ok(ReferenceRig {
            shared,
            drive: StepperDrive::new(stepper),
            lag: None,
            readings_seen: 0,
            threads,
            _exit_stop: exit_stop,
        })
    }

    fn check_failure(&self) -> Result<(), HardwareError> {
        match self.shared.failure.try_lock().ok().and_then(|failure| failure.clone()) {
            Some(what) => Err(HardwareError::Link(what)),
            None => Ok(()),
        }
    }

    /// Leaves `rates` for the writer from inside the loop's cycle, never waiting: a writer
    /// holding the slot is copying the rates out, and the next cycle's rates, newer, go instead.
    fn offer_rates(&self, rates: StepRates) {
        if let Ok(slot) = self.shared.command.try_lock() {
            self.store(slot, rates, false);
        }
    }

    /// Leaves `rates` for the writer outside the cycle (the stop, the close), waiting for the
    /// slot.
    fn send_rates(&self, rates: StepRates, closing: bool) {
        if let Ok(slot) = self.shared.command.lock() {
            self.store(slot, rates, closing);
        }
    }

    fn store(&self, mut slot: std::sync::MutexGuard<'_, CommandSlot>, rates: StepRates, closing: bool) {
        slot.sequence += 1;
        slot.rates = rates;
        slot.closing |= closing;
        drop(slot);
        self.shared.command_changed.notify_one();
    }
}

impl Hardware for ReferenceRig {
    fn read(&mut self, _now: f64, _period: f64, input: &mut SensorInput) -> Result<(), HardwareError> {
        self.check_failure()?;
        // The reader holds the lock only to store a reading; if it does now, the reading is
        // taken next cycle.
        if let Ok(slot) = self.shared.sensor.try_lock() {
            if slot.count > self.readings_seen {
                self.readings_seen = slot.count;
                input.reading = slot.reading;
            }
        }
        Ok(())
    }

    fn write(&mut self, _now: f64, period: f64, command: &ActuatorCommand) -> Result<(), HardwareError> {
        self.check_failure()?;
        // No joint angles yet: the drives hold still.
        let Some(theta) = command.theta else {
            self.offer_rates(StepRates::default());
            return Ok(());
        };
        let now = self.shared.elapsed();
        let field = {
            // The writer holds the field only while it credits a rate it sends: this cycle's
            // command waits for the next cycle rather than for the writer.
            let mut field = match self.shared.field.try_lock() {
                Ok(field) => field,
                Err(TryLockError::WouldBlock) => return Ok(()),
                Err(TryLockError::Poisoned(_)) => return Err(HardwareError::Link("the stepper writer failed".into())),
            };
            // The rig holds the arm when the loop starts: the first torque is taken as the one
            // the drives already give.
            let config = self.drive.config();
            field
                .get_or_insert_with(|| FieldTracker::new(config.holding_field_angle(&theta, &command.tau), now))
                .angle_at(now)
        };
        self.lag = Some(self.drive.config().electrical_lag(&field, &theta));
        let theta_dot = command.theta_dot.unwrap_or_default();
        let rates = self.drive.update(&command.tau, &theta, &theta_dot, &field, period);
        self.offer_rates(rates);
        Ok(())
    }

    /// Zero step rates at once; the motors' fields stand still and hold the arm. The ports
    /// stay open for another loop.
    fn stop(&mut self) {
        self.drive.stop();
        self.lag = None;
        self.send_rates(StepRates::default(), false);
    }

    fn electrical_lag(&self) -> Option<Vec3> {
        self.lag
    }

    /// Waits for the sensor's first line (or a port failure).
    fn check(&mut self, timeout: Duration) -> Result<(), HardwareError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_failure()?;
            if self.shared.sensor.lock().map(|slot| slot.count > 0).unwrap_or(false) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HardwareError::Link(format!("the sensor sent no reading within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ReferenceRig {
    fn drop(&mut self) {
        self.send_rates(StepRates::default(), true);
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The sensor thread: lines in, newest reading out.
fn read_sensor(mut port: Box<dyn serialport::SerialPort>, shared: &Shared) {
    crate::hil::realtime::prepare_device_thread(crate::hil::realtime::DEVICE_IO_PRIORITY);
    let mut splitter = LineSplitter::new(128);
    let mut buf = [0u8; 512];
    while !shared.stop.load(Ordering::Relaxed) {
        let read = match port.read(&mut buf) {
            Ok(0) => continue,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(error) => return shared.fail(format!("sensor port: {error}")),
        };
        splitter.push(&buf[..read], |line| {
            let Ok(mut slot) = shared.sensor.lock() else { return };
            match parse_sensor_line(line) {
                Ok(sample) => {
                    slot.count += 1;
                    slot.reading = Some(SphericalReading { r: sample.r, theta: sample.theta, phi: sample.phi });
                }
                Err(error) => {
                    slot.bad_lines += 1;
                    log::debug!("sensor line `{line}` refused: {error}");
                }
            }
        });
    }
}

/// The stepper thread: sends the newest rates whenever they change, and zero rates on closing;
/// the field tracker learns each rate as it is sent.
fn write_steps(port: SharedPort, shared: &Shared, config: &StepperConfig) {
    crate::hil::realtime::prepare_device_thread(crate::hil::realtime::DEVICE_IO_PRIORITY);
    let mut sent = 0;
    let mut line = Vec::with_capacity(48);
    loop {
        let (mut rates, mut closing) = {
            let Ok(slot) = shared.command.lock() else { return };
            let Ok((slot, _)) = shared
                .command_changed
                .wait_timeout_while(slot, Duration::from_millis(100), |slot| slot.sequence == sent && !slot.closing)
            else {
                return;
            };
            sent = slot.sequence;
            (if slot.closing { StepRates::default() } else { slot.rates }, slot.closing)
        };
        let mut port = port.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The exit stop closed the slot since these rates were taken: they are not sent.
        if shared.exit_closing.load(Ordering::SeqCst) {
            (rates, closing) = (StepRates::default(), true);
        }
        line.clear();
        encode_step_command(&rates, &mut line);
        // No flush after the write: tcdrain waits for the other end, and a process paused
        // meanwhile came back to a flush timed out, a lost link for nothing.
        if let Err(error) = port.write_all(&line) {
            return shared.fail(format!("Arduino port: {error}"));
        }
        drop(port);
        // Stamped as the write returns (the line is in the kernel's buffer; the Arduino takes
        // the rates as it arrives), outside the port's lock: the exit stop never waits on the
        // field, which the loop's cycle takes.
        if let Ok(mut field) = shared.field.lock() {
            let now = shared.elapsed();
            if let Some(field) = field.as_mut() {
                field.set_rates(now, &rates, config);
            }
        }
        // The writer ends only after a closing line: zero rates are the last it sends, even when
        // the rig is dropped while it writes older rates (the close is taken on the next turn).
        if closing {
            shared.closed.store(true, Ordering::Relaxed);
            return;
        }
    }
}
