//! The protective stop as users meet it (docs/hil.md): `arm_hil hil` and `arm_hil serve` against
//! the emulated rig (`arm_hil emulate sensor`, real pseudo-terminals) with a fault injected, and
//! with a bound set below what any run achieves. Each fault must end the run in a protective
//! stop naming its bound, before the emulated arm reaches a hard stop.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arm_hil::control::arc::ArcSpec;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::protocol::legacy::{encode_request, Mode, Request, FRAME_BYTES};

fn arm_hil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_arm_hil"))
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arm_hil_stop_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A process of ours that is interrupted (and waited for) when dropped.
struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// What it logged (stderr), line by line.
    logged: std::sync::mpsc::Receiver<String>,
}

/// Every line `from` gives, into a channel.
fn lines_of(from: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    lines
}

impl Running {
    fn start(command: &mut Command) -> Running {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let logged = lines_of(child.stderr.take().unwrap());
        Running { child, lines, logged }
    }

    /// What it has logged so far.
    fn log(&self) -> Vec<String> {
        std::iter::from_fn(|| self.logged.recv_timeout(Duration::from_millis(200)).ok()).collect()
    }

    fn line(&self) -> String {
        self.lines.recv_timeout(Duration::from_secs(10)).expect("a line within 10 s")
    }

    /// Ctrl-C, then everything it printed after the lines already taken.
    fn interrupt(mut self) -> String {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        for _ in 0..500 {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_millis(200)).ok()).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The emulated rig with `faults` (emulate sensor's flags) from 2 s on: it and its two device paths.
fn rig(faults: &[&str]) -> (Running, String, String) {
    let rig = Running::start(arm_hil().args(["emulate", "sensor", "--faults-after", "2"]).args(faults));
    let sensor = rig.line().split_whitespace().last().unwrap().to_owned();
    let stepper = rig.line().split_whitespace().last().unwrap().to_owned();
    (rig, sensor, stepper)
}

/// What the emulator said, checked: the faults went in and the arm never hit a hard stop.
fn assert_no_hard_stop(rig: Running, faulty: bool) {
    let said = rig.interrupt();
    assert_eq!(said.contains("faults injected"), faulty, "{said}");
    assert!(!said.contains("hard stop"), "the arm reached a hard stop first: {said}");
}

/// The rig's settings with the bounds `protection`; for `arm_hil serve`, `server` settings too.
fn config(dir: &Path, protection: &str, server: &str) -> PathBuf {
    let path = dir.join("rig.yaml");
    std::fs::write(&path, format!("estimator:\n  sigma_a: 0.5\nhil:\n  protection:\n{protection}{server}")).unwrap();
    path
}

/// The emulator's pseudo-terminals on the server's allow-list.
const PTYS_ALLOWED: &str = "server:\n  device_allow_list: [\"/dev/pts/*\"]\n";

/// The default tracking bound, written out.
const DEFAULT_BOUNDS: &str = "    max_tracking_error_m: 0.01\n";
const TIGHT_BOUND: &str = "    max_tracking_error_m: 0.000001\n";

/// `arm_hil hil` on the emulated rig: its JSON summary, having exited non-zero.
fn hil_run(faults: &[&str], protection: &str, name: &str) -> serde_json::Value {
    let dir = scratch_dir(name);
    let (rig, sensor, stepper) = rig(faults);
    let config = config(&dir, protection, "");
    let output = arm_hil()
        .args(["hil", "--hardware", "robotscara", "--sensor", &sensor, "--arduino", &stepper, "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_no_hard_stop(rig, !faults.is_empty());
    assert!(!output.status.success(), "a protective stop is a failed run");
    assert!(String::from_utf8_lossy(&output.stderr).contains("protective stop"));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn assert_stopped_by(summary: &serde_json::Value, bounds: &[&str]) {
    assert_eq!(summary["outcome"], "protective_stop", "{summary}");
    let bound = summary["protective_stop"]["bound"].as_str().unwrap();
    assert!(bounds.contains(&bound), "{summary}");
}

#[test]
fn hil_stops_a_motor_that_stops_obeying() {
    let summary = hil_run(&["--ignore-motor", "3"], DEFAULT_BOUNDS, "motor");
    assert_stopped_by(&summary, &["tracking_error", "slip"]);
}

#[test]
fn hil_stops_on_a_frozen_sensor() {
    let summary = hil_run(&["--freeze-sensor"], DEFAULT_BOUNDS, "frozen");
    assert_stopped_by(&summary, &["tracking_error", "slip"]);
}

#[test]
fn hil_stops_at_a_bound_below_the_runs_error_and_names_it_in_the_json() {
    let summary = hil_run(&[], TIGHT_BOUND, "tight");
    assert_stopped_by(&summary, &["tracking_error"]);
    let stop = &summary["protective_stop"];
    assert_eq!(stop["limit"], 1e-6, "{summary}");
    assert!(stop["value"].as_f64().unwrap() > 1e-6, "{summary}");
    assert!(stop["reason"].as_str().unwrap().starts_with("protective stop at t = "), "{summary}");
}

/// A port-5555 HIL session of the default arc on the emulated rig: the frames' times, the last
/// being the end marker, as the lab's client reads them, and what the server logged of it.
fn port_5555_session(faults: &[&str], protection: &str, name: &str) -> (Vec<f64>, Vec<String>) {
    port_5555_session_about(Robot::default().elbow(), faults, protection, name)
}

/// [`port_5555_session`] of the built-in arc about `elbow` [m] (the rig's forearm is the
/// built-in one).
fn port_5555_session_about(elbow: Vec3, faults: &[&str], protection: &str, name: &str) -> (Vec<f64>, Vec<String>) {
    let dir = scratch_dir(name);
    let (rig, sensor, stepper) = rig(faults);
    let config = config(&dir, protection, PTYS_ALLOWED);
    let server = Running::start(
        arm_hil().args(["serve", "--bind", "127.0.0.1:0", "--hil-hardware", "robotscara", "--config"]).arg(&config),
    );
    let address = server.line().split_whitespace().last().unwrap().to_owned();
    let robot = Robot::default();
    let waypoints = ArcSpec::default().waypoints(&elbow, robot.params().l_arm).unwrap();
    let mut request = Vec::new();
    let mode = Mode::Hil { sensor, arduino: stepper };
    encode_request(&Request { mode, elbow, l_arm: robot.params().l_arm, waypoints }, &mut request);
    let mut client = std::net::TcpStream::connect(address).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    client.write_all(&request).unwrap();
    let mut response = Vec::new();
    client.read_to_end(&mut response).unwrap();
    let logged = server.log();
    server.interrupt();
    assert_no_hard_stop(rig, !faults.is_empty());
    assert_eq!(response.len() % FRAME_BYTES, 0);
    let times = response.chunks(FRAME_BYTES).map(|frame| f64::from_le_bytes(frame[..8].try_into().unwrap())).collect();
    (times, logged)
}

/// The session ended in a protective stop at one of `bounds`, between `from_s` and `by_s` of
/// loop time, as the server logged it; its frames stopped with the loop, and the end marker
/// came at once (the arc's 9.86 s never ran).
fn assert_stopped_between(session: &(Vec<f64>, Vec<String>), bounds: &[&str], from_s: f64, by_s: f64) {
    let (times, logged) = session;
    let robot = Robot::default();
    let arc = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    assert_eq!(*times.last().unwrap(), arc[arc.len() - 1].t, "the end marker closes the stream");
    let stop = logged
        .iter()
        .find_map(|line| line.split("the HIL run stopped: protective stop at t = ").nth(1))
        .unwrap_or_else(|| panic!("the server logs no protective stop: {logged:?}"));
    let stopped_at: f64 = stop.split(' ').next().unwrap().parse().unwrap();
    assert!(bounds.iter().any(|bound| stop.contains(bound)), "stopped by another bound: {stop}");
    assert!((from_s..by_s).contains(&stopped_at), "stopped at {stopped_at} s: {stop}");
    // The loop's time starts at the arc's first waypoint (0 s): its frames end where it stopped.
    let last_frame = times[times.len().saturating_sub(2)];
    assert!((last_frame - stopped_at).abs() < 0.05, "frames ran to {last_frame} s, the stop came at {stopped_at} s");
}

#[test]
fn a_port_5555_hil_session_ends_in_a_protective_stop_when_a_motor_stops_obeying() {
    let session = port_5555_session(&["--ignore-motor", "3"], DEFAULT_BOUNDS, "session_motor");
    // The faults begin 2 s after the emulator starts, a little before the session does.
    assert_stopped_between(&session, &["tracking_error", "slip"], 1.0, 9.0);
}

#[test]
fn a_port_5555_hil_session_ends_in_a_protective_stop_on_a_frozen_sensor() {
    let session = port_5555_session(&["--freeze-sensor"], DEFAULT_BOUNDS, "session_frozen");
    assert_stopped_between(&session, &["tracking_error", "slip"], 1.0, 9.0);
}

#[test]
fn a_port_5555_hil_session_ends_at_once_at_a_bound_below_its_error() {
    let session = port_5555_session(&[], TIGHT_BOUND, "session_tight");
    assert_stopped_between(&session, &["tracking_error"], 0.0, 1.0);
}

#[test]
fn a_port_5555_hil_session_whose_trajectory_would_trip_the_stop_is_refused_before_the_rig_moves() {
    // A reach bound the arc's own start passes: nothing runs, the rig is never opened.
    let (times, logged) = port_5555_session(
        &[],
        "    min_reach_margin_rad: 3.0
",
        "session_refused",
    );
    assert!(times.is_empty(), "frames were sent: {times:?}");
    let refusal =
        logged.iter().find(|line| line.contains("the trajectory is refused before anything moves")).expect("a refusal");
    assert!(refusal.contains("reach_margin"), "{refusal}");
}

#[test]
fn a_port_5555_hil_session_faster_than_the_motors_may_turn_is_refused_before_the_rig_moves() {
    // The arc turns a motor at up to 0.54 rad/s: held to 0.3, nothing runs.
    let (times, logged) = port_5555_session(
        &[],
        "    max_joint_speed_rad_s: 0.3
",
        "session_too_fast",
    );
    assert!(times.is_empty(), "frames were sent: {times:?}");
    let refusal =
        logged.iter().find(|line| line.contains("the trajectory is refused before anything moves")).expect("a refusal");
    assert!(refusal.contains("faster than hil.protection.max_joint_speed_rad_s (0.3 rad/s)"), "{refusal}");
}

#[test]
fn a_port_5555_hil_session_about_another_forearm_than_the_rigs_is_refused_before_the_rig_moves() {
    let elbow = Robot::default().elbow() + Vec3::new(0.02, 0.0, 0.0);
    let (times, logged) = port_5555_session_about(elbow, &[], DEFAULT_BOUNDS, "session_other_forearm");
    assert!(times.is_empty(), "frames were sent: {times:?}");
    let refusal =
        logged.iter().find(|line| line.contains("the trajectory is refused before anything moves")).expect("a refusal");
    assert!(
        refusal.contains("its forearm (elbow at (0.370, 0.350, 0.000) m, l_arm 0.450 m) is not the rig's"),
        "{refusal}"
    );
}
