//! The HIL loop through real pseudo-terminals: the lab's rig backend against the rig
//! emulator (sensor lines in, step commands out), with its process paused, with faults injected,
//! and auto-detection of the Arduino.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Duration;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Waypoint;
use arm_hil::drivers::robotscara::{ReferenceRig, RigConfig};
use arm_hil::emulate::rig::{RigEmulator, RigFaults};
use arm_hil::hil::stepper::StepperConfig;
use arm_hil::hil::{FeedItem, HilConfig, HilError, HilLoop, HilReport};
use arm_hil::model::Robot;
use arm_hil::serial::detect::{choose, Candidate, DeviceKind};
use arm_hil::sim::SilConfig;

/// The rig's settings from examples/robotscara.yaml.
fn rig_config() -> SilConfig {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/robotscara.yaml")).unwrap();
    SilConfig::from_yaml(&text).unwrap()
}

fn run_loop(emulator: &RigEmulator, config: &SilConfig, waypoints: Vec<Waypoint>, hil: HilConfig) -> HilReport {
    let robot = Robot::new(config.robot.clone()).unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let rig = ReferenceRig::connect(
        &path(emulator.sensor_path()),
        &path(emulator.arduino_path()),
        &RigConfig::default(),
        StepperConfig::default(),
    )
    .unwrap();
    let (feed, samples) = sync_channel(64);
    std::thread::spawn(move || {
        for waypoint in waypoints {
            if feed.send(FeedItem::Sample(waypoint)).is_err() {
                return;
            }
        }
        let _ = feed.send(FeedItem::End);
    });
    let stop = Arc::new(AtomicBool::new(false));
    HilLoop::new(hil, config, robot.elbow(), robot.params().l_arm, Box::new(rig), samples, stop).unwrap().run()
}

fn loop_config() -> HilConfig {
    // As deployed: SCHED_FIFO where the process may use it (it degrades gracefully where not).
    HilConfig::default()
}

/// One run of the default arc on a fresh emulated rig, judged once: the loop tracks it however
/// the machine schedules its threads (docs/hil.md, "Under load").
#[test]
fn the_loop_tracks_the_default_arc_through_the_pty_emulators() {
    let config = rig_config();
    let robot = Robot::new(config.robot.clone()).unwrap();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let (start, end) = (arc[0].x, arc[arc.len() - 1].x);
    let emulator = RigEmulator::start(&config, StepperConfig::default(), start, 250.0).unwrap();
    let report = run_loop(&emulator, &config, arc, loop_config());
    assert!(report.outcome.is_ok(), "the loop stopped: {:?}; the emulator: {:?}", report.outcome, emulator.failure());
    let stats = emulator.stop();
    assert_eq!(stats.hard_stop_t, None);
    // Every command line was well formed, and the drives were stopped at the end.
    assert_eq!(stats.bad_step_lines, 0);
    assert_eq!(stats.last_rates, [0.0; 3]);
    let (rms_m, final_error_m) = (report.stats.rms_error_m(), (stats.position - end).norm());
    eprintln!(
        "{} cycles, {} readings, RMS tracking error {:.3} mm (estimate), final position error {:.3} mm, \
         loop jitter max {:.0} us, {} overruns, largest lag {:.2} rad",
        report.stats.cycles,
        report.stats.sensor_readings,
        rms_m * 1e3,
        final_error_m * 1e3,
        report.stats.jitter_max_us,
        report.stats.overruns,
        report.stats.max_lag_rad
    );
    // The loop ran the whole arc (about 10 s) on the sensor's readings, and the true arm ends
    // where the arc ends, within a few sensor quanta (2.3 mm each).
    assert!(report.stats.cycles > 9_000 && report.stats.sensor_readings > 2_000);
    assert!(rms_m < 5e-3, "RMS {rms_m} m");
    assert!(final_error_m < 15e-3, "the arm ended {final_error_m} m from the arc's end");
}

#[test]
fn an_arm_driven_to_the_workspace_edge_stops_at_a_hard_stop_and_the_emulator_goes_on() {
    use arm_hil::hil::stepper::StepRates;
    use arm_hil::protocol::rig::encode_step_command;
    use std::io::Write;

    let config = rig_config();
    let robot = Robot::new(config.robot.clone()).unwrap();
    let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0].x;
    let emulator = RigEmulator::start(&config, StepperConfig::default(), start, 250.0).unwrap();
    let mut arduino =
        arm_hil::serial::open(emulator.arduino_path().to_str().unwrap(), 250_000, Duration::from_millis(20)).unwrap();
    // Joint 1's field turning at a steady 2 000 pulses/s, nothing else: the arm is dragged until
    // it meets a stop.
    let mut line = Vec::new();
    encode_step_command(&StepRates([2000.0, 0.0, 0.0]), &mut line);
    arduino.write_all(&line).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while emulator.stats().hard_stop_t.is_none() {
        assert!(std::time::Instant::now() < deadline, "no hard stop: {:?}", emulator.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = emulator.stats();
    std::thread::sleep(Duration::from_millis(300));
    let later = emulator.stats();
    assert_eq!(emulator.failure(), None, "the emulator stopped instead");
    assert!(later.t > stopped.t && later.sensor_lines > stopped.sensor_lines, "the emulator went on");
    assert_eq!(later.position, stopped.position, "the arm stays at the stop");
}

/// `arm_hil emulate sensor` with `extra` arguments, its device paths read, and the rest of what it
/// prints.
fn emulate_sensor(extra: &[&str]) -> (RigProcess, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_arm_hil"))
        .args(["emulate", "sensor"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut path = || lines.next().unwrap().unwrap().split_whitespace().last().unwrap().to_owned();
    let (sensor, stepper) = (path(), path());
    (RigProcess { child, sensor, stepper }, lines)
}

/// An emulator process, interrupted and waited for when the test is done with it.
struct RigProcess {
    child: std::process::Child,
    sensor: String,
    stepper: String,
}

impl Drop for RigProcess {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let _ = self.child.wait();
    }
}

/// The rig's configuration, as the README runs it.
const ROBOTSCARA_YAML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/robotscara.yaml");

/// `arm_hil hil` on the emulated rig's pseudo-terminals with `extra` arguments, printing JSON.
fn hil_on(rig: &RigProcess, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_arm_hil"))
        .args(["hil", "--hardware", "robotscara", "--sensor", &rig.sensor, "--arduino", &rig.stepper, "--json"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The estimator setting a run of `child` reports.
fn sigma_a_of(child: std::process::Child) -> f64 {
    let output = child.wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    summary["estimator_sigma_a_m_s2"].as_f64().unwrap_or_else(|| panic!("{summary}"))
}

/// `--hardware robotscara` is given the estimator setting measured best on the rig
/// (docs/decisions.md), `--hardware sim` the simulator's, and a configuration file's setting
/// wins over both: what the loop is built with, as the run reports it.
#[test]
fn each_hardware_is_given_its_own_estimator_setting_and_a_configuration_wins() {
    let simulators = arm_hil::control::EstimatorConfig::default().sigma_a;
    let [("estimator", "sigma_a", rigs)] = arm_hil::drivers::RigKind::Robotscara.measured_defaults() else {
        panic!("the rig's measured settings are its estimator's sigma_a")
    };
    assert_ne!(*rigs, simulators, "the rig has a setting of its own");
    assert_eq!(*rigs, rig_config().estimator.sigma_a, "as examples/robotscara.yaml says");
    let (rig, _said) = emulate_sensor(&[]);
    assert_eq!(sigma_a_of(hil_on(&rig, &["--duration", "0.2"])), *rigs, "the rig's own");
    let config = std::env::temp_dir().join(format!("arm_hil_sigma_a_{}.yaml", std::process::id()));
    let given_sigma_a = 1.0;
    assert!(given_sigma_a != *rigs && given_sigma_a != simulators);
    std::fs::write(&config, format!("estimator:\n  sigma_a: {given_sigma_a:?}\n")).unwrap();
    let given = hil_on(&rig, &["--duration", "0.2", "--config", config.to_str().unwrap()]);
    assert_eq!(sigma_a_of(given), given_sigma_a, "the configuration's");
    let sim = std::process::Command::new(env!("CARGO_BIN_EXE_arm_hil"))
        .args(["hil", "--hardware", "sim", "--duration", "0.2", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(sigma_a_of(sim), simulators, "the simulator's");
    let _ = std::fs::remove_file(config);
}

/// The arc as the lab runs it, `arm_hil hil` against `arm_hil emulate sensor`, with the loop's
/// whole process stopped for 20 ms every 300 ms (as a busy host pauses a virtual machine; the
/// emulated rig runs on, as hardware does): it still tracks, judged once.
#[test]
fn the_loop_tracks_the_default_arc_with_its_process_paused_20_ms_every_300_ms() {
    use nix::sys::signal::{kill, Signal};

    let (rig, _said) = emulate_sensor(&[]);
    let mut hil = hil_on(&rig, &["--config", ROBOTSCARA_YAML]);
    let pid = nix::unistd::Pid::from_raw(hil.id() as i32);
    while hil.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(280));
        if kill(pid, Signal::SIGSTOP).is_ok() {
            std::thread::sleep(Duration::from_millis(20));
            let _ = kill(pid, Signal::SIGCONT);
        }
    }
    let output = hil.wait_with_output().unwrap();
    drop(rig);
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    eprintln!("{summary}");
    assert_eq!(summary["outcome"], "ok", "{summary}");
    assert!(summary["skipped_periods"].as_u64().unwrap() > 300, "the process was paused: {summary}");
    assert!(summary["rms_error_m"].as_f64().unwrap() < 5e-3, "{summary}");
}

/// The default arc on a fresh emulated rig with `faults` injected after 2 s: the loop must end
/// in a protective stop naming its bound, and the arm must not have reached a hard stop.
fn protective_stop_on(faults: RigFaults) -> arm_hil::hil::protection::Trip {
    let config = rig_config();
    let robot = Robot::new(config.robot.clone()).unwrap();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let emulator = RigEmulator::start(&config, StepperConfig::default(), arc[0].x, 250.0).unwrap();
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            emulator.set_faults(faults);
        });
        run_loop(&emulator, &config, arc, loop_config())
    });
    // The emulated arm runs on after the stop: it must stay clear of its hard stops.
    std::thread::sleep(Duration::from_millis(500));
    let stats = emulator.stop();
    assert_eq!(stats.hard_stop_t, None, "the arm reached a hard stop");
    assert_eq!(stats.last_rates, [0.0; 3], "the motors hold");
    match report.outcome {
        Err(HilError::ProtectiveStop { trip, .. }) => trip,
        other => panic!("a protective stop, not {other:?}"),
    }
}

#[test]
fn a_motor_that_stops_obeying_trips_the_protective_stop_before_a_hard_stop() {
    let trip = protective_stop_on(RigFaults { ignored_motor: Some(2), ..RigFaults::default() });
    eprintln!("{trip}");
}

#[test]
fn a_frozen_sensor_trips_the_protective_stop_before_a_hard_stop() {
    let trip = protective_stop_on(RigFaults { sensor_frozen: true, ..RigFaults::default() });
    eprintln!("{trip}");
}

/// The default arc on a fresh emulated rig whose sensor garbles every `every`-th line after
/// `after`: what the loop made of it, and what the emulator saw.
fn run_with_garbled_lines(every: u32, after: Duration) -> (HilReport, arm_hil::emulate::rig::RigEmulatorStats) {
    let config = rig_config();
    let robot = Robot::new(config.robot.clone()).unwrap();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let emulator = RigEmulator::start(&config, StepperConfig::default(), arc[0].x, 250.0).unwrap();
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(after);
            emulator.set_faults(RigFaults { sensor_garbled_every: Some(every), ..RigFaults::default() });
        });
        run_loop(&emulator, &config, arc, loop_config())
    });
    std::thread::sleep(Duration::from_millis(200));
    (report, emulator.stop())
}

#[test]
fn garbled_sensor_lines_are_rejected_and_counted_and_the_arc_is_tracked_through_them() {
    let (report, stats) = run_with_garbled_lines(5, Duration::from_secs(1));
    eprintln!("max {} m, RMS {} m", report.stats.max_error_m, report.stats.rms_error_m());
    report.outcome.unwrap();
    let (rejected, taken) = (report.stats.rejected_readings, report.stats.sensor_readings);
    // About one line in five after the first second of the arc's 9.9 s.
    assert!(rejected * 5 > taken / 2 && rejected * 3 < taken, "{rejected} rejected, {taken} taken");
    assert!(report.stats.rms_error_m() < 3e-3, "RMS {} m", report.stats.rms_error_m());
    assert_eq!(stats.hard_stop_t, None);
}

#[test]
fn a_sensor_that_sends_only_readings_the_rig_cannot_produce_is_a_fault_the_motors_holding() {
    let (report, stats) = run_with_garbled_lines(1, Duration::from_millis(1500));
    match report.outcome {
        // The count, or the silence timer if it comes first: both end on the refused readings.
        Err(HilError::ImplausibleReadings { count, .. }) => {
            assert!((1..=HilConfig::default().max_rejected_readings).contains(&count), "{count}")
        }
        other => panic!("readings the rig cannot produce, not {other:?}"),
    }
    assert_eq!(stats.last_rates, [0.0; 3], "the motors hold");
    assert_eq!(stats.hard_stop_t, None);
}

/// The README's pulled cable: `emulate sensor --pull-cable-after 1` silences the sensor 1 s into
/// the run (its clock started by the run's first step command, not by the emulator's start: the
/// run starts a second after the emulator here), and `arm_hil hil` stops with the reason and
/// exits 1.
#[test]
fn a_cable_pulled_by_the_emulator_one_second_in_ends_the_hil_run_with_sensor_lost() {
    let (rig, mut said) = emulate_sensor(&["--pull-cable-after", "1"]);
    std::thread::sleep(Duration::from_secs(1));
    let output = hil_on(&rig, &["--config", ROBOTSCARA_YAML]).wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let outcome = summary["outcome"].as_str().unwrap();
    assert!(outcome.starts_with("sensor lost at t = "), "{summary}");
    assert_eq!(output.status.code(), Some(1), "{summary}");
    let lost_at: f64 = outcome["sensor lost at t = ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!((1.0..1.5).contains(&lost_at), "the cable was pulled 1 s into the run: {outcome}");
    // The emulator interrupted and gone, what it said is read to its end.
    drop(rig);
    let silent = said.next().unwrap().unwrap();
    assert!(silent.starts_with("sensor silent at t = "), "{silent}");
}

#[test]
fn a_silent_sensor_stops_the_loop_safely_with_the_reason() {
    let config = rig_config();
    let robot = Robot::new(config.robot.clone()).unwrap();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let emulator = RigEmulator::start(&config, StepperConfig::default(), arc[0].x, 250.0).unwrap();
    let silencer = {
        let emulator = &emulator;
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(500));
                emulator.set_sensor_silent(true);
            });
            run_loop(emulator, &config, arc, loop_config())
        })
    };
    assert!(matches!(silencer.outcome, Err(HilError::SensorLost { .. })), "{:?}", silencer.outcome);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(emulator.stop().last_rates, [0.0; 3]);
}

fn candidate(path: &str, usb_id: Option<(u16, u16)>, by_id_name: Option<&str>) -> Candidate {
    Candidate { path: PathBuf::from(path), usb_id, by_id_name: by_id_name.map(String::from) }
}

fn choose_arduino_of<'a>(candidates: &'a [Candidate], sensor: Option<&Path>) -> Option<&'a Candidate> {
    choose(candidates, DeviceKind::RigArduino, sensor)
}

#[test]
fn auto_detection_finds_the_arduino_by_usb_id_then_by_name_and_never_the_sensor() {
    let sensor = Some(Path::new("/dev/ttyUSB0"));
    let ftdi_sensor = candidate("/dev/ttyUSB0", Some((0x0403, 0x6001)), Some("usb-FTDI_FT232R-if00-port0"));
    let uno = candidate("/dev/ttyACM0", Some((0x2341, 0x0043)), None);
    let ch340 = candidate("/dev/ttyUSB1", Some((0x1a86, 0x7523)), None);
    let named = candidate("/dev/ttyACM3", None, Some("usb-Arduino__www.arduino.cc__0043_75735-if00"));
    assert_eq!(choose_arduino_of(&[ftdi_sensor.clone(), uno.clone()], sensor), Some(&uno));
    assert_eq!(choose_arduino_of(&[ftdi_sensor.clone(), named.clone(), ch340.clone()], sensor), Some(&ch340));
    assert_eq!(choose_arduino_of(&[ftdi_sensor.clone(), named.clone()], sensor), Some(&named));
    // A CH340 sensor is never taken for the Arduino.
    let ch340_sensor = candidate("/dev/ttyUSB0", Some((0x1a86, 0x7523)), None);
    assert_eq!(choose_arduino_of(&[ch340_sensor], sensor), None);
    assert_eq!(choose_arduino_of(&[ftdi_sensor], sensor), None);
}

#[test]
fn auto_detection_tells_the_stm32_from_the_testbench_and_the_rig() {
    let nucleo =
        candidate("/dev/ttyACM0", Some((0x0483, 0x374b)), Some("usb-STMicroelectronics_STM32_STLink_0670-if02"));
    let teensy = candidate("/dev/ttyACM1", Some((0x16c0, 0x0483)), None);
    let uno = candidate("/dev/ttyACM2", Some((0x2341, 0x0043)), None);
    let all = [nucleo.clone(), teensy.clone(), uno.clone()];
    assert_eq!(choose(&all, DeviceKind::Stm32, None), Some(&nucleo));
    assert_eq!(choose(&all, DeviceKind::Testbench, None), Some(&teensy));
    assert_eq!(choose(&all, DeviceKind::RigArduino, None), Some(&uno));
    assert_eq!(choose(std::slice::from_ref(&uno), DeviceKind::Stm32, None), None, "an Arduino is never the STM32");
    assert_eq!(choose(std::slice::from_ref(&nucleo), DeviceKind::Testbench, None), None, "nor the STM32 the testbench");
}
