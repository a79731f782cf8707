//! Whatever stops the software stops the device (docs/safety.md, "Exit paths"): `arm_hil serve`,
//! `hil`, `stm32` and `arduino` interrupted mid-motion, as real processes on their device
//! emulators' pseudo-terminals. The emulators run in this test's process, so that what the
//! device was sent is read the moment it arrives: the steppers' rates are zero within 0.1 s of
//! the signal and stay zero, the STM32 is sent a hold, the testbench a Stop, and the process is
//! gone within 1 s.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use arm_hil::control::arc::ArcSpec;
use arm_hil::emulate::rdscom::RdscomEmulator;
use arm_hil::emulate::rig::RigEmulator;
use arm_hil::emulate::stm32::{Stm32Emulator, Stm32EmulatorConfig};
use arm_hil::hil::stepper::StepperConfig;
use arm_hil::model::Robot;
use arm_hil::protocol::legacy::{encode_request, Mode, Request};
use arm_hil::protocol::rdscom::PrototypeTable;
use arm_hil::sim::SilConfig;
use nix::sys::signal::Signal;

/// The bound between the signal and the device's stop or hold.
const STOP_BOUND: Duration = Duration::from_millis(100);
/// The bound between the signal and the process's end.
const EXIT_BOUND: Duration = Duration::from_secs(1);

/// The rig's settings, as examples/robotscara.yaml has them, and the emulator's pseudo-terminals
/// on the server's allow-list.
const RIG_CONFIG: &str = "estimator:\n  sigma_a: 0.5\nserver:\n  device_allow_list: [\"/dev/pts/*\"]\n";

fn config_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arm_hil_exit_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// One of our processes, killed (and waited for) if a test leaves it running.
struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Process {
    fn start(args: &[&str]) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        Process { stdin: child.stdin.take(), child, lines }
    }

    /// The next line it prints that contains `what`.
    fn line_with(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("no line with `{what}` within 20 s"));
            if line.contains(what) {
                return line;
            }
        }
    }

    fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn signal(&self, signal: Signal) -> Instant {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
        Instant::now()
    }

    /// Waits for the process to end, at most `EXIT_BOUND` after `signalled`; panics if it is still
    /// there, or was killed by a signal rather than ending by itself.
    fn assert_gone_within_bound(&mut self, signalled: Instant) {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let took = signalled.elapsed();
                assert!(took <= EXIT_BOUND, "the process took {took:?} to end");
                assert!(status.code().is_some(), "the process did not end by itself: {status}");
                return;
            }
            assert!(signalled.elapsed() <= EXIT_BOUND, "the process is still running {EXIT_BOUND:?} after the signal");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` every millisecond until it holds; how long that took, or `None` past `within`.
fn time_until(within: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() <= within {
        if done() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn rig_sil_config() -> SilConfig {
    SilConfig::from_yaml("estimator:\n  sigma_a: 0.5\n").unwrap()
}

/// The emulated rig, its arm at rest where the built-in arc starts.
fn rig_emulator() -> RigEmulator {
    let sil = rig_sil_config();
    let robot = Robot::new(sil.robot.clone()).unwrap();
    let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0].x;
    RigEmulator::start(&sil, StepperConfig::default(), start, 250.0).unwrap()
}

fn path(path: &std::path::Path) -> String {
    path.to_str().unwrap().to_owned()
}

fn moving(rig: &RigEmulator) -> bool {
    rig.stats().last_rates.iter().any(|rate| *rate != 0.0)
}

/// Waits until the loop has driven the steppers for `running`, then sends `signals` a millisecond
/// apart, and checks the device and the process: the rates zero within `STOP_BOUND` and still zero
/// half a second on, the process gone within `EXIT_BOUND`.
fn interrupt_mid_motion(rig: &RigEmulator, process: &mut Process, running: Duration, signals: &[Signal]) {
    time_until(Duration::from_secs(20), || moving(rig)).expect("the loop never drove the steppers");
    std::thread::sleep(running);
    assert!(moving(rig), "the arm stopped before the signal: {:?}", rig.stats());
    let signalled = process.signal(signals[0]);
    for signal in &signals[1..] {
        std::thread::sleep(Duration::from_millis(1));
        process.signal(*signal);
    }
    let stopped = time_until(STOP_BOUND, || !moving(rig));
    assert!(
        stopped.is_some(),
        "the steppers still had rates {:?} {STOP_BOUND:?} after the signal",
        rig.stats().last_rates
    );
    process.assert_gone_within_bound(signalled);
    let commands = rig.stats().step_commands;
    std::thread::sleep(Duration::from_millis(500));
    let after = rig.stats();
    assert_eq!(after.last_rates, [0.0; 3], "the steppers moved again after the stop");
    assert_eq!(after.step_commands, commands, "step commands came after the process ended");
}

/// A port-5555 client starts an `H` session of `arm_hil trajectory arc --max-speed 1.5` (31 s) on
/// the emulated rig; returns the server, the client's socket, and the rig.
fn serve_h_session(name: &str) -> (Process, std::net::TcpStream, RigEmulator) {
    let rig = rig_emulator();
    let config = config_file(name, RIG_CONFIG);
    let server = Process::start(&[
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--hil-hardware",
        "robotscara",
        "--config",
        config.to_str().unwrap(),
    ]);
    let address = server.line_with("listening on").split_whitespace().last().unwrap().to_owned();
    let robot = Robot::default();
    let arc = ArcSpec { max_speed_deg_s: 1.5, ..ArcSpec::default() };
    let waypoints = arc.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let mode = Mode::Hil { sensor: path(rig.sensor_path()), arduino: path(rig.arduino_path()) };
    let mut request = Vec::new();
    encode_request(&Request { mode, elbow: robot.elbow(), l_arm: robot.params().l_arm, waypoints }, &mut request);
    let mut client = std::net::TcpStream::connect(address).unwrap();
    client.write_all(&request).unwrap();
    // The client reads what the server streams, as the lab's GUI does.
    let mut reader = client.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut sink = [0u8; 65536];
        while matches!(reader.read(&mut sink), Ok(read) if read > 0) {}
    });
    (server, client, rig)
}

#[test]
fn ctrl_c_on_serve_mid_h_session_stops_the_steppers_and_ends_the_process() {
    let (mut server, _client, rig) = serve_h_session("serve_int");
    interrupt_mid_motion(&rig, &mut server, Duration::from_secs(4), &[Signal::SIGINT]);
}

#[test]
fn sigterm_on_serve_mid_h_session_stops_the_steppers_and_ends_the_process() {
    let (mut server, _client, rig) = serve_h_session("serve_term");
    interrupt_mid_motion(&rig, &mut server, Duration::from_secs(2), &[Signal::SIGTERM]);
}

#[test]
fn a_second_ctrl_c_on_serve_stops_the_steppers_and_exits_at_once() {
    let (mut server, _client, rig) = serve_h_session("serve_twice");
    interrupt_mid_motion(&rig, &mut server, Duration::from_secs(2), &[Signal::SIGINT, Signal::SIGINT]);
}

/// `arm_hil hil` on the emulated rig, running the built-in arc.
fn hil_on_the_rig(rig: &RigEmulator, name: &str) -> Process {
    let config = config_file(name, RIG_CONFIG.lines().take(2).collect::<Vec<_>>().join("\n").as_str());
    let (sensor, arduino) = (path(rig.sensor_path()), path(rig.arduino_path()));
    let args = [
        "hil",
        "--hardware",
        "robotscara",
        "--sensor",
        &sensor,
        "--arduino",
        &arduino,
        "--config",
        config.to_str().unwrap(),
    ];
    Process::start(&args)
}

#[test]
fn ctrl_c_on_hil_mid_run_stops_the_steppers_and_ends_the_process() {
    let rig = rig_emulator();
    let mut hil = hil_on_the_rig(&rig, "hil_int");
    interrupt_mid_motion(&rig, &mut hil, Duration::from_secs(2), &[Signal::SIGINT]);
}

#[test]
fn sigterm_on_hil_mid_run_stops_the_steppers_and_ends_the_process() {
    let rig = rig_emulator();
    let mut hil = hil_on_the_rig(&rig, "hil_term");
    interrupt_mid_motion(&rig, &mut hil, Duration::from_secs(2), &[Signal::SIGTERM]);
}

/// `arm_hil stm32` sends a far target; the signal comes as the servos start for it. The driver's
/// last word must be a hold where telemetry last put them, so the servos never reach the target.
fn stm32_interrupted_on_its_way(signal: Signal) {
    let emulator = Stm32Emulator::start(Stm32EmulatorConfig::default()).unwrap();
    let mut driver = Process::start(&["stm32", "--port", &path(emulator.path())]);
    driver.line_with("telemetry");
    let target = [1.2, -1.2];
    driver.type_line(&format!("angles {} {}", target[0], target[1]));
    // The wire carries f32.
    let at_target = |targets: [f64; 2]| (targets[0] - target[0]).abs() < 1e-6 && (targets[1] - target[1]).abs() < 1e-6;
    time_until(Duration::from_secs(5), || at_target(emulator.stats().targets)).expect("the target never arrived");
    // A little way along (the emulated servos' time constant is 50 ms).
    time_until(Duration::from_secs(1), || emulator.stats().angles[0] > 0.1).expect("the servos never moved");
    let signalled = driver.signal(signal);
    let held = time_until(STOP_BOUND, || !at_target(emulator.stats().targets));
    assert!(held.is_some(), "no hold within {STOP_BOUND:?}: targets {:?}", emulator.stats().targets);
    let hold = emulator.stats().targets;
    assert!(hold[0] < 1.0 && hold[1] > -1.0, "the hold {hold:?} is not where the servos were");
    driver.assert_gone_within_bound(signalled);
    std::thread::sleep(Duration::from_millis(400));
    let after = emulator.stats();
    assert_eq!(after.targets, hold, "a target came after the hold");
    assert!(after.angles[0] < 1.0, "the servos went on to the target: {:?}", after.angles);
}

#[test]
fn ctrl_c_on_stm32_holds_the_servos_where_they_are_and_ends_the_process() {
    stm32_interrupted_on_its_way(Signal::SIGINT);
}

#[test]
fn sigterm_on_stm32_holds_the_servos_where_they_are_and_ends_the_process() {
    stm32_interrupted_on_its_way(Signal::SIGTERM);
}

/// `arm_hil arduino` queues a move and runs it; the signal must send the MCU a Stop.
fn arduino_interrupted(signal: Signal) {
    let emulator = RdscomEmulator::start(PrototypeTable::document()).unwrap();
    let mut driver = Process::start(&["arduino", "--port", &path(emulator.path())]);
    driver.line_with("link Up");
    driver.type_line("move 1 0 1.0");
    driver.type_line("go");
    time_until(Duration::from_secs(5), || emulator.stats().controls_queued >= 1).expect("the move never arrived");
    assert_eq!(emulator.stats().stops, 0);
    let signalled = driver.signal(signal);
    let stopped = time_until(STOP_BOUND, || emulator.stats().stops >= 1);
    assert!(stopped.is_some(), "no Stop within {STOP_BOUND:?}: {:?}", emulator.stats());
    driver.assert_gone_within_bound(signalled);
}

#[test]
fn ctrl_c_on_arduino_sends_a_stop_and_ends_the_process() {
    arduino_interrupted(Signal::SIGINT);
}

#[test]
fn sigterm_on_arduino_sends_a_stop_and_ends_the_process() {
    arduino_interrupted(Signal::SIGTERM);
}
