//! The HIL building blocks: the ring buffer, the rig's line protocols, the torque-to-step
//! mapping, and the loop against the simulated plant.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Waypoint;
use arm_hil::hil::stepper::{FieldTracker, StepRates, StepperConfig, StepperDrive};
use arm_hil::hil::{
    FeedItem, FrameChannel, HilConfig, HilError, HilLoop, RingError, RingSample, SimulatedRig, TrajectoryRing,
    Withdrawals,
};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::protocol::rig::{
    encode_sensor_line, encode_step_command, parse_sensor_line, parse_step_command, parse_trajectory_line, LineError,
    LineSplitter, SensorLine,
};
use arm_hil::sim::SilConfig;
use proptest::prelude::*;

fn sample(t: f64, x: f64) -> Waypoint {
    Waypoint { t, x: Vec3::new(x, 0.0, 0.0), xd: Vec3::new(2.0 * x, 0.0, 0.0), ..Waypoint::default() }
}

#[test]
fn the_ring_interpolates_linearly_and_drops_what_is_behind() {
    let mut ring = TrajectoryRing::new(4, 2);
    for k in 0..4 {
        ring.push(sample(k as f64, k as f64 * 10.0)).unwrap();
    }
    assert_eq!(ring.push(sample(4.0, 40.0)), Err(RingError::Full(4)));
    let RingSample::Reference(reference) = ring.sample(1.25) else { panic!("a reference") };
    assert_eq!(reference.x.x, 12.5);
    assert_eq!(reference.xd.x, 25.0);
    // The sample before 1.25 is kept for interpolation; the one before that is gone.
    assert_eq!(ring.len(), 3);
    assert_eq!(ring.free(), 1);
}

#[test]
fn the_ring_wraps_while_segments_are_appended_and_signals_low_water() {
    let mut ring = TrajectoryRing::new(3, 2);
    let mut next = 0;
    let mut low_seen = 0;
    for step in 0..40 {
        while ring.free() > 0 && next < 30 {
            ring.push(sample(next as f64, next as f64)).unwrap();
            next += 1;
        }
        if next == 30 {
            ring.close();
        }
        let t = step as f64 * 0.75;
        match ring.sample(t) {
            RingSample::Reference(reference) => assert!((reference.x.x - t).abs() < 1e-12, "at {t}: {reference:?}"),
            RingSample::Ended => {
                assert!(t > 29.0);
                return assert!(low_seen == 0, "a closed ring is never low");
            }
            other => panic!("at {t}: {other:?}"),
        }
        low_seen += usize::from(ring.is_low());
    }
    panic!("the ring never ended");
}

#[test]
fn a_ring_that_runs_dry_holds_the_last_sample_until_closed() {
    let mut ring = TrajectoryRing::new(8, 4);
    assert_eq!(ring.sample(0.0), RingSample::Empty);
    ring.push(sample(0.0, 1.0)).unwrap();
    ring.push(sample(1.0, 2.0)).unwrap();
    assert!(ring.is_low());
    let RingSample::Starved(held) = ring.sample(5.0) else { panic!("starved") };
    assert_eq!((held.x.x, held.xd.x), (2.0, 0.0));
    assert_eq!(ring.push(sample(0.5, 0.0)), Err(RingError::TimeNotIncreasing { t: 0.5, previous_t: 1.0 }));
    assert_eq!(
        ring.push(Waypoint { t: 2.0, x: Vec3::new(f64::NAN, 0.0, 0.0), ..Waypoint::default() }),
        Err(RingError::NonFinite { t: 2.0 })
    );
    ring.close();
    assert_eq!(ring.sample(5.0), RingSample::Ended);
}

fn reference_x(ring: &mut TrajectoryRing, t: f64) -> f64 {
    match ring.sample(t) {
        RingSample::Reference(reference) | RingSample::Starved(reference) => reference.x.x,
        other => panic!("at {t}: {other:?}"),
    }
}

#[test]
fn a_segment_begun_before_the_last_sample_follows_it() {
    let mut ring = TrajectoryRing::new(8, 0);
    ring.push(sample(0.0, 1.0)).unwrap();
    ring.push(sample(2.0, 2.0)).unwrap();
    ring.begin_segment(0.5).unwrap();
    ring.push(sample(1.0, 3.0)).unwrap();
    assert_eq!(reference_x(&mut ring, 2.5), 2.5);
    assert_eq!(reference_x(&mut ring, 3.0), 3.0);
}

#[test]
fn a_segment_begun_after_the_last_sample_starts_from_rest_now_not_in_the_past() {
    let mut ring = TrajectoryRing::new(8, 0);
    ring.push(sample(0.0, 1.0)).unwrap();
    ring.push(sample(1.0, 2.0)).unwrap();
    assert!(matches!(ring.sample(5.0), RingSample::Starved(_)));
    ring.begin_segment(5.0).unwrap();
    ring.push(sample(1.0, 3.0)).unwrap();
    assert_eq!(reference_x(&mut ring, 5.0), 2.0, "holds where it was until the segment starts");
    assert_eq!(reference_x(&mut ring, 5.5), 2.5);
    assert_eq!(reference_x(&mut ring, 6.0), 3.0);
}

#[test]
fn withdrawing_holds_the_present_reference_and_drops_the_rest() {
    let mut ring = TrajectoryRing::new(8, 0);
    for (t, x) in [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 3.0)] {
        ring.push(sample(t, x)).unwrap();
    }
    assert_eq!(reference_x(&mut ring, 1.5), 1.5);
    ring.withdraw(1.5);
    let RingSample::Starved(held) = ring.sample(2.5) else { panic!("holds, waiting for more") };
    assert_eq!((held.x.x, held.xd.x), (1.5, 0.0));
    ring.push(sample(1.0, 3.5)).unwrap();
    assert_eq!(reference_x(&mut ring, 2.5), 3.5, "the next samples count from the withdrawal");
}

#[test]
fn replacing_goes_on_from_the_present_reference_as_it_moves_and_drops_the_rest() {
    let mut ring = TrajectoryRing::new(8, 0);
    let moving =
        |t: f64, x: f64| Waypoint { t, x: Vec3::new(x, 0.0, 0.0), xd: Vec3::new(1.0, 0.0, 0.0), ..Waypoint::default() };
    for t in [0.0, 1.0, 2.0, 3.0] {
        ring.push(moving(t, t)).unwrap();
    }
    assert_eq!(ring.replace_from(1.5, 0.0), Some(Vec3::new(1.5, 0.0, 0.0)));
    // Nothing after it yet: where, and how fast, the loop's reference was at 1.5.
    let RingSample::Starved(held) = ring.sample(1.5) else { panic!("waits for the next move") };
    assert_eq!(held.x.x, 1.5);
    ring.push(moving(0.5, 2.5)).unwrap();
    let RingSample::Reference(going) = ring.sample(1.75) else { panic!("a reference") };
    assert_eq!((going.x.x, going.xd.x), (2.0, 1.0), "goes on at its speed, the next samples counted from 1.5");
    // A replacement due 0.2 s before it came: its samples count from then, those it has
    // passed are dropped.
    assert_eq!(ring.replace_from(1.75, 0.2), Some(Vec3::new(2.0, 0.0, 0.0)));
    ring.push(moving(0.1, 2.9)).unwrap();
    ring.push(moving(0.5, 2.5)).unwrap();
    let RingSample::Reference(joined) = ring.sample(1.95) else { panic!("a reference") };
    // From where it was at 1.75 to the sample at 0.5 s of the move (2.05) on the ring's line.
    assert!((joined.x.x - (2.0 + 0.5 * 0.2 / 0.3)).abs() < 1e-12, "its sample at 0.1 s dropped: {}", joined.x.x);
    ring.close();
    assert_eq!(ring.replace_from(2.0, 0.0), None, "a closed trajectory takes no more: replacing ends it");
    assert_eq!(ring.sample(2.0), RingSample::Ended);
}

#[test]
fn a_withdrawal_continues_only_when_the_newest_asked_for_is_continuing() {
    let withdrawals = Withdrawals::default();
    let first = withdrawals.request_continuing(42);
    assert_eq!(withdrawals.continues(first), Some(42), "with when the move after it starts");
    let second = withdrawals.request();
    assert_eq!(withdrawals.pending(), Some(second));
    assert_eq!(withdrawals.continues(second), None, "a hold after a stream's move holds");
}

#[test]
fn withdrawing_a_closed_trajectory_ends_it() {
    let mut ring = TrajectoryRing::new(8, 0);
    ring.push(sample(0.0, 0.0)).unwrap();
    ring.push(sample(1.0, 1.0)).unwrap();
    ring.close();
    ring.withdraw(0.5);
    assert_eq!(ring.sample(0.5), RingSample::Ended);
}

#[test]
fn trajectory_lines_are_parsed_or_refused_with_a_reason() {
    let line = "P,0.5,0.1,0.2,0.3,0,0,0,0,0,-1";
    let waypoint = parse_trajectory_line(line).unwrap();
    assert_eq!((waypoint.t, waypoint.x, waypoint.xdd.z), (0.5, Vec3::new(0.1, 0.2, 0.3), -1.0));
    assert_eq!(parse_trajectory_line("Q,0,0,0,0,0,0,0,0,0,0"), Err(LineError::Tag { expected: "P" }));
    assert_eq!(parse_trajectory_line("P,0,0,0"), Err(LineError::FieldCount { expected: 11, found: 4 }));
    assert_eq!(
        parse_trajectory_line("P,0,0,x,0,0,0,0,0,0,0"),
        Err(LineError::NotANumber { index: 3, text: "x".into() })
    );
    assert_eq!(
        parse_trajectory_line("P,0,0,inf,0,0,0,0,0,0,0"),
        Err(LineError::NotANumber { index: 3, text: "inf".into() })
    );
}

#[test]
fn sensor_and_step_lines_round_trip() {
    let sample = SensorLine { t: 1.5, r: 0.45, theta: 1.2, phi: -2.5 };
    let mut bytes = Vec::new();
    encode_sensor_line(&sample, &mut bytes);
    assert_eq!(bytes, b"1.500000,0.450000,1.200000,-2.500000\n");
    assert_eq!(parse_sensor_line("1.5,0.45,1.2,-2.5").unwrap(), sample);

    let mut bytes = Vec::new();
    encode_step_command(&StepRates([1234.56, -62500.0, -0.04]), &mut bytes);
    // |f| with one decimal; bit i set when f_i < 0 (a rate that rounds to zero has no direction).
    assert_eq!(bytes, b"F,1234.6,62500.0,0.0,2\n");
    assert_eq!(parse_step_command("F,1234.6,62500.0,0.0,2").unwrap(), StepRates([1234.6, -62500.0, 0.0]));
    assert_eq!(parse_step_command("F,1,2,3,9"), Err(LineError::DirectionBits { text: "9".into() }));
}

#[test]
fn the_line_splitter_resynchronises_after_overlong_lines() {
    let mut splitter = LineSplitter::new(16);
    let mut lines = Vec::new();
    splitter.push(b"1,2,3,4\r\nthis line is far too long to keep\n5,6,", |line| lines.push(line.to_owned()));
    splitter.push(b"7,8\n\xff\xfe\n", |line| lines.push(line.to_owned()));
    assert_eq!(lines, vec!["1,2,3,4", "5,6,7,8"]);
    assert!(splitter.dropped_bytes() > 30);
}

#[test]
fn torque_maps_to_the_lag_that_produces_it() {
    let config = StepperConfig::default();
    let safe = config.safe_torque();
    assert!((safe - Vec3::new(3.608, 3.608, 72.16)).amax() < 1e-9);
    let lag = config.lag_setpoint(&Vec3::new(safe.x / 2.0, -2.0 * safe.y, 0.0));
    assert!((lag - Vec3::new(std::f64::consts::FRAC_PI_6, -std::f64::consts::FRAC_PI_2, 0.0)).amax() < 1e-12);
}

#[test]
fn the_lag_loop_steps_toward_the_lag_and_respects_the_rate_limit() {
    let config = StepperConfig::default();
    let theta = Vec3::new(0.1, -0.2, 0.3);
    let aligned = config.holding_field_angle(&theta, &Vec3::zeros());
    let mut drive = StepperDrive::new(config.clone());
    let tau = config.safe_torque().component_mul(&Vec3::new(0.5, -0.5, 0.0));
    let first = drive.update(&tau, &theta, &Vec3::zeros(), &aligned, 1e-3);
    // Positive torque steps forward, negative backward, zero torque at zero lag holds still.
    assert!(first.0[0] > 0.0 && first.0[1] < 0.0 && first.0[2] == 0.0, "{first:?}");
    let huge = drive.update(&(tau * 1e6), &(theta * 10.0), &Vec3::zeros(), &aligned, 1e-3);
    assert!(huge.0.iter().all(|f| f.abs() <= config.max_rate));
    // With the rotor held, the field's lag converges to the setpoint.
    let mut drive = StepperDrive::new(config.clone());
    let mut field = FieldTracker::new(aligned, 0.0);
    for k in 0..3000 {
        let t = k as f64 * 1e-3;
        let rates = drive.update(&tau, &theta, &Vec3::zeros(), &field.angle_at(t), 1e-3);
        field.set_rates(t, &rates, &config);
    }
    let lag = config.electrical_lag(&field.angle_at(3.0), &theta);
    assert!((lag - config.lag_setpoint(&tau)).amax() < 0.05, "{lag}");
}

#[test]
fn the_loop_tracks_the_default_arc_on_the_simulated_plant() {
    let robot = Robot::default();
    let config = SilConfig::default();
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -148.0], ..ArcSpec::default() };
    let waypoints = spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let rig = SimulatedRig::new(robot.clone(), &config, &waypoints[0], robot.elbow()).unwrap();
    let (feed, samples) = sync_channel(64);
    let feeder = std::thread::spawn(move || {
        for waypoint in waypoints {
            feed.send(FeedItem::Sample(waypoint)).unwrap();
        }
        feed.send(FeedItem::End).unwrap();
    });
    let hil_config = HilConfig { realtime_priority: None, ..HilConfig::default() };
    let stop = Arc::new(AtomicBool::new(false));
    let hil = HilLoop::new(hil_config, &config, robot.elbow(), 0.45, Box::new(rig), samples, stop).unwrap();
    let report = hil.run();
    feeder.join().unwrap();
    report.outcome.unwrap();
    assert!(report.stats.cycles > 800);
    assert!(report.stats.error_from_truth);
    assert!(report.stats.rms_error_m() < 2e-3, "RMS {} m", report.stats.rms_error_m());
}

/// A loop on the simulated rig, fed the arc from (65, -150) degrees to `to_deg` with its end still
/// to come: the arc's waypoints, the feed, the loop's frames and withdrawals, and its thread.
struct FedLoop {
    waypoints: Vec<Waypoint>,
    feed: std::sync::mpsc::SyncSender<FeedItem>,
    frames: std::sync::mpsc::Receiver<arm_hil::hil::TakenFrame>,
    withdrawals: Arc<Withdrawals>,
    running: std::thread::JoinHandle<arm_hil::hil::HilReport>,
}

fn loop_fed_an_arc(to_deg: [f64; 2]) -> FedLoop {
    let robot = Robot::default();
    let config = SilConfig::default();
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg, ..ArcSpec::default() };
    let waypoints = spec.waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let rig = SimulatedRig::new(robot.clone(), &config, &waypoints[0], robot.elbow()).unwrap();
    let (feed, samples) = sync_channel(waypoints.len() + 8);
    let (frames_tx, frames) = sync_channel(20_000);
    let withdrawals = Arc::new(Withdrawals::default());
    let hil_config = HilConfig { realtime_priority: None, ..HilConfig::default() };
    let stop = Arc::new(AtomicBool::new(false));
    let hil = HilLoop::new(hil_config, &config, robot.elbow(), 0.45, Box::new(rig), samples, stop)
        .unwrap()
        .with_frames(Box::new(FrameChannel::new(frames_tx, 1)))
        .with_withdrawals(withdrawals.clone());
    for &waypoint in &waypoints {
        feed.send(FeedItem::Sample(waypoint)).unwrap();
    }
    let running = std::thread::spawn(move || hil.run());
    FedLoop { waypoints, feed, frames, withdrawals, running }
}

#[test]
fn a_withdrawal_holds_the_arm_where_it_is_and_a_later_segment_starts_from_there_without_a_jump() {
    let FedLoop { waypoints, feed, frames, withdrawals, running } = loop_fed_an_arc([65.0, -148.0]);
    let start = waypoints[0].t;

    let next = || frames.recv_timeout(std::time::Duration::from_secs(2)).expect("a frame").frame;
    while next().t < start + 0.3 {}
    let n = withdrawals.request();
    feed.send(FeedItem::Withdrawn(n)).unwrap();
    let (withdrawn_at, hold) = loop {
        let frame = next();
        if let Some(at) = withdrawals.done_at(n) {
            if frame.t >= at {
                break (at, frame.x_ref);
            }
        }
    };
    assert!(withdrawn_at < waypoints.last().unwrap().t, "withdrawn mid-run");
    let mut held = next();
    while held.t < withdrawn_at + 0.3 {
        assert_eq!(held.x_ref, hold, "holds after the withdrawal at {withdrawn_at} s (at {} s)", held.t);
        held = next();
    }

    let goal = hold + Vec3::new(0.002, 0.0, 0.0);
    feed.send(FeedItem::Segment).unwrap();
    feed.send(FeedItem::Sample(Waypoint { t: 0.2, x: goal, ..Waypoint::default() })).unwrap();
    feed.send(FeedItem::End).unwrap();
    let mut previous = held;
    // The segment's speed [m/s]: no step larger than it allows over the loop time between frames
    // (a loaded machine skips periods, which is no jump).
    let speed = 0.002 / 0.2;
    for frame in frames.iter().map(|taken| taken.frame) {
        let step = (frame.x_ref - previous.x_ref).norm();
        let largest_step = speed * (frame.t - previous.t) * 1.01 + 1e-12;
        assert!(step <= largest_step, "the reference jumped {step} m at {} s", frame.t);
        previous = frame;
    }
    assert!((previous.x_ref - goal).norm() < 1e-9, "ends at the segment's last sample");
    let report = running.join().unwrap();
    report.outcome.unwrap();
}

#[test]
fn a_continuing_withdrawal_plays_on_until_the_next_move_comes_and_it_takes_over_without_a_stop() {
    let FedLoop { waypoints, feed, frames, withdrawals, running } = loop_fed_an_arc([65.0, -140.0]);
    let start = waypoints[0].t;

    let next = || frames.recv_timeout(std::time::Duration::from_secs(2)).expect("a frame").frame;
    while next().t < start + 1.0 {}
    let n = withdrawals.request_continuing(arm_hil::hil::realtime::monotonic_ns());
    let withdrawn_at = loop {
        if let (Some(at), frame) = (withdrawals.done_at(n), next()) {
            if frame.t >= at {
                break at;
            }
        }
    };
    // Made, and the move it withdraws still plays: the loop's reference moves on until the next comes.
    let mut previous = next();
    while previous.t < withdrawn_at + 0.1 {
        let frame = next();
        assert_ne!(frame.x_ref, previous.x_ref, "the reference stopped at {} s, before the next move came", frame.t);
        previous = frame;
    }
    // The next move, from its mark on: 1 mm off where the loop's reference is, 0.1 s on.
    let goal = previous.x_ref + Vec3::new(0.001, 0.0, 0.0);
    feed.send(FeedItem::Withdrawn(n)).unwrap();
    feed.send(FeedItem::Sample(Waypoint { t: 0.1, x: goal, ..Waypoint::default() })).unwrap();
    feed.send(FeedItem::End).unwrap();
    // It takes over from where the loop's reference is: no step larger than the way to the goal over
    // 0.1 s allows (the arc moves the loop's reference some 2 mm a second meanwhile).
    for frame in frames.iter().map(|taken| taken.frame) {
        let step = (frame.x_ref - previous.x_ref).norm();
        let largest_step = (0.001 + 0.01) / 0.1 * (frame.t - previous.t) + 1e-9;
        assert!(step <= largest_step, "the reference jumped {step} m at {} s", frame.t);
        previous = frame;
    }
    assert!((previous.x_ref - goal).norm() < 1e-9, "ends at the next move's last sample");
    running.join().unwrap().outcome.unwrap();
}

/// Where the loops below start: the arm at rest at (0.15, 0, 0.2) m.
fn at_rest() -> Waypoint {
    Waypoint { x: Vec3::new(0.15, 0.0, 0.2), ..Waypoint::default() }
}

/// A loop with `hil` on the simulated rig at rest [`at_rest`], fed from `samples`, stopped by `stop`.
fn loop_on_the_simulated_rig(hil: HilConfig, samples: Receiver<FeedItem>, stop: Arc<AtomicBool>) -> HilLoop {
    let (robot, config) = (Robot::default(), SilConfig::default());
    let rig = SimulatedRig::new(robot.clone(), &config, &at_rest(), robot.elbow()).unwrap();
    HilLoop::new(
        HilConfig { realtime_priority: None, ..hil },
        &config,
        robot.elbow(),
        0.45,
        Box::new(rig),
        samples,
        stop,
    )
    .unwrap()
}

#[test]
fn a_loop_that_gets_no_trajectory_stops_safely_with_a_reason() {
    let (feed, samples) = sync_channel(1);
    drop(feed);
    let hil = HilConfig { startup_timeout_s: 0.05, ..HilConfig::default() };
    let report = loop_on_the_simulated_rig(hil, samples, Arc::new(AtomicBool::new(false))).run();
    assert!(matches!(report.outcome, Err(HilError::NoTrajectory(_))));
}

#[test]
fn a_loop_whose_feeder_sends_nothing_gives_up_at_its_start_up_timeout() {
    // The feeder stays connected: the loop's own timeout ends the wait.
    let (_feed, samples) = sync_channel::<FeedItem>(1);
    let hil = HilConfig { startup_timeout_s: 0.05, ..HilConfig::default() };
    let waited = std::time::Instant::now();
    let report = loop_on_the_simulated_rig(hil, samples, Arc::new(AtomicBool::new(false))).run();
    assert!(matches!(report.outcome, Err(HilError::NoTrajectory(_))), "{:?}", report.outcome);
    assert!(waited.elapsed() >= std::time::Duration::from_millis(50), "it waited out its timeout");
    assert_eq!(report.stats.cycles, 0);
}

// A cycle writes the rig's torque; without one, the rig gets only the stop that ends every run.
#[test]
fn a_loop_stopped_before_it_took_its_queued_first_sample_never_drives_the_rig() {
    let (feed, samples) = sync_channel(2);
    feed.send(FeedItem::Sample(at_rest())).unwrap();
    let report = loop_on_the_simulated_rig(HilConfig::default(), samples, Arc::new(AtomicBool::new(true))).run();
    assert!(report.outcome.is_ok(), "a stop asked for is no fault: {:?}", report.outcome);
    assert_eq!(report.stats.cycles, 0, "no cycle ran after the stop");
}

#[test]
fn a_resumed_loop_stopped_before_its_first_cycle_never_drives_the_rig() {
    let (_feed, samples) = sync_channel::<FeedItem>(1);
    let hil = loop_on_the_simulated_rig(HilConfig::default(), samples, Arc::new(AtomicBool::new(true)));
    let report = hil.starting_where_the_arm_is().run();
    assert!(report.outcome.is_ok(), "a stop asked for is no fault: {:?}", report.outcome);
    assert_eq!(report.stats.cycles, 0, "no cycle ran after the stop");
}

#[test]
fn a_loop_asked_to_stop_while_it_waits_for_its_first_sample_ends_at_once_and_cleanly() {
    // A feeder that is there but sends nothing, for longer than the test waits.
    let (_feed, samples) = sync_channel::<FeedItem>(1);
    let stop = Arc::new(AtomicBool::new(false));
    let hil = HilConfig { startup_timeout_s: 60.0, ..HilConfig::default() };
    let hil = loop_on_the_simulated_rig(hil, samples, stop.clone());
    let (reports, report) = sync_channel(1);
    std::thread::spawn(move || {
        let _ = reports.send(hil.run());
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::Release);
    let report =
        report.recv_timeout(std::time::Duration::from_secs(10)).expect("the loop waited on for its first sample");
    assert!(report.outcome.is_ok(), "a stop asked for is no fault: {:?}", report.outcome);
    assert_eq!(report.stats.cycles, 0);
}

proptest! {
    #[test]
    fn the_line_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut splitter = LineSplitter::new(64);
        splitter.push(&bytes, |line| {
            let _ = parse_sensor_line(line);
            let _ = parse_step_command(line);
            let _ = parse_trajectory_line(line);
        });
    }
}

/// The sensor's reading of the forearm's end at `point`, its range `extra_range_m` longer.
fn reading_of(robot: &Robot, point: Vec3, extra_range_m: f64) -> arm_hil::control::SphericalReading {
    let arm = point - robot.elbow();
    arm_hil::control::SphericalReading {
        r: arm.norm() + extra_range_m,
        theta: (arm.z / arm.norm()).acos(),
        phi: arm.y.atan2(arm.x),
    }
}

/// A sensor whose readings walk from the arc's start out of the arm's reach, a millimetre a
/// reading (each within the readings' gate), whatever the loop commands: what a drifting or
/// miscalibrated sensor sends. Below the `Hardware` boundary the loop owns nothing of it.
struct WalkingSensor {
    robot: Robot,
    from: Vec3,
    readings: u32,
}

impl arm_hil::hil::Hardware for WalkingSensor {
    fn read(
        &mut self,
        _now: f64,
        _period: f64,
        input: &mut arm_hil::hil::SensorInput,
    ) -> Result<(), arm_hil::hil::HardwareError> {
        self.readings += 1;
        let point = self.from + Vec3::new(0.0, 0.0, 0.001 * f64::from(self.readings));
        input.reading = Some(reading_of(&self.robot, point, 0.0));
        Ok(())
    }

    fn write(
        &mut self,
        _now: f64,
        _period: f64,
        _command: &arm_hil::hil::ActuatorCommand,
    ) -> Result<(), arm_hil::hil::HardwareError> {
        Ok(())
    }

    fn stop(&mut self) {}
}

/// The protective stop with its pose and tracking bounds set aside: an estimate that the inverse
/// kinematics cannot place stops the loop itself, naming why, instead of the controller going on
/// with the last motion it had and the bounds checking that stale motion.
#[test]
fn an_estimate_out_of_reach_is_a_protective_stop_not_a_stale_motion() {
    use arm_hil::hil::protection::{Bound, ProtectionConfig};
    let robot = Robot::default();
    let config = SilConfig::default();
    let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0];
    assert_eq!(robot.params().l_arm, 0.45, "the sensor's range is the forearm's");
    let sensor = WalkingSensor { robot: robot.clone(), from: start.x, readings: 0 };
    let (feed, samples) = sync_channel(64);
    feed.send(FeedItem::Sample(start)).unwrap();
    feed.send(FeedItem::Sample(Waypoint { t: 60.0, ..start })).unwrap();
    feed.send(FeedItem::End).unwrap();
    let protection = ProtectionConfig {
        max_tracking_error_m: 10.0,
        min_reach_margin_rad: 0.0,
        min_assembly_height_m: 0.0,
        stopping_deceleration_m_s2: 1e9,
        ..ProtectionConfig::default()
    };
    let hil_config = HilConfig { realtime_priority: None, protection, ..HilConfig::default() };
    let stop = Arc::new(AtomicBool::new(false));
    let report = HilLoop::new(hil_config, &config, robot.elbow(), 0.45, Box::new(sensor), samples, stop).unwrap().run();
    match report.outcome {
        Err(HilError::ProtectiveStop { trip, .. }) => {
            assert_eq!(trip.bound, Bound::EstimateOutOfReach, "{trip}");
            assert_eq!(report.stats.ik_fallbacks, 1, "no cycle went on with a stale motion");
        }
        other => panic!("an estimate out of reach, not {other:?}"),
    }
}

/// A sensor that gives one true reading of the arm at rest, then, every `every` cycles, one whose
/// range is 5 cm longer than the forearm, `refused` of them, then nothing: what a garbling or a
/// torn line before a pulled cable sends.
struct ImplausibleSensor {
    robot: Robot,
    at: Vec3,
    every: u32,
    refused: u32,
    cycles: u32,
}

impl arm_hil::hil::Hardware for ImplausibleSensor {
    fn read(
        &mut self,
        _now: f64,
        _period: f64,
        input: &mut arm_hil::hil::SensorInput,
    ) -> Result<(), arm_hil::hil::HardwareError> {
        self.cycles += 1;
        let first = self.cycles == 1;
        if first || (self.cycles % self.every == 0 && self.refused > 0) {
            self.refused -= u32::from(!first);
            input.reading = Some(reading_of(&self.robot, self.at, if first { 0.0 } else { 0.05 }));
        }
        Ok(())
    }

    fn write(
        &mut self,
        _now: f64,
        _period: f64,
        _command: &arm_hil::hil::ActuatorCommand,
    ) -> Result<(), arm_hil::hil::HardwareError> {
        Ok(())
    }

    fn stop(&mut self) {}
}

/// The loop holding the arc's start for a minute against an [`ImplausibleSensor`] of `every` and
/// `refused`, with `hil`'s settings: how it ended.
fn run_against(every: u32, refused: u32, hil: HilConfig) -> Result<(), HilError> {
    let robot = Robot::default();
    let config = SilConfig::default();
    let start = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap()[0];
    let sensor = ImplausibleSensor { robot: robot.clone(), at: start.x, every, refused, cycles: 0 };
    let (feed, samples) = sync_channel(64);
    feed.send(FeedItem::Sample(start)).unwrap();
    feed.send(FeedItem::Sample(Waypoint { t: 60.0, ..start })).unwrap();
    feed.send(FeedItem::End).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    HilLoop::new(hil, &config, robot.elbow(), 0.45, Box::new(sensor), samples, stop).unwrap().run().outcome
}

fn without_realtime() -> HilConfig {
    HilConfig { realtime_priority: None, ..HilConfig::default() }
}

#[test]
fn max_rejected_readings_in_a_row_are_a_fault() {
    let hil = HilConfig { sensor_timeout_s: 1.0, ..without_realtime() };
    match run_against(1, u32::MAX, hil) {
        Err(HilError::ImplausibleReadings { count, .. }) => {
            assert_eq!(count, HilConfig::default().max_rejected_readings)
        }
        other => panic!("the refused readings, not {other:?}"),
    }
}

/// The sensor timeout measures time since the last reading taken; when readings came in that
/// time and were all refused, the run ends naming them, not a silent sensor.
#[test]
fn a_timeout_over_refused_readings_names_the_readings_not_silence() {
    match run_against(10, u32::MAX, without_realtime()) {
        Err(HilError::ImplausibleReadings { count, last, .. }) => {
            assert!(count < HilConfig::default().max_rejected_readings, "{count}: the timeout came first");
            assert!(matches!(last, arm_hil::control::ReadingRejected::Range { .. }), "{last}");
        }
        other => panic!("the refused readings, not {other:?}"),
    }
}

/// One torn line, then silence, as a pulled cable leaves it: the sensor is lost.
#[test]
fn one_refused_reading_then_silence_is_a_lost_sensor() {
    match run_against(10, 1, without_realtime()) {
        Err(HilError::SensorLost { .. }) => {}
        other => panic!("a lost sensor, not {other:?}"),
    }
}
