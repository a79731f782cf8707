//! The `arm_hil` command line as users and scripts call it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn arm_hil(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arm_hil")).args(args).output().expect("arm_hil runs")
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arm_hil_cli_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn sil_without_arguments_runs_the_built_in_arc_and_prints_a_json_summary() {
    let output = arm_hil(&["sil", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in [
        "steps",
        "rejected_steps",
        "frames",
        "sim_time_s",
        "wall_time_s",
        "rtf",
        "rms_error_m",
        "max_error_m",
        "max_abs_tau",
    ] {
        assert!(summary.get(key).is_some(), "missing key {key} in {summary}");
    }
    assert_eq!(summary["max_abs_tau"].as_array().unwrap().len(), 3);
    assert!(summary["rms_error_m"].as_f64().unwrap() < 1e-3);
}

#[test]
fn an_arc_written_by_trajectory_arc_runs_in_sil_with_all_outputs() {
    let dir = scratch_dir("arc");
    let arc = dir.join("arc.csv");
    let arc_arg = arc.to_str().unwrap();
    let written = arm_hil(&["trajectory", "arc", "--from", "65,-150", "--to", "65,-140", "--out", arc_arg]);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let text = std::fs::read_to_string(&arc).unwrap();
    assert!(text.starts_with("t,x,y,z,xd,yd,zd,xdd,ydd,zdd\n"));
    let arc_degrees = 9.06; // the great circle between the two directions
    let rows = text.lines().count() - 1;
    assert!(rows as f64 > arc_degrees * 100.0 && (rows as f64) < arc_degrees * 100.0 + 3.0, "{rows} waypoints");

    let [frames, ideal, plot] = ["frames.csv", "ideal.csv", "plot.svg"].map(|name| dir.join(name));
    let output = arm_hil(&[
        "sil",
        "--trajectory",
        arc_arg,
        "--frames",
        frames.to_str().unwrap(),
        "--ideal",
        ideal.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("tracking error"));
    let frames = std::fs::read_to_string(frames).unwrap();
    assert!(frames.starts_with("t,x,y,z,xd,yd,zd,theta1,theta2,theta3,"));
    assert_eq!(std::fs::read_to_string(ideal).unwrap().lines().count(), rows + 1);
    assert!(std::fs::read_to_string(plot).unwrap().starts_with("<svg"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_unreachable_waypoint_is_refused_naming_its_index() {
    let dir = scratch_dir("unreachable");
    let path = dir.join("bad.csv");
    std::fs::write(&path, "t,x,y,z,xd,yd,zd,xdd,ydd,zdd\n0,0.15,0,0.2,0,0,0,0,0,0\n1,3,3,3,0,0,0,0,0,0\n").unwrap();
    let output = arm_hil(&["sil", "--trajectory", path.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("waypoint 1 is unreachable"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_configuration_with_an_unknown_key_is_refused() {
    let dir = scratch_dir("config");
    let path = dir.join("bad.yaml");
    std::fs::write(&path, "controller:\n  kp: 100\n  kq: 3\n").unwrap();
    let output = arm_hil(&["sil", "--config", path.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown field `kq`"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_example_configuration_lists_the_defaults() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sil.yaml")).unwrap();
    assert_eq!(arm_hil::sim::SilConfig::from_yaml(&text).unwrap(), arm_hil::sim::SilConfig::default());
}

#[test]
fn the_sil_section_names_are_the_configuration_keys() {
    let value = serde_json::to_value(arm_hil::sim::SilConfig::default()).unwrap();
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = arm_hil::sim::SilConfig::SECTIONS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
}

#[test]
fn sweep_prints_cases_and_spreads_as_json_and_draws_the_distribution() {
    let dir = scratch_dir("sweep");
    let svg = dir.join("sweep.svg");
    let output = arm_hil(&["sweep", "--seeds", "3", "--kp", "800,900", "--json", "--svg", svg.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["cases"].as_array().unwrap().len(), 6);
    assert_eq!(report["failed"], 0);
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    for key in ["mean", "p95", "worst"] {
        assert!(groups[0]["rms_error_m"][key].as_f64().unwrap() < 1e-3, "{key} in {report}");
    }
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn sil_frame_rate_gives_evenly_spaced_frames() {
    let dir = scratch_dir("frame_rate");
    let frames = dir.join("frames.csv");
    let output = arm_hil(&["sil", "--json", "--frame-rate", "100", "--frames", frames.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let times: Vec<f64> =
        csv::Reader::from_path(&frames).unwrap().records().map(|record| record.unwrap()[0].parse().unwrap()).collect();
    assert!(times.len() > 900);
    for (k, t) in times.iter().enumerate() {
        assert!((t - (k + 1) as f64 / 100.0).abs() < 1e-9, "frame {k} at {t}");
    }
}

#[test]
fn trajectory_figure_eight_runs_in_sil() {
    let dir = scratch_dir("eight");
    let eight = dir.join("eight.csv");
    let written = arm_hil(&["trajectory", "figure-eight", "-o", eight.to_str().unwrap()]);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let output = arm_hil(&["sil", "--json", "--trajectory", eight.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(summary["rms_error_m"].as_f64().unwrap() < 1e-3, "{summary}");
}

fn bag_info(dir: &std::path::Path) -> serde_json::Value {
    let output = arm_hil(&["bag", "info", dir.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn count(info: &serde_json::Value, topic: &str) -> u64 {
    info["topics"].as_array().unwrap().iter().find(|t| t["name"] == topic).map_or(0, |t| t["count"].as_u64().unwrap())
}

#[test]
fn sil_bag_holds_sil_nodes_topics_at_the_bag_rate_and_bag_info_lists_them() {
    let dir = scratch_dir("sil_bag");
    let bag = dir.join("run");
    let _ = std::fs::remove_dir_all(&bag);
    let output = arm_hil(&["sil", "--bag", bag.to_str().unwrap(), "--bag-rate", "100", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let info = bag_info(&bag);
    assert_eq!(info["storage_id"], "mcap");
    assert!(info["warnings"].as_array().unwrap().is_empty(), "{info}");
    let samples = (summary["sim_time_s"].as_f64().unwrap() * 100.0).round() as u64;
    for topic in ["/joint_states", "/tf", "/clock", "/sil_node/end_effector", "/sil_node/reference", "/sil_node/state"]
    {
        assert!(count(&info, topic).abs_diff(samples) <= 1, "{topic}: {} for {samples}", count(&info, topic));
    }
    for topic in ["/robot_description", "/tf_static", "/sil_node/reference_path", "/sil_node/ideal"] {
        assert_eq!(count(&info, topic), 1, "{topic}");
    }
    assert_eq!(info["start_ns"], 0, "simulated time from zero");
    let again = arm_hil(&["sil", "--bag", bag.to_str().unwrap()]);
    assert!(!again.status.success(), "a bag was written over");
}

#[test]
fn an_interrupted_hil_run_leaves_a_bag_that_reads_up_to_the_interruption() {
    let dir = scratch_dir("hil_bag");
    let bag = dir.join("run");
    let _ = std::fs::remove_dir_all(&bag);
    let child = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
        .args(["hil", "--bag", bag.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait_with_output().unwrap().status;
    assert!(status.code().is_some(), "killed by the signal rather than stopping");
    let info = bag_info(&bag);
    assert!(info["warnings"].as_array().unwrap().is_empty(), "{info}");
    assert!(count(&info, "/joint_states") >= 100, "{info}");
    assert!(count(&info, "/diagnostics") >= 1, "{info}");
}

/// A command running in the background with its first line of output read (the address or
/// device it announces); killed if the test ends before it is stopped.
struct Background {
    child: std::process::Child,
    first_line: String,
}

impl Background {
    fn start(args: &[&str], stdin: std::process::Stdio) -> Background {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
            .args(args)
            .stdin(stdin)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first_line = String::new();
        stdout.read_line(&mut first_line).unwrap();
        // Keep reading, so the command never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Background { child, first_line: first_line.trim().to_owned() }
    }

    /// The last word of the first line: `listening on ADDR`, or a device path.
    fn announced(&self) -> &str {
        self.first_line.split_whitespace().last().unwrap()
    }

    /// Ctrl-C, then waits: the command must stop by itself, soon, rather than die of the signal
    /// or run on (a command that ran on would hang the suite; it is killed on drop instead).
    fn interrupt(mut self) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGINT)
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(std::time::Instant::now() < deadline, "still running 10 s after Ctrl-C");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(status.code().is_some(), "killed by the signal rather than stopping");
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fresh_bag(name: &str) -> PathBuf {
    let bag = scratch_dir(name).join("run");
    let _ = std::fs::remove_dir_all(&bag);
    bag
}

fn assert_clean(info: &serde_json::Value) {
    assert!(info["warnings"].as_array().unwrap().is_empty(), "{info}");
}

/// Lets `command` record into `bag` for a while, interrupts it, and reads the bag back.
fn recorded_by(command: Background, bag: &std::path::Path) -> serde_json::Value {
    std::thread::sleep(std::time::Duration::from_millis(1500));
    command.interrupt();
    let info = bag_info(bag);
    assert_clean(&info);
    info
}

#[test]
fn an_stm32_session_is_recorded_with_stm32_drivers_topics() {
    let emulator = Background::start(&["emulate", "stm32"], std::process::Stdio::null());
    let bag = fresh_bag("stm32_bag");
    let driver = Background::start(
        &["stm32", "--port", emulator.announced(), "--bag", bag.to_str().unwrap(), "--json"],
        std::process::Stdio::piped(),
    );
    let info = recorded_by(driver, &bag);
    assert!(count(&info, "/joint_states") >= 10, "{info}");
    assert_eq!(count(&info, "/stm32_driver/imu"), count(&info, "/joint_states"), "{info}");
    assert_eq!(count(&info, "/stm32_driver/telemetry"), count(&info, "/joint_states"), "{info}");
    assert!(count(&info, "/stm32_driver/link_health") >= 2, "waiting, then connected: {info}");
    assert!(count(&info, "/diagnostics") >= 2, "a first status and the last: {info}");
}

#[test]
fn an_arduino_session_is_recorded_with_arduino_drivers_topics() {
    let emulator = Background::start(&["emulate", "rdscom", "--table", "firmware"], std::process::Stdio::null());
    let bag = fresh_bag("arduino_bag");
    let mut driver = Background::start(
        &["arduino", "--port", emulator.announced(), "--prototypes", "firmware", "--bag", bag.to_str().unwrap()],
        std::process::Stdio::piped(),
    );
    use std::io::Write;
    let mut stdin = driver.child.stdin.take().unwrap();
    writeln!(stdin, "stream all 50").unwrap();
    writeln!(stdin, "move 1 position 1.0").unwrap();
    writeln!(stdin, "go").unwrap();
    let info = recorded_by(driver, &bag);
    assert!(count(&info, "/joint_states") >= 20, "four joints streaming: {info}");
    assert!(count(&info, "/arduino_driver/motor_event") >= 1, "the MotorControl's answer: {info}");
    assert!(count(&info, "/arduino_driver/control_done") >= 1, "the queue ran: {info}");
    assert!(count(&info, "/arduino_driver/link_health") >= 1, "{info}");
    assert_eq!(count(&info, "/arduino_driver/temperature"), count(&info, "/joint_states"), "{info}");
    assert!(count(&info, "/diagnostics") >= 2, "{info}");
}

#[test]
fn a_vr_follower_records_what_the_leader_sends() {
    let leader = Background::start(&["vr", "serve", "--bind", "127.0.0.1:0"], std::process::Stdio::null());
    let bag = fresh_bag("vr_bag");
    let follower = Background::start(
        &["vr", "connect", leader.announced(), "--bag", bag.to_str().unwrap(), "--json"],
        std::process::Stdio::null(),
    );
    let info = recorded_by(follower, &bag);
    assert_eq!(count(&info, "/sil_node/reference_path"), 1, "{info}");
    for topic in ["/sil_node/end_effector", "/sil_node/current_direction", "/sil_node/desired_direction"] {
        assert!(count(&info, topic) >= 10, "{topic}: {info}");
    }
}

#[test]
fn serve_records_each_session_in_a_bag_named_by_its_start_and_peer_even_when_the_client_hangs_up() {
    use arm_hil::control::arc::ArcSpec;
    use arm_hil::model::Robot;
    use arm_hil::protocol::legacy::{encode_request, Mode, Request};
    use std::io::{Read, Write};

    let bags = scratch_dir("serve_bags").join("sessions");
    let _ = std::fs::remove_dir_all(&bags);
    let server = Background::start(
        &["serve", "--bind", "127.0.0.1:0", "--bag", bags.to_str().unwrap()],
        std::process::Stdio::null(),
    );
    let robot = Robot::default();
    let waypoints = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let mut request = Vec::new();
    encode_request(
        &Request { mode: Mode::Sil, elbow: robot.elbow(), l_arm: robot.params().l_arm, waypoints },
        &mut request,
    );

    let mut complete = std::net::TcpStream::connect(server.announced()).unwrap();
    complete.write_all(&request).unwrap();
    let mut response = Vec::new();
    complete.read_to_end(&mut response).unwrap();
    let complete_peer = complete.local_addr().unwrap();

    let mut hung_up = std::net::TcpStream::connect(server.announced()).unwrap();
    hung_up.write_all(&request).unwrap();
    let mut first = [0u8; 4096];
    hung_up.read_exact(&mut first).unwrap();
    let hung_up_peer = hung_up.local_addr().unwrap();
    drop(hung_up);
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.interrupt();

    for peer in [complete_peer, hung_up_peer] {
        let suffix = format!("_{}-{}", peer.ip(), peer.port());
        let entry = std::fs::read_dir(&bags)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.file_name().unwrap().to_str().unwrap().ends_with(&suffix))
            .unwrap_or_else(|| panic!("no bag of {peer} in {}", bags.display()));
        assert!(entry.file_name().unwrap().to_str().unwrap().starts_with("session_20"), "{}", entry.display());
        let info = bag_info(&entry);
        assert_clean(&info);
        assert!(count(&info, "/joint_states") >= 1, "{info}");
        assert_eq!(count(&info, "/joint_states"), count(&info, "/legacy_bridge/end_effector"), "{info}");
        assert_eq!(count(&info, "/joint_states"), count(&info, "/tf"), "{info}");
        // As legacy_bridge publishes its status: at the session's start and end, once a second
        // between, and its last word.
        assert!(count(&info, "/diagnostics") >= 3, "{info}");
    }
}

/// The lab's GUI client in HIL mode, as it reads: no header, 128-byte frames from the first byte
/// the server sends, up to the first frame at or past its last waypoint's t, then reads on until
/// the server closes.
#[test]
fn the_lab_clients_hil_mode_gets_every_frame_of_a_run_on_the_simulated_rig() {
    use arm_hil::control::arc::ArcSpec;
    use arm_hil::model::Robot;
    use arm_hil::protocol::legacy::{encode_request, Mode, Request, FRAME_BYTES};
    use std::io::{Read, Write};

    let server =
        Background::start(&["serve", "--bind", "127.0.0.1:0", "--hil-hardware", "sim"], std::process::Stdio::null());
    let robot = Robot::default();
    // A 2 degree arc: about 0.9 s of loop time.
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -148.0], ..ArcSpec::default() };
    let waypoints = spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let (start_t, end_t) = (waypoints[0].t, waypoints[waypoints.len() - 1].t);
    let mut request = Vec::new();
    let mode = Mode::Hil { sensor: String::new(), arduino: String::new() };
    encode_request(&Request { mode, elbow: robot.elbow(), l_arm: robot.params().l_arm, waypoints }, &mut request);

    let mut client = std::net::TcpStream::connect(server.announced()).unwrap();
    client.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    client.write_all(&request).unwrap();
    let mut times = Vec::new();
    let mut frame = [0u8; FRAME_BYTES];
    loop {
        client.read_exact(&mut frame).expect("a whole frame before the end");
        let t = f64::from_le_bytes(frame[..8].try_into().unwrap());
        times.push(t);
        if t >= end_t {
            break;
        }
    }
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    server.interrupt();

    assert!(rest.is_empty(), "{} bytes after the end marker", rest.len());
    let last = times.pop().unwrap();
    assert_eq!(last, end_t, "the last frame is the end marker");
    assert!(times.windows(2).all(|pair| pair[0] < pair[1]), "frames in time order");
    assert!(times[0] >= start_t && times[0] < start_t + 0.01, "the first frame is the run's first: {}", times[0]);
    // One frame per 1 kHz cycle of the run; none dropped on an idle loopback.
    let expected = (end_t - start_t) * 1000.0;
    assert!((times.len() as f64 - expected).abs() < 0.02 * expected, "{} frames for {expected} cycles", times.len());
}

#[test]
fn the_arduino_console_holds_a_velocity_to_the_joints_limits_through_the_datastream() {
    use arm_hil::emulate::rdscom::RdscomEmulator;
    use arm_hil::protocol::rdscom::PrototypeTable;
    use std::io::{BufRead, Write};
    let emulator = RdscomEmulator::start(PrototypeTable::document()).unwrap();
    let mut console = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
        .args(["arduino", "--port", emulator.path().to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    // The guard's stop is logged (stderr), as every refusal of the node's.
    let stderr = std::io::BufReader::new(console.stderr.take().unwrap());
    let errors_tx = lines_tx.clone();
    std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|line| errors_tx.send(line)));
    let stdout = std::io::BufReader::new(console.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| lines_tx.send(line)));
    let line_with = |text: &str| {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match lines.recv_timeout(until.saturating_duration_since(std::time::Instant::now())) {
                Ok(line) if line.contains(text) => break line,
                Ok(_) => {}
                Err(_) => panic!("no line with {text} within 5 s"),
            }
        }
    };
    let mut stdin = console.stdin.take().unwrap();
    line_with("link Up");
    writeln!(stdin, "move 1 velocity 2.0").unwrap();
    assert!(line_with("refused").contains("datastream"), "no rate without the datastream to watch it");
    writeln!(stdin, "move 1 position 2.0").unwrap();
    assert!(line_with("refused").contains("outside [0, 1.5707"), "a position past the limit");
    writeln!(stdin, "stream all 50").unwrap();
    line_with("joint_id=1");
    writeln!(stdin, "move 1 velocity 2.0").unwrap();
    writeln!(stdin, "go").unwrap();
    // pi/2 in 0.8 s at 2 rad/s: the console stops the MCU short of it, and the joint stays there
    // (a sample or two already on their way).
    line_with("the MCU was stopped");
    // `response SensorDatastream #0 data=1.4321 joint_id=1`
    let joint_1 = |line: String| line.split("data=").nth(1)?.split(' ').next()?.parse::<f64>().ok();
    let after: Vec<f64> = (0..25).filter_map(|_| joint_1(line_with("joint_id=1"))).collect();
    assert_eq!(after.len(), 25, "{after:?}");
    assert!(after.iter().all(|position| (1.2..std::f64::consts::FRAC_PI_2).contains(position)), "{after:?}");
    assert!(after[2..].windows(2).all(|pair| pair[0] == pair[1]), "still moving after the stop: {after:?}");
    assert_eq!(emulator.stats().stops, 1);
    drop(stdin);
    Background { child: console, first_line: String::new() }.interrupt();
}
