//! The port-5555 server over real sockets on 127.0.0.1: complete streams, parallel clients,
//! and misbehaving clients that never stop it from serving the next one.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use arm_hil::bridge::legacy::{
    HilSetup, LegacyServer, LegacyServerConfig, SessionError, SessionObserver, SessionReport,
};
use arm_hil::control::arc::ArcSpec;
use arm_hil::control::{Trajectory, Waypoint};
use arm_hil::drivers::{RigKind, RigSettings};
use arm_hil::hil::HilConfig;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::protocol::legacy::{encode_request, Mode, Request, ResponseDecoder, ResponseItem};
use arm_hil::sim::{Frame, IdealPoint, IdealTorques, SilConfig, Simulation};

/// Starts a server on a free loopback port on its own runtime thread.
fn start_server(config: LegacyServerConfig) -> SocketAddr {
    start_server_with(config, None, None)
}

fn start_server_with_hil(config: LegacyServerConfig, hil: Option<HilSetup>) -> SocketAddr {
    start_server_with(config, hil, None)
}

/// `H` sessions on the simulated plant, at normal scheduling priority.
fn sim_hil() -> Option<HilSetup> {
    let hil = HilConfig { realtime_priority: None, ..HilConfig::default() };
    Some(HilSetup { kind: RigKind::Sim, hil, settings: RigSettings::default() })
}

fn start_server_with(
    config: LegacyServerConfig,
    hil: Option<HilSetup>,
    observer: Option<Arc<dyn SessionObserver>>,
) -> SocketAddr {
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let mut server = LegacyServer::bind(config, SilConfig::default(), hil).await.unwrap();
            if let Some(observer) = observer {
                server = server.with_observer(observer);
            }
            address_tx.send(server.local_addr().unwrap()).unwrap();
            server.serve().await
        })
    });
    address_rx.recv().unwrap()
}

fn test_config() -> LegacyServerConfig {
    LegacyServerConfig {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        idle_timeout_s: 1.0,
        write_stall_timeout_s: 1.0,
        ..LegacyServerConfig::default()
    }
}

/// A short arc: 2 degrees, about 0.9 s, 18 000 frames.
fn short_arc() -> Vec<Waypoint> {
    let robot = Robot::default();
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -148.0], ..ArcSpec::default() };
    spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap()
}

fn sil_request(waypoints: Vec<Waypoint>) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_request(&Request { mode: Mode::Sil, elbow: Vec3::new(0.35, 0.35, 0.0), l_arm: 0.45, waypoints }, &mut bytes);
    bytes
}

fn hil_request(sensor: &str, arduino: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mode = Mode::Hil { sensor: sensor.into(), arduino: arduino.into() };
    encode_request(
        &Request { mode, elbow: Vec3::new(0.35, 0.35, 0.0), l_arm: 0.45, waypoints: short_arc() },
        &mut bytes,
    );
    bytes
}

/// What a client received.
#[derive(Debug, Default)]
struct Response {
    header: Option<(f64, i32)>,
    frames: Vec<Frame>,
    end_marker: Option<Frame>,
    ideal: Vec<IdealPoint>,
    eof_after_response: bool,
    bytes: usize,
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream
}

/// Sends `request` and reads the whole response as the GUI does.
fn exchange(address: SocketAddr, request: &[u8]) -> Response {
    let mut stream = connect(address);
    stream.write_all(request).unwrap();
    read_response(&mut stream)
}

fn read_response(stream: &mut TcpStream) -> Response {
    read_response_with(stream, ResponseDecoder::sil())
}

fn read_response_with(stream: &mut TcpStream, mut decoder: ResponseDecoder) -> Response {
    let mut response = Response::default();
    let mut buf = vec![0u8; 65536];
    loop {
        let read = match stream.read(&mut buf) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(error) => panic!("read failed: {error}"),
        };
        if read == 0 {
            response.eof_after_response = decoder.is_done();
            return response;
        }
        response.bytes += read;
        let mut rest = &buf[..read];
        while !rest.is_empty() {
            let (used, item) = decoder.decode(rest).unwrap();
            rest = &rest[used..];
            match item {
                Some(ResponseItem::Header { end_time, n }) => response.header = Some((end_time, n)),
                Some(ResponseItem::Frame(frame)) => response.frames.push(frame),
                Some(ResponseItem::EndMarker(frame)) => response.end_marker = Some(frame),
                Some(ResponseItem::Ideal(point)) => response.ideal.push(point),
                None => assert!(rest.is_empty() || decoder.is_done(), "bytes after the response"),
            }
        }
    }
}

/// The response the engine itself gives for `waypoints`, wire fields only.
fn expected_response(waypoints: Vec<Waypoint>) -> (Vec<Frame>, Vec<IdealPoint>) {
    let robot = Robot::default();
    let trajectory = Arc::new(Trajectory::with_robot_forearm(waypoints, &robot).unwrap());
    let simulation = Simulation::new(robot.clone(), trajectory.clone(), &SilConfig::default()).unwrap();
    let frames =
        simulation.map(|frame| Frame { x_ref: Vec3::zeros(), xd_ref: Vec3::zeros(), ..frame.unwrap() }).collect();
    let ideal = IdealTorques::new(&robot, &trajectory).map(Result::unwrap).collect();
    (frames, ideal)
}

fn assert_complete_and_correct(response: &Response, frames: &[Frame], ideal: &[IdealPoint]) {
    let (end_time, n) = response.header.expect("header");
    assert_eq!(n as usize, ideal.len());
    let last = frames.last().unwrap();
    assert_eq!(end_time, last.t);
    // Every frame before the end, exactly as the engine computed it.
    assert_eq!(response.frames.as_slice(), &frames[..frames.len() - 1]);
    assert!(response.frames.windows(2).all(|pair| pair[0].t < pair[1].t));
    let marker = response.end_marker.expect("end marker");
    assert_eq!(marker, Frame { tau: Vec3::zeros(), ..*last });
    assert_eq!(response.ideal.as_slice(), ideal);
    assert!(response.eof_after_response, "the server must close after the response");
}

#[test]
fn a_sil_session_returns_header_frames_end_marker_ideal_blocks_then_eof() {
    let address = start_server(test_config());
    let (frames, ideal) = expected_response(short_arc());
    let response = exchange(address, &sil_request(short_arc()));
    assert_complete_and_correct(&response, &frames, &ideal);
}

#[test]
fn thirty_two_parallel_sil_clients_all_get_complete_correct_streams() {
    let address = start_server(test_config());
    let (frames, ideal) = expected_response(short_arc());
    let request = Arc::new(sil_request(short_arc()));
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let request = request.clone();
            std::thread::spawn(move || exchange(address, &request))
        })
        .collect();
    for client in clients {
        assert_complete_and_correct(&client.join().unwrap(), &frames, &ideal);
    }
}

#[test]
fn the_python_client_written_from_the_spec_reads_a_complete_stream() {
    let address = start_server(test_config());
    let output = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/legacy_client.py"))
        .arg(address.to_string())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/arc_9deg.csv"))
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["n"], 908);
    assert_eq!(summary["ideal_blocks"], 908);
    assert_eq!(summary["increasing_t"], true);
    assert_eq!(summary["end_marker_t"], summary["end_time"]);
    assert_eq!(summary["end_marker_tau"], serde_json::json!([0.0, 0.0, 0.0]));
    assert_eq!(summary["eof"], true);
    // At least one frame per control tick (steps never cross a tick).
    let ticks = summary["end_time"].as_f64().unwrap() * 1000.0;
    assert!(summary["frames"].as_u64().unwrap() as f64 >= ticks.floor(), "{summary}");
}

/// A refused request gets no bytes at all, and the connection is closed.
fn assert_refused(address: SocketAddr, request: &[u8]) {
    let response = exchange(address, request);
    assert_eq!(response.bytes, 0, "a refused request must get no bytes");
}

fn with_waypoint(change: impl FnOnce(&mut Vec<Waypoint>)) -> Vec<u8> {
    let mut waypoints = short_arc();
    change(&mut waypoints);
    sil_request(waypoints)
}

fn bad_count(n: i32) -> Vec<u8> {
    let mut bytes = vec![b'S'];
    bytes.extend_from_slice(&n.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 32]);
    bytes
}

#[test]
fn bad_requests_are_refused_and_the_next_good_client_is_served() {
    let address = start_server(test_config());
    let (frames, ideal) = expected_response(short_arc());
    let good = sil_request(short_arc());
    let bad_requests: Vec<(&str, Vec<u8>)> = vec![
        ("unknown mode byte", b"Q".to_vec()),
        ("n = 0", bad_count(0)),
        ("n = -5", bad_count(-5)),
        ("n = 1 000 001", bad_count(1_000_001)),
        ("NaN in a waypoint", with_waypoint(|w| w[10].xd.y = f64::NAN)),
        ("t not increasing", with_waypoint(|w| w[20].t = w[19].t)),
        ("an unreachable point", with_waypoint(|w| w[30].x = Vec3::new(3.0, 3.0, 3.0))),
        ("a HIL device outside the allow-list", hil_request("/etc/passwd", "auto")),
        ("a HIL Arduino outside the allow-list", hil_request("/dev/ttyUSB0", "/dev/sda")),
        ("a way out of an allowed folder", hil_request("/dev/serial/by-id/../../../etc/passwd", "auto")),
        ("another tty through an allowed folder", hil_request("/dev/ttyUSB0", "/dev/serial/by-id/../../ttyS0")),
        ("a folder below an allowed pattern", hil_request("/dev/ttyUSB0/../../etc/passwd", "auto")),
    ];
    for (what, request) in bad_requests {
        assert_refused(address, &request);
        let response = exchange(address, &good);
        assert_complete_and_correct(&response, &frames, &ideal);
        eprintln!("served a good client after: {what}");
    }
}

#[test]
fn the_device_allow_list_lets_no_pattern_reach_outside_its_folder() {
    let config = LegacyServerConfig::default();
    for allowed in
        ["/dev/ttyUSB0", "/dev/ttyACM1", "/dev/serial/by-id/usb-Arduino_Uno-if00", "/dev/arm_hil_sensor", "auto"]
    {
        assert!(config.allows_device(allowed), "{allowed} is on the default list");
    }
    for refused in [
        "/dev/serial/by-id/../../../etc/passwd",
        "/dev/serial/by-id/../../ttyS0",
        "/dev/serial/by-id/x/../../../ttyS0",
        "/dev/ttyUSB0/../../etc/passwd",
        "/dev/./ttyUSB0",
        "/dev//ttyUSB0",
        "/dev/arm_hil_x/sda",
        "/etc/passwd",
        "",
    ] {
        assert!(!config.allows_device(refused), "{refused:?} must be refused");
    }
}

#[test]
fn a_truncated_payload_is_refused_and_the_next_good_client_is_served() {
    let address = start_server(test_config());
    let (frames, ideal) = expected_response(short_arc());
    let good = sil_request(short_arc());
    // Half a request, then the client closes its write side.
    let mut stream = connect(address);
    stream.write_all(&good[..good.len() / 2]).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_response(&mut stream).bytes, 0);
    // Half a request, then silence: the idle timeout ends it.
    let mut silent = connect(address);
    silent.write_all(&good[..100]).unwrap();
    assert_eq!(read_response(&mut silent).bytes, 0);
    assert_complete_and_correct(&exchange(address, &good), &frames, &ideal);
}

#[test]
fn clients_that_vanish_or_never_read_do_not_stall_the_server() {
    let address = start_server(test_config());
    let (frames, ideal) = expected_response(short_arc());
    let good = sil_request(short_arc());
    // One client disconnects mid-stream.
    let mut leaving = connect(address);
    leaving.write_all(&good).unwrap();
    let mut some = [0u8; 4096];
    leaving.read_exact(&mut some).unwrap();
    drop(leaving);
    // Another sends a request and never reads: its session stalls and is dropped on its own.
    let mut idle = connect(address);
    idle.write_all(&good).unwrap();
    for _ in 0..2 {
        assert_complete_and_correct(&exchange(address, &good), &frames, &ideal);
    }
    drop(idle);
}

#[test]
fn hil_sessions_are_refused_while_the_server_has_no_hil_hardware() {
    let address = start_server(test_config());
    assert_refused(address, &hil_request("/dev/ttyUSB0", "auto"));
}

/// Sends a HIL request for the short arc and reads the response as the lab's client does.
fn hil_exchange(address: SocketAddr, request: &[u8]) -> Response {
    let mut stream = connect(address);
    stream.write_all(request).unwrap();
    let arc = short_arc();
    read_response_with(&mut stream, ResponseDecoder::hil(arc[arc.len() - 1].t))
}

#[test]
fn a_hil_session_streams_loop_frames_then_the_end_marker_then_eof_without_a_header() {
    let address = start_server_with_hil(test_config(), sim_hil());
    let arc = short_arc();
    let end_time = arc[arc.len() - 1].t;
    let response = hil_exchange(address, &hil_request("/dev/ttyUSB0", "auto"));
    // A frame per loop period (1 ms) of the arc, in time order, all before the end. A period
    // that a busy machine made the loop skip has no frame: the frames sit on the loop's grid and
    // span the arc, however many of them the load took.
    let period_s = 1e-3;
    let frames = &response.frames;
    let off_the_grid = frames.windows(2).find(|pair| {
        let periods = (pair[1].t - pair[0].t) / period_s;
        periods < 0.5 || (periods - periods.round()).abs() > 1e-3
    });
    assert!(
        off_the_grid.is_none(),
        "frames at {:?}: not whole periods apart",
        off_the_grid.map(|pair| (pair[0].t, pair[1].t))
    );
    let spanned = frames.last().expect("frames").t - frames[0].t;
    assert!(spanned > 0.9 * (end_time - arc[0].t), "the frames span {spanned} s of the arc");
    let marker = response.end_marker.expect("end marker");
    assert_eq!((marker.t, marker.tau), (end_time, Vec3::zeros()));
    assert!((marker.x - arc[arc.len() - 1].x).norm() < 5e-3, "ended at {}", marker.x);
    assert!(response.ideal.is_empty());
    assert!(response.eof_after_response);
}

#[test]
fn a_second_hil_client_is_refused_while_one_runs_and_served_after() {
    let observer = Arc::new(Counting::default());
    let address = start_server_with(test_config(), sim_hil(), Some(observer.clone()));
    let request = hil_request("/dev/ttyUSB0", "auto");
    let first = {
        let request = request.clone();
        std::thread::spawn(move || hil_exchange(address, &request))
    };
    // The second client comes once the first session runs (however loaded the machine).
    wait_for("the first HIL session to start", || observer.started.lock().unwrap().iter().any(|(_, hil)| *hil));
    assert_refused(address, &request);
    // SIL clients are served meanwhile.
    let (frames, ideal) = expected_response(short_arc());
    assert_complete_and_correct(&exchange(address, &sil_request(short_arc())), &frames, &ideal);
    assert!(first.join().unwrap().end_marker.is_some());
    // The client has its end marker a little before the server frees the rig: the next one
    // comes once the server says the session (the third after the refusal and the SIL one) ended.
    wait_for("the first HIL session to end", || observer.ended.lock().unwrap().len() == 3);
    assert!(hil_exchange(address, &request).end_marker.is_some());
}

/// Waits up to 20 s (however loaded the machine) for `event`, named in the failure.
fn wait_for(event: &str, happened: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !happened() {
        assert!(std::time::Instant::now() < deadline, "waited 20 s for {event}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Counts what a session observer sees.
#[derive(Default)]
struct Counting {
    started: std::sync::Mutex<Vec<(SocketAddr, bool)>>,
    frames: std::sync::atomic::AtomicUsize,
    ended: std::sync::Mutex<Vec<bool>>,
}

impl SessionObserver for Counting {
    fn started(&self, peer: SocketAddr, hil: bool, _trajectory: &Trajectory) {
        self.started.lock().unwrap().push((peer, hil));
    }
    fn frame(&self, _peer: SocketAddr, _frame: &Frame) {
        self.frames.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn ended(&self, _peer: SocketAddr, outcome: &Result<SessionReport, SessionError>) {
        self.ended.lock().unwrap().push(outcome.is_ok());
    }
}

#[test]
fn an_observer_sees_every_session_and_its_frames() {
    let observer = Arc::new(Counting::default());
    let address = start_server_with(test_config(), None, Some(observer.clone()));
    let (frames, ideal) = expected_response(short_arc());
    let mut stream = connect(address);
    let local = stream.local_addr().unwrap();
    stream.write_all(&sil_request(short_arc())).unwrap();
    assert_complete_and_correct(&read_response(&mut stream), &frames, &ideal);
    // The client reads its last frame before the server reports the session's end.
    wait_for("the SIL session to end", || observer.ended.lock().unwrap().len() == 1);
    assert_refused(address, b"Q");
    wait_for("the refused session to end", || observer.ended.lock().unwrap().len() == 2);
    assert_eq!(*observer.started.lock().unwrap(), vec![(local, false)]);
    assert_eq!(observer.frames.load(std::sync::atomic::Ordering::Relaxed), frames.len());
    assert_eq!(*observer.ended.lock().unwrap(), vec![true, false]);
}
