//! hil_node under the lifecycle, without ROS: the loop through every transition on the simulated
//! rig (which stops the arm where it is), and the lab's rig's emulator (real pseudo-terminals)
//! losing its sensor mid-run.

use std::sync::mpsc::{channel, sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arm_hil::drivers::{RigKind, RigSettings};
use arm_hil::emulate::rig::RigEmulator;
use arm_hil::hil::stepper::StepperConfig;
use arm_hil::hil::{Hardware, HilConfig, LoopStatus, SensorInput, SimulatedRig, TakenFrame, Withdrawals};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::hil::feeder::{feed_requests, FeedRequests};
use arm_hil::nodes::hil::managed::{HilLinks, HilReporter, LoopEnd, ManagedHil};
use arm_hil::nodes::hil::publisher::RUNNING;
use arm_hil::nodes::hil::{HilNodeConfig, HilNodeSettings};
use arm_hil::nodes::lifecycle::{Fault, State, Supervised};
use arm_hil::nodes::load_trajectory;
use arm_hil::nodes::status::Level;
use arm_hil::sim::{Frame, SilConfig};

/// What the node reported, in order, and the numbers of the loops it started with when it said
/// so [ns, `realtime::monotonic_ns`].
#[derive(Default)]
struct Reports(Mutex<Vec<(Level, String)>>, Mutex<Vec<(u64, u64)>>);

impl HilReporter for Reports {
    fn status(&self, level: Level, message: String) {
        self.0.lock().unwrap().push((level, message));
    }

    fn loop_started(&self, loop_number: u64) {
        self.0.lock().unwrap().push((Level::Ok, RUNNING.to_owned()));
        self.1.lock().unwrap().push((loop_number, arm_hil::hil::realtime::monotonic_ns()));
    }

    fn loop_stopped(&self, _end: &LoopEnd) {}
}

impl Reports {
    fn last(&self) -> (Level, String) {
        self.0.lock().unwrap().last().cloned().unwrap()
    }
}

/// How long the tests' loops wait for a sensor reading before the sensor counts as lost [s].
const SENSOR_TIMEOUT_S: f64 = 0.5;

struct Node {
    node: Supervised<ManagedHil>,
    frames: Receiver<TakenFrame>,
    faults: Receiver<Fault>,
    reports: Arc<Reports>,
    /// The commands' end of the feeder's requests; dropped, the feeder ends.
    requests: Option<FeedRequests>,
}

impl Node {
    /// A node whose loop runs at normal priority and takes a sensor silent for half a second as
    /// lost: the default 0.1 s is the rig's, and a loaded test machine can stall an emulator
    /// that long (a fault the test did not ask for).
    fn new(hardware: RigKind, devices: Option<&RigEmulator>) -> Node {
        let hil = HilConfig { realtime_priority: None, sensor_timeout_s: SENSOR_TIMEOUT_S, ..HilConfig::default() };
        Node::with_loop(hardware, devices, hil)
    }

    fn with_loop(hardware: RigKind, devices: Option<&RigEmulator>, hil: HilConfig) -> Node {
        let sil = SilConfig::default();
        let robot = Robot::new(sil.robot.clone()).unwrap();
        let initial = load_trajectory(None, &robot).unwrap();
        let path = |path: &std::path::Path| path.to_str().unwrap().to_owned();
        let settings = HilNodeSettings {
            hardware,
            sensor_device: devices.map(|d| path(d.sensor_path())).unwrap_or_default(),
            arduino_device: devices.map(|d| path(d.arduino_path())).unwrap_or_default(),
            ..HilNodeSettings::default()
        };
        let config = HilNodeConfig { sil, hil, rig: RigSettings::default(), settings };
        let (requests, feeder_requests) = feed_requests();
        let (frames_tx, frames) = sync_channel(100_000);
        let (faults_tx, faults) = channel();
        let links = HilLinks {
            requests: feeder_requests,
            frames: frames_tx,
            status: Arc::new(Mutex::new(LoopStatus::default())),
            withdrawals: Arc::new(Withdrawals::default()),
            faults: faults_tx,
        };
        let reports = Arc::new(Reports::default());
        let managed = ManagedHil::new(config, robot, initial, links, reports.clone());
        Node { node: Supervised::new(managed, false), frames, faults, reports, requests: Some(requests) }
    }

    fn set(&mut self, label: &str) {
        let taken = self.node.request(0, label).unwrap();
        assert!(taken.success(), "{label}: {:?}", taken.reason);
    }

    /// The next `count` frames, waiting up to 10 s for them: the loop's rate is the HIL tests'
    /// and benchmarks' business, here only whether it runs (a loaded machine runs it slower).
    fn frames(&self, count: usize) -> Vec<Frame> {
        self.taken(count).iter().map(|taken| taken.frame).collect()
    }

    /// The next `count` frames as the loops handed them over.
    fn taken(&self, count: usize) -> Vec<TakenFrame> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut frames = Vec::with_capacity(count);
        while frames.len() < count {
            match self.frames.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(taken) => frames.push(taken),
                Err(_) => panic!("{} of {count} frames in 10 s", frames.len()),
            }
        }
        frames
    }

    /// Frames for `seconds` of wall time.
    fn frames_for(&self, seconds: f64) -> Vec<Frame> {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let mut frames = Vec::new();
        while let Ok(taken) = self.frames.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            frames.push(taken.frame);
        }
        frames
    }
}

/// The largest step of the frames' reference position between consecutive frames [m].
fn largest_reference_step(frames: &[Frame]) -> f64 {
    frames.windows(2).map(|pair| (pair[1].x_ref - pair[0].x_ref).norm()).fold(0.0, f64::max)
}

#[test]
fn the_loop_runs_only_while_active_and_resumes_where_the_arm_is() {
    let mut node = Node::new(RigKind::Sim, None);
    node.set("configure");
    assert_eq!(node.node.lifecycle().state(), State::Inactive);
    assert!(node.frames_for(0.3).is_empty(), "an inactive node ran its loop");
    assert_eq!(node.reports.last().0, Level::Ok);

    node.set("activate");
    let running = node.frames(800);
    let before = running.last().unwrap();
    assert!((before.x_ref - running[0].x_ref).norm() > 1e-3, "the initial trajectory moves the arm");

    node.set("deactivate");
    let last = node.frames_for(0.1).last().copied().unwrap_or(*before);
    assert!(node.frames_for(0.3).is_empty(), "a deactivated node ran its loop");
    assert!(node.reports.last().1.starts_with("inactive"), "{:?}", node.reports.last());

    // Activated again: its reference starts where the arm is and holds there.
    node.set("activate");
    let resumed = node.frames(400);
    assert!((resumed[0].x_ref - last.x).norm() < 2e-3, "resumed at {} with the arm at {}", resumed[0].x_ref, last.x);
    assert!(largest_reference_step(&resumed) == 0.0, "the arm holds until it is given a trajectory");

    node.set("deactivate");
    node.set("cleanup");
    assert_eq!(node.node.lifecycle().state(), State::Unconfigured);
    node.set("shutdown");
    assert_eq!(node.node.lifecycle().state(), State::Finalized);
    assert!(node.faults.try_recv().is_err(), "no fault on the way");
}

/// A quick deactivate and activate, the first loop's last frames still in the channel: each
/// frame carries the number of its loop, and the node is told of each loop before its first
/// frame is handed over (a guard on the order of the calls; that the node's commands then skip
/// a stopped loop's frames is tests/nodes.rs's).
#[test]
fn each_loops_frames_carry_the_number_the_node_started_it_with_and_come_after_it() {
    let mut node = Node::new(RigKind::Sim, None);
    node.set("configure");
    node.set("activate");
    let first = node.taken(100);
    node.set("deactivate");
    node.set("activate");
    let started = node.reports.1.lock().unwrap().clone();
    assert_eq!(started.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
    let mut frames = first;
    while frames.iter().filter(|taken| taken.loop_number == 2).count() < 100 {
        frames.extend(node.taken(1));
    }
    let second = frames.iter().position(|taken| taken.loop_number == 2).unwrap();
    assert!(frames[..second].iter().all(|taken| taken.loop_number == 1), "the loops' frames interleave");
    assert!(frames[second..].iter().all(|taken| taken.loop_number == 2), "the loops' frames interleave");
    for (loop_number, told_ns) in started {
        let early = frames.iter().filter(|taken| taken.loop_number == loop_number && taken.taken_ns < told_ns).count();
        assert_eq!(early, 0, "{early} frames of loop {loop_number} came before the node was told of it");
    }
    node.set("deactivate");
}

/// A loop whose feed ends while nothing asked it to stop (the feeder's thread gone: here, its
/// requests' other end dropped) is a device fault, not an end the node asked for.
#[test]
fn a_loop_whose_feed_ends_unasked_is_a_device_fault() {
    let mut node = Node::new(RigKind::Sim, None);
    node.set("configure");
    node.set("activate");
    node.set("deactivate");
    // Resumed, the loop holds with nothing queued: the feeder ends as soon as its requests do.
    node.set("activate");
    node.frames(10);
    node.requests = None;
    // The loop finds its feed gone: it stops where it is, and that is a fault.
    let cause = match node.faults.recv_timeout(Duration::from_secs(10)) {
        Ok(Fault::Device(cause)) => cause,
        other => panic!("not a device fault: {other:?}"),
    };
    assert!(cause.contains("its feed ended"), "{cause}");
    let reports = node.reports.0.lock().unwrap().clone();
    assert!(reports.iter().any(|(level, status)| *level == Level::Error && status.contains(&cause)), "{reports:?}");
}

/// The simulated rig stopped while the arm moves: the next loop begins with the arm at rest, as
/// the rig's steppers leave it, not setting off with the velocity it had.
#[test]
fn the_simulated_rig_stops_the_arm_where_it_is() {
    let sil = SilConfig::default();
    let robot = Robot::new(sil.robot.clone()).unwrap();
    let start = load_trajectory(None, &robot).unwrap().waypoints()[0];
    let mut rig = SimulatedRig::new(robot.clone(), &sil, &start, robot.elbow()).unwrap();
    let mut input = SensorInput::default();
    // Unpowered for 50 ms: the arm falls.
    rig.begin();
    rig.read(0.05, 1e-3, &mut input).unwrap();
    let falling = rig.true_position().unwrap();
    rig.read(0.051, 1e-3, &mut input).unwrap();
    let fell_in_a_millisecond = (rig.true_position().unwrap() - falling).norm();
    rig.stop();
    rig.begin();
    rig.read(0.0, 1e-3, &mut input).unwrap();
    let stopped = rig.true_position().unwrap();
    rig.read(0.001, 1e-3, &mut input).unwrap();
    let moved = (rig.true_position().unwrap() - stopped).norm();
    assert!(fell_in_a_millisecond > 1e-4, "the arm fell {fell_in_a_millisecond} m in a millisecond");
    assert!(moved < fell_in_a_millisecond / 20.0, "stopped, it moved on {moved} m in a millisecond");
}

#[test]
fn a_silent_sensor_is_a_fault_the_motors_stop_and_configure_activate_resume_without_a_jump() {
    let sil = SilConfig::default();
    let robot = Robot::new(sil.robot.clone()).unwrap();
    let start: Vec3 = load_trajectory(None, &robot).unwrap().waypoints()[0].x;
    let emulator = RigEmulator::start(&sil, StepperConfig::default(), start, 250.0).unwrap();
    let mut node = Node::new(RigKind::Robotscara, Some(&emulator));
    node.set("configure");
    node.set("activate");
    node.frames(500);

    emulator.set_sensor_silent(true);
    let silent_at = emulator.stats().t;
    let fault = node.faults.recv_timeout(Duration::from_secs(2)).expect("a fault");
    let Fault::Device(reason) = &fault else { panic!("a device fault, not {fault:?}") };
    assert!(reason.contains("sensor lost"), "{reason}");
    assert_eq!(node.reports.last(), (Level::Error, reason.clone()));
    node.node.fault(&fault).unwrap();
    assert_eq!(node.node.lifecycle().state(), State::Unconfigured);

    // Nothing is commanded while the sensor is away: the motors were stopped at once.
    std::thread::sleep(Duration::from_millis(700));
    let away = emulator.stats();
    assert_eq!(away.last_rates, [0.0; 3]);
    // Where the stopped motors hold the arm.
    let arm = away.position;
    assert!(
        away.last_command_t - silent_at < SENSOR_TIMEOUT_S + 0.2,
        "a step command {} s after the sensor fell silent",
        away.last_command_t - silent_at
    );
    let taken = node.node.request(0, "configure").unwrap();
    assert!(taken.reason.unwrap().contains("no reading"), "configure checks the sensor");
    assert_eq!(node.reports.last().0, Level::Error);

    // The sensor is back: configure and activate resume from where the arm is.
    emulator.set_sensor_silent(false);
    node.frames_for(0.1);
    node.set("configure");
    node.set("activate");
    let resumed = node.frames(500);
    // The first reading puts it within two quanta of the sensor (2.3 mm each).
    assert!((resumed[0].x_ref - arm).norm() < 5e-3, "resumed at {} with the arm at {arm}", resumed[0].x_ref);
    assert_eq!(largest_reference_step(&resumed), 0.0, "the arm holds until it is given a trajectory");
    assert_eq!(node.faults.try_recv().ok(), None, "no fault after resuming");
    node.set("shutdown");
    assert_eq!(emulator.stop().last_rates, [0.0; 3]);
}

#[test]
fn a_protective_stop_leaves_the_node_inactive_with_the_bound_on_its_status_and_the_rig_open() {
    use arm_hil::hil::protection::ProtectionConfig;
    // A tracking bound below what the loop achieves: the first cycles trip it.
    let protection = ProtectionConfig { max_tracking_error_m: 1e-6, ..ProtectionConfig::default() };
    let hil = HilConfig { realtime_priority: None, protection, ..HilConfig::default() };
    let mut node = Node::with_loop(RigKind::Sim, None, hil);
    node.set("configure");
    node.set("activate");
    let fault = node.faults.recv_timeout(Duration::from_secs(5)).expect("a protective stop");
    let Fault::ProtectiveStop(reason) = &fault else { panic!("a protective stop, not {fault:?}") };
    assert!(reason.contains("tracking_error"), "{reason}");
    let taken = node.node.fault(&fault).unwrap();
    assert!(taken.reason.unwrap().contains("tracking_error"));
    assert_eq!(node.node.lifecycle().state(), State::Inactive);
    let (level, status) = node.reports.last();
    assert_eq!(level, Level::Error);
    assert!(status.starts_with("inactive: protective stop") && status.contains("tracking_error"), "{status}");
    // The rig stayed open: a person can activate again at once.
    node.set("activate");
    assert_eq!(node.node.lifecycle().state(), State::Active);
    node.set("shutdown");
}
