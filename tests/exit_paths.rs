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
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arm_hil::control::arc::ArcSpec;
use arm_hil::emulate::rdscom::RdscomEmulator;
use arm_hil::emulate::rig::RigEmulator;
use arm_hil::emulate::stm32::{Stm32Emulator, Stm32EmulatorConfig, Stm32EmulatorStats};
use arm_hil::hil::exit;
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

/// The rig's settings, as examples/robotscara.yaml has them, but for a sensor timeout long enough
/// for this test's process, which emulates the rig, to be starved on a busy machine: the run must
/// still be going when the signal comes.
const RIG_SETTINGS: &str = "estimator:\n  sigma_a: 0.5\nhil:\n  sensor_timeout_s: 1.0\n";
/// The emulator's pseudo-terminals on the server's allow-list.
const PTYS_ALLOWED: &str = "server:\n  device_allow_list: [\"/dev/pts/*\"]\n";

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
    /// What it logs, each line with when it was read.
    logged: Receiver<(Instant, String)>,
}

/// Every line `from` gives, with when it was read, into a channel.
fn lines_of(from: impl Read + Send + 'static) -> Receiver<(Instant, String)> {
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let _ = sender.send((Instant::now(), line));
        }
    });
    lines
}

impl Process {
    fn start(args: &[&str]) -> Process {
        Process::start_with(args, &[])
    }

    fn start_with(args: &[&str], environment: &[(&str, &str)]) -> Process {
        // As users run it, without RUST_BACKTRACE (cargo test sets it): with it, a panic's report
        // resolves a backtrace before the thread unwinds, and a serial driver whose own thread
        // panics writes its hold as the thread unwinds (docs/safety.md, "Exit paths").
        let mut child = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
            .env_remove("RUST_BACKTRACE")
            .args(args)
            .envs(environment.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let printed = lines_of(child.stdout.take().unwrap());
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (_, line) in printed {
                let _ = sender.send(line);
            }
        });
        let logged = lines_of(child.stderr.take().unwrap());
        Process { stdin: child.stdin.take(), child, lines, logged }
    }

    /// What it has logged and not been taken yet.
    fn log_so_far(&self) -> Vec<String> {
        self.logged.try_iter().map(|(_, line)| line).collect()
    }

    /// When it logged a line with `what` (waiting up to 20 s for it), and the line.
    fn logged(&self, what: &str) -> (Instant, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, line) = self.logged.recv_timeout(left).unwrap_or_else(|_| panic!("nothing logged with `{what}`"));
            eprintln!("{line}");
            if line.contains(what) {
                return (at, line);
            }
        }
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
    /// there, or was killed by a signal rather than ending by itself. Its exit status.
    fn assert_gone_within_bound(&mut self, signalled: Instant) -> i32 {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let took = signalled.elapsed();
                assert!(took <= EXIT_BOUND, "the process took {took:?} to end");
                return status.code().unwrap_or_else(|| panic!("the process did not end by itself: {status}"));
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
/// Looks at least once, however late this thread runs.
fn time_until(within: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    loop {
        if done() {
            return Some(started.elapsed());
        }
        if started.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn rig_sil_config() -> SilConfig {
    SilConfig::from_yaml("estimator:\n  sigma_a: 0.5\n").unwrap()
}

/// The emulated rig, held by one test at a time: each runs a 1 kHz loop against a plant emulated
/// in real time, and several at once on two cores trip their protective stops before the signal.
struct Rig {
    emulator: RigEmulator,
    _one_at_a_time: MutexGuard<'static, ()>,
}

impl std::ops::Deref for Rig {
    type Target = RigEmulator;
    fn deref(&self) -> &RigEmulator {
        &self.emulator
    }
}

/// The emulated rig, its arm at rest where the built-in arc starts.
fn rig_emulator() -> Rig {
    static RIGS: Mutex<()> = Mutex::new(());
    let one_at_a_time = RIGS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let sil = rig_sil_config();
    let robot = Robot::new(sil.robot.clone()).unwrap();
    let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0].x;
    let emulator = RigEmulator::start(&sil, StepperConfig::default(), start, 250.0).unwrap();
    Rig { emulator, _one_at_a_time: one_at_a_time }
}

fn path(path: &std::path::Path) -> String {
    path.to_str().unwrap().to_owned()
}

fn moving(rig: &RigEmulator) -> bool {
    rig.stats().last_rates.iter().any(|rate| *rate != 0.0)
}

/// Waits until the loop has driven the steppers for `running`, then sends `signal`, and checks the
/// device and the process: the rates zero within `STOP_BOUND` and still zero half a second on, the
/// process gone within `EXIT_BOUND`, having ended its run (status 0).
fn interrupt_mid_motion(rig: &RigEmulator, process: &mut Process, running: Duration, signal: Signal) {
    time_until(Duration::from_secs(20), || moving(rig)).expect("the loop never drove the steppers");
    std::thread::sleep(running);
    assert!(moving(rig), "the arm stopped before the signal: {:?}\n{}", rig.stats(), process.log_so_far().join("\n"));
    let signalled = process.signal(signal);
    assert_stops_within(rig, STOP_BOUND, "the signal");
    assert_eq!(process.assert_gone_within_bound(signalled), 0, "a run ended by a signal");
    assert_stays_stopped(rig);
}

fn assert_stops_within(rig: &RigEmulator, bound: Duration, after: &str) {
    let stopped = time_until(bound, || !moving(rig));
    assert!(stopped.is_some(), "the steppers still had rates {:?} {bound:?} after {after}", rig.stats().last_rates);
}

/// Half a second on, the rates are still zero and no step command came.
fn assert_stays_stopped(rig: &RigEmulator) {
    let commands = rig.stats().step_commands;
    std::thread::sleep(Duration::from_millis(500));
    let after = rig.stats();
    assert_eq!(after.last_rates, [0.0; 3], "the steppers moved again after the stop");
    assert_eq!(after.step_commands, commands, "step commands came after the process ended");
}

/// A port-5555 client starts an `H` session of `arm_hil trajectory arc --max-speed 1.5` (31 s) on
/// the emulated rig; returns the server, the client's socket, and the rig.
fn serve_h_session(name: &str) -> (Process, std::net::TcpStream, Rig) {
    let rig = rig_emulator();
    let config = config_file(name, &format!("{RIG_SETTINGS}{PTYS_ALLOWED}"));
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
    interrupt_mid_motion(&rig, &mut server, Duration::from_secs(4), Signal::SIGINT);
}

#[test]
fn sigterm_on_serve_mid_h_session_stops_the_steppers_and_ends_the_process() {
    let (mut server, _client, rig) = serve_h_session("serve_term");
    interrupt_mid_motion(&rig, &mut server, Duration::from_secs(2), Signal::SIGTERM);
}

/// `arm_hil hil` on the emulated rig, running the built-in arc.
fn hil_on_the_rig(rig: &RigEmulator, name: &str) -> Process {
    hil_on_the_rig_with(rig, name, &[])
}

fn hil_on_the_rig_with(rig: &RigEmulator, name: &str, environment: &[(&str, &str)]) -> Process {
    let config = config_file(name, RIG_SETTINGS);
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
    Process::start_with(&args, environment)
}

#[test]
fn ctrl_c_on_hil_mid_run_stops_the_steppers_and_ends_the_process() {
    let rig = rig_emulator();
    let mut hil = hil_on_the_rig(&rig, "hil_int");
    interrupt_mid_motion(&rig, &mut hil, Duration::from_secs(2), Signal::SIGINT);
}

#[test]
fn sigterm_on_hil_mid_run_stops_the_steppers_and_ends_the_process() {
    let rig = rig_emulator();
    let mut hil = hil_on_the_rig(&rig, "hil_term");
    interrupt_mid_motion(&rig, &mut hil, Duration::from_secs(2), Signal::SIGTERM);
}

/// `arm_hil hil` whose loop thread stops for good 2 s into the run (the test-only fault hook):
/// the steppers keep their last rates, and the command, which waits for its loop, cannot end by
/// itself. The rig and the process once the loop is stuck.
fn a_stuck_loop(name: &str) -> (Rig, Process) {
    let rig = rig_emulator();
    let hil = hil_on_the_rig_with(&rig, name, &[("ARM_HIL_INJECT_FAULT", "hang:hil-loop:2")]);
    time_until(Duration::from_secs(20), || moving(&rig)).expect("the loop never drove the steppers");
    // The rig's writer repeats the last rates every 100 ms: a stuck loop's rates stop changing.
    let mut before = rig.stats().last_rates;
    let stuck = time_until(Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(300));
        let now = rig.stats().last_rates;
        std::mem::replace(&mut before, now) == now
    });
    assert!(stuck.is_some(), "the loop did not get stuck: {:?}\n{}", rig.stats(), hil.log_so_far().join("\n"));
    assert!(moving(&rig), "a stuck loop left rates: the steppers run on");
    (rig, hil)
}

#[test]
fn a_second_ctrl_c_stops_the_steppers_and_exits_at_once_when_the_run_cannot_end() {
    let (rig, mut hil) = a_stuck_loop("stuck_twice");
    hil.signal(Signal::SIGINT);
    std::thread::sleep(exit::SAME_INTERRUPT + Duration::from_millis(100));
    assert!(moving(&rig), "the stuck loop's rates were stopped before the second Ctrl-C");
    let again = hil.signal(Signal::SIGINT);
    assert_stops_within(&rig, STOP_BOUND, "the second Ctrl-C");
    assert_eq!(hil.assert_gone_within_bound(again), exit::INTERRUPTED_STATUS);
    assert!(again.elapsed() < Duration::from_millis(300), "the second Ctrl-C did not end the process at once");
    assert_stays_stopped(&rig);
}

#[test]
fn the_steppers_are_stopped_and_the_process_ended_when_the_run_cannot_end_within_the_grace() {
    let (rig, mut hil) = a_stuck_loop("stuck_grace");
    let signalled = hil.signal(Signal::SIGTERM);
    assert_stops_within(&rig, exit::GRACE + STOP_BOUND, "the signal and the grace");
    assert_eq!(hil.assert_gone_within_bound(signalled), exit::INTERRUPTED_STATUS);
    assert_stays_stopped(&rig);
}

/// The STM32 arm's firmware with servos slow enough (a time constant of 2 s) to be stopped on
/// their way to a far target.
fn slow_stm32() -> Stm32Emulator {
    Stm32Emulator::start(Stm32EmulatorConfig { servo_time_constant_s: 2.0, ..Stm32EmulatorConfig::default() }).unwrap()
}

/// The far target the STM32 tests send [rad].
const FAR: [f64; 2] = [1.2, -1.2];

/// The firmware's target is FAR (as the wire's f32 carries it).
fn at_far(targets: [f64; 2]) -> bool {
    (targets[0] - FAR[0]).abs() < 1e-6 && (targets[1] - FAR[1]).abs() < 1e-6
}

/// `arm_hil stm32` with `environment`, once it has sent FAR and the servos are on their way.
fn stm32_on_its_way(emulator: &Stm32Emulator, environment: &[(&str, &str)]) -> Process {
    let mut driver = Process::start_with(&["stm32", "--port", &path(emulator.path())], environment);
    driver.line_with("telemetry");
    driver.type_line(&format!("angles {} {}", FAR[0], FAR[1]));
    time_until(Duration::from_secs(5), || at_far(emulator.stats().targets)).expect("the target never arrived");
    time_until(Duration::from_secs(2), || emulator.stats().angles[0] > 0.05).expect("the servos never moved");
    driver
}

/// Within `bound`, the firmware's target is a hold where the servos are, short of FAR; nothing
/// comes after it, and the servos stay there.
fn assert_held_short_of_the_target(emulator: &Stm32Emulator, bound: Duration) {
    let held = time_until(bound, || !at_far(emulator.stats().targets));
    assert!(held.is_some(), "no hold within {bound:?}: targets {:?}", emulator.stats().targets);
    let Stm32EmulatorStats { targets: hold, angles, .. } = emulator.stats();
    // Telemetry comes at 50 Hz, and the servos move at most 0.6 rad/s.
    let off = (hold[0] - angles[0]).abs().max((hold[1] - angles[1]).abs());
    assert!(off < 0.05 && hold[0] < 1.0, "the hold {hold:?} is not where the servos were, {angles:?}");
    std::thread::sleep(Duration::from_millis(400));
    let after = emulator.stats();
    assert_eq!(after.targets, hold, "a target came after the hold");
    assert!((after.angles[0] - hold[0]).abs() < 0.05, "the servos went on: {:?}", after.angles);
}

/// `arm_hil stm32` sends a far target; the signal comes as the servos start for it. The driver's
/// last word must be a hold where telemetry last put them, so the servos never reach the target.
fn stm32_interrupted_on_its_way(signal: Signal) {
    let emulator = slow_stm32();
    let mut driver = stm32_on_its_way(&emulator, &[]);
    let signalled = driver.signal(signal);
    assert_held_short_of_the_target(&emulator, STOP_BOUND);
    assert_eq!(driver.assert_gone_within_bound(signalled), 0);
}

#[test]
fn ctrl_c_on_stm32_holds_the_servos_where_they_are_and_ends_the_process() {
    stm32_interrupted_on_its_way(Signal::SIGINT);
}

#[test]
fn sigterm_on_stm32_holds_the_servos_where_they_are_and_ends_the_process() {
    stm32_interrupted_on_its_way(Signal::SIGTERM);
}

#[test]
fn a_panic_in_the_stm32_drivers_own_thread_holds_the_servos_and_ends_the_process() {
    let emulator = slow_stm32();
    let mut driver = stm32_on_its_way(&emulator, &[("ARM_HIL_INJECT_FAULT", "panic:stm32-driver:3")]);
    let (panicked, report) = driver.logged("panicked");
    assert!(report.contains("stm32-driver"), "{report}");
    assert_held_short_of_the_target(&emulator, STOP_BOUND);
    assert_eq!(driver.assert_gone_within_bound(panicked), exit::PANIC_STATUS);
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
    assert_eq!(driver.assert_gone_within_bound(signalled), 0);
}

#[test]
fn ctrl_c_on_arduino_sends_a_stop_and_ends_the_process() {
    arduino_interrupted(Signal::SIGINT);
}

#[test]
fn sigterm_on_arduino_sends_a_stop_and_ends_the_process() {
    arduino_interrupted(Signal::SIGTERM);
}

/// `arm_hil hil` on the emulated rig, `thread` panicking 2 s into the run (the test-only fault
/// hook): the steppers' rates are zero within 0.1 s of the panic's report and stay zero, the
/// process ends within 1 s with a panic's status.
fn a_panic_mid_run(thread: &str, extra: &[&str]) {
    let rig = rig_emulator();
    let config = config_file(&format!("panic_{thread}"), RIG_SETTINGS);
    let (sensor, arduino) = (path(rig.sensor_path()), path(rig.arduino_path()));
    let mut args = vec!["hil", "--hardware", "robotscara", "--sensor", &sensor, "--arduino", &arduino];
    args.extend(["--config", config.to_str().unwrap()]);
    args.extend(extra);
    let injection = format!("panic:{thread}:2");
    let mut hil = Process::start_with(&args, &[("ARM_HIL_INJECT_FAULT", &injection)]);
    time_until(Duration::from_secs(20), || moving(&rig)).expect("the loop never drove the steppers");
    let (panicked, report) = hil.logged("panicked");
    assert!(report.contains(thread), "{report}");
    assert_stops_within(&rig, STOP_BOUND.saturating_sub(panicked.elapsed()), "the panic");
    assert_eq!(hil.assert_gone_within_bound(panicked), exit::PANIC_STATUS, "a panic's exit status");
    assert_stays_stopped(&rig);
}

#[test]
fn a_panic_in_the_loop_thread_stops_the_steppers_and_ends_the_process() {
    a_panic_mid_run("hil-loop", &[]);
}

#[test]
fn a_panic_in_the_publishing_thread_stops_the_steppers_and_ends_the_process() {
    let bag = std::env::temp_dir().join(format!("arm_hil_exit_panic_bag_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&bag);
    a_panic_mid_run("hil-publish", &["--bag", bag.to_str().unwrap()]);
}
