//! Port-5555 server figures: frames per second streamed to a local client for a long
//! trajectory against the engine alone, and the server's peak memory for a 1 000 000-waypoint
//! request. Runs `arm_hil serve` as a child process on a free loopback port, with the
//! reference's fixed 50 us steps (examples/fixed_steps.yaml): 197 195 frames for the default
//! arc, a stream long enough that per-request costs (validation, ideal torques) do not hide
//! the streaming cost, as they would in the 10 000 frames of adaptive steps.
//!
//! Run with `cargo bench --bench legacy_bridge`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Trajectory, Waypoint};
use arm_hil::model::Robot;
use arm_hil::protocol::legacy::{encode_request, Mode, Request, ResponseDecoder, ResponseItem};
use arm_hil::sim::{SilConfig, Simulation};

const FIXED_STEPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fixed_steps.yaml");

fn fixed_steps() -> SilConfig {
    let text = std::fs::read_to_string(FIXED_STEPS).expect("examples/fixed_steps.yaml");
    SilConfig::from_yaml(&text).expect("a valid configuration")
}

struct Server {
    child: Child,
    address: String,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_arm_hil"))
            .args(["serve", "--bind", "127.0.0.1:0", "--config", FIXED_STEPS])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("arm_hil serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("address line");
        let address = line.trim().strip_prefix("listening on ").expect("listening on ADDR").to_owned();
        Server { child, address }
    }

    /// Peak resident set size of the server process [KiB] (VmHWM).
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("proc status");
        let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM line");
        line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmHWM value")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn arc(waypoints_per_degree: f64) -> Vec<Waypoint> {
    let robot = Robot::default();
    let spec = ArcSpec { waypoints_per_degree, ..ArcSpec::default() };
    spec.waypoints(&robot.elbow(), robot.params().l_arm).expect("valid arc")
}

/// Sends a SIL request and reads the response to EOF; returns (frames, seconds).
fn stream(address: &str, waypoints: Vec<Waypoint>) -> (u64, f64) {
    let robot = Robot::default();
    let mut request = Vec::new();
    encode_request(
        &Request { mode: Mode::Sil, elbow: robot.elbow(), l_arm: robot.params().l_arm, waypoints },
        &mut request,
    );
    let started = Instant::now();
    let mut socket = TcpStream::connect(address).expect("connect");
    socket.write_all(&request).expect("send");
    let (mut decoder, mut frames, mut buf) = (ResponseDecoder::sil(), 0u64, vec![0u8; 1 << 16]);
    loop {
        let read = socket.read(&mut buf).expect("read");
        if read == 0 {
            break;
        }
        let mut rest = &buf[..read];
        while !rest.is_empty() {
            let (used, item) = decoder.decode(rest).expect("valid response");
            rest = &rest[used..];
            frames += u64::from(matches!(item, Some(ResponseItem::Frame(_)) | Some(ResponseItem::EndMarker(_))));
        }
    }
    assert!(decoder.is_done(), "the response is complete");
    (frames, started.elapsed().as_secs_f64())
}

fn engine_alone(waypoints: Vec<Waypoint>) -> (u64, f64) {
    let robot = Robot::default();
    let trajectory = Arc::new(Trajectory::with_robot_forearm(waypoints, &robot).expect("valid"));
    let started = Instant::now();
    let simulation = Simulation::new(robot, trajectory, &fixed_steps()).expect("valid run");
    let frames = simulation.inspect(|frame| assert!(frame.is_ok(), "no divergence")).count() as u64;
    (frames, started.elapsed().as_secs_f64())
}

fn main() {
    let server = Server::start();
    let long = arc(100.0);
    let best = |run: &dyn Fn() -> (u64, f64)| {
        (0..5).map(|_| run()).fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a })
    };
    let (engine_frames, engine_s) = best(&|| engine_alone(long.clone()));
    let (served_frames, served_s) = best(&|| stream(&server.address, long.clone()));
    let engine_rate = engine_frames as f64 / engine_s;
    let served_rate = served_frames as f64 / served_s;
    println!("default arc at fixed 50 us steps, {engine_frames} frames, best of 5:");
    println!("  engine alone            {:>10.0} frames/s", engine_rate);
    println!(
        "  streamed over loopback  {:>10.0} frames/s ({:.1}% of the engine)",
        served_rate,
        100.0 * served_rate / engine_rate
    );

    let huge = arc(999_999.0 / 46.8);
    let count = huge.len().min(1_000_000);
    let request_mib = (37 + 80 * count) as f64 / (1 << 20) as f64;
    let before = server.peak_rss_kib();
    let (frames, seconds) = stream(&server.address, huge[..count].to_vec());
    let peak_mib = server.peak_rss_kib() as f64 / 1024.0;
    println!("{count}-waypoint request ({request_mib:.1} MiB), {frames} frames in {seconds:.2} s:");
    println!(
        "  server peak RSS {peak_mib:.1} MiB ({:.1} MiB before the request) = {:.2} x the request",
        before as f64 / 1024.0,
        peak_mib / request_mib
    );
}
