//! The lab's rig (docs/rig.md) on two pseudo-terminals: an angle sensor that reads the simulated arm, and
//! a step-driver Arduino whose stepper motors drive it, so a HIL loop through both ports closes.
//!
//! Stepper physics (docs/hil.md): each motor's field turns with the commanded step rate; the
//! joint torque is Gr Kt Imax sin(delta) with delta the electrical lag, plus electrical damping
//! on the slip. The torque is evaluated inside the plant's ODE: the gearboxed joint's holding
//! stiffness (about 150 Hz) is far too stiff for a torque held for a millisecond.
//!
//! The arm has hard stops a little inside the edges of its workspace: an arm driven there stops
//! dead and stays (as a crashed arm waits for a person), and the emulator says so, so that a
//! test can tell whether the loop's protective stop came first. Faults can be injected: a motor
//! that ignores its step rates, a sensor frozen at one reading, garbled sensor lines.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Worker;
use crate::hil::stepper::{FieldTracker, StepperConfig};
use crate::model::math::Vec3;
use crate::model::{ModelError, Robot};
use crate::protocol::rig::{encode_sensor_line, parse_step_command, LineSplitter, SensorLine};
use crate::serial::pty::Pty;
use crate::sim::{
    joint_state, plant_state, BogackiShampine, OdeSystem, Plant, PlantState, SilConfig, SimulatedSensor, StepOutcome,
};

/// Damping ratio of each motor's holding stiffness that the electrical damping gives.
const DAMPING_RATIO: f64 = 0.7;

/// Where the hard stops are: a leg's reach margin [rad] and the distal links' assembly height
/// [m] at which the arm hits them (half the protective stop's default bounds).
const HARD_STOP_REACH_RAD: f64 = 0.05;
const HARD_STOP_ASSEMBLY_M: f64 = 0.005;

/// Faults the emulated rig can be told to have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RigFaults {
    /// This motor (0-2) ignores the step rates sent to it: its field stands still.
    pub ignored_motor: Option<usize>,
    /// The sensor repeats the reading it took when this was set.
    pub sensor_frozen: bool,
    /// Every n-th sensor line is garbled: its polar angle off by [`GARBLED_OFFSET_RAD`], a
    /// reading the rig cannot produce (1: every line).
    pub sensor_garbled_every: Option<u32>,
}

/// How far a garbled sensor line's polar angle is off [rad]: the point moves by some 20 cm.
pub const GARBLED_OFFSET_RAD: f64 = 0.5;

/// The arm driven by stepper motors.
#[derive(Debug, Clone)]
struct SteppedPlant {
    plant: Plant,
    stepper: StepperConfig,
    field: FieldTracker,
    /// Electrical damping on the slip between field and rotor, joint side [N m s/rad].
    damping: Vec3,
}

impl SteppedPlant {
    /// tau = Gr Kt Imax sin(pole_pairs (field - Gr theta)) + c (field_rate / Gr - theta_dot).
    fn torque(&self, t: f64, theta: &Vec3, theta_dot: &Vec3) -> Vec3 {
        let lag = self.stepper.electrical_lag(&self.field.angle_at(t), theta);
        let slip = self.field.rate().component_div(&Vec3::from(self.stepper.gear_ratio)) - theta_dot;
        self.stepper.peak_torque().component_mul(&lag.map(f64::sin)) + self.damping.component_mul(&slip)
    }
}

impl OdeSystem<6> for SteppedPlant {
    type Error = ModelError;

    fn derivative(&mut self, t: f64, y: &PlantState) -> Result<PlantState, ModelError> {
        let (theta, theta_dot) = joint_state(y);
        self.plant.set_torque(self.torque(t, &theta, &theta_dot));
        self.plant.derivative(t, y)
    }
}

/// What the emulator has seen, for tests and the command line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RigEmulatorStats {
    pub sensor_lines: u64,
    pub step_commands: u64,
    pub bad_step_lines: u64,
    /// The last step rates received [pulses/s].
    pub last_rates: [f64; 3],
    /// The emulator's clock [s], and its time at the last step command received [s].
    pub t: f64,
    pub last_command_t: f64,
    /// The true platform point [m].
    pub position: Vec3,
    /// When the arm hit a hard stop [s, emulator clock], if it did.
    pub hard_stop_t: Option<f64>,
}

struct Control {
    sensor_silent: AtomicBool,
    faults: Mutex<RigFaults>,
    stats: Mutex<RigEmulatorStats>,
    failure: Mutex<Option<String>>,
}

/// A running rig emulator.
pub struct RigEmulator {
    sensor_path: PathBuf,
    arduino_path: PathBuf,
    control: Arc<Control>,
    worker: Worker,
}

impl RigEmulator {
    /// Starts the arm at rest at `start` [m], held by its motors, with the sensor writing
    /// `sensor_rate_hz` lines per second.
    pub fn start(
        sil: &SilConfig,
        stepper: StepperConfig,
        start: Vec3,
        sensor_rate_hz: f64,
    ) -> Result<RigEmulator, String> {
        let robot = Robot::new(sil.robot.clone()).map_err(|error| error.to_string())?;
        let motion = robot.motion_from_task(&start, &Vec3::zeros(), None, 0.0).map_err(|error| error.to_string())?;
        // Damping for the chosen ratio of each motor's holding stiffness k = Gr^2 Kt Imax poles.
        let gear = Vec3::from(stepper.gear_ratio);
        let stiffness = stepper.peak_torque().component_mul(&gear) * stepper.pole_pairs;
        let inertia = robot.mass_matrix(&motion).diagonal();
        let damping = (stiffness.component_mul(&inertia)).map(f64::sqrt) * (2.0 * DAMPING_RATIO);
        // The motors hold the arm against gravity from the start, as a powered rig does.
        let field_angle = stepper.holding_field_angle(&motion.theta, &robot.gravity_torques(&motion));
        let robot_for_stops = robot.clone();
        let plant = Plant::new(robot, &motion.theta, &motion.theta_dot, &start).map_err(|error| error.to_string())?;
        let stepped = SteppedPlant { plant, stepper, field: FieldTracker::new(field_angle, 0.0), damping };
        let sensor = SimulatedSensor::new(&sil.sensor)?;
        let (sensor_pty, arduino_pty) =
            (Pty::open().map_err(|e| e.to_string())?, Pty::open().map_err(|e| e.to_string())?);
        let control = Arc::new(Control {
            sensor_silent: AtomicBool::new(false),
            faults: Mutex::new(RigFaults::default()),
            stats: Mutex::new(RigEmulatorStats { position: start, ..RigEmulatorStats::default() }),
            failure: Mutex::new(None),
        });
        let mut emulation = Emulation {
            stepped,
            integrator: BogackiShampine::new(sil.integrator.clone()),
            y: plant_state(&motion.theta, &motion.theta_dot),
            t: 0.0,
            sensor,
            elbow: Vec3::from(sil.robot.elbow),
            sensor_period: 1.0 / sensor_rate_hz,
            control: control.clone(),
            robot: robot_for_stops,
            frozen_reading: None,
            hard_stop_t: None,
        };
        let (sensor_path, arduino_path) = (sensor_pty.path().to_path_buf(), arduino_pty.path().to_path_buf());
        let worker = Worker::spawn("rig-emulator", move |stop| {
            if let Err(error) = emulation.run(sensor_pty, arduino_pty, stop) {
                if let Ok(mut failure) = emulation.control.failure.lock() {
                    *failure = Some(error);
                }
            }
        })
        .map_err(|error| error.to_string())?;
        Ok(RigEmulator { sensor_path, arduino_path, control, worker })
    }

    /// The angle sensor's device path.
    pub fn sensor_path(&self) -> &Path {
        &self.sensor_path
    }

    /// The step-driver Arduino's device path.
    pub fn arduino_path(&self) -> &Path {
        &self.arduino_path
    }

    /// Silences the sensor (a cable pulled) or lets it speak again.
    pub fn set_sensor_silent(&self, silent: bool) {
        self.control.sensor_silent.store(silent, Ordering::Relaxed);
    }

    /// Injects `faults` from now on (and clears those not set).
    pub fn set_faults(&self, faults: RigFaults) {
        if let Ok(mut current) = self.control.faults.lock() {
            *current = faults;
        }
    }

    pub fn stats(&self) -> RigEmulatorStats {
        self.control.stats.lock().map(|stats| *stats).unwrap_or_default()
    }

    /// Why the emulation stopped by itself, if it did.
    pub fn failure(&self) -> Option<String> {
        self.control.failure.lock().ok().and_then(|failure| failure.clone())
    }

    /// Stops the emulator and returns its statistics.
    pub fn stop(mut self) -> RigEmulatorStats {
        self.worker.stop();
        self.stats()
    }
}

struct Emulation {
    stepped: SteppedPlant,
    integrator: BogackiShampine<6>,
    y: PlantState,
    t: f64,
    sensor: SimulatedSensor,
    elbow: Vec3,
    sensor_period: f64,
    control: Arc<Control>,
    /// The arm's model, for where its hard stops are.
    robot: Robot,
    /// The reading a frozen sensor repeats.
    frozen_reading: Option<crate::control::SphericalReading>,
    /// When the arm hit a hard stop [s].
    hard_stop_t: Option<f64>,
}

impl Emulation {
    /// Longest wait for a step command before the plant is advanced anyway.
    const MAX_WAIT: Duration = Duration::from_millis(1);

    fn run(&mut self, mut sensor_pty: Pty, mut arduino_pty: Pty, stop: &AtomicBool) -> Result<(), String> {
        let started = Instant::now();
        let mut next_sensor = 0.0;
        let mut splitter = LineSplitter::new(64);
        let mut buf = [0u8; 256];
        let mut line = Vec::with_capacity(64);
        let mut stats = RigEmulatorStats::default();
        while !stop.load(Ordering::Relaxed) {
            // Wake for the next command as soon as it arrives, so that rates take effect when
            // they would on the Arduino, or for the next sensor line.
            let until_sensor = Duration::from_secs_f64((next_sensor - started.elapsed().as_secs_f64()).max(0.0));
            arduino_pty.wait_readable(until_sensor.min(Self::MAX_WAIT));
            let now = started.elapsed().as_secs_f64();
            self.advance(now);
            loop {
                let read = match arduino_pty.master().read(&mut buf) {
                    Ok(read) => read,
                    // No driver has the port open, or nothing is waiting.
                    Err(error)
                        if error.kind() == std::io::ErrorKind::WouldBlock
                            || error.raw_os_error() == Some(libc::EIO) =>
                    {
                        0
                    }
                    Err(error) => return Err(format!("Arduino pty: {error}")),
                };
                if read == 0 {
                    break;
                }
                let faults = self.control.faults.lock().map(|faults| *faults).unwrap_or_default();
                splitter.push(&buf[..read], |text| match parse_step_command(text) {
                    Ok(mut rates) => {
                        stats.step_commands += 1;
                        stats.last_rates = rates.0;
                        stats.last_command_t = now;
                        if let Some(motor) = faults.ignored_motor {
                            rates.0[motor] = 0.0;
                        }
                        self.stepped.field.set_rates(now, &rates, &self.stepped.stepper);
                        self.integrator.invalidate();
                    }
                    Err(_) => stats.bad_step_lines += 1,
                });
            }
            if now >= next_sensor {
                next_sensor = (next_sensor + self.sensor_period).max(now);
                if !self.control.sensor_silent.load(Ordering::Relaxed) {
                    let p = self.stepped.plant.motion().p;
                    let faults = self.control.faults.lock().map(|faults| *faults).unwrap_or_default();
                    let mut reading = match (faults.sensor_frozen, self.frozen_reading) {
                        (true, Some(reading)) => reading,
                        _ => self.sensor.measure(&p, &self.elbow),
                    };
                    self.frozen_reading = faults.sensor_frozen.then_some(reading);
                    if faults.sensor_garbled_every.is_some_and(|n| (stats.sensor_lines + 1) % u64::from(n.max(1)) == 0)
                    {
                        reading.theta += GARBLED_OFFSET_RAD;
                    }
                    line.clear();
                    encode_sensor_line(
                        &SensorLine { t: now, r: reading.r, theta: reading.theta, phi: reading.phi },
                        &mut line,
                    );
                    // A full pty (nobody reading) drops the line, as a real sensor's would be lost.
                    if sensor_pty.master().write(&line).is_ok() {
                        stats.sensor_lines += 1;
                    }
                }
            }
            stats.position = self.stepped.plant.motion().p;
            stats.t = now;
            stats.hard_stop_t = self.hard_stop_t;
            super::publish(&self.control.stats, stats, false);
        }
        super::publish(&self.control.stats, stats, true);
        Ok(())
    }

    /// Moves the arm on to `until` [s], unless it sits at a hard stop.
    fn advance(&mut self, until: f64) {
        while self.t < until && self.hard_stop_t.is_none() {
            let outcome = match self.integrator.step(&mut self.stepped, self.t, &self.y, until - self.t) {
                Ok(outcome) => outcome,
                // A step that would leave the workspace ends on the stop.
                Err(error) => {
                    self.hit_hard_stop(&error.to_string());
                    break;
                }
            };
            if let StepOutcome::Accepted { t, y, .. } = outcome {
                self.t = if (until - t).abs() < 1e-12 { until } else { t };
                self.y = y;
                self.stepped.plant.accept(&y);
                if let Some(why) = self.at_hard_stop() {
                    self.hit_hard_stop(&why);
                }
            }
        }
        self.t = self.t.max(until);
    }

    /// Why the arm is at a hard stop, if it is.
    fn at_hard_stop(&self) -> Option<String> {
        let motion = self.stepped.plant.motion();
        let reach = self.robot.reach_margins(&motion.p).map_or(0.0, |margins| margins.min());
        if reach < HARD_STOP_REACH_RAD {
            return Some(format!("a leg's reach margin is {reach:.3} rad"));
        }
        let height = self.robot.assembly_height(&motion.theta).unwrap_or(0.0);
        (height < HARD_STOP_ASSEMBLY_M).then(|| format!("the distal links' assembly height is {height:.4} m"))
    }

    /// The arm stops dead where it is and stays there.
    fn hit_hard_stop(&mut self, why: &str) {
        let (theta, _) = joint_state(&self.y);
        self.y = plant_state(&theta, &Vec3::zeros());
        self.stepped.plant.accept(&self.y);
        self.hard_stop_t = Some(self.t);
        let p = self.stepped.plant.motion().p;
        log::error!("the arm hit a hard stop at t = {:.3} s, at ({:.4}, {:.4}, {:.4}) m: {why}", self.t, p.x, p.y, p.z);
    }
}
